/*
 * megacache.c - the command-line tool: a thin layer over libmegacache that parses
 * arguments, prints results, and maps errors to exit codes (0 ok, 1 verification
 * failure, 2 usage or system error). Here: main, the usage text, the command table and
 * the commands.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

const char tool_usage[] =
	"usage: megacache COMMAND [OPTIONS]\n"
	"\n"
	"Record PyTorch compile caches into one signed bundle, and warm caches from it.\n"
	"\n"
	"commands:\n"
	"  keygen -p PUBFILE -s SECFILE [-W] [-f]\n"
	"        make a key pair (minisign format); -W leaves the secret key unencrypted\n"
	"  pack -o BUNDLE [-s SECFILE]... [--from-torch BLOB]... [--from-dir DIR]...\n"
	"       [--from-triton-dir DIR]... [--keep-unknown] [--label K=V]...\n"
	"       [--label-from-env VAR]... [--labels-json FILE]\n"
	"       [--bundle-version N] [--expires UNIXTIME] [--level N] [--no-compress] [--json] [-v]\n"
	"        record artifacts from torch blobs, cache dirs and Triton caches into a bundle\n"
	"  sign BUNDLE -s SECFILE [-o OUT]\n"
	"        add a signature to a bundle (in place unless -o)\n"
	"  verify BUNDLE -p PUBFILE [-p PUBFILE]... [--threshold K] [--min-version N]\n"
	"       [--require K=V]... [--insecure-no-verify] [--json]\n"
	"        check signatures, policy and every byte of a bundle\n"
	"  list BUNDLE [--json] [--explain [--cache-dir DIR] [--triton-dir DIR]]\n"
	"        show a bundle's labels, signatures and artifacts (not verified); --explain:\n"
	"        where each artifact would land and whether an identical file is there\n"
	"  load BUNDLE -p PUBFILE... [--cache-dir DIR] [--triton-dir DIR] [--types T[,T]...]\n"
	"       [--dry-run] [--sync] [--json]\n"
	"       [--threshold K] [--min-version N] [--require K=V]... [--insecure-no-verify]\n"
	"        verify a bundle and install its artifacts into the cache dirs; --sync:\n"
	"        flush them to disk before reporting success (one syncfs per filesystem)\n"
	"  export BUNDLE --torch OUTFILE [--torch-format 2.7|current] [-p PUBFILE]...\n"
	"        write the bundle's torch artifacts as a torch cache blob\n"
	"  merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify) [-s SECFILE]...\n"
	"       [--label K=V]... [--bundle-version N] [--level N]\n"
	"        several bundles into one, contents stored once; for a (type, key) with\n"
	"        different contents the bundle given later wins (each conflict is reported)\n"
	"  diff A B [--json]\n"
	"        artifacts added, removed and changed from A to B, per type\n"
	"\n"
	"common options:\n"
	"  --password-file F  read the secret key's password from the first line of F\n"
	"  --now UNIXTIME     (verify, load, export) check expiry as of this time\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N\n"
	"                     caps on what a bundle may declare (defaults 64 MiB, 1000000,\n"
	"                     8 GiB - 1, 256 GiB, and 4096 times an object's stored size;\n"
	"                     --max-expansion 0 turns that cap off)\n"
	"  --threads N        worker threads for pack, verify and load (default 0: one per\n"
	"                     CPU, at most 8); the bundle pack writes does not depend on it\n"
	"  -q, --quiet        print nothing but errors\n"
	"  -h, --help         this text;  --version  the version\n"
	"\n"
	"The default cache dir is torch's: $TORCHINDUCTOR_CACHE_DIR, else\n"
	"$TMPDIR/torchinductor_$USER (TMPDIR defaulting to /tmp).\n"
	"SOURCE_DATE_EPOCH, when set, is the creation time pack records (reproducible bundles).\n"
	"\n"
	"exit status: 0 success; 1 verification or integrity failure; 2 usage or system error.\n";

/* ---- keygen ---- */
struct keygen_opts {
	const char *pub, *sec;
	int unencrypted, force;
};

