/* record.c - what pack, save and run share to write a bundle: the writer's options
 * (signers, labels, version, expiry, compression), the scans of cache folders with
 * their tally of skipped files, and the folders torch and Triton read here. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tool.h"

/* --label-from-env VAR: the label VAR=$VAR. */
static void
add_env_label(struct record_opts *o, const char *var)
{
	const char *v = getenv(var);
	size_t n;
	char *label;

	if (v == NULL)
		usage_error("--label-from-env %s: the variable is not set", var);
	n = strlen(var) + strlen(v) + 2;
	if ((label = malloc(n)) == NULL)
		usage_say("out of memory");
	snprintf(label, n, "%s=%s", var, v);
	label_opt(o->labels, &o->nlabels, MAX_LABELS, label);
	o->owned[o->nlabels - 1] = 1;
}

/* --expires: a time after now (parse_time's forms). */
static void
expires_opt(struct record_opts *o, const char *arg)
{
	int64_t now = (int64_t)time(NULL), e;
	char when[32], at[32];

	if (parse_time(arg, now, &e) != 0)
		usage_error("--expires takes a Unix time, an ISO 8601 UTC time (2026-12-01, "
			    "2026-12-01T12:00:00Z) or +N[wdhms] from now (+30d, +12h), not '%s'", arg);
	if (e <= now) {
		iso_time(e, when, sizeof when);
		iso_time(now, at, sizeof at);
		usage_error("--expires %s is not in the future: it is %s, and now is %s", arg, when,
			    at);
	}
	o->expires = (uint64_t)e;
}

/* The options that take a number. */
static int
number_opt(struct record_opts *o, int c, const char *arg)
{
	switch (c) {
	case OPT_BUNDLE_VERSION:
		if (parse_u64(arg, &o->bver) != 0)
			usage_error("--bundle-version takes a whole number, not '%s'", arg);
		return 1;
	case OPT_EXPIRES:
		expires_opt(o, arg);
		return 1;
	case OPT_LEVEL:
		if (parse_u64(arg, &o->level) != 0 || o->level < 1 || o->level > 19)
			usage_error("--level takes 1 to 19, not '%s'", arg);
		return 1;
	case OPT_FORMAT_VERSION:
		if (parse_u64(arg, &o->fversion) != 0 || o->fversion < 1 ||
		    o->fversion > MC_FORMAT_VERSION)
			usage_error("--format-version takes 1 or 2, not '%s'", arg);
		return 1;
	default:
		return 0;
	}
}

/* Takes one of the options of RECORD_LONG_OPTIONS, -s or -v; 0 for another. */
int
record_opt(struct record_opts *o, int c, char *arg)
{
	switch (c) {
	case 's': signer_opt(&o->signers, arg); return 1;
	case OPT_LABEL: label_opt(o->labels, &o->nlabels, MAX_LABELS, arg); return 1;
	case OPT_LABEL_FROM_ENV: add_env_label(o, arg); return 1;
	case OPT_LABELS_JSON:
		refuse_dash("--labels-json", arg, "labels are not read from standard input");
		o->labels_json = arg;
		return 1;
	case OPT_NO_COMPRESS: o->level = 0; return 1;
	case OPT_KEEP_UNKNOWN: o->keep_unknown = 1; return 1;
	default: return number_opt(o, c, arg);
	}
}

void
record_free(struct record_opts *o)
{
	size_t i;

	for (i = 0; i < o->nlabels; i++)
		if (o->owned[i])
			free(o->labels[i]);
	free_signers(&o->signers);
}

/* Labels from a JSON object (facts a job wrote beside its torch blob): its string
 * members; each other member (a number, true, null, an array, ...) is skipped with a
 * note naming it (unless quiet). A file that is not a JSON object ends the program with a usage error. */
static int
labels_from_json(mc_writer *w, const char *path, int quiet)
{
	FILE *f = fopen(path, "rb");
	char buf[65536];
	size_t n;
	cJSON *j, *c;
	int rc = MC_OK;

	if (f == NULL)
		usage_error("--labels-json %s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (n == sizeof buf - 1 || (j = cJSON_Parse(buf)) == NULL || !cJSON_IsObject(j))
		usage_error("--labels-json %s: not a JSON object of labels (at most 64 KiB)", path);
	for (c = j->child; c != NULL && rc == MC_OK; c = c->next) {
		if (!cJSON_IsString(c) && !quiet)
			say(stderr, "%s: --labels-json %s: skipped %s: not a string", PROG, path,
			    c->string);
		else if (cJSON_IsString(c))
			rc = mc_writer_set_label(w, c->string, c->valuestring);
	}
	cJSON_Delete(j);
	return rc;
}

/* Sets up w from the options: its fields, labels and signers (whose passwords are
 * asked for now). */
/* A (type, key) recorded twice with different contents (two sources with one key): said,
 * not lost silently. A torch blob's own repeats of a key are its file's successive states
 * (torch records a PGO state as it changes), of which the last counts, and are not told;
 * the entries of one FX graph or AOTAutograd key have keys of their own, so never meet
 * here. */
static void
on_twice(void *ud, const char *type, const char *key)
{
	const struct tool *t = ud;

	if (!t->quiet)
		say(stderr, "%s: warning: %s %s: recorded twice with different contents; the "
		    "bundle keeps the one recorded last", PROG, type, key);
}

const char *
aot_remote_env(void)
{
	/* as torch reads it: "1" and "0" set it, anything else leaves it unset */
	const char *v = getenv(AOT_REMOTE_LABEL);

	return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "0") == 0) ? v : "unset";
}

