/* cmd_list.c - list: a bundle's labels, signatures and artifacts, not verified; with
 * --explain, where each artifact would land and what is there now. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

struct list_opts {
	int explain;
	struct gpu_opts gpu; /* with --explain */
};
/* -p: keys to check each signature against (t->trust.pubs); nothing is refused for them. */

static const struct option list_long[] = {{"explain", no_argument, NULL, OPT_EXPLAIN},
					  GPU_LONG_OPTIONS,
					  {NULL, 0, NULL, 0}};

static int
list_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct list_opts *o = opts;

	if (c == 'p') {
		pubkey_opt(&t->trust, arg);
		return 1;
	}
	if (c != OPT_EXPLAIN)
		return gpu_opt(&o->gpu, c, arg);
	o->explain = 1;
	return 1;
}

static const struct tool_optspec list_spec = {"p:", list_long, list_opt};

/* list's help: its lines of the overview (megacache --help), and its own (megacache
 * list --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help list_help = {
	.synopsis =
		"  list BUNDLE [-p PUBFILE]... [--json] [--explain [--cache-dir DIR] [--triton-dir DIR]\n"
		"       [--vllm-dir DIR] [--gpu-target T]... [--skip-other-gpus]]\n",
	.summary =
		"        show a bundle's labels, GPU targets, signatures and artifacts (not\n"
		"        verified); -p: each signature's state under those keys, refusing nothing;\n"
		"        --explain: where each artifact would land, and whether a load here would\n"
		"        install it, replace a file that differs, leave an identical one unchanged,\n"
		"        leave a kernel for another GPU out, or refuse the bundle\n",
	.usage =
		"usage: megacache list BUNDLE [-p PUBFILE]... [--json]\n"
		"       [--explain [--cache-dir DIR] [--triton-dir DIR] [--vllm-dir DIR]\n"
		"       [--gpu-target T]... [--skip-other-gpus]]\n",
	.about =
		"Show a bundle's labels, GPU targets, signatures and artifacts (not verified).\n",
	.options =
		"  -p PUBFILE            check each signature against this key (a file, its text or\n"
		"                        its base64 line): verified, not checked or broken; nothing\n"
		"                        is refused\n"
		"  --explain             where each artifact would land, and what a load would do\n"
		"  --cache-dir DIR, --triton-dir DIR, --vllm-dir DIR\n"
		"                        the cache folders --explain looks at\n"
		"  --gpu-target T, --skip-other-gpus   the host's GPU targets and what to do with\n"
		"                        kernels for others, for --explain: as load\n"
		"  --json                the listing as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache list cache.mcache --explain",
};

/* vLLM's folders a load installs into: a rank's folder of a model compiled as it ran
 * ("torch_compile_cache/<hash>/rank_<n>_<m>"), or of one compiled ahead of time
 * ("torch_compile_cache/torch_aot_compile/<hash>/rank_<n>_<m>"), or the inductor_cache/
 * that such a model's ranks share; and what a load would do there. */
#define VLLM_FOLDERS_MAX 256
#define VLLM_FOLDER_NAME 160 /* "torch_compile_cache/torch_aot_compile/<64 hex>/rank_<n>_<m>" and more */

struct vllm_folder {
	char name[VLLM_FOLDER_NAME + 1];
	size_t install, replace, unchanged;
};

struct vllm_folders {
	struct vllm_folder f[VLLM_FOLDERS_MAX];
	size_t n, more; /* more: artifacts in folders past the first VLLM_FOLDERS_MAX */
};

/* The length of the folder of key that vLLM's folders list names, or 0 for none. */
static size_t
vllm_folder_len(const char *key)
{
	const char *p = key;
	int k, parts = strncmp(key, "torch_compile_cache/torch_aot_compile/", 38) == 0 ? 4 : 3;

	for (k = 0; k < parts; k++, p++)
		if ((p = strchr(p, '/')) == NULL)
			return 0;
	return (size_t)(p - 1 - key);
}

static void
vllm_folder_note(void *ud, int what, const char *type, const char *key)
{
	struct vllm_folders *v = ud;
	size_t n = strncmp(type, "vllm_", 5) == 0 && strcmp(type, "vllm_extra") != 0
		   ? vllm_folder_len(key) : 0, i;

	if (n == 0 || n > VLLM_FOLDER_NAME || what == MC_LOAD_SKIPPED)
		return;
	for (i = 0; i < v->n; i++)
		if (strlen(v->f[i].name) == n && strncmp(v->f[i].name, key, n) == 0)
			break;
	if (i == v->n) {
		if (v->n == VLLM_FOLDERS_MAX) {
			v->more++;
			return;
		}
		memcpy(v->f[v->n].name, key, n);
		v->f[v->n++].name[n] = '\0';
	}
	if (what == MC_LOAD_UNCHANGED)
		v->f[i].unchanged++;
	else if (what == MC_LOAD_WOULD_REPLACE)
		v->f[i].replace++;
	else
		v->f[i].install++;
}

