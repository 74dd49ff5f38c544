/* test_torchblob.c - reading torch's cache blob: the real fixtures, and every kind of
 * broken blob refused with a clear error. */
#include "util.h"

static mc_ctx *ctx;
static char *dir;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("torchblob");
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

START_TEST(real_fixtures)
{
	static const struct {
		const char *file;
		size_t items, groups;
	} cases[] = {{"mlp-cuda.megacache", 10, 3},
		     {"mlp-cuda-precompile.megacache", 11, 4},
		     {"mlp-cpu-pgo.megacache", 8, 3}};
	size_t i;

	for (i = 0; i < 3; i++) {
		char rel[256], *p;
		struct mc_tb tb;

		snprintf(rel, sizeof rel, "tests/data/torch-2.11/%s", cases[i].file);
		p = src_path(rel);
		ck_assert_int_eq(mc__torch_blob_parse(ctx, p, &tb), MC_OK);
		ck_assert_uint_eq(tb.nitems, cases[i].items);
		ck_assert_uint_eq(tb.ngroups, cases[i].groups);
		ck_assert_str_eq(tb.gtypes[0], "inductor");
		mc__torch_blob_free(&tb);
		free(p);
	}
}
END_TEST

/* Builds a blob: groups given as "type" then key/content pairs, NULL-separated. */
struct blob {
	unsigned char b[8192];
	size_t n;
};

static void
b_raw(struct blob *x, const void *d, size_t n)
{
	memcpy(x->b + x->n, d, n);
	x->n += n;
}

static void
b_u64(struct blob *x, uint64_t v)
{
	unsigned char t[8];

	mc__put_be64(t, v);
	b_raw(x, t, 8);
}

static void
b_str(struct blob *x, const char *s)
{
	char *e = mc__b64_encode((const unsigned char *)s, strlen(s));

	b_u64(x, strlen(e));
	b_raw(x, e, strlen(e));
	free(e);
}

static void
b_begin(struct blob *x)
{
	x->n = 4;
	b_u64(x, 1);
}

static void
b_seal(struct blob *x)
{
	uint32_t c = mc__crc32(0, x->b + 4, x->n - 4);

	x->b[0] = (unsigned char)(c >> 24);
	x->b[1] = (unsigned char)(c >> 16);
	x->b[2] = (unsigned char)(c >> 8);
	x->b[3] = (unsigned char)c;
}

static int
parse(struct blob *x, struct mc_tb *tb)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/blob", dir);
	spit(path, x->b, x->n);
	return mc__torch_blob_parse(ctx, path, tb);
}

static const char *PGO = "job:0:";

START_TEST(repeated_groups_kept_in_order)
{
	struct blob x;
	struct mc_tb tb;

	b_begin(&x);
	b_str(&x, "pgo");
	b_u64(&x, 1);
	b_str(&x, PGO);
	b_u64(&x, 3);
	b_raw(&x, "one", 3);
	b_str(&x, "pgo");
	b_u64(&x, 1);
	b_str(&x, PGO);
	b_u64(&x, 3);
	b_raw(&x, "two", 3);
	b_seal(&x);
	ck_assert_int_eq(parse(&x, &tb), MC_OK);
	ck_assert_uint_eq(tb.ngroups, 2);
	ck_assert_uint_eq(tb.nitems, 2);
	ck_assert_uint_eq(tb.items[0].group, 0);
	ck_assert_uint_eq(tb.items[1].group, 1);
	ck_assert_uint_lt(tb.items[0].offset, tb.items[1].offset);
	mc__torch_blob_free(&tb);
}
END_TEST

static void
expect_bad(struct blob *x, int code, const char *text)
{
	struct mc_tb tb;

	ck_assert_int_eq(parse(x, &tb), code);
	ck_assert_msg(strstr(mc_ctx_error(ctx), text) != NULL, "error '%s' lacks '%s'",
		      mc_ctx_error(ctx), text);
}

