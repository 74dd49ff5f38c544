/*
 * megacache.c - the command-line tool: a thin layer over libmegacache that parses
 * arguments, prints results, and maps errors to exit codes (0 ok, 1 verification
 * failure, 2 usage or system error).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tool.h"

static int quiet;

static const char usage_text[] =
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

/* The same, for the early exits of a command: the context is freed too. */
static int
fail_free(mc_ctx *ctx, int rc)
{
	int code = fail(ctx, rc);

	mc_ctx_free(ctx);
	return code;
}

static int
parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*v = x;
	return 0;
}

/* Worker threads (--threads; 0: one per CPU). */
static unsigned threads;

/* Caps given on the command line (0: the library's default). */
static struct {
	int which;
	const char *name;
	uint64_t value;
	int set;
} caps[] = {{MC_LIMIT_MANIFEST_BYTES, "max-manifest-bytes", 0, 0},
	    {MC_LIMIT_ARTIFACTS, "max-artifacts", 0, 0},
	    {MC_LIMIT_ARTIFACT_BYTES, "max-artifact-bytes", 0, 0},
	    {MC_LIMIT_TOTAL_BYTES, "max-total-bytes", 0, 0},
	    {MC_LIMIT_EXPANSION, "max-expansion", 0, 0}};

/* ---- progress ---- */

struct progress {
	int on;
	int last;
};

static void
on_progress(void *ud, const char *phase, uint64_t done, uint64_t total)
{
	struct progress *p = ud;
	int pct = total ? (int)(done * 100 / total) : 100;

	if (!p->on || pct == p->last)
		return;
	p->last = pct;
	fprintf(stderr, "\r%s: %3d%%", phase, pct);
	if (pct == 100)
		fprintf(stderr, "\r\033[K");
	fflush(stderr);
}

static mc_ctx *
new_ctx(struct progress *p)
{
	mc_ctx *ctx;
	int rc = mc_ctx_new(&ctx);

	if (rc != MC_OK) {
		say(stderr, "%s: cannot start: %s", PROG, mc_strerror(rc));
		exit(EXIT_USAGE);
	}
	p->on = !quiet && isatty(STDERR_FILENO);
	p->last = -1;
	mc_ctx_set_progress(ctx, on_progress, p);
	if (mc_ctx_set_threads(ctx, threads) != MC_OK)
		usage_error("--threads: %u is not valid", threads);
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++)
		if (caps[i].set && mc_ctx_set_limit(ctx, caps[i].which, caps[i].value) != MC_OK)
			usage_error("--%s: %llu is not a valid cap", caps[i].name,
				    (unsigned long long)caps[i].value);
	return ctx;
}

/* ---- passwords ---- */

static const char *password_file;



static int
read_password(void *ud, const char *prompt, char *buf, size_t len)
{
	FILE *f;
	struct termios old, noecho;
	int tty_ok;
	size_t n;

	if (password_file != NULL) {
		if ((f = fopen(password_file, "r")) == NULL) {
			say(stderr, "%s: %s: %s", PROG, password_file, strerror(errno));
			return MC_ERR_IO;
		}
	} else if ((f = fopen("/dev/tty", "r+")) == NULL) {
		say(stderr, "%s: a password is needed and there is no terminal; use --password-file",
		    PROG);
		return MC_ERR_INVALID;
	}
	tty_ok = password_file == NULL && tcgetattr(fileno(f), &old) == 0;
	if (password_file == NULL) {
		fputs(prompt, f);
		fflush(f);
	}
	if (tty_ok) {
		noecho = old;
		noecho.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fileno(f), TCSAFLUSH, &noecho);
	}
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	if (tty_ok) {
		tcsetattr(fileno(f), TCSAFLUSH, &old);
		fputs("\n", f);
	}
	fclose(f);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return MC_OK;
}

/* ---- option tables ---- */

enum {
	OPT_FROM_TORCH = 256, OPT_FROM_DIR, OPT_LABEL, OPT_BUNDLE_VERSION, OPT_EXPIRES,
	OPT_LEVEL, OPT_NO_COMPRESS, OPT_JSON, OPT_THRESHOLD, OPT_MIN_VERSION, OPT_CACHE_DIR,
	OPT_TYPES, OPT_DRY_RUN, OPT_INSECURE, OPT_TORCH, OPT_PASSWORD_FILE, OPT_NOW,
	OPT_FROM_TRITON, OPT_KEEP_UNKNOWN, OPT_TRITON_DIR, OPT_TORCH_FORMAT, OPT_LABEL_FROM_ENV,
	OPT_LABELS_JSON, OPT_REQUIRE, OPT_EXPLAIN, OPT_THREADS, OPT_SYNC, OPT_CAP /* + 0..4 */
};

#define COMMON_LONG {"help", no_argument, NULL, 'h'}, {"quiet", no_argument, NULL, 'q'}, \
	{"password-file", required_argument, NULL, OPT_PASSWORD_FILE}, \
	{"max-manifest-bytes", required_argument, NULL, OPT_CAP + 0}, \
	{"max-artifacts", required_argument, NULL, OPT_CAP + 1}, \
	{"max-artifact-bytes", required_argument, NULL, OPT_CAP + 2}, \
	{"max-total-bytes", required_argument, NULL, OPT_CAP + 3}, \
	{"max-expansion", required_argument, NULL, OPT_CAP + 4}, \
	{"threads", required_argument, NULL, OPT_THREADS}

/* The trust options of verify, load, export and merge. */
#define TRUST_LONG {"threshold", required_argument, NULL, OPT_THRESHOLD}, \
	{"min-version", required_argument, NULL, OPT_MIN_VERSION}, \
	{"now", required_argument, NULL, OPT_NOW}, \
	{"require", required_argument, NULL, OPT_REQUIRE}, \
	{"insecure-no-verify", no_argument, NULL, OPT_INSECURE}

/* getopt_long with its complaints printed by say(): getopt's own print the argument
 * raw, and an argument can hold whatever a file name holds. */
