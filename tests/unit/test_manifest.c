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

/* The text parsed from a file, fed to the whole-text checks in pieces of `piece`
 * bytes, as the reader does with large manifests. */
static int
parse_from_file(const char *json, size_t len, size_t piece, struct mc_manifest *m)
{
	struct mc_mcheck c;
	size_t at;
	int fd, rc;

	fd = mc__open_temp_anon(ctx);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(mc__write_all(fd, json, len), 0);
	mc__mcheck_init(&c);
	for (at = 0; at < len; at += piece)
		mc__mcheck_feed(&c, (const unsigned char *)json + at, len - at < piece ? len - at : piece);
	rc = mc__manifest_parse_fd(ctx, fd, len, &c, m);
	close(fd);
	return rc;
}

static void
same_artifact(const struct mc_martifact *x, const struct mc_martifact *y)
{
	ck_assert_str_eq(x->type, y->type);
	ck_assert_str_eq(x->key, y->key);
	ck_assert_uint_eq(x->size, y->size);
	ck_assert_uint_eq(x->object, y->object);
	ck_assert_int_eq(x->sha256 != NULL, y->sha256 != NULL);
	if (x->sha256 != NULL)
		ck_assert_int_eq(memcmp(x->sha256, y->sha256, 32), 0);
	ck_assert_int_eq(x->executable, y->executable);
}

/* Parses from memory, and from a file in pieces of several sizes: every way must give
 * the same outcome and message. */
static int
parse_len(const char *json, size_t len, struct mc_manifest *m)
{
	static const size_t pieces[] = {1, 2, 3, 5, 4096};
	char want[MC_ERRBUF];
	size_t i;
	int rc = mc__manifest_parse(ctx, (const unsigned char *)json, len, m);

	snprintf(want, sizeof want, "%s", rc == MC_OK ? "" : mc_ctx_error(ctx));
	for (i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
		struct mc_manifest f;
		int frc;
		/* every other way with the object table in a temp file too */
		ctx->objects_in_memory = i % 2 == 1 ? 0 : MC_OBJECTS_IN_MEMORY;
		frc = parse_from_file(json, len, pieces[i], &f);
		ctx->objects_in_memory = MC_OBJECTS_IN_MEMORY;
		ck_assert_msg(frc == rc, "pieces of %zu: rc %d, from memory %d", pieces[i], frc, rc);
		if (rc != MC_OK) {
			ck_assert_str_eq(mc_ctx_error(ctx), want);
			continue;
		}
		ck_assert_uint_eq(f.nartifacts, m->nartifacts);
		ck_assert_uint_eq(f.nobjects, m->nobjects);
		/* Read from a file, the tables are kept in temp files; their records are the
		 * ones parsed from memory. */
		ck_assert_int_eq(f.spilled, 1);
		ck_assert_int_eq(f.ospilled, i % 2 == 1 && f.nobjects > 0);
		ck_assert_int_eq(m->spilled, 0);
		ck_assert_int_eq(m->ospilled, 0);
		for (size_t k = 0; k < f.nobjects; k++) {
			struct mc_mobject o;
			ck_assert_int_eq(mc__mobjects(ctx, &f, k, 1, &o), MC_OK);
			ck_assert_int_eq(memcmp(o.hash, m->objects[k].hash, 32), 0);
			ck_assert_int_eq(memcmp(o.stored_hash, m->objects[k].stored_hash, 32), 0);
			ck_assert_uint_eq(o.size, m->objects[k].size);
			ck_assert_uint_eq(o.stored_size, m->objects[k].stored_size);
			ck_assert_int_eq(o.encoding, m->objects[k].encoding);
		}
		struct mc_acur cf, cm;
		mc__acur_init(&cf, ctx, &f, mc__find_type);
		mc__acur_init(&cm, ctx, m, mc__find_type);
		/* Forwards, then from the end backwards: each batch is read again. */
		for (size_t n = 0; n < 2 * f.nartifacts; n++) {
			size_t k = n < f.nartifacts ? n : 2 * f.nartifacts - 1 - n;
			const struct mc_martifact *x, *y;
			ck_assert_int_eq(mc__acur_get(&cf, k, &x), MC_OK);
			ck_assert_int_eq(mc__acur_get(&cm, k, &y), MC_OK);
			same_artifact(x, y);
			ck_assert_ptr_eq(x->handler, y->handler);
		}
		mc__acur_free(&cf);
		mc__acur_free(&cm);
		mc__manifest_free(&f);
	}
	if (rc != MC_OK)
		mc__err(ctx, rc, "%s", want);
	return rc;
}

