/* cmd_save.c - save: everything torch and Triton left in the folders they use here
 * (the same folders load installs into) recorded into a new bundle. */
#include "config.h"

#include <string.h>

#include "tool.h"

struct save_opts {
	const char *out;
	struct record_opts rec;
	int dry;
};

static const struct option save_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"dry-run", no_argument, NULL, OPT_DRY_RUN},
	RECORD_LONG_OPTIONS,
	{NULL, 0, NULL, 0}};

static int
save_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct save_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case OPT_DRY_RUN: o->dry = 1; return 1;
	default: return record_opt(&o->rec, c, arg);
	}
}

static const struct tool_optspec save_spec = {"o:s:", save_long, save_opt};

/* save's help: its lines of the overview (megacache --help), and its own (megacache
 * save --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help save_help = {
	.synopsis =
		"  save -o BUNDLE [-s SECFILE]... [--label K=V]... [--cache-dir DIR] [--triton-dir DIR]\n"
		"       [--vllm-dir DIR] [--keep-unknown] [--dry-run] [--json] [-v] (and pack's bundle\n"
		"       options)\n",
	.summary =
		"        record everything torch, Triton and vLLM left in the folders they use here\n"
		"        (those load installs into), saying which folders it read\n",
	.usage =
		"usage: megacache save -o BUNDLE [-s SECFILE]... [--cache-dir DIR] [--triton-dir DIR]\n"
		"       [--vllm-dir DIR] [--dry-run] [--json] [pack's bundle options]\n",
	.about =
		"Record everything torch, Triton and vLLM left in the folders they use here.\n",
	.options =
		"  -o, --output BUNDLE    the bundle to write (- : standard output)\n"
		"  -s SECFILE             sign with this key (several: one signature each)\n"
		"  --cache-dir DIR        torch's cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
		"  --triton-dir DIR       Triton's cache folder ($TRITON_CACHE_DIR)\n"
		"  --vllm-dir DIR         vLLM's cache folder ($VLLM_CACHE_ROOT)\n"
		"  --dry-run              say what would be recorded; write nothing\n"
		"  --json                 the report as JSON\n"
		"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
		"  --expires TIME, --level N, --no-compress, --format-version N, --keep-unknown:\n"
		"                         as pack\n"
		"  -v, --verbose          list each file skipped\n",
	.example = "megacache save -o cache.mcache -s ci.key --label torch=2.11",
};

static void
save_report(const struct tool *t, mc_writer *w, const struct save_opts *o,
	    const struct location *loc, const struct scan_tally *tally)
{
	size_t n = mc_writer_artifact_count(w), nsecs = o->rec.signers.n;
	char hb[32];

	human_bytes(mc_writer_total_bytes(w), hb, sizeof hb);
	if (nsecs == 0 && !o->dry)
		warn_unsigned(t);
	if (t->json) {
		cJSON *j = json_object();
		cJSON_AddStringToObject(j, "output", o->out);
		cJSON_AddBoolToObject(j, "dry_run", o->dry);
		cJSON_AddItemToObject(j, "folders", locations_json(loc));
		cJSON_AddNumberToObject(j, "artifact_count", (double)n);
		cJSON_AddNumberToObject(j, "bytes", (double)mc_writer_total_bytes(w));
		cJSON_AddNumberToObject(j, "signature_count", (double)(o->dry ? 0 : nsecs));
		cJSON_AddBoolToObject(j, "signed", !o->dry && nsecs > 0);
		cJSON_AddNumberToObject(j, "skipped_files", (double)tally->skipped);
		if (!o->dry)
			say_pushed(t, o->out, j, stdout);
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	say_locations(stdout, loc);
	if (o->dry)
		say(stdout, "would save %zu artifact%s (%s) into %s", n, n == 1 ? "" : "s", hb, o->out);
	else
		say(stdout, "saved %zu artifact%s (%s) into %s, %zu signature%s", n, n == 1 ? "" : "s",
		    hb, o->out, nsecs, nsecs == 1 ? "" : "s");
	if (!o->dry)
		say_pushed(t, o->out, NULL, stdout);
	if (tally->skipped > 0)
		say_skipped(stdout, tally);
}

/* Nothing to save: one line naming the folders looked at (with --json, the failure
 * "no_artifacts"). */
static int
nothing(const struct location *loc)
{
	json_error("no_artifacts");
	say(stderr, "%s: nothing to save: no artifacts in %s (%s), %s (%s) or %s (%s)", PROG,
	    loc[0].path, loc[0].found ? "empty" : "not there", loc[1].path,
	    loc[1].found ? "empty" : "not there", loc[2].path, loc[2].found ? "empty" : "not there");
	return EXIT_USAGE;
}

int
cmd_save(struct tool *t, int argc, char **argv)
{
	struct save_opts o = {.rec.level = 3};
	struct location loc[NLOCATIONS];
	struct scan_tally tally;
	mc_writer *w = NULL;
	int rc, out_fd = -1;

	tool_parse(t, argc, argv, &save_spec, &o);
	o.rec.aot_remote = aot_remote_env();
	if (o.out == NULL)
		usage_say("save needs -o BUNDLE");
	if (optind != argc)
		usage_error("save: unexpected argument '%s' (save reads the folders torch and Triton "
			    "use; pack takes explicit sources)", argv[optind]);
	if (!o.dry)
		check_out_folder(o.out);
	if (!o.dry)
		out_fd = take_stdout(t, &o.out, "a bundle");
	memset(&tally, 0, sizeof tally);
	tally.verbose = t->verbose;
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = locate(t, loc)) != MC_OK || (rc = mc_writer_new(t->ctx, &w)) != MC_OK)
		return fail(t->ctx, rc);
	/* A dry run asks for no password. */
	rc = o.dry ? MC_OK : record_setup(t, w, &o.rec);
	if (rc == MC_OK)
		rc = record_locations(w, loc, &tally);
	if (rc == MC_OK && mc_writer_artifact_count(w) == 0) {
		rc = nothing(loc);
	} else {
		if (rc == MC_OK && !o.dry)
			rc = out_fd >= 0 ? mc_writer_save_fd(w, out_fd, o.out) : mc_writer_save(w, o.out);
		if (rc != MC_OK)
			rc = fail(t->ctx, rc);
		else
			save_report(t, w, &o, loc, &tally);
	}
	record_free(&o.rec);
	mc_writer_free(w);
	return rc;
}
