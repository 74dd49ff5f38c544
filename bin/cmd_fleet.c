/* cmd_fleet.c - push, pull and audit: verified bundles into torch's and Triton's Redis
 * caches, those caches back into a bundle, and what in them no trusted bundle vouches for. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_AUDIT 16

/* The options push, pull and audit share. */
struct redis_opts {
	const char *url, *password_file, *triton_format;
	int triton;
};

#define REDIS_LONG_OPTIONS                                                         \
	{"redis", required_argument, NULL, OPT_REDIS},                             \
	{"redis-password-file", required_argument, NULL, OPT_REDIS_PASSWORD_FILE}, \
	{"triton", no_argument, NULL, OPT_TRITON},                                 \
	{"triton-key-format", required_argument, NULL, OPT_TRITON_KEY_FORMAT}

static int
redis_opt(struct redis_opts *o, int c, char *arg)
{
	switch (c) {
	case OPT_REDIS: o->url = arg; return 1;
	case OPT_REDIS_PASSWORD_FILE: o->password_file = arg; return 1;
	case OPT_TRITON: o->triton = 1; return 1;
	case OPT_TRITON_KEY_FORMAT: o->triton_format = arg; return 1;
	default: return 0;
	}
}

/* --redis, else $TORCHINDUCTOR_REDIS_URL, as torch reads it. */
static void
redis_check(struct redis_opts *o, const char *cmd)
{
	static char from_env[300];
	const char *h = getenv("TORCHINDUCTOR_REDIS_HOST"), *p = getenv("TORCHINDUCTOR_REDIS_PORT");

	if (!mc_redis_supported()) { /* said before any work */
		say(stderr, "%s: %s: this megacache was built without Redis support (configure "
		    "found no hiredis)", PROG, cmd);
		json_error("unsupported");
		json_exit(EXIT_USAGE);
	}
	if (o->url == NULL)
		o->url = getenv("TORCHINDUCTOR_REDIS_URL");
	/* Each counts when set and not empty, as the man page says. */
	if ((o->url == NULL || o->url[0] == '\0') && ((h != NULL && h[0]) || (p != NULL && p[0]))) {
		snprintf(from_env, sizeof from_env, "redis://%s:%s/0", h != NULL && h[0] ? h : "localhost",
			 p != NULL && p[0] ? p : "6379");
		o->url = from_env;
	}
	if (o->url == NULL || o->url[0] == '\0')
		usage_error("%s needs --redis URL (redis://host:port/db, unix:///path; or "
			    "TORCHINDUCTOR_REDIS_URL, TORCHINDUCTOR_REDIS_HOST and _PORT)", cmd);
	if (o->triton_format == NULL)
		o->triton_format = getenv("TRITON_REDIS_KEY_FORMAT");
}

/* Connects: the password from --redis-password-file (its first line), else
 * $MEGACACHE_REDIS_PASSWORD, else the URL's. */
static int
redis_connect(struct tool *t, const struct redis_opts *o, mc_redis **r)
{
	char pw[1024], *nl;
	const char *password = getenv("MEGACACHE_REDIS_PASSWORD");
	int rc;

	if (o->password_file != NULL) {
		FILE *f = fopen(o->password_file, "r");
		if (f == NULL || fgets(pw, sizeof pw, f) == NULL) {
			say(stderr, "%s: cannot read the Redis password from %s", PROG,
			    o->password_file);
			if (f != NULL)
				fclose(f);
			json_error("io");
			return EXIT_USAGE;
		}
		fclose(f);
		if ((nl = strpbrk(pw, "\r\n")) != NULL)
			*nl = '\0';
		password = pw;
	}
	rc = mc_redis_open(t->ctx, o->url, password != NULL && password[0] ? password : NULL, r);
	if (password == pw)
		memset(pw, 0, sizeof pw);
	if (rc == MC_OK && o->triton_format != NULL && o->triton_format[0] != '\0')
		rc = mc_redis_set_triton_format(*r, o->triton_format);
	return rc != MC_OK ? fail(t->ctx, rc) : 0;
}

