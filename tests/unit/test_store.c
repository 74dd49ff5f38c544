/* test_store.c - the spill stores: bytes kept in memory up to MC_STORE_MEM and then in
 * a nameless temp file, read back (and overwritten) across that boundary, read forwards
 * through a buffer, the last append taken back, and reads past the end refused. */
#include "util.h"

static mc_ctx *ctx;
static char *tmpdir;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	tmpdir = scratch("store");
	ck_assert_int_eq(setenv("TMPDIR", tmpdir, 1), 0);
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	rmdir(tmpdir);
	free(tmpdir);
}

/* The byte expected at offset p of a store filled by fill(). */
static unsigned char
pat(uint64_t p)
{
	return (unsigned char)((p * 2654435761u) >> 11);
}

/* Appends the pattern in pieces of n bytes until the store holds total bytes. */
static void
fill(struct mc_store *s, uint64_t total, size_t n)
{
	unsigned char *buf = malloc(n);

	while (mc__store_size(s) < total) {
		uint64_t at = mc__store_size(s), off = UINT64_MAX;
		size_t k = total - at < n ? (size_t)(total - at) : n, i;
		for (i = 0; i < k; i++)
			buf[i] = pat(at + i);
		ck_assert_int_eq(mc__store_append(ctx, s, buf, k, &off), MC_OK);
		ck_assert_uint_eq(off, at);
	}
	free(buf);
}

/* Checks that n bytes at off read back as the pattern, in one call. */
static void
check_io(const struct mc_store *s, uint64_t off, size_t n)
{
	unsigned char *buf = malloc(n + 1);
	size_t i;

	ck_assert_int_eq(mc__store_io(ctx, s, off, buf, n, 0), MC_OK);
	for (i = 0; i < n; i++)
		ck_assert_msg(buf[i] == pat(off + i), "byte %llu is %u, not %u",
			      (unsigned long long)(off + i), buf[i], pat(off + i));
	free(buf);
}

START_TEST(small_stays_in_memory)
{
	struct mc_store s;
	unsigned char buf[16];
	uint64_t off = 99;

	mc__store_init(&s, "unit table");
	ck_assert_int_eq(mc__store_append(ctx, &s, "abc", 3, &off), MC_OK);
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(mc__store_append(ctx, &s, "defgh", 5, &off), MC_OK);
	ck_assert_uint_eq(off, 3);
	ck_assert_int_eq(mc__store_append(ctx, &s, "", 0, &off), MC_OK);
	ck_assert_uint_eq(off, 8);
	ck_assert_uint_eq(mc__store_size(&s), 8);
	ck_assert_int_eq(s.fd, -1);
	ck_assert_uint_eq(s.flushed, 0);
	ck_assert_int_eq(mc__store_io(ctx, &s, 2, buf, 5, 0), MC_OK);
	ck_assert_int_eq(memcmp(buf, "cdefg", 5), 0);
	/* Written over in place, then read whole. */
	ck_assert_int_eq(mc__store_io(ctx, &s, 1, "XY", 2, 1), MC_OK);
	ck_assert_int_eq(mc__store_io(ctx, &s, 0, buf, 8, 0), MC_OK);
	ck_assert_int_eq(memcmp(buf, "aXYdefgh", 8), 0);
	/* Past the end: refused, naming the store. */
	ck_assert_int_eq(mc__store_io(ctx, &s, 6, buf, 3, 0), MC_ERR_IO);
	ck_assert_str_eq(mc_ctx_error(ctx),
			 "cannot read the unit table's temporary file: unexpected end of file");
	ck_assert_int_eq(mc__store_io(ctx, &s, 8, buf, 0, 0), MC_OK);
	mc__store_free(&s);
	ck_assert_uint_eq(mc__store_size(&s), 0);
	ck_assert_int_eq(s.fd, -1);
	ck_assert_str_eq(s.what, "unit table");
}
END_TEST