static int
parse(const char *json, struct mc_manifest *m)
{
	return parse_len(json, strlen(json), m);
}

START_TEST(render_then_parse)
{
	struct mc_manifest m, back;
	struct mc_label lab = {"torch", "2.11.0"};
	struct mc_martifact a;
	struct mc_mobject ob;
	char *json, key[32];
	size_t i, len;

	memset(&m, 0, sizeof m);
	memset(&a, 0, sizeof a);
	a.type = "pgo";
	a.key = "job:0:";
	a.size = 7;
	m.created = 5;
	m.bundle_version = 3;
	m.expires = 99;
	m.labels = &lab;
	m.nlabels = 1;
	m.artifacts = &a;
	m.nartifacts = 1;
	memset(&ob, 0, sizeof ob);
	memset(ob.hash, 0xab, 32);
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
	/* A key of every control character: cJSON prints each as an escape, and the writer
	 * puts no whitespace between tokens, so no raw control byte reaches the text. */
	for (i = 0; i < sizeof key - 1; i++)
		key[i] = (char)(i + 1);
	key[sizeof key - 1] = '\0';
	a.key = key;
	ck_assert_int_eq(mc__manifest_render(ctx, &m, &json, &len), MC_OK);
	for (i = 0; i < len; i++)
		ck_assert_msg((unsigned char)json[i] >= 0x20, "byte 0x%02x at %zu", json[i], i);
	ck_assert_ptr_nonnull(strstr(json, "\"key\":\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007"
					  "\\b\\t\\n\\u000b\\f\\r\\u000e"));
	ck_assert_int_eq(parse_len(json, len, &back), MC_OK);
	ck_assert_str_eq(back.artifacts[0].key, key);
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
		{HEAD "\"labels\":{\"k\":\"line\\nbreak\"},\"artifacts\":[]," NOOBJ "}", "label 'k' contains control character U+000A"},
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
		/* The checks on the whole text, which the reader makes on pieces of it. */
		{HEAD "\"labels\":{\"k\":\"\xc3\"},\"artifacts\":[]," NOOBJ "}", "not valid UTF-8"},
		{HEAD "\"labels\":{\"k\":\"\xe2\x82\"},\"artifacts\":[]," NOOBJ "}", "not valid UTF-8"},
		{HEAD "\"labels\":{\"k\":\"\xed\xa0\x80\"},\"artifacts\":[]," NOOBJ "}", "not valid UTF-8"},
		{HEAD "\"labels\":{\"k\":\"\xf0\x9f\x98\"},\"artifacts\":[]," NOOBJ "}", "not valid UTF-8"},
		{HEAD "\"labels\":{\"k\":\"\x80\"},\"artifacts\":[]," NOOBJ "}", "not valid UTF-8"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ "}\xf0\x9f", "not valid UTF-8"},
		{HEAD "\"labels\":{\"k\":\"a\\u0000\"},\"artifacts\":[]," NOOBJ "}", "escaped NUL"},
		{HEAD "\"labels\":{\"k\":\"\\u000\"},\"artifacts\":[]," NOOBJ "}", "not valid JSON"},
		/* An escaped backslash then the text u0000 is no escaped NUL. */
		{HEAD "\"labels\":{\"k\":\"a\\\\u0000\"},\"artifacts\":[]," NOOBJ ",\"expires\":0}", "expires is 0"},
		{HEAD "\"labels\":{\"k\":[[[[[[1]]]]]]},\"artifacts\":[]," NOOBJ "}", "nests deeper"},
		{HEAD "\"labels\":{\"k\":\"\\\"[[[[[[\"},\"artifacts\":[]," NOOBJ ",\"expires\":0}", "expires is 0"},
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

/* An artifact's executable member (SPEC.md section 3.2): written last and only when
 * true; read as true when present, refused as false or anything but a boolean. */
START_TEST(executable_member)
{
#define ART(extra) HEAD "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"" extra "}]," OBJ(1) "}"
	static const struct {
		const char *json, *why;
	} bad[] = {
		{ART(",\"executable\":false"), "artifacts[0].executable is false (a writer leaves the member out instead)"},
		{ART(",\"executable\":1"), "artifacts[0].executable is not a boolean"},
		{ART(",\"executable\":\"true\""), "artifacts[0].executable is not a boolean"},
		{ART(",\"executable\":null"), "artifacts[0].executable is not a boolean"},
		{ART(",\"executable\":true,\"executable\":true"), "field 'executable' twice"},
		{ART(",\"executable\":TRUE"), "not valid JSON"},
	};
	struct mc_manifest m, back;
	struct mc_martifact a[2];
	struct mc_mobject ob;
	unsigned char sha[32];
	char *json;
	size_t i, len;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(parse(bad[i].json, &m) == MC_ERR_MANIFEST, "case %zu accepted", i);
		ck_assert_msg(strstr(mc_ctx_error(ctx), bad[i].why) != NULL, "case %zu: '%s' lacks '%s'",
			      i, mc_ctx_error(ctx), bad[i].why);
	}
	/* Any place among the members, any spacing; absent is not executable. */
	ck_assert_int_eq(parse(HEAD "\"labels\":{},\"artifacts\":[{\"executable\" : true ,\"type\":\"pgo\","
			       "\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "\"}]," OBJ(1) "}", &m), MC_OK);
	ck_assert_int_eq(m.artifacts[0].executable, 1);
	mc__manifest_free(&m);
	ck_assert_int_eq(parse(ART(""), &m), MC_OK);
	ck_assert_int_eq(m.artifacts[0].executable, 0);
	mc__manifest_free(&m);
#undef ART
	/* Rendered after sha256, for the executable artifact only; both name one object. */
	memset(&m, 0, sizeof m);
	memset(a, 0, sizeof a);
	memset(&ob, 0, sizeof ob);
	memset(sha, 0x11, sizeof sha);
	memset(ob.hash, 0xab, 32);
	memcpy(ob.stored_hash, ob.hash, 32);
	ob.size = ob.stored_size = 7;
	a[0].type = a[1].type = "inductor";
	a[0].key = "fa";
	a[1].key = "fb";
	a[0].size = a[1].size = 7;
	a[0].sha256 = a[1].sha256 = sha;
	a[1].executable = 1;
	m.artifacts = a;
	m.nartifacts = 2;
	m.objects = &ob;
	m.nobjects = 1;
	ck_assert_int_eq(mc__manifest_render(ctx, &m, &json, &len), MC_OK);
	ck_assert_ptr_nonnull(strstr(json, "\"key\":\"fb\",\"size\":7,\"hash\":\"abab"));
	ck_assert_ptr_nonnull(strstr(json, "1111\",\"executable\":true}]"));
	ck_assert_ptr_null(strstr(strstr(json, "executable") + 1, "executable"));
	ck_assert_int_eq(parse_len(json, len, &back), MC_OK);
	ck_assert_int_eq(back.artifacts[0].executable, 0);
	ck_assert_int_eq(back.artifacts[1].executable, 1);
	ck_assert_uint_eq(back.artifacts[0].object, back.artifacts[1].object);
	mc__manifest_free(&back);
	free(json);
}
END_TEST

