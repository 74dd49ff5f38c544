/* cmd_diff.c - diff: the artifacts added, removed and changed from bundle A to bundle B,
 * per type, and the facts of the bundles that differ; exit status 0 when nothing does,
 * 1 when something does, 2 on an error. */
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
	cJSON *facts; /* each fact that differs: [its value in A, in B] */
	size_t nfacts;
};

static cJSON *
fact_format(const mc_bundle *b)
{
	return cJSON_CreateNumber(mc_bundle_format_version(b));
}

static cJSON *
fact_version(const mc_bundle *b)
{
	return cJSON_CreateNumber((double)mc_bundle_version(b));
}

static cJSON *
fact_expires(const mc_bundle *b)
{
	return mc_bundle_expires(b) != 0 ? cJSON_CreateNumber((double)mc_bundle_expires(b))
					 : cJSON_CreateNull();
}

static cJSON *
fact_signers(const mc_bundle *b)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(mc_bundle_signature_key_id(b, i)));
	return a;
}

/* The facts of a bundle that diff compares beside its artifacts: those verify and load
 * act on. Its creation time is not one: two packs of the same caches differ in it. */
static const struct fact {
	const char *name;  /* its member of "facts" (--json) */
	const char *words; /* in text */
	cJSON *(*get)(const mc_bundle *b);
	int time;          /* a Unix time, shown in ISO 8601 */
} facts[] = {
	{"format_version", "format version", fact_format, 0},
	{"bundle_version", "bundle version", fact_version, 0},
	{"expires", "expires", fact_expires, 1},
	{"labels", "labels", labels_json, 0},
	{"signers", "signers", fact_signers, 0},
};
#define NFACTS (sizeof facts / sizeof facts[0])

/* A fact's value in text into buf: "none" for none (v NULL), null or an empty list, a
 * time in ISO 8601, a string quoted, a list's strings joined. */
static void
fact_text(const cJSON *v, int time, char *buf, size_t len)
{
	const cJSON *x;
	size_t used;

	if (v == NULL || cJSON_IsNull(v)) {
		snprintf(buf, len, "none");
	} else if (cJSON_IsNumber(v) && time) {
		iso_time((int64_t)v->valuedouble, buf, len);
	} else if (cJSON_IsNumber(v)) {
		snprintf(buf, len, "%.0f", v->valuedouble);
	} else if (cJSON_IsString(v)) {
		snprintf(buf, len, "'%s'", v->valuestring);
	} else {
		snprintf(buf, len, "%s", cJSON_GetArraySize(v) > 0 ? "" : "none");
		cJSON_ArrayForEach(x, v) {
			used = strlen(buf);
			snprintf(buf + used, len - used, "%s%s", used > 0 ? ", " : "",
				 cJSON_IsString(x) ? x->valuestring : "");
		}
	}
}

/* "~ WORDS: A -> B", a line for a fact that differs; x or y NULL: none. */
static void
say_fact(const char *words, const cJSON *x, const cJSON *y, int time)
{
	char a[512], b[512];

	fact_text(x, time, a, sizeof a);
	fact_text(y, time, b, sizeof b);
	say(stdout, "~ %s: %s -> %s", words, a, b);
}

/* The labels that differ, a line each: "~ label KEY: A -> B". */
static void
say_labels(const cJSON *x, const cJSON *y)
{
	const cJSON *l, *other;
	char words[300];

	cJSON_ArrayForEach(l, x) {
		other = cJSON_GetObjectItemCaseSensitive(y, l->string);
		if (other == NULL || !cJSON_Compare(l, other, 1)) {
			snprintf(words, sizeof words, "label %s", l->string);
			say_fact(words, l, other, 0);
		}
	}
	cJSON_ArrayForEach(l, y) {
		if (cJSON_GetObjectItemCaseSensitive(x, l->string) == NULL) {
			snprintf(words, sizeof words, "label %s", l->string);
			say_fact(words, NULL, l, 0);
		}
	}
}

