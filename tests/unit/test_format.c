/* test_format.c - the format's building blocks: member headers in their one tar form,
 * and objects as exactly one zstd frame made with fixed parameters. */
#include "util.h"

static mc_ctx *ctx;

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

/* ---- tar headers ---- */

/* Sets the checksum field of h to the sum of its bytes, as a renderer would. */
static void
tar_fix_sum(unsigned char h[512])
{
	unsigned sum = 0;
	size_t i;

	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

START_TEST(tar_round_trip)
{
	static const struct {
		const char *name;
		uint64_t size;
	} cases[] = {
		{"manifest.json", 1234},
		{"signatures/0123456789abcdef.minisig", 0},
		{"objects/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 1},
		{"x", 077777777777ull}, /* the largest size 11 octal digits hold */
		{"a23456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
		 512}, /* 99 bytes: the longest name */
	};
	unsigned char h[512];
	char name[101];
	uint64_t size;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_eq(mc__tar_header_render(cases[i].name, cases[i].size, h), MC_OK);
		size = 7;
		ck_assert_int_eq(mc__tar_header_parse(ctx, h, name, &size), MC_OK);
		ck_assert_str_eq(name, cases[i].name);
		ck_assert_uint_eq(size, cases[i].size);
	}
}
END_TEST

START_TEST(tar_fields)
{
	unsigned char h[512], again[512];
	unsigned sum = 0;
	size_t i;

	ck_assert_int_eq(mc__tar_header_render("manifest.json", 1234, h), MC_OK);
	ck_assert_int_eq(memcmp(h, "manifest.json", 14), 0);
	for (i = 14; i < 100; i++)
		ck_assert_uint_eq(h[i], 0);
	ck_assert_int_eq(memcmp(h + 100, "000644 \0" "000000 \0" "000000 ", 24), 0);
	ck_assert_int_eq(memcmp(h + 124, "00000002322 ", 12), 0); /* 1234 in octal */
	ck_assert_int_eq(memcmp(h + 136, "00000000000 ", 12), 0);
	ck_assert_uint_eq(h[156], '0');
	ck_assert_int_eq(memcmp(h + 257, "ustar\0" "00", 8), 0);
	/* The checksum: six octal digits, NUL, space; the sum counts its field as spaces. */
	for (i = 0; i < 512; i++)
		sum += i >= 148 && i < 156 ? ' ' : h[i];
	memcpy(again, h, 512);
	tar_fix_sum(again);
	ck_assert_int_eq(memcmp(again + 148, h + 148, 6), 0);
	ck_assert_uint_eq(strtoul((const char *)h + 148, NULL, 8), sum);
	ck_assert_uint_eq(h[154], 0);
	ck_assert_uint_eq(h[155], ' ');
	/* The same name and size give the same bytes. */
	ck_assert_int_eq(mc__tar_header_render("manifest.json", 1234, again), MC_OK);
	ck_assert_int_eq(memcmp(again, h, 512), 0);
}
END_TEST

START_TEST(tar_render_refuses)
{
	unsigned char h[512];
	char longname[101];

	memset(longname, 'a', 100);
	longname[100] = '\0';
	ck_assert_int_eq(mc__tar_header_render("", 1, h), MC_ERR_INVALID);
	ck_assert_int_eq(mc__tar_header_render(longname, 1, h), MC_ERR_INVALID);
	ck_assert_int_eq(mc__tar_header_render("x", 077777777777ull + 1, h), MC_ERR_INVALID);
}
END_TEST

START_TEST(tar_zero_block)
{
	unsigned char h[512];
	char name[101];
	uint64_t size = 9;

	memset(h, 0, sizeof h);
	ck_assert_int_eq(mc__tar_header_parse(ctx, h, name, &size), 1);
	ck_assert_uint_eq(size, 9);
}
END_TEST

/* Any one byte changed, anywhere in the header, is refused. */
START_TEST(tar_any_byte_changed)
{
	unsigned char h[512], bad[512];
	char name[101];
	uint64_t size;
	size_t i;

	ck_assert_int_eq(mc__tar_header_render("objects/ab", 4096, h), MC_OK);
	for (i = 0; i < 512; i++) {
		memcpy(bad, h, 512);
		bad[i] ^= 0x01;
		ck_assert_msg(mc__tar_header_parse(ctx, bad, name, &size) == MC_ERR_MALFORMED,
			      "byte %zu changed was taken", i);
		memcpy(bad, h, 512);
		bad[i] = bad[i] == 0 ? '0' : 0;
		ck_assert_msg(mc__tar_header_parse(ctx, bad, name, &size) == MC_ERR_MALFORMED,
			      "byte %zu set was taken", i);
	}
}
END_TEST

/* Headers another tar would take, with a correct checksum, are still refused: only
 * the one rendering of a name and size is a member header. */
START_TEST(tar_noncanonical)
{
	unsigned char h[512], bad[512];
	char name[101];
	uint64_t size;

	ck_assert_int_eq(mc__tar_header_render("manifest.json", 1234, h), MC_OK);

	memcpy(bad, h, 512); /* another mode */
	memcpy(bad + 100, "000755 ", 7);
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "member header of 'manifest.json' is not in canonical "
			 "form (only plain files with fixed metadata are allowed)");

	memcpy(bad, h, 512); /* the size ended by NUL, not space */
	bad[135] = '\0';
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "member header of 'manifest.json' is not in canonical "
			 "form (only plain files with fixed metadata are allowed)");

	memcpy(bad, h, 512); /* the size padded with spaces, not zeros */
	memcpy(bad + 124, "       2322 ", 12);
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "member header of 'manifest.json': bad size field");

	memcpy(bad, h, 512); /* the size in base 256, as GNU tar writes large ones */
	memset(bad + 124, 0, 12);
	bad[124] = 0x80;
	bad[135] = 0xd2;
	bad[134] = 0x04;
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "member header of 'manifest.json': bad size field");

	memcpy(bad, h, 512); /* a directory */
	bad[156] = '5';
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);

	memcpy(bad, h, 512); /* bytes after the name's NUL */
	bad[60] = 'x';
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);

	memcpy(bad, h, 512); /* a name filling its field, with no NUL */
	memset(bad, 'n', 100);
	tar_fix_sum(bad);
	ck_assert_int_eq(mc__tar_header_parse(ctx, bad, name, &size), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "member header: name not terminated");
}
END_TEST

