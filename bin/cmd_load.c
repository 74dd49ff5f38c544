/* cmd_load.c - load: verify a bundle with the trust options and install its artifacts
 * into the cache dirs (or, with --dry-run, say what would be installed). */
#include "config.h"

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

struct load_opts {
	const char *types;
	const char *owner; /* --owner USER[:GROUP] */
	int dry, sync;
	struct gpu_opts gpu;
};

static const struct option load_long[] = {{"types", required_argument, NULL, OPT_TYPES},
					  {"dry-run", no_argument, NULL, OPT_DRY_RUN},
					  {"sync", no_argument, NULL, OPT_SYNC},
					  {"owner", required_argument, NULL, OPT_OWNER},
					  GPU_LONG_OPTIONS,
					  {NULL, 0, NULL, 0}};

static int
load_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct load_opts *o = opts;

	switch (c) {
	case OPT_TYPES: o->types = arg; return 1;
	case OPT_DRY_RUN: o->dry = 1; return 1;
	case OPT_SYNC: o->sync = 1; return 1;
	case OPT_OWNER: o->owner = arg; return 1;
	default: return gpu_opt(&o->gpu, c, arg);
	}
}

static const struct tool_optspec load_spec = {"", load_long, load_opt};

/* load's help: its lines of the overview (megacache --help), and its own (megacache
 * load --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help load_help = {
	.synopsis =
		"  load BUNDLE (-p PUBFILE... | --insecure-no-verify) [--cache-dir DIR]\n"
		"       [--triton-dir DIR] [--vllm-dir DIR] [--types T[,T]...] [--owner USER[:GROUP]]\n"
		"       [--gpu-target T]...\n"
		"       [--skip-other-gpus] [--dry-run] [--sync] [--json]\n"
		"       [--threshold K] [--min-version N] [--require K=V]... [--now TIME]\n",
	.summary =
		"        verify a bundle and install its artifacts into the cache dirs; a bundle\n"
		"        holding Triton kernels for a GPU this host lacks is refused (exit 1,\n"
		"        gpu_mismatch) unless --skip-other-gpus leaves those kernels out; --sync:\n"
		"        flush them to disk before reporting success (one syncfs per filesystem);\n"
		"        --owner (root only): every file and folder the load makes is that user's\n"
		"        (USER alone: with its primary group; names or numbers); --dry-run also\n"
		"        checks the folders are there or could be made, and files made in them\n",
	.usage =
		"usage: megacache load BUNDLE (-p PUBFILE... | --insecure-no-verify) [--cache-dir DIR]\n"
		"       [--triton-dir DIR] [--vllm-dir DIR] [--types T[,T]...] [--owner USER[:GROUP]]\n"
		"       [--gpu-target T]...\n"
		"       [--skip-other-gpus] [--dry-run] [--sync] [--json]\n"
		"       [--threshold K] [--min-version N] [--require K=V]... [--now TIME]\n",
	.about =
		"Verify a bundle and install its artifacts into the cache folders (all or nothing).\n"
		"The bundle's Triton kernels are checked against this host's GPUs (NVML, AMD's KFD):\n"
		"one for a GPU target the host lacks refuses the bundle (exit 1, gpu_mismatch), with\n"
		"nothing installed. With no GPU seen, everything is installed, with a warning.\n",
	.options =
		"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
		"  --cache-dir DIR       torch's cache folder ($TORCHINDUCTOR_CACHE_DIR)\n"
		"  --triton-dir DIR      Triton's cache folder ($TRITON_CACHE_DIR)\n"
		"  --vllm-dir DIR        vLLM's cache folder ($VLLM_CACHE_ROOT)\n"
		"  --types T[,T]...      install only these artifact types\n"
		"  --owner USER[:GROUP]  (root only) make every file and folder that user's\n"
		"  --gpu-target T        this host's GPU target, as Triton names it: cuda:90 (compute\n"
		"                        capability 9.0), hip:gfx942 (several: each; instead of the\n"
		"                        GPUs detected; for image builds on a machine without them)\n"
		"  --skip-other-gpus     leave out the kernels for other targets (their whole\n"
		"                        folders) and install the rest\n"
		"  --dry-run             count what would be installed, as a load; install nothing\n"
		"  --sync                flush the files to disk before reporting success\n"
		"  --json                the report as JSON\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
		"                        as verify\n"
		"  -v, --verbose         a line per artifact: what was (or, --dry-run, would be)\n"
		"                        done, its type and key\n",
	.example = "megacache load cache.mcache -p ci.pub",
};

/* A user or group id given as a number: 0 to 2^32 - 2 (-1 is chown's "unchanged"). */
static int
id_number(const char *s, long *id)
{
	uint64_t n;

	if (parse_u64(s, &n) != 0 || n >= 0xffffffffull || n > (uint64_t)LONG_MAX)
		return -1;
	*id = (long)n;
	return 0;
}