static int
next_opt(int argc, char **argv, const char *shortopts, const struct option *lo)
{
	int c;

	opterr = 0;
	if ((c = getopt_long(argc, argv, shortopts, lo, NULL)) != '?')
		return c;
	if (optopt == 0)
		say(stderr, "%s: unknown or ambiguous option '%s'", argv[0], argv[optind - 1]);
	else if (optopt < 256 && strchr(shortopts, optopt) == NULL)
		say(stderr, "%s: invalid option -- '%c'", argv[0], optopt);
	else
		say(stderr, "%s: option '%s' %s", argv[0], argv[optind - 1],
		    strchr(argv[optind - 1], '=') != NULL ? "takes no argument" : "requires an argument");
	return c;
}

static int
common_opt(int c)
{
	switch (c) {
	case 'h':
		fputs(usage_text, stdout);
		exit(0);
	case 'q':
		quiet = 1;
		return 1;
	case OPT_PASSWORD_FILE:
		password_file = optarg;
		return 1;
	case OPT_THREADS: {
		uint64_t n;
		if (parse_u64(optarg, &n) != 0 || n > 1024)
			usage_error("--threads takes 0 to 1024, not '%s'", optarg);
		threads = (unsigned)n;
		return 1;
	}
	case OPT_CAP + 0: case OPT_CAP + 1: case OPT_CAP + 2: case OPT_CAP + 3: case OPT_CAP + 4:
		if (parse_u64(optarg, &caps[c - OPT_CAP].value) != 0)
			usage_error("--%s takes a whole number, not '%s'", caps[c - OPT_CAP].name, optarg);
		caps[c - OPT_CAP].set = 1;
		return 1;
	case '?':
		try_help();
	default:
		return 0;
	}
}

/* ---- trust options shared by verify, load and export ---- */

struct trust {
	const char *pubs[32];
	size_t npubs;
	char *require[64];
	size_t nrequire;
	unsigned threshold;
	uint64_t min_version;
	int insecure;
	int64_t now;
	int have_now;
};

static int
trust_opt(struct trust *t, int c)
{
	uint64_t v;

	switch (c) {
	case 'p':
		if (t->npubs == sizeof t->pubs / sizeof t->pubs[0])
			usage_error("too many public keys (at most %s)", "32");
		t->pubs[t->npubs++] = optarg;
		return 1;
	case OPT_THRESHOLD:
		if (parse_u64(optarg, &v) != 0 || v == 0 || v > 32)
			usage_error("--threshold takes a number from 1 to 32, not '%s'", optarg);
		t->threshold = (unsigned)v;
		return 1;
	case OPT_MIN_VERSION:
		if (parse_u64(optarg, &v) != 0)
			usage_error("--min-version takes a whole number, not '%s'", optarg);
		t->min_version = v;
		return 1;
	case OPT_INSECURE:
		t->insecure = 1;
		return 1;
	case OPT_REQUIRE:
		if (strchr(optarg, '=') == NULL || optarg[0] == '=')
			usage_error("--require takes KEY=VALUE, not '%s'", optarg);
		if (t->nrequire == sizeof t->require / sizeof t->require[0])
			usage_error("too many --require (at most %s)", "64");
		t->require[t->nrequire++] = optarg;
		return 1;
	case OPT_NOW:
		if (parse_u64(optarg, &v) != 0 || v > INT64_MAX)
			usage_error("--now takes a Unix time, not '%s'", optarg);
		t->now = (int64_t)v;
		t->have_now = 1;
		return 1;
	default:
		return 0;
	}
}

/* Loads the keys and applies the policy to b. Keys are returned for freeing. */
static int
apply_trust(mc_ctx *ctx, mc_bundle *b, const struct trust *t, mc_pubkey **keys)
{
	size_t i;
	int rc;

	for (i = 0; i < t->npubs; i++) {
		if ((rc = mc_pubkey_load(ctx, t->pubs[i], &keys[i])) != MC_OK ||
		    (rc = mc_bundle_trust(b, keys[i])) != MC_OK)
			return rc;
	}
	if (t->threshold && (rc = mc_bundle_set_threshold(b, t->threshold)) != MC_OK)
		return rc;
	for (i = 0; i < t->nrequire; i++) {
		char *eq = strchr(t->require[i], '=');
		*eq = '\0';
		rc = mc_bundle_require_label(b, t->require[i], eq + 1);
		*eq = '=';
		if (rc != MC_OK)
			return rc;
	}
	if ((rc = mc_bundle_set_min_version(b, t->min_version)) != MC_OK)
		return rc;
	if (t->have_now && (rc = mc_bundle_set_now(b, t->now)) != MC_OK)
		return rc;
	return mc_bundle_set_insecure(b, t->insecure);
}

static void
free_keys(mc_pubkey **keys, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		mc_pubkey_free(keys[i]);
}

/* ---- keygen ---- */

static int
cmd_keygen(int argc, char **argv)
{
	static const struct option lo[] = {COMMON_LONG, {"force", no_argument, NULL, 'f'},
					   {NULL, 0, NULL, 0}};
	const char *pub = NULL, *sec = NULL;
	int c, unencrypted = 0, force = 0, rc;
	char pw1[1024], pw2[1024];
	struct progress p;
	mc_seckey *sk;
	mc_pubkey *pk;
	mc_ctx *ctx;

	while ((c = next_opt(argc, argv, "p:s:Wfhq", lo)) != -1) {
		if (common_opt(c))
			continue;
		switch (c) {
		case 'p': pub = optarg; break;
		case 's': sec = optarg; break;
		case 'W': unencrypted = 1; break;
		case 'f': force = 1; break;
		default: usage_error("keygen: unexpected option%s", "");
		}
	}
	if (pub == NULL || sec == NULL || optind != argc)
		usage_error("keygen needs -p PUBFILE and -s SECFILE%s", "");
	ctx = new_ctx(&p);
	if (!unencrypted) {
		if (read_password(NULL, "Password for the new secret key: ", pw1, sizeof pw1) != MC_OK)
			return EXIT_USAGE;
		if (password_file == NULL &&
		    (read_password(NULL, "Password (again): ", pw2, sizeof pw2) != MC_OK ||
		     strcmp(pw1, pw2) != 0)) {
			say(stderr, "%s: the passwords differ", PROG);
			return EXIT_USAGE;
		}
		if (pw1[0] == '\0') {
			say(stderr, "%s: empty password; use -W for an unencrypted key", PROG);
			return EXIT_USAGE;
		}
	}
	if ((rc = mc_keygen(ctx, &sk, &pk)) != MC_OK)
		return fail_free(ctx, rc);
	rc = mc_keypair_save(ctx, sk, pk, pub, sec, unencrypted ? NULL : pw1, force);
	memset(pw1, 0, sizeof pw1);
	memset(pw2, 0, sizeof pw2);
	if (rc != MC_OK) {
		mc_seckey_free(sk);
		mc_pubkey_free(pk);
		return fail_free(ctx, rc);
	}
	if (!quiet)
		say(stdout, "key %s: public key in %s, secret key in %s", mc_pubkey_id(pk), pub, sec);
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	mc_ctx_free(ctx);
	return 0;
}