/* ---- zstd frames ---- */

struct sink {
	unsigned char *p;
	size_t len, cap;
	size_t calls;
};

static int
sink_add(void *ud, const unsigned char *buf, size_t n)
{
	struct sink *s = ud;

	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->p = realloc(s->p, s->cap);
		ck_assert_ptr_nonnull(s->p);
	}
	memcpy(s->p + s->len, buf, n);
	s->len += n;
	s->calls++;
	return MC_OK;
}

static int
sink_fail(void *ud, const unsigned char *buf, size_t n)
{
	(void)ud;
	(void)buf;
	(void)n;
	return MC_ERR_IO;
}

/* A test object of n bytes: text-like runs, so that it compresses, with some noise. */
static unsigned char *
object(size_t n)
{
	unsigned char *p = malloc(n + 1);
	uint32_t x = 12345;
	size_t i;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (x >> 24) < 2 ? (unsigned char)(x >> 16) : (unsigned char)"megacache "[i % 10];
	}
	return p;
}

/* The frame of src, fed to z in pieces of piece bytes. */
static void
encode(mc_zenc *z, const unsigned char *src, size_t n, size_t piece, struct sink *out)
{
	size_t at = 0;

	memset(out, 0, sizeof *out);
	do {
		size_t k = n - at < piece ? n - at : piece;
		ck_assert_int_eq(mc__zenc_run(z, src + at, k, at + k == n, sink_add, out), MC_OK);
		at += k;
	} while (at < n);
}

/* Decodes in pieces with mc__zdec_run; returns the last call's status. */
static int
decode_run(mc_zdec *z, const unsigned char *src, size_t n, size_t piece, struct sink *out,
	   int *done)
{
	size_t at = 0;
	int rc = MC_OK;

	memset(out, 0, sizeof *out);
	mc__zdec_reset(z);
	*done = 0;
	while (at < n && rc == MC_OK) {
		size_t k = n - at < piece ? n - at : piece;
		rc = mc__zdec_run(z, src + at, k, sink_add, out, done);
		at += k;
	}
	return rc;
}