static void
vllm_folders_say(const struct vllm_folders *v, cJSON *j)
{
	cJSON *a = j != NULL ? cJSON_AddArrayToObject(j, "vllm_folders") : NULL;
	size_t i;

	if (j == NULL && v->n > 0)
		say(stdout, "vLLM's folders (a rank's, or the shared inductor_cache/ of a model "
		    "compiled ahead of time):");
	for (i = 0; i < v->n; i++) {
		const struct vllm_folder *f = &v->f[i];
		if (a != NULL) {
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "folder", f->name);
			cJSON_AddNumberToObject(o, "would_install", (double)f->install);
			cJSON_AddNumberToObject(o, "would_replace", (double)f->replace);
			cJSON_AddNumberToObject(o, "unchanged", (double)f->unchanged);
			cJSON_AddItemToArray(a, o);
		} else {
			say(stdout, "  %s: %zu to install, %zu to replace, %zu already there", f->name,
			    f->install, f->replace, f->unchanged);
		}
	}
	if (j == NULL && v->more > 0)
		say(stdout, "  and %zu artifacts in further folders", v->more);
}

/* list --explain: where each artifact would land, and whether it is there already;
 * the bundle's kernels against this host's GPU targets. */
static int
explain_into(struct tool *t, struct list_opts *o, mc_bundle *b, const char *path,
	     struct vllm_folders *vf)
{
	struct load_report r;
	int rc;

	if ((rc = gpu_apply(t, &o->gpu, b)) != 0)
		return rc;
	memset(&r, 0, sizeof r);
	r.also = vllm_folder_note;
	r.also_ud = vf;
	r.dry = 1;
	r.explain = 1;
	r.json = t->json;
	r.quiet = t->quiet;
	r.ctx = t->ctx;
	r.b = b;
	if (t->json)
		r.arts = cJSON_CreateArray();
	if ((rc = mc_bundle_set_insecure(b, 1)) != MC_OK ||
	    (rc = mc_bundle_load(b, MC_LOAD_DRY_RUN | MC_LOAD_NO_WRITE_CHECK | gpu_flags(&o->gpu),
				 on_artifact, &r)) != MC_OK) {
		cJSON_Delete(r.arts);
		if (rc != MC_ERR_GPU_MISMATCH)
			return fail(t->ctx, rc);
		if (!t->json)
			say(stderr, "%s: a load on this host would refuse it:", PROG);
		rc = fail(t->ctx, rc);
		gpu_mismatch_hint(t, &o->gpu, b, 1);
		return rc;
	}
	if (t->json) {
		cJSON *j = json_object();
		cJSON_AddStringToObject(j, "bundle", path);
		cJSON_AddBoolToObject(j, "explain", 1);
		cJSON_AddBoolToObject(j, "signatures_checked", 0);
		cJSON_AddNumberToObject(j, "would_install", (double)r.planned);
		cJSON_AddNumberToObject(j, "would_replace", (double)r.planned_replace);
		cJSON_AddNumberToObject(j, "unchanged", (double)r.unchanged);
		gpu_json(&o->gpu, b, &r, j);
		if (vf->n > 0)
			vllm_folders_say(vf, j);
		cJSON_AddItemToObject(j, "artifacts", r.arts);
		print_json(j);
	} else if (!t->quiet) {
		vllm_folders_say(vf, NULL);
		say(stdout, "%zu to install, %zu to replace, %zu already there (signatures not checked)",
		    r.planned, r.planned_replace, r.unchanged);
		gpu_say(t, &o->gpu, b, &r, stdout);
	}
	return 0;
}

static int
explain(struct tool *t, struct list_opts *o, mc_bundle *b, const char *path)
{
	struct vllm_folders *vf = calloc(1, sizeof *vf);
	int rc;

	if (vf == NULL)
		return fail(t->ctx, MC_ERR_NOMEM);
	rc = explain_into(t, o, b, path, vf);
	free(vf);
	return rc;
}

/* The artifacts of b into the array arts. */
static int
json_artifacts(mc_bundle *b, cJSON *arts)
{
	size_t i, n = mc_bundle_artifact_count(b);
	int rc;

	for (i = 0; i < n; i++) {
		const char *type, *key, *hash;
		uint64_t size;
		cJSON *a;
		int x;
		if ((rc = mc_bundle_artifact(b, i, &type, &key, &size, &hash)) != MC_OK)
			return rc;
		if ((x = mc_bundle_artifact_executable(b, i)) < 0)
			return x;
		a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "type", type);
		cJSON_AddStringToObject(a, "key", key);
		cJSON_AddNumberToObject(a, "size", (double)size);
		cJSON_AddStringToObject(a, "hash", hash);
		cJSON_AddBoolToObject(a, "executable", x);
		cJSON_AddItemToArray(arts, a);
	}
	return MC_OK;
}

