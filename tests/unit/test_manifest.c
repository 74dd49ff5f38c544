/* test_manifest.c - the manifest: what the writer renders the reader accepts, and the
 * reader refuses what the writer would never produce. */
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

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OBJ(size) "\"objects\":[{\"hash\":\"" H64 "\",\"size\":" #size ",\"encoding\":\"none\",\"stored_size\":" #size ",\"stored_hash\":\"" H64 "\"}]"
#define NOOBJ "\"objects\":[]"
#define HEAD "{\"format\":\"megacache\",\"format_version\":1,\"created\":5,\"bundle_version\":3,"

static int
parse(const char *json, struct mc_manifest *m)
{
	return mc__manifest_parse(ctx, (const unsigned char *)json, strlen(json), m);
}

START_TEST(render_then_parse)
{
	struct mc_manifest m, back;
	struct mc_label lab = {"torch", "2.11.0"};
	struct mc_martifact a;
	struct mc_mobject ob;
	char *json;
	size_t len;

	memset(&m, 0, sizeof m);
	memset(&a, 0, sizeof a);
	a.type = "pgo";
	a.key = "job:0:";
	a.size = 7;
	memset(a.hash, 0xab, 32);
	mc__hex(a.hash, 32, a.hash_hex);
	m.created = 5;
	m.bundle_version = 3;
	m.expires = 99;
	m.labels = &lab;
	m.nlabels = 1;
	m.artifacts = &a;
	m.nartifacts = 1;
	memset(&ob, 0, sizeof ob);
	memcpy(ob.hash, a.hash, 32);
	memcpy(ob.hash_hex, a.hash_hex, 65);
	ob.size = 7;
	ob.encoding = MC_ENC_ZSTD;
	ob.stored_size = 5;
	memset(ob.stored_hash, 0xcd, 32);
	m.objects = &ob;
	m.nobjects = 1;
	ck_assert_int_eq(mc__manifest_render(ctx, &m, &json, &len), MC_OK);
	ck_assert_int_eq(mc__manifest_parse(ctx, (unsigned char *)json, len, &back), MC_OK);
	ck_assert_int_eq(back.created, 5);
	ck_assert_uint_eq(back.bundle_version, 3);
	ck_assert_int_eq(back.expires, 99);
	ck_assert_str_eq(back.labels[0].value, "2.11.0");
	ck_assert_str_eq(back.artifacts[0].key, "job:0:");
	ck_assert_uint_eq(back.nobjects, 1);
	ck_assert_uint_eq(back.objects[0].size, 7);
	ck_assert_uint_eq(back.objects[0].stored_size, 5);
	ck_assert_int_eq(back.objects[0].encoding, MC_ENC_ZSTD);
	mc__manifest_free(&back);
	free(json);
}
END_TEST

START_TEST(refusals)
{
	static const struct {
		const char *json, *why;
	} cases[] = {
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"extra\":1}", "unknown field 'extra'"},
		{HEAD "\"labels\":{}}", "lacks field 'artifacts'"},
		{"{\"format\":\"other\",\"format_version\":1,\"created\":5,\"bundle_version\":3,\"labels\":{},\"artifacts\":[]," NOOBJ "}", "not 'megacache'"},
		{HEAD "\"labels\":{\"b\":\"1\",\"a\":\"2\"},\"artifacts\":[]," NOOBJ "}", "ascending"},
		{HEAD "\"labels\":{\"bad key\":\"1\"},\"artifacts\":[]," NOOBJ "}", "label name"},
		{HEAD "\"labels\":{\"k\":\"line\\nbreak\"},\"artifacts\":[]," NOOBJ "}", "printable"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"b\",\"size\":1,\"hash\":\"" H64 "\"},"
		      "{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"}]," OBJ(1) "}", "not sorted"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"},"
		      "{\"type\":\"pgo\",\"key\":\"b\",\"size\":2,\"hash\":\"" H64 "\"}]," OBJ(1) "}", "object table 1"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"ABC\"}]," OBJ(1) "}", "64 lower-case hex"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"Pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"}]," OBJ(1) "}", "[a-z0-9_]"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":\"1\",\"hash\":\"" H64 "\"}]," OBJ(1) "}", "not a number"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ "} ", "bytes after"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ", \"expires\":0}", "expires is 0"},
		{HEAD "\"labels\":{},\"artifacts\":[]," OBJ(1) "}", "no artifact uses it"},
		{HEAD "\"labels\":{},\"artifacts\":[],\"objects\":[{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"lz4\",\"stored_size\":1,\"stored_hash\":\"" H64 "\"}]}", "unknown encoding"},
		{HEAD "\"labels\":{},\"artifacts\":[],\"objects\":[{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"none\",\"stored_size\":2,\"stored_hash\":\"" H64 "\"}]}", "stored as is"},
		{HEAD "\"labels\":{},\"artifacts\":[", "not valid JSON"},
		/* The top level and the two tables are walked, not parsed as one tree. */
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"artifacts\":[]}", "field 'artifacts' twice"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"\\u0061rtifacts\":[]}", "field 'artifacts' twice"},
		{HEAD "\"labels\":{},\"artifacts\":{}," NOOBJ "}", "artifacts is not an array"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"objects\":[]}", "field 'objects' twice"},
		{HEAD "\"labels\":{},\"artifacts\":[],\"objects\":7}", "objects is not an array"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"},]," OBJ(1) "}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"} {}]," OBJ(1) "}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1 2,\"hash\":\"" H64 "\"}]," OBJ(1) "}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a]\",\"size\":1,\"hash\":\"" H64 "\"]," OBJ(1) "}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[],\"objects\":[,]}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",}", "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ, "not valid JSON"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ "}}", "bytes after"},
		{"[" HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ "}]", "manifest is not an object"},
		{"", "not valid JSON"},
	};
	struct mc_manifest m;
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = parse(cases[i].json, &m);
		ck_assert_msg(rc == MC_ERR_MANIFEST, "case %zu accepted (rc %d)", i, rc);
		ck_assert_msg(strstr(mc_ctx_error(ctx), cases[i].why) != NULL, "case %zu: '%s' lacks '%s'",
			      i, mc_ctx_error(ctx), cases[i].why);
	}
}
END_TEST

