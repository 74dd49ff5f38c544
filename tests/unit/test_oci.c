/* test_oci.c - registry references parsed by the distribution spec's rules, the
 * challenges of a registry's 401 answers, and credentials found where podman and
 * docker keep them, in their order. */
#include "util.h"

#include "oci/oci.h"

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

START_TEST(references)
{
	struct mc_ref r;
	static const char *const bad[] = {
		"oci://", "oci://host", "oci:///repo", "oci://host/", "oci://host/Repo",
		"oci://host/repo:", "oci://host/repo:-tag", "oci://host/re..po", "oci://host/repo_",
		"oci://host/repo@sha256:abc", "oci://host/repo@sha512:" "0000000000000000000000000000000000000000000000000000000000000000",
		"oci://host/repo@sha256:" "000000000000000000000000000000000000000000000000000000000000000G",
		"oci://ho st/repo", "oci://host:/repo", "oci://host:123456/repo", "oci://[::1/repo",
		"oci://host/a//b", "oci://host/a/../b", "http://host/repo", "oci://-host/repo",
		"oci://ho\x15st/repo", "oci://ho\x10st/repo", "oci://ho\x19st:5000/repo"};
	size_t i;

	ck_assert_int_eq(mc__ref_parse(ctx, "oci://registry.example.com/caches/llama", &r), MC_OK);
	ck_assert_str_eq(r.host, "registry.example.com");
	ck_assert_str_eq(r.repo, "caches/llama");
	ck_assert_str_eq(r.tag, "latest");
	ck_assert_str_eq(r.digest, "");
	ck_assert_int_eq(r.loopback, 0);

	ck_assert_int_eq(mc__ref_parse(ctx, "oci://127.0.0.1:5000/a_b/c__d/e--f.g:V1.0-rc_1", &r),
			 MC_OK);
	ck_assert_str_eq(r.host, "127.0.0.1:5000");
	ck_assert_str_eq(r.repo, "a_b/c__d/e--f.g");
	ck_assert_str_eq(r.tag, "V1.0-rc_1");
	ck_assert_int_eq(r.loopback, 1);

	ck_assert_int_eq(mc__ref_parse(ctx, "oci://localhost:5000/x@sha256:"
				       "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", &r), MC_OK);
	ck_assert_str_eq(r.tag, "");
	ck_assert_str_eq(r.digest, MC_OCI_EMPTY_DIGEST);
	ck_assert_int_eq(r.loopback, 1);

	ck_assert_int_eq(mc__ref_parse(ctx, "oci://[::1]:5000/x:t@sha256:"
				       "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", &r), MC_OK);
	ck_assert_str_eq(r.tag, "t");
	ck_assert_str_eq(r.host, "[::1]:5000");
	ck_assert_int_eq(r.loopback, 1);

	ck_assert_int_eq(mc__ref_parse(ctx, "oci://127.example.com/x", &r), MC_OK);
	ck_assert_int_eq(r.loopback, 0); /* a name that starts with 127. is no address */

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(mc__ref_parse(ctx, bad[i], &r) == MC_ERR_INVALID, "%s taken", bad[i]);
		ck_assert_msg(strstr(mc_ctx_error(ctx), "not a registry reference") != NULL, "%s: %s",
			      bad[i], mc_ctx_error(ctx));
	}
	ck_assert_int_eq(mc_is_reference("oci://x/y"), 1);
	ck_assert_int_eq(mc_is_reference("./oci://x"), 0);
	ck_assert_int_eq(mc_is_reference(NULL), 0);
}
END_TEST

/* A registry's Location made absolute against the URL it answered. */
START_TEST(locations)
{
	static const char *const cases[][3] = {
		{"http://127.0.0.1:5000/v2/r/blobs/uploads/", "/v2/r/blobs/uploads/u?_state=x",
		 "http://127.0.0.1:5000/v2/r/blobs/uploads/u?_state=x"},
		{"https://h/v2/r/blobs/uploads/", "u1?s=1", "https://h/v2/r/blobs/uploads/u1?s=1"},
		{"https://h/v2/r/blobs/uploads/?x=1", "u1", "https://h/v2/r/blobs/uploads/u1"},
		{"https://h/a/b?x=1", "c", "https://h/a/c"},
		{"https://h", "a", "https://h/a"},
		{"https://h:443/v2/", "//other:5000/p", "https://other:5000/p"},
		{"https://h/v2/", "https://s3.example.com/b?sig=1", "https://s3.example.com/b?sig=1"},
		{"https://h/v2/x?a=1", "?q=1", "https://h/v2/x?q=1"},
		{"https://h/v2/x?a=1", "", "https://h/v2/x"},
		{"https://h/v2/x", "../y", "https://h/v2/../y"}};
	char out[64];
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_int_eq(mc__url_join(cases[i][0], cases[i][1], out, sizeof out), 0);
		ck_assert_str_eq(out, cases[i][2]);
	}
	ck_assert_int_eq(mc__url_join("https://h/v2/", "a-location-longer-than-the-room-left", out, 40),
			 -1);
}
END_TEST