START_TEST(hostile_blobs)
{
	struct blob x;
	char b64bad[] = "!!!!";

	/* Bad crc. */
	b_begin(&x);
	b_str(&x, "pgo");
	b_u64(&x, 1);
	b_str(&x, PGO);
	b_u64(&x, 1);
	b_raw(&x, "x", 1);
	b_seal(&x);
	x.b[0] ^= 1;
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "crc32 mismatch");
	/* Content length past the end. */
	b_begin(&x);
	b_str(&x, "pgo");
	b_u64(&x, 1);
	b_str(&x, PGO);
	b_u64(&x, 1000);
	b_raw(&x, "x", 1);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "content length past the end");
	/* A count that cannot fit. */
	b_begin(&x);
	b_str(&x, "pgo");
	b_u64(&x, 1ull << 40);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "group count past the end");
	/* Truncated length field. */
	b_begin(&x);
	b_str(&x, "pgo");
	b_raw(&x, "\0\0\0", 3);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "group count");
	/* String length out of range. */
	b_begin(&x);
	b_u64(&x, 1ull << 50);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "string length out of range");
	/* Invalid base64. */
	b_begin(&x);
	b_u64(&x, 4);
	b_raw(&x, b64bad, 4);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "invalid base64");
	/* Unknown type. */
	b_begin(&x);
	b_str(&x, "nosuchtype");
	b_u64(&x, 0);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "unknown artifact type 'nosuchtype'");
	/* Zero artifacts. */
	b_begin(&x);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "holds no artifacts");
	/* Wrong version; too short. */
	b_begin(&x);
	mc__put_be64(x.b + 4, 2);
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "unsupported encoding version");
	x.n = 3;
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "crc32 header");
	/* A key the handler refuses fails at import. */
	b_begin(&x);
	b_str(&x, "inductor");
	b_u64(&x, 1);
	b_str(&x, "f../../etc");
	b_u64(&x, 1);
	b_raw(&x, "x", 1);
	b_seal(&x);
	{
		mc_writer *w;
		char path[4096];
		snprintf(path, sizeof path, "%s/blob", dir);
		spit(path, x.b, x.n);
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		ck_assert_int_eq(mc_writer_add_torch_blob(w, path), MC_ERR_BAD_KEY);
		ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "artifact 1"));
		mc_writer_free(w);
	}
}
END_TEST

static void
b_rawstr(struct blob *x, const char *s)
{
	b_u64(x, strlen(s));
	b_raw(x, s, strlen(s));
}

#define GRAPH "fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i"
#define AOT "axwzp7kmjrbxcn3i4pjghhupnsqxu6k5i77rn52iovypcbamlzdg"

/* torch 2.7's layout in its four copies: with or without crc, base64 or raw strings. */
START_TEST(torch_27_variants)
{
	int crc, b64;

	for (crc = 0; crc < 2; crc++)
		for (b64 = 0; b64 < 2; b64++) {
			struct blob x;
			struct mc_tb tb;

			x.n = crc ? 4 : 0;
			b_u64(&x, 1);
			b_u64(&x, 0); /* inductor */
			b64 ? b_str(&x, GRAPH) : b_rawstr(&x, GRAPH);
			b_u64(&x, 5);
			b_raw(&x, "graph", 5);
			b_u64(&x, 2); /* aot_autograd */
			b64 ? b_str(&x, AOT) : b_rawstr(&x, AOT);
			b_u64(&x, 3);
			b_raw(&x, "aot", 3);
			b_u64(&x, 3); /* pgo */
			b64 ? b_str(&x, "job:0:") : b_rawstr(&x, "job:0:");
			b_u64(&x, 1);
			b_raw(&x, "p", 1);
			if (crc)
				b_seal(&x);
			ck_assert_msg(parse(&x, &tb) == MC_OK, "crc %d b64 %d: %s", crc, b64, mc_ctx_error(ctx));
			ck_assert_int_eq(tb.format, MC_TORCH_FORMAT_2_7);
			ck_assert_uint_eq(tb.nitems, 3);
			ck_assert_str_eq(tb.items[0].type, "inductor");
			ck_assert_str_eq(tb.items[0].key, GRAPH);
			ck_assert_str_eq(tb.items[1].type, "aot_autograd");
			ck_assert_str_eq(tb.items[2].key, "job:0:");
			ck_assert_uint_eq(tb.items[2].size, 1);
			mc__torch_blob_free(&tb);
		}
}
END_TEST

