/* test_encode.c - the byte encodings: torch's base32 names, CRC-32, base64, UTF-8, and
 * the escaping of text for terminals and JSON; the core's grown arrays and the message
 * put after a prefix. */
#include "util.h"

#include <sodium.h>

START_TEST(torch_name_of_sha256)
{
	/* torch names cache files H(content): base32 of SHA-256, 51 characters. */
	unsigned char sha[32];
	char h[52];

	ck_assert_int_ge(sodium_init(), 0);
	crypto_hash_sha256(sha, (const unsigned char *)"", 0);
	mc__torch_b32_51(sha, h);
	/* base32 of SHA-256("") = 4OYMIQUY7QOBJGX36TEJS35ZEQT24QPEMSNZGTFESWMRW6CSXBKQ==== */
	ck_assert_str_eq(h, "4oymiquy7qobjgx36tejs35zeqt24qpemsnzgtfeswmrw6csxbk");
	ck_assert_uint_eq(strlen(h), 51);
}
END_TEST

START_TEST(crc32_check_value)
{
	ck_assert_uint_eq(mc__crc32(0, "123456789", 9), 0xCBF43926u);
	ck_assert_uint_eq(mc__crc32(mc__crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}
END_TEST

START_TEST(base64_strict)
{
	unsigned char out[16];
	size_t n;

	ck_assert_int_eq(mc__b64_decode("aW5kdWN0b3I=", 12, out, sizeof out, &n), 0);
	ck_assert_uint_eq(n, 8);
	ck_assert_int_eq(memcmp(out, "inductor", 8), 0);
	/* Non-zero padding bits and missing padding are not canonical. */
	ck_assert_int_ne(mc__b64_decode("aW5kdWN0b3J=", 12, out, sizeof out, &n), 0);
	ck_assert_int_ne(mc__b64_decode("aW5kdWN0b3I", 11, out, sizeof out, &n), 0);
	ck_assert_int_ne(mc__b64_decode("aW5k!WN0b3I=", 12, out, sizeof out, &n), 0);
}
END_TEST

/* The bulk codec against libsodium's, at every length up to 300 and every byte value;
 * the decoder refuses what the strict one refuses, wherever it stands. */
START_TEST(base64_data_codec)
{
	unsigned char in[300], back[300];
	char ref[512], *enc;
	size_t n, len, got, k;

	ck_assert_int_ge(sodium_init(), 0);
	for (k = 0; k < sizeof in; k++)
		in[k] = (unsigned char)(k * 167 + 13);
	for (n = 0; n <= sizeof in; n++) {
		sodium_bin2base64(ref, sizeof ref, in, n, sodium_base64_VARIANT_ORIGINAL);
		enc = mc__b64_encode_data(in, n, &len);
		ck_assert_ptr_nonnull(enc);
		ck_assert_uint_eq(len, MC_B64_LEN(n));
		ck_assert_str_eq(enc, ref);
		ck_assert_int_eq(mc__b64_decode_data(enc, len, back, sizeof back, &got), 0);
		ck_assert_uint_eq(got, n);
		ck_assert_int_eq(memcmp(back, in, n), 0);
		if (n > 0) /* one byte short of room */
			ck_assert_int_ne(mc__b64_decode_data(enc, len, back, n - 1, &got), 0);
		for (k = 0; k < len; k++) { /* a non-digit anywhere, '=' before the last quad */
			char saved = enc[k];
			enc[k] = k % 2 || k + 4 >= len ? '!' : '=';
			ck_assert_int_ne(mc__b64_decode_data(enc, len, back, sizeof back, &got), 0);
			enc[k] = saved;
		}
		free(enc);
	}
	for (k = 0; k < 256; k++) { /* every byte value, in each place of a quad */
		unsigned char all[3] = {(unsigned char)k, (unsigned char)(255 - k), (unsigned char)(k ^ 0x5a)};
		enc = mc__b64_encode_data(all, 3, &len);
		ck_assert_int_eq(mc__b64_decode_data(enc, len, back, 3, &got), 0);
		ck_assert_int_eq(memcmp(back, all, 3), 0);
		free(enc);
	}
	/* Stray bits under the padding and a missing pad are not canonical. */
	ck_assert_int_eq(mc__b64_decode_data("aW5kdWN0b3I=", 12, back, sizeof back, &got), 0);
	ck_assert_int_ne(mc__b64_decode_data("aW5kdWN0b3J=", 12, back, sizeof back, &got), 0);
	ck_assert_int_ne(mc__b64_decode_data("aW5kdWN0bw=J", 12, back, sizeof back, &got), 0);
	ck_assert_int_ne(mc__b64_decode_data("aW5kdWN0b3I", 11, back, sizeof back, &got), 0);
	ck_assert_int_ne(mc__b64_decode_data("aQ=a", 4, back, sizeof back, &got), 0);
	ck_assert_int_ne(mc__b64_decode_data("aR==", 4, back, sizeof back, &got), 0);
}
END_TEST

START_TEST(utf8_rules)
{
	ck_assert(mc__utf8_valid((const unsigned char *)"h\xc3\xa9llo", 6));
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xc0\xaf", 2));         /* overlong */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xed\xa0\x80", 3));     /* surrogate */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xe2\x82", 2));         /* cut short */
	/* Runs of ASCII are taken eight bytes at a time: a bad byte at every place after
	 * and inside such runs is still found, and the length is kept to. */
	{
		unsigned char t[40];
		size_t k;
		memset(t, 'a', sizeof t);
		ck_assert(mc__utf8_valid(t, sizeof t));
		for (k = 0; k < sizeof t; k++) {
			t[k] = 0xff;
			ck_assert(!mc__utf8_valid(t, sizeof t));
			ck_assert(mc__utf8_valid(t, k)); /* the bytes before it */
			t[k] = 0xc3; /* a sequence cut at the end, or followed by ASCII */
			ck_assert(!mc__utf8_valid(t, k + 1));
			ck_assert(!mc__utf8_valid(t, sizeof t));
			if (k + 1 < sizeof t) {
				t[k + 1] = 0xa9;
				ck_assert(mc__utf8_valid(t, sizeof t));
				t[k + 1] = 'a';
			}
			t[k] = 'a';
		}
	}
}
END_TEST

