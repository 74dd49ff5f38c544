/* test_encode.c - the byte encodings: torch's base32 names, CRC-32, base64, UTF-8. */
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

START_TEST(utf8_rules)
{
	ck_assert(mc__utf8_valid((const unsigned char *)"h\xc3\xa9llo", 6));
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xc0\xaf", 2));         /* overlong */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xed\xa0\x80", 3));     /* surrogate */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	ck_assert(!mc__utf8_valid((const unsigned char *)"\xe2\x82", 2));         /* cut short */
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

static Suite *
suite(void)
{
	Suite *s = suite_create("encode");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, torch_name_of_sha256);
	tcase_add_test(tc, crc32_check_value);
	tcase_add_test(tc, base64_strict);
	tcase_add_test(tc, utf8_rules);
	tcase_add_test(tc, endian_helpers);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