static const struct option keygen_long[] = {{"force", no_argument, NULL, 'f'},
					    {NULL, 0, NULL, 0}};

static int
keygen_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct keygen_opts *o = opts;

	switch (c) {
	case 'p': o->pub = arg; return 1;
	case 's': o->sec = arg; return 1;
	case 'W': o->unencrypted = 1; return 1;
	case 'f': o->force = 1; return 1;
	default: return 0;
	}
}

static const struct tool_optspec keygen_spec = {"p:s:Wf", keygen_long, keygen_opt};

/* The new key's password into pw1; asked twice on a terminal (into pw1 and pw2).
 * Returns 0 or the exit status of a failure it has reported. */
static int
new_password(struct tool *t, char *pw1, char *pw2, size_t len)
{
	if (read_password(t, "Password for the new secret key: ", pw1, len) != MC_OK)
		return EXIT_USAGE;
	if (t->password_file == NULL &&
	    (read_password(t, "Password (again): ", pw2, len) != MC_OK || strcmp(pw1, pw2) != 0)) {
		say(stderr, "%s: the passwords differ", PROG);
		return EXIT_USAGE;
	}
	if (pw1[0] == '\0') {
		say(stderr, "%s: empty password; use -W for an unencrypted key", PROG);
		return EXIT_USAGE;
	}
	return 0;
}

int
cmd_keygen(struct tool *t, int argc, char **argv)
{
	struct keygen_opts o = {0};
	char pw1[1024], pw2[1024];
	mc_seckey *sk;
	mc_pubkey *pk;
	int rc;

	tool_parse(t, argc, argv, &keygen_spec, &o);
	if (o.pub == NULL || o.sec == NULL || optind != argc)
		usage_error("keygen needs -p PUBFILE and -s SECFILE%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (!o.unencrypted && (rc = new_password(t, pw1, pw2, sizeof pw1)) != 0)
		return rc;
	if ((rc = mc_keygen(t->ctx, &sk, &pk)) != MC_OK)
		return fail(t->ctx, rc);
	rc = mc_keypair_save(t->ctx, sk, pk, o.pub, o.sec, o.unencrypted ? NULL : pw1, o.force);
	memset(pw1, 0, sizeof pw1);
	memset(pw2, 0, sizeof pw2);
	if (rc == MC_OK && !t->quiet)
		say(stdout, "key %s: public key in %s, secret key in %s", mc_pubkey_id(pk), o.pub,
		    o.sec);
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	return rc == MC_OK ? 0 : fail(t->ctx, rc);
}

/* ---- pack ---- */
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

/* ---- sign ---- */
struct sign_opts {
	const char *sec, *out;
};

static const struct option sign_long[] = {{"output", required_argument, NULL, 'o'},
					  {NULL, 0, NULL, 0}};

static int
sign_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct sign_opts *o = opts;

	switch (c) {
	case 's': o->sec = arg; return 1;
	case 'o': o->out = arg; return 1;
	default: return 0;
	}
}

static const struct tool_optspec sign_spec = {"s:o:", sign_long, sign_opt};

int
cmd_sign(struct tool *t, int argc, char **argv)
{
	struct sign_opts o = {0};
	const char *path;
	mc_seckey *sk = NULL;
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &sign_spec, &o);
	if (optind + 1 != argc || o.sec == NULL)
		usage_error("sign needs BUNDLE and -s SECFILE%s", "");
	path = argv[optind];
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_seckey_load(t->ctx, o.sec, read_password, t, &sk)) != MC_OK ||
	    (rc = mc_bundle_open(t->ctx, path, &b)) != MC_OK ||
	    (rc = mc_bundle_add_signature(b, sk, o.out ? o.out : path)) != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		if (!t->quiet)
			say(stdout, "signed %s with key %s", o.out ? o.out : path, mc_seckey_id(sk));
		rc = 0;
	}
	mc_bundle_free(b);
	mc_seckey_free(sk);
	return rc;
}

