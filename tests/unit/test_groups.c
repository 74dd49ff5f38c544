/* test_groups.c - Triton's group files: the record and derive hooks of the triton and
 * triton_home types, and a triton_home kernel packed from one folder and loaded into
 * another, from a bundle of this format and from one that kept the absolute paths; and
 * the GPU target a kernel's metadata file names, and the host's targets asked for by a
 * load. */
#include "util.h"

static mc_ctx *ctx;

#define H "VTAVU5NVGPUS2EEVSN5YOQWW4UFVBQ6S7FGQEU5QNIQFJ3KQL6GQ"
#define GRP "0/" H "/__grp__triton_poi_fused_add_0.json"

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
}

static const struct mc_type *
type(const char *name)
{
	const struct mc_type *t = mc__find_type(ctx, name);

	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(t->record);
	ck_assert_ptr_nonnull(t->derive);
	return t;
}

/* A hook's output (taken over) as a string; NULL stays NULL. */
static char *
text_of(unsigned char *out, size_t n)
{
	char *s;

	if (out == NULL)
		return NULL;
	s = malloc(n + 1);
	memcpy(s, out, n);
	s[n] = '\0';
	ck_assert_uint_eq(strlen(s), n);
	free(out);
	return s;
}

/* The recorded form of text (NULL: kept as it is). */
static char *
record(const char *tname, const char *key, const char *text)
{
	unsigned char *out = (unsigned char *)"x";
	size_t n = 7;
	struct mc_hook_env env = {ctx, "/", NULL, NULL, NULL, 0};

	ck_assert_int_eq(type(tname)->record(key, (const unsigned char *)text, strlen(text), &env,
					     &out, &n), MC_OK);
	return text_of(out, n);
}

/* What a load writes for recorded content rec at dir (NULL: rec itself). */
static char *
derive(const char *key, const char *rec, const char *dir)
{
	unsigned char *out = (unsigned char *)"x";
	size_t n = 7;
	struct mc_hook_env env = {ctx, dir, NULL, NULL, NULL, 0};

	ck_assert_int_eq(type("triton")->derive(key, (const unsigned char *)rec, strlen(rec), &env,
						&out, &n), MC_OK);
	return text_of(out, n);
}

