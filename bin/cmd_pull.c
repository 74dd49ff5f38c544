/* cmd_pull.c - pull: the entries of torch's (and Triton's) Redis remote caches into a
 * bundle, each checked for its form. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tool.h"

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

/* pull's help: its lines of the overview (megacache --help), and its own (megacache
 * pull --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help pull_help = {
	.synopsis =
		"  pull [--redis URL] -o BUNDLE [-s SECFILE]... [--match GLOB] [--triton] [--json]\n",
	.summary =
		"        those caches into a bundle, each entry checked for its form\n",
	.usage =
		"usage: megacache pull [--redis URL] -o BUNDLE [-s SECFILE]... [--match GLOB] [--triton]\n"
		"       [--label K=V]... [--json] [-v]\n",
	.about =
		"Record every entry of torch's Redis remote cache (and with --triton Triton's) into\n"
		"BUNDLE: types and keys from the Redis keys, contents from the values, each checked\n"
		"for its form (others skipped, counted). Label redis=<URL> says where it came from;\n"
		"TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=unknown, as the store does not record how its\n"
		"AOTAutograd entries were made (push warns): where only torch's workers with it 1\n"
		"write the store, pull with --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1.\n",
	.options =
		"  --redis URL, --redis-password-file F, --triton, --triton-key-format F: as push\n"
		"  -o, --output BUNDLE    the bundle to write (- : standard output)\n"
		"  -s SECFILE             sign it with this key (several: co-sign)\n"
		"  --match GLOB           only keys matching this Redis glob (e.g. 'pt2:fx-graph-v1::*')\n"
		"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
		"  --expires TIME, --level N, --no-compress, --format-version N: as pack\n"
		"  --keep-unknown         taken; it changes nothing here (pull reads no folder)\n"
		"  --json                 the report as JSON\n"
		"  -v, --verbose          a line per entry: pulled, or skipped (odd form: not in\n"
		"                         the form of its key), with its Redis key\n",
	.example = "megacache pull --redis redis://cache-host:6379/0 -o fleet.mcache -s ci.key",
};

static void
pull_report(const struct tool *t, const struct pull_opts *o, const mc_redis *r,
	    const struct entry_tally *ta, mc_writer *w)
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
		say_pushed(t, o->out, j, stdout);
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	say(stdout, "pulled %zu entr%s from %s into %s, %zu signature%s", ta->n[MC_REMOTE_PULLED],
	    ta->n[MC_REMOTE_PULLED] == 1 ? "y" : "ies", mc_redis_where(r), o->out, nsecs,
	    nsecs == 1 ? "" : "s");
	say_pushed(t, o->out, NULL, stdout);
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
pull_into(struct tool *t, struct pull_opts *o, mc_redis *r, mc_writer *w, struct entry_tally *ta)
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
	struct entry_tally ta;
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
		usage_say("pull needs -o BUNDLE and no other argument");
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