/* ---- verify ---- */
/* verify --json: the outcome rc of checking the bundle at path, b where it opened. */
static void
verify_json(mc_ctx *ctx, mc_bundle *b, const char *path, int rc)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddBoolToObject(j, "ok", rc == MC_OK);
	if (rc != MC_OK) {
		cJSON_AddStringToObject(j, "error", mc_strerror(rc));
		cJSON_AddStringToObject(j, "message", mc_ctx_error(ctx));
	} else {
		cJSON_AddNumberToObject(j, "artifacts", (double)mc_bundle_artifact_count(b));
		cJSON_AddNumberToObject(j, "bundle_version", (double)mc_bundle_version(b));
	}
	print_json(j);
}

int
cmd_verify(struct tool *t, int argc, char **argv)
{
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind + 1 != argc)
		usage_error("verify needs exactly one BUNDLE%s", "");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("verify needs at least one -p PUBFILE (or --insecure-no-verify: integrity "
			    "only)%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	rc = open_trusted(t, argv[optind], &b, keys);
	if (rc == MC_OK)
		rc = mc_bundle_verify(b);
	if (t->json)
		verify_json(t->ctx, b, argv[optind], rc);
	if (rc != MC_OK) {
		rc = t->json ? exit_code(rc) : fail(t->ctx, rc);
	} else {
		if (!t->json && !t->quiet)
			say(stdout, "%s: OK (%zu artifacts, bundle version %" PRIu64 ", %zu signature%s)",
			    argv[optind], mc_bundle_artifact_count(b), mc_bundle_version(b),
			    mc_bundle_signature_count(b), mc_bundle_signature_count(b) == 1 ? "" : "s");
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}

/* ---- list ---- */
struct list_opts {
	int explain;
};

static const struct option list_long[] = {{"explain", no_argument, NULL, OPT_EXPLAIN},
					  {NULL, 0, NULL, 0}};

static int
list_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct list_opts *o = opts;

	if (c != OPT_EXPLAIN)
		return 0;
	o->explain = 1;
	return 1;
}

static const struct tool_optspec list_spec = {"", list_long, list_opt};

/* list --explain: where each artifact would land, and whether it is there already. */
static int
explain(struct tool *t, mc_bundle *b, const char *path)
{
	struct load_report r;
	int rc;

	memset(&r, 0, sizeof r);
	r.dry = 1;
	r.explain = 1;
	r.json = t->json;
	r.quiet = t->quiet;
	r.ctx = t->ctx;
	if (t->json)
		r.arts = cJSON_CreateArray();
	if ((rc = mc_bundle_set_insecure(b, 1)) != MC_OK ||
	    (rc = mc_bundle_load(b, MC_LOAD_DRY_RUN, on_artifact, &r)) != MC_OK) {
		cJSON_Delete(r.arts);
		return fail(t->ctx, rc);
	}
	if (t->json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "bundle", path);
		cJSON_AddBoolToObject(j, "signatures_checked", 0);
		cJSON_AddNumberToObject(j, "would_install", (double)r.planned);
		cJSON_AddNumberToObject(j, "already_there", (double)r.unchanged);
		cJSON_AddItemToObject(j, "artifacts", r.arts);
		print_json(j);
	} else if (!t->quiet) {
		say(stdout, "%zu to install, %zu already there (signatures not checked)", r.planned,
		    r.unchanged);
	}
	return 0;
}