static void
expect(char *got, const char *want)
{
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

#define CANON "{\"child_paths\": {\"k.cubin\": \"k.cubin\", \"k.json\": \"k.json\", " \
	      "\"k.source\": \"k.source\"}}"

START_TEST(recorded_form)
{
	/* As Triton writes it: absolute paths, in the order the files were put. */
	expect(record("triton", GRP,
		      "{\"child_paths\": {\"k.source\": \"/home/u/.triton/cache/" H "/k.source\", "
		      "\"k.cubin\": \"/home/u/.triton/cache/" H "/k.cubin\", "
		      "\"k.json\": \"/home/u/.triton/cache/" H "/k.json\"}}"),
	       CANON);
	/* Triton's remote mode: a list of names; other spacing, relative paths. */
	expect(record("triton_home", H "/__grp__k.json",
		      "{\"child_paths\": [\"k.source\", \"k.json\", \"k.cubin\"]}"),
	       CANON);
	expect(record("triton", GRP,
		      " {\"child_paths\":{\"k.json\":\"k.json\",\"k.cubin\":\"x/k.cubin\","
		      "\"k.source\":\"k.source\"}}\n"),
	       CANON);
	/* The recorded form is its own recorded form. */
	expect(record("triton", GRP, CANON), CANON);
	expect(record("triton", GRP, "{\"child_paths\": {}}"), "{\"child_paths\": {}}");
}
END_TEST

START_TEST(other_files_kept_as_they_are)
{
	static const char *const kept[] = {
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin\"}, \"other\": 1}",  /* other member */
		"{\"child_paths\": {\"k.cubin\": \"/a/k.ptx\"}}",                 /* another name */
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin/\"}}",
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin\"",                  /* not JSON */
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin\"}} x",
		"",
		"[\"k.cubin\"]",
		"{\"child_paths\": \"k.cubin\"}",
		"{\"child_paths\": [\"k.cubin\", \"k.cubin\"]}",                   /* twice */
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin\", \"k.cubin\": \"/b/k.cubin\"}}",
		"{\"child_paths\": [\"../k.cubin\"]}",                             /* not a file name */
		"{\"child_paths\": [\".k\"]}",
		"{\"child_paths\": {\"k\\\"x\": \"/a/k\\\"x\"}}",
		"{\"child_paths\": [\"k.cubin\", 3]}",
		"{\"child_paths\": {\"k.cubin\": \"/a/k.cubin\\u0000\"}}",
		"{\"child_paths\": {\"k.cubin\": null}}",
	};
	char *big;
	size_t i;

	for (i = 0; i < sizeof kept / sizeof kept[0]; i++)
		ck_assert_msg(record("triton", GRP, kept[i]) == NULL, "recorded anew: %s", kept[i]);
	/* Only group files. */
	ck_assert_ptr_null(record("triton", "0/" H "/k.json", CANON));
	ck_assert_ptr_null(record("triton_home", H "/__grp__k.jsonx", CANON));
	ck_assert_ptr_null(derive("0/" H "/k.json", CANON, "/a"));
	/* Over 1 MiB. */
	big = malloc(MC_DERIVE_MAX + 64);
	snprintf(big, 64, "{\"child_paths\": [\"k.cubin\"]}");
	memset(big + strlen(big), ' ', MC_DERIVE_MAX + 1 - strlen(big));
	big[MC_DERIVE_MAX + 1] = '\0';
	ck_assert_ptr_null(record("triton", GRP, big));
	big[MC_DERIVE_MAX] = '\0';
	expect(record("triton", GRP, big), "{\"child_paths\": {\"k.cubin\": \"k.cubin\"}}");
	free(big);
}
END_TEST

START_TEST(derived_form)
{
	expect(derive(GRP, CANON, "/srv/cache/" H),
	       "{\"child_paths\": {\"k.cubin\": \"/srv/cache/" H "/k.cubin\", \"k.json\": "
	       "\"/srv/cache/" H "/k.json\", \"k.source\": \"/srv/cache/" H "/k.source\"}}");
	/* Escaped as Python's json.dumps does: quote, backslash, controls, non-ASCII
	 * (U+00E9, U+1F600 as a surrogate pair), DEL. */
	expect(derive(GRP, "{\"child_paths\": {\"k\": \"k\"}}",
		      "/a\"b\\c\td\x01\x7f/\xc3\xa9t\xc3\xa9/\xf0\x9f\x98\x80"),
	       "{\"child_paths\": {\"k\": \"/a\\\"b\\\\c\\td\\u0001\\u007f/\\u00e9t\\u00e9/"
	       "\\ud83d\\ude00/k\"}}");
	/* From the absolute form of bundles made before, and from the list form. */
	expect(derive(GRP, "{\"child_paths\": {\"k.json\": \"/old/k.json\", \"k.cubin\": "
			   "\"/old/k.cubin\"}}", "/new"),
	       "{\"child_paths\": {\"k.cubin\": \"/new/k.cubin\", \"k.json\": \"/new/k.json\"}}");
	expect(derive(GRP, "{\"child_paths\": [\"k.json\", \"k.cubin\"]}", "/"),
	       "{\"child_paths\": {\"k.cubin\": \"/k.cubin\", \"k.json\": \"/k.json\"}}");
	/* Anything else is written as recorded. */
	ck_assert_ptr_null(derive(GRP, "{\"child_paths\": {}, \"x\": 0}", "/new"));
	ck_assert_ptr_null(derive(GRP, "not json", "/new"));
}
END_TEST

START_TEST(derive_refuses_a_path_that_is_not_utf8)
{
	unsigned char *out = NULL;
	size_t n = 0;
	struct mc_hook_env bad = {ctx, "/a/\xff", NULL, NULL, NULL, 0};
	struct mc_hook_env surrogate = {ctx, "/a/\xed\xa0\x80", NULL, NULL, NULL, 0};

	ck_assert_int_eq(type("triton_home")->derive(H "/__grp__k.json", (const unsigned char *)CANON,
						     strlen(CANON), &bad, &out, &n),
			 MC_ERR_INVALID);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(type("triton")->derive(GRP, (const unsigned char *)CANON, strlen(CANON),
						&surrogate, &out, &n),
			 MC_ERR_INVALID); /* a surrogate encoded */
}
END_TEST

START_TEST(which_files_derive)
{
	ck_assert(mc__derives(type("triton"), GRP));
	ck_assert(mc__derives(type("triton_home"), H "/__grp__k.json"));
	ck_assert(!mc__derives(type("triton"), "0/" H "/k.json"));
	ck_assert(!mc__derives(type("triton"), "0/" H "/__grp__k.jsonl"));
	ck_assert(!mc__derives(type("triton"), "0/" H "/x__grp__k.json"));
	ck_assert(!mc__derives(mc__find_type(ctx, "kernel_code"), "ab/__grp__k.json"));
	ck_assert(!mc__derives(NULL, GRP));
}
END_TEST

/* Writes a triton_home kernel folder at root/H whose group file names it absolutely,
 * in Triton's order. */
static void
make_kernel(const char *root)
{
	static const char *const ext[] = {"source", "cubin", "json"};
	char p[4096], g[8192];
	size_t i, k = 0;

	snprintf(p, sizeof p, "%s/%s", root, H);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	k += (size_t)snprintf(g + k, sizeof g - k, "{\"child_paths\": {");
	for (i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/%s/k.%s", root, H, ext[i]);
		spit(p, ext[i], strlen(ext[i]));
		k += (size_t)snprintf(g + k, sizeof g - k, "%s\"k.%s\": \"%s\"", i ? ", " : "", ext[i],
				      p);
	}
	snprintf(g + k, sizeof g - k, "}}");
	snprintf(p, sizeof p, "%s/%s/__grp__k.json", root, H);
	spit(p, g, strlen(g));
}

static void
count_installed(void *ud, int what, const char *type, const char *key, const char *dest,
		uint64_t size)
{
	*(int *)ud += what == MC_LOAD_INSTALLED || what == MC_LOAD_REPLACED;
}

/* Loads bundle into the triton_home root; *installed counts what was written. */
static void
load(const char *bundle, const char *root, int *installed)
{
	mc_bundle *b;

	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "triton_home", root), MC_OK);
	ck_assert_int_eq(mc_bundle_open(ctx, bundle, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	*installed = 0;
	ck_assert_int_eq(mc_bundle_load(b, 0, count_installed, installed), MC_OK);
	mc_bundle_free(b);
}

/* The group file at root/H as a string. */
static char *
group_at(const char *root)
{
	char p[4096], *s;
	unsigned char *b;
	size_t n;

	snprintf(p, sizeof p, "%s/%s/__grp__k.json", root, H);
	b = slurp(p, &n);
	s = malloc(n + 1);
	memcpy(s, b, n);
	s[n] = '\0';
	free(b);
	return s;
}

#define WANT(dir) "{\"child_paths\": {\"k.cubin\": \"" dir "/" H "/k.cubin\", \"k.json\": \"" \
	dir "/" H "/k.json\", \"k.source\": \"" dir "/" H "/k.source\"}}"

/* Loads bundle into root dir/name (relative to dir, the current folder), which must
 * write installed files; the group file must then name dir/name. */
static void
load_check(const char *bundle, const char *dir, const char *name, int installed)
{
	char want[8192], *g;
	int n;

	load(bundle, name, &n);
	ck_assert_int_eq(n, installed);
	snprintf(want, sizeof want, WANT("%s/%s"), dir, name, dir, name, dir, name);
	g = group_at(name);
	ck_assert_str_eq(g, want);
	free(g);
}

START_TEST(triton_home_kernel_moves)
{
	char *dir = scratch("groups"), a[4096], bundle[4096], old[4096], *g;
	mc_writer *w;
	mc_bundle *b;
	const char *t, *key, *hash;
	uint64_t size;
	int n;

	snprintf(a, sizeof a, "%s/a", dir);
	ck_assert_int_eq(mkdir(a, 0755), 0);
	make_kernel(a);
	snprintf(bundle, sizeof bundle, "%s/b.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_triton_cache(w, a, NULL, NULL), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, bundle), MC_OK);
	mc_writer_free(w);
	/* The bundle holds the recorded form. */
	ck_assert_int_eq(mc_bundle_open(ctx, bundle, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_artifact(b, 0, &t, &key, &size, &hash), MC_OK);
	ck_assert_str_eq(t, "triton_home");
	ck_assert_str_eq(key, H "/__grp__k.json");
	ck_assert_uint_eq(size, strlen(CANON));
	mc_bundle_free(b);
	/* Loaded elsewhere, through a relative root with dots: the absolute folder. */
	ck_assert_int_eq(chdir(dir), 0);
	load(bundle, "./x/../c//", &n);
	ck_assert_int_eq(n, 4);
	/* The file names c; a second load finds it in place. */
	load_check(bundle, dir, "c", 0);

	/* A bundle made before kept the absolute paths: loaded, the file names its folder. */
	snprintf(old, sizeof old, "%s/old.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	g = group_at(a);
	ck_assert_int_eq(mc_writer_add_memory(w, "triton_home", H "/__grp__k.json", g, strlen(g)),
			 MC_OK);
	free(g);
	ck_assert_int_eq(mc_writer_save(w, old), MC_OK);
	mc_writer_free(w);
	load_check(old, dir, "d", 1);
	/* Its content is not the recorded form: loaded again, the file is written again,
	 * the same. */
	load_check(old, dir, "d", 1);
	free(dir);
}
END_TEST

/* A kernel's metadata file and the GPU target it names (SPEC.md section 12.6). */
static const char *
target_of(const char *json)
{
	static char out[MC_GPU_TARGET_LEN];

	return mc__kernel_target((const unsigned char *)json, strlen(json), out) ? out : NULL;
}

START_TEST(kernel_targets)
{
	const struct mc_type *t = mc__find_type(ctx, "triton"), *a = mc__find_type(ctx, "autotune");
	const char *s;

	ck_assert_str_eq(target_of("{\"target\": {\"backend\": \"cuda\", \"arch\": 90, "
				   "\"warp_size\": 32}}"), "cuda:90");
	ck_assert_str_eq(target_of(" \n{\"target\":{\"backend\":\"hip\",\"arch\":\"gfx942\"}}\r\n"),
			 "hip:gfx942");
	/* A whole number, however written; -0 is 0. */
	ck_assert_str_eq(target_of("{\"target\":{\"backend\":\"cuda\",\"arch\":9e1}}"), "cuda:90");
	ck_assert_str_eq(target_of("{\"target\":{\"backend\":\"cuda\",\"arch\":90.0}}"), "cuda:90");
	ck_assert_str_eq(target_of("{\"target\":{\"backend\":\"cuda\",\"arch\":-0}}"), "cuda:0");
	ck_assert_str_eq(target_of("{\"target\":{\"backend\":\"cuda\",\"arch\":121}}"), "cuda:121");
	/* None named: out of range, a fraction, a negative, an object (XPU), no target, a
	 * bad form, a repeated member, an escaped NUL, not one JSON text, empty. */
	static const char *const none[] = {
		"{\"target\":{\"backend\":\"cuda\",\"arch\":1000000001}}",
		"{\"target\":{\"backend\":\"cuda\",\"arch\":90.5}}",
		"{\"target\":{\"backend\":\"cuda\",\"arch\":-90}}",
		"{\"target\":{\"backend\":\"xpu\",\"arch\":{\"name\":\"pvc\"}}}",
		"{\"name\":\"k\"}",
		"{\"target\":{\"backend\":\"CUDA\",\"arch\":90}}",
		"{\"target\":{\"backend\":\"hip\",\"arch\":\"gfx90a:sramecc+\"}}",
		"{\"target\":{\"backend\":\"cuda\",\"arch\":90},\"target\":{\"backend\":\"cuda\",\"arch\":80}}",
		"{\"target\":{\"backend\":\"cuda\",\"arch\":90,\"arch\":80}}",
		"{\"target\":{\"backend\":\"cuda\\u0000x\",\"arch\":90}}",
		"{\"target\":{\"backend\":\"cuda\",\"arch\":90}} {}",
		"\v{\"target\":{\"backend\":\"cuda\",\"arch\":90}}",
		"[{\"target\":{\"backend\":\"cuda\",\"arch\":90}}]",
		""};
	size_t i;

	for (i = 0; i < sizeof none / sizeof none[0]; i++)
		ck_assert_msg((s = target_of(none[i])) == NULL, "%s named %s", none[i], s);
	/* Which files are metadata: a kernel folder's .json, not its group file. */
	ck_assert(mc__kernel_meta(t, "0/K/k.json"));
	ck_assert(!mc__kernel_meta(t, "0/K/__grp__k.json"));
	ck_assert(!mc__kernel_meta(t, "0/K/k.cubin"));
	ck_assert(!mc__kernel_meta(a, "vu/x.json"));
	/* The form of a target, as --gpu-target and gpu_targets take it. */
	ck_assert(mc_gpu_target_ok("cuda:90") && mc_gpu_target_ok("hip:gfx942"));
	ck_assert(!mc_gpu_target_ok("sm90") && !mc_gpu_target_ok("cuda:") && !mc_gpu_target_ok(":90"));
	ck_assert(!mc_gpu_target_ok("cuda:9 0") && !mc_gpu_target_ok("Cuda:90"));
}
END_TEST

/* The host's targets from a function, as the tool gives them while NVML still starts:
 * asked for once, when the pass is over; what it gives is checked as
 * mc_bundle_set_host_gpus()'s targets are, and a refusal or its error ends the load with
 * nothing written. */
#define VU "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"

struct host_ask {
	const char *target; /* NULL: fails */
	int calls;
};

static int
host_fn(void *ud, const char *const **targets, size_t *n)
{
	struct host_ask *h = ud;

	h->calls++;
	if (h->target == NULL)
		return MC_ERR_NOMEM;
	*targets = &h->target;
	*n = 1;
	return MC_OK;
}

/* bundle, opened to load into root (the triton tier's), its host's targets from h. */
static mc_bundle *
open_asking(const char *bundle, const char *root, struct host_ask *h)
{
	mc_bundle *b;

	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "triton", root), MC_OK);
	ck_assert_int_eq(mc_bundle_open(ctx, bundle, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_set_host_gpus_fn(b, host_fn, h), MC_OK);
	return b;
}

/* Loads bundle into dir/name with the targets from h (and flags); the load's result. */
static int
load_asking(const char *bundle, const char *dir, const char *name, struct host_ask *h,
	    unsigned flags)
{
	char root[4096];
	mc_bundle *b;
	int rc;

	snprintf(root, sizeof root, "%s/%s", dir, name);
	b = open_asking(bundle, root, h);
	rc = mc_bundle_load(b, flags, NULL, NULL);
	if (flags & MC_LOAD_SKIP_OTHER_GPUS)
		ck_assert_uint_eq(mc_bundle_gpu_kernels_skipped(b), rc == MC_OK);
	mc_bundle_free(b);
	return rc;
}

START_TEST(host_targets_asked_for)
{
	static const char meta[] = "{\"target\": {\"backend\": \"cuda\", \"arch\": 90}}";
	char *dir = scratch("hostfn"), bundle[4096], p[4096];
	struct host_ask h = {"cuda:80", 0};
	const char *given = "cuda:80";
	mc_writer *w;
	mc_bundle *b;

	snprintf(bundle, sizeof bundle, "%s/b.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "triton", "0/" H "/k.json", meta, strlen(meta)),
			 MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "triton", "0/" H "/k.cubin", "cubin", 5), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "autotune", VU, "{}", 2), MC_OK);
	ck_assert_int_eq(mc_writer_save(w, bundle), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "inductor", dir), MC_OK);

	/* Another target: refused, nothing written; asked once. */
	ck_assert_int_eq(load_asking(bundle, dir, "other", &h, 0), MC_ERR_GPU_MISMATCH);
	ck_assert_int_eq(h.calls, 1);
	snprintf(p, sizeof p, "%s/other", dir);
	ck_assert_int_le(count_tree(p), 0); /* absent or empty */
	/* The same, leaving the kernel out: the rest is written. */
	h.calls = 0;
	ck_assert_int_eq(load_asking(bundle, dir, "skip", &h, MC_LOAD_SKIP_OTHER_GPUS), MC_OK);
	ck_assert_int_eq(h.calls, 1);
	snprintf(p, sizeof p, "%s/skip", dir);
	ck_assert_int_le(count_tree(p), 0); /* absent or empty */
	snprintf(p, sizeof p, "%s/" VU, dir);
	ck_assert_int_eq(access(p, F_OK), 0);
	ck_assert_int_eq(unlink(p), 0);
	/* Its failure is the load's, with nothing written. */
	h.target = NULL;
	h.calls = 0;
	ck_assert_int_eq(load_asking(bundle, dir, "failed", &h, 0), MC_ERR_NOMEM);
	ck_assert_int_eq(h.calls, 1);
	snprintf(p, sizeof p, "%s/failed", dir);
	ck_assert_int_le(count_tree(p), 0); /* absent or empty */
	snprintf(p, sizeof p, "%s/" VU, dir);
	ck_assert_int_eq(access(p, F_OK), -1);
	/* On one handle: a load whose function failed leaves it to ask the next load, which
	 * checks the kernels; the message says what failed. */
	h.calls = 0;
	snprintf(p, sizeof p, "%s/again", dir);
	b = open_asking(bundle, p, &h);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_ERR_NOMEM);
	ck_assert_str_eq(mc_ctx_error(ctx), "the host's GPU targets could not be found");
	h.target = "cuda:80";
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_ERR_GPU_MISMATCH);
	ck_assert_int_eq(h.calls, 2);
	mc_bundle_free(b);
	ck_assert_int_le(count_tree(p), 0); /* absent or empty */
	/* A bundle that records no targets (format 1) is refused from its kernels, with
	 * their number, as with the targets named. */
	snprintf(p, sizeof p, "%s/b1.mcache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_format_version(w, 1), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "triton", "0/" H "/k.json", meta, strlen(meta)),
			 MC_OK);
	ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
	mc_writer_free(w);
	h.calls = 0;
	ck_assert_int_eq(load_asking(p, dir, "one", &h, 0), MC_ERR_GPU_MISMATCH);
	ck_assert_int_eq(h.calls, 1);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "holds 1 Triton kernel for cuda:90"));
	/* A load whose plan fails does not ask for the targets: the root is a file. */
	h.target = "cuda:90";
	h.calls = 0;
	snprintf(p, sizeof p, "%s/file", dir);
	spit(p, "x", 1);
	ck_assert_int_ne(load_asking(bundle, dir, "file", &h, 0), MC_OK);
	ck_assert_int_eq(h.calls, 0);
	/* Its target: everything is written. */
	ck_assert_int_eq(load_asking(bundle, dir, "same", &h, 0), MC_OK);
	ck_assert_int_eq(h.calls, 1);
	snprintf(p, sizeof p, "%s/same/" H "/k.cubin", dir);
	ck_assert_int_eq(access(p, F_OK), 0);
	/* mc_bundle_set_host_gpus() after it replaces it: not asked. */
	h.calls = 0;
	snprintf(p, sizeof p, "%s/given", dir);
	b = open_asking(bundle, p, &h);
	ck_assert_int_eq(mc_bundle_set_host_gpus(b, &given, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_ERR_GPU_MISMATCH);
	ck_assert_int_eq(h.calls, 0);
	mc_bundle_free(b);
	free(dir);
}
END_TEST

static Suite *
groups_suite(void)
{
	Suite *s = suite_create("groups");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, recorded_form);
	tcase_add_test(tc, other_files_kept_as_they_are);
	tcase_add_test(tc, derived_form);
	tcase_add_test(tc, derive_refuses_a_path_that_is_not_utf8);
	tcase_add_test(tc, which_files_derive);
	tcase_add_test(tc, triton_home_kernel_moves);
	tcase_add_test(tc, kernel_targets);
	tcase_add_test(tc, host_targets_asked_for);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(groups_suite())
