/* test_keepnew.c - mc_writer_drop_known: a cache dir recorded again after a job and
 * saved as a bundle of only what the earlier bundles lack; what fn is told, the
 * artifacts and bytes of the bundle, shared contents, repeated keys, a torch blob. */
#include "util.h"

static mc_ctx *ctx;
static char *dir;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("keepnew");
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

/* What fn was told, one line per call: "ADDED kernel_code ab/x.py 0 5". */
struct told {
	char lines[16][160];
	size_t n;
};

static void
on_diff(void *ud, int what, const char *type, const char *key, uint64_t size_a, uint64_t size_b)
{
	struct told *t = ud;

	ck_assert_uint_lt(t->n, 16);
	ck_assert(what == MC_DIFF_ADDED || what == MC_DIFF_CHANGED);
	snprintf(t->lines[t->n++], sizeof t->lines[0], "%s %s %s %llu %llu",
		 what == MC_DIFF_ADDED ? "ADDED" : "CHANGED", type, key,
		 (unsigned long long)size_a, (unsigned long long)size_b);
}

/* Writes content to <cache>/ab/<name>, a kernel code file of an inductor cache dir. */
static void
put(const char *cache, const char *name, const char *content)
{
	char p[4096];

	snprintf(p, sizeof p, "%s/ab", cache);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/ab/%s", cache, name);
	spit(p, content, strlen(content));
}

static void
gone(const char *cache, const char *name)
{
	char p[4096];

	snprintf(p, sizeof p, "%s/ab/%s", cache, name);
	ck_assert_int_eq(unlink(p), 0);
}

static mc_writer *
record(const char *cache)
{
	mc_writer *w;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_cache_dir(w, cache, NULL, NULL), MC_OK);
	return w;
}

/* Saves w (freed) as <dir>/<name> and opens the bundle. */
static mc_bundle *
save_open(mc_writer *w, const char *name)
{
	char p[4096];
	mc_bundle *b;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	ck_assert_int_eq(mc_writer_save(w, p), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(ctx, p, &b), MC_OK);
	return b;
}

/* b holds exactly the kernel_code artifacts ab/<names[i]> with contents[i], in this
 * order: their bytes as a load installs them. */
static void
expect(mc_bundle *b, const char *const *names, const char *const *contents, size_t n)
{
	char *root = scratch("keepnew-root"), p[4096], key[256];
	const char *type, *k, *hash;
	uint64_t size;
	size_t i, len;

	ck_assert_uint_eq(mc_bundle_artifact_count(b), n);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(mc_bundle_artifact(b, i, &type, &k, &size, &hash), MC_OK);
		snprintf(key, sizeof key, "ab/%s", names[i]);
		ck_assert_str_eq(type, "kernel_code");
		ck_assert_str_eq(k, key);
		ck_assert_uint_eq(size, strlen(contents[i]));
	}
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "inductor", root), MC_OK);
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_OK);
	for (i = 0; i < n; i++) {
		unsigned char *got;
		snprintf(p, sizeof p, "%s/ab/%s", root, names[i]);
		got = slurp(p, &len);
		ck_assert_uint_eq(len, strlen(contents[i]));
		ck_assert(memcmp(got, contents[i], len) == 0);
		free(got);
	}
	ck_assert_int_eq(count_tree(root), (int)n + (n > 0));
	free(root);
}

START_TEST(only_what_changed)
{
	static const char *const names[] = {"grown.py", "new.py", "samesize.py", "twin.py"};
	static const char *const contents[] = {"a longer body", "brand new", "bbbb",
					       "identical\n"};
	char *cache = scratch("keepnew-cache");
	struct told t = {0};
	mc_bundle *base, *b;
	mc_writer *w;

	put(cache, "same.py", "identical\n");
	put(cache, "samesize.py", "aaaa");
	put(cache, "grown.py", "short");
	put(cache, "old.py", "only in the base");
	base = save_open(record(cache), "base.mcache");

	/* The job: one file changed in place, one grew, one is new, one is the identical
	 * file's content under another name, one went away. */
	put(cache, "samesize.py", "bbbb");
	put(cache, "grown.py", contents[0]);
	put(cache, "new.py", contents[1]);
	put(cache, "twin.py", contents[3]);
	gone(cache, "old.py");
	w = record(cache);
	ck_assert_uint_eq(mc_writer_artifact_count(w), 5);
	/* Files no base has with their size are not read: gone now, back for the save. */
	gone(cache, "grown.py");
	gone(cache, "new.py");
	ck_assert_int_eq(mc_writer_drop_known(w, &base, 1, on_diff, &t), MC_OK);
	put(cache, "grown.py", contents[0]);
	put(cache, "new.py", contents[1]);

	ck_assert_uint_eq(t.n, 4);
	ck_assert_str_eq(t.lines[0], "CHANGED kernel_code ab/grown.py 5 13");
	ck_assert_str_eq(t.lines[1], "ADDED kernel_code ab/new.py 0 9");
	ck_assert_str_eq(t.lines[2], "CHANGED kernel_code ab/samesize.py 4 4");
	ck_assert_str_eq(t.lines[3], "ADDED kernel_code ab/twin.py 0 10");
	ck_assert_uint_eq(mc_writer_artifact_count(w), 4);
	ck_assert_uint_eq(mc_writer_total_bytes(w), 13 + 9 + 4 + 10);
	b = save_open(w, "new.mcache");
	expect(b, names, contents, 4);
	mc_bundle_free(b);
	mc_bundle_free(base);
	free(cache);
}
END_TEST