START_TEST(challenges)
{
	struct mc_challenge c;

	ck_assert_int_eq(mc__challenge_parse(ctx, "r", "Bearer realm=\"https://auth.example.com/"
					     "token\",service=\"registry.example.com\",scope=\"repository:"
					     "caches/llama:pull,push\"", &c), MC_OK);
	ck_assert_int_eq(c.bearer, 1);
	ck_assert_str_eq(c.realm, "https://auth.example.com/token");
	ck_assert_str_eq(c.service, "registry.example.com");
	ck_assert_str_eq(c.scope, "repository:caches/llama:pull,push");

	ck_assert_int_eq(mc__challenge_parse(ctx, "r", "Bearer scope=\"a,b\", realm=https://t/x", &c),
			 MC_OK);
	ck_assert_str_eq(c.realm, "https://t/x");
	ck_assert_str_eq(c.scope, "a,b");
	ck_assert_str_eq(c.service, "");

	ck_assert_int_eq(mc__challenge_parse(ctx, "r", "Basic realm=\"Registry Realm\"", &c), MC_OK);
	ck_assert_int_eq(c.bearer, 0);
	ck_assert_str_eq(c.realm, "Registry Realm");

	ck_assert_int_eq(mc__challenge_parse(ctx, "oci://h/r", "Negotiate", &c), MC_ERR_REMOTE);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "oci://h/r: the registry asks"));
	ck_assert_int_eq(mc__challenge_parse(ctx, "r", "Bearer service=x", &c), MC_ERR_REMOTE);
	ck_assert_int_eq(mc__challenge_parse(ctx, "r", "", &c), MC_ERR_REMOTE);
}
END_TEST

/* Writes text to path. */
static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(credentials)
{
	char *dir = scratch("oci-creds"), p[4096], q[4096], *user, *secret;
	struct mc_ref r;
	int identity;

	setenv("HOME", dir, 1);
	unsetenv("REGISTRY_AUTH_FILE");
	unsetenv("MEGACACHE_REGISTRY_USER");
	unsetenv("MEGACACHE_REGISTRY_PASSWORD");
	snprintf(p, sizeof p, "%s/run", dir);
	setenv("XDG_RUNTIME_DIR", p, 1);
	ck_assert_int_eq(mc__ref_parse(ctx, "oci://reg.example.com:5000/x", &r), MC_OK);

	/* nothing anywhere: anonymous */
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_ptr_null(user);

	/* docker's file, an https:// key with a path, as docker login writes it */
	snprintf(p, sizeof p, "%s/.docker", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/.docker/config.json", dir);
	put(p, "{\"auths\": {\"other.example.com\": {\"auth\": \"b3RoZXI6eA==\"}, "
	       "\"https://reg.example.com:5000/v1/\": {\"auth\": \"ZG9ja2VyOnB3OmQ=\"}}}");
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(user, "docker");
	ck_assert_str_eq(secret, "pw:d"); /* a colon in the password stays */
	ck_assert_int_eq(identity, 0);
	mc__secret_free(user);
	mc__secret_free(secret);

	/* podman's, earlier in the order, with an identity token */
	snprintf(q, sizeof q, "%s/run", dir);
	mkdir(q, 0700);
	snprintf(q, sizeof q, "%s/run/containers", dir);
	mkdir(q, 0700);
	snprintf(q, sizeof q, "%s/run/containers/auth.json", dir);
	put(q, "{\"auths\": {\"reg.example.com:5000\": {\"identitytoken\": \"tok\"}}}");
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(secret, "tok");
	ck_assert_int_eq(identity, 1);
	mc__secret_free(user);
	mc__secret_free(secret);

	/* REGISTRY_AUTH_FILE first of all; one that does not name the host is passed by */
	snprintf(p, sizeof p, "%s/auth.json", dir);
	put(p, "{\"auths\": {\"reg.example.com\": {\"auth\": \"eDp5\"}}}");
	setenv("REGISTRY_AUTH_FILE", p, 1);
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(secret, "tok"); /* reg.example.com is another host than :5000 */
	mc__secret_free(user);
	mc__secret_free(secret);
	put(p, "{\"auths\": {\"reg.example.com:5000\": {\"auth\": \"eDp5\"}}}");
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(user, "x");
	ck_assert_str_eq(secret, "y");
	mc__secret_free(user);
	mc__secret_free(secret);

	/* the environment before the files; a password alone is a token */
	setenv("MEGACACHE_REGISTRY_PASSWORD", "envtok", 1);
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(secret, "envtok");
	ck_assert_int_eq(identity, 1);
	mc__secret_free(user);
	mc__secret_free(secret);
	setenv("MEGACACHE_REGISTRY_USER", "envuser", 1);
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_OK);
	ck_assert_str_eq(user, "envuser");
	ck_assert_int_eq(identity, 0);
	mc__secret_free(user);
	mc__secret_free(secret);
	unsetenv("MEGACACHE_REGISTRY_USER");
	unsetenv("MEGACACHE_REGISTRY_PASSWORD");

	/* a helper not on PATH: said, naming it and the file */
	put(p, "{\"credHelpers\": {\"reg.example.com:5000\": \"mc-no-such-helper\"}}");
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_ERR_UNSUPPORTED);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "docker-credential-mc-no-such-helper"));
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), p));

	/* bad base64: said, naming the file, no secret in the message */
	put(p, "{\"auths\": {\"reg.example.com:5000\": {\"auth\": \"c2VjcmV0LW5vLWNvbG9u\"}}}");
	ck_assert_int_eq(mc__creds_find(ctx, &r, &user, &secret, &identity), MC_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), p));
	ck_assert_ptr_null(strstr(mc_ctx_error(ctx), "secret-no-colon"));
	unsetenv("REGISTRY_AUTH_FILE");
	unsetenv("XDG_RUNTIME_DIR");
	free(dir);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("oci");
	TCase *tc = tcase_create("parse");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, references);
	tcase_add_test(tc, locations);
	tcase_add_test(tc, challenges);
	tcase_add_test(tc, credentials);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