/* Whitespace anywhere between tokens and any member order are accepted; the tables
 * may come before or after what refers to them. */
/* A label value holds no character that changes how the text around it is shown
 * (SPEC.md section 3.1), written as UTF-8 or as an escape; its neighbours are fine. */
START_TEST(label_characters)
{
	static const struct {
		const char *value, *cp;
	} refused[] = {
		{"a\\u001bb", "U+001B"}, {"\\u0000x", NULL},
		{"\x7f", "U+007F"}, {"\xc2\x80", "U+0080"}, {"x\xc2\x85", "U+0085"},
		{"\\u009f", "U+009F"}, {"\xd8\x9c", "U+061C"}, {"\xe2\x80\x8e", "U+200E"},
		{"\xe2\x80\x8f", "U+200F"}, {"\xe2\x80\xa8", "U+2028"}, {"\\u2029", "U+2029"},
		{"\xe2\x80\xaa", "U+202A"}, {"abc\xe2\x80\xae" "cba", "U+202E"}, {"\\u202E", "U+202E"},
		{"\xe2\x81\xa6", "U+2066"}, {"\xe2\x81\xa9", "U+2069"},
	};
	static const char *const accepted[] = {
		"\xc2\xa0", "\xd8\x9b", "\xd8\x9d", "\xe2\x80\x8d", "\xe2\x80\xa7", "\xe2\x80\xaf",
		"\xe2\x81\xa5", "\xe2\x81\xaa", "~ \\u00e9t\\u00e9", "\xf0\x9f\x98\x80",
	};
	struct mc_manifest m;
	char json[256], want[64];
	size_t i;

	for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		snprintf(json, sizeof json, HEAD "\"labels\":{\"k\":\"%s\"},\"artifacts\":[]," NOOBJ "}",
			 refused[i].value);
		ck_assert_int_eq(parse(json, &m), MC_ERR_MANIFEST);
		if (refused[i].cp == NULL) /* the escaped NUL has a check of its own */
			continue;
		snprintf(want, sizeof want, "manifest: label 'k' contains control character %s",
			 refused[i].cp);
		ck_assert_str_eq(mc_ctx_error(ctx), want);
	}
	for (i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
		snprintf(json, sizeof json, HEAD "\"labels\":{\"k\":\"%s\"},\"artifacts\":[]," NOOBJ "}",
			 accepted[i]);
		ck_assert_msg(parse(json, &m) == MC_OK, "value %zu: %s", i, mc_ctx_error(ctx));
		mc__manifest_free(&m);
	}
	snprintf(json, sizeof json, HEAD "\"labels\":{\"k\":7},\"artifacts\":[]," NOOBJ "}");
	ck_assert_int_eq(parse(json, &m), MC_ERR_MANIFEST);
	ck_assert_str_eq(mc_ctx_error(ctx), "manifest: label 'k' is not a string");
}
END_TEST