/* ---- what push, pull and audit tell of the entries ---- */

struct tally {
	int verbose, quiet;
	int findings; /* audit: entries not vouched for are listed without -v */
	size_t n[MC_REMOTE_WOULD_CHANGE_TTL + 1];
	size_t aot;   /* push: AOTAutograd entries written or there already */
	uint64_t bytes;
	cJSON *entries; /* with --json: the entries told (push: those written or compared) */
};

/* What is told of an entry (MC_REMOTE_*, their values as index): its name in --json, and
 * the mark and words of its line of text (-v; audit's findings without it). */
static const struct {
	const char *name, *words;
	char mark;
} actions[] = {
	[MC_REMOTE_SENT] = {"written", "written", '+'},
	[MC_REMOTE_REPLACED] = {"replaced", "replaced", '~'},
	[MC_REMOTE_UNCHANGED] = {"unchanged", "unchanged", '='},
	[MC_REMOTE_WOULD_SEND] = {"would_write", "would write", '+'},
	[MC_REMOTE_WOULD_REPLACE] = {"would_replace", "would replace", '~'},
	[MC_REMOTE_NO_FORM] = {"no_form", "no remote form", ' '},
	[MC_REMOTE_SHADOWED] = {"shadowed", "shadowed", '-'},
	[MC_REMOTE_PULLED] = {"pulled", "pulled", '+'},
	[MC_REMOTE_ODD] = {"odd", "odd form", '!'},
	[MC_REMOTE_VOUCHED] = {"vouched", "vouched", '='},
	[MC_REMOTE_DIFFERS] = {"differs", "differs", '~'},
	[MC_REMOTE_UNVOUCHED] = {"unvouched", "unvouched", '!'},
	[MC_REMOTE_TTL_CHANGED] = {"ttl_changed", "TTL changed", '~'},
	[MC_REMOTE_WOULD_CHANGE_TTL] = {"would_change_ttl", "would set TTL", '~'},
};

/* An entry's line: its Redis key; an artifact with none (no remote form), or one another
 * of the bundle shadows under the same key, is named by its type and key too. */
static void
say_entry(int what, const char *type, const char *key, const char *rkey)
{
	char mark = actions[what].mark;
	const char *words = actions[what].words;

	if (type == NULL || key == NULL)
		say(stdout, "%c %-14s %s", mark, words, rkey != NULL ? rkey : "");
	else if (rkey == NULL)
		say(stdout, "%c %-14s %s %s", mark, words, type, key);
	else if (what == MC_REMOTE_SHADOWED)
		say(stdout, "%c %-14s %s (%s %s)", mark, words, rkey, type, key);
	else
		say(stdout, "%c %-14s %s", mark, words, rkey);
}

static void
on_entry(void *ud, int what, const char *type, const char *key, const char *rkey,
	 uint64_t size)
{
	struct tally *ta = ud;

	ta->n[what]++;
	if (what == MC_REMOTE_SENT || what == MC_REMOTE_REPLACED || what == MC_REMOTE_PULLED)
		ta->bytes += size;
	if ((what <= MC_REMOTE_WOULD_REPLACE || what >= MC_REMOTE_TTL_CHANGED) && type != NULL &&
	    strcmp(type, "aot_autograd") == 0)
		ta->aot++;
	if (ta->entries != NULL && what != MC_REMOTE_VOUCHED) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "action", actions[what].name);
		if (type != NULL)
			cJSON_AddStringToObject(e, "type", type);
		else
			cJSON_AddNullToObject(e, "type");
		if (key != NULL)
			cJSON_AddStringToObject(e, "key", key);
		else
			cJSON_AddNullToObject(e, "key");
		if (rkey != NULL)
			cJSON_AddStringToObject(e, "redis_key", rkey);
		else
			cJSON_AddNullToObject(e, "redis_key");
		cJSON_AddNumberToObject(e, "size", (double)size);
		cJSON_AddItemToArray(ta->entries, e);
	} else if (ta->entries == NULL && !ta->quiet &&
		   (ta->verbose || (ta->findings && what != MC_REMOTE_VOUCHED))) {
		say_entry(what, type, key, rkey);
	}
}