/* A bundle of kernel code given as name, content pairs. */
static mc_bundle *
bundle_of(const char *name, const char *const *pairs, size_t n)
{
	mc_writer *w;
	char key[256];
	size_t i;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof key, "ab/%s", pairs[2 * i]);
		ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", key, pairs[2 * i + 1],
						      strlen(pairs[2 * i + 1])), MC_OK);
	}
	return save_open(w, name);
}

START_TEST(every_base_consulted)
{
	static const char *const one[] = {"a.py", "old-a", "d.py", "d1", "e.py", "eeee"};
	static const char *const two[] = {"a.py", "first", "b.py", "second", "d.py", "d22"};
	static const char *const names[] = {"c.py", "d.py"};
	static const char *const contents[] = {"third", "d4444"};
	char *cache = scratch("keepnew-cache");
	struct told t = {0};
	mc_bundle *bases[2], *b;
	mc_writer *w;

	bases[0] = bundle_of("one.mcache", one, 3);
	bases[1] = bundle_of("two.mcache", two, 3);
	put(cache, "a.py", "first");  /* as in the second; the first has other bytes */
	put(cache, "b.py", "second"); /* only in the second */
	put(cache, "c.py", "third");  /* in neither */
	put(cache, "d.py", "d4444");  /* both have other bytes */
	put(cache, "e.py", "eeee");   /* only in the first */
	w = record(cache);
	ck_assert_int_eq(mc_writer_drop_known(w, bases, 2, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 2);
	ck_assert_str_eq(t.lines[0], "ADDED kernel_code ab/c.py 0 5");
	ck_assert_str_eq(t.lines[1], "CHANGED kernel_code ab/d.py 3 5");
	ck_assert_uint_eq(mc_writer_artifact_count(w), 2);
	b = save_open(w, "new.mcache");
	expect(b, names, contents, 2);
	mc_bundle_free(b);

	/* Every one known: nothing left, nothing told, an empty bundle. */
	gone(cache, "c.py");
	gone(cache, "d.py");
	w = record(cache);
	t.n = 0;
	ck_assert_int_eq(mc_writer_drop_known(w, bases, 2, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 0);
	ck_assert_uint_eq(mc_writer_artifact_count(w), 0);
	ck_assert_uint_eq(mc_writer_total_bytes(w), 0);
	b = save_open(w, "empty.mcache");
	expect(b, NULL, NULL, 0);
	ck_assert_uint_eq(b->m.nobjects, 0);
	mc_bundle_free(b);

	/* No base: everything is new, and told so. */
	w = record(cache);
	t.n = 0;
	ck_assert_int_eq(mc_writer_drop_known(w, NULL, 0, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 3);
	ck_assert_str_eq(t.lines[2], "ADDED kernel_code ab/e.py 0 4");
	ck_assert_uint_eq(mc_writer_artifact_count(w), 3);
	ck_assert_int_eq(mc_writer_drop_known(NULL, NULL, 0, NULL, NULL), MC_ERR_INVALID);
	ck_assert_int_eq(mc_writer_drop_known(w, NULL, 1, NULL, NULL), MC_ERR_INVALID);
	mc_writer_free(w);
	mc_bundle_free(bases[0]);
	mc_bundle_free(bases[1]);
	free(cache);
}
END_TEST

START_TEST(shared_content)
{
	enum { BIG = 64 * 1024 };
	static const char *const names[] = {"k2.py"};
	char *x = malloc(BIG + 1), *y = malloc(BIG + 1), p[4096];
	const char *base_pairs[4];
	const char *contents[1];
	struct told t = {0};
	mc_bundle *base, *b;
	mc_writer *w;
	struct stat st;
	size_t i;

	/* Stored as is (level 0), so the bundle's size tells what it holds. */
	for (i = 0; i < BIG; i++) {
		x[i] = (char)('a' + (i * 7 + i / 13) % 26);
		y[i] = (char)('A' + (i * 11 + i / 17) % 26);
	}
	x[BIG] = y[BIG] = '\0';
	base_pairs[0] = "k1.py";
	base_pairs[1] = x;
	base_pairs[2] = "k3.py";
	base_pairs[3] = y;
	base = bundle_of("base.mcache", base_pairs, 2);
	/* k1 and k2 share one object; k1 and k3 are known. */
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_compression(w, 0), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/k1.py", x, BIG), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/k2.py", x, BIG), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/k3.py", y, BIG), MC_OK);
	ck_assert_int_eq(mc_writer_drop_known(w, &base, 1, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 1);
	ck_assert_str_eq(t.lines[0], "ADDED kernel_code ab/k2.py 0 65536");
	b = save_open(w, "new.mcache");
	contents[0] = x;
	expect(b, names, contents, 1);
	/* x stored once, y (referenced by nothing kept) not at all. */
	ck_assert_uint_eq(b->m.nobjects, 1);
	snprintf(p, sizeof p, "%s/new.mcache", dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_gt(st.st_size, BIG);
	ck_assert_int_lt(st.st_size, BIG + BIG / 2);
	mc_bundle_free(b);
	mc_bundle_free(base);
	free(x);
	free(y);
}
END_TEST

/* The keys the conflict callback was told, one after another. */
static void
note_conflict(void *ud, const char *type, const char *key)
{
	char *seen = ud;

	ck_assert_str_eq(type, "kernel_code");
	strncat(seen, key, 255 - strlen(seen));
	strncat(seen, " ", 255 - strlen(seen));
}

START_TEST(repeated_keys)
{
	static const char *const base_pairs[] = {"q.py", "qqq", "x.py", "xx", "y.py", "yy"};
	static const char *const names[] = {"p.py", "z.py"};
	static const char *const contents[] = {"p-last", "z-again"};
	struct told t = {0};
	mc_bundle *base, *b;
	mc_writer *w;
	char conflicts[256] = "";

	base = bundle_of("base.mcache", base_pairs, 3);
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	mc_writer_set_conflict_fn(w, note_conflict, conflicts);
	/* x and y are known; q is known by its last record, which takes the first with it;
	 * p is not, and keeps its conflict for the save. Recorded after the drop, z still
	 * replaces the one recorded before. */
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/q.py", "q-first", 7), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/x.py", "xx", 2), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/p.py", "p-first", 7), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/y.py", "yy", 2), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/z.py", "z-first", 7), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/q.py", "qqq", 3), MC_OK);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/p.py", "p-last", 6), MC_OK);
	ck_assert_int_eq(mc_writer_drop_known(w, &base, 1, on_diff, &t), MC_OK);
	ck_assert_uint_eq(t.n, 2);
	ck_assert_str_eq(t.lines[0], "ADDED kernel_code ab/p.py 0 6");
	ck_assert_str_eq(t.lines[1], "ADDED kernel_code ab/z.py 0 7");
	ck_assert_uint_eq(mc_writer_artifact_count(w), 3);
	ck_assert_uint_eq(mc_writer_total_bytes(w), 7 + 7 + 6);
	ck_assert_int_eq(mc_writer_add_memory(w, "kernel_code", "ab/z.py", "z-again", 7), MC_OK);
	b = save_open(w, "new.mcache");
	ck_assert_str_eq(conflicts, "ab/p.py ab/z.py ");
	expect(b, names, contents, 2);
	mc_bundle_free(b);
	mc_bundle_free(base);
}
END_TEST

