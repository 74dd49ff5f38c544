/* cmd_merge.c - merge: several bundles, each checked with the trust options, into one;
 * for a (type, key) with different contents the bundle given later wins. The result
 * keeps the highest bundle version of its inputs and the earliest expiry, and is signed
 * with -s: an unsigned result of signed inputs only with --unsigned. A label is a fact a
 * policy checks (load --require): one the inputs do not all hold alike is refused,
 * unless --label gives the merged value. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define MAX_MERGE_LABELS 64

struct merge_opts {
	const char *out;
	int out_fd; /* -o -: standard output's descriptor (take_stdout()); else -1 */
	struct signers signers;
	char *labels[MAX_MERGE_LABELS]; /* KEY=VALUE */
	size_t nlabels;
	uint64_t bver, level;
	int bver_given, unsigned_ok;
	size_t nsigned;           /* inputs that carry a signature */
	const char *first_signed; /* the first of them */
	int64_t expires;          /* --expires, else the earliest of the inputs'; 0: none */
	int expires_given;
	struct mlabel *lab;       /* the inputs' labels, as the first that holds each has it */
	size_t nlab;
};

/* A label of the inputs: its value in the input that first holds it, and where an input
 * holds another value or none (other NULL: absent there). */
struct mlabel {
	char *key, *value, *other;
	const char *from, *other_from;
	int differs;
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
	{"expires", required_argument, NULL, OPT_EXPIRES},
	{"unsigned", no_argument, NULL, OPT_UNSIGNED},
	{NULL, 0, NULL, 0}};

static int
merge_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct merge_opts *o = opts;

	switch (c) {
	case 'o': o->out = arg; return 1;
	case 's': signer_opt(&o->signers, arg); return 1;
	case OPT_LABEL: label_opt(o->labels, &o->nlabels, MAX_MERGE_LABELS, arg); return 1;
	case OPT_BUNDLE_VERSION:
		if (parse_u64(arg, &o->bver) != 0)
			usage_error("--bundle-version takes a whole number, not '%s'", arg);
		o->bver_given = 1;
		return 1;
	case OPT_UNSIGNED: o->unsigned_ok = 1; return 1;
	case OPT_EXPIRES:
		if (parse_time(arg, (int64_t)time(NULL), &o->expires) != 0 ||
		    o->expires <= (int64_t)time(NULL))
			usage_error("--expires takes a time after now: a Unix time, an ISO 8601 UTC "
				    "time (2026-12-01T12:00:00Z) or +N[wdhms], not '%s'", arg);
		o->expires_given = 1;
		return 1;
	case OPT_LEVEL:
		if (parse_u64(arg, &o->level) != 0 || o->level > 19)
			usage_error("--level takes 0 to 19, not '%s'", arg);
		return 1;
	default: return 0;
	}
}

static const struct tool_optspec merge_spec = {"o:s:", merge_long, merge_opt};

/* merge's help: its lines of the overview (megacache --help), and its own (megacache
 * merge --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help merge_help = {
	.synopsis =
		"  merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify)\n"
		"       [-s SECFILE... | --unsigned] [--label K=V]... [--bundle-version N] [--level N]\n"
		"       [--expires TIME] [--json]\n",
	.summary =
		"        several bundles into one, contents stored once; for a (type, key) with\n"
		"        different contents the bundle given later wins (each conflict is reported);\n"
		"        keeps the inputs' highest bundle version unless --bundle-version, and their\n"
		"        earliest expiry unless --expires; labels the inputs do not all hold alike\n"
		"        are refused unless --label sets them; signed inputs without -s are refused\n"
		"        unless --unsigned\n",
	.usage =
		"usage: megacache merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify)\n"
		"       [-s SECFILE... | --unsigned] [--label K=V]... [--bundle-version N] [--level N]\n"
		"       [--expires TIME] [--json]\n",
	.about =
		"Merge bundles into one; for a (type, key) in several, the later bundle wins. A\n"
		"label the inputs do not all hold alike is refused (exit 2) unless --label sets it;\n"
		"OUT expires with the earliest of its inputs.\n",
	.options =
		"  -o, --output OUT      the bundle to write (- : standard output)\n"
		"  -p PUBFILE            a trusted public key, to verify the inputs\n"
		"  -s SECFILE            sign OUT with this key\n"
		"  --unsigned            write OUT unsigned though its inputs are signed\n"
		"  --label K=V           a label (several, each key once): the merged value of one\n"
		"                        that differs\n"
		"  --expires TIME        OUT's expiry (default: the inputs' earliest)\n"
		"  --bundle-version N    OUT's version (default: the inputs' highest)\n"
		"  --level N             zstd level (default 3; 0: none)\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
		"                        as verify, for each input\n"
		"  --json                the result as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache merge -o all.mcache a.mcache b.mcache -p ci.pub -s ci.key",
};

static void
on_conflict(void *ud, const char *type, const char *key)
{
	struct conflicts *c = ud;

	c->n++;
	if (!c->quiet)
		say(stderr, "%s: conflict: %s %s differs between bundles; kept the later one", PROG,
		    type, key);
}

/* Records input i's labels against those of the inputs before it. */
static int
note_labels(struct merge_opts *o, const mc_bundle *b, size_t i, const char *path,
	    const char *first)
{
	const char *k, *v;
	size_t j, n = mc_bundle_label_count(b);
	struct mlabel *l;

	for (j = 0; j < o->nlab; j++) {
		l = &o->lab[j];
		v = bundle_label(b, l->key);
		if (!l->differs && (v == NULL || strcmp(v, l->value) != 0)) {
			l->differs = 1;
			l->other_from = path;
			if (v != NULL && (l->other = strdup(v)) == NULL)
				return MC_ERR_NOMEM;
		}
	}
	for (j = 0; j < n; j++) {
		if (mc_bundle_label(b, j, &k, &v) != MC_OK)
			continue;
		for (l = o->lab; l < o->lab + o->nlab && strcmp(l->key, k) != 0; l++)
			;
		if (l < o->lab + o->nlab)
			continue;
		if ((l = realloc(o->lab, (o->nlab + 1) * sizeof *l)) == NULL)
			return MC_ERR_NOMEM;
		o->lab = l;
		l = &o->lab[o->nlab];
		memset(l, 0, sizeof *l);
		if ((l->key = strdup(k)) == NULL || (l->value = strdup(v)) == NULL) {
			free(l->key);
			return MC_ERR_NOMEM;
		}
		o->nlab++;
		l->from = path;
		/* absent from the inputs before this one */
		if (i > 0)
			l->differs = 1, l->other = NULL, l->other_from = first;
	}
	return MC_OK;
}