/* ---- pack ---- */

struct scan_tally {
	int verbose;
	size_t skipped;
	struct {
		char why[96];
		size_t n;
	} reasons[16];
	size_t nreasons;
};

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

static int
load_signers(mc_ctx *ctx, const char **secs, size_t n, mc_seckey **keys)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = mc_seckey_load(ctx, secs[i], read_password, NULL, &keys[i])) != MC_OK)
			return rc;
	return MC_OK;
}

/* The creation time: SOURCE_DATE_EPOCH when set (reproducible bundles), else now. */
static int
set_created(mc_writer *w)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	uint64_t t = (uint64_t)time(NULL);

	if (sde != NULL && sde[0] != '\0' && parse_u64(sde, &t) != 0)
		usage_error("SOURCE_DATE_EPOCH is not a Unix time: '%s'", sde);
	return mc_writer_set_created(w, (int64_t)t);
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

static int
cmd_pack(int argc, char **argv)
{
	static const struct option lo[] = {
		COMMON_LONG,
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
		{"json", no_argument, NULL, OPT_JSON},
		{"verbose", no_argument, NULL, 'v'},
		{NULL, 0, NULL, 0}};
	const char *out = NULL, *secs[16], *srcs[256];
	int srckind[256];
	char *labels[256];
	char owned[256] = {0};
	const char *labels_json = NULL;
	size_t nsecs = 0, nsrcs = 0, nlabels = 0, i;
	uint64_t bver = 0, expires = 0, level = 3;
	int c, rc = MC_OK, json = 0, keep_unknown = 0;
	struct scan_tally tally;
	mc_seckey *keys[16] = {NULL};
	struct progress p;
	mc_writer *w = NULL;
	mc_ctx *ctx;
	char hb[32];

	memset(&tally, 0, sizeof tally);
	while ((c = next_opt(argc, argv, "o:s:vhq", lo)) != -1) {
		if (common_opt(c))
			continue;
		switch (c) {
		case 'o': out = optarg; break;
		case 's':
			if (nsecs == 16)
				usage_error("too many signing keys (at most %s)", "16");
			secs[nsecs++] = optarg;
			break;
		case OPT_FROM_TORCH:
		case OPT_FROM_DIR:
		case OPT_FROM_TRITON:
			if (nsrcs == 256)
				usage_error("too many sources (at most %s)", "256");
			srckind[nsrcs] = c;
			srcs[nsrcs++] = optarg;
			break;
		case OPT_LABEL:
			if (nlabels == 256)
				usage_error("too many labels (at most %s)", "256");
			if (strchr(optarg, '=') == NULL)
				usage_error("--label takes KEY=VALUE, not '%s'", optarg);
			labels[nlabels++] = optarg;
			break;
		case OPT_LABEL_FROM_ENV: {
			const char *v = getenv(optarg);
			size_t n;
			if (v == NULL)
				usage_error("--label-from-env %s: the variable is not set", optarg);
			if (nlabels == 256)
				usage_error("too many labels (at most %s)", "256");
			n = strlen(optarg) + strlen(v) + 2;
			if ((labels[nlabels] = malloc(n)) == NULL)
				usage_error("out of memory%s", "");
			snprintf(labels[nlabels], n, "%s=%s", optarg, v);
			owned[nlabels++] = 1;
			break;
		}
		case OPT_LABELS_JSON:
			labels_json = optarg;
			break;
		case OPT_BUNDLE_VERSION:
			if (parse_u64(optarg, &bver) != 0)
				usage_error("--bundle-version takes a whole number, not '%s'", optarg);
			break;
		case OPT_EXPIRES:
			if (parse_u64(optarg, &expires) != 0 || expires == 0)
				usage_error("--expires takes a Unix time, not '%s'", optarg);
			break;
		case OPT_LEVEL:
			if (parse_u64(optarg, &level) != 0 || level < 1 || level > 19)
				usage_error("--level takes 1 to 19, not '%s'", optarg);
			break;
		case OPT_NO_COMPRESS: level = 0; break;
		case OPT_KEEP_UNKNOWN: keep_unknown = 1; break;
		case OPT_JSON: json = 1; break;
		case 'v': tally.verbose = 1; break;
		default: usage_error("pack: unexpected option%s", "");
		}
	}
	if (out == NULL)
		usage_error("pack needs -o BUNDLE%s", "");
	if (optind != argc)
		usage_error("pack: unexpected argument '%s'", argv[optind]);
	if (nsrcs == 0)
		usage_error("pack needs at least one --from-torch BLOB or --from-dir DIR%s", "");
	ctx = new_ctx(&p);
	if ((rc = mc_writer_new(ctx, &w)) != MC_OK)
		return fail_free(ctx, rc);
	rc = set_created(w);
	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, bver);
	if (rc == MC_OK)
		rc = mc_writer_set_expires(w, (int64_t)expires);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)level);
	if (rc == MC_OK)
		rc = mc_writer_set_keep_unknown(w, keep_unknown);
	if (rc == MC_OK && labels_json != NULL)
		rc = labels_from_json(w, labels_json);
	for (i = 0; rc == MC_OK && i < nlabels; i++) {
		char *eq = strchr(labels[i], '=');
		*eq = '\0';
		rc = mc_writer_set_label(w, labels[i], eq + 1);
		*eq = '=';
	}
	if (rc == MC_OK)
		rc = load_signers(ctx, secs, nsecs, keys);
	for (i = 0; rc == MC_OK && i < nsecs; i++)
		rc = mc_writer_add_signer(w, keys[i]);
	for (i = 0; rc == MC_OK && i < nsrcs; i++)
		rc = srckind[i] == OPT_FROM_TORCH ? mc_writer_add_torch_blob(w, srcs[i])
		     : srckind[i] == OPT_FROM_DIR ? mc_writer_add_cache_dir(w, srcs[i], on_scan, &tally)
						  : mc_writer_add_triton_dir(w, srcs[i], on_scan, &tally);
	if (rc == MC_OK && mc_writer_artifact_count(w) == 0) {
		say(stderr, "%s: no artifacts found in the sources; nothing written", PROG);
		rc = MC_ERR_INVALID;
		goto done;
	}
	if (rc == MC_OK)
		rc = mc_writer_save(w, out);
	if (rc != MC_OK) {
		rc = fail(ctx, rc);
		goto done;
	}
	human_bytes(mc_writer_total_bytes(w), hb, sizeof hb);
	if (json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "bundle", out);
		cJSON_AddNumberToObject(j, "artifacts", (double)mc_writer_artifact_count(w));
		cJSON_AddNumberToObject(j, "bytes", (double)mc_writer_total_bytes(w));
		cJSON_AddNumberToObject(j, "signatures", (double)nsecs);
		cJSON_AddNumberToObject(j, "skipped_files", (double)tally.skipped);
		print_json(j);
	} else if (!quiet) {
		say(stdout, "packed %zu artifacts (%s) into %s, %zu signature%s",
		       mc_writer_artifact_count(w), hb, out, nsecs, nsecs == 1 ? "" : "s");
		if (tally.skipped > 0) {
			char line[2048];
			size_t at = (size_t)snprintf(line, sizeof line, "skipped %zu file%s (-v lists them):",
						     tally.skipped, tally.skipped == 1 ? "" : "s");
			for (i = 0; i < tally.nreasons && at < sizeof line; i++)
				at += (size_t)snprintf(line + at, sizeof line - at, "%s %zu %s", i ? "," : "",
						       tally.reasons[i].n, tally.reasons[i].why);
			say(stdout, "%s", line);
		}
	}
	rc = 0;