/* --owner USER[:GROUP] as ids, each a name (looked up first, as chown(1) does) or a
 * number. USER alone takes the primary group of its passwd entry; a number without
 * one must be given a GROUP. Returns 0, or prints why not and returns 2. */
static int
owner_ids(const char *spec, long *uid, long *gid)
{
	const char *colon = strchr(spec, ':'), *group = colon != NULL ? colon + 1 : NULL;
	size_t len = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
	struct passwd *pw;
	struct group *gr;
	char user[256];

	if (len == 0 || len >= sizeof user || (group != NULL && group[0] == '\0'))
		usage_error("--owner takes USER[:GROUP], not '%s'", spec);
	memcpy(user, spec, len);
	user[len] = '\0';
	if ((pw = getpwnam(user)) != NULL) {
		*uid = (long)pw->pw_uid;
	} else if (id_number(user, uid) == 0) {
		pw = getpwuid((uid_t)*uid);
	} else {
		json_error("invalid");
		say(stderr, "%s: --owner: no user '%s' on this system", PROG, user);
		return EXIT_USAGE;
	}
	if (group == NULL && pw == NULL) {
		json_error("invalid");
		say(stderr, "%s: --owner: uid %s has no passwd entry, so no primary group to take; "
		    "name one: --owner %s:GROUP", PROG, user, user);
		return EXIT_USAGE;
	}
	if (group == NULL) {
		*gid = (long)pw->pw_gid;
	} else if ((gr = getgrnam(group)) != NULL) {
		*gid = (long)gr->gr_gid;
	} else if (id_number(group, gid) != 0) {
		json_error("invalid");
		say(stderr, "%s: --owner: no group '%s' on this system", PROG, group);
		return EXIT_USAGE;
	}
	return 0;
}

/* Sets --owner on the context: only root may give files away (the library says so). */
static int
set_owner(struct tool *t, const char *spec)
{
	long uid, gid;
	int rc;

	if (spec == NULL)
		return 0;
	if ((rc = owner_ids(spec, &uid, &gid)) != 0)
		return rc;
	if ((rc = mc_ctx_set_owner(t->ctx, uid, gid)) != MC_OK) {
		json_error(mc_status_code(rc));
		say(stderr, "%s: --owner: %s", PROG, mc_ctx_error(t->ctx));
		return exit_code(rc);
	}
	return 0;
}