/* Labels the inputs disagree on and --label does not set: refused, each named (said;
 * returns EXIT_USAGE). */
static int
refuse_label_conflicts(const struct merge_opts *o)
{
	size_t i, j, n = 0;

	for (i = 0; i < o->nlab; i++) {
		const struct mlabel *l = &o->lab[i];
		size_t kl = strlen(l->key);
		if (!l->differs)
			continue;
		for (j = 0; j < o->nlabels; j++)
			if (strncmp(o->labels[j], l->key, kl) == 0 && o->labels[j][kl] == '=')
				break;
		if (j < o->nlabels)
			continue;
		if (n++ == 0)
			json_error("label_conflict");
		say(stderr, "%s: label %s differs between the inputs: '%s' in %s, %s%s%s in %s; "
		    "set the merged bundle's value with --label %s=VALUE", PROG, l->key, l->value,
		    shown_path(l->from), l->other ? "'" : "", l->other ? l->other : "none",
		    l->other ? "'" : "", shown_path(l->other_from), l->key);
	}
	return n > 0 ? EXIT_USAGE : MC_OK;
}

static void
free_labels(struct merge_opts *o)
{
	size_t i;

	for (i = 0; i < o->nlab; i++) {
		free(o->lab[i].key);
		free(o->lab[i].value);
		free(o->lab[i].other);
	}
	free(o->lab);
}

/* Signed inputs, and the result would not be signed: refused unless --unsigned (said;
 * returns EXIT_USAGE), once the inputs verified. */
static int
refuse_unsigned(const struct merge_opts *o)
{
	if (o->nsigned == 0 || o->signers.n > 0 || o->unsigned_ok)
		return MC_OK;
	json_error("unsigned_output");
	say(stderr, "%s: %s is signed, and the merged bundle would not be: give -s SECFILE to "
	    "sign it, or --unsigned to write it unsigned", PROG, shown_path(o->first_signed));
	return EXIT_USAGE;
}

/* The folder the inputs' contents wait in (for freeing): the output's, or with -o - or
 * a registry reference $TMPDIR (or /tmp). */
static char *
spool_dir(const struct merge_opts *o)
{
	const char *tmp = getenv("TMPDIR");
	int elsewhere = o->out_fd >= 0 || mc_is_reference(o->out);
	char *dir, *slash;

	if ((dir = strdup(!elsewhere ? o->out : tmp != NULL && tmp[0] ? tmp : "/tmp")) == NULL)
		usage_say("out of memory");
	if (elsewhere)
		return dir;
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return dir;
}

/* Adds the input bundles to w, each checked with the trust options, and raises o->bver
 * to the highest of their versions unless --bundle-version was given, counting the signed
 * ones. Their contents wait beside the output. */
