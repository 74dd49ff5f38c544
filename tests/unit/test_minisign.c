/* test_minisign.c - keys and signatures in minisign's formats. */
#include "util.h"

#include <sodium.h>

static mc_ctx *ctx;
static char *dir;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	dir = scratch("minisign");
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
	free(dir);
}

static int
pw_ok(void *ud, const char *prompt, char *buf, size_t len)
{
	snprintf(buf, len, "%s", (const char *)ud);
	return MC_OK;
}

/* A password callback that gives up, leaving text in buf (ud: the text, or NULL). */
static int
pw_none(void *ud, const char *prompt, char *buf, size_t len)
{
	if (ud != NULL)
		snprintf(buf, len, "%s", (const char *)ud);
	return MC_ERR_PASSWORD;
}

START_TEST(keys_round_trip_and_sign)
{
	char pub[4096], sec[4096];
	mc_seckey *sk, *sk2;
	mc_pubkey *pk, *pk2;
	struct mc_sig sig;
	const unsigned char msg[] = "manifest bytes";

	snprintf(pub, sizeof pub, "%s/k.pub", dir);
	snprintf(sec, sizeof sec, "%s/k.key", dir);
	ck_assert_int_eq(mc_keygen(ctx, &sk, &pk), MC_OK);
	ck_assert_int_eq(mc_keypair_save(ctx, sk, pk, pub, sec, NULL, 0), MC_OK);
	ck_assert_int_eq(mc_keypair_save(ctx, sk, pk, pub, sec, NULL, 0), MC_ERR_EXISTS);
	ck_assert_int_eq(mc_pubkey_load(ctx, pub, &pk2), MC_OK);
	ck_assert_int_eq(mc_seckey_load(ctx, sec, NULL, NULL, &sk2), MC_OK);
	ck_assert_str_eq(mc_pubkey_id(pk2), mc_pubkey_id(pk));
	ck_assert_str_eq(mc_seckey_id(sk2), mc_pubkey_id(pk));
	ck_assert_int_eq(mc__sig_make(ctx, sk2, msg, sizeof msg, "timestamp:1\tfile:m\thashed", &sig), MC_OK);
	ck_assert_int_eq(mc__sig_verify(&sig, pk2, msg, sizeof msg), 0);
	ck_assert_int_ne(mc__sig_verify(&sig, pk2, msg, sizeof msg - 1), 0);
	/* Edited trusted comment. */
	sig.trusted_comment[0] = 'T';
	ck_assert_int_ne(mc__sig_verify(&sig, pk2, msg, sizeof msg), 0);
	mc__sig_clear(&sig);
	mc_seckey_free(sk);
	mc_seckey_free(sk2);
	mc_pubkey_free(pk);
	mc_pubkey_free(pk2);
}
END_TEST

START_TEST(signature_text_canonical)
{
	char sec[4096], *text;
	mc_seckey *sk;
	struct mc_sig sig, back;
	size_t len;
	char *sk_path = src_path("format/vectors/keys/test.key");

	snprintf(sec, sizeof sec, "%s", sk_path);
	ck_assert_int_eq(mc_seckey_load(ctx, sec, NULL, NULL, &sk), MC_OK);
	ck_assert_int_eq(mc__sig_make(ctx, sk, (const unsigned char *)"x", 1, "c", &sig), MC_OK);
	text = mc__sig_render(&sig, &len);
	ck_assert_int_eq(mc__sig_parse(ctx, text, len, 1, &back), MC_OK);
	ck_assert_int_eq(memcmp(back.sig, sig.sig, 64), 0);
	mc__sig_clear(&back);
	/* Any other untrusted comment is fine for a file, not for a bundle member. */
	text[20] = 'X';
	ck_assert_int_eq(mc__sig_parse(ctx, text, len, 0, &back), MC_OK);
	mc__sig_clear(&back);
	ck_assert_int_eq(mc__sig_parse(ctx, text, len, 1, &back), MC_ERR_KEYFILE);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "canonical"));
	/* Missing final newline. */
	text[20] = 's';
	ck_assert_int_eq(mc__sig_parse(ctx, text, len - 1, 1, &back), MC_ERR_KEYFILE);
	free(text);
	mc__sig_clear(&sig);
	mc_seckey_free(sk);
	free(sk_path);
}
END_TEST