START_TEST(endian_helpers)
{
	unsigned char b[8];

	mc__put_be64(b, 0x0102030405060708ull);
	ck_assert_uint_eq(b[0], 1);
	ck_assert_uint_eq(mc__be64(b), 0x0102030405060708ull);
	mc__put_le64(b, 0x0102030405060708ull);
	ck_assert_uint_eq(b[0], 8);
	ck_assert_uint_eq(mc__le64(b), 0x0102030405060708ull);
}
END_TEST

/* mc_escape of src into a buffer large enough; checks that the length it returns
 * is the length it wrote. */
static const char *
esc(const char *src, unsigned flags)
{
	static char out[4096];
	size_t n = mc_escape(out, sizeof out, src, flags);

	ck_assert_uint_lt(n, sizeof out);
	ck_assert_uint_eq(strlen(out), n);
	ck_assert_uint_eq(mc_escape(NULL, 0, src, flags), n);
	return out;
}

START_TEST(escape_c0_del_c1)
{
	/* OSC 52 (set the clipboard), a forged line, DEL: bytes as \xNN. */
	ck_assert_str_eq(esc("a\x1b]52;c;eA==\x07" "b\nmegacache: OK\r\x7f", 0),
			 "a\\x1b]52;c;eA==\\x07b\\x0amegacache: OK\\x0d\\x7f");
	ck_assert_str_eq(esc("\x01\t\x1f", 0), "\\x01\\x09\\x1f");
	/* C1 controls, as UTF-8, as \uNNNN; U+00A0 after them is text. */
	ck_assert_str_eq(esc("\xc2\x80\xc2\x85\xc2\x9b" "31m\xc2\x9f\xc2\xa0", 0),
			 "\\u0080\\u0085\\u009b31m\\u009f\xc2\xa0");
	/* Text, and a backslash, are left as they are. */
	ck_assert_str_eq(esc("plain ~ text \\x1b h\xc3\xa9 \xf0\x9f\x98\x80", 0),
			 "plain ~ text \\x1b h\xc3\xa9 \xf0\x9f\x98\x80");
	ck_assert_str_eq(esc("", 0), "");
}
END_TEST

