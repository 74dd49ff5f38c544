/* test_modes.c - the owner's execute bit through the library: recorded from files,
 * scans and merged bundles (never from memory or a torch blob), one content stored once
 * for artifacts that differ in it, found again by (type, key), told apart by diff and
 * mc_writer_drop_known, and installed with 0666 or 0777 less the umask. */
#include "util.h"

static mc_ctx *ctx;
static char *dir;

#define SO "\177ELF launcher"

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("modes");
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

/* <dir>/<rel>, its folders made, holding text, of mode (set exactly, whatever the umask). */
static void
put(const char *rel, const char *text, mode_t mode)
{
	char p[4096], *s;

	snprintf(p, sizeof p, "%s/%s", dir, rel);
	for (s = p + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	spit(p, text, strlen(text));
	ck_assert_int_eq(chmod(p, mode), 0);
}

static mc_bundle *
save_open(mc_writer *w, const char *name)
{
	char p[4096];
	mc_bundle *b;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, p, &b), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	return b;
}

/* The executable bit of b's artifact (type, key), which must be there. */
static int
exec_of(const mc_bundle *b, const char *type, const char *key)
{
	size_t i;
	int x;

	ck_assert_msg(mc_bundle_find_artifact(b, type, key, &i) == MC_OK, "%s %s missing", type, key);
	x = mc_bundle_artifact_executable(b, i);
	ck_assert_int_ge(x, 0);
	return x;
}

/* A cache dir: a Triton kernel whose .so is 0755 (and a setuid file, 04755), its json
 * and group file 0644, and generated code holding the .so's content, 0644. */
static mc_bundle *
scanned(void)
{
	mc_writer *w;
	char p[4096];

	put("cache/triton/0/kern/k.so", SO, 0755);
	put("cache/triton/0/kern/s.bin", "setuid", 04755);
	put("cache/triton/0/kern/k.json", "{}", 0644);
	put("cache/triton/0/kern/__grp__k.json", "{\"child_paths\": [\"k.json\", \"k.so\"]}", 0751);
	put("cache/ab/k.so", SO, 0644);
	snprintf(p, sizeof p, "%s/cache", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, p, NULL, NULL), MC_OK);
	return save_open(w, "scan.mcache");
}

START_TEST(recorded_and_read)
{
	mc_bundle *b = scanned(), *m;
	mc_writer *w;
	const char *type, *key, *hash, *h2;
	char hash1[65];
	uint64_t size;
	size_t i;

	ck_assert_uint_eq(mc_bundle_artifact_count(b), 5);
	ck_assert_int_eq(exec_of(b, "triton", "0/kern/k.so"), 1);
	ck_assert_int_eq(exec_of(b, "triton", "0/kern/s.bin"), 1);
	ck_assert_int_eq(exec_of(b, "triton", "0/kern/k.json"), 0);
	ck_assert_int_eq(exec_of(b, "triton", "0/kern/__grp__k.json"), 1); /* recorded form */
	ck_assert_int_eq(exec_of(b, "kernel_code", "ab/k.so"), 0);
	/* One content, stored once, for the executable artifact and the other. */
	ck_assert_uint_eq(mc_bundle_find_artifact(b, "kernel_code", "ab/k.so", &i), MC_OK);
	ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &key, &size, &hash), MC_OK);
	snprintf(hash1, sizeof hash1, "%s", hash);
	ck_assert_uint_eq(mc_bundle_find_artifact(b, "triton", "0/kern/k.so", &i), MC_OK);
	ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &key, &size, &h2), MC_OK);
	ck_assert_str_eq(hash1, h2);
	/* The queries leave mc_bundle_artifact()'s key alone; a miss and a bad index. */
	ck_assert_int_eq(mc_bundle_artifact_executable(b, 0), 0);
	ck_assert_uint_eq(mc_bundle_find_artifact(b, "kernel_code", "ab/k.so", &i), MC_OK);
	ck_assert_str_eq(key, "0/kern/k.so");
	ck_assert_int_eq(mc_bundle_find_artifact(b, "triton", "0/kern/none", &i), MC_ERR_INVALID);
	ck_assert_int_eq(mc_bundle_artifact_executable(b, 5), MC_ERR_INVALID);
	/* Merged into another bundle, each artifact keeps its bit. */
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_bundle(w, b, dir), MC_OK);
	m = save_open(w, "merged.mcache");
	ck_assert_int_eq(exec_of(m, "triton", "0/kern/k.so"), 1);
	ck_assert_int_eq(exec_of(m, "kernel_code", "ab/k.so"), 0);
	mc_bundle_free(m);
	mc_bundle_free(b);
}
END_TEST

/* A file given in memory or a torch blob, whatever the blob file's mode, is never
 * executable; a file of mode 0755 given by path is. */