static void
add_counts(cJSON *j, const struct tally *ta, const int *which, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		cJSON_AddNumberToObject(j, actions[which[i]].name, (double)ta->n[which[i]]);
}

/* ---- push ---- */

struct push_opts {
	struct redis_opts redis;
	const char *types;
	uint64_t ttl;
	int dry;
};

static const struct option push_long[] = {
	REDIS_LONG_OPTIONS,
	{"types", required_argument, NULL, OPT_TYPES},
	{"ttl", required_argument, NULL, OPT_TTL},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	{NULL, 0, NULL, 0}};

static int
push_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct push_opts *o = opts;

	switch (c) {
	case OPT_TYPES: o->types = arg; return 1;
	case OPT_DRY_RUN: o->dry = 1; return 1;
	case OPT_TTL:
		if (parse_u64(arg, &o->ttl) != 0 || o->ttl == 0 || o->ttl > 100000000u)
			usage_error("--ttl takes a number of seconds (1 or more), not '%s'", arg);
		return 1;
	default: return redis_opt(&o->redis, c, arg);
	}
}

static const struct tool_optspec push_spec = {"", push_long, push_opt};

/* torch 2.11 keys an AOTAutograd entry by its functorch config, which holds
 * TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE as read (None unset, True "1", False "0"): workers
 * with the remote caches on ("1") find only entries a run with "1" made. The warning, in
 * buf, when the entries pushed were made otherwise or the bundle does not say (no label,
 * or "unknown": pulled); "" else. */
static void
aot_remote_warning(const mc_bundle *b, const char *path, size_t naot, char *buf, size_t len)
{
	static const char make[] = "Make the bundle in a run with " AOT_REMOTE_LABEL "=1 (no "
				   "Redis needed there), as the workers have it";
	const char *made = bundle_label(b, AOT_REMOTE_LABEL), *unless = "";
	char how[200], advice[300];

	buf[0] = '\0';
	if (naot == 0 || (made != NULL && strcmp(made, "1") == 0))
		return;
	snprintf(advice, sizeof advice, "%s", make);
	if (made == NULL) {
		snprintf(how, sizeof how, "made under a " AOT_REMOTE_LABEL " the bundle does not "
			 "record (save and run record it as a label)");
		snprintf(advice, sizeof advice, "%s; if it was made so, pack it with --label "
			 AOT_REMOTE_LABEL "=1", make);
	} else if (strcmp(made, "unknown") == 0) {
		snprintf(how, sizeof how, "pulled from a Redis cache, which does not record the "
			 AOT_REMOTE_LABEL " they were made with (label " AOT_REMOTE_LABEL "=unknown)");
		unless = "unless it was 1, ";
		snprintf(advice, sizeof advice, "torch itself writes AOTAutograd entries there only "
			 "from runs with " AOT_REMOTE_LABEL "=1: if nothing else wrote that cache, "
			 "pull it with --label " AOT_REMOTE_LABEL "=1");
	} else if (strcmp(made, "unset") == 0) {
		snprintf(how, sizeof how, "made with " AOT_REMOTE_LABEL " unset");
	} else {
		snprintf(how, sizeof how, "made with " AOT_REMOTE_LABEL "=%.20s", made);
	}
	snprintf(buf, len, "%s: its %zu AOTAutograd entr%s %s; torch keys AOTAutograd entries by "
		 "that setting, so %sworkers with " AOT_REMOTE_LABEL "=1 (torch's remote caches on) "
		 "look them up under other keys and miss (their FX graphs hit). %s", path, naot,
		 naot == 1 ? "y was" : "ies were", how, unless, advice);
}