/* The writer signs only comments stock minisign verifies and shows on one line. */
START_TEST(trusted_comment_rules)
{
	static const char *const good[] = {"a\tb", "\xc2\xa0", "\xe2\x80\xa7", "\xe2\x80\xaf", "~"};
	static const char *const broken[] = {"a\rb", "a\nb", "\x01", "\x1b[2J", "\x7f", "\xc2\x80",
					     "a\xc2\x85" "b", "\xc2\x9f", "\xe2\x80\xa8", "\xe2\x80\xa9",
					     "\xe2\x80\xaa", "\xe2\x80\xae", "\xd8\x9c", "\xe2\x81\xa6"};
	static char longest[8175];
	char *sk_path = src_path("format/vectors/keys/test.key");
	const unsigned char msg[] = "m";
	struct mc_sig sig;
	mc_seckey *sk;
	size_t i;

	ck_assert_int_eq(mc_seckey_load(ctx, sk_path, NULL, NULL, &sk), MC_OK);
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert_int_eq(mc__sig_make(ctx, sk, msg, 1, good[i], &sig), MC_OK);
		mc__sig_clear(&sig);
	}
	for (i = 0; i < sizeof broken / sizeof broken[0]; i++) {
		ck_assert_int_eq(mc__sig_make(ctx, sk, msg, 1, broken[i], &sig), MC_ERR_INVALID);
		ck_assert_str_eq(mc_ctx_error(ctx),
				 "trusted comment contains a line break or control character");
	}
	ck_assert_int_eq(mc__sig_make(ctx, sk, msg, 1, "\xff", &sig), MC_ERR_INVALID);
	ck_assert_str_eq(mc_ctx_error(ctx), "trusted comment is not valid UTF-8");
	memset(longest, 'c', 8173);
	ck_assert_int_eq(mc__sig_make(ctx, sk, msg, 1, longest, &sig), MC_OK);
	mc__sig_clear(&sig);
	longest[8173] = 'c';
	ck_assert_int_eq(mc__sig_make(ctx, sk, msg, 1, longest, &sig), MC_ERR_INVALID);
	ck_assert_str_eq(mc_ctx_error(ctx), "trusted comment is longer than 8173 bytes, the most "
			 "stock minisign verifies");
	mc_seckey_free(sk);
	free(sk_path);
}
END_TEST

START_TEST(encrypted_key)
{
	char pub[4096], sec[4096];
	mc_seckey *sk, *sk2;
	mc_pubkey *pk;

	snprintf(pub, sizeof pub, "%s/e.pub", dir);
	snprintf(sec, sizeof sec, "%s/e.key", dir);
	ck_assert_int_eq(mc_keygen(ctx, &sk, &pk), MC_OK);
	ck_assert_int_eq(mc_keypair_save(ctx, sk, pk, pub, sec, "s3cret", 0), MC_OK);
	ck_assert_int_eq(mc_seckey_load(ctx, sec, NULL, NULL, &sk2), MC_ERR_PASSWORD);
	ck_assert_int_eq(mc_seckey_load(ctx, sec, pw_ok, "wrong", &sk2), MC_ERR_PASSWORD);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "wrong password"));
	/* a callback that gives up: one message naming the key, and nothing of what it
	 * left in the buffer, which may be (part of) a password */
	ck_assert_int_eq(mc_seckey_load(ctx, sec, pw_none, NULL, &sk2), MC_ERR_PASSWORD);
	ck_assert_str_eq(strrchr(mc_ctx_error(ctx), '/'), "/e.key: no password given");
	ck_assert_int_eq(mc_seckey_load(ctx, sec, pw_none, "s3cre", &sk2), MC_ERR_PASSWORD);
	ck_assert_str_eq(strrchr(mc_ctx_error(ctx), '/'), "/e.key: no password given");
	ck_assert_int_eq(mc_seckey_load(ctx, sec, pw_ok, "s3cret", &sk2), MC_OK);
	ck_assert_int_eq(memcmp(sk2->sk, sk->sk, 64), 0);
	mc_seckey_free(sk);
	mc_seckey_free(sk2);
	mc_pubkey_free(pk);
}
END_TEST

START_TEST(malformed_key_files)
{
	char path[4096];
	mc_pubkey *pk;
	mc_seckey *sk;

	snprintf(path, sizeof path, "%s/bad.pub", dir);
	spit(path, "untrusted comment: x\nRWQAAAAA\n", 30);
	ck_assert_int_eq(mc_pubkey_load(ctx, path, &pk), MC_ERR_KEYFILE);
	spit(path, "no comment\n", 11);
	ck_assert_int_eq(mc_pubkey_load(ctx, path, &pk), MC_ERR_KEYFILE);
	ck_assert_int_eq(mc_seckey_load(ctx, path, NULL, NULL, &sk), MC_ERR_KEYFILE);
	snprintf(path, sizeof path, "%s/none", dir);
	ck_assert_int_eq(mc_pubkey_load(ctx, path, &pk), MC_ERR_IO);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "none"));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("minisign");
	TCase *tc = tcase_create("keys");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, keys_round_trip_and_sign);
	tcase_add_test(tc, signature_text_canonical);
	tcase_add_test(tc, trusted_comment_rules);
	tcase_add_test(tc, encrypted_key);
	tcase_add_test(tc, malformed_key_files);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