/* The artifacts of b into the array arts. */
static int
json_artifacts(mc_bundle *b, cJSON *arts)
{
	size_t i, n = mc_bundle_artifact_count(b);
	int rc;

	for (i = 0; i < n; i++) {
		const char *type, *key, *hash;
		uint64_t size;
		cJSON *a;
		if ((rc = mc_bundle_artifact(b, i, &type, &key, &size, &hash)) != MC_OK)
			return rc;
		a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "type", type);
		cJSON_AddStringToObject(a, "key", key);
		cJSON_AddNumberToObject(a, "size", (double)size);
		cJSON_AddStringToObject(a, "hash", hash);
		cJSON_AddItemToArray(arts, a);
	}
	return MC_OK;
}

/* list --json. Returns MC_OK, or the error of reading the artifact table. */
static int
list_json(mc_bundle *b, const char *path)
{
	cJSON *j = cJSON_CreateObject(), *labels, *sigs;
	size_t i;
	int rc;

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddBoolToObject(j, "verified", 0);
	cJSON_AddNumberToObject(j, "format_version", MC_FORMAT_VERSION);
	cJSON_AddNumberToObject(j, "created", (double)mc_bundle_created(b));
	cJSON_AddNumberToObject(j, "bundle_version", (double)mc_bundle_version(b));
	if (mc_bundle_expires(b) != 0)
		cJSON_AddNumberToObject(j, "expires", (double)mc_bundle_expires(b));
	labels = cJSON_AddObjectToObject(j, "labels");
	for (i = 0; i < mc_bundle_label_count(b); i++) {
		const char *k, *v;
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			cJSON_AddStringToObject(labels, k, v);
	}
	sigs = cJSON_AddArrayToObject(j, "signatures");
	for (i = 0; i < mc_bundle_signature_count(b); i++)
		cJSON_AddItemToArray(sigs, cJSON_CreateString(mc_bundle_signature_key_id(b, i)));
	if ((rc = json_artifacts(b, cJSON_AddArrayToObject(j, "artifacts"))) != MC_OK) {
		cJSON_Delete(j);
		return rc;
	}
	print_json(j);
	return MC_OK;
}

/* list. Returns MC_OK, or the error of reading the artifact table. */
static int
list_text(mc_bundle *b, const char *path)
{
	size_t i, n = mc_bundle_artifact_count(b);
	char hb[32], exp[48] = "";
	int rc;

	say(stdout, "bundle %s (format %d, not verified)", path, MC_FORMAT_VERSION);
	if (mc_bundle_expires(b) != 0)
		snprintf(exp, sizeof exp, ", expires %" PRId64, mc_bundle_expires(b));
	say(stdout, "created %" PRId64 ", bundle version %" PRIu64 "%s", mc_bundle_created(b),
	    mc_bundle_version(b), exp);
	for (i = 0; i < mc_bundle_label_count(b); i++) {
		const char *k, *v;
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			say(stdout, "label %s=%s", k, v);
	}
	for (i = 0; i < mc_bundle_signature_count(b); i++)
		say(stdout, "signature by key %s", mc_bundle_signature_key_id(b, i));
	if (mc_bundle_signature_count(b) == 0)
		say(stdout, "unsigned");
	for (i = 0; i < n; i++) {
		const char *type, *key, *hash;
		uint64_t size;
		if ((rc = mc_bundle_artifact(b, i, &type, &key, &size, &hash)) != MC_OK)
			return rc;
		human_bytes(size, hb, sizeof hb);
		say(stdout, "%-12s %10s  %s", type, hb, key);
	}
	say(stdout, "%zu artifacts", n);
	return MC_OK;
}

int
cmd_list(struct tool *t, int argc, char **argv)
{
	struct list_opts o = {0};
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &list_spec, &o);
	if (optind + 1 != argc)
		usage_error("list needs exactly one BUNDLE%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_bundle_open(t->ctx, argv[optind], &b)) != MC_OK)
		return fail(t->ctx, rc);
	if (o.explain)
		rc = explain(t, b, argv[optind]);
	else if ((rc = t->json ? list_json(b, argv[optind]) : list_text(b, argv[optind])) != MC_OK) {
		/* The artifact table of a large bundle is read from a temp file as it is listed. */
		fflush(stdout);
		rc = fail(t->ctx, rc);
	}
	mc_bundle_free(b);
	return rc;
}

