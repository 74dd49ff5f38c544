/* options.c - the parsing of a command's arguments: the options all commands share, the
 * trust and tier options of those that take them, into struct tool; the command's own
 * options handed to it. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

const struct tool_cap tool_caps[TOOL_NCAPS] = {
	{MC_LIMIT_MANIFEST_BYTES, "max-manifest-bytes"}, {MC_LIMIT_ARTIFACTS, "max-artifacts"},
	{MC_LIMIT_ARTIFACT_BYTES, "max-artifact-bytes"}, {MC_LIMIT_TOTAL_BYTES, "max-total-bytes"},
	{MC_LIMIT_EXPANSION, "max-expansion"}};

static const struct option common_long[] = {
	{"help", no_argument, NULL, 'h'}, {"quiet", no_argument, NULL, 'q'},
	{"verbose", no_argument, NULL, 'v'}, {"progress", required_argument, NULL, OPT_PROGRESS},
	{"password-file", required_argument, NULL, OPT_PASSWORD_FILE},
	{"max-manifest-bytes", required_argument, NULL, OPT_CAP + 0},
	{"max-artifacts", required_argument, NULL, OPT_CAP + 1},
	{"max-artifact-bytes", required_argument, NULL, OPT_CAP + 2},
	{"max-total-bytes", required_argument, NULL, OPT_CAP + 3},
	{"max-expansion", required_argument, NULL, OPT_CAP + 4},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"registry-ca", required_argument, NULL, OPT_REGISTRY_CA},
	{"plain-http", no_argument, NULL, OPT_PLAIN_HTTP},
	{"registry-user", required_argument, NULL, OPT_REGISTRY_USER},
	{"registry-password-file", required_argument, NULL, OPT_REGISTRY_PASSWORD_FILE},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{NULL, 0, NULL, 0}};

static const struct option trust_long[] = {
	{"threshold", required_argument, NULL, OPT_THRESHOLD},
	{"min-version", required_argument, NULL, OPT_MIN_VERSION},
	{"now", required_argument, NULL, OPT_NOW},
	{"require", required_argument, NULL, OPT_REQUIRE},
	{"insecure-no-verify", no_argument, NULL, OPT_INSECURE},
	{NULL, 0, NULL, 0}};

static const struct option tier_long[] = {
	{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
	{"triton-dir", required_argument, NULL, OPT_TRITON_DIR},
	{"vllm-dir", required_argument, NULL, OPT_VLLM_DIR},
	{NULL, 0, NULL, 0}};

static const struct option json_long[] = {{"json", no_argument, NULL, OPT_JSON},
					  {NULL, 0, NULL, 0}};

int
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

/* n digits of s as a number; -1 for anything that is not a digit. */
static int
digits(const char *s, size_t n)
{
	int v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* 2026-12-01 or 2026-12-01T12:00:00Z (UTC), a real day and time of one. */
static int
parse_iso(const char *s, int64_t *v)
{
	size_t len = strlen(s);
	int f[6] = {0, 0, 0, 0, 0, 0};
	struct tm tm;
	time_t t;

	if ((len != 10 && len != 20) || s[4] != '-' || s[7] != '-' ||
	    (len == 20 && (s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z')))
		return -1;
	f[0] = digits(s, 4), f[1] = digits(s + 5, 2), f[2] = digits(s + 8, 2);
	if (len == 20)
		f[3] = digits(s + 11, 2), f[4] = digits(s + 14, 2), f[5] = digits(s + 17, 2);
	memset(&tm, 0, sizeof tm);
	tm.tm_year = f[0] - 1900, tm.tm_mon = f[1] - 1, tm.tm_mday = f[2];
	tm.tm_hour = f[3], tm.tm_min = f[4], tm.tm_sec = f[5];
	if (f[0] < 1970 || f[1] < 1 || f[2] < 1 || f[3] < 0 || f[4] < 0 || f[5] < 0 ||
	    (t = timegm(&tm)) == (time_t)-1)
		return -1;
	/* timegm() carries a day 31 of a 30-day month into the next: refused. */
	if (tm.tm_year != f[0] - 1900 || tm.tm_mon != f[1] - 1 || tm.tm_mday != f[2] ||
	    tm.tm_hour != f[3] || tm.tm_min != f[4] || tm.tm_sec != f[5])
		return -1;
	*v = (int64_t)t;
	return 0;
}

/* A time as --expires and --now take it: a Unix time; an ISO 8601 date or time in UTC
 * (2026-12-01, 2026-12-01T12:00:00Z); or +N or -N with w, d, h, m or s: that many weeks,
 * days, hours, minutes or seconds after or before now. Returns 0, or -1 for anything
 * else. */
int
parse_time(const char *s, int64_t now, int64_t *v)
{
	static const char units[] = "wdhms";
	static const uint64_t secs[] = {604800, 86400, 3600, 60, 1};
	size_t len = strlen(s);
	char num[24];
	const char *u;
	uint64_t n, d;

	if (s[0] == '+' || s[0] == '-') {
		if (len < 3 || len - 2 >= sizeof num || (u = strchr(units, s[len - 1])) == NULL)
			return -1;
		memcpy(num, s + 1, len - 2);
		num[len - 2] = '\0';
		if (parse_u64(num, &n) != 0 || now < 0 || n > (uint64_t)INT64_MAX / secs[u - units])
			return -1;
		d = n * secs[u - units];
		if (s[0] == '+' ? d > (uint64_t)(INT64_MAX - now) : d > (uint64_t)now)
			return -1;
		*v = s[0] == '+' ? now + (int64_t)d : now - (int64_t)d;
		return 0;
	}
	if (strchr(s, '-') != NULL)
		return parse_iso(s, v);
	if (parse_u64(s, &n) != 0 || n > INT64_MAX)
		return -1;
	*v = (int64_t)n;
	return 0;
}

/* t as ISO 8601 in UTC (2026-12-01T00:00:00Z), as list and verify print times. */
void
iso_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
}

/* getopt_long with its complaints printed by say(): getopt's own print the argument
 * raw, and an argument can hold whatever a file name holds. A long option must be
 * given by its whole name: getopt_long would take any unambiguous start of one
 * (--insecure for --insecure-no-verify), a trap in scripts. */
static int
next_opt(int argc, char **argv, const char *shortopts, const struct option *lo)
{
	int c, idx = -1;

	opterr = 0;
	if ((c = getopt_long(argc, argv, shortopts, lo, &idx)) != '?') {
		if (c != -1 && idx >= 0) {
			/* the option's word: the last one read, or the one before its argument */
			const char *word = argv[optind - 1];
			size_t n;
			if (lo[idx].has_arg != no_argument && optarg == argv[optind - 1] && optind >= 2)
				word = argv[optind - 2];
			n = strcspn(word + 2, "=");
			if (strncmp(word, "--", 2) != 0 || strlen(lo[idx].name) != n ||
			    strncmp(word + 2, lo[idx].name, n) != 0)
				usage_error("unknown option '%.*s' (options are never abbreviated: "
					    "did you mean --%s?)", (int)(n + 2), word, lo[idx].name);
		}
		return c;
	}
	if (optopt == 0)
		say(stderr, "%s: unknown or ambiguous option '%s'", argv[0], argv[optind - 1]);
	else if (optopt < 256 && strchr(shortopts, optopt) == NULL)
		say(stderr, "%s: invalid option -- '%c'", argv[0], optopt);
	else
		say(stderr, "%s: option '%s' %s", argv[0], argv[optind - 1],
		    strchr(argv[optind - 1], '=') != NULL ? "takes no argument" : "requires an argument");
	return c;
}

/* The close of every command's help: the options all take. */
static const char common_help[] =
	"common options (every command):\n"
	"  -q, --quiet           print nothing but errors (-h, --help: this text)\n"
	"  --progress WHEN       tty (default: on a terminal), plain (lines, for logs), none\n"
	"  --password-file F     a secret key's password (several: one per encrypted key)\n"
	"  --threads N           worker threads (default 0: one per CPU, at most 8)\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N   caps on what a bundle may declare\n"
	"  --registry-ca F, --plain-http, --registry-user U, --registry-password-file F,\n"
	"  --timeout S           for a bundle oci://HOST/REPO[:TAG|@DIGEST] (megacache --help)\n";

/* Prints the help of a command to standard output: h's, then the common options. */
void
print_help(const struct cmd_help *h)
{
	fputs(h->usage, stdout);
	fputs(h->about, stdout);
	fputs(h->options, stdout);
	printf("example: %s\n", h->example);
	fputs(common_help, stdout);
}

static int
common_opt(struct tool *t, int c, char *arg)
{
	uint64_t n;

	switch (c) {
	case 'h':
		print_help(t->help);
		exit(0);
	case 'q':
		t->quiet = 1;
		return 1;
	case 'v':
		t->verbose = 1;
		return 1;
	case OPT_PROGRESS:
		if (strcmp(arg, "tty") == 0)
			t->progress.mode = PROGRESS_TTY;
		else if (strcmp(arg, "plain") == 0)
			t->progress.mode = PROGRESS_PLAIN;
		else if (strcmp(arg, "none") == 0)
			t->progress.mode = PROGRESS_NONE;
		else
			usage_error("--progress takes tty, plain or none, not '%s'", arg);
		return 1;
	case OPT_PASSWORD_FILE:
		refuse_dash("--password-file", arg, "a password is not read from standard input "
			    "(without the option it is asked on the terminal)");
		if (t->npassword_files == MAX_SIGNERS)
			usage_error("too many --password-file (at most %d)", MAX_SIGNERS);
		if (t->password_file == NULL)
			t->password_file = arg;
		t->password_files[t->npassword_files++] = arg;
		return 1;
	case OPT_THREADS:
		if (parse_u64(arg, &n) != 0 || n > 1024)
			usage_error("--threads takes 0 to 1024, not '%s'", arg);
		t->threads = (unsigned)n;
		return 1;
	case OPT_REGISTRY_CA: t->registry_ca = arg; return 1;
	case OPT_PLAIN_HTTP: t->plain_http = 1; return 1;
	case OPT_REGISTRY_USER: t->registry_user = arg; return 1;
	case OPT_REGISTRY_PASSWORD_FILE:
		refuse_dash("--registry-password-file", arg, "a password is not read from standard "
			    "input ($MEGACACHE_REGISTRY_PASSWORD is another way)");
		t->registry_password_file = arg;
		return 1;
	case OPT_TIMEOUT:
		if (parse_u64(arg, &n) != 0 || n < 1 || n > 86400)
			usage_error("--timeout takes 1 to 86400 seconds, not '%s'", arg);
		t->timeout = arg;
		return 1;
	case OPT_CAP + 0: case OPT_CAP + 1: case OPT_CAP + 2: case OPT_CAP + 3: case OPT_CAP + 4:
		if (parse_u64(arg, &t->caps[c - OPT_CAP]) != 0)
			usage_error("--%s takes a whole number, not '%s'", tool_caps[c - OPT_CAP].name,
				    arg);
		t->caps_set[c - OPT_CAP] = 1;
		return 1;
	case '?':
		try_help();
	default:
		return 0;
	}
}

/* An option that names a file, given "-": standard input or output is not that file
 * here (why says so), and no file named "-" is read or made: a usage error. */
void
refuse_dash(const char *opt, const char *arg, const char *why)
{
	if (strcmp(arg, "-") == 0)
		usage_error("%s -: %s; name a file", opt, why);
}

void
pubkey_opt(struct trust *tr, const char *arg)
{
	refuse_dash("-p", arg, "a public key is not read from standard input (give a file, "
		    "its text or its base64 line)");
	if (tr->npubs == MAX_PUBKEYS)
		usage_error("too many public keys (at most %d)", MAX_PUBKEYS);
	tr->pubs[tr->npubs++] = arg;
}

static int
trust_opt(struct trust *tr, int c, char *arg)
{
	uint64_t v;

	switch (c) {
	case 'p':
		pubkey_opt(tr, arg);
		return 1;
	case OPT_THRESHOLD:
		if (parse_u64(arg, &v) != 0 || v == 0 || v > 32)
			usage_error("--threshold takes a number from 1 to 32, not '%s'", arg);
		tr->threshold = (unsigned)v;
		return 1;
	case OPT_MIN_VERSION:
		if (parse_u64(arg, &v) != 0)
			usage_error("--min-version takes a whole number, not '%s'", arg);
		tr->min_version = v;
		return 1;
	case OPT_INSECURE:
		tr->insecure = 1;
		return 1;
	case OPT_REQUIRE:
		if (strchr(arg, '=') == NULL || arg[0] == '=')
			usage_error("--require takes KEY=VALUE, not '%s'", arg);
		if (tr->nrequire == MAX_REQUIRE)
			usage_error("too many --require (at most %d)", MAX_REQUIRE);
		tr->require[tr->nrequire++] = arg;
		return 1;
	case OPT_NOW:
		if (parse_time(arg, (int64_t)time(NULL), &tr->now) != 0)
			usage_error("--now takes a Unix time, an ISO 8601 UTC time (2026-12-01, "
				    "2026-12-01T12:00:00Z) or one from now, +N or -N with w, d, h, m "
				    "or s (-1d, +12h), not '%s'", arg);
		tr->have_now = 1;
		return 1;
	default:
		return 0;
	}
}

/* The options of TOOL_TIERS and TOOL_JSON. */
static int
flag_opt(struct tool *t, int c, char *arg)
{
	if (c == OPT_CACHE_DIR && (t->flags & TOOL_TIERS))
		t->cache_dir = arg;
	else if (c == OPT_TRITON_DIR && (t->flags & TOOL_TIERS))
		t->triton_dir = arg;
	else if (c == OPT_VLLM_DIR && (t->flags & TOOL_TIERS))
		t->vllm_dir = arg;
	else if (c == OPT_JSON && (t->flags & TOOL_JSON))
		t->json = 1;
	else
		return 0;
	return 1;
}

/* Appends the options of from to lo[n], at most to lo[max - 1]; returns the new n. */
static size_t
add_long(struct option *lo, size_t n, size_t max, const struct option *from)
{
	for (; from->name != NULL && n < max - 1; from++)
		lo[n++] = *from;
	lo[n].name = NULL;
	return n;
}

/* The long options of a command (the common ones, those of t's flags, then spec's) in
 * lo[64], its short letters in so[16]. */
static void
build_opts(const struct tool *t, const struct tool_optspec *spec, struct option *lo, char *so)
{
	const size_t max = 64; /* the largest set, pack's, has 23 */
	size_t n;

	memset(lo, 0, max * sizeof *lo);
	n = add_long(lo, 0, max, common_long);
	if (t->flags & TOOL_TRUST)
		n = add_long(lo, n, max, trust_long);
	if (t->flags & TOOL_TIERS)
		n = add_long(lo, n, max, tier_long);
	if (t->flags & TOOL_JSON)
		n = add_long(lo, n, max, json_long);
	if (spec != NULL)
		add_long(lo, n, max, spec->longopts);
	snprintf(so, 16, "%s%shqv", spec != NULL ? spec->shortopts : "",
		 t->flags & TOOL_TRUST ? "p:" : "");
}

/* Whether the option whose code is c is among argv's options, read as tool_parse() will
 * read them but saying nothing; *arg is its argument (the last one given). For what must
 * be known before a usage error can be told (run --json-file). */
int
tool_prescan(const struct tool *t, int argc, char **argv, const struct tool_optspec *spec,
	     int c, const char **arg)
{
	struct option lo[64];
	char so[16];
	int found = 0, got;

	build_opts(t, spec, lo, so);
	opterr = 0;
	optind = 0;
	while ((got = getopt_long(argc, argv, so, lo, NULL)) != -1)
		if (got == c)
			found = 1, *arg = optarg;
	optind = 0; /* glibc: the next getopt_long() starts over */
	return found;
}

/* Parses argv's options in order, each by the first that takes it: the common options,
 * those of t's flags, then spec's (NULL: none). Ends the program on a usage error or -h.
 * Leaves optind at the first operand. */
void
tool_parse(struct tool *t, int argc, char **argv, const struct tool_optspec *spec, void *opts)
{
	struct option lo[64];
	char so[16];
	int c;

	build_opts(t, spec, lo, so);
	while ((c = next_opt(argc, argv, so, lo)) != -1) {
		if (common_opt(t, c, optarg) ||
		    ((t->flags & TOOL_TRUST) && trust_opt(&t->trust, c, optarg)) ||
		    flag_opt(t, c, optarg))
			continue;
		if (spec == NULL || !spec->take(t, opts, c, optarg))
			usage_error("%s: unexpected option", t->name);
	}
	/* Never met, whatever the bundle: said before it is read. */
	if ((t->flags & TOOL_TRUST) && t->trust.threshold > t->trust.npubs)
		usage_error("--threshold %u needs at least %u trusted keys; %zu given with -p",
			    t->trust.threshold, t->trust.threshold, t->trust.npubs);
}
