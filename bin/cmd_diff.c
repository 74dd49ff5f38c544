/* cmd_diff.c - diff: the artifacts added, removed and changed from bundle A to bundle B,
 * per type; exit status 0 when there are none, 1 when there are, 2 on an error. */
#include "config.h"

#include <string.h>

#include "tool.h"

/* What on_diff gathers; the lists and counts are by MC_DIFF_* (added, removed, changed). */
struct diff_report {
	int json, quiet;
	cJSON *lists[3];
	struct {
		char type[40];
		size_t n[3];
	} types[64];
	size_t ntypes;
	size_t total[3];
};

static void
on_diff(void *ud, int what, const char *type, const char *key, uint64_t size_a, uint64_t size_b)
{
	static const char mark[] = "+-~";
	struct diff_report *d = ud;
	size_t i;

	for (i = 0; i < d->ntypes && strcmp(d->types[i].type, type) != 0; i++)
		;
	if (i == d->ntypes && d->ntypes < 64)
		snprintf(d->types[d->ntypes++].type, sizeof d->types[0].type, "%s", type);
	if (i < d->ntypes)
		d->types[i].n[what]++;
	d->total[what]++;
	if (d->json) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "type", type);
		cJSON_AddStringToObject(a, "key", key);
		if (what != MC_DIFF_ADDED)
			cJSON_AddNumberToObject(a, "size_a", (double)size_a);
		if (what != MC_DIFF_REMOVED)
			cJSON_AddNumberToObject(a, "size_b", (double)size_b);
		cJSON_AddItemToArray(d->lists[what], a);
	} else if (!d->quiet) {
		say(stdout, "%c %-12s %s", mark[what], type, key);
	}
}

/* diff --json; takes the lists of d. */
static void
diff_json(struct diff_report *d, const char *a, const char *b)
{
	static const char *const names[] = {"added", "removed", "changed"};
	cJSON *j = json_object(), *types;
	size_t i, k;

	cJSON_AddStringToObject(j, "a", a);
	cJSON_AddStringToObject(j, "b", b);
	cJSON_AddBoolToObject(j, "same", d->total[0] + d->total[1] + d->total[2] == 0);
	types = cJSON_AddObjectToObject(j, "types");
	for (i = 0; i < d->ntypes; i++) {
		cJSON *ty = cJSON_AddObjectToObject(types, d->types[i].type);
		for (k = 0; k < 3; k++)
			cJSON_AddNumberToObject(ty, names[k], (double)d->types[i].n[k]);
	}
	for (k = 0; k < 3; k++) {
		cJSON_AddItemToObject(j, names[k], d->lists[k]);
		d->lists[k] = NULL;
	}
	print_json(j);
}

static void
diff_text(const struct diff_report *d)
{
	size_t i;

	for (i = 0; i < d->ntypes; i++)
		say(stdout, "%-12s %zu added, %zu removed, %zu changed", d->types[i].type,
		    d->types[i].n[0], d->types[i].n[1], d->types[i].n[2]);
	say(stdout, "%zu added, %zu removed, %zu changed", d->total[0], d->total[1], d->total[2]);
}

int
cmd_diff(struct tool *t, int argc, char **argv)
{
	struct diff_report d;
	mc_bundle *a = NULL, *b = NULL;
	size_t k;
	int rc;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind + 2 != argc)
		usage_error("diff needs two bundles%s", "");
	if (strcmp(argv[optind], "-") == 0 && strcmp(argv[optind + 1], "-") == 0)
		usage_error("diff: standard input (-) can be only one of the bundles%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&d, 0, sizeof d);
	d.json = t->json;
	d.quiet = t->quiet;
	if ((rc = open_bundle(t, argv[optind], &a)) == MC_OK &&
	    (rc = open_bundle(t, argv[optind + 1], &b)) == MC_OK) {
		for (k = 0; k < 3; k++)
			d.lists[k] = cJSON_CreateArray();
		rc = mc_bundle_diff(a, b, on_diff, &d);
	}
	if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		if (d.json)
			diff_json(&d, argv[optind], argv[optind + 1]);
		else if (!t->quiet)
			diff_text(&d);
		/* As diff(1): 1 when they differ. */
		rc = d.total[0] + d.total[1] + d.total[2] > 0 ? 1 : 0;
	}
	for (k = 0; k < 3; k++)
		cJSON_Delete(d.lists[k]);
	mc_bundle_free(a);
	mc_bundle_free(b);
	return rc;
}