START_TEST(spills_past_the_limit)
{
	struct mc_store s;
	uint64_t mem = (MC_STORE_MEM / 1000) * 1000;

	mc__store_init(&s, "unit table");
	/* Up to MC_STORE_MEM: all in memory, no file. */
	fill(&s, mem, 1000);
	ck_assert_int_eq(s.fd, -1);
	ck_assert_uint_eq(s.len, mem);
	/* One more piece: what was in memory goes to the file, the piece stays. */
	fill(&s, mem + 1000, 1000);
	ck_assert_int_ge(s.fd, 0);
	ck_assert_uint_eq(s.flushed, mem);
	ck_assert_uint_eq(s.len, 1000);
	ck_assert_uint_eq(mc__store_size(&s), mem + 1000);
	/* The file has no name: nothing in TMPDIR. */
	ck_assert_int_eq(count_tree(tmpdir), 0);
	check_io(&s, 0, (size_t)mem + 1000);
	check_io(&s, mem - 10, 20); /* across the boundary */
	check_io(&s, mem, 1000);    /* memory alone */
	check_io(&s, 5, 10);        /* file alone */
	/* A piece larger than the buffer goes straight to the file after it. */
	fill(&s, mem + 1000 + MC_STORE_MEM + 12345, MC_STORE_MEM + 12345);
	ck_assert_uint_eq(s.flushed, mem + 1000 + MC_STORE_MEM + 12345);
	ck_assert_uint_eq(s.len, 0);
	check_io(&s, mem - 3, 1000 + MC_STORE_MEM + 12345 + 3);
	/* Past the end, from the file: refused. */
	{
		unsigned char b[8];
		ck_assert_int_eq(mc__store_io(ctx, &s, mc__store_size(&s) - 4, b, 8, 0), MC_ERR_IO);
		ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "unexpected end of file"));
	}
	mc__store_free(&s);
	ck_assert_int_eq(s.fd, -1);
}
END_TEST

START_TEST(overwrite_across_the_boundary)
{
	struct mc_store s;
	unsigned char b[64], w[40];
	uint64_t at;
	size_t i;

	mc__store_init(&s, "unit table");
	fill(&s, MC_STORE_MEM + 500, 700);
	ck_assert_int_ge(s.fd, 0);
	ck_assert_uint_gt(s.len, 20);
	at = s.flushed - 20; /* 20 bytes in the file, 20 in memory */
	for (i = 0; i < sizeof w; i++)
		w[i] = (unsigned char)('A' + i % 26);
	ck_assert_int_eq(mc__store_io(ctx, &s, at, w, sizeof w, 1), MC_OK);
	ck_assert_int_eq(mc__store_io(ctx, &s, at - 12, b, sizeof b, 0), MC_OK);
	for (i = 0; i < 12; i++)
		ck_assert_uint_eq(b[i], pat(at - 12 + i));
	ck_assert_int_eq(memcmp(b + 12, w, sizeof w), 0);
	for (i = 12 + sizeof w; i < sizeof b; i++)
		ck_assert_uint_eq(b[i], pat(at - 12 + i));
	mc__store_free(&s);
}
END_TEST