/* load --json; takes r->arts. */
static void
load_json(const struct tool *t, struct load_report *r, const struct load_opts *o,
	  const char *path)
{
	static const char *const tiers[] = {"inductor", "triton", "triton_home", "vllm"};
	cJSON *j = json_object(), *sum, *roots;
	const char *root;
	size_t i;

	cJSON_AddStringToObject(j, "bundle", path);
	bundle_facts_json(j, r->b);
	cJSON_AddStringToObject(j, "cache_dir", r->root);
	/* Where each tier's files go; null for one whose root cannot be told. */
	roots = cJSON_AddObjectToObject(j, "roots");
	for (i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
		if (mc_ctx_tier_root(t->ctx, tiers[i], &root) == MC_OK)
			cJSON_AddStringToObject(roots, tiers[i], root);
		else
			cJSON_AddNullToObject(roots, tiers[i]);
	cJSON_AddBoolToObject(j, "dry_run", r->dry);
	cJSON_AddBoolToObject(j, "synced", o->sync && !r->dry);
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	cJSON_AddNumberToObject(j, "installed", (double)r->installed);
	cJSON_AddNumberToObject(j, "replaced", (double)r->replaced);
	cJSON_AddNumberToObject(j, "unchanged", (double)r->unchanged);
	cJSON_AddNumberToObject(j, "would_install", (double)r->planned);
	cJSON_AddNumberToObject(j, "would_replace", (double)r->planned_replace);
	cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
	gpu_json(&o->gpu, r->b, r, j);
	sum = cJSON_AddObjectToObject(j, "types");
	for (i = 0; i < r->nsums; i++) {
		cJSON *s = cJSON_AddObjectToObject(sum, r->sums[i].type);
		cJSON_AddNumberToObject(s, "count", (double)r->sums[i].count);
		cJSON_AddNumberToObject(s, "bytes", (double)r->sums[i].bytes);
		cJSON_AddNumberToObject(s, "replaced", (double)r->sums[i].replaced);
		cJSON_AddNumberToObject(s, "unchanged", (double)r->sums[i].unchanged);
		cJSON_AddNumberToObject(s, "skipped", (double)r->sums[i].skipped);
	}
	cJSON_AddItemToObject(j, "artifacts", r->arts);
	r->arts = NULL;
	print_json(j);
}

/* Whether path is folder dir or lies beneath it. */
static int
within(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The roots of the tiers of the types loaded, "A", "A and B", ... into buf (a root
 * beneath one named already, like the triton folder in torch's cache, left out). */
static void
roots_used(const struct tool *t, const struct load_report *r, char *buf, size_t len)
{
	const char *seen[64], *tier, *root;
	size_t i, k, n = 0;

	for (i = 0; i < r->nsums && n < 64; i++) {
		if ((tier = mc_ctx_type_tier(t->ctx, r->sums[i].type)) == NULL ||
		    mc_ctx_tier_root(t->ctx, tier, &root) != MC_OK)
			continue;
		for (k = 0; k < n && !within(root, seen[k]); k++)
			;
		if (k == n)
			seen[n++] = root;
	}
	join_words(buf, len, seen, n, " and ", r->root);
}

/* A type's line: the files written (the replaced ones among them), their bytes. */
static void
type_line(const struct load_report *r, const struct type_sum *s)
{
	char hb[32], note[96] = "";

	human_bytes(s->bytes, hb, sizeof hb);
	if (s->replaced && s->unchanged)
		snprintf(note, sizeof note, "  (%zu %s, %zu already there)", s->replaced,
			 r->dry ? "to replace" : "replaced", s->unchanged);
	else if (s->replaced)
		snprintf(note, sizeof note, "  (%zu %s)", s->replaced,
			 r->dry ? "to replace" : "replaced");
	else if (s->unchanged)
		snprintf(note, sizeof note, "  (%zu already there)", s->unchanged);
	if (s->skipped)
		snprintf(note + strlen(note), sizeof note - strlen(note), "  (%zu left out: other "
			 "GPU)", s->skipped);
	say(stdout, "  %-13s %5zu file%s %10s%s", s->type, s->count, s->count == 1 ? " " : "s", hb,
	    note);
}

/* load: a line per type, and the totals. */
static void
load_text(const struct tool *t, const struct load_report *r, const char *path)
{
	size_t i, n = r->dry ? r->planned : r->installed;
	char hb[32], roots[4096];

	if (t->trust.insecure)
		say(stderr, "%s: warning: signatures were not checked (--insecure-no-verify)", PROG);
	roots_used(t, r, roots, sizeof roots);
	say(stdout, "%s %s into %s", r->dry ? "would warm" : "warmed", path, roots);
	for (i = 0; i < r->nsums; i++)
		type_line(r, &r->sums[i]);
	human_bytes(r->bytes, hb, sizeof hb);
	say(stdout, "%zu file%s %s, %zu %s, %zu already there (%s %s)", n, n == 1 ? "" : "s",
	    r->dry ? "to install" : "installed", r->dry ? r->planned_replace : r->replaced,
	    r->dry ? "to replace" : "replaced", r->unchanged, hb,
	    r->dry ? "to write" : "written");
}

/* Checks the operands and the trust options given. */
static void
load_check(const struct tool *t, int argc)
{
	if (optind + 1 != argc)
		usage_say("load needs exactly one BUNDLE");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("load needs -p PUBFILE (or --insecure-no-verify to skip signature "
			  "checks)");
	if (t->trust.npubs > 0 && t->trust.insecure)
		usage_say("-p and --insecure-no-verify do not go together");
}

/* The report of a load, and whether -v asks for a line per artifact. */
struct load_sink {
	struct load_report *r;
	int verbose;
};

/* The mc_artifact_fn of load (ud: struct load_sink): the report's, and with -v a line
 * per artifact installed, replaced or left unchanged (in a dry run: would install, would
 * replace, unchanged); without -v a load, dry or not, says only the sums per type. */
static void
on_load_artifact(void *ud, int what, const char *type, const char *key, const char *dest,
		 uint64_t size)
{
	struct load_sink *s = ud;

	on_artifact(s->r, what, type, key, dest, size);
	if (!s->verbose || s->r->json || s->r->quiet)
		return;
	say(stdout, "%-*s %-12s %s", s->r->dry ? 13 : 9, action_words(what), type, key);
}

int
cmd_load(struct tool *t, int argc, char **argv)
{
	struct load_opts o = {0};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	struct load_report r;
	struct load_sink sink = {&r, t->verbose};
	mc_bundle *b = NULL;
	int rc, status = 0;

	tool_parse(t, argc, argv, &load_spec, &o);
	sink.verbose = t->verbose;
	load_check(t, argc);
	if ((rc = tool_start(t)) != 0 || (rc = set_owner(t, o.owner)) != 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.dry = o.dry;
	r.json = t->json;
	r.quiet = t->quiet;
	r.ctx = t->ctx;
	if ((rc = mc_ctx_tier_root(t->ctx, "inductor", &r.root)) != MC_OK)
		return fail(t->ctx, rc);
	gpu_detect_start(&o.gpu); /* every way out from here frees o.gpu */
	rc = open_trusted(t, argv[optind], &b, keys);
	r.b = b;
	if (rc == MC_OK && o.types != NULL)
		rc = select_types(t->ctx, b, o.types);
	if (rc == MC_OK && (status = gpu_apply_later(t, &o.gpu, b)) != 0)
		goto out;
	if (r.json)
		r.arts = cJSON_CreateArray();
	if (rc == MC_OK)
		rc = mc_bundle_load(b, (o.dry ? MC_LOAD_DRY_RUN : o.sync ? MC_LOAD_SYNC : 0) |
					       gpu_flags(&o.gpu), on_load_artifact, &sink);
	if (rc != MC_OK) {
		status = gpu_told(&o.gpu) != 0 ? gpu_told(&o.gpu) : fail_signed(t, b, rc);
		if (rc == MC_ERR_GPU_MISMATCH)
			gpu_mismatch_hint(t, &o.gpu, b, o.dry);
	} else if (r.json) {
		load_json(t, &r, &o, argv[optind]);
	} else if (!t->quiet) {
		load_text(t, &r, shown_path(argv[optind]));
		gpu_say(t, &o.gpu, b, &r, stdout);
	}
out:
	cJSON_Delete(r.arts);
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	gpu_free(&o.gpu);
	return status;
}
