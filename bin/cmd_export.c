/* cmd_export.c - export: a bundle's torch artifacts as a torch cache blob, checked with
 * the trust options (integrity only with --insecure-no-verify). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

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

/* export's help: its lines of the overview (megacache --help), and its own (megacache
 * export --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help export_help = {
	.synopsis =
		"  export BUNDLE --torch OUTFILE [--torch-format 2.7|current]\n"
		"       (-p PUBFILE... | --insecure-no-verify) [--json]\n",
	.summary =
		"        verify the bundle and write its torch artifacts as a torch cache blob (torch\n"
		"        unpickles it: no -p needs --insecure-no-verify)\n",
	.usage =
		"usage: megacache export BUNDLE --torch OUTFILE [--torch-format 2.7|current]\n"
		"       (-p PUBFILE... | --insecure-no-verify) [--json]\n",
	.about =
		"Verify a bundle and write its torch artifacts as a torch cache blob.\n",
	.options =
		"  --torch OUTFILE       the blob to write (- : standard output)\n"
		"  --torch-format F      2.7 or current (default)\n"
		"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
		"                        as verify\n"
		"  --json                the result as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache export cache.mcache --torch artifacts.bin -p ci.pub",
};

/* export --json: the bundle at path exported, b with its artifacts, left those the
 * format does not hold. */
static void
export_json(const struct tool *t, const struct export_opts *o, const char *path, mc_bundle *b,
	    const struct load_report *left)
{
	cJSON *j = json_object(), *types;
	size_t i, n = 0;

	cJSON_AddStringToObject(j, "bundle", path);
	bundle_facts_json(j, b);
	cJSON_AddStringToObject(j, "output", o->out);
	cJSON_AddStringToObject(j, "torch_format",
				o->format == MC_TORCH_FORMAT_2_7 ? "2.7" : "current");
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	types = cJSON_AddObjectToObject(j, "left_out");
	for (i = 0; i < left->nsums; i++) {
		cJSON_AddNumberToObject(types, left->sums[i].type, (double)left->sums[i].count);
		n += left->sums[i].count;
	}
	cJSON_AddNumberToObject(j, "exported", (double)(mc_bundle_artifact_count(b) - n));
	print_json(j);
}

static void
export_report(const struct tool *t, const struct export_opts *o, const char *path,
	      const struct load_report *left)
{
	size_t i;

	if (t->trust.insecure)
		say(stderr, "%s: warning: signatures were not checked (--insecure-no-verify)", PROG);
	say(stdout, "exported %s to %s (torch %s format)", path, o->out,
	    o->format == MC_TORCH_FORMAT_2_7 ? "2.7" : "2.8+");
	for (i = 0; i < left->nsums; i++)
		say(stdout, "left out %zu %s artifact%s: not a type that format holds",
		    left->sums[i].count, left->sums[i].type, left->sums[i].count == 1 ? "" : "s");
}

/* --torch -: the blob is made in memory (torch reads it whole too) and written out. */
static int
export_stdout(struct tool *t, mc_bundle *b, const struct export_opts *o, int fd,
	      struct load_report *left)
{
	const void *data;
	size_t len;
	int rc;

	if ((rc = mc_bundle_export_torch_memory(b, o->format, &data, &len, on_artifact, left)) != MC_OK)
		return fail(t->ctx, rc);
	return put_stdout(fd, data, len);
}

int
cmd_export(struct tool *t, int argc, char **argv)
{
	struct export_opts o = {NULL, MC_TORCH_FORMAT_CURRENT};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	struct load_report left; /* the artifacts the format does not hold */
	mc_bundle *b = NULL;
	int rc, out_fd = -1;

	tool_parse(t, argc, argv, &export_spec, &o);
	if (optind + 1 != argc || o.out == NULL)
		usage_say("export needs BUNDLE and --torch OUTFILE");
	check_out_folder(o.out);
	out_fd = take_stdout(t, &o.out, "a torch blob");
	/* torch unpickles what export writes: as load, it needs keys or a plain opt-out. */
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("export needs -p PUBFILE: torch unpickles the blob it writes, so the "
			  "bundle's signatures must be checked (or --insecure-no-verify)");
	if (t->trust.npubs > 0 && t->trust.insecure)
		usage_say("-p and --insecure-no-verify do not go together");
	if ((rc = tool_start(t)) != 0)
		return rc;
	memset(&left, 0, sizeof left);
	left.quiet = t->quiet;
	if ((rc = open_trusted(t, argv[optind], &b, keys)) != MC_OK)
		rc = fail(t->ctx, rc);
	else if (out_fd >= 0)
		rc = export_stdout(t, b, &o, out_fd, &left);
	else if ((rc = mc_bundle_export_torch_as(b, o.out, o.format, on_artifact, &left)) != MC_OK)
		rc = fail(t->ctx, rc);
	if (rc == 0 && t->json)
		export_json(t, &o, argv[optind], b, &left);
	else if (rc == 0 && !t->quiet)
		export_report(t, &o, shown_path(argv[optind]), &left);
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}