START_TEST(sources_without_modes)
{
	mc_writer *w;
	mc_bundle *b;
	char *src = src_path("tests/data/torch-2.11/mlp-cpu-pgo.megacache"), p[4096];
	unsigned char *blob;
	size_t n, i;

	blob = slurp(src, &n);
	snprintf(p, sizeof p, "%s/blob", dir);
	spit(p, blob, n);
	ck_assert_int_eq(chmod(p, 0755), 0);
	put("k.so", SO, 0700);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, p), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "extra", "m.so", SO, strlen(SO)), MC_OK);
	snprintf(p, sizeof p, "%s/k.so", dir);
	ck_assert_int_eq(mc_writer_add_file(w, "extra", "f.so", p), MC_OK);
	b = save_open(w, "blob.mcache");
	ck_assert_uint_gt(mc_bundle_artifact_count(b), 2);
	for (i = 0; i < mc_bundle_artifact_count(b); i++) {
		const char *type, *key;
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &key, NULL, NULL), MC_OK);
		ck_assert_int_eq(mc_bundle_artifact_executable(b, i), strcmp(key, "f.so") == 0);
	}
	mc_bundle_free(b);
	free(blob);
	free(src);
}
END_TEST

struct told {
	char lines[8][160];
	size_t n;
};

static void
on_diff(void *ud, int what, const char *type, const char *key, uint64_t size_a, uint64_t size_b)
{
	struct told *t = ud;

	ck_assert_uint_lt(t->n, 8);
	snprintf(t->lines[t->n++], sizeof t->lines[0], "%d %s %s %llu %llu", what, type, key,
		 (unsigned long long)size_a, (unsigned long long)size_b);
}

/* A file that only became executable is a change: diff says so, and a bundle of what
 * an earlier one lacks keeps it. */
START_TEST(diff_and_drop_known)
{
	struct told t = {{{0}}, 0};
	mc_bundle *a, *b;
	mc_writer *w;
	char p[4096];

	put("c/ab/x.py", "print(1)", 0644);
	put("c/ab/y.py", "print(2)", 0644);
	snprintf(p, sizeof p, "%s/c", dir);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, p, NULL, NULL), MC_OK);
	a = save_open(w, "a.mcache");
	put("c/ab/x.py", "print(1)", 0755);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, p, NULL, NULL), MC_OK);
	ck_assert_int_eq(mc_writer_drop_known(w, &a, 1, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_str_eq(t.lines[0], "2 kernel_code ab/x.py 8 8");
	b = save_open(w, "b.mcache");
	ck_assert_uint_eq(mc_bundle_artifact_count(b), 1);
	ck_assert_int_eq(exec_of(b, "kernel_code", "ab/x.py"), 1);
	t.n = 0;
	ck_assert_int_eq(mc_bundle_diff(a, b, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 2);
	ck_assert_str_eq(t.lines[0], "2 kernel_code ab/x.py 8 8");
	ck_assert_str_eq(t.lines[1], "1 kernel_code ab/y.py 8 0");
	mc_bundle_free(a);
	mc_bundle_free(b);
}
END_TEST

static mode_t
mode_of(const char *root, const char *rel)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof p, "%s/%s", root, rel);
	ck_assert_msg(lstat(p, &st) == 0, "%s missing", p);
	return st.st_mode & 07777;
}

static void
on_load(void *ud, int what, const char *type, const char *key, const char *dest, uint64_t size)
{
	struct told *t = ud;

	(void)dest;
	(void)size;
	ck_assert_uint_lt(t->n, 8);
	snprintf(t->lines[t->n++], sizeof t->lines[0], "%d %s %s", what, type, key);
}

/* Loaded under umask 002 (each test runs in its own process): files 0664 or 0775,
 * folders 0775, never setuid. Loaded again after chmod: the file whose execute bit no
 * longer matches is replaced; the others are left alone. */
START_TEST(load_under_umask)
{
	struct told t = {{{0}}, 0};
	char root[4096];
	mc_bundle *b;
	size_t i;

	umask(002);
	/* Set first: the Triton root, <inductor root>/triton, is found once per context. */
	snprintf(root, sizeof root, "%s/root", dir);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "inductor", root), MC_OK);
	b = scanned();
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_OK);
	ck_assert_uint_eq(mode_of(root, "."), 0775);
	ck_assert_uint_eq(mode_of(root, "ab"), 0775);
	ck_assert_uint_eq(mode_of(root, "ab/k.so"), 0664);
	ck_assert_uint_eq(mode_of(root, "triton"), 0775);
	ck_assert_uint_eq(mode_of(root, "triton/0"), 0775);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern"), 0775);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern/k.so"), 0775);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern/s.bin"), 0775);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern/k.json"), 0664);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern/__grp__k.json"), 0775);
	snprintf(root + strlen(root), sizeof root - strlen(root), "/triton/0/kern/k.so");
	ck_assert_int_eq(chmod(root, 0644), 0);
	root[strlen(root) - strlen("/triton/0/kern/k.so")] = '\0';
	ck_assert_int_eq(mc_bundle_load(b, 0, on_load, &t), MC_OK);
	ck_assert_uint_eq(mode_of(root, "triton/0/kern/k.so"), 0775);
	ck_assert_uint_eq(t.n, 5);
	/* MC_LOAD_REPLACED (3) for the one replaced, MC_LOAD_UNCHANGED (1) for the rest. */
	for (i = 0; i < t.n; i++)
		ck_assert_msg(t.lines[i][0] == (strstr(t.lines[i], " 0/kern/k.so") ? '3' : '1'),
			      "told %s", t.lines[i]);
	mc_bundle_free(b);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("modes");
	TCase *tc = tcase_create("api");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, recorded_and_read);
	tcase_add_test(tc, sources_without_modes);
	tcase_add_test(tc, diff_and_drop_known);
	tcase_add_test(tc, load_under_umask);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