START_TEST(escape_bidi_and_separators)
{
	static const struct {
		const char *in, *out;
	} t[] = {
		{"\xd8\x9c", "\\u061c"}, {"\xe2\x80\x8e", "\\u200e"}, {"\xe2\x80\x8f", "\\u200f"},
		{"\xe2\x80\xaa", "\\u202a"}, {"\xe2\x80\xab", "\\u202b"}, {"\xe2\x80\xac", "\\u202c"},
		{"\xe2\x80\xad", "\\u202d"}, {"\xe2\x80\xae", "\\u202e"}, {"\xe2\x81\xa6", "\\u2066"},
		{"\xe2\x81\xa7", "\\u2067"}, {"\xe2\x81\xa8", "\\u2068"}, {"\xe2\x81\xa9", "\\u2069"},
		{"\xe2\x80\xa8", "\\u2028"}, {"\xe2\x80\xa9", "\\u2029"},
		/* Their neighbours are text: U+061B, U+200D, U+2027, U+202F, U+2065, U+206A. */
		{"\xd8\x9b", "\xd8\x9b"}, {"\xe2\x80\x8d", "\xe2\x80\x8d"}, {"\xe2\x80\xa7", "\xe2\x80\xa7"},
		{"\xe2\x80\xaf", "\xe2\x80\xaf"}, {"\xe2\x81\xa5", "\xe2\x81\xa5"},
		{"\xe2\x81\xaa", "\xe2\x81\xaa"},
	};
	size_t i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++) {
		ck_assert_str_eq(esc(t[i].in, 0), t[i].out);
		ck_assert_str_eq(esc(t[i].in, MC_ESCAPE_JSON), t[i].out);
	}
	/* A right-to-left override that would show "exe.txt" as "txt.exe". */
	ck_assert_str_eq(esc("a\xe2\x80\xaetxt.exe", 0), "a\\u202etxt.exe");
}
END_TEST

START_TEST(escape_invalid_utf8)
{
	/* Each byte of a sequence that is not UTF-8 is escaped on its own, and
	 * what follows it is read afresh. */
	ck_assert_str_eq(esc("a\x80" "b", 0), "a\\x80b");                          /* lone continuation */
	ck_assert_str_eq(esc("\xc0\xaf", 0), "\\xc0\\xaf");                        /* overlong / */
	ck_assert_str_eq(esc("\xe0\x80\xaf", 0), "\\xe0\\x80\\xaf");               /* overlong, 3 bytes */
	ck_assert_str_eq(esc("\xed\xa0\x80", 0), "\\xed\\xa0\\x80");               /* surrogate */
	ck_assert_str_eq(esc("\xf4\x90\x80\x80", 0), "\\xf4\\x90\\x80\\x80");      /* above U+10FFFF */
	ck_assert_str_eq(esc("\xe2\x82", 0), "\\xe2\\x82");                        /* cut by the end */
	ck_assert_str_eq(esc("\xe2\x82" "A\xc3\xa9", 0), "\\xe2\\x82A\xc3\xa9");   /* cut by text */
	ck_assert_str_eq(esc("\xe2\xe2\x80\xae", 0), "\\xe2\\u202e");              /* then a valid one */
	ck_assert_str_eq(esc("\x9b" "31m\xff\xfe", 0), "\\x9b31m\\xff\\xfe");      /* raw C1 byte */
}
END_TEST