static void
push_report(const struct tool *t, const struct push_opts *o, mc_bundle *b, const char *path,
	    const mc_redis *r, struct tally *ta, const char *warning)
{
	static const int counts[] = {MC_REMOTE_SENT, MC_REMOTE_REPLACED, MC_REMOTE_UNCHANGED,
				     MC_REMOTE_WOULD_SEND, MC_REMOTE_WOULD_REPLACE,
				     MC_REMOTE_NO_FORM, MC_REMOTE_SHADOWED,
				     MC_REMOTE_TTL_CHANGED, MC_REMOTE_WOULD_CHANGE_TTL};
	size_t *n = ta->n, retimed = n[MC_REMOTE_TTL_CHANGED] + n[MC_REMOTE_WOULD_CHANGE_TTL];
	size_t changed = n[MC_REMOTE_SENT] + n[MC_REMOTE_REPLACED] + n[MC_REMOTE_WOULD_SEND] +
			 n[MC_REMOTE_WOULD_REPLACE] + retimed;
	char ttl[64] = ""; /* the entries whose TTL was set anew, when there are any */

	if (retimed > 0)
		snprintf(ttl, sizeof ttl, o->dry ? ", set a new TTL on %zu" : ", %zu with a new TTL",
			 retimed);

	if (warning[0] != '\0' && !t->quiet)
		say(stderr, "%s: warning: %s", PROG, warning);
	if (t->json) {
		cJSON *w = cJSON_CreateArray();
		cJSON *j = json_object();
		cJSON_AddStringToObject(j, "bundle", path);
		bundle_facts_json(j, b);
		cJSON_AddStringToObject(j, "redis", mc_redis_where(r));
		cJSON_AddBoolToObject(j, "dry_run", o->dry);
		cJSON_AddBoolToObject(j, "triton", o->redis.triton);
		add_counts(j, ta, counts, sizeof counts / sizeof counts[0]);
		cJSON_AddBoolToObject(j, "changed", changed > 0);
		cJSON_AddNumberToObject(j, "bytes", (double)ta->bytes);
		cJSON_AddItemToObject(j, "entries", ta->entries);
		ta->entries = NULL;
		if (warning[0] != '\0')
			cJSON_AddItemToArray(w, cJSON_CreateString(warning));
		cJSON_AddItemToObject(j, "warnings", w);
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	if (o->dry)
		say(stdout, "%s into %s: would write %zu, replace %zu%s; %zu unchanged", path,
		    mc_redis_where(r), n[MC_REMOTE_WOULD_SEND], n[MC_REMOTE_WOULD_REPLACE], ttl,
		    n[MC_REMOTE_UNCHANGED]);
	else if (changed + n[MC_REMOTE_UNCHANGED] == 0)
		say(stdout, "pushed nothing from %s: none of its artifacts has a form in %s", path,
		    mc_redis_where(r));
	else if (changed == 0)
		say(stdout, "pushed %s into %s: nothing changed (%zu entr%s there already)", path,
		    mc_redis_where(r), n[MC_REMOTE_UNCHANGED],
		    n[MC_REMOTE_UNCHANGED] == 1 ? "y" : "ies");
	else
		say(stdout, "pushed %s into %s: %zu written, %zu replaced, %zu unchanged%s", path,
		    mc_redis_where(r), n[MC_REMOTE_SENT], n[MC_REMOTE_REPLACED],
		    n[MC_REMOTE_UNCHANGED], ttl);
	if (n[MC_REMOTE_NO_FORM] > 0)
		say(stdout, "  %zu artifact%s of types torch keeps no remote cache of (autotune, "
		    "kernel code, ...%s) not pushed", n[MC_REMOTE_NO_FORM],
		    n[MC_REMOTE_NO_FORM] == 1 ? "" : "s", o->redis.triton ? "" : "; Triton's: --triton");
	if (n[MC_REMOTE_SHADOWED] > 0)
		say(stdout, "  %zu artifact%s not pushed: another of the bundle has the same remote "
		    "key (the last is pushed; torch's remote cache keeps one entry per FX graph "
		    "or AOTAutograd key, where its local cache keeps one per set of guards)",
		    n[MC_REMOTE_SHADOWED], n[MC_REMOTE_SHADOWED] == 1 ? "" : "s");
}

int
cmd_push(struct tool *t, int argc, char **argv)
{
	struct push_opts o;
	struct tally ta;
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	mc_bundle *b = NULL;
	mc_redis *r = NULL;
	int rc;

	memset(&o, 0, sizeof o);
	memset(&ta, 0, sizeof ta);
	tool_parse(t, argc, argv, &push_spec, &o);
	if (optind + 1 != argc)
		usage_error("push needs one BUNDLE%s", "");
	redis_check(&o.redis, "push");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("push needs -p PUBFILE to verify the bundle (torch runs what the cache "
			    "holds), or --insecure-no-verify%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	ta.verbose = t->verbose, ta.quiet = t->quiet;
	if (t->json)
		ta.entries = cJSON_CreateArray();
	/* The bundle's trust is checked before the server is reached. */
	if ((rc = open_trusted(t, argv[optind], &b, keys)) == MC_OK && o.types != NULL)
		rc = select_types(t->ctx, b, o.types);
	if (rc == MC_OK && (rc = mc_bundle_check_signatures(b)) == MC_OK &&
	    (rc = redis_connect(t, &o.redis, &r)) == 0) {
		unsigned flags = (o.dry ? MC_PUSH_DRY_RUN : 0) | (o.redis.triton ? MC_PUSH_TRITON : 0);
		size_t done;
		char warning[2048];
		if ((rc = mc_bundle_push(b, r, flags, o.ttl, on_entry, &ta)) == MC_OK) {
			aot_remote_warning(b, shown_path(argv[optind]), ta.aot, warning,
					   sizeof warning);
			push_report(t, &o, b, shown_path(argv[optind]), r, &ta, warning);
		} else {
			rc = fail(t->ctx, rc);
			if ((done = ta.n[MC_REMOTE_SENT] + ta.n[MC_REMOTE_REPLACED] +
				    ta.n[MC_REMOTE_TTL_CHANGED]) > 0)
				say(stderr, "%s: note: %zu entr%s written before that, each checked; a "
				    "push again finishes the rest", PROG, done, done == 1 ? "y was" : "ies were");
		}
	} else if (rc < 0) {
		rc = fail(t->ctx, rc);
	}
	cJSON_Delete(ta.entries);
	mc_redis_free(r);
	mc_bundle_free(b);
	free_keys(keys, MAX_PUBKEYS);
	return rc;
}

/* ---- pull ---- */

struct pull_opts {
	struct redis_opts redis;
	const char *out, *match;
	int out_fd; /* -o -: standard output's descriptor (take_stdout()); else -1 */
	struct record_opts rec;
};

static const struct option pull_long[] = {
	REDIS_LONG_OPTIONS,
	{"output", required_argument, NULL, 'o'},
	{"match", required_argument, NULL, OPT_MATCH},
	RECORD_LONG_OPTIONS,
	{NULL, 0, NULL, 0}};

static int
pull_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct pull_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case OPT_MATCH: o->match = arg; return 1;
	default: return redis_opt(&o->redis, c, arg) || record_opt(&o->rec, c, arg);
	}
}

