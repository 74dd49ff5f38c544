/* cmd_pack.c - pack: artifacts from torch blobs, cache dirs and Triton caches recorded
 * into a new bundle, with labels and signatures. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_SOURCES 256
#define MAX_PACK_LABELS 256

struct pack_opts {
	const char *out, *labels_json;
	struct signers signers;
	const char *srcs[MAX_SOURCES];
	int srckind[MAX_SOURCES]; /* OPT_FROM_TORCH, OPT_FROM_DIR or OPT_FROM_TRITON */
	size_t nsrcs;
	char *labels[MAX_PACK_LABELS]; /* KEY=VALUE */
	char owned[MAX_PACK_LABELS];   /* labels[i] made for --label-from-env, to free */
	size_t nlabels;
	uint64_t bver, expires, level;
	int keep_unknown, verbose;
};

/* What the scans of cache dirs skipped, and why (the first 16 reasons). */
struct scan_tally {
	int verbose;
	size_t skipped;
	struct {
		char why[96];
		size_t n;
	} reasons[16];
	size_t nreasons;
};

static const struct option pack_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"from-torch", required_argument, NULL, OPT_FROM_TORCH},
	{"from-dir", required_argument, NULL, OPT_FROM_DIR},
	{"from-triton-dir", required_argument, NULL, OPT_FROM_TRITON},
	{"keep-unknown", no_argument, NULL, OPT_KEEP_UNKNOWN},
	{"label", required_argument, NULL, OPT_LABEL},
	{"label-from-env", required_argument, NULL, OPT_LABEL_FROM_ENV},
	{"labels-json", required_argument, NULL, OPT_LABELS_JSON},
	{"bundle-version", required_argument, NULL, OPT_BUNDLE_VERSION},
	{"expires", required_argument, NULL, OPT_EXPIRES},
	{"level", required_argument, NULL, OPT_LEVEL},
	{"no-compress", no_argument, NULL, OPT_NO_COMPRESS},
	{"verbose", no_argument, NULL, 'v'},
	{NULL, 0, NULL, 0}};

/* --label-from-env VAR: the label VAR=$VAR. */
static void
add_env_label(struct pack_opts *o, const char *var)
{
	const char *v = getenv(var);
	size_t n;

	if (v == NULL)
		usage_error("--label-from-env %s: the variable is not set", var);
	if (o->nlabels == MAX_PACK_LABELS)
		usage_error("too many labels (at most %s)", "256");
	n = strlen(var) + strlen(v) + 2;
	if ((o->labels[o->nlabels] = malloc(n)) == NULL)
		usage_error("out of memory%s", "");
	snprintf(o->labels[o->nlabels], n, "%s=%s", var, v);
	o->owned[o->nlabels++] = 1;
}

/* The options that take a number. */
static int
pack_number_opt(struct pack_opts *o, int c, const char *arg)
{
	switch (c) {
	case OPT_BUNDLE_VERSION:
		if (parse_u64(arg, &o->bver) != 0)
			usage_error("--bundle-version takes a whole number, not '%s'", arg);
		return 1;
	case OPT_EXPIRES:
		if (parse_u64(arg, &o->expires) != 0 || o->expires == 0)
			usage_error("--expires takes a Unix time, not '%s'", arg);
		return 1;
	case OPT_LEVEL:
		if (parse_u64(arg, &o->level) != 0 || o->level < 1 || o->level > 19)
			usage_error("--level takes 1 to 19, not '%s'", arg);
		return 1;
	default:
		return 0;
	}
}

static int
pack_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct pack_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case 's': signer_opt(&o->signers, arg); return 1;
	case OPT_FROM_TORCH:
	case OPT_FROM_DIR:
	case OPT_FROM_TRITON:
		if (o->nsrcs == MAX_SOURCES)
			usage_error("too many sources (at most %s)", "256");
		o->srckind[o->nsrcs] = c;
		o->srcs[o->nsrcs++] = arg;
		return 1;
	case OPT_LABEL:
		if (o->nlabels == MAX_PACK_LABELS)
			usage_error("too many labels (at most %s)", "256");
		if (strchr(arg, '=') == NULL)
			usage_error("--label takes KEY=VALUE, not '%s'", arg);
		o->labels[o->nlabels++] = arg;
		return 1;
	case OPT_LABEL_FROM_ENV: add_env_label(o, arg); return 1;
	case OPT_LABELS_JSON: o->labels_json = arg; return 1;
	case OPT_NO_COMPRESS: o->level = 0; return 1;
	case OPT_KEEP_UNKNOWN: o->keep_unknown = 1; return 1;
	case 'v': o->verbose = 1; return 1;
	default: return pack_number_opt(o, c, arg);
	}
}

static const struct tool_optspec pack_spec = {"o:s:v", pack_long, pack_opt};