/* The one form of an integer field (SPEC.md section 3): anything else is refused,
 * naming the field; a number RFC 8259 does not allow is refused wherever it is. */
START_TEST(number_forms)
{
#define ART(size) "\"artifacts\":[{\"type\":\"pgo\",\"key\":\"a\",\"size\":" size ",\"hash\":\"" H64 "\"}]"
#define TOP(c, b) "{\"format\":\"megacache\",\"format_version\":1,\"created\":" c ",\"bundle_version\":" b ","
	static const struct {
		const char *json, *why;
	} cases[] = {
		{TOP("5", "-0") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest: manifest.bundle_version is not an integer in plain decimal digits ('-0')"},
		{HEAD "\"labels\":{}," ART("1.0") "," OBJ(1) "}",
		 "manifest: artifacts[0].size is not an integer in plain decimal digits ('1.0')"},
		{HEAD "\"labels\":{}," ART("1") "," OBJ(1e0) "}",
		 "manifest: objects[0].size is not an integer in plain decimal digits ('1e0')"},
		{HEAD "\"labels\":{}," ART("1") ",\"objects\":[{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":"
		 "\"none\",\"stored_size\":0.1E1,\"stored_hash\":\"" H64 "\"}]}",
		 "manifest: objects[0].stored_size is not an integer in plain decimal digits ('0.1E1')"},
		{TOP("5E0", "3") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest: manifest.created is not an integer in plain decimal digits ('5E0')"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"expires\":1e+2}",
		 "manifest: manifest.expires is not an integer in plain decimal digits ('1e+2')"},
		{HEAD "\"labels\":{}," ART("1") "," OBJ(1) ",\"torch_blob\":{\"groups\":[{\"type\":\"pgo\","
		 "\"entries\":[{\"key\":\"a\",\"size\":10e-1,\"hash\":\"" H64 "\"}]}]}}",
		 "manifest: torch_blob entry.size is not an integer in plain decimal digits ('10e-1')"},
		{TOP("100000000000000000000000000000e-29", "3") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest: manifest.created is not an integer in plain decimal digits "
		 "('100000000000000000000000')"},
		/* A value out of range or with a fraction is refused as before. */
		{TOP("5", "-1") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest: manifest.bundle_version is not an integer in 0..2^53-1"},
		{TOP("5", "9007199254740992") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest: manifest.bundle_version is not an integer in 0..2^53-1"},
		/* Not JSON at all, wherever it is. */
		{HEAD "\"labels\":{}," ART("01") "," OBJ(1) "}",
		 "manifest is not valid JSON: the number '01' at byte 128 has a leading zero"},
		{TOP("00", "3") "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: the number '00' at byte 51 has a leading zero"},
		{HEAD "\"labels\":{\"k\":07},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: the number '07' at byte 86 has a leading zero"},
		{HEAD "\"labels\":{\"k\":[-01.5]},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: the number '-01.5' at byte 87 has a leading zero"},
		{HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ ",\"x\":{\"y\":[\"07\",00]}}",
		 "manifest is not valid JSON: the number '00' at byte 127 has a leading zero"},
		{HEAD "\"labels\":{}," ART("1.") "," OBJ(1) "}",
		 "manifest is not valid JSON: '1.' at byte 128 is not a JSON number"},
		{HEAD "\"labels\":{\"k\":-.5},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: '-.5' at byte 86 is not a JSON number"},
		{HEAD "\"labels\":{\"k\":1.e5},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: '1.e5' at byte 86 is not a JSON number"},
		{TOP("+1", "3") "\"labels\":{},\"artifacts\":[]," NOOBJ "}", "manifest is not valid JSON"},
	};
	struct mc_manifest m, back;
	struct mc_label lab = {"k", "07 1.0 -0 \"1e5\""};
	char *json;
	size_t i, len;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_msg(parse(cases[i].json, &m) == MC_ERR_MANIFEST, "case %zu accepted", i);
		ck_assert_str_eq(mc_ctx_error(ctx), cases[i].why);
	}
	/* The largest values, and numbers inside strings, which are text. */
	ck_assert_int_eq(parse(TOP("9007199254740991", "0") "\"labels\":{\"k\":\"07 1.0 -0\\\"1e5\"},"
			       "\"artifacts\":[]," NOOBJ "}", &m), MC_OK);
	ck_assert_int_eq(m.created, 9007199254740991ll);
	ck_assert_uint_eq(m.bundle_version, 0);
	mc__manifest_free(&m);
	/* The writer gives every integer that form: printed by cJSON, 10^15 would be 1e+15. */
	memset(&m, 0, sizeof m);
	m.created = 9007199254740991ll;
	m.bundle_version = 1000000000000000ull;
	m.expires = 120000000000000000ll / 100;
	m.labels = &lab;
	m.nlabels = 1;
	ck_assert_int_eq(mc__manifest_render(ctx, &m, &json, &len), MC_OK);
	ck_assert_str_eq(json, "{\"format\":\"megacache\",\"format_version\":1,\"created\":9007199254740991,"
			 "\"bundle_version\":1000000000000000,\"expires\":1200000000000000,\"labels\":{\"k\":"
			 "\"07 1.0 -0 \\\"1e5\\\"\"},\"artifacts\":[],\"objects\":[]}");
	ck_assert_int_eq(parse_len(json, len, &back), MC_OK);
	ck_assert_uint_eq(back.bundle_version, 1000000000000000ull);
	ck_assert_int_eq(back.expires, 1200000000000000ll);
	mc__manifest_free(&back);
	free(json);
#undef ART
#undef TOP
}
END_TEST

/* Between tokens only space, tab, LF and CR; in a string no byte below 0x20 unescaped
 * (RFC 8259), though cJSON takes both. Refused as not JSON, naming the first such byte
 * and its offset, from memory and from a file in pieces alike. */
START_TEST(raw_controls)
{
#define ART(key) "\"artifacts\":[{\"type\":\"pgo\",\"key\":\"" key "\",\"size\":1,\"hash\":\"" H64 "\"}]"
	static const struct {
		const char *json, *why;
	} cases[] = {
		{HEAD "\"labels\":{\x0b\"k\"\x01:\x0c\"v\"},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: byte 0x0b between tokens at byte 82"},
		{HEAD "\"labels\":{}," ART("a\x1b[2Jb") "," OBJ(1) "}",
		 "manifest is not valid JSON: a raw control byte 0x1b inside a string at byte 119"},
		{"\x0c" HEAD "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: byte 0x0c between tokens at byte 0"},
		{"{\"format\":\"megacache\",\"format_version\":1,\"created\":\x1f" "5,\"bundle_version\":3,"
		 "\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: byte 0x1f between tokens at byte 51"},
		{HEAD "\"labels\":{}," ART("a") "," OBJ(1) "\x01}",
		 "manifest is not valid JSON: byte 0x01 between tokens at byte 417"},
		/* A byte order mark before a value, which cJSON skips (before one of more
		 * than a byte, parsed on its own). */
		{"{\"format\":\"megacache\",\"format_version\":1,\"created\":\xef\xbb\xbf" "1700000000,"
		 "\"bundle_version\":3,\"labels\":{},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: byte 0xef between tokens at byte 51"},
		/* After a backslash, an escaped backslash, an escaped quote. */
		{HEAD "\"labels\":{}," ART("a\\\x01") "," OBJ(1) "}",
		 "manifest is not valid JSON: a raw control byte 0x01 inside a string at byte 120"},
		{HEAD "\"labels\":{}," ART("a\\\\\x0a") "," OBJ(1) "}",
		 "manifest is not valid JSON: a raw control byte 0x0a inside a string at byte 121"},
		{HEAD "\"labels\":{\"k\":\"\\\"\x09\"},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: a raw control byte 0x09 inside a string at byte 89"},
		/* In a member name. */
		{HEAD "\"labels\":{\"a\x7f\x1f\":\"v\"},\"artifacts\":[]," NOOBJ "}",
		 "manifest is not valid JSON: a raw control byte 0x1f inside a string at byte 85"},
	};
	struct mc_manifest m;
	char json[512], want[128], key[2];
	size_t i;
	int b;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		ck_assert_msg(parse(cases[i].json, &m) == MC_ERR_MANIFEST, "case %zu accepted", i);
		ck_assert_str_eq(mc_ctx_error(ctx), cases[i].why);
	}
	/* Every byte 0x01..0x1f, in a string and after the colon of a member. */
	for (b = 1; b < 0x20; b++) {
		key[0] = (char)b;
		key[1] = '\0';
		snprintf(json, sizeof json, HEAD "\"labels\":{}," ART("a%s") "," OBJ(1) "}", key);
		ck_assert_int_eq(parse(json, &m), MC_ERR_MANIFEST);
		snprintf(want, sizeof want, "manifest is not valid JSON: a raw control byte 0x%02x "
			 "inside a string at byte 119", b);
		ck_assert_str_eq(mc_ctx_error(ctx), want);
		snprintf(json, sizeof json, HEAD "\"labels\":{},\"artifacts\":[],\"objects\":%s[]}", key);
		if (b == '\t' || b == '\n' || b == '\r') {
			ck_assert_msg(parse(json, &m) == MC_OK, "0x%02x: %s", b, mc_ctx_error(ctx));
			mc__manifest_free(&m);
			continue;
		}
		ck_assert_int_eq(parse(json, &m), MC_ERR_MANIFEST);
		snprintf(want, sizeof want, "manifest is not valid JSON: byte 0x%02x between tokens "
			 "at byte 109", b);
		ck_assert_str_eq(mc_ctx_error(ctx), want);
	}
	/* Escaped, the same characters are text; DEL and space need no escape. */
	ck_assert_int_eq(parse(HEAD "\"labels\":{}," ART("a\\u001b[2J\\t\\n\x7f b") "," OBJ(1) "}", &m),
			 MC_OK);
	ck_assert_str_eq(m.artifacts[0].key, "a\x1b[2J\t\n\x7f b");
	mc__manifest_free(&m);
#undef ART
}
END_TEST

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

/* Entries in the writer's own form are read without a tree (mparse.c); the same entries
 * with a space before their '}' go through cJSON. Both ways must give the same verdict,
 * the same message and the same tables, on entries the checks accept and refuse. In
 * the templates, '~' marks where the space goes. */
#define H64B "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
#define WOBJ(size) "{\"hash\":\"" H64 "\",\"size\":" #size ",\"encoding\":\"none\",\"stored_size\":" #size ",\"stored_hash\":\"" H64 "\"~}"
#define WART(type, key, size, more) "{\"type\":\"" type "\",\"key\":\"" key "\",\"size\":" #size ",\"hash\":\"" H64 "\"" more "~}"
#define WDOC(arts, objs) HEAD "\"labels\":{},\"artifacts\":[" arts "],\"objects\":[" objs "]}"

static void
same_tables(const struct mc_manifest *x, const struct mc_manifest *y, size_t i)
{
	size_t k;

	ck_assert_msg(x->nartifacts == y->nartifacts && x->nobjects == y->nobjects, "case %zu", i);
	for (k = 0; k < x->nartifacts; k++)
		same_artifact(&x->artifacts[k], &y->artifacts[k]);
	for (k = 0; k < x->nobjects; k++)
		ck_assert_int_eq(memcmp(&x->objects[k], &y->objects[k], sizeof x->objects[k]), 0);
}

START_TEST(writer_form)
{
	static const struct {
		const char *json;
		int ok;
	} cases[] = {
		{WDOC(WART("pgo", "a", 1, ""), WOBJ(1)), 1},
		{WDOC(WART("inductor", "fabc", 1, ",\"sha256\":\"" H64B "\""), WOBJ(1)), 1},
		{WDOC(WART("pgo", "a", 1, ",\"executable\":true"), WOBJ(1)), 1},
		{WDOC(WART("pgo", "a", 1, ",\"sha256\":\"" H64B "\",\"executable\":true"), WOBJ(1)), 1},
		{WDOC(WART("pgo", "k\xc3\xa9y/\xe2\x82\xac", 1, ""), WOBJ(1)), 1},
		{WDOC(WART("pgo", "a\\u00e9\\n", 1, ""), WOBJ(1)), 1},
		{WDOC(WART("pgo", "a", 0, ""), WOBJ(0)), 1},
		{WDOC(WART("pgo", "a", 1, "") "," WART("pgo", "b", 1, "") "," WART("z_9", "a", 1, ""), WOBJ(1)), 1},
		{WDOC(WART("pgo", "a", 8589934591, ""), "{\"hash\":\"" H64 "\",\"size\":8589934591,\"encoding\":\"zstd\",\"stored_size\":8589934590,\"stored_hash\":\"" H64B "\"~}"), 1},
		{WDOC(WART("pgo", "a", 9007199254740991, ""), "{\"hash\":\"" H64 "\",\"size\":9007199254740991,\"encoding\":\"zstd\",\"stored_size\":9007199254740990,\"stored_hash\":\"" H64B "\"~}"), 0},
		{WDOC(WART("Pgo", "a", 1, ""), WOBJ(1)), 0},
		{WDOC(WART("abcdefghijabcdefghijabcdefghijabc", "a", 1, ""), WOBJ(1)), 0},
		{WDOC(WART("", "a", 1, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "", 1, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"sha256\":\"ABC\""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"sha256\":\"" H64 "0\""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"executable\":false"), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"executable\":1"), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"sha256\":\"" H64B "\",\"sha256\":\"" H64B "\""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ",\"other\":1"), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 01, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1.0, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", -1, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1e0, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 9007199254740992, ""), WOBJ(9007199254740992)), 0},
		{WDOC(WART("pgo", "a", 90071992547409910, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 2, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "b", 1, "") "," WART("pgo", "a", 1, ""), WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, "") "," WART("pgo", "a", 1, ""), WOBJ(1)), 0},
		{WDOC("{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64B "\"~}", WOBJ(1)), 0},
		{WDOC("{\"type\":\"pgo\",\"key\":\"a\",\"size\":1,\"hash\":\"" H64 "0\"~}", WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"lz4\",\"stored_size\":1,\"stored_hash\":\"" H64 "\"~}"), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"zstd-long-name\",\"stored_size\":1,\"stored_hash\":\"" H64 "\"~}"), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"none\",\"stored_size\":2,\"stored_hash\":\"" H64 "\"~}"), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"none\",\"stored_size\":1,\"stored_hash\":\"" H64B "\"~}"), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"zstd\",\"stored_size\":1,\"stored_hash\":\"xyz\"~}"), 0},
		{WDOC(WART("pgo", "a", 10000, ""), "{\"hash\":\"" H64 "\",\"size\":10000,\"encoding\":\"zstd\",\"stored_size\":1,\"stored_hash\":\"" H64B "\"~}"), 0},
		{WDOC(WART("pgo", "a", 1, ""), WOBJ(1) "," WOBJ(1)), 0},
		{WDOC(WART("pgo", "a", 1, ""), "{\"hash\":\"" H64 "\",\"size\":1,\"encoding\":\"none\",\"stored_size\":1,\"stored_hash\":\"" H64 "\",\"x\":1~}"), 0},
	};
	char fast[2048], slow[2048], msg[MC_ERRBUF];
	size_t i, k, f, g;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct mc_manifest a, b;
		int ra, rb;
		for (k = f = g = 0; cases[i].json[k] != '\0'; k++) {
			ck_assert(g + 2 < sizeof slow);
			if (cases[i].json[k] == '~') {
				slow[g++] = ' ';
				continue;
			}
			fast[f++] = slow[g++] = cases[i].json[k];
		}
		fast[f] = slow[g] = '\0';
		ra = parse(fast, &a);
		snprintf(msg, sizeof msg, "%s", ra == MC_OK ? "" : mc_ctx_error(ctx));
		rb = parse(slow, &b);
		ck_assert_msg(ra == rb, "case %zu: rc %d in the writer's form, %d with a space", i, ra, rb);
		ck_assert_msg((ra == MC_OK) == cases[i].ok, "case %zu: rc %d: %s", i, ra, msg);
		if (ra != MC_OK) {
			ck_assert_msg(strcmp(msg, mc_ctx_error(ctx)) == 0, "case %zu: '%s', with a space '%s'",
				      i, msg, mc_ctx_error(ctx));
			continue;
		}
		same_tables(&a, &b, i);
		mc__manifest_free(&a);
		mc__manifest_free(&b);
	}
}
END_TEST