done:
	for (i = 0; i < nlabels; i++)
		if (owned[i])
			free(labels[i]);
	for (i = 0; i < nsecs; i++)
		mc_seckey_free(keys[i]);
	mc_writer_free(w);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- sign ---- */

static int
cmd_sign(int argc, char **argv)
{
	static const struct option lo[] = {COMMON_LONG, {"output", required_argument, NULL, 'o'},
					   {NULL, 0, NULL, 0}};
	const char *sec = NULL, *out = NULL, *path;
	struct progress p;
	mc_seckey *sk = NULL;
	mc_bundle *b = NULL;
	mc_ctx *ctx;
	int c, rc;

	while ((c = next_opt(argc, argv, "s:o:hq", lo)) != -1) {
		if (common_opt(c))
			continue;
		switch (c) {
		case 's': sec = optarg; break;
		case 'o': out = optarg; break;
		default: usage_error("sign: unexpected option%s", "");
		}
	}
	if (optind + 1 != argc || sec == NULL)
		usage_error("sign needs BUNDLE and -s SECFILE%s", "");
	path = argv[optind];
	ctx = new_ctx(&p);
	if ((rc = mc_seckey_load(ctx, sec, read_password, NULL, &sk)) != MC_OK ||
	    (rc = mc_bundle_open(ctx, path, &b)) != MC_OK ||
	    (rc = mc_bundle_add_signature(b, sk, out ? out : path)) != MC_OK) {
		rc = fail(ctx, rc);
	} else {
		if (!quiet)
			say(stdout, "signed %s with key %s", out ? out : path, mc_seckey_id(sk));
		rc = 0;
	}
	mc_bundle_free(b);
	mc_seckey_free(sk);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- verify ---- */

static int
cmd_verify(int argc, char **argv)
{
	static const struct option lo[] = {
		COMMON_LONG,
		TRUST_LONG,
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0}};
	struct trust t;
	mc_pubkey *keys[32] = {NULL};
	struct progress p;
	mc_bundle *b = NULL;
	mc_ctx *ctx;
	int c, rc, json = 0;

	memset(&t, 0, sizeof t);
	while ((c = next_opt(argc, argv, "p:hq", lo)) != -1) {
		if (common_opt(c) || trust_opt(&t, c))
			continue;
		if (c == OPT_JSON)
			json = 1;
		else
			usage_error("verify: unexpected option%s", "");
	}
	if (optind + 1 != argc)
		usage_error("verify needs exactly one BUNDLE%s", "");
	if (t.npubs == 0 && !t.insecure)
		usage_error("verify needs at least one -p PUBFILE (or --insecure-no-verify: integrity "
			    "only)%s", "");
	ctx = new_ctx(&p);
	rc = mc_bundle_open(ctx, argv[optind], &b);
	if (rc == MC_OK)
		rc = apply_trust(ctx, b, &t, keys);
	if (rc == MC_OK)
		rc = mc_bundle_verify(b);
	if (json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "bundle", argv[optind]);
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
	if (rc != MC_OK) {
		rc = json ? (mc_status_is_verification_failure(rc) ? EXIT_VERIFY : EXIT_USAGE)
			  : fail(ctx, rc);
	} else {
		if (!json && !quiet)
			say(stdout, "%s: OK (%zu artifacts, bundle version %" PRIu64 ", %zu signature%s)",
			       argv[optind], mc_bundle_artifact_count(b), mc_bundle_version(b),
			       mc_bundle_signature_count(b), mc_bundle_signature_count(b) == 1 ? "" : "s");
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t.npubs);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- reports of load, list --explain and export ---- */

struct type_sum {
	char type[40];
	size_t count;
	uint64_t bytes;
	size_t unchanged;
};

struct load_report {
	int json;
	int dry;
	int silent;  /* count only */
	int explain; /* a line per artifact with its key and size */
	mc_ctx *ctx;
	const char *root;
	cJSON *arts;
	struct type_sum sums[64];
	size_t nsums;
	size_t installed, unchanged, planned;
	uint64_t bytes;
};

static void
on_artifact(void *ud, int what, const char *type, const char *key, const char *dest, uint64_t size)
{
	struct load_report *r = ud;
	const char *action = what == MC_LOAD_INSTALLED ? "installed"
			     : what == MC_LOAD_UNCHANGED ? "unchanged" : "would-install";
	char full[8192] = "";
	size_t i;

	for (i = 0; i < r->nsums && strcmp(r->sums[i].type, type) != 0; i++)
		;
	if (i == r->nsums && r->nsums < 64) {
		snprintf(r->sums[i].type, sizeof r->sums[i].type, "%s", type);
		r->nsums++;
	}
	if (i < r->nsums) {
		if (what == MC_LOAD_UNCHANGED)
			r->sums[i].unchanged++;
		else {
			r->sums[i].count++;
			r->sums[i].bytes += size;
		}
	}
	if (what == MC_LOAD_INSTALLED)
		r->installed++, r->bytes += size;
	else if (what == MC_LOAD_UNCHANGED)
		r->unchanged++;
	else
		r->planned++, r->bytes += size;
	if (dest != NULL && r->ctx != NULL) {
		const char *tier = mc_ctx_type_tier(r->ctx, type), *root = NULL;
		if (tier != NULL && mc_ctx_tier_root(r->ctx, tier, &root) == MC_OK)
			snprintf(full, sizeof full, "%s/%s", root, dest);
		else
			snprintf(full, sizeof full, "%s", dest);
	}
	if (r->json) {
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "type", type);
		cJSON_AddStringToObject(a, "key", key);
		cJSON_AddNumberToObject(a, "size", (double)size);
		cJSON_AddStringToObject(a, "dest", full);
		cJSON_AddStringToObject(a, "action", action);
		if (r->explain)
			cJSON_AddBoolToObject(a, "identical_file_present", what == MC_LOAD_UNCHANGED);
		cJSON_AddItemToArray(r->arts, a);
	} else if (r->explain && !quiet) {
		char hb[32];
		human_bytes(size, hb, sizeof hb);
		say(stdout, "%-12s %10s  %-13s %s", type, hb,
		    what == MC_LOAD_UNCHANGED ? "already there" : "would install", key);
		say(stdout, "%27s-> %s", "", full);
	} else if (r->dry && !quiet && !r->silent) {
		say(stdout, "%-13s %-12s %s", action, type, full);
	}
}