/* ---- load ---- */
struct load_opts {
	const char *types;
	int dry, sync;
};

static const struct option load_long[] = {{"types", required_argument, NULL, OPT_TYPES},
					  {"dry-run", no_argument, NULL, OPT_DRY_RUN},
					  {"sync", no_argument, NULL, OPT_SYNC},
					  {NULL, 0, NULL, 0}};

static int
load_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct load_opts *o = opts;

	switch (c) {
	case OPT_TYPES: o->types = arg; return 1;
	case OPT_DRY_RUN: o->dry = 1; return 1;
	case OPT_SYNC: o->sync = 1; return 1;
	default: return 0;
	}
}

static const struct tool_optspec load_spec = {"", load_long, load_opt};

/* --types T[,T]...: restricts the load to those types. */
static int
select_types(mc_bundle *b, const char *types)
{
	char *copy = strdup(types), *tok, *save = NULL;
	int rc = MC_OK;

	if (copy == NULL)
		rc = MC_ERR_NOMEM;
	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; rc == MC_OK && tok != NULL;
	     tok = strtok_r(NULL, ",", &save))
		if ((rc = mc_bundle_select_type(b, tok)) != MC_OK)
			rc = MC_ERR_INVALID;
	free(copy);
	return rc;
}

/* load --json; takes r->arts. */
static void
load_json(const struct tool *t, struct load_report *r, const char *path, int sync)
{
	cJSON *j = cJSON_CreateObject(), *sum;
	size_t i;

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddStringToObject(j, "cache_dir", r->root);
	cJSON_AddBoolToObject(j, "dry_run", r->dry);
	cJSON_AddBoolToObject(j, "synced", sync && !r->dry);
	cJSON_AddBoolToObject(j, "verified", !t->trust.insecure);
	cJSON_AddNumberToObject(j, "installed", (double)r->installed);
	cJSON_AddNumberToObject(j, "unchanged", (double)r->unchanged);
	cJSON_AddNumberToObject(j, "would_install", (double)r->planned);
	cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
	sum = cJSON_AddObjectToObject(j, "types");
	for (i = 0; i < r->nsums; i++) {
		cJSON *s = cJSON_AddObjectToObject(sum, r->sums[i].type);
		cJSON_AddNumberToObject(s, "count", (double)r->sums[i].count);
		cJSON_AddNumberToObject(s, "bytes", (double)r->sums[i].bytes);
		cJSON_AddNumberToObject(s, "unchanged", (double)r->sums[i].unchanged);
	}
	cJSON_AddItemToObject(j, "artifacts", r->arts);
	r->arts = NULL;
	print_json(j);
}

/* load: a line per type, and the totals. */
static void
load_text(const struct tool *t, const struct load_report *r, const char *path)
{
	size_t i, n = r->dry ? r->planned : r->installed;
	char hb[32];

	if (t->trust.insecure)
		say(stderr, "%s: warning: signatures were not checked (--insecure-no-verify)", PROG);
	say(stdout, "%s %s into %s", r->dry ? "would warm" : "warmed", path, r->root);
	for (i = 0; i < r->nsums; i++) {
		char there[48] = "";
		human_bytes(r->sums[i].bytes, hb, sizeof hb);
		if (r->sums[i].unchanged)
			snprintf(there, sizeof there, "  (%zu already there)", r->sums[i].unchanged);
		say(stdout, "  %-13s %5zu file%s %10s%s", r->sums[i].type, r->sums[i].count,
		    r->sums[i].count == 1 ? " " : "s", hb, there);
	}
	human_bytes(r->bytes, hb, sizeof hb);
	say(stdout, "%zu file%s %s (%s), %zu already there", n, n == 1 ? "" : "s",
	    r->dry ? "to install" : "installed", hb, r->unchanged);
}

