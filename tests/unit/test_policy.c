/* test_policy.c - the trust policy judged on facts in memory, without a bundle file. */
#include "util.h"

#include <sodium.h>

#define PATH "b.mcache"

static mc_ctx *ctx;
static mc_seckey *sk1, *sk2;
static mc_pubkey *pk1, *pk2;
static struct mc_policy pol;
static unsigned char prehash[MC_SIG_PREHASH];

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
	ck_assert_int_eq(mc_keygen(ctx, &sk1, &pk1), MC_OK);
	ck_assert_int_eq(mc_keygen(ctx, &sk2, &pk2), MC_OK);
	mc__sig_prehash((const unsigned char *)"manifest", 8, prehash);
	mc__policy_init(&pol);
}

static void
teardown(void)
{
	mc__policy_clear(&pol);
	mc_seckey_free(sk1);
	mc_seckey_free(sk2);
	mc_pubkey_free(pk1);
	mc_pubkey_free(pk2);
	mc_ctx_free(ctx);
}

/* Signs the test's prehash with sk. */
static void
sign(const mc_seckey *sk, struct mc_sig *sig)
{
	ck_assert_int_eq(mc__sig_make_prehashed(ctx, sk, prehash, "timestamp:1", sig), MC_OK);
}

/* Facts of a bundle of version 1 that never expires, with the n signatures sigs. */
static struct mc_policy_facts
facts(const struct mc_sig *const *sigs, size_t n)
{
	struct mc_policy_facts f = {.path = PATH, .prehash = prehash, .sigs = sigs, .nsigs = n,
				    .version = 1};
	return f;
}

/* Checks the facts: the code, and the message when it is an error. */
static void
expect(const struct mc_policy_facts *f, int code, const char *msg)
{
	ck_assert_int_eq(mc__policy_check(ctx, &pol, f), code);
	if (msg != NULL)
		ck_assert_str_eq(mc_ctx_error(ctx), msg);
}

START_TEST(threshold)
{
	struct mc_sig s1, s2;
	const struct mc_sig *both[] = {&s1, &s2};
	struct mc_policy_facts f;

	sign(sk1, &s1);
	sign(sk2, &s2);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk2), MC_OK);
	f = facts(both, 2);
	expect(&f, MC_OK, NULL);
	pol.threshold = 2;
	expect(&f, MC_OK, NULL);
	f = facts(both, 1);
	expect(&f, MC_ERR_THRESHOLD, PATH ": 1 valid trusted signature, 2 required");
	pol.threshold = 3;
	f = facts(both, 2);
	expect(&f, MC_ERR_THRESHOLD, PATH ": threshold 3 cannot be met: only 2 distinct trusted "
	       "keys given");
	mc__sig_clear(&s1);
	mc__sig_clear(&s2);
}
END_TEST

/* One Ed25519 key under two key ids signs twice: one signer. */
START_TEST(same_key_counts_once)
{
	struct mc_sig s1, s1b;
	const struct mc_sig *sigs[] = {&s1, &s1b};
	struct mc_pubkey alias = *pk1;
	unsigned char keynum[MC_KEYID_BYTES];
	struct mc_policy_facts f = facts(sigs, 2);

	memcpy(keynum, sk1->keynum, sizeof keynum);
	alias.keynum[0] ^= 1;
	mc__keyid_str(alias.keynum, alias.id);
	sign(sk1, &s1);
	memcpy(sk1->keynum, alias.keynum, sizeof keynum);
	sign(sk1, &s1b);
	memcpy(sk1->keynum, keynum, sizeof keynum);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, &alias), MC_OK);
	pol.threshold = 2;
	expect(&f, MC_ERR_THRESHOLD, PATH ": threshold 2 cannot be met: only 1 distinct trusted "
	       "key given");
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk2), MC_OK);
	expect(&f, MC_ERR_THRESHOLD, PATH ": 1 valid trusted signature, 2 required (one public "
	       "key under several key ids counts once)");
	pol.threshold = 1;
	expect(&f, MC_OK, NULL);
	mc__sig_clear(&s1);
	mc__sig_clear(&s1b);
}
END_TEST

START_TEST(trusting_keys)
{
	struct mc_pubkey other = *pk2;
	char msg[256];

	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	ck_assert_uint_eq(pol.ntrusted, 1);
	/* Another key under pk1's id. */
	memcpy(other.keynum, pk1->keynum, sizeof other.keynum);
	memcpy(other.id, pk1->id, sizeof other.id);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, &other), MC_ERR_INVALID);
	snprintf(msg, sizeof msg, "two different trusted keys share the key id %s", pk1->id);
	ck_assert_str_eq(mc_ctx_error(ctx), msg);
	ck_assert_uint_eq(pol.ntrusted, 1);
}
END_TEST