/* ---- load ---- */

/* ---- list ---- */

/* list --explain: where each artifact would land, and whether it is there already. */
static int
explain(mc_ctx *ctx, mc_bundle *b, const char *path, int json)
{
	struct load_report r;
	int rc;

	memset(&r, 0, sizeof r);
	r.dry = 1;
	r.explain = 1;
	r.json = json;
	r.ctx = ctx;
	if (json)
		r.arts = cJSON_CreateArray();
	if ((rc = mc_bundle_set_insecure(b, 1)) != MC_OK ||
	    (rc = mc_bundle_load(b, MC_LOAD_DRY_RUN, on_artifact, &r)) != MC_OK) {
		cJSON_Delete(r.arts);
		return fail(ctx, rc);
	}
	if (json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "bundle", path);
		cJSON_AddBoolToObject(j, "signatures_checked", 0);
		cJSON_AddNumberToObject(j, "would_install", (double)r.planned);
		cJSON_AddNumberToObject(j, "already_there", (double)r.unchanged);
		cJSON_AddItemToObject(j, "artifacts", r.arts);
		print_json(j);
	} else if (!quiet) {
		say(stdout, "%zu to install, %zu already there (signatures not checked)", r.planned,
		       r.unchanged);
	}
	return 0;
}

static int
cmd_list(int argc, char **argv)
{
	static const struct option lo[] = {COMMON_LONG, {"json", no_argument, NULL, OPT_JSON},
					   {"explain", no_argument, NULL, OPT_EXPLAIN},
					   {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
					   {"triton-dir", required_argument, NULL, OPT_TRITON_DIR},
					   {NULL, 0, NULL, 0}};
	const char *cache_dir = NULL, *triton_dir = NULL;
	struct progress p;
	mc_bundle *b = NULL;
	mc_ctx *ctx;
	size_t i, n;
	int c, rc, json = 0, expl = 0;

	while ((c = next_opt(argc, argv, "hq", lo)) != -1) {
		if (common_opt(c))
			continue;
		if (c == OPT_JSON)
			json = 1;
		else if (c == OPT_EXPLAIN)
			expl = 1;
		else if (c == OPT_CACHE_DIR)
			cache_dir = optarg;
		else if (c == OPT_TRITON_DIR)
			triton_dir = optarg;
		else
			usage_error("list: unexpected option%s", "");
	}
	if (optind + 1 != argc)
		usage_error("list needs exactly one BUNDLE%s", "");
	ctx = new_ctx(&p);
	if ((cache_dir != NULL && (rc = mc_ctx_set_tier_root(ctx, "inductor", cache_dir)) != MC_OK) ||
	    (triton_dir != NULL && (rc = mc_ctx_set_tier_root(ctx, "triton", triton_dir)) != MC_OK) ||
	    (rc = mc_bundle_open(ctx, argv[optind], &b)) != MC_OK) {
		rc = fail(ctx, rc);
		mc_ctx_free(ctx);
		return rc;
	}
	if (expl) {
		rc = explain(ctx, b, argv[optind], json);
		mc_bundle_free(b);
		mc_ctx_free(ctx);
		return rc;
	}
	n = mc_bundle_artifact_count(b);
	if (json) {
		cJSON *j = cJSON_CreateObject(), *labels, *sigs, *arts;
		cJSON_AddStringToObject(j, "bundle", argv[optind]);
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
		arts = cJSON_AddArrayToObject(j, "artifacts");
		for (i = 0; i < n; i++) {
			const char *type, *key, *hash;
			uint64_t size;
			cJSON *a;
			if ((rc = mc_bundle_artifact(b, i, &type, &key, &size, &hash)) != MC_OK) {
				cJSON_Delete(j);
				goto fail;
			}
			a = cJSON_CreateObject();
			cJSON_AddStringToObject(a, "type", type);
			cJSON_AddStringToObject(a, "key", key);
			cJSON_AddNumberToObject(a, "size", (double)size);
			cJSON_AddStringToObject(a, "hash", hash);
			cJSON_AddItemToArray(arts, a);
		}
		print_json(j);
	} else {
		char hb[32];
		say(stdout, "bundle %s (format %d, not verified)", argv[optind], MC_FORMAT_VERSION);
		char exp[48] = "";
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
				goto fail;
			human_bytes(size, hb, sizeof hb);
			say(stdout, "%-12s %10s  %s", type, hb, key);
		}
		say(stdout, "%zu artifacts", n);
	}
	mc_bundle_free(b);
	mc_ctx_free(ctx);
	return 0;
fail:
	/* The artifact table of a large bundle is read from a temp file as it is listed. */
	fflush(stdout);
	rc = fail(ctx, rc);
	mc_bundle_free(b);
	mc_ctx_free(ctx);
	return rc;
}

