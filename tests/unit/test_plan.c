/* test_plan.c - the plan of an install (mc__bundle_plan): each artifact's destination
 * under its tier root; two artifacts on one path, a file where another needs a folder,
 * a file inside a folder installed as a unit, across tiers whose roots nest; the same
 * content twice installed once; a type with no handler. Codes and texts asserted. */
#include "util.h"

#include <limits.h>
#include <stdarg.h>

static mc_ctx *ctx;
static char *dir;
static char ind[4096], tri[4096]; /* tier roots as set */
static char canon[PATH_MAX];      /* dir with its links resolved, as messages give it */
static unsigned nbundles;

#define VU "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"
#define H64 "4284062ea9a84465a56e21b40068c15a3f8fb827c0ab27e61d71153e3e3fadcc"

struct art {
	const char *type, *key, *content;
};

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("plan");
	ck_assert_ptr_nonnull(realpath(dir, canon));
	snprintf(ind, sizeof ind, "%s/ind", dir);
	snprintf(tri, sizeof tri, "%s/tri", dir);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "inductor", ind), MC_OK);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "triton", tri), MC_OK);
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

/* Writes the artifacts with wctx into a new bundle in dir and opens it with octx. */
static mc_bundle *
bundle_of(mc_ctx *wctx, mc_ctx *octx, const struct art *arts, size_t n)
{
	char path[4096];
	mc_writer *w;
	mc_bundle *b;
	size_t i;

	snprintf(path, sizeof path, "%s/b%u.mcache", dir, nbundles++);
	ck_assert_int_eq(mc_writer_new(wctx, &w), MC_OK);
	ck_assert_int_eq(mc_writer_set_created(w, 1700000000), MC_OK);
	for (i = 0; i < n; i++)
		ck_assert_msg(mc_writer_add_memory(w, arts[i].type, arts[i].key, arts[i].content,
						   strlen(arts[i].content)) == MC_OK,
			      "%s", mc_ctx_error(wctx));
	ck_assert_int_eq(mc_writer_save(w, path), MC_OK);
	mc_writer_free(w);
	ck_assert_int_eq(mc_bundle_open(octx, path, &b), MC_OK);
	return b;
}

/* Artifact i (in the bundle's order) is of type and key, selected or not, and lands
 * at dest relative to its tier root. */
static void
expect_dest(mc_bundle *b, size_t i, const char *type, const char *key, int sel, const char *dest)
{
	struct mc_acur cur;
	const struct mc_martifact *a;
	char buf[MC_PATH_MAX];

	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	ck_assert_int_eq(mc__acur_get(&cur, i, &a), MC_OK);
	ck_assert_str_eq(a->type, type);
	ck_assert_str_eq(a->key, key);
	ck_assert_int_eq(b->sel[i], sel);
	ck_assert_int_eq(mc__artifact_dest(b, a, buf, sizeof buf), MC_OK);
	ck_assert_str_eq(buf, dest);
	mc__acur_free(&cur);
}

/* The plan of b is refused with code and the text fmt, given the bundle's path and
 * then the other arguments. */
