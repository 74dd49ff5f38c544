/* cmd_push.c - push: a verified bundle into torch's (and Triton's) Redis remote caches,
 * each entry compared with what the store holds. */
#include "config.h"

#include <string.h>

#include "tool.h"

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

/* push's help: its lines of the overview (megacache --help), and its own (megacache
 * push --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help push_help = {
	.synopsis =
		"  push BUNDLE (-p PUBFILE... | --insecure-no-verify) [--redis URL] [--types T[,T]...]\n"
		"       [--ttl S] [--triton] [--dry-run] [--json]\n",
	.summary =
		"        verify, then write the bundle's FX graphs, AOTAutograd entries and PGO\n"
		"        states into torch's Redis remote cache (with --triton Triton's kernels into\n"
		"        Triton's); a second push changes nothing and says so\n",
	.usage =
		"usage: megacache push BUNDLE (-p PUBFILE... | --insecure-no-verify) [--redis URL]\n"
		"       [--types T[,T]...] [--ttl S] [--triton] [--dry-run] [--json] [-v]\n",
	.about =
		"Verify BUNDLE as load does and write its FX graphs, AOTAutograd entries and PGO\n"
		"states into torch's Redis remote cache (pt2:<cache id>::<key>:c1), each once its\n"
		"bytes checked; what the store had is compared: a second push changes nothing.\n"
		"torch's Redis holds one entry per FX graph or AOTAutograd key (the last is pushed),\n"
		"and torch keys AOTAutograd entries by TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE: push warns\n"
		"when the bundle's were not made with it set to 1, as workers with the remote caches\n"
		"on have it (save and run record it as a label).\n",
	.options =
		"  --redis URL            redis://[[user]:password@]host[:port][/db] or\n"
		"                         unix:///path[?db=N] (default $TORCHINDUCTOR_REDIS_URL, else\n"
		"                         redis://$TORCHINDUCTOR_REDIS_HOST:$TORCHINDUCTOR_REDIS_PORT/0\n"
		"                         when either is set: localhost, 6379 for the one unset)\n"
		"  --redis-password-file F  the password (first line); else $MEGACACHE_REDIS_PASSWORD\n"
		"  -p PUBFILE             a trusted public key (a file, its text or its base64 line)\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
		"                         as verify\n"
		"  --types T[,T]...       push only these artifact types\n"
		"  --ttl S                the entries expire after S seconds (default: each keeps\n"
		"                         its TTL, a new one none); a TTL set anew is a change\n"
		"  --triton               Triton's kernels too, into Triton's remote cache\n"
		"  --triton-key-format F  its key format (default $TRITON_REDIS_KEY_FORMAT, else\n"
		"                         triton:{key}:{filename})\n"
		"  --dry-run              compare with the store; write nothing\n"
		"  --json                 the report as JSON\n"
		"  -v, --verbose          a line per artifact: written, replaced, unchanged\n"
		"                         or TTL changed (or, --dry-run, would be) with its\n"
		"                         Redis key, or not pushed (no remote form, shadowed)\n"
		"                         with its type and key\n",
	.example = "megacache push cache.mcache -p ci.pub --redis redis://cache-host:6379/0",
};

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
	    const mc_redis *r, struct entry_tally *ta, const char *warning)
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

/* Pushes b, the bundle at path, into r, and tells it. Returns the exit status. */
static int
push_into(struct tool *t, const struct push_opts *o, mc_bundle *b, const char *path,
	  mc_redis *r, struct entry_tally *ta)
{
	unsigned flags = (o->dry ? MC_PUSH_DRY_RUN : 0) | (o->redis.triton ? MC_PUSH_TRITON : 0);
	size_t done;
	char warning[2048];
	int rc;

	if ((rc = mc_bundle_push(b, r, flags, o->ttl, on_entry, ta)) == MC_OK) {
		aot_remote_warning(b, path, ta->aot, warning, sizeof warning);
		push_report(t, o, b, path, r, ta, warning);
		return 0;
	}
	rc = fail(t->ctx, rc);
	done = ta->n[MC_REMOTE_SENT] + ta->n[MC_REMOTE_REPLACED] + ta->n[MC_REMOTE_TTL_CHANGED];
	if (done > 0)
		say(stderr, "%s: note: %zu entr%s written before that, each checked; a push again "
		    "finishes the rest", PROG, done, done == 1 ? "y was" : "ies were");
	return rc;
}

int
cmd_push(struct tool *t, int argc, char **argv)
{
	struct push_opts o;
	struct entry_tally ta;
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	mc_bundle *b = NULL;
	mc_redis *r = NULL;
	int rc;

	memset(&o, 0, sizeof o);
	memset(&ta, 0, sizeof ta);
	tool_parse(t, argc, argv, &push_spec, &o);
	if (optind + 1 != argc)
		usage_say("push needs one BUNDLE");
	redis_check(&o.redis, "push");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("push needs -p PUBFILE to verify the bundle (torch runs what the cache "
			  "holds), or --insecure-no-verify");
	if ((rc = tool_start(t)) != 0)
		return rc;
	ta.verbose = t->verbose, ta.quiet = t->quiet;
	if (t->json)
		ta.entries = cJSON_CreateArray();
	/* The bundle's trust is checked before the server is reached. */
	rc = open_trusted(t, argv[optind], &b, keys);
	if (rc == MC_OK && o.types != NULL)
		rc = select_types(t->ctx, b, o.types);
	if (rc == MC_OK)
		rc = mc_bundle_check_signatures(b);
	if (rc != MC_OK)
		rc = fail(t->ctx, rc);
	else if ((rc = redis_connect(t, &o.redis, &r)) == 0)
		rc = push_into(t, &o, b, shown_path(argv[optind]), r, &ta);
	cJSON_Delete(ta.entries);
	mc_redis_free(r);
	mc_bundle_free(b);
	free_keys(keys, MAX_PUBKEYS);
	return rc;
}