/* Checks the operands and the trust options given. */
static void
load_check(const struct tool *t, int argc)
{
	if (optind + 1 != argc)
		usage_error("load needs exactly one BUNDLE%s", "");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("load needs -p PUBFILE (or --insecure-no-verify to skip signature "
			    "checks)%s", "");
	if (t->trust.npubs > 0 && t->trust.insecure)
		usage_error("-p and --insecure-no-verify do not go together%s", "");
}

int
cmd_load(struct tool *t, int argc, char **argv)
{
	struct load_opts o = {0};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	struct load_report r;
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &load_spec, &o);
	load_check(t, argc);
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.dry = o.dry;
	r.json = t->json;
	r.quiet = t->quiet;
	r.ctx = t->ctx;
	if ((rc = mc_ctx_tier_root(t->ctx, "inductor", &r.root)) != MC_OK)
		return fail(t->ctx, rc);
	rc = open_trusted(t, argv[optind], &b, keys);
	if (rc == MC_OK && o.types != NULL)
		rc = select_types(b, o.types);
	if (r.json)
		r.arts = cJSON_CreateArray();
	if (rc == MC_OK)
		rc = mc_bundle_load(b, o.dry ? MC_LOAD_DRY_RUN : o.sync ? MC_LOAD_SYNC : 0, on_artifact,
				    &r);
	if (rc != MC_OK)
		rc = fail(t->ctx, rc);
	else if (r.json)
		load_json(t, &r, argv[optind], o.sync);
	else if (!t->quiet)
		load_text(t, &r, argv[optind]);
	cJSON_Delete(r.arts);
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}

/* ---- export ---- */
struct export_opts {
	const char *out;
	int format; /* MC_TORCH_FORMAT_* */
};

static const struct option export_long[] = {
	{"torch", required_argument, NULL, OPT_TORCH},
	{"torch-format", required_argument, NULL, OPT_TORCH_FORMAT},
	{NULL, 0, NULL, 0}};

static int
export_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct export_opts *o = opts;

	if (c == OPT_TORCH)
		o->out = arg;
	else if (c == OPT_TORCH_FORMAT && strcmp(arg, "2.7") == 0)
		o->format = MC_TORCH_FORMAT_2_7;
	else if (c == OPT_TORCH_FORMAT && (strcmp(arg, "current") == 0 || strcmp(arg, "2.8") == 0))
		o->format = MC_TORCH_FORMAT_CURRENT;
	else if (c == OPT_TORCH_FORMAT)
		usage_error("--torch-format takes 2.7 or current, not '%s'", arg);
	else
		return 0;
	return 1;
}

static const struct tool_optspec export_spec = {"", export_long, export_opt};

static void
export_report(const struct tool *t, const struct export_opts *o, const char *path,
	      const struct load_report *left)
{
	size_t i;

	if (t->trust.npubs == 0)
		say(stderr, "%s: warning: signatures not checked (no -p given)", PROG);
	say(stdout, "exported %s to %s (torch %s format)", path, o->out,
	    o->format == MC_TORCH_FORMAT_2_7 ? "2.7" : "2.8+");
	for (i = 0; i < left->nsums; i++)
		say(stdout, "left out %zu %s artifact%s: not a type that format holds",
		    left->sums[i].count, left->sums[i].type, left->sums[i].count == 1 ? "" : "s");
}

int
cmd_export(struct tool *t, int argc, char **argv)
{
	struct export_opts o = {NULL, MC_TORCH_FORMAT_CURRENT};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	struct load_report left; /* the artifacts the format does not hold */
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &export_spec, &o);
	if (optind + 1 != argc || o.out == NULL)
		usage_error("export needs BUNDLE and --torch OUTFILE%s", "");
	/* Without keys, export checks integrity only, and says so. */
	if (t->trust.npubs == 0)
		t->trust.insecure = 1;
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&left, 0, sizeof left);
	left.dry = 1;
	left.silent = 1;
	left.quiet = t->quiet;
	rc = open_trusted(t, argv[optind], &b, keys);
	if (rc == MC_OK)
		rc = mc_bundle_export_torch_as(b, o.out, o.format, on_artifact, &left);
	if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		if (!t->quiet)
			export_report(t, &o, argv[optind], &left);
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}