const char *
bundle_label(const mc_bundle *b, const char *key)
{
	const char *k, *v;
	size_t i;

	for (i = 0; i < mc_bundle_label_count(b); i++)
		if (mc_bundle_label(b, i, &k, &v) == MC_OK && strcmp(k, key) == 0)
			return v;
	return NULL;
}

int
record_setup(struct tool *t, mc_writer *w, struct record_opts *o)
{
	int rc = set_created(w);

	mc_writer_set_conflict_fn(w, on_twice, t);
	if (rc == MC_OK && o->fversion != 0)
		rc = mc_writer_set_format_version(w, (int)o->fversion);
	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, o->bver);
	if (rc == MC_OK)
		rc = mc_writer_set_expires(w, (int64_t)o->expires);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)o->level);
	if (rc == MC_OK)
		rc = mc_writer_set_keep_unknown(w, o->keep_unknown);
	if (rc == MC_OK && o->aot_remote != NULL)
		rc = mc_writer_set_label(w, AOT_REMOTE_LABEL, o->aot_remote);
	if (rc == MC_OK && o->labels_json != NULL)
		rc = labels_from_json(w, o->labels_json, t->quiet);
	if (rc == MC_OK)
		rc = set_labels(w, o->labels, o->nlabels);
	if (rc == MC_OK)
		rc = add_signers(t, w, &o->signers);
	return rc;
}

/* The mc_scan_fn of the scans (ud: struct scan_tally). */
void
on_scan(void *ud, int what, const char *rel, const char *text)
{
	struct scan_tally *t = ud;
	size_t i;

	if (what == MC_SCAN_RECORDED && t->verbose)
		say(stderr, "recorded %s: %s", rel, text);
	if (what != MC_SCAN_SKIPPED)
		return;
	t->skipped++;
	if (t->verbose)
		say(stderr, "skipped %s: %s", rel, text);
	for (i = 0; i < t->nreasons && strcmp(t->reasons[i].why, text) != 0; i++)
		;
	if (i == t->nreasons && t->nreasons < 16)
		snprintf(t->reasons[t->nreasons++].why, sizeof t->reasons[0].why, "%s", text);
	if (i < t->nreasons)
		t->reasons[i].n++;
}

/* The line of files skipped, counted by reason. */
void
say_skipped(FILE *f, const struct scan_tally *tally)
{
	char line[2048];
	size_t i, at = (size_t)snprintf(line, sizeof line, "skipped %zu file%s (-v lists them):",
					tally->skipped, tally->skipped == 1 ? "" : "s");

	for (i = 0; i < tally->nreasons && at < sizeof line; i++)
		at += (size_t)snprintf(line + at, sizeof line - at, "%s %zu %s", i ? "," : "",
				       tally->reasons[i].n, tally->reasons[i].why);
	say(f, "%s", line);
}

/* The folders torch, Triton and vLLM read, in the order scanned: the inductor root
 * (with inductor's Triton kernels in its triton/), Triton's own cache, and vLLM's. */
static const struct {
	const char *tier;
	const char *what;
} where[NLOCATIONS] = {{"inductor", "torch's cache"}, {"triton_home", "Triton's cache"},
		       {"vllm", "vLLM's cache"}};

/* Resolves the locations into loc (NLOCATIONS) without reading them. */
int
locate(struct tool *t, struct location *loc)
{
	struct stat st;
	size_t i;
	int rc;

	for (i = 0; i < NLOCATIONS; i++) {
		memset(&loc[i], 0, sizeof loc[i]);
		loc[i].tier = where[i].tier;
		loc[i].what = where[i].what;
		if ((rc = mc_ctx_tier_root(t->ctx, where[i].tier, &loc[i].path)) != MC_OK)
			return rc;
		loc[i].found = stat(loc[i].path, &st) == 0 && S_ISDIR(st.st_mode);
	}
	return MC_OK;
}

/* Records everything torch and Triton left in the locations that exist (resolved by
 * locate() into loc), counting what each gave. */
int
record_locations(mc_writer *w, struct location *loc, struct scan_tally *tally)
{
	size_t i, before;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < NLOCATIONS; i++) {
		if (!loc[i].found)
			continue;
		before = mc_writer_artifact_count(w);
		rc = i == 0 ? mc_writer_add_cache_dir(w, loc[i].path, on_scan, tally)
		     : i == 1 ? mc_writer_add_triton_cache(w, loc[i].path, on_scan, tally)
			      : mc_writer_add_vllm_dir(w, loc[i].path, on_scan, tally);
		loc[i].artifacts = mc_writer_artifact_count(w) - before;
	}
	return rc;
}

/* The locations as a JSON array. */
cJSON *
locations_json(const struct location *loc)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < NLOCATIONS; i++) {
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "tier", loc[i].tier);
		cJSON_AddStringToObject(f, "path", loc[i].path);
		cJSON_AddBoolToObject(f, "exists", loc[i].found);
		cJSON_AddNumberToObject(f, "artifact_count", (double)loc[i].artifacts);
		cJSON_AddItemToArray(a, f);
	}
	return a;
}

/* A line per location: what was read, or that it is not there. */
void
say_locations(FILE *f, const struct location *loc)
{
	size_t i;

	for (i = 0; i < NLOCATIONS; i++)
		if (loc[i].found)
			say(f, "read %s (%s): %zu artifact%s", loc[i].path, loc[i].what,
			    loc[i].artifacts, loc[i].artifacts == 1 ? "" : "s");
		else
			say(f, "no folder %s (%s)", loc[i].path, loc[i].what);
}

/* Whether folder path exists and holds anything. */
int
dir_has_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int any = 0;

	if (d == NULL)
		return 0;
	while (!any && (de = readdir(d)) != NULL)
		any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return any;
}
