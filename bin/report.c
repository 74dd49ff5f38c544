/* report.c - what the commands tell of a bundle read: its signatures' states and its
 * facts; and what load, list --explain and export tell of each artifact they handle:
 * sums per type, and a line or a JSON object per artifact where asked. */
#include "config.h"

#include <string.h>

#include "tool.h"

/* What a signature's state is called in text, for people. */
static const char *
state_text(int state, int checked)
{
	switch (state) {
	case MC_SIG_VERIFIED: return "verified";
	case MC_SIG_BROKEN: return "broken: it does not verify under the trusted key";
	default: return checked ? "not checked: key not trusted" : "not checked: no key given";
	}
}

cJSON *
signatures_json(mc_bundle *b)
{
	cJSON *a = cJSON_CreateArray(), *s;
	size_t i;

	for (i = 0; i < mc_bundle_signature_count(b); i++) {
		s = cJSON_CreateObject();
		cJSON_AddStringToObject(s, "key_id", mc_bundle_signature_key_id(b, i));
		cJSON_AddStringToObject(s, "state", mc_sig_state_name(mc_bundle_signature_state(b, i)));
		cJSON_AddItemToArray(a, s);
	}
	return a;
}

cJSON *
labels_json(const mc_bundle *b)
{
	cJSON *o = cJSON_CreateObject();
	const char *k, *v;
	size_t i;

	for (i = 0; i < mc_bundle_label_count(b); i++)
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			cJSON_AddStringToObject(o, k, v);
	return o;
}

void
bundle_facts_json(cJSON *j, mc_bundle *b)
{
	cJSON_AddNumberToObject(j, "format_version", mc_bundle_format_version(b));
	cJSON_AddNumberToObject(j, "bundle_version", (double)mc_bundle_version(b));
	cJSON_AddNumberToObject(j, "created", (double)mc_bundle_created(b));
	if (mc_bundle_expires(b) != 0)
		cJSON_AddNumberToObject(j, "expires", (double)mc_bundle_expires(b));
	cJSON_AddItemToObject(j, "labels", labels_json(b));
	cJSON_AddItemToObject(j, "signatures", signatures_json(b));
	cJSON_AddNumberToObject(j, "artifact_count", (double)mc_bundle_artifact_count(b));
}

void
say_signatures(FILE *f, mc_bundle *b, const char *prefix, int checked)
{
	size_t i;

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		say(f, "%ssignature by key %s: %s", prefix, mc_bundle_signature_key_id(b, i),
		    state_text(mc_bundle_signature_state(b, i), checked));
}

int
fail_signed(struct tool *t, mc_bundle *b, int rc)
{
	int status = fail(t->ctx, rc);

	if (b == NULL || mc_bundle_signature_count(b) == 0 ||
	    (rc != MC_ERR_NO_SIGNATURE && rc != MC_ERR_BAD_SIGNATURE && rc != MC_ERR_THRESHOLD))
		return status;
	if (t->json)
		json_fail_add("signatures", signatures_json(b));
	else if (!t->quiet)
		say_signatures(stderr, b, "  ", 1);
	return status;
}

/* Counts the artifact in its type's sum (the first 64 types) and in the totals. */
static void
count_artifact(struct load_report *r, int what, const char *type, uint64_t size)
{
	size_t i;

	for (i = 0; i < r->nsums && strcmp(r->sums[i].type, type) != 0; i++)
		;
	if (i == r->nsums && r->nsums < 64) {
		snprintf(r->sums[i].type, sizeof r->sums[i].type, "%s", type);
		r->nsums++;
	}
	if (what == MC_LOAD_SKIPPED) { /* written nowhere */
		if (i < r->nsums)
			r->sums[i].skipped++;
		r->skipped++;
		return;
	}
	if (i < r->nsums) {
		if (what == MC_LOAD_UNCHANGED)
			r->sums[i].unchanged++;
		else {
			r->sums[i].count++;
			r->sums[i].bytes += size;
			r->sums[i].replaced += what == MC_LOAD_REPLACED || what == MC_LOAD_WOULD_REPLACE;
		}
	}
	if (what == MC_LOAD_UNCHANGED)
		r->unchanged++;
	else
		r->bytes += size;
	if (what == MC_LOAD_INSTALLED)
		r->installed++;
	else if (what == MC_LOAD_REPLACED)
		r->replaced++;
	else if (what == MC_LOAD_WOULD_REPLACE)
		r->planned_replace++;
	else if (what != MC_LOAD_UNCHANGED)
		r->planned++;
}