static int
cmd_load(int argc, char **argv)
{
	static const struct option lo[] = {
		COMMON_LONG,
		TRUST_LONG,
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"triton-dir", required_argument, NULL, OPT_TRITON_DIR},
		{"types", required_argument, NULL, OPT_TYPES},
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{"sync", no_argument, NULL, OPT_SYNC},
		{"json", no_argument, NULL, OPT_JSON},
		{NULL, 0, NULL, 0}};
	struct trust t;
	mc_pubkey *keys[32] = {NULL};
	const char *cache_dir = NULL, *types = NULL, *triton_dir = NULL;
	struct load_report r;
	struct progress p;
	mc_bundle *b = NULL;
	mc_ctx *ctx;
	int c, rc, sync = 0;
	size_t i;

	memset(&t, 0, sizeof t);
	memset(&r, 0, sizeof r);
	while ((c = next_opt(argc, argv, "p:hq", lo)) != -1) {
		if (common_opt(c) || trust_opt(&t, c))
			continue;
		switch (c) {
		case OPT_CACHE_DIR: cache_dir = optarg; break;
		case OPT_TRITON_DIR: triton_dir = optarg; break;
		case OPT_TYPES: types = optarg; break;
		case OPT_DRY_RUN: r.dry = 1; break;
		case OPT_SYNC: sync = 1; break;
		case OPT_JSON: r.json = 1; break;
		default: usage_error("load: unexpected option%s", "");
		}
	}
	if (optind + 1 != argc)
		usage_error("load needs exactly one BUNDLE%s", "");
	if (t.npubs == 0 && !t.insecure)
		usage_error("load needs -p PUBFILE (or --insecure-no-verify to skip signature "
			    "checks)%s", "");
	if (t.npubs > 0 && t.insecure)
		usage_error("-p and --insecure-no-verify do not go together%s", "");
	ctx = new_ctx(&p);
	if (cache_dir != NULL && (rc = mc_ctx_set_tier_root(ctx, "inductor", cache_dir)) != MC_OK)
		return fail_free(ctx, rc);
	if (triton_dir != NULL && (rc = mc_ctx_set_tier_root(ctx, "triton", triton_dir)) != MC_OK)
		return fail_free(ctx, rc);
	if ((rc = mc_ctx_tier_root(ctx, "inductor", &r.root)) != MC_OK)
		return fail_free(ctx, rc);
	rc = mc_bundle_open(ctx, argv[optind], &b);
	if (rc == MC_OK)
		rc = apply_trust(ctx, b, &t, keys);
	if (rc == MC_OK && types != NULL) {
		char *copy = strdup(types), *tok, *save = NULL;
		if (copy == NULL)
			rc = MC_ERR_NOMEM;
		for (tok = copy ? strtok_r(copy, ",", &save) : NULL; rc == MC_OK && tok != NULL;
		     tok = strtok_r(NULL, ",", &save))
			if ((rc = mc_bundle_select_type(b, tok)) != MC_OK)
				rc = MC_ERR_INVALID;
		free(copy);
	}
	if (r.json)
		r.arts = cJSON_CreateArray();
	r.ctx = ctx;
	if (rc == MC_OK)
		rc = mc_bundle_load(b, r.dry ? MC_LOAD_DRY_RUN : sync ? MC_LOAD_SYNC : 0, on_artifact,
				    &r);
	if (rc != MC_OK) {
		cJSON_Delete(r.arts);
		rc = fail(ctx, rc);
		goto done;
	}
	if (r.json) {
		cJSON *j = cJSON_CreateObject(), *sum;
		cJSON_AddStringToObject(j, "bundle", argv[optind]);
		cJSON_AddStringToObject(j, "cache_dir", r.root);
		cJSON_AddBoolToObject(j, "dry_run", r.dry);
		cJSON_AddBoolToObject(j, "synced", sync && !r.dry);
		cJSON_AddBoolToObject(j, "verified", !t.insecure);
		cJSON_AddNumberToObject(j, "installed", (double)r.installed);
		cJSON_AddNumberToObject(j, "unchanged", (double)r.unchanged);
		cJSON_AddNumberToObject(j, "would_install", (double)r.planned);
		cJSON_AddNumberToObject(j, "bytes", (double)r.bytes);
		sum = cJSON_AddObjectToObject(j, "types");
		for (i = 0; i < r.nsums; i++) {
			cJSON *s = cJSON_AddObjectToObject(sum, r.sums[i].type);
			cJSON_AddNumberToObject(s, "count", (double)r.sums[i].count);
			cJSON_AddNumberToObject(s, "bytes", (double)r.sums[i].bytes);
			cJSON_AddNumberToObject(s, "unchanged", (double)r.sums[i].unchanged);
		}
		cJSON_AddItemToObject(j, "artifacts", r.arts);
		print_json(j);
	} else if (!quiet) {
		char hb[32];
		if (t.insecure)
			say(stderr, "%s: warning: signatures were not checked (--insecure-no-verify)",
			    PROG);
		say(stdout, "%s %s into %s", r.dry ? "would warm" : "warmed", argv[optind], r.root);
		for (i = 0; i < r.nsums; i++) {
			human_bytes(r.sums[i].bytes, hb, sizeof hb);
			char there[48] = "";
			if (r.sums[i].unchanged)
				snprintf(there, sizeof there, "  (%zu already there)", r.sums[i].unchanged);
			say(stdout, "  %-13s %5zu file%s %10s%s", r.sums[i].type, r.sums[i].count,
			    r.sums[i].count == 1 ? " " : "s", hb, there);
		}
		human_bytes(r.bytes, hb, sizeof hb);
		say(stdout, "%zu file%s %s (%s), %zu already there", r.dry ? r.planned : r.installed,
		       (r.dry ? r.planned : r.installed) == 1 ? "" : "s",
		       r.dry ? "to install" : "installed", hb, r.unchanged);
	}
	rc = 0;
