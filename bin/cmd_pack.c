/* cmd_pack.c - pack: artifacts from torch blobs, cache dirs and Triton caches recorded
 * into a new bundle, with labels and signatures. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_SOURCES 256

struct pack_opts {
	const char *out;
	struct record_opts rec;
	const char *srcs[MAX_SOURCES];
	int srckind[MAX_SOURCES]; /* OPT_FROM_TORCH, OPT_FROM_DIR, OPT_FROM_TRITON, OPT_FROM_VLLM */
	size_t nsrcs;
};

static const struct option pack_long[] = {
	{"output", required_argument, NULL, 'o'},
	{"from-torch", required_argument, NULL, OPT_FROM_TORCH},
	{"from-dir", required_argument, NULL, OPT_FROM_DIR},
	{"from-triton-dir", required_argument, NULL, OPT_FROM_TRITON},
	{"from-vllm-dir", required_argument, NULL, OPT_FROM_VLLM},
	RECORD_LONG_OPTIONS,
	{NULL, 0, NULL, 0}};

static int
pack_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct pack_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case OPT_FROM_TORCH:
	case OPT_FROM_DIR:
	case OPT_FROM_TRITON:
	case OPT_FROM_VLLM:
		if (o->nsrcs == MAX_SOURCES)
			usage_error("too many sources (at most %d)", MAX_SOURCES);
		if (arg[0] == '\0')
			usage_error("%s: empty path (an unset variable?); `megacache save` finds "
				    "torch's and Triton's caches itself",
				    c == OPT_FROM_TORCH ? "--from-torch"
				    : c == OPT_FROM_DIR ? "--from-dir"
				    : c == OPT_FROM_TRITON ? "--from-triton-dir" : "--from-vllm-dir");
		if (c == OPT_FROM_TORCH)
			refuse_dash("--from-torch", arg, "a torch blob is not read from standard input");
		o->srckind[o->nsrcs] = c;
		o->srcs[o->nsrcs++] = arg;
		return 1;
	default: return record_opt(&o->rec, c, arg);
	}
}

static const struct tool_optspec pack_spec = {"o:s:", pack_long, pack_opt};

/* pack's help: its lines of the overview (megacache --help), and its own (megacache
 * pack --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help pack_help = {
	.synopsis =
		"  pack -o BUNDLE (--from-torch BLOB | --from-dir DIR | --from-triton-dir DIR\n"
		"       | --from-vllm-dir DIR)... [-s SECFILE]... [--keep-unknown] [--label K=V]...\n"
		"       [--label-from-env VAR]... [--labels-json FILE]\n"
		"       [--bundle-version N] [--expires TIME] [--level N] [--no-compress]\n"
		"       [--format-version N] [--json] [-v]\n",
	.summary =
		"        record artifacts from torch blobs, cache dirs, Triton and vLLM caches into a\n"
		"        bundle\n"
		"        (without -s: unsigned, with a warning; --json: \"signed\")\n",
	.usage =
		"usage: megacache pack -o BUNDLE (--from-torch BLOB | --from-dir DIR\n"
		"       | --from-triton-dir DIR | --from-vllm-dir DIR)... [-s SECFILE]...\n"
		"       [bundle options] [--json]\n",
	.about =
		"Record artifacts from torch blobs, cache folders, Triton and vLLM caches into a\n"
		"bundle.\n",
	.options =
		"  -o, --output BUNDLE       the bundle to write (- : standard output)\n"
		"  -s SECFILE                sign with this key (none: unsigned, with a warning)\n"
		"  --from-torch BLOB         a blob of torch.compiler.save_cache_artifacts()\n"
		"  --from-dir DIR            a torch cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
		"  --from-triton-dir DIR     a Triton cache folder ($TRITON_CACHE_DIR)\n"
		"  --from-vllm-dir DIR       a vLLM cache folder ($VLLM_CACHE_ROOT)\n"
		"  --keep-unknown            record files of no known type too\n"
		"  --label K=V               a label (several; each key once)\n"
		"  --label-from-env VAR      a label VAR=its value from the environment\n"
		"  --labels-json FILE        labels from a JSON object (its string members)\n"
		"  --bundle-version N        the bundle's version (load and verify can ask a minimum)\n"
		"  --expires TIME            when the bundle stops verifying\n"
		"  --level N, --no-compress  zstd level (default 3), or none\n"
		"  --format-version N        bundle format 2 (the default) or 1, for readers\n"
		"                            older than format 2\n"
		"  --json                    the report as JSON\n"
		"  -v, --verbose             list each file skipped\n",
	.example = "megacache pack -o cache.mcache -s ci.key --from-torch artifacts.bin",
};

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
		     : o->srckind[i] == OPT_FROM_TRITON
			 ? mc_writer_add_triton_dir(w, o->srcs[i], on_scan, tally)
			 : mc_writer_add_vllm_dir(w, o->srcs[i], on_scan, tally);
	return rc;
}

/* A cache dir packed without the Triton cache torch reads ($TRITON_CACHE_DIR, when the
 * triton tier's root is Triton's own cache) leaves its kernels out: says so. */