static void
expect_refused(mc_bundle *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void
expect_refused(mc_bundle *b, int code, const char *fmt, ...)
{
	char want[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof want, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(mc__bundle_plan(b), code);
	ck_assert_str_eq(mc_ctx_error(b->ctx), want);
	/* Not taken for a plan: asked again, it is refused again. */
	ck_assert_int_eq(mc__bundle_plan(b), code);
	ck_assert_str_eq(mc_ctx_error(b->ctx), want);
}

START_TEST(plan_ok)
{
	static const struct art arts[] = {
		{"autotune", VU, "a"},
		{"gemm_timing", H64, "g"},
		{"pgo", "job:0:", "p"},
		{"precompile", H64, "c"},
		{"triton", "0/abc/k.py", "t"},
		{"triton", "0/abc/k.json", "j"},
	};
	mc_bundle *b = bundle_of(ctx, ctx, arts, 6);

	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	ck_assert_int_eq(b->planned, 1);
	expect_dest(b, 0, "autotune", VU, 1, VU);
	expect_dest(b, 1, "gemm_timing", H64, 1, "cache/" H64);
	expect_dest(b, 2, "pgo", "job:0:", 1, "dynamo/code_state_job_0_.pkl");
	expect_dest(b, 3, "precompile", H64, 1, "dynamo/" H64 "/entry");
	/* A triton root set by the caller has no device level. */
	expect_dest(b, 4, "triton", "0/abc/k.json", 1, "abc/k.json");
	expect_dest(b, 5, "triton", "0/abc/k.py", 1, "abc/k.py");
	/* Installing follows the plan: each file where mc__artifact_dest says. */
	ck_assert_int_eq(mc_bundle_set_insecure(b, 1), MC_OK);
	ck_assert_int_eq(mc_bundle_load(b, 0, NULL, NULL), MC_OK);
	ck_assert_int_eq(count_tree(ind), 8); /* 4 files, vu cache dynamo dynamo/<hex> */
	ck_assert_int_eq(count_tree(tri), 3); /* abc and its 2 files */
	mc_bundle_free(b);
}
END_TEST

/* One file by two types: refused, unless it is the same content (installed once). */
START_TEST(same_file_two_types)
{
	static const struct art differ[] = {
		{"gemm_timing", H64, "one"},
		{"extra", "cache/" H64, "two"},
	};
	static const struct art same[] = {
		{"gemm_timing", H64, "one"},
		{"extra", "cache/" H64, "one"},
	};
	mc_bundle *b = bundle_of(ctx, ctx, differ, 2);

	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts extra cache/%s and gemm_timing %s both "
		       "need %s/ind/cache/%s", b->path, H64, H64, canon, H64);
	mc_bundle_free(b);
	b = bundle_of(ctx, ctx, same, 2);
	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	expect_dest(b, 0, "extra", "cache/" H64, 1, "cache/" H64);
	expect_dest(b, 1, "gemm_timing", H64, 0, "cache/" H64);
	mc_bundle_free(b);
}
END_TEST

/* A file where another artifact needs a folder. */
START_TEST(file_on_folder)
{
	static const struct art arts[] = {
		{"pgo", "job:0:", "p"},
		{"extra", "dynamo", "x"},
	};
	mc_bundle *b = bundle_of(ctx, ctx, arts, 2);

	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts extra dynamo and pgo job:0: both need "
		       "%s/ind/dynamo", b->path, canon);
	mc_bundle_free(b);
}
END_TEST

/* Triton's root inside inductor's: paths are compared in the outer root's namespace. */
START_TEST(nested_roots)
{
	static const struct art in_unit[] = {
		{"triton", "0/abc/k.py", "t"},
		{"extra", "triton/abc/other.py", "x"},
	};
	static const struct art on_folder[] = {
		{"triton", "0/abc/k.py", "t"},
		{"extra", "triton", "x"},
	};
	char nested[4096];
	mc_bundle *b = bundle_of(ctx, ctx, in_unit, 2);

	/* Apart, the two never meet. */
	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	expect_dest(b, 0, "extra", "triton/abc/other.py", 1, "triton/abc/other.py");
	expect_dest(b, 1, "triton", "0/abc/k.py", 1, "abc/k.py");
	/* Nested (written with a dot and a doubled slash), a new root makes a new plan. */
	snprintf(nested, sizeof nested, "%s/./ind//triton", dir);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "triton", nested), MC_OK);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifact extra triton/abc/other.py lies in "
		       "%s/ind/triton/abc, a folder that triton 0/abc/k.py installs as a whole",
		       b->path, canon);
	mc_bundle_free(b);
	b = bundle_of(ctx, ctx, on_folder, 2);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts extra triton and triton 0/abc/k.py both "
		       "need %s/ind/triton", b->path, canon);
	mc_bundle_free(b);
}
END_TEST