done:
	mc_bundle_free(b);
	free_keys(keys, t.npubs);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- export ---- */

static int
cmd_export(int argc, char **argv)
{
	static const struct option lo[] = {
		COMMON_LONG,
		TRUST_LONG,
		{"torch", required_argument, NULL, OPT_TORCH},
		{"torch-format", required_argument, NULL, OPT_TORCH_FORMAT},
		{NULL, 0, NULL, 0}};
	const char *out = NULL;
	mc_pubkey *keys[32] = {NULL};
	struct load_report left;
	struct trust t;
	struct progress p;
	mc_bundle *b = NULL;
	mc_ctx *ctx;
	int c, rc, format = MC_TORCH_FORMAT_CURRENT;
	size_t i;

	memset(&t, 0, sizeof t);
	memset(&left, 0, sizeof left);
	left.dry = 1;
	left.silent = 1;
	while ((c = next_opt(argc, argv, "p:hq", lo)) != -1) {
		if (common_opt(c) || trust_opt(&t, c))
			continue;
		if (c == OPT_TORCH)
			out = optarg;
		else if (c == OPT_TORCH_FORMAT && strcmp(optarg, "2.7") == 0)
			format = MC_TORCH_FORMAT_2_7;
		else if (c == OPT_TORCH_FORMAT && (strcmp(optarg, "current") == 0 || strcmp(optarg, "2.8") == 0))
			format = MC_TORCH_FORMAT_CURRENT;
		else if (c == OPT_TORCH_FORMAT)
			usage_error("--torch-format takes 2.7 or current, not '%s'", optarg);
		else
			usage_error("export: unexpected option%s", "");
	}
	if (optind + 1 != argc || out == NULL)
		usage_error("export needs BUNDLE and --torch OUTFILE%s", "");
	/* Without keys, export checks integrity only, and says so. */
	if (t.npubs == 0)
		t.insecure = 1;
	ctx = new_ctx(&p);
	rc = mc_bundle_open(ctx, argv[optind], &b);
	if (rc == MC_OK)
		rc = apply_trust(ctx, b, &t, keys);
	if (rc == MC_OK)
		rc = mc_bundle_export_torch_as(b, out, format, on_artifact, &left);
	if (rc != MC_OK) {
		rc = fail(ctx, rc);
	} else {
		if (!quiet) {
			if (t.npubs == 0)
				say(stderr, "%s: warning: signatures not checked (no -p given)", PROG);
			say(stdout, "exported %s to %s (torch %s format)", argv[optind], out,
			       format == MC_TORCH_FORMAT_2_7 ? "2.7" : "2.8+");
			for (i = 0; i < left.nsums; i++)
				say(stdout, "left out %zu %s artifact%s: not a type that format holds",
				       left.sums[i].count, left.sums[i].type, left.sums[i].count == 1 ? "" : "s");
		}
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t.npubs);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- merge ---- */

static void
on_conflict(void *ud, const char *type, const char *key)
{
	size_t *n = ud;

	(*n)++;
	if (!quiet)
		say(stderr, "%s: conflict: %s %s differs between bundles; kept the later one", PROG,
			type, key);
}

static int
cmd_merge(int argc, char **argv)
{
	static const struct option lo[] = {
		COMMON_LONG,
		TRUST_LONG,
		{"output", required_argument, NULL, 'o'},
		{"label", required_argument, NULL, OPT_LABEL},
		{"bundle-version", required_argument, NULL, OPT_BUNDLE_VERSION},
		{"level", required_argument, NULL, OPT_LEVEL},
		{NULL, 0, NULL, 0}};
	const char *out = NULL, *secs[16], *labels[64];
	size_t nsecs = 0, nlabels = 0, conflicts = 0, i, k;
	mc_seckey *sk[16] = {NULL};
	uint64_t bver = 0, level = 3;
	struct trust t;
	struct progress p;
	mc_writer *w = NULL;
	mc_ctx *ctx;
	char *dir, *slash;
	int c, rc = MC_OK;

	memset(&t, 0, sizeof t);
	while ((c = next_opt(argc, argv, "o:s:p:hq", lo)) != -1) {
		if (common_opt(c) || trust_opt(&t, c))
			continue;
		switch (c) {
		case 'o': out = optarg; break;
		case 's':
			if (nsecs == 16)
				usage_error("too many signing keys (at most %s)", "16");
			secs[nsecs++] = optarg;
			break;
		case OPT_LABEL:
			if (strchr(optarg, '=') == NULL || nlabels == 64)
				usage_error("--label takes KEY=VALUE (at most 64), not '%s'", optarg);
			labels[nlabels++] = optarg;
			break;
		case OPT_BUNDLE_VERSION:
			if (parse_u64(optarg, &bver) != 0)
				usage_error("--bundle-version takes a whole number, not '%s'", optarg);
			break;
		case OPT_LEVEL:
			if (parse_u64(optarg, &level) != 0 || level > 19)
				usage_error("--level takes 0 to 19, not '%s'", optarg);
			break;
		default: usage_error("merge: unexpected option%s", "");
		}
	}
	if (out == NULL || optind >= argc)
		usage_error("merge needs -o OUT and at least one input bundle%s", "");
	if (t.npubs == 0 && !t.insecure)
		usage_error("merge needs -p PUBFILE to verify its inputs (or --insecure-no-verify)%s", "");
	ctx = new_ctx(&p);
	if ((rc = mc_writer_new(ctx, &w)) != MC_OK)
		return fail_free(ctx, rc);
	mc_writer_set_conflict_fn(w, on_conflict, &conflicts);
	rc = set_created(w);
	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, bver);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)level);
	/* Contents of the inputs wait beside the output. */
	if ((dir = strdup(out)) == NULL)
		usage_error("out of memory%s", "");
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	for (i = optind; rc == MC_OK && i < (size_t)argc; i++) {
		mc_pubkey *kk[32] = {NULL};
		mc_bundle *b = NULL;

		rc = mc_bundle_open(ctx, argv[i], &b);
		if (rc == MC_OK)
			rc = apply_trust(ctx, b, &t, kk);
		if (rc == MC_OK)
			rc = mc_writer_add_bundle(w, b, dir);
		mc_bundle_free(b);
		for (k = 0; k < t.npubs; k++)
			mc_pubkey_free(kk[k]);
	}
	free(dir);
	for (i = 0; rc == MC_OK && i < nlabels; i++) {
		char *copy = strdup(labels[i]), *eq;
		if (copy == NULL)
			usage_error("out of memory%s", "");
		eq = strchr(copy, '=');
		*eq = '\0';
		rc = mc_writer_set_label(w, copy, eq + 1);
		free(copy);
	}
	if (rc == MC_OK)
		rc = load_signers(ctx, secs, nsecs, sk);
	for (i = 0; rc == MC_OK && i < nsecs; i++)
		rc = mc_writer_add_signer(w, sk[i]);
	if (rc == MC_OK)
		rc = mc_writer_save(w, out);
	if (rc != MC_OK) {
		rc = fail(ctx, rc);
	} else {
		mc_bundle *m = NULL;
		size_t n = 0;
		if (mc_bundle_open(ctx, out, &m) == MC_OK)
			n = mc_bundle_artifact_count(m);
		mc_bundle_free(m);
		if (!quiet)
			say(stdout, "merged %d bundles into %s: %zu artifacts, %zu conflict%s", argc - optind,
			       out, n, conflicts, conflicts == 1 ? "" : "s");
		rc = 0;
	}
	for (i = 0; i < nsecs; i++)
		mc_seckey_free(sk[i]);
	mc_writer_free(w);
	mc_ctx_free(ctx);
	return rc;
}