static void
warn_triton(struct tool *t, const struct pack_opts *o)
{
	const char *triton, *home;
	size_t i, dirs = 0;

	for (i = 0; i < o->nsrcs; i++) {
		if (o->srckind[i] == OPT_FROM_TRITON)
			return;
		dirs += o->srckind[i] == OPT_FROM_DIR;
	}
	if (dirs == 0 || mc_ctx_tier_root(t->ctx, "triton", &triton) != MC_OK ||
	    mc_ctx_tier_root(t->ctx, "triton_home", &home) != MC_OK || strcmp(triton, home) != 0)
		return;
	if (dir_has_entries(triton))
		say(stderr, "%s: warning: the Triton cache torch reads, %s ($TRITON_CACHE_DIR), is not "
		    "recorded; add --from-triton-dir %s, or use `megacache save`", PROG, triton,
		    triton);
}

/* What the bundle holds: a (type, key) recorded again (two sources with one key, a torch
 * blob that repeats one) keeps the last, so the artifacts written can be fewer than
 * those recorded; the others are said to be left out. */
static void
pack_report(const struct tool *t, mc_writer *w, const struct pack_opts *o,
	    const struct scan_tally *tally)
{
	size_t nsecs = o->rec.signers.n, n = mc_writer_saved_count(w);
	size_t again = mc_writer_artifact_count(w) - n;
	char hb[32];

	human_bytes(mc_writer_saved_bytes(w), hb, sizeof hb);
	if (nsecs == 0)
		warn_unsigned(t);
	if (t->json) {
		cJSON *j = json_object();
		cJSON_AddStringToObject(j, "output", o->out);
		cJSON_AddNumberToObject(j, "artifact_count", (double)n);
		cJSON_AddNumberToObject(j, "bytes", (double)mc_writer_saved_bytes(w));
		cJSON_AddNumberToObject(j, "superseded", (double)again);
		cJSON_AddNumberToObject(j, "signature_count", (double)nsecs);
		cJSON_AddBoolToObject(j, "signed", nsecs > 0);
		cJSON_AddNumberToObject(j, "skipped_files", (double)tally->skipped);
		say_pushed(t, o->out, j, stdout);
		print_json(j);
	} else if (!t->quiet) {
		say(stdout, "packed %zu artifact%s (%s) into %s, %zu signature%s", n,
		    n == 1 ? "" : "s", hb, o->out, nsecs, nsecs == 1 ? "" : "s");
		say_pushed(t, o->out, NULL, stdout);
		if (again > 0)
			say(stdout, "  %zu artifact%s left out: recorded again under the same type "
			    "and key, the bundle keeps the one recorded last", again,
			    again == 1 ? "" : "s");
		if (tally->skipped > 0)
			say_skipped(stdout, tally);
	}
}

/* Nothing to pack: one line (with --json, the failure "no_artifacts"). Returns the exit
 * status. */
static int
no_artifacts(void)
{
	json_error("no_artifacts");
	say(stderr, "%s: no artifacts found in the sources; nothing written", PROG);
	return EXIT_USAGE;
}

/* Checks the operands and that there is something to pack. */
static void
pack_check(const struct pack_opts *o, int argc, char **argv)
{
	if (o->out == NULL)
		usage_say("pack needs -o BUNDLE");
	if (optind != argc)
		usage_error("pack: unexpected argument '%s'", argv[optind]);
	if (o->nsrcs == 0)
		usage_say("pack needs at least one --from-torch BLOB, --from-dir DIR, "
			  "--from-triton-dir DIR or --from-vllm-dir DIR (`megacache save` records "
			  "the caches torch, Triton and vLLM use here)");
}

int
cmd_pack(struct tool *t, int argc, char **argv)
{
	struct pack_opts o = {.rec.level = 3};
	struct scan_tally tally;
	mc_writer *w = NULL;
	int rc, out_fd = -1;

	tool_parse(t, argc, argv, &pack_spec, &o);
	pack_check(&o, argc, argv);
	check_out_folder(o.out);
	out_fd = take_stdout(t, &o.out, "a bundle");
	memset(&tally, 0, sizeof tally);
	tally.verbose = t->verbose;
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_writer_new(t->ctx, &w)) != MC_OK)
		return fail(t->ctx, rc);
	rc = record_setup(t, w, &o.rec);
	if (rc == MC_OK)
		rc = pack_sources(w, &o, &tally);
	if (rc == MC_OK && !t->quiet)
		warn_triton(t, &o);
	if (rc == MC_OK && mc_writer_artifact_count(w) == 0) {
		rc = no_artifacts();
	} else {
		if (rc == MC_OK)
			rc = out_fd >= 0 ? mc_writer_save_fd(w, out_fd, o.out) : mc_writer_save(w, o.out);
		if (rc != MC_OK)
			rc = fail(t->ctx, rc);
		else
			pack_report(t, w, &o, &tally);
	}
	record_free(&o.rec);
	mc_writer_free(w);
	return rc;
}