START_TEST(sreader_walks_file_and_memory)
{
	static const size_t steps[] = { 1, 17, 4093, 5000, 3, 65536, 999 };
	struct mc_store s;
	struct mc_sreader r;
	unsigned char *buf = malloc(65536);
	uint64_t total = MC_STORE_MEM + 70000, off = 7;
	size_t k = 0, i;

	mc__store_init(&s, "unit table");
	fill(&s, total, 3000);
	ck_assert_int_ge(s.fd, 0);
	ck_assert_uint_gt(s.len, 0);
	/* An odd buffer size and odd pieces, so reads cross the boundary mid-buffer. */
	ck_assert_int_eq(mc__sreader_init(ctx, &r, &s, off, total, 4093), MC_OK);
	while (off < total) {
		size_t n = steps[k++ % (sizeof steps / sizeof *steps)];
		if (n > total - off)
			n = (size_t)(total - off);
		ck_assert_int_eq(mc__sreader_get(ctx, &r, buf, n), MC_OK);
		for (i = 0; i < n; i++)
			ck_assert_msg(buf[i] == pat(off + i), "byte %llu", (unsigned long long)(off + i));
		off += n;
	}
	/* At the end: one more byte is refused. */
	ck_assert_int_eq(mc__sreader_get(ctx, &r, buf, 1), MC_ERR_IO);
	ck_assert_str_eq(mc_ctx_error(ctx),
			 "cannot read the unit table's temporary file: unexpected end of file");
	free(r.buf);
	/* A window from inside the file to inside memory, and a read that runs past it. */
	ck_assert_int_eq(mc__sreader_init(ctx, &r, &s, s.flushed - 100, s.flushed + 100, 64),
			 MC_OK);
	ck_assert_int_eq(mc__sreader_get(ctx, &r, buf, 150), MC_OK);
	for (i = 0; i < 150; i++)
		ck_assert_uint_eq(buf[i], pat(s.flushed - 100 + i));
	ck_assert_int_eq(mc__sreader_get(ctx, &r, buf, 51), MC_ERR_IO);
	free(r.buf);
	free(buf);
	mc__store_free(&s);
}
END_TEST

START_TEST(unappend_takes_back_the_last)
{
	struct mc_store s;
	unsigned char b[8], rec[64];
	uint64_t size;

	mc__store_init(&s, "unit table");
	ck_assert_int_eq(mc__store_append(ctx, &s, "0123456789", 10, NULL), MC_OK);
	ck_assert_int_eq(mc__store_unappend(&s, 4), MC_OK);
	ck_assert_uint_eq(mc__store_size(&s), 6);
	ck_assert_int_eq(mc__store_append(ctx, &s, "zz", 2, NULL), MC_OK);
	ck_assert_int_eq(mc__store_io(ctx, &s, 0, b, 8, 0), MC_OK);
	ck_assert_int_eq(memcmp(b, "012345zz", 8), 0);
	ck_assert_int_eq(mc__store_unappend(&s, 9), MC_ERR_INVALID);
	ck_assert_uint_eq(mc__store_size(&s), 8);
	mc__store_free(&s);

	/* Spilled: a record smaller than the buffer still stays in memory until the next. */
	mc__store_init(&s, "unit table");
	fill(&s, MC_STORE_MEM + 10, 4096);
	ck_assert_int_ge(s.fd, 0);
	size = mc__store_size(&s);
	memset(rec, 'r', sizeof rec);
	ck_assert_int_eq(mc__store_append(ctx, &s, rec, sizeof rec, NULL), MC_OK);
	ck_assert_uint_eq(mc__store_size(&s), size + sizeof rec);
	ck_assert_int_eq(mc__store_unappend(&s, sizeof rec), MC_OK);
	ck_assert_uint_eq(mc__store_size(&s), size);
	fill(&s, size + 10, 10);
	check_io(&s, size - 100, 110);
	/* After a piece written straight to the file, nothing is left to take back. */
	fill(&s, size + 10 + MC_STORE_MEM + 1, MC_STORE_MEM + 1);
	ck_assert_uint_eq(s.len, 0);
	ck_assert_int_eq(mc__store_unappend(&s, 1), MC_ERR_INVALID);
	ck_assert_uint_eq(mc__store_size(&s), size + 10 + MC_STORE_MEM + 1);
	mc__store_free(&s);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("io");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, small_stays_in_memory);
	tcase_add_test(tc, spills_past_the_limit);
	tcase_add_test(tc, overwrite_across_the_boundary);
	tcase_add_test(tc, sreader_walks_file_and_memory);
	tcase_add_test(tc, unappend_takes_back_the_last);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