/* Compares the facts of a and b into d->facts, saying each that differs (text). */
static void
diff_facts(struct diff_report *d, mc_bundle *a, mc_bundle *b)
{
	size_t i;

	for (i = 0; i < NFACTS; i++) {
		cJSON *x = facts[i].get(a), *y = facts[i].get(b), *pair;

		if (cJSON_Compare(x, y, 1)) {
			cJSON_Delete(x);
			cJSON_Delete(y);
			continue;
		}
		d->nfacts++;
		if (!d->json && !d->quiet && strcmp(facts[i].name, "labels") == 0)
			say_labels(x, y);
		else if (!d->json && !d->quiet)
			say_fact(facts[i].words, x, y, facts[i].time);
		pair = cJSON_AddArrayToObject(d->facts, facts[i].name);
		cJSON_AddItemToArray(pair, x);
		cJSON_AddItemToArray(pair, y);
	}
}

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
		cJSON *a = cJSON_CreateObject(), *sizes;
		cJSON_AddStringToObject(a, "type", type);
		cJSON_AddStringToObject(a, "key", key);
		/* its size in each bundle, as "bundles" names them; null: not in it */
		sizes = cJSON_AddArrayToObject(a, "sizes");
		cJSON_AddItemToArray(sizes, what != MC_DIFF_ADDED ? cJSON_CreateNumber((double)size_a)
								   : cJSON_CreateNull());
		cJSON_AddItemToArray(sizes, what != MC_DIFF_REMOVED ? cJSON_CreateNumber((double)size_b)
								     : cJSON_CreateNull());
		cJSON_AddItemToArray(d->lists[what], a);
	} else if (!d->quiet) {
		say(stdout, "%c %-12s %s", mark[what], type, key);
	}
}

/* diff --json of the bundles at a and b, ending with status; takes the lists and facts
 * of d. */
static void
diff_json(struct diff_report *d, const char *a, const char *b, int status)
{
	static const char *const names[] = {"added", "removed", "changed"};
	cJSON *j = json_object(), *types, *paths;
	size_t i, k;

	json_status(j, status);
	paths = cJSON_AddArrayToObject(j, "bundles");
	cJSON_AddItemToArray(paths, cJSON_CreateString(a));
	cJSON_AddItemToArray(paths, cJSON_CreateString(b));
	cJSON_AddBoolToObject(j, "same", status == 0);
	cJSON_AddItemToObject(j, "facts", d->facts);
	d->facts = NULL;
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
	if (d->nfacts > 0)
		say(stdout, "%zu bundle fact%s differ%s", d->nfacts, d->nfacts == 1 ? "" : "s",
		    d->nfacts == 1 ? "s" : "");
}

/* diff's help: its lines of the overview (megacache --help), and its own (megacache
 * diff --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help diff_help = {
	.synopsis =
		"  diff A B [--json]\n",
	.summary =
		"        artifacts added, removed and changed from A to B, per type, and the facts\n"
		"        that differ (format and bundle version, expiry, labels, signers); exit\n"
		"        status 0 when the same, 1 when they differ (as diff(1)), 2 on an error\n",
	.usage =
		"usage: megacache diff A B [--json]\n",
	.about =
		"Artifacts added, removed and changed from bundle A to B, and the facts that differ:\n"
		"format and bundle version, expiry, labels, signers (exit 0 same, 1 differ).\n",
	.options =
		"  --json                the differences as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache diff old.mcache new.mcache",
};

int
cmd_diff(struct tool *t, int argc, char **argv)
{
	struct diff_report d;
	mc_bundle *a = NULL, *b = NULL;
	size_t k;
	int rc;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind + 2 != argc)
		usage_say("diff needs two bundles");
	if (strcmp(argv[optind], "-") == 0 && strcmp(argv[optind + 1], "-") == 0)
		usage_say("diff: standard input (-) can be only one of the bundles");
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&d, 0, sizeof d);
	d.json = t->json;
	d.quiet = t->quiet;
	d.facts = cJSON_CreateObject();
	if ((rc = open_bundle(t, argv[optind], &a)) == MC_OK &&
	    (rc = open_bundle(t, argv[optind + 1], &b)) == MC_OK) {
		for (k = 0; k < 3; k++)
			d.lists[k] = cJSON_CreateArray();
		if ((rc = mc_bundle_diff(a, b, on_diff, &d)) == MC_OK)
			diff_facts(&d, a, b);
	}
	if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		/* As diff(1): 1 when they differ. */
		rc = d.total[0] + d.total[1] + d.total[2] + d.nfacts > 0 ? 1 : 0;
		if (d.json)
			diff_json(&d, argv[optind], argv[optind + 1], rc);
		else if (!t->quiet)
			diff_text(&d);
	}
	for (k = 0; k < 3; k++)
		cJSON_Delete(d.lists[k]);
	cJSON_Delete(d.facts);
	mc_bundle_free(a);
	mc_bundle_free(b);
	return rc;
}