/* Whitespace anywhere between tokens and any member order are accepted; the tables
 * may come before or after what refers to them. */
START_TEST(order_and_space)
{
	static const char *const texts[] = {
		HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"}]," OBJ(1) "}",
		" \n{ \"objects\" :\t[ {\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"none\",\"stored_size\":1,\"stored_hash\":\"" H64 "\"} ] ,\r\n"
		" \"artifacts\" : [ { \"key\" : \"a\" , \"type\":\"pgo\",\"hash\":\"" H64 "\",\"size\":1 } ] , \"labels\":{ \"k\" : \"v]}\\\"\" },"
		"\"bundle_version\":3,\"created\":5,\"format_version\":1,\"format\":\"megacache\"}",
	};
	struct mc_manifest m;
	size_t i;

	for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		ck_assert_msg(parse(texts[i], &m) == MC_OK, "text %zu: %s", i, mc_ctx_error(ctx));
		ck_assert_uint_eq(m.nartifacts, 1);
		ck_assert_str_eq(m.artifacts[0].type, "pgo");
		ck_assert_str_eq(m.artifacts[0].key, "a");
		ck_assert_uint_eq(m.artifacts[0].object, 0);
		ck_assert_uint_eq(m.nobjects, 1);
		ck_assert_uint_eq(m.objects[0].size, 1);
		ck_assert_int_eq(m.objects[0].encoding, MC_ENC_NONE);
		ck_assert_uint_eq(m.bundle_version, 3);
		if (i == 1) {
			ck_assert_uint_eq(m.nlabels, 1);
			ck_assert_str_eq(m.labels[0].value, "v]}\"");
		}
		mc__manifest_free(&m);
	}
}
END_TEST

START_TEST(caps)
{
	struct mc_manifest m;
	const char *two = HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":10,\"hash\":\"" H64
			  "\"},{\"type\":\"pgo\",\"key\":\"b\",\"size\":10,\"hash\":\"" H64 "\"}]," OBJ(10) "}";

	ck_assert_int_eq(parse(two, &m), MC_OK);
	mc__manifest_free(&m);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACTS, 1), MC_OK);
	ck_assert_int_eq(parse(two, &m), MC_ERR_LIMIT);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACTS, 10), MC_OK);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACT_BYTES, 9), MC_OK);
	ck_assert_int_eq(parse(two, &m), MC_ERR_LIMIT);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACT_BYTES, 10), MC_OK);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_TOTAL_BYTES, 19), MC_OK);
	ck_assert_int_eq(parse(two, &m), MC_ERR_LIMIT);
	ck_assert_int_eq(mc_ctx_set_limit(ctx, MC_LIMIT_MANIFEST_BYTES, 20), MC_OK);
	ck_assert_int_eq(parse(two, &m), MC_ERR_LIMIT);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "over the cap"));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc = tcase_create("json");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, render_then_parse);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, order_and_space);
	tcase_add_test(tc, caps);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