static int
add_inputs(struct tool *t, mc_writer *w, struct merge_opts *o, char **inputs, size_t n)
{
	char *dir = spool_dir(o);
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < n; i++) {
		mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
		mc_bundle *b = NULL;

		rc = open_trusted(t, inputs[i], &b, keys);
		if (rc == MC_OK)
			rc = note_labels(o, b, i, inputs[i], inputs[0]);
		if (rc == MC_OK && mc_bundle_expires(b) != 0 &&
		    (o->expires == 0 || mc_bundle_expires(b) < o->expires) && !o->expires_given)
			o->expires = mc_bundle_expires(b);
		if (rc == MC_OK && mc_bundle_signature_count(b) > 0 && o->nsigned++ == 0)
			o->first_signed = inputs[i];
		if (rc == MC_OK && !o->bver_given && mc_bundle_version(b) > o->bver)
			o->bver = mc_bundle_version(b);
		if (rc == MC_OK)
			rc = mc_writer_add_bundle(w, b, dir);
		mc_bundle_free(b);
		free_keys(keys, t->trust.npubs);
	}
	free(dir);
	return rc;
}

/* merge --json: the bundle written, with n artifacts, from the inputs. */
static void
merge_json(const struct tool *t, const struct merge_opts *o, size_t n, char **inputs,
	   int ninputs, size_t conflicts)
{
	cJSON *j = json_object(), *in;
	int i;

	cJSON_AddStringToObject(j, "output", o->out);
	in = cJSON_AddArrayToObject(j, "bundles");
	for (i = 0; i < ninputs; i++)
		cJSON_AddItemToArray(in, cJSON_CreateString(inputs[i]));
	cJSON_AddNumberToObject(j, "artifact_count", (double)n);
	cJSON_AddNumberToObject(j, "conflicts", (double)conflicts);
	cJSON_AddNumberToObject(j, "bundle_version", (double)o->bver);
	cJSON_AddNumberToObject(j, "signature_count", (double)o->signers.n);
	cJSON_AddBoolToObject(j, "signed", o->signers.n > 0);
	say_pushed(t, o->out, j, stdout);
	print_json(j);
}

/* The line that tells of a merge done: the artifacts of the bundle written. */
static void
merge_report(struct tool *t, const struct merge_opts *o, const mc_writer *w, char **inputs,
	     int ninputs, size_t conflicts)
{
	const char *out = o->out;
	size_t n = mc_writer_saved_count(w);

	if (t->json)
		merge_json(t, o, n, inputs, ninputs, conflicts);
	if (!t->quiet && !t->json) {
		say(stdout, "merged %d bundles into %s: %zu artifacts, %zu conflict%s", ninputs, out, n,
		    conflicts, conflicts == 1 ? "" : "s");
		say_pushed(t, out, NULL, stdout);
	}
}

int
cmd_merge(struct tool *t, int argc, char **argv)
{
	struct merge_opts o = {.level = 3, .out_fd = -1};
	struct conflicts conflicts = {0, 0};
	mc_writer *w = NULL;
	int rc;

	tool_parse(t, argc, argv, &merge_spec, &o);
	if (o.out == NULL || optind >= argc)
		usage_say("merge needs -o OUT and at least one input bundle");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("merge needs -p PUBFILE to verify its inputs (or --insecure-no-verify)");
	if (o.unsigned_ok && o.signers.n > 0)
		usage_say("-s and --unsigned do not go together");
	check_out_folder(o.out);
	o.out_fd = take_stdout(t, &o.out, "a bundle");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_writer_new(t->ctx, &w)) != MC_OK)
		return fail(t->ctx, rc);
	conflicts.quiet = t->quiet;
	mc_writer_set_conflict_fn(w, on_conflict, &conflicts);
	rc = set_created(w);
	if (rc == MC_OK)
		rc = mc_writer_set_compression(w, (int)o.level);
	if (rc == MC_OK)
		rc = add_inputs(t, w, &o, argv + optind, (size_t)(argc - optind));
	if (rc == MC_OK)
		rc = refuse_unsigned(&o);
	if (rc == MC_OK)
		rc = refuse_label_conflicts(&o);
	if (rc == MC_OK && o.expires != 0)
		rc = mc_writer_set_expires(w, o.expires);
	if (rc == MC_OK)
		rc = mc_writer_set_bundle_version(w, o.bver);
	if (rc == MC_OK)
		rc = set_labels(w, o.labels, o.nlabels);
	if (rc == MC_OK)
		rc = add_signers(t, w, &o.signers);
	if (rc == MC_OK)
		rc = o.out_fd >= 0 ? mc_writer_save_fd(w, o.out_fd, o.out) : mc_writer_save(w, o.out);
	if (rc == EXIT_USAGE) {
		/* refused, and said so */
	} else if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		if (o.signers.n == 0)
			warn_unsigned(t);
		merge_report(t, &o, w, argv + optind, argc - optind, conflicts.n);
		rc = 0;
	}
	free_signers(&o.signers);
	free_labels(&o);
	mc_writer_free(w);
	return rc;
}