static const struct tool_optspec pull_spec = {"o:s:", pull_long, pull_opt};

static void
pull_report(const struct tool *t, const struct pull_opts *o, const mc_redis *r,
	    const struct tally *ta, mc_writer *w)
{
	size_t nsecs = o->rec.signers.n;

	if (t->json) {
		cJSON *j = json_object();
		cJSON_AddStringToObject(j, "output", o->out);
		cJSON_AddStringToObject(j, "redis", mc_redis_where(r));
		cJSON_AddBoolToObject(j, "triton", o->redis.triton);
		cJSON_AddNumberToObject(j, "artifact_count", (double)mc_writer_artifact_count(w));
		cJSON_AddNumberToObject(j, "bytes", (double)ta->bytes);
		cJSON_AddNumberToObject(j, "odd", (double)ta->n[MC_REMOTE_ODD]);
		cJSON_AddNumberToObject(j, "signature_count", (double)nsecs);
		cJSON_AddBoolToObject(j, "signed", nsecs > 0);
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	say(stdout, "pulled %zu entr%s from %s into %s, %zu signature%s", ta->n[MC_REMOTE_PULLED],
	    ta->n[MC_REMOTE_PULLED] == 1 ? "y" : "ies", mc_redis_where(r), o->out, nsecs,
	    nsecs == 1 ? "" : "s");
	if (ta->n[MC_REMOTE_ODD] > 0)
		say(stdout, "  %zu entr%s skipped: not in the form of their key (-v names them)",
		    ta->n[MC_REMOTE_ODD], ta->n[MC_REMOTE_ODD] == 1 ? "y" : "ies");
}

/* The label that says where the bundle came from: redis=<URL without password>. */
static int
source_label(struct pull_opts *o, const mc_redis *r)
{
	size_t n = strlen(mc_redis_where(r)) + 8;
	char *l = malloc(n);

	if (l == NULL || o->rec.nlabels == MAX_LABELS) {
		free(l);
		return MC_ERR_NOMEM;
	}
	snprintf(l, n, "redis=%s", mc_redis_where(r));
	o->rec.owned[o->rec.nlabels] = 1;
	o->rec.labels[o->rec.nlabels++] = l;
	return MC_OK;
}

static int
pull_into(struct tool *t, struct pull_opts *o, mc_redis *r, mc_writer *w, struct tally *ta)
{
	int rc = source_label(o, r);

	if (rc == MC_OK)
		rc = record_setup(t, w, &o->rec);
	if (rc == MC_OK)
		rc = mc_redis_pull(r, w, o->match, o->redis.triton ? MC_PULL_TRITON : 0, on_entry, ta);
	if (rc == MC_OK && mc_writer_artifact_count(w) == 0) {
		json_error("no_artifacts");
		say(stderr, "%s: nothing to pull: %s holds no entry of torch's%s caches%s", PROG,
		    mc_redis_where(r), o->redis.triton ? " or Triton's" : "",
		    ta->n[MC_REMOTE_ODD] > 0 ? " in their form" : "");
		return EXIT_USAGE;
	}
	if (rc == MC_OK && o->rec.signers.n == 0)
		warn_unsigned(t);
	if (rc == MC_OK)
		rc = o->out_fd >= 0 ? mc_writer_save_fd(w, o->out_fd, o->out)
				    : mc_writer_save(w, o->out);
	if (rc != MC_OK)
		return fail(t->ctx, rc);
	pull_report(t, o, r, ta, w);
	return 0;
}

int
cmd_pull(struct tool *t, int argc, char **argv)
{
	struct pull_opts o;
	struct tally ta;
	mc_writer *w = NULL;
	mc_redis *r = NULL;
	int rc;

	memset(&o, 0, sizeof o);
	memset(&ta, 0, sizeof ta);
	o.rec.level = 3;
	tool_parse(t, argc, argv, &pull_spec, &o);
	/* How the AOTAutograd entries were made is not in the store: torch puts them there only
	 * from runs with TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1, but a push from a bundle made
	 * otherwise does too. A signed label says only what is known; --label, given, wins. */
	o.rec.aot_remote = "unknown";
	if (o.out == NULL || optind != argc)
		usage_error("pull needs -o BUNDLE and no other argument%s", "");
	redis_check(&o.redis, "pull");
	check_out_folder(o.out);
	o.out_fd = -1;
	o.out_fd = take_stdout(t, &o.out, "a bundle");
	if ((rc = tool_start(t)) != 0)
		return rc;
	ta.verbose = t->verbose, ta.quiet = t->quiet || t->json;
	if ((rc = redis_connect(t, &o.redis, &r)) == 0) {
		if ((rc = mc_writer_new(t->ctx, &w)) != MC_OK)
			rc = fail(t->ctx, rc);
		else
			rc = pull_into(t, &o, r, w, &ta);
	}
	mc_writer_free(w);
	mc_redis_free(r);
	record_free(&o.rec);
	return rc;
}

/* ---- audit ---- */

static const struct option audit_long[] = {REDIS_LONG_OPTIONS, {NULL, 0, NULL, 0}};

static int
audit_opt(struct tool *t, void *opts, int c, char *arg)
{
	return redis_opt(opts, c, arg);
}

static const struct tool_optspec audit_spec = {"", audit_long, audit_opt};

static void
audit_report(const struct tool *t, char **paths, size_t n, const mc_redis *r,
	     struct tally *ta, size_t bad)
{
	static const int counts[] = {MC_REMOTE_VOUCHED, MC_REMOTE_DIFFERS, MC_REMOTE_UNVOUCHED,
				     MC_REMOTE_ODD};
	size_t i, total = ta->n[MC_REMOTE_VOUCHED] + bad;

	if (t->json) {
		cJSON *j = json_object(), *bs = cJSON_CreateArray();
		json_status(j, bad > 0 ? EXIT_VERIFY : 0);
		cJSON_AddStringToObject(j, "redis", mc_redis_where(r));
		for (i = 0; i < n; i++)
			cJSON_AddItemToArray(bs, cJSON_CreateString(paths[i]));
		cJSON_AddItemToObject(j, "bundles", bs);
		cJSON_AddNumberToObject(j, "entry_count", (double)total);
		add_counts(j, ta, counts, sizeof counts / sizeof counts[0]);
		cJSON_AddBoolToObject(j, "clean", bad == 0);
		cJSON_AddItemToObject(j, "findings", ta->entries);
		ta->entries = NULL;
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	say(stdout, "audit of %s: %zu entr%s, %zu vouched for by a trusted bundle, %zu not (%zu "
	    "differ, %zu in no bundle, %zu unreadable by torch: not in their key's form)",
	    mc_redis_where(r), total,
	    total == 1 ? "y" : "ies", ta->n[MC_REMOTE_VOUCHED], bad, ta->n[MC_REMOTE_DIFFERS],
	    ta->n[MC_REMOTE_UNVOUCHED], ta->n[MC_REMOTE_ODD]);
}

int
cmd_audit(struct tool *t, int argc, char **argv)
{
	struct redis_opts o;
	struct tally ta;
	mc_pubkey *keys[MAX_AUDIT * MAX_PUBKEYS] = {NULL};
	mc_bundle *b[MAX_AUDIT] = {NULL};
	mc_redis *r = NULL;
	size_t n = 0, i, bad = 0;
	int rc = 0;

	memset(&o, 0, sizeof o);
	memset(&ta, 0, sizeof ta);
	tool_parse(t, argc, argv, &audit_spec, &o);
	if (optind >= argc || argc - optind > MAX_AUDIT)
		usage_error("audit needs 1 to %s trusted bundles to check the store against", "16");
	redis_check(&o, "audit");
	if (t->trust.npubs == 0)
		usage_error("audit needs -p PUBFILE: only trusted bundles vouch for entries%s", "");
	if (t->trust.insecure)
		usage_error("audit takes no --insecure-no-verify: only bundles whose signatures "
			    "verify vouch for entries%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	ta.verbose = t->verbose, ta.quiet = t->quiet, ta.findings = 1;
	if (t->json)
		ta.entries = cJSON_CreateArray();
	for (i = 0; optind + (int)i < argc && rc == 0; i++, n++)
		if ((rc = open_trusted(t, argv[optind + i], &b[i], keys + i * MAX_PUBKEYS)) != MC_OK ||
		    (rc = mc_bundle_check_signatures(b[i])) != MC_OK)
			rc = fail(t->ctx, rc); /* each bundle trusted before the server is reached */
	if (rc == 0 && (rc = redis_connect(t, &o, &r)) == 0) {
		if ((rc = mc_redis_audit(r, b, n, o.triton ? MC_PULL_TRITON : 0, on_entry, &ta,
					 &bad)) != MC_OK)
			rc = fail(t->ctx, rc);
		else {
			audit_report(t, argv + optind, n, r, &ta, bad);
			rc = bad > 0 ? EXIT_VERIFY : 0;
		}
	}
	cJSON_Delete(ta.entries);
	mc_redis_free(r);
	for (i = 0; i < n; i++)
		mc_bundle_free(b[i]);
	free_keys(keys, MAX_AUDIT * MAX_PUBKEYS);
	return rc;
}