/* ---- diff ---- */

struct diff_report {
	int json;
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
	} else if (!quiet) {
		say(stdout, "%c %-12s %s", mark[what], type, key);
	}
}

static int
cmd_diff(int argc, char **argv)
{
	static const struct option lo[] = {COMMON_LONG, {"json", no_argument, NULL, OPT_JSON},
					   {NULL, 0, NULL, 0}};
	static const char *const names[] = {"added", "removed", "changed"};
	struct diff_report d;
	struct progress p;
	mc_bundle *a = NULL, *b = NULL;
	mc_ctx *ctx;
	size_t i, k;
	int c, rc;

	memset(&d, 0, sizeof d);
	while ((c = next_opt(argc, argv, "hq", lo)) != -1) {
		if (common_opt(c))
			continue;
		if (c == OPT_JSON)
			d.json = 1;
		else
			usage_error("diff: unexpected option%s", "");
	}
	if (optind + 2 != argc)
		usage_error("diff needs two bundles%s", "");
	ctx = new_ctx(&p);
	if ((rc = mc_bundle_open(ctx, argv[optind], &a)) != MC_OK ||
	    (rc = mc_bundle_open(ctx, argv[optind + 1], &b)) != MC_OK) {
		rc = fail(ctx, rc);
		goto done;
	}
	for (k = 0; k < 3; k++)
		d.lists[k] = cJSON_CreateArray();
	if ((rc = mc_bundle_diff(a, b, on_diff, &d)) != MC_OK) {
		rc = fail(ctx, rc);
		goto done;
	}
	if (d.json) {
		cJSON *j = cJSON_CreateObject(), *types;
		cJSON_AddStringToObject(j, "a", argv[optind]);
		cJSON_AddStringToObject(j, "b", argv[optind + 1]);
		types = cJSON_AddObjectToObject(j, "types");
		for (i = 0; i < d.ntypes; i++) {
			cJSON *t = cJSON_AddObjectToObject(types, d.types[i].type);
			for (k = 0; k < 3; k++)
				cJSON_AddNumberToObject(t, names[k], (double)d.types[i].n[k]);
		}
		for (k = 0; k < 3; k++) {
			cJSON_AddItemToObject(j, names[k], d.lists[k]);
			d.lists[k] = NULL;
		}
		print_json(j);
	} else if (!quiet) {
		for (i = 0; i < d.ntypes; i++)
			say(stdout, "%-12s %zu added, %zu removed, %zu changed", d.types[i].type,
			       d.types[i].n[0], d.types[i].n[1], d.types[i].n[2]);
		say(stdout, "%zu added, %zu removed, %zu changed", d.total[0], d.total[1], d.total[2]);
	}
	rc = 0;
done:
	for (k = 0; k < 3; k++)
		cJSON_Delete(d.lists[k]);
	mc_bundle_free(a);
	mc_bundle_free(b);
	mc_ctx_free(ctx);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {{"keygen", cmd_keygen}, {"pack", cmd_pack},     {"sign", cmd_sign},
		    {"verify", cmd_verify}, {"list", cmd_list},     {"load", cmd_load},
		    {"export", cmd_export}, {"merge", cmd_merge},   {"diff", cmd_diff}};
	size_t i;

	/* A file-size limit must give a clear error (EFBIG), not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		say(stdout, "megacache %s (bundle format %d)", MC_VERSION_STRING, MC_FORMAT_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (strcmp(argv[1], cmds[i].name) == 0) {
			char name[64];
			snprintf(name, sizeof name, "megacache %s", cmds[i].name);
			argv[1] = name;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	say(stderr, "%s: unknown command '%s'", PROG, argv[1]);
	try_help();
}