static void
on_scan(void *ud, int what, const char *rel, const char *text)
{
	struct scan_tally *t = ud;
	size_t i;

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

/* Labels from a JSON object of strings (facts a job wrote beside its torch blob).
 * A file that is not one ends the program with a usage error. */
static int
labels_from_json(mc_writer *w, const char *path)
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
		if (!cJSON_IsString(c))
			usage_error("--labels-json %s: label %s is not a string", path, c->string);
		rc = mc_writer_set_label(w, c->string, c->valuestring);
	}
	cJSON_Delete(j);
	return rc;
}

/* Sets up w from the options: its fields, labels and signers. */
static int
pack_setup(struct tool *t, mc_writer *w, struct pack_opts *o)
{
	int rc = set_created(w);

	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, o->bver);
	if (rc == MC_OK)
		rc = mc_writer_set_expires(w, (int64_t)o->expires);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)o->level);
	if (rc == MC_OK)
		rc = mc_writer_set_keep_unknown(w, o->keep_unknown);
	if (rc == MC_OK && o->labels_json != NULL)
		rc = labels_from_json(w, o->labels_json);
	if (rc == MC_OK)
		rc = set_labels(w, o->labels, o->nlabels);
	if (rc == MC_OK)
		rc = add_signers(t, w, &o->signers);
	return rc;
}

/* Records the artifacts of each source into w. */
static int
pack_sources(mc_writer *w, const struct pack_opts *o, struct scan_tally *tally)
{
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < o->nsrcs; i++)
		rc = o->srckind[i] == OPT_FROM_TORCH ? mc_writer_add_torch_blob(w, o->srcs[i])
		     : o->srckind[i] == OPT_FROM_DIR
			 ? mc_writer_add_cache_dir(w, o->srcs[i], on_scan, tally)
			 : mc_writer_add_triton_dir(w, o->srcs[i], on_scan, tally);
	return rc;
}

/* The line of files skipped, counted by reason. */
static void
say_skipped(const struct scan_tally *tally)
{
	char line[2048];
	size_t i, at = (size_t)snprintf(line, sizeof line, "skipped %zu file%s (-v lists them):",
					tally->skipped, tally->skipped == 1 ? "" : "s");

	for (i = 0; i < tally->nreasons && at < sizeof line; i++)
		at += (size_t)snprintf(line + at, sizeof line - at, "%s %zu %s", i ? "," : "",
				       tally->reasons[i].n, tally->reasons[i].why);
	say(stdout, "%s", line);
}

static void
pack_report(const struct tool *t, mc_writer *w, const struct pack_opts *o,
	    const struct scan_tally *tally)
{
	size_t nsecs = o->signers.n;
	char hb[32];

	human_bytes(mc_writer_total_bytes(w), hb, sizeof hb);
	if (t->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "bundle", o->out);
		cJSON_AddNumberToObject(j, "artifacts", (double)mc_writer_artifact_count(w));
		cJSON_AddNumberToObject(j, "bytes", (double)mc_writer_total_bytes(w));
		cJSON_AddNumberToObject(j, "signatures", (double)nsecs);
		cJSON_AddNumberToObject(j, "skipped_files", (double)tally->skipped);
		print_json(j);
	} else if (!t->quiet) {
		say(stdout, "packed %zu artifacts (%s) into %s, %zu signature%s",
		    mc_writer_artifact_count(w), hb, o->out, nsecs, nsecs == 1 ? "" : "s");
		if (tally->skipped > 0)
			say_skipped(tally);
	}
}

/* Checks the operands and that there is something to pack. */
static void
pack_check(const struct pack_opts *o, int argc, char **argv)
{
	if (o->out == NULL)
		usage_error("pack needs -o BUNDLE%s", "");
	if (optind != argc)
		usage_error("pack: unexpected argument '%s'", argv[optind]);
	if (o->nsrcs == 0)
		usage_error("pack needs at least one --from-torch BLOB or --from-dir DIR%s", "");
}

int
cmd_pack(struct tool *t, int argc, char **argv)
{
	struct pack_opts o = {.level = 3};
	struct scan_tally tally;
	mc_writer *w = NULL;
	size_t i;
	int rc;

	tool_parse(t, argc, argv, &pack_spec, &o);
	pack_check(&o, argc, argv);
	memset(&tally, 0, sizeof tally);
	tally.verbose = o.verbose;
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_writer_new(t->ctx, &w)) != MC_OK)
		return fail(t->ctx, rc);
	rc = pack_setup(t, w, &o);
	if (rc == MC_OK)
		rc = pack_sources(w, &o, &tally);
	if (rc == MC_OK && mc_writer_artifact_count(w) == 0) {
		say(stderr, "%s: no artifacts found in the sources; nothing written", PROG);
		rc = MC_ERR_INVALID; /* main returns it: exit status 254, unlike other usage errors */
	} else {
		if (rc == MC_OK)
			rc = mc_writer_save(w, o.out);
		if (rc != MC_OK)
			rc = fail(t->ctx, rc);
		else
			pack_report(t, w, &o, &tally);
	}
	for (i = 0; i < o.nlabels; i++)
		if (o.owned[i])
			free(o.labels[i]);
	free_signers(&o.signers);
	mc_writer_free(w);
	return rc;
}