START_TEST(untrusted_and_unsigned)
{
	struct mc_sig s2, bad;
	const struct mc_sig *sigs[] = {&s2}, *badsigs[] = {&bad};
	struct mc_policy_facts f = facts(sigs, 1), unsigned_f = facts(NULL, 0);
	unsigned char other[MC_SIG_PREHASH];
	char msg[256];

	sign(sk2, &s2);
	expect(&f, MC_ERR_INVALID, PATH ": no trusted public key given");
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	snprintf(msg, sizeof msg, PATH ": no signature by a trusted key (signed by 1 untrusted "
		 "key, first %s)", pk2->id);
	expect(&f, MC_ERR_NO_SIGNATURE, msg);
	expect(&unsigned_f, MC_ERR_NO_SIGNATURE, PATH ": the bundle is not signed");
	/* A trusted key's signature over other bytes. */
	mc__sig_prehash((const unsigned char *)"other", 5, other);
	ck_assert_int_eq(mc__sig_make_prehashed(ctx, sk1, other, "timestamp:1", &bad), MC_OK);
	f = facts(badsigs, 1);
	snprintf(msg, sizeof msg, PATH ": the signature by trusted key %s does not verify", pk1->id);
	expect(&f, MC_ERR_BAD_SIGNATURE, msg);
	mc__sig_clear(&s2);
	mc__sig_clear(&bad);
}
END_TEST

START_TEST(expiry_and_version)
{
	struct mc_sig s1;
	const struct mc_sig *sigs[] = {&s1};
	struct mc_policy_facts f = facts(sigs, 1);

	sign(sk1, &s1);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	pol.have_now = 1;
	pol.now = 1795773599;
	f.expires = 1795773600; /* the times said as the tool prints them: ISO 8601, UTC */
	expect(&f, MC_OK, NULL);
	pol.now = 1795773600;
	expect(&f, MC_ERR_EXPIRED, PATH ": expired at 2026-11-27T10:00:00Z (now "
	       "2026-11-27T10:00:00Z)");
	f.expires = 0; /* never */
	expect(&f, MC_OK, NULL);
	pol.min_version = 5;
	f.version = 4;
	expect(&f, MC_ERR_ROLLBACK, PATH ": bundle version 4 is below the minimum 5");
	f.version = 5;
	expect(&f, MC_OK, NULL);
	mc__sig_clear(&s1);
}
END_TEST

START_TEST(required_labels)
{
	static const char *const keys[] = {"cuda", "torch"}, *const values[] = {"13.0", "2.11.0"};
	struct mc_sig s1;
	const struct mc_sig *sigs[] = {&s1};
	struct mc_policy_facts f = facts(sigs, 1);

	sign(sk1, &s1);
	ck_assert_int_eq(mc__policy_trust(ctx, &pol, pk1), MC_OK);
	f.label_keys = keys;
	f.label_values = values;
	f.nlabels = 2;
	ck_assert_int_eq(mc__policy_require_label(ctx, &pol, "cuda", "13.0"), MC_OK);
	expect(&f, MC_OK, NULL);
	ck_assert_int_eq(mc__policy_require_label(ctx, &pol, "torch", "2.10.0"), MC_OK);
	ck_assert_uint_eq(pol.nrequired, 2);
	ck_assert_str_eq(pol.req_keys[1], "torch");
	ck_assert_str_eq(pol.req_values[1], "2.10.0");
	expect(&f, MC_ERR_LABEL, PATH ": label torch is '2.11.0' in the bundle, '2.10.0' required");
	f.nlabels = 1;
	expect(&f, MC_ERR_LABEL, PATH ": label torch=2.10.0 is required; the bundle has no label "
	       "torch");
	mc__sig_clear(&s1);
}
END_TEST

/* Insecure: the signatures go unchecked, the rest of the policy holds. */
START_TEST(insecure)
{
	struct mc_policy_facts f = facts(NULL, 0);

	pol.insecure = 1;
	expect(&f, MC_OK, NULL);
	pol.have_now = 1;
	pol.now = 200;
	f.expires = 100;
	expect(&f, MC_ERR_EXPIRED, PATH ": expired at 1970-01-01T00:01:40Z (now "
	       "1970-01-01T00:03:20Z)");
	pol.insecure = 0;
	expect(&f, MC_ERR_INVALID, PATH ": no trusted public key given");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("check");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, threshold);
	tcase_add_test(tc, same_key_counts_once);
	tcase_add_test(tc, trusting_keys);
	tcase_add_test(tc, untrusted_and_unsigned);
	tcase_add_test(tc, expiry_and_version);
	tcase_add_test(tc, required_labels);
	tcase_add_test(tc, insecure);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