START_TEST(zstd_round_trip)
{
	static const size_t sizes[] = {0, 1, 1000, 3 << 20};
	static const size_t pieces[] = {1, 7, 65536, 16 << 20};
	mc_zenc *enc;
	mc_zdec *dec;
	size_t i, j, produced;
	int done, overflow;

	ck_assert_int_eq(mc__zenc_new(ctx, 3, &enc), MC_OK);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);
	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		unsigned char *src = object(n), *dst = malloc(n + 1);
		struct sink frame, back;

		encode(enc, src, n, 65536, &frame);
		ck_assert_uint_ge(frame.len, 4);
		ck_assert_int_eq(memcmp(frame.p, "\x28\xb5\x2f\xfd", 4), 0);
		if (n == 3 << 20)
			ck_assert_uint_lt(frame.len, n / 4);
		for (j = 0; j < sizeof pieces / sizeof pieces[0]; j++) {
			if (pieces[j] == 1 && n > 1000)
				continue;
			ck_assert_int_eq(decode_run(dec, frame.p, frame.len, pieces[j], &back, &done),
					 MC_OK);
			ck_assert_int_eq(done, 1);
			ck_assert_uint_eq(back.len, n);
			ck_assert(n == 0 || memcmp(back.p, src, n) == 0);
			free(back.p);
		}
		ck_assert_int_eq(mc__zdec_whole(dec, frame.p, frame.len, dst, n, &produced,
						&overflow), MC_OK);
		ck_assert_int_eq(overflow, 0);
		ck_assert_uint_eq(produced, n);
		ck_assert(n == 0 || memcmp(dst, src, n) == 0);
		free(frame.p);
		free(dst);
		free(src);
	}
	mc__zenc_free(enc);
	mc__zdec_free(dec);
}
END_TEST

/* The frame's header: no content size, checksum or dictionary id, and a window no
 * larger than the decoder takes. */
START_TEST(zstd_frame_header)
{
	unsigned char *src = object(100000);
	struct sink frame;
	mc_zenc *enc;
	unsigned fhd, wlog;

	ck_assert_int_eq(mc__zenc_new(ctx, 3, &enc), MC_OK);
	encode(enc, src, 100000, 100000, &frame);
	fhd = frame.p[4];
	ck_assert_uint_eq(fhd >> 6, 0);       /* no content size field */
	ck_assert_uint_eq(fhd & 0x20, 0);     /* so a window descriptor follows */
	ck_assert_uint_eq(fhd & 0x04, 0);     /* no checksum */
	ck_assert_uint_eq(fhd & 0x03, 0);     /* no dictionary id */
	wlog = 10 + (frame.p[5] >> 3);
	ck_assert_uint_le(wlog, MC_ZSTD_WINDOW_LOG);
	free(frame.p);
	free(src);
	mc__zenc_free(enc);
}
END_TEST

/* Fixed parameters: the same content fed in the same pieces (the writer's pieces are
 * fixed) gives the same bytes, from a fresh encoder or one that has encoded other
 * objects. Other pieces give a frame of the same content, not always the same bytes:
 * zstd sizes its work from the first call's input. */
START_TEST(zstd_deterministic)
{
	const size_t n = 1 << 20;
	unsigned char *src = object(n), *other = object(5000);
	struct sink a, b, c, d, back;
	mc_zenc *e1, *e2;
	mc_zdec *dec;
	int done;

	ck_assert_int_eq(mc__zenc_new(ctx, 3, &e1), MC_OK);
	ck_assert_int_eq(mc__zenc_new(ctx, 3, &e2), MC_OK);
	encode(e1, src, n, 65536, &a);
	encode(e2, other, 5000, 5000, &b);
	free(b.p);
	encode(e2, src, n, 65536, &b);
	encode(e1, src, n, 65536, &c);
	ck_assert_uint_eq(a.len, b.len);
	ck_assert_int_eq(memcmp(a.p, b.p, a.len), 0);
	ck_assert_uint_eq(a.len, c.len);
	ck_assert_int_eq(memcmp(a.p, c.p, a.len), 0);
	encode(e1, src, n, n, &d);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);
	ck_assert_int_eq(decode_run(dec, d.p, d.len, 4096, &back, &done), MC_OK);
	ck_assert_int_eq(done, 1);
	ck_assert_uint_eq(back.len, n);
	ck_assert_int_eq(memcmp(back.p, src, n), 0);
	free(back.p);
	free(a.p);
	free(b.p);
	free(c.p);
	free(d.p);
	free(src);
	free(other);
	mc__zenc_free(e1);
	mc__zenc_free(e2);
	mc__zdec_free(dec);
}
END_TEST