START_TEST(torch_27_bad_type_id)
{
	struct blob x;

	x.n = 0;
	b_u64(&x, 1);
	b_u64(&x, 2);
	b_rawstr(&x, AOT);
	b_u64(&x, 1);
	b_raw(&x, "a", 1);
	b_u64(&x, 7); /* no such type id */
	b_rawstr(&x, "j:0:");
	b_u64(&x, 1);
	b_raw(&x, "p", 1);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "unknown type id");
}
END_TEST

START_TEST(vllm_envelope)
{
	struct blob inner, x;
	struct mc_tb tb;
	mc_writer *w;
	int i;

	b_begin(&inner);
	b_str(&inner, "inductor");
	b_u64(&inner, 1);
	b_str(&inner, GRAPH);
	b_u64(&inner, 4);
	b_raw(&inner, "abcd", 4);
	b_seal(&inner);
	x.n = 4;
	b_u64(&x, 32);
	b_raw(&x, "0123456789abcdef0123456789abcdef", 32);
	b_str(&x, AOT);
	b_u64(&x, inner.n);
	b_raw(&x, inner.b, inner.n);
	b_seal(&x);
	ck_assert_msg(parse(&x, &tb) == MC_OK, "%s", mc_ctx_error(ctx));
	ck_assert_int_eq(tb.format, MC_TORCH_FORMAT_VLLM);
	ck_assert_uint_eq(tb.nitems, 1);
	ck_assert_str_eq(tb.items[0].key, GRAPH);
	ck_assert_uint_eq(tb.items[0].size, 4);
	ck_assert_str_eq(tb.env_aot_key, AOT);
	ck_assert_str_eq(tb.env_torch_key, "3031323334353637383961626364656630313233343536373839616263646566");
	mc__torch_blob_free(&tb);
	/* Recorded, its torch key is label vllm.torch_key as a scan of vLLM's root notes it:
	 * one the caller set is kept. */
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(mc_writer_new(ctx, &w), MC_OK);
		if (i == 1)
			ck_assert_int_eq(mc_writer_set_label(w, "vllm.torch_key", "mine"), MC_OK);
		ck_assert_int_eq(mc_writer_add_torch_blob_memory(w, x.b, x.n), MC_OK);
		ck_assert_uint_eq(w->nlabels, 2);
		ck_assert_str_eq(w->labels[0].key, "vllm.torch_key");
		ck_assert_str_eq(w->labels[0].value, i == 1 ? "mine" :
				 "3031323334353637383961626364656630313233343536373839616263646566");
		mc_writer_free(w);
	}
	/* The inner blob's own crc is checked. */
	x.b[x.n - 10] ^= 1;
	b_seal(&x);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "inner blob");
	/* Something else entirely. */
	x.n = 0;
	b_raw(&x, "PK\003\004 zip file here", 18);
	expect_bad(&x, MC_ERR_TORCH_FORMAT, "not a torch cache blob");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("torchblob");
	TCase *tc = tcase_create("parse");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, real_fixtures);
	tcase_add_test(tc, repeated_groups_kept_in_order);
	tcase_add_test(tc, hostile_blobs);
	tcase_add_test(tc, torch_27_variants);
	tcase_add_test(tc, torch_27_bad_type_id);
	tcase_add_test(tc, vllm_envelope);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