START_TEST(escape_json_mode)
{
	/* JSON text (as cJSON prints it): whitespace between tokens stays, any other
	 * control becomes \u00NN, an invalid byte U+FFFD, and the text stays valid. */
	ck_assert_str_eq(esc("{\n\t\"k\":\t\"a\x1b" "b\x7f\xc2\x9b\xe2\x80\xae\"\r\n}", MC_ESCAPE_JSON),
			 "{\n\t\"k\":\t\"a\\u001bb\\u007f\\u009b\\u202e\"\r\n}");
	ck_assert_str_eq(esc("\"\xc0\xaf\x80\xe2\x82\"", MC_ESCAPE_JSON),
			 "\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");
	ck_assert_str_eq(esc("\"\\u001b h\xc3\xa9\"", MC_ESCAPE_JSON), "\"\\u001b h\xc3\xa9\"");
	ck_assert_str_eq(esc("\x01\x1f", MC_ESCAPE_JSON), "\\u0001\\u001f");
}
END_TEST

START_TEST(escape_truncates)
{
	/* Like snprintf: at most dstlen - 1 bytes of the result, always a NUL, and the
	 * whole result's length returned; nothing written past dstlen. A cut falls only
	 * between whole characters or escapes (ends at 0, 1, 2, 6, 7, 8, 14). */
	const char *src = "ab\x1b" "cd\xe2\x80\xae";
	const char *full = "ab\\x1bcd\\u202e";
	static const size_t ends[] = {0, 1, 2, 6, 7, 8, 14};
	char buf[32];
	size_t len, e;

	ck_assert_uint_eq(mc_escape(NULL, 0, src, 0), strlen(full));
	for (len = 1; len <= strlen(full) + 2; len++) {
		size_t keep = 0;
		for (e = 0; e < sizeof ends / sizeof ends[0]; e++)
			if (ends[e] <= len - 1)
				keep = ends[e];
		memset(buf, '#', sizeof buf);
		ck_assert_uint_eq(mc_escape(buf, len, src, 0), strlen(full));
		ck_assert_uint_eq(strlen(buf), keep);
		ck_assert(memcmp(buf, full, keep) == 0);
		ck_assert_int_eq(buf[len], '#');
	}
	memset(buf, '#', sizeof buf);
	ck_assert_uint_eq(mc_escape(buf, 0, src, 0), strlen(full));
	ck_assert_int_eq(buf[0], '#');
}
END_TEST

/* Whether s holds only what mc_escape lets through: valid UTF-8 with no character it
 * escapes (JSON text may keep tab, LF and CR). */
static int
all_safe(const char *s, int json)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i, k;
	uint32_t cp;

	for (i = 0; i < n; i += k) {
		if ((k = mc__utf8_decode(p + i, n - i, &cp)) == 0)
			return 0;
		if (mc__is_unsafe_cp(cp) && !(json && (cp == '\t' || cp == '\n' || cp == '\r')))
			return 0;
	}
	return 1;
}