/* ---- merge ---- */
#define MAX_MERGE_LABELS 64

struct merge_opts {
	const char *out;
	struct signers signers;
	char *labels[MAX_MERGE_LABELS]; /* KEY=VALUE */
	size_t nlabels;
	uint64_t bver, level;
};

/* What on_conflict counts and reports. */
struct conflicts {
	size_t n;
	int quiet;
};

static const struct option merge_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"label", required_argument, NULL, OPT_LABEL},
	{"bundle-version", required_argument, NULL, OPT_BUNDLE_VERSION},
	{"level", required_argument, NULL, OPT_LEVEL},
	{NULL, 0, NULL, 0}};

static int
merge_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct merge_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case 's': signer_opt(&o->signers, arg); return 1;
	case OPT_LABEL:
		if (strchr(arg, '=') == NULL || o->nlabels == MAX_MERGE_LABELS)
			usage_error("--label takes KEY=VALUE (at most 64), not '%s'", arg);
		o->labels[o->nlabels++] = arg;
		return 1;
	case OPT_BUNDLE_VERSION:
		if (parse_u64(arg, &o->bver) != 0)
			usage_error("--bundle-version takes a whole number, not '%s'", arg);
		return 1;
	case OPT_LEVEL:
		if (parse_u64(arg, &o->level) != 0 || o->level > 19)
			usage_error("--level takes 0 to 19, not '%s'", arg);
		return 1;
	default: return 0;
	}
}

static const struct tool_optspec merge_spec = {"o:s:", merge_long, merge_opt};

static void
on_conflict(void *ud, const char *type, const char *key)
{
	struct conflicts *c = ud;

	c->n++;
	if (!c->quiet)
		say(stderr, "%s: conflict: %s %s differs between bundles; kept the later one", PROG,
		    type, key);
}

/* Adds the input bundles to w, each checked with the trust options. Their contents wait
 * beside the output. */
static int
add_inputs(struct tool *t, mc_writer *w, const char *out, char **inputs, size_t n)
{
	char *dir, *slash;
	size_t i;
	int rc = MC_OK;

	if ((dir = strdup(out)) == NULL)
		usage_error("out of memory%s", "");
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	for (i = 0; rc == MC_OK && i < n; i++) {
		mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
		mc_bundle *b = NULL;

		rc = open_trusted(t, inputs[i], &b, keys);
		if (rc == MC_OK)
			rc = mc_writer_add_bundle(w, b, dir);
		mc_bundle_free(b);
		free_keys(keys, t->trust.npubs);
	}
	free(dir);
	return rc;
}

/* The line that tells of a merge done: the artifacts counted in the bundle written. */
static void
merge_report(struct tool *t, const char *out, int ninputs, size_t conflicts)
{
	mc_bundle *m = NULL;
	size_t n = 0;

	if (mc_bundle_open(t->ctx, out, &m) == MC_OK)
		n = mc_bundle_artifact_count(m);
	mc_bundle_free(m);
	if (!t->quiet)
		say(stdout, "merged %d bundles into %s: %zu artifacts, %zu conflict%s", ninputs, out, n,
		    conflicts, conflicts == 1 ? "" : "s");
}