/* What a load does with an artifact (MC_LOAD_*, their values as index): the word of
 * --json's "action", and the words of the text of list --explain and load -v. */
static const struct {
	const char *name, *words;
} actions[] = {
	[MC_LOAD_INSTALLED] = {"installed", "installed"},
	[MC_LOAD_UNCHANGED] = {"unchanged", "unchanged"},
	[MC_LOAD_PLANNED] = {"would_install", "would install"},
	[MC_LOAD_REPLACED] = {"replaced", "replaced"},
	[MC_LOAD_WOULD_REPLACE] = {"would_replace", "would replace"},
	[MC_LOAD_SKIPPED] = {"skipped", "skipped (GPU)"},
};

static size_t
action_index(int what)
{
	return what >= 0 && (size_t)what < sizeof actions / sizeof actions[0] ? (size_t)what
									   : MC_LOAD_PLANNED;
}

static const char *
action_name(int what)
{
	return actions[action_index(what)].name;
}

const char *
action_words(int what)
{
	return actions[action_index(what)].words;
}

/* Whether the bundle's artifact of this type and key is executable: 1, 0, or -1 when
 * the report has no bundle. */
static int
executable(const struct load_report *r, const char *type, const char *key)
{
	size_t i;

	if (r->b == NULL || mc_bundle_find_artifact(r->b, type, key, &i) != MC_OK)
		return -1;
	return mc_bundle_artifact_executable(r->b, i) == 1;
}

static void
json_artifact(struct load_report *r, int what, const char *type, const char *key,
	      const char *full, uint64_t size)
{
	cJSON *a = cJSON_CreateObject();
	int x = executable(r, type, key);

	cJSON_AddStringToObject(a, "type", type);
	cJSON_AddStringToObject(a, "key", key);
	cJSON_AddNumberToObject(a, "size", (double)size);
	cJSON_AddStringToObject(a, "dest", full);
	cJSON_AddStringToObject(a, "action", action_name(what));
	if (x >= 0)
		cJSON_AddBoolToObject(a, "executable", x);
	if (r->explain)
		cJSON_AddBoolToObject(a, "identical_file_present", what == MC_LOAD_UNCHANGED);
	cJSON_AddItemToArray(r->arts, a);
}

/* The mc_artifact_fn of load, list --explain and export (ud: struct load_report). */
void
on_artifact(void *ud, int what, const char *type, const char *key, const char *dest, uint64_t size)
{
	struct load_report *r = ud;
	char full[8192];

	count_artifact(r, what, type, size);
	if (r->also != NULL)
		r->also(r->also_ud, what, type, key);
	/* A file the load put in place or found there; a kernel left out is neither. */
	if (r->usage != NULL && dest != NULL && what != MC_LOAD_SKIPPED)
		mc_usage_add(r->usage, what, type, dest); /* a failure is kept for its start */
	/* The whole path only where it is shown: a load's sums need none of it. */
	if (!r->json && !(r->explain && !r->quiet))
		return;
	full[0] = '\0';
	if (dest != NULL && r->ctx != NULL) {
		const char *tier = mc_ctx_type_tier(r->ctx, type), *root = NULL;
		if (tier != NULL && mc_ctx_tier_root(r->ctx, tier, &root) == MC_OK)
			snprintf(full, sizeof full, "%s/%s", root, dest);
		else
			snprintf(full, sizeof full, "%s", dest);
	}
	if (r->json) {
		json_artifact(r, what, type, key, full, size);
	} else if (r->explain && !r->quiet) {
		char hb[32];
		human_bytes(size, hb, sizeof hb);
		say(stdout, "%-12s %10s  %-13s %s", type, hb, action_words(what), key);
		say(stdout, "%27s-> %s", "", full);
	}
}