START_TEST(escape_idempotent)
{
	/* Escaping the output again gives the same bytes, in both modes, for inputs
	 * of every byte value; the output is always safe. */
	static const char *const fixed[] = {
		"a\x1b]52;c;eA==\x07\nmegacache: OK", "\xc2\x9b\xe2\x80\xae\xe2\x80\xa8\xd8\x9c",
		"\xc0\xaf\xed\xa0\x80\xe2\x82", "\\x1b \\u202e \\\\", "h\xc3\xa9\xf0\x9f\x98\x80",
	};
	char in[80], once[1024], twice[1024];
	uint32_t seed = 14;
	size_t i, k;
	unsigned flags;

	for (i = 0; i < 5 + 2000; i++) {
		if (i < 5) {
			snprintf(in, sizeof in, "%s", fixed[i]);
		} else {
			size_t n = i % (sizeof in);
			for (k = 0; k < n; k++) {
				seed = seed * 1103515245u + 12345u;
				in[k] = (char)(1 + (seed >> 16) % 255);
			}
			in[n] = '\0';
		}
		for (flags = 0; flags <= MC_ESCAPE_JSON; flags++) {
			ck_assert_uint_lt(mc_escape(once, sizeof once, in, flags), sizeof once);
			ck_assert_uint_eq(mc_escape(twice, sizeof twice, once, flags), strlen(once));
			ck_assert_str_eq(twice, once);
			ck_assert_msg(all_safe(once, flags == MC_ESCAPE_JSON), "unsafe output for case %zu", i);
		}
	}
}
END_TEST

START_TEST(grow_doubles)
{
	/* Room for each element added, the capacity doubled, the contents kept; no room
	 * needed, nothing moves; a size past SIZE_MAX is refused, the array as it was. */
	uint32_t *v = NULL, *kept;
	size_t cap = 0, before, i;

	for (i = 0; i < 1000; i++) {
		before = cap;
		ck_assert_int_eq(mc__grow(&v, &cap, i + 1, sizeof *v), MC_OK);
		ck_assert_uint_ge(cap, i + 1);
		ck_assert(cap == before || before == 0 || cap == 2 * before);
		v[i] = (uint32_t)i;
	}
	for (i = 0; i < 1000; i++)
		ck_assert_uint_eq(v[i], i);
	kept = v;
	before = cap;
	ck_assert_int_eq(mc__grow(&v, &cap, cap, sizeof *v), MC_OK);
	ck_assert_ptr_eq(v, kept);
	ck_assert_int_eq(mc__grow(&v, &cap, SIZE_MAX / 2, sizeof *v), MC_ERR_NOMEM);
	ck_assert_int_eq(mc__grow(&v, &cap, SIZE_MAX, 1), MC_ERR_NOMEM);
	ck_assert_ptr_eq(v, kept);
	ck_assert_uint_eq(cap, before);
	free(v);
}
END_TEST

START_TEST(err_prefix_before_message)
{
	/* "prefix: message", cut where one message is cut. */
	char big[MC_ERRBUF];
	mc_ctx *ctx;

	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	mc__err(ctx, MC_ERR_MALFORMED, "member %s: bad", "x");
	ck_assert_int_eq(mc__err_prefix(ctx, MC_ERR_IO, "%s: object %d", "a.mcb", 7), MC_ERR_IO);
	ck_assert_str_eq(mc_ctx_error(ctx), "a.mcb: object 7: member x: bad");
	memset(big, 'm', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	mc__err(ctx, MC_ERR_IO, "%s", big);
	mc__err_prefix(ctx, MC_ERR_IO, "%s", "a.mcb");
	ck_assert_uint_eq(strlen(mc_ctx_error(ctx)), MC_ERRBUF - 1);
	ck_assert_int_eq(strncmp(mc_ctx_error(ctx), "a.mcb: mmm", 10), 0);
	mc_ctx_free(ctx);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("encode");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, torch_name_of_sha256);
	tcase_add_test(tc, crc32_check_value);
	tcase_add_test(tc, base64_strict);
	tcase_add_test(tc, base64_data_codec);
	tcase_add_test(tc, utf8_rules);
	tcase_add_test(tc, endian_helpers);
	tcase_add_test(tc, escape_c0_del_c1);
	tcase_add_test(tc, escape_bidi_and_separators);
	tcase_add_test(tc, escape_invalid_utf8);
	tcase_add_test(tc, escape_json_mode);
	tcase_add_test(tc, escape_truncates);
	tcase_add_test(tc, escape_idempotent);
	tcase_add_test(tc, grow_doubles);
	tcase_add_test(tc, err_prefix_before_message);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