int
cmd_merge(struct tool *t, int argc, char **argv)
{
	struct merge_opts o = {.level = 3};
	struct conflicts conflicts = {0, 0};
	mc_writer *w = NULL;
	int rc;

	tool_parse(t, argc, argv, &merge_spec, &o);
	if (o.out == NULL || optind >= argc)
		usage_error("merge needs -o OUT and at least one input bundle%s", "");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("merge needs -p PUBFILE to verify its inputs (or --insecure-no-verify)%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_writer_new(t->ctx, &w)) != MC_OK)
		return fail(t->ctx, rc);
	conflicts.quiet = t->quiet;
	mc_writer_set_conflict_fn(w, on_conflict, &conflicts);
	rc = set_created(w);
	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, o.bver);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)o.level);
	if (rc == MC_OK)
		rc = add_inputs(t, w, o.out, argv + optind, (size_t)(argc - optind));
	if (rc == MC_OK)
		rc = set_labels(w, o.labels, o.nlabels);
	if (rc == MC_OK)
		rc = add_signers(t, w, &o.signers);
	if (rc == MC_OK)
		rc = mc_writer_save(w, o.out);
	if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		merge_report(t, o.out, argc - optind, conflicts.n);
		rc = 0;
	}
	free_signers(&o.signers);
	mc_writer_free(w);
	return rc;
}

/* ---- diff ---- */
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
	cJSON *j = cJSON_CreateObject(), *types;
	size_t i, k;

	cJSON_AddStringToObject(j, "a", a);
	cJSON_AddStringToObject(j, "b", b);
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
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&d, 0, sizeof d);
	d.json = t->json;
	d.quiet = t->quiet;
	if ((rc = mc_bundle_open(t->ctx, argv[optind], &a)) == MC_OK &&
	    (rc = mc_bundle_open(t->ctx, argv[optind + 1], &b)) == MC_OK) {
		for (k = 0; k < 3; k++)
			d.lists[k] = cJSON_CreateArray();
		rc = mc_bundle_diff(a, b, on_diff, &d);
	}
	if (rc != MC_OK)
		rc = fail(t->ctx, rc);
	else if (d.json)
		diff_json(&d, argv[optind], argv[optind + 1]);
	else if (!t->quiet)
		diff_text(&d);
	for (k = 0; k < 3; k++)
		cJSON_Delete(d.lists[k]);
	mc_bundle_free(a);
	mc_bundle_free(b);
	return rc;
}

/* The commands. Every one takes the common options and runs on a context with progress,
 * threads and caps (tool_start); the flags name the set-up it needs beyond that. */
static const struct command {
	const char *name;
	tool_cmd_fn *fn;
	unsigned flags;
} commands[] = {
	{"keygen", cmd_keygen, 0},
	{"pack", cmd_pack, TOOL_JSON},
	{"sign", cmd_sign, 0},
	{"verify", cmd_verify, TOOL_TRUST | TOOL_JSON},
	{"list", cmd_list, TOOL_TIERS | TOOL_JSON},
	{"load", cmd_load, TOOL_TRUST | TOOL_TIERS | TOOL_JSON},
	{"export", cmd_export, TOOL_TRUST},
	{"merge", cmd_merge, TOOL_TRUST},
	{"diff", cmd_diff, TOOL_JSON},
};

/* Runs cmd on argv (argv[0] its name), with its own option state, and frees what it set up. */
static int
run_command(const struct command *cmd, int argc, char **argv)
{
	struct tool t;
	char name[64];
	int rc;

	memset(&t, 0, sizeof t);
	t.name = cmd->name;
	t.flags = cmd->flags;
	/* The name getopt's complaints start with (options.c). */
	snprintf(name, sizeof name, "megacache %s", cmd->name);
	argv[0] = name;
	rc = cmd->fn(&t, argc, argv);
	mc_ctx_free(t.ctx);
	return rc;
}

int
main(int argc, char **argv)
{
	size_t i;

	/* A file-size limit must give a clear error (EFBIG), not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		fputs(tool_usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(tool_usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		say(stdout, "megacache %s (bundle format %d)", MC_VERSION_STRING, MC_FORMAT_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return run_command(&commands[i], argc - 1, argv + 1);
	say(stderr, "%s: unknown command '%s'", PROG, argv[1]);
	try_help();
}