/* list --json. Returns MC_OK, or the error of reading the artifact table. */
static int
list_json(const struct tool *t, mc_bundle *b, const char *path)
{
	cJSON *j = json_object(), *sigs;
	size_t i;
	int rc;

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddBoolToObject(j, "signatures_checked", 0);
	bundle_facts_json(j, b);
	cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	cJSON_AddBoolToObject(j, "keys_given", t->trust.npubs > 0);
	sigs = cJSON_AddArrayToObject(j, "signers");
	for (i = 0; i < mc_bundle_signature_count(b); i++)
		cJSON_AddItemToArray(sigs, cJSON_CreateString(mc_bundle_signature_key_id(b, i)));
	cJSON_AddItemToObject(j, "gpu_targets", gpu_targets_json(b));
	cJSON_AddBoolToObject(j, "gpu_targets_recorded",
			      mc_bundle_gpu_targets_known(b) == MC_GPU_RECORDED);
	if ((rc = json_artifacts(b, cJSON_AddArrayToObject(j, "artifacts"))) != MC_OK) {
		cJSON_Delete(j);
		return rc;
	}
	print_json(j);
	return MC_OK;
}

/* list. Returns MC_OK, or the error of reading the artifact table. */
static int
list_text(const struct tool *t, mc_bundle *b, const char *path)
{
	size_t i, n = mc_bundle_artifact_count(b);
	char hb[32], created[32], exp[48] = "", gt[1024];
	const char *used;
	int rc;

	say(stdout, "bundle %s (format %d, not verified)", path, mc_bundle_format_version(b));
	if (mc_bundle_expires(b) != 0) {
		iso_time(mc_bundle_expires(b), hb, sizeof hb);
		snprintf(exp, sizeof exp, ", expires %s", hb);
	}
	iso_time(mc_bundle_created(b), created, sizeof created);
	say(stdout, "created %s, bundle version %" PRIu64 "%s", created, mc_bundle_version(b),
	    exp);
	for (i = 0; i < mc_bundle_label_count(b); i++) {
		const char *k, *v;
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			say(stdout, "label %s=%s", k, v);
	}
	if (mc_bundle_gpu_targets_known(b) == MC_GPU_UNKNOWN) {
		say(stdout, "GPU targets not recorded (format 1, or an older bundle): load and "
		    "verify read them from its kernels");
	} else if (mc_bundle_gpu_target_count(b) > 0) {
		gpu_targets_text(b, gt, sizeof gt);
		say(stdout, "GPU targets %s", gt);
	}
	if ((used = bundle_label(b, USED_LABEL)) != NULL && strcmp(used, USED_LABEL_VALUE) == 0)
		say(stdout, "what one job used (run --save-used): for the same job on the same GPU "
		    "and torch; a job that differs compiles what is not here, as from cold");
	say_signatures(stdout, b, "", t->trust.npubs > 0);
	if (mc_bundle_signature_count(b) == 0)
		say(stdout, "unsigned");
	for (i = 0; i < n; i++) {
		const char *type, *key, *hash;
		uint64_t size;
		int x;
		if ((rc = mc_bundle_artifact(b, i, &type, &key, &size, &hash)) != MC_OK)
			return rc;
		if ((x = mc_bundle_artifact_executable(b, i)) < 0)
			return x;
		human_bytes(size, hb, sizeof hb);
		say(stdout, "%-12s %10s  %s%s", type, hb, key, x ? "  (executable)" : "");
	}
	say(stdout, "%zu artifacts", n);
	return MC_OK;
}

int
cmd_list(struct tool *t, int argc, char **argv)
{
	struct list_opts o = {0};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &list_spec, &o);
	if (optind + 1 != argc)
		usage_say("list needs exactly one BUNDLE");
	if (!o.explain && (o.gpu.ngiven > 0 || o.gpu.skip))
		usage_say("--gpu-target and --skip-other-gpus go with --explain");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (o.explain)
		gpu_detect_start(&o.gpu);
	if ((rc = open_trusted(t, argv[optind], &b, keys)) != MC_OK) {
		rc = fail(t->ctx, rc);
		goto out;
	}
	if ((rc = mc_bundle_read_tables(b)) != MC_OK)
		rc = fail(t->ctx, rc);
	else if (o.explain)
		rc = explain(t, &o, b, shown_path(argv[optind]));
	else if ((rc = t->json ? list_json(t, b, argv[optind]) : list_text(t, b, shown_path(argv[optind]))) != MC_OK) {
		/* The artifact table of a large bundle is read from a temp file as it is listed. */
		fflush(stdout);
		rc = fail(t->ctx, rc);
	}
out:
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	gpu_free(&o.gpu);
	return rc;
}