/* A frame of 1000 bytes of the test object, for the refusals below. */
static void
small_frame(struct sink *frame, unsigned char **src)
{
	mc_zenc *enc;

	*src = object(1000);
	ck_assert_int_eq(mc__zenc_new(ctx, 3, &enc), MC_OK);
	encode(enc, *src, 1000, 1000, frame);
	mc__zenc_free(enc);
}

START_TEST(zstd_skippable_refused)
{
	static const size_t pieces[] = {1, 2, 3, 4096};
	unsigned char *src, *buf, dst[1001];
	struct sink frame, back;
	mc_zdec *dec;
	size_t i, produced;
	int done, overflow;

	small_frame(&frame, &src);
	/* A skippable frame (magic 0x184D2A5?, little-endian) of 3 bytes, then the frame. */
	buf = malloc(frame.len + 11);
	memcpy(buf, "\x53\x2a\x4d\x18\x03\x00\x00\x00xyz", 11);
	memcpy(buf + 11, frame.p, frame.len);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);
	for (i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
		ck_assert_int_eq(decode_run(dec, buf, frame.len + 11, pieces[i], &back, &done),
				 MC_ERR_MALFORMED);
		ck_assert_str_eq(mc_ctx_error(ctx), "a skippable frame, where one zstd frame must be");
		ck_assert_uint_eq(back.len, 0);
		free(back.p);
	}
	ck_assert_int_eq(mc__zdec_whole(dec, buf, frame.len + 11, dst, 1000, &produced, &overflow),
			 MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "a skippable frame, where one zstd frame must be");
	ck_assert_int_eq(overflow, 0);
	/* The same decoder, reset, takes the frame alone. */
	ck_assert_int_eq(decode_run(dec, frame.p, frame.len, 4096, &back, &done), MC_OK);
	ck_assert_int_eq(done, 1);
	ck_assert_uint_eq(back.len, 1000);
	ck_assert_int_eq(memcmp(back.p, src, 1000), 0);
	free(back.p);
	free(buf);
	free(frame.p);
	free(src);
	mc__zdec_free(dec);
}
END_TEST

START_TEST(zstd_trailing_refused)
{
	unsigned char *src, *two, dst[1001];
	struct sink frame, back;
	mc_zdec *dec;
	size_t produced;
	int done, overflow;

	small_frame(&frame, &src);
	two = malloc(2 * frame.len);
	memcpy(two, frame.p, frame.len);
	memcpy(two + frame.len, frame.p, frame.len);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);

	/* One byte after the frame, in the same piece. */
	ck_assert_int_eq(decode_run(dec, two, frame.len + 1, 1 << 20, &back, &done),
			 MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "bytes after the end of the zstd frame");
	free(back.p);
	/* In a piece of its own, after the frame ended. */
	ck_assert_int_eq(decode_run(dec, frame.p, frame.len, 1 << 20, &back, &done), MC_OK);
	ck_assert_int_eq(done, 1);
	ck_assert_int_eq(mc__zdec_run(dec, "x", 1, sink_add, &back, &done), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "bytes after the end of the zstd frame");
	free(back.p);
	/* A second frame. */
	ck_assert_int_eq(decode_run(dec, two, 2 * frame.len, 1 << 20, &back, &done),
			 MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "bytes after the end of the zstd frame");
	ck_assert_uint_eq(back.len, 1000);
	free(back.p);
	ck_assert_int_eq(mc__zdec_whole(dec, two, 2 * frame.len, dst, 1000, &produced, &overflow),
			 MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "bytes after the end of the zstd frame");
	ck_assert_uint_eq(produced, 0);
	free(two);
	free(frame.p);
	free(src);
	mc__zdec_free(dec);
}
END_TEST