/* The default triton root, <inductor root>/triton, keeps the device level. */
START_TEST(default_triton_root)
{
	static const struct art arts[] = {
		{"triton", "0/abc/k.py", "t"},
		{"triton", "1/abc/k.py", "t"},
		{"extra", "triton/0/abc/x", "x"},
	};
	mc_ctx *c;
	mc_bundle *b;

	unsetenv("TRITON_CACHE_DIR");
	ck_assert_int_eq(mc_ctx_new(&c), MC_OK);
	ck_assert_int_eq(mc_ctx_set_tier_root(c, "inductor", ind), MC_OK);
	b = bundle_of(c, c, arts, 2);
	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	expect_dest(b, 0, "triton", "0/abc/k.py", 1, "0/abc/k.py");
	expect_dest(b, 1, "triton", "1/abc/k.py", 1, "1/abc/k.py");
	mc_bundle_free(b);
	b = bundle_of(c, c, arts, 3);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifact extra triton/0/abc/x lies in "
		       "%s/ind/triton/0/abc, a folder that triton 0/abc/k.py installs as a whole",
		       b->path, canon);
	mc_bundle_free(b);
	mc_ctx_free(c);
}
END_TEST

/* A root without device level: one kernel of two devices is installed once; two
 * different ones on one path are refused. */
START_TEST(devices_share_a_path)
{
	static const struct art same[] = {
		{"triton", "0/abc/k.py", "t"},
		{"triton", "1/abc/k.py", "t"},
	};
	static const struct art differ[] = {
		{"triton", "0/abc/k.py", "t"},
		{"triton", "1/abc/k.py", "u"},
	};
	mc_bundle *b = bundle_of(ctx, ctx, same, 2);

	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	expect_dest(b, 0, "triton", "0/abc/k.py", 1, "abc/k.py");
	expect_dest(b, 1, "triton", "1/abc/k.py", 0, "abc/k.py");
	mc_bundle_free(b);
	b = bundle_of(ctx, ctx, differ, 2);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts triton 0/abc/k.py and triton 1/abc/k.py "
		       "both need %s/tri/abc/k.py", b->path, canon);
	mc_bundle_free(b);
}
END_TEST

static int
any_key(void *ud, const char *key, char *why, size_t whylen)
{
	(void)ud, (void)key, (void)why, (void)whylen;
	return MC_OK;
}

static int
key_as_path(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	(void)ud, (void)sha256;
	return (size_t)snprintf(buf, len, "%s", key) < len ? MC_OK : MC_ERR_INVALID;
}

/* An application's types: a tier with no root is checked on its own; a reader that
 * lacks a type refuses the bundle. */
START_TEST(application_types)
{
	static const struct art arts[] = {
		{"appa", "d/k1", "1"},
		{"appb", "d/k1", "2"},
	};
	char approot[4096];
	mc_ctx *other;
	mc_bundle *b;

	ck_assert_int_eq(mc_ctx_register_type(ctx, "appa", "app", 0, any_key, key_as_path, NULL),
			 MC_OK);
	ck_assert_int_eq(mc_ctx_register_type(ctx, "appb", "app", 0, any_key, key_as_path, NULL),
			 MC_OK);
	b = bundle_of(ctx, ctx, arts, 1);
	ck_assert_int_eq(mc__bundle_plan(b), MC_OK);
	expect_dest(b, 0, "appa", "d/k1", 1, "d/k1");
	mc_bundle_free(b);
	b = bundle_of(ctx, ctx, arts, 2);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts appa d/k1 and appb d/k1 both need d/k1",
		       b->path);
	snprintf(approot, sizeof approot, "%s/app", dir);
	ck_assert_int_eq(mc_ctx_set_tier_root(ctx, "app", approot), MC_OK);
	expect_refused(b, MC_ERR_CONFLICT, "%s: artifacts appa d/k1 and appb d/k1 both need "
		       "%s/app/d/k1", b->path, canon);
	mc_bundle_free(b);

	ck_assert_int_eq(mc_ctx_new(&other), MC_OK);
	b = bundle_of(ctx, other, arts, 1);
	expect_refused(b, MC_ERR_UNKNOWN_TYPE, "%s: artifact type 'appa' has no handler (key d/k1)",
		       b->path);
	mc_bundle_free(b);
	mc_ctx_free(other);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("plan");
	TCase *t = tcase_create("plan");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, plan_ok);
	tcase_add_test(t, same_file_two_types);
	tcase_add_test(t, file_on_folder);
	tcase_add_test(t, nested_roots);
	tcase_add_test(t, default_triton_root);
	tcase_add_test(t, devices_share_a_path);
	tcase_add_test(t, application_types);
	suite_add_tcase(s, t);
	return s;
}

RUN_SUITE(suite())