START_TEST(torch_blob_layout)
{
	char *blob = src_path("tests/data/torch-2.11/mlp-cuda.megacache");
	mc_bundle *base, *b;
	mc_writer *w;

	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, blob), MC_OK);
	base = save_open(w, "base.mcache");
	ck_assert_int_eq(base->m.has_torch_blob, 1);
	ck_assert_uint_gt(base->m.nobjects, 0);

	/* All known: the bundle claims no layout and stores none of the blob's objects. */
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, blob), MC_OK);
	ck_assert_int_eq(mc_writer_drop_known(w, &base, 1, NULL, NULL), MC_OK);
	ck_assert_uint_eq(mc_writer_artifact_count(w), 0);
	b = save_open(w, "new.mcache");
	ck_assert_uint_eq(mc_bundle_artifact_count(b), 0);
	ck_assert_int_eq(b->m.has_torch_blob, 0);
	ck_assert_uint_eq(b->m.nobjects, 0);
	mc_bundle_free(b);

	/* Nothing known: the layout is kept. */
	ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_add_torch_blob(w, blob), MC_OK);
	ck_assert_int_eq(mc_writer_drop_known(w, NULL, 0, NULL, NULL), MC_OK);
	b = save_open(w, "same.mcache");
	ck_assert_int_eq(b->m.has_torch_blob, 1);
	ck_assert_uint_eq(mc_bundle_artifact_count(b), mc_bundle_artifact_count(base));
	mc_bundle_free(b);
	mc_bundle_free(base);
	free(blob);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("keepnew");
	TCase *tc = tcase_create("api");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, only_what_changed);
	tcase_add_test(tc, every_base_consulted);
	tcase_add_test(tc, shared_content);
	tcase_add_test(tc, repeated_keys);
	tcase_add_test(tc, torch_blob_layout);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