START_TEST(zstd_truncated_and_garbage)
{
	unsigned char *src, dst[1001];
	struct sink frame, back;
	mc_zdec *dec;
	size_t produced;
	int done, overflow;

	small_frame(&frame, &src);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);
	/* Streaming, a frame cut short is not done yet; whole, it is refused. */
	ck_assert_int_eq(decode_run(dec, frame.p, frame.len - 1, 1 << 20, &back, &done), MC_OK);
	ck_assert_int_eq(done, 0);
	free(back.p);
	ck_assert_int_eq(mc__zdec_whole(dec, frame.p, frame.len - 1, dst, 1000, &produced,
					&overflow), MC_ERR_MALFORMED);
	ck_assert_str_eq(mc_ctx_error(ctx), "compressed data ends early");
	ck_assert_int_eq(mc__zdec_whole(dec, "megacache bundle", 16, dst, 1000, &produced,
					&overflow), MC_ERR_MALFORMED);
	ck_assert_int_eq(strncmp(mc_ctx_error(ctx), "corrupt compressed data (", 25), 0);
	/* A frame asking for a window above MC_ZSTD_WINDOW_LOG: an empty last raw block,
	 * with a window of 2^23 taken and of 2^24 refused. */
	ck_assert_int_eq(mc__zdec_whole(dec, "\x28\xb5\x2f\xfd\x00\x68\x01\x00\x00", 9, dst, 1000,
					&produced, &overflow), MC_OK);
	ck_assert_uint_eq(produced, 0);
	ck_assert_int_eq(mc__zdec_whole(dec, "\x28\xb5\x2f\xfd\x00\x70\x01\x00\x00", 9, dst, 1000,
					&produced, &overflow), MC_ERR_MALFORMED);
	ck_assert_int_eq(strncmp(mc_ctx_error(ctx), "corrupt compressed data (", 25), 0);
	/* The output function's error ends the run. */
	mc__zdec_reset(dec);
	ck_assert_int_eq(mc__zdec_run(dec, frame.p, frame.len, sink_fail, NULL, &done), MC_ERR_IO);
	free(frame.p);
	free(src);
	mc__zdec_free(dec);
}
END_TEST

/* mc__zdec_whole stops where the output would pass cap, and says so with the flag
 * alone: no message replaces the context's. */
START_TEST(zstd_whole_overflow)
{
	unsigned char *src, dst[1001];
	struct sink frame;
	mc_zdec *dec;
	size_t produced = 77;
	int overflow = 0;

	small_frame(&frame, &src);
	ck_assert_int_eq(mc__zdec_new(ctx, &dec), MC_OK);
	mc__err(ctx, MC_ERR_IO, "before");
	ck_assert_int_eq(mc__zdec_whole(dec, frame.p, frame.len, dst, 999, &produced, &overflow),
			 MC_ERR_INTEGRITY);
	ck_assert_int_eq(overflow, 1);
	ck_assert_uint_eq(produced, 0);
	ck_assert_str_eq(mc_ctx_error(ctx), "before");
	ck_assert_int_eq(mc__zdec_whole(dec, frame.p, frame.len, dst, 0, &produced, &overflow),
			 MC_ERR_INTEGRITY);
	ck_assert_int_eq(overflow, 1);
	/* At cap exactly, it fits. */
	ck_assert_int_eq(mc__zdec_whole(dec, frame.p, frame.len, dst, 1000, &produced, &overflow),
			 MC_OK);
	ck_assert_int_eq(overflow, 0);
	ck_assert_uint_eq(produced, 1000);
	ck_assert_int_eq(memcmp(dst, src, 1000), 0);
	free(frame.p);
	free(src);
	mc__zdec_free(dec);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("format");
	TCase *t = tcase_create("tar");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, tar_round_trip);
	tcase_add_test(t, tar_fields);
	tcase_add_test(t, tar_render_refuses);
	tcase_add_test(t, tar_zero_block);
	tcase_add_test(t, tar_any_byte_changed);
	tcase_add_test(t, tar_noncanonical);
	suite_add_tcase(s, t);
	t = tcase_create("zstd");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, zstd_round_trip);
	tcase_add_test(t, zstd_frame_header);
	tcase_add_test(t, zstd_deterministic);
	tcase_add_test(t, zstd_skippable_refused);
	tcase_add_test(t, zstd_trailing_refused);
	tcase_add_test(t, zstd_truncated_and_garbage);
	tcase_add_test(t, zstd_whole_overflow);
	suite_add_tcase(s, t);
	return s;
}

RUN_SUITE(suite())