/* A manifest several times the reader's window: read from a file in windows, it
 * gives what it gives from memory. */
START_TEST(large)
{
	enum { N = 6000 };
	struct mc_manifest m, back;
	struct mc_martifact *a = calloc(N, sizeof *a);
	struct mc_mobject *o = calloc(N, sizeof *o);
	char (*keys)[48] = calloc(N, sizeof *keys);
	unsigned char sha[32];
	char *json;
	size_t i, len;

	ck_assert(a != NULL && o != NULL && keys != NULL);
	memset(&m, 0, sizeof m);
	memset(sha, 0x5a, sizeof sha);
	for (i = 0; i < N; i++) {
		/* Two types, keys of several lengths, some with a SHA-256. */
		snprintf(keys[i], sizeof keys[i], "job:%06zu:\u00e9t\u00e9%.*s", i, (int)(i % 13),
			 "xxxxxxxxxxxxx");
		a[i].type = i < N / 3 ? "aot" : "pgo";
		a[i].sha256 = i % 3 == 0 ? sha : NULL;
		a[i].executable = i % 5 == 0;
		a[i].key = keys[i];
		a[i].size = i + 1;
		a[i].object = i;
		o[i].hash[0] = (unsigned char)(i >> 8);
		o[i].hash[1] = (unsigned char)i;
		o[i].size = i + 1;
		o[i].encoding = MC_ENC_NONE;
		o[i].stored_size = i + 1;
		memcpy(o[i].stored_hash, o[i].hash, 32);
	}
	m.artifacts = a;
	m.nartifacts = N;
	m.objects = o;
	m.nobjects = N;
	ck_assert_int_eq(mc__manifest_render(ctx, &m, &json, &len), MC_OK);
	ck_assert_uint_gt(len, 4 * 256 * 1024);
	ck_assert_int_eq(parse_len(json, len, &back), MC_OK);
	ck_assert_uint_eq(back.nartifacts, N);
	ck_assert_str_eq(back.artifacts[N - 1].key, keys[N - 1]);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(back.artifacts[i].executable, i % 5 == 0);
	ck_assert_uint_eq(back.objects[N - 1].size, N);
	mc__manifest_free(&back);
	/* A cut anywhere, here inside the last table, is refused the same way. */
	ck_assert_int_eq(parse_len(json, len - 300, &back), MC_ERR_MANIFEST);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "not valid JSON"));
	free(json);
	free(keys);
	free(o);
	free(a);
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
	/* large takes seconds under the sanitizers on a busy machine (Check's default: 4) */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, render_then_parse);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, executable_member);
	tcase_add_test(tc, label_characters);
	tcase_add_test(tc, number_forms);
	tcase_add_test(tc, raw_controls);
	tcase_add_test(tc, order_and_space);
	tcase_add_test(tc, writer_form);
	tcase_add_test(tc, large);
	tcase_add_test(tc, caps);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
