/*
 * mkvectors.c - writes format/vectors/: valid bundles made by the library's writer,
 * and must-fail bundles crafted byte by byte (hostile manifests signed by the test
 * key, hostile archive members, tampering, truncation, non-bundles), with
 * expected.tsv naming the command, exit status and error text each must give.
 * Usage: mkvectors SRCDIR OUTDIR   (SRCDIR holds tests/data and format/vectors/keys)
 * Here: main() and the vectors of format version 1; mkvectors_v2.c makes those of
 * version 2, mkvectors_common.c holds what both use.
 */
#include "mkvectors.h"

/* ---- format version 1 manifests and members, crafted ---- */

/* A signed bundle of one artifact whose manifest is given as text: the object is the
 * vu config unless the manifest says otherwise. */
static void
signed_with_manifest(const char *name, const char *manifest, int with_object)
{
	struct buf b = {0};
	char h[65], obj[128];

	start_signed(&b, manifest);
	if (with_object) {
		hexhash(c_vu, n_vu, h);
		snprintf(obj, sizeof obj, "objects/%s", h);
		put_member(&b, obj, c_vu, n_vu);
	}
	put_end(&b);
	save_raw(name, &b);
	free(b.p);
}

static char *
manifest_one(const char *type, const char *key, uint64_t size, const char *hash, const char *extra)
{
	static char m[16384];

	snprintf(m, sizeof m,
		 "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,\"bundle_version\":0,"
		 "\"labels\":{},\"artifacts\":[{\"type\":\"%s\",\"key\":\"%s\",\"size\":%llu,"
		 "\"hash\":\"%s\"}],\"objects\":[{\"hash\":\"%s\",\"size\":%llu,\"encoding\":\"none\","
		 "\"stored_size\":%llu,\"stored_hash\":\"%s\"}]%s}",
		 EPOCH, type, key, (unsigned long long)size, hash, hash, (unsigned long long)size,
		 (unsigned long long)size, hash, extra ? extra : "");
	return m;
}

/* A copy of the manifest text src with the first from replaced by to. */
static char *
edited(const char *src, const char *from, const char *to)
{
	static char m[16384];
	const char *p = strstr(src, from);

	if (p == NULL)
		die(from);
	snprintf(m, sizeof m, "%.*s%s%s", (int)(p - src), src, to, p + strlen(from));
	return m;
}

static void
hostile_manifest(const char *name, const char *type, const char *key, const char *msg)
{
	char h[65];

	hexhash(c_vu, n_vu, h);
	signed_with_manifest(name, manifest_one(type, key, n_vu, h, NULL), 1);
	expect(name, "load", 1, msg);
}

/* The same manifest with its labels object replaced. */
static char *
with_labels(const char *man, const char *labels)
{
	static char m[16384];
	const char *at = strstr(man, "\"labels\":{}");

	if (at == NULL)
		die("labels");
	snprintf(m, sizeof m, "%.*s\"labels\":%s%s", (int)(at - man), man, labels,
		 at + strlen("\"labels\":{}"));
	return m;
}

/* zstd_object_as()'s bundle, refused with msg. */
static void
zstd_object(const char *name, const char *key, const unsigned char *stored, size_t sn,
	    const unsigned char *content, size_t n, const char *hash, const char *msg)
{
	zstd_object_as(name, key, stored, sn, content, n, hash, 1, msg);
}

/* A frame of a raw block of nraw bytes 'a', nrle RLE blocks of 128 KiB of 'b', and a
 * last RLE block of big bytes of 'b': over the block maximum of min(window, 128 KiB)
 * when big is. The content is given in *content. */
static void
rle_frame(struct buf *f, size_t nraw, size_t nrle, uint32_t big, struct buf *content)
{
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3}; /* window 2^23 */
	unsigned char *fill = malloc(131072);
	size_t i;

	memset(f, 0, sizeof *f);
	memset(content, 0, sizeof *content);
	put(f, head, sizeof head);
	memset(fill, 'a', nraw);
	put_block(f, 0, 0, (uint32_t)nraw);
	put(f, fill, nraw);
	put(content, fill, nraw);
	memset(fill, 'b', 131072);
	for (i = 0; i < nrle; i++) {
		put_block(f, 0, 1, 131072);
		put(f, "b", 1);
		put(content, fill, 131072);
	}
	put_block(f, 1, 1, big);
	put(f, "b", 1);
	for (i = 0; i < big / 131072; i++)
		put(content, fill, 131072);
	put(content, fill, big % 131072);
	free(fill);
}

static unsigned char *
read_out(const char *name, size_t *len)
{
	return read_in(outdir, name, len);
}

static size_t
find(const unsigned char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; i + k <= n; i++)
		if (memcmp(hay + i, needle, k) == 0)
			return i;
	die(needle);
	return 0;
}

static void
flipped(const char *name, const unsigned char *src, size_t n, size_t pos, const char *msg)
{
	unsigned char *c = malloc(n);

	memcpy(c, src, n);
	c[pos] ^= 0x01;
	spit(name, c, n);
	free(c);
	expect(name, "load", 1, msg);
}

/* In m, a format version 1 manifest of one inductor artifact keyed key, whose content is
 * the vu config and whose sha256 is the SHA-256 of sha_of (sha_n bytes). */
static void
inductor_manifest(char *m, size_t mlen, const char *key, const unsigned char *sha_of,
		  size_t sha_n)
{
	unsigned char sha[32];
	char shahex[65], h[65];

	hexhash(c_vu, n_vu, h);
	crypto_hash_sha256(sha, sha_of, sha_n);
	mc__hex(sha, 32, shahex);
	snprintf(m, mlen,
		 "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,\"bundle_version\":0,"
		 "\"labels\":{},\"artifacts\":[{\"type\":\"inductor\",\"key\":\"%s\",\"size\":%zu,"
		 "\"hash\":\"%s\",\"sha256\":\"%s\"}],\"objects\":[{\"hash\":\"%s\",\"size\":%zu,"
		 "\"encoding\":\"none\",\"stored_size\":%zu,\"stored_hash\":\"%s\"}]}",
		 EPOCH, key, n_vu, h, shahex, h, n_vu, n_vu, h);
}

/* ---- format version 1: the valid vectors, then the must-fail ones by family ---- */

/* An inductor artifact keyed by torch's key alone, as bundles were before entries were
 * kept; and one keyed with an entry that is not its content's hash. */
static void
graph_key_forms(void)
{
	unsigned char sha[32];
	char key[128], entry[52], m[16384];

	inductor_manifest(m, sizeof m, FX_KEY, c_vu, n_vu);
	signed_with_manifest("valid-graph-key-alone.mcache", m, 1);
	expect("valid-graph-key-alone.mcache", "load", 0, "");
	crypto_hash_sha256(sha, c_ig, n_ig);
	mc__torch_b32_51(sha, entry);
	snprintf(key, sizeof key, FX_KEY "/%s", entry);
	inductor_manifest(m, sizeof m, key, c_vu, n_vu);
	signed_with_manifest("manifest-entry-false.mcache", m, 1);
	expect("manifest-entry-false.mcache", "load", 1,
	       "its entry is not named after its content's hash");
}

static void
valid_v1(void)
{
	valid_trio("");
	valid("valid-unsigned.mcache", 3, NULL, NULL);
	expect("valid-unsigned.mcache", "load-insecure", 0, "");
	expect("valid-unsigned.mcache", "load", 1, "not signed");
	graph_entries("");
	graph_key_forms();
}

/* 1. Flipped bytes in each region of the valid bundles stored as is and compressed. */
static void
flips(void)
{
	unsigned char *plain, *zst;
	size_t nplain, nzst, pos;

	plain = read_out("valid-plain.mcache", &nplain);
	zst = read_out("valid-signed.mcache", &nzst);
	pos = find(plain, nplain, "\"bundle_version\":7");
	flipped("flip-manifest.mcache", plain, nplain, pos + 17, "does not verify");
	flipped("flip-manifest-syntax.mcache", plain, nplain, 512, "not valid JSON");
	pos = find(plain, nplain, "untrusted comment");
	flipped("flip-sig-comment.mcache", plain, nplain, pos + 25, "canonical");
	pos = find(plain, nplain, "trusted comment: timestamp");
	flipped("flip-sig-trusted.mcache", plain, nplain, pos + 20, "does not verify");
	pos = find(plain, nplain, "objects/");
	flipped("flip-obj-header.mcache", plain, nplain, pos + 110, "canonical");
	flipped("flip-obj-content.mcache", plain, nplain, pos + 512 + 10, "do not match their hash");
	flipped("flip-padding.mcache", plain, nplain, pos + 512 + n_vu + 1, "padding");
	flipped("flip-end.mcache", plain, nplain, nplain - 3, "end-of-archive");
	/* Inside a zstd-compressed object: its stored bytes are hashed in the manifest. */
	pos = find(zst, nzst, "objects/");
	flipped("flip-zstd-frame-header.mcache", zst, nzst, pos + 512 + 4, "object");
	flipped("flip-zstd-block.mcache", zst, nzst, pos + 512 + 17, "object");
	free(plain);
	free(zst);
}

/* 2. Truncations: at a member's boundary, inside one, before the end, and inside the
 * compressed bundle's object (cut at the plain one's offset of it). */
static void
truncations(void)
{
	unsigned char *plain, *zst;
	size_t nplain, nzst, pos;

	plain = read_out("valid-plain.mcache", &nplain);
	zst = read_out("valid-signed.mcache", &nzst);
	pos = find(zst, nzst, "objects/");
	spit("trunc-member-boundary.mcache", plain, 1024);
	expect("trunc-member-boundary.mcache", "load", 1, "truncated");
	spit("trunc-inside-member.mcache", plain, pos + 512 + 100);
	expect("trunc-inside-member.mcache", "load", 1, "truncated");
	spit("trunc-before-end.mcache", plain, nplain - 512);
	expect("trunc-before-end.mcache", "load", 1, "truncated");
	spit("trunc-compressed.mcache", zst, pos + 512 + 20);
	expect("trunc-compressed.mcache", "load", 1, "truncated");
	free(plain);
	free(zst);
}

/* The manifest of the vu config alone (manifest_one()'s buffer), its object's member
 * name in obj. */
static const char *
vu_manifest(char obj[80])
{
	char h[65];

	hexhash(c_vu, n_vu, h);
	snprintf(obj, 80, "objects/%s", h);
	return manifest_one("autotune", key_vu, n_vu, h, NULL);
}

/* A bundle of the vu config whose manifest is signed by sk, under the trusted comment tc
 * (NULL: the usual one). */
static void
vu_signed_by(const char *name, const mc_seckey *sk, const char *tc, const char *cmd, int code,
	     const char *text)
{
	char obj[80];
	const char *man = vu_manifest(obj);
	struct buf b;

	start(&b, man);
	put_sig(&b, sk, man, strlen(man), tc);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, name, cmd, code, text);
}

/* 3. Signatures: by another key, under the test key's id, over other bytes, with the
 * trusted comment edited after signing, and the same signature twice. */
static void
sig_forged(void)
{
	mc_seckey forged = *k_other;
	struct mc_sig sig;
	char obj[80], path[128], *text;
	const char *man = vu_manifest(obj);
	struct buf b;
	size_t len;

	valid("sig-untrusted.mcache", 3, k_other, NULL);
	expect("sig-untrusted.mcache", "load", 1, "no signature by a trusted key");
	/* The test key's id on a signature made by another key. */
	memcpy(forged.keynum, k_test->keynum, 8);
	vu_signed_by("sig-wrong-key.mcache", &forged, NULL, "load", 1, "does not verify");

	/* A valid signature over other bytes. */
	start(&b, man);
	put_sig(&b, k_test, "{}", 2, NULL);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, "sig-other-bytes.mcache", "load", 1, "does not verify");

	/* The trusted comment edited after signing (still canonical text). */
	if (mc__sig_make(ctx, k_test, (const unsigned char *)man, strlen(man),
			 "timestamp:1700000000\tfile:manifest.json\thashed", &sig) != MC_OK)
		die("sign");
	free(sig.trusted_comment);
	sig.trusted_comment = mc__strdup("timestamp:1900000000\tfile:manifest.json\thashed");
	text = mc__sig_render(&sig, &len);
	start(&b, man);
	snprintf(path, sizeof path, "signatures/%s.minisig", sig.id);
	put_member(&b, path, text, len);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, "sig-edited-comment.mcache", "load", 1, "does not verify");
	free(text);
	mc__sig_clear(&sig);

	/* The same signature twice, as if to meet a threshold of two with one key:
	 * members must have distinct, ordered key ids. */
	start_signed(&b, man);
	put_sig(&b, k_test, man, strlen(man), NULL);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, "sig-same-key-twice.mcache", "load-threshold2", 1, "repeated");
}

/* Trusted comments: the longest stock minisign verifies, one byte more, and each
 * kind of line break or control character, all validly signed. */
static void
sig_comments(void)
{
	static const struct {
		const char *file, *tc;
	} bad[] = {
		{"sig-comment-cr.mcache", "timestamp:1700000000\rfile:manifest.json"},
		{"sig-comment-nel.mcache", "timestamp:1700000000\xc2\x85" "file:manifest.json"},
		{"sig-comment-ls.mcache", "timestamp:1700000000\xe2\x80\xa8" "file:manifest.json"},
		{"sig-comment-ps.mcache", "timestamp:1700000000\xe2\x80\xa9" "file:manifest.json"},
		{"sig-comment-esc.mcache", "timestamp:1700000000\x1b[2Jfile:manifest.json"},
		{"sig-comment-del.mcache", "timestamp:1700000000\x7f"},
		{"sig-comment-csi.mcache", "timestamp:1700000000\xc2\x9b" "2J"},
	};
	static char tc[8175];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		vu_signed_by(bad[i].file, k_test, bad[i].tc, "load", 1,
			     "trusted comment contains a line break or control character");
	memset(tc, 'c', 8173);
	vu_signed_by("sig-comment-8173.mcache", k_test, tc, "load", 0, "");
	tc[8173] = 'c';
	vu_signed_by("sig-comment-8174.mcache", k_test, tc, "load", 1,
		     "trusted comment is longer than 8173 bytes");
}

/* One key under two key ids: the test key, and its public key given again under the id
 * of keys/test-alias.pub. It is one signer, however many ids it has. Then thresholds the
 * valid bundle cannot meet. */
static void
sig_one_signer(void)
{
	mc_seckey alias = *k_test;
	mc_pubkey *pk;
	char path[4096], obj[80];
	const char *man = vu_manifest(obj);
	struct buf b;

	snprintf(path, sizeof path, "%s/format/vectors/keys/test-alias.pub", srcdir);
	if (mc_pubkey_load(ctx, path, &pk) != MC_OK)
		die(path);
	memcpy(alias.keynum, pk->keynum, 8);
	mc_pubkey_free(pk);
	start(&b, man);
	put_sig(&b, &alias, man, strlen(man), NULL);
	put_sig(&b, k_test, man, strlen(man), NULL);
	put_member(&b, obj, c_vu, n_vu);
	/* given as the trusted keys, the two ids are one key too: a threshold
	 * of 2 no bundle can meet, refused before the bundle is read */
	finish(&b, "sig-one-key-two-ids.mcache", "load-threshold2-alias", 2,
	       "2 given with -p, 1 distinct");
	expect("sig-one-key-two-ids.mcache", "load-threshold2-alias-test2", 1,
	       "1 valid trusted signature, 2 required");
	expect("sig-one-key-two-ids.mcache", "load", 0, "");
	expect("valid-two-signers.mcache", "load-threshold2-alias-test2", 0, "");
	expect("valid-signed.mcache", "load-threshold2", 1, "1 valid trusted signature, 2 required");
	/* One key given twice is one key: a threshold of two cannot be met, a usage error
	 * said before the bundle is read. */
	expect("valid-signed.mcache", "load-threshold2-same", 2, "2 given with -p, 1 distinct");
}

/* 4. Hostile manifests, validly signed by the trusted key: keys and types. */
static void
manifest_keys(void)
{
	char longkey[3000];

	hostile_manifest("manifest-dotdot.mcache", "autotune",
			 "../3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config",
			 "refused");
	hostile_manifest("manifest-absolute.mcache", "autotune",
			 "/e/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config",
			 "refused");
	hostile_manifest("manifest-backslash.mcache", "precompile",
			 "..\\\\..\\\\3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a7",
			 "refused");
	hostile_manifest("manifest-nul.mcache", "pgo", "job\\u0000:0:", "escaped NUL");
	hostile_manifest("manifest-empty-key.mcache", "pgo", "", "key is empty");
	memset(longkey, 'a', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	hostile_manifest("manifest-long-key.mcache", "pgo", longkey, "key is empty or longer");
	hostile_manifest("manifest-wrong-shape.mcache", "precompile", "abc", "refused");
	hostile_manifest("manifest-unknown-type.mcache", "evil", "x", "has no handler");
}

/* Artifacts and objects that do not agree: listed twice, of another size, an object
 * missing, absent, unlisted, or under a hash name wrong for its content. */
static void
manifest_objects(void)
{
	char h[65], h2[65], m[16384], path[4096];
	const char *man;
	struct buf b;

	hexhash(c_vu, n_vu, h);
	hexhash(c_ig, n_ig, h2);
	snprintf(m, sizeof m,
		 "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,\"bundle_version\":0,"
		 "\"labels\":{},\"artifacts\":[{\"type\":\"autotune\",\"key\":\"%s\",\"size\":%zu,"
		 "\"hash\":\"%s\"},{\"type\":\"autotune\",\"key\":\"%s\",\"size\":%zu,\"hash\":\"%s\"}],"
		 "\"objects\":[{\"hash\":\"%s\",\"size\":%zu,\"encoding\":\"none\",\"stored_size\":%zu,"
		 "\"stored_hash\":\"%s\"}]}",
		 EPOCH, key_vu, n_vu, h, key_vu, n_vu, h, h, n_vu, n_vu, h);
	signed_with_manifest("manifest-duplicate.mcache", m, 1);
	expect("manifest-duplicate.mcache", "load", 1, "duplicate artifact");
	signed_with_manifest("manifest-size-mismatch.mcache", manifest_one("autotune", key_vu, n_vu + 1, h, NULL), 1);
	expect("manifest-size-mismatch.mcache", "load", 1, "the manifest says");
	/* Listed with the ig config's hash; the archive carries the vu config. */
	signed_with_manifest("manifest-object-missing.mcache", manifest_one("autotune", key_vu, n_ig, h2, NULL), 1);
	expect("manifest-object-missing.mcache", "load", 1, "");
	signed_with_manifest("manifest-object-absent.mcache", manifest_one("autotune", key_vu, n_vu, h, NULL), 0);
	expect("manifest-object-absent.mcache", "load", 1, "is missing");
	/* The listed object, then one more nobody listed. */
	man = manifest_one("autotune", key_vu, n_vu, h, NULL);
	start_signed(&b, man);
	snprintf(path, sizeof path, "objects/%s", h);
	put_member(&b, path, c_vu, n_vu);
	snprintf(path, sizeof path, "objects/%s", h2);
	put_member(&b, path, c_ig, n_ig);
	finish(&b, "manifest-object-unlisted.mcache", "load", 1, "not listed in the manifest");
	/* Same object content under a hash name that is wrong for it. */
	man = manifest_one("autotune", key_vu, n_vu, h2, NULL);
	start_signed(&b, man);
	snprintf(path, sizeof path, "objects/%s", h2);
	put_member(&b, path, c_vu, n_vu);
	finish(&b, "manifest-hash-mismatch.mcache", "load", 1, "do not match their hash");
}

/* JSON a manifest may not be: a field twice, nested too deep, not UTF-8, and sizes no
 * integer field may hold. */
static void
json_syntax(void)
{
	static const char *const bad[] = {"1e400", "-1", "1.5", "18446744073709551616"};
	static const char *const names[] = {"json-number-huge.mcache", "json-number-negative.mcache",
					    "json-number-fraction.mcache", "json-number-2e64.mcache"};
	char h[65], m[16384];
	size_t i;

	snprintf(m, sizeof m, "{\"format\":\"megacache\",\"format\":\"megacache\",\"format_version\":1,"
		 "\"created\":%d,\"bundle_version\":0,\"labels\":{},\"artifacts\":[],\"objects\":[]}", EPOCH);
	signed_with_manifest("json-duplicate-field.mcache", m, 0);
	expect("json-duplicate-field.mcache", "load", 1, "twice");
	snprintf(m, sizeof m, "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,"
		 "\"bundle_version\":0,\"labels\":{\"a\":[[[[[[[[[[1]]]]]]]]]]},\"artifacts\":[],\"objects\":[]}", EPOCH);
	signed_with_manifest("json-deep.mcache", m, 0);
	expect("json-deep.mcache", "load", 1, "nests deeper");
	snprintf(m, sizeof m, "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,"
		 "\"bundle_version\":0,\"labels\":{\"a\":\"\xff\xfe\"},\"artifacts\":[],\"objects\":[]}", EPOCH);
	signed_with_manifest("json-non-utf8.mcache", m, 0);
	expect("json-non-utf8.mcache", "load", 1, "not valid UTF-8");
	/* Replace the size by numbers no integer field may hold. */
	hexhash(c_vu, n_vu, h);
	for (i = 0; i < 4; i++) {
		snprintf(m, sizeof m, "%s", manifest_one("autotune", key_vu, 12345, h, NULL));
		signed_with_manifest(names[i], edited(m, "12345", bad[i]), 1);
		expect(names[i], "load", 1, "not an integer");
	}
}

/* An integer has one form, plain digits; a number RFC 8259 does not allow is refused
 * wherever it is; a label value holds no control character (SPEC.md section 3.1). Each
 * of these manifests is otherwise valid. */
static void
json_forms(void)
{
	static const struct {
		const char *name, *from, *to, *msg;
	} forms[] = {
		{"json-number-leading-zero.mcache", "\"size\":#,", "\"size\":0#,",
		 "has a leading zero"},
		{"json-number-minus-zero.mcache", "\"bundle_version\":0,", "\"bundle_version\":-0,",
		 "bundle_version is not an integer in plain decimal digits ('-0')"},
		{"json-number-point-zero.mcache", "\"size\":#,", "\"size\":#.0,",
		 "size is not an integer in plain decimal digits"},
		{"json-number-exponent.mcache", "\"size\":#,", "\"size\":#e0,",
		 "size is not an integer in plain decimal digits"},
		{"json-number-exponent-upper.mcache", "\"created\":1700000000,", "\"created\":17E8,",
		 "created is not an integer in plain decimal digits ('17E8')"},
		{"json-number-trailing-point.mcache", "\"size\":#,", "\"size\":#.,",
		 "is not a JSON number"},
		{"json-number-label-leading-zero.mcache", "\"labels\":{}", "\"labels\":{\"a\":07}",
		 "not valid JSON: the number '07' at byte 95 has a leading zero"},
		/* cJSON takes these; RFC 8259 does not: a byte below 0x20 other than
		 * space, tab, LF and CR between tokens, a byte order mark before a value,
		 * a raw control byte inside a string. */
		{"json-control-between-tokens.mcache", "\"labels\":{}",
		 "\"labels\":{\x0b\"k\"\x01:\x0c\"v\"}",
		 "not valid JSON: byte 0x0b between tokens at byte 91"},
		{"json-bom-before-value.mcache", "\"created\":", "\"created\":\xef\xbb\xbf",
		 "not valid JSON: byte 0xef between tokens at byte 51"},
		{"json-control-in-string.mcache", "\"key\":\"", "\"key\":\"\x1b[2J",
		 "not valid JSON: a raw control byte 0x1b inside a string at byte 132"},
		{"manifest-label-esc.mcache", "\"labels\":{}", "\"labels\":{\"a\":\"x\\u001by\"}",
		 "label 'a' contains control character U+001B"},
		{"manifest-label-c1.mcache", "\"labels\":{}", "\"labels\":{\"a\":\"x\xc2\x85y\"}",
		 "label 'a' contains control character U+0085"},
		{"manifest-label-bidi.mcache", "\"labels\":{}", "\"labels\":{\"a\":\"x\xe2\x80\xaey\"}",
		 "label 'a' contains control character U+202E"},
	};
	char from[64], to[64], size[24], h[65], m[16384];
	size_t i;

	hexhash(c_vu, n_vu, h);
	/* # stands for the artifact's size. */
	snprintf(size, sizeof size, "%zu", n_vu);
	for (i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		const char *f = forms[i].from, *t = forms[i].to;
		snprintf(from, sizeof from, "%s", strchr(f, '#') ? edited(f, "#", size) : f);
		snprintf(to, sizeof to, "%s", strchr(t, '#') ? edited(t, "#", size) : t);
		snprintf(m, sizeof m, "%s", manifest_one("autotune", key_vu, n_vu, h, NULL));
		signed_with_manifest(forms[i].name, edited(m, from, to), 1);
		expect(forms[i].name, "load", 1, forms[i].msg);
	}
}

/* A format version from the future; policy: expiry and rollback. */
static void
manifest_policy(void)
{
	char h[65], m[16384];

	snprintf(m, sizeof m, "{\"format\":\"megacache\",\"format_version\":3,\"created\":%d,"
		 "\"bundle_version\":0,\"labels\":{},\"artifacts\":[],\"objects\":[]}", EPOCH);
	signed_with_manifest("manifest-future-version.mcache", m, 0);
	expect("manifest-future-version.mcache", "load", 3,
	       "bundle format version 3 is newer than this megacache reads (1 to 2): upgrade");

	hexhash(c_vu, n_vu, h);
	snprintf(m, sizeof m, "%s", manifest_one("autotune", key_vu, n_vu, h, ",\"expires\":1700000001"));
	signed_with_manifest("policy-expired.mcache", m, 1);
	expect("policy-expired.mcache", "load", 1, "expired");
	expect("valid-signed.mcache", "load-min-version-8", 1, "below the minimum");
	expect("valid-signed.mcache", "load-min-version-7", 0, "");
}

/* In hdr, a ustar header of the member name of the given type ('2' and '1' linked to
 * /etc/passwd) holding n bytes, its checksum made good. */
static void
typed_header(unsigned char hdr[512], const char *name, char type, size_t n)
{
	unsigned sum = 0;
	size_t k;

	mc__tar_header_render(name, n, hdr);
	hdr[156] = (unsigned char)type;
	if (type == '2' || type == '1')
		memcpy(hdr + 157, "/etc/passwd", 11);
	memset(hdr + 148, ' ', 8);
	for (k = 0; k < 512; k++)
		sum += hdr[k];
	snprintf((char *)hdr + 148, 8, "%06o", sum);
	hdr[155] = ' ';
}

/* 5. Hostile archive members, after a valid signed manifest: names out of the tree and
 * members that are not regular files. */
static void
archive_members(void)
{
	static const struct {
		const char *file, *name;
		char type;
		const char *msg;
	} arch[] = {
		{"archive-dotdot.mcache", "objects/../../../../tmp/x", '0', "unexpected member"},
		{"archive-absolute.mcache", "/tmp/megacache-evil", '0', "unexpected member"},
		{"archive-symlink.mcache", "objects/link", '2', "canonical"},
		{"archive-hardlink.mcache", "objects/hard", '1', "canonical"},
		{"archive-device.mcache", "objects/dev", '3', "canonical"},
		{"archive-fifo.mcache", "objects/fifo", '6', "canonical"},
		{"archive-pax.mcache", "PaxHeader/x", 'x', "canonical"},
	};
	const char *pax = "30 path=objects/../../../tmp/x\n";
	char obj[80];
	const char *man = vu_manifest(obj);
	size_t i;

	for (i = 0; i < sizeof arch / sizeof arch[0]; i++) {
		size_t n = arch[i].type == 'x' ? strlen(pax) : 0;
		unsigned char hdr[512];
		struct buf b;

		start_signed(&b, man);
		typed_header(hdr, arch[i].name, arch[i].type, n);
		put_member_hdr(&b, hdr, pax, n);
		put_member(&b, obj, c_vu, n_vu);
		finish(&b, arch[i].file, "load", 1, arch[i].msg);
	}
}

/* Members where they may not be: an object twice, data after the end (a member, a
 * byte), the manifest not first. */
static void
archive_order(void)
{
	char obj[80];
	const char *man = vu_manifest(obj);
	unsigned char *zst, *more;
	struct buf b;
	size_t nzst;

	start_signed(&b, man);
	put_member(&b, obj, c_vu, n_vu);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, "archive-duplicate-member.mcache", "load", 1, "not listed in the manifest");
	start_signed(&b, man);
	put_member(&b, obj, c_vu, n_vu);
	put_end(&b);
	put_member(&b, "objects/after-the-end", c_ig, n_ig);
	save_raw("archive-after-end.mcache", &b);
	expect("archive-after-end.mcache", "load", 1, "data after the end");
	free(b.p);
	/* Bytes appended to a valid bundle. */
	zst = read_out("valid-signed.mcache", &nzst);
	more = malloc(nzst + 1);
	memcpy(more, zst, nzst);
	more[nzst] = 'x';
	spit("archive-trailing-byte.mcache", more, nzst + 1);
	expect("archive-trailing-byte.mcache", "load", 1, "data after the end");
	free(more);
	free(zst);
	/* The manifest not first. */
	memset(&b, 0, sizeof b);
	put_member(&b, obj, c_vu, n_vu);
	put_member(&b, "manifest.json", man, strlen(man));
	finish(&b, "archive-manifest-not-first.mcache", "load", 1, "not manifest.json");
}

/* 6. Bombs. */
static void
bombs(void)
{
	size_t big = 64u << 20, ztiny = 0;
	unsigned char *zeros = calloc(1, big), *zbuf;
	mc_zenc *z;
	struct buf out = {0};

	if (zeros == NULL || mc__zenc_new(ctx, 3, &z) != MC_OK)
		die("bomb");
	if (mc__zenc_run(z, zeros, big, 1, (mc_out_fn)bomb_out, &out) != MC_OK)
		die("bomb");
	mc__zenc_free(z);
	zbuf = out.p;
	ztiny = out.n;
	/* 64 MiB declared from a few kB stored: over the expansion cap, refused before
	 * anything is written. */
	zstd_object("bomb-expansion.mcache", "bomb:0:", zbuf, ztiny, zeros, big, NULL,
		    "more than the expansion cap");
	/* A frame that expands past the size it declares: stopped at the declared size. */
	zstd_object("bomb-overflow.mcache", "bomb:0:", zbuf, ztiny, zeros, 4096, NULL,
		    "expands past its declared 4096 bytes");
	free(zbuf);
	free(zeros);
}

/* A skippable frame, put where one zstd frame must be. */
static const unsigned char skip[] = {0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'n', 'o', 'p', 'e'};

/* 6b. zstd frames: one zstd frame per member, decoded by the same rules whatever the
 * object's size. Here those over 4 MiB, which are streamed. */
static void
zstd_frames_large(void)
{
	struct buf f, c, two = {0};
	char h[65];

	/* A block of 200,000 bytes, over the 128 KiB block maximum: the content is
	 * held whole (small) or streamed (over 4 MiB). */
	rle_frame(&f, 64, 0, 200000, &c);
	zstd_object("zstd-block-over-max.mcache", "zstd:0:", f.p, f.n, c.p, c.n, NULL,
		    "corrupt compressed data (Data corruption detected)");
	free(f.p);
	free(c.p);
	rle_frame(&f, 2048, 33, 200000, &c);
	zstd_object("zstd-block-over-max-large.mcache", "zstd:0:", f.p, f.n, c.p, c.n, NULL,
		    "corrupt compressed data (Data corruption detected)");
	free(f.p);
	free(c.p);
	/* A valid frame of a streamed content: after a skippable frame, or under a
	 * false content hash. */
	rle_frame(&f, 2048, 33, 131072, &c);
	put(&two, skip, sizeof skip);
	put(&two, f.p, f.n);
	zstd_object("zstd-skippable-before-large.mcache", "zstd:0:", two.p, two.n, c.p, c.n,
		    NULL, "a skippable frame, where one zstd frame must be");
	hexhash(c_vu, n_vu, h);
	zstd_object("manifest-hash-false-large.mcache", "zstd:0:", f.p, f.n, c.p, c.n, h,
		    "content does not match its hash");
	free(f.p);
	free(c.p);
	free(two.p);
}

/* The small ones: skippable frames alone, before the frame, after it, and a frame under
 * a false content hash. */
static void
zstd_frames_small(void)
{
	struct buf f = {0}, two = {0};
	char h[65];
	mc_zenc *z;

	zstd_object("zstd-skippable-alone.mcache", "zstd:0:", skip, sizeof skip,
		    (const unsigned char *)"", 0, NULL, "a skippable frame, where one zstd frame must be");
	if (mc__zenc_new(ctx, 3, &z) != MC_OK ||
	    mc__zenc_run(z, c_vu, n_vu, 1, (mc_out_fn)bomb_out, &f) != MC_OK)
		die("zstd");
	mc__zenc_free(z);
	put(&two, skip, sizeof skip);
	put(&two, f.p, f.n);
	zstd_object("zstd-skippable-before.mcache", "zstd:0:", two.p, two.n, c_vu, n_vu, NULL,
		    "a skippable frame, where one zstd frame must be");
	two.n = 0;
	put(&two, f.p, f.n);
	put(&two, skip, sizeof skip);
	zstd_object("zstd-skippable-after.mcache", "zstd:0:", two.p, two.n, c_vu, n_vu, NULL,
		    "bytes after the end of the zstd frame");
	/* Stored bytes that match, decompressing to other bytes than the manifest's
	 * content hash names. */
	hexhash(c_ig, n_ig, h);
	zstd_object("manifest-hash-false.mcache", "zstd:0:", f.p, f.n, c_vu, n_vu, h,
		    "content does not match its hash");
	free(two.p);
	free(f.p);
}

/* An inductor artifact whose sha256 (which names its file) is another content's. */
static void
inductor_sha256_false(void)
{
	char m[16384];

	inductor_manifest(m, sizeof m, FX_KEY, c_ig, n_ig);
	signed_with_manifest("manifest-sha256-false.mcache", m, 1);
	expect("manifest-sha256-false.mcache", "load", 1, "content does not match its sha256");
}

/* Many tiny artifacts: 1,001 against a cap of 1,000. */
static void
many_artifacts(void)
{
	mc_writer *w;
	char key[64], path[4096];
	int i;

	snprintf(path, sizeof path, "%s/many-artifacts.mcache", outdir);
	if (new_writer(&w) != MC_OK || mc_writer_set_created(w, EPOCH) != MC_OK)
		die("many");
	for (i = 0; i < 1001; i++) {
		snprintf(key, sizeof key, "job:%d:", i);
		if (mc_writer_add_memory(w, "pgo", key, key, strlen(key)) != MC_OK)
			die("many");
	}
	if (mc_writer_add_signer(w, k_test) != MC_OK || mc_writer_save(w, path) != MC_OK)
		die("many");
	mc_writer_free(w);
	expect("many-artifacts.mcache", "load-max-artifacts-1000", 1, "over the cap of 1000");
	expect("many-artifacts.mcache", "load", 0, "");
}

/* Caps: a manifest member that claims 100 MB (refused before it is read), too many
 * artifacts, a key of PATH_MAX + 1 bytes. */
static void
limits(void)
{
	unsigned char hdr[512];
	char longkey[4098];
	struct buf b = {0};

	mc__tar_header_render("manifest.json", 100u << 20, hdr);
	put(&b, hdr, 512);
	put(&b, "{}", 2);
	save_raw("bomb-manifest-size.mcache", &b);
	expect("bomb-manifest-size.mcache", "load", 1, "over the cap");
	free(b.p);
	many_artifacts();
	memset(longkey, 'k', 4097);
	longkey[4097] = '\0';
	hostile_manifest("manifest-key-path-max.mcache", "pgo", longkey, "key is empty or longer");
}

/* Tiers nest: the default Triton root is <inductor root>/triton, so an inductor-tier
 * artifact can name a Triton file, the folder above one, or a file in a kernel folder
 * that is installed as a whole. */
static void
nested_tiers(void)
{
	static const struct triple same_file[] = {
		{"extra", "triton/0/kern/k.json", "{\"from\": \"extra\"}"},
		{"triton", "0/kern/k.json", "{\"from\": \"triton\"}"}};
	static const struct triple file_is_root[] = {
		{"extra", "triton", "a file where the Triton root goes"},
		{"triton", "0/kern/k.json", "{}"}};
	static const struct triple in_unit[] = {
		{"extra", "triton/0/kern/planted.so", "not from Triton"},
		{"triton", "0/kern/k.json", "{}"}};

	signed_triples("tiers-same-file.mcache", same_file, 2);
	/* Two conflicts: the same file, and a file in a unit folder; either may be named. */
	expect("tiers-same-file.mcache", "load", 1, "extra triton/0/kern/k.json");
	signed_triples("tiers-file-is-root.mcache", file_is_root, 2);
	expect("tiers-file-is-root.mcache", "load", 1, "artifacts extra triton and triton 0/kern/k.json both need");
	static const struct triple equal_roots[] = {
		{"extra", "kern/k.json", "{\"from\": \"extra\"}"},
		{"triton", "0/kern/k.json", "{\"from\": \"triton\"}"}};
	static const struct triple twin_in_unit[] = {
		{"extra", "triton/0/kern/k.json", "{}"},
		{"triton", "0/kern/k.json", "{}"},
		{"triton", "0/kern/z.py", "# the kernel's other file"}};

	/* With the Triton root set to the cache dir itself, both name one file, in a folder
	 * the Triton kernel installs whole (either conflict may be named). */
	signed_triples("tiers-equal-roots.mcache", equal_roots, 2);
	expect("tiers-equal-roots.mcache", "load", 0, "");
	expect("tiers-equal-roots.mcache", "load-triton-dir-cache", 1, "extra kern/k.json");
	/* The same content twice is one file, but the extra one still lies inside a
	 * kernel folder installed whole (refused whichever pair is looked at first). */
	signed_triples("tiers-twin-in-unit.mcache", twin_in_unit, 3);
	expect("tiers-twin-in-unit.mcache", "load", 1, "installs as a whole");
	signed_triples("tiers-in-unit.mcache", in_unit, 2);
	expect("tiers-in-unit.mcache", "load", 1, "artifact extra triton/0/kern/planted.so lies in");
	/* A type the caller did not select is still checked: what verify refuses, a
	 * load of some types refuses too. */
	expect("tiers-in-unit.mcache", "load-types-autotune", 1, "installs as a whole");
	expect("manifest-unknown-type.mcache", "load-types-autotune", 1, "has no handler");
}

/* Triton's group files (SPEC.md section 4.1): loaded, each names the folder its kernel
 * lands in, whether it holds the recorded form, the absolute form of bundles written
 * before, or the list form; another form is written as it is (README.md gives the bytes). */
static void
triton_groups(void)
{
	static const struct triple groups[] = {
		{"triton", "0/kern/__grp__a.json",
		 "{\"child_paths\": {\"a.cubin\": \"a.cubin\", \"a.json\": \"a.json\"}}"},
		{"triton", "0/kern/a.cubin", "cubin of a"},
		{"triton", "0/kern/a.json", "{\"name\": \"a\"}"},
		{"triton", "0/old/__grp__b.json",
		 "{\"child_paths\": {\"b.json\": \"/tmp/probe/triton/0/old/b.json\", "
		 "\"b.cubin\": \"/tmp/probe/triton/0/old/b.cubin\"}}"},
		{"triton", "0/old/b.cubin", "cubin of b"},
		{"triton", "0/old/b.json", "{\"name\": \"b\"}"},
		{"triton", "0/list/__grp__c.json", "{\"child_paths\": [\"c.json\"]}"},
		{"triton", "0/list/c.json", "{\"name\": \"c\"}"},
		{"triton", "0/odd/__grp__d.json",
		 "{\"child_paths\": {\"d.json\": \"/x/d.json\"}, \"version\": 1}"},
		{"triton", "0/odd/d.json", "{\"name\": \"d\"}"}};

	signed_triples("valid-triton-groups.mcache", groups, sizeof groups / sizeof groups[0]);
	expect("valid-triton-groups.mcache", "load", 0, "");
}

/* torch makes file names of a blob's keys when it loads it: export checks each key
 * with its handler, the recorded layout's (section 3.4) as well as the artifacts'. */
static void
export_keys(void)
{
	char h[65], extra[512];

	hexhash(c_vu, n_vu, h);
	expect("manifest-dotdot.mcache", "export", 1, "autotune key '../");
	snprintf(extra, sizeof extra, ",\"torch_blob\":{\"groups\":[{\"type\":\"autotune\",\"entries\":"
		 "[{\"key\":\"../../escape.best_config\",\"size\":%zu,\"hash\":\"%s\"}]}]}", n_vu, h);
	signed_with_manifest("torch-blob-key-dotdot.mcache", manifest_one("autotune", key_vu, n_vu, h, extra), 1);
	expect("torch-blob-key-dotdot.mcache", "export", 1, "autotune key '../../escape.best_config' refused");
	expect("torch-blob-key-dotdot.mcache", "load", 1, "torch_blob: autotune key '../../escape.best_config'");
}

/* A file of mode (set exactly, whatever the umask) in folder dir, holding text. */
static void
mode_file(const char *dir, const char *name, const char *text, mode_t mode, char *path,
	  size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	if ((f = fopen(path, "w")) == NULL || fputs(text, f) == EOF || fclose(f) != 0 ||
	    chmod(path, mode) != 0)
		die(path);
}

/* The owner's execute bit (SPEC.md section 3.2): a Triton kernel's .so recorded from a
 * file of mode 0755 is executable, its .json (0644) is not, and the same content as the
 * .so, recorded from a file of mode 0644 for another type, is stored once but is not
 * executable. Then the two refused forms of the member: false, and a number. */
static void
executable_bit(void)
{
	static const char *const name = "valid-executable.mcache";
	char dir[] = "/tmp/mkvectors-XXXXXX", so[4096], js[4096], cp[4096], path[4096], h[65];
	const char *man;
	mc_writer *w;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	mode_file(dir, "k.so", "\177ELF launcher of k", 0755, so, sizeof so);
	mode_file(dir, "k.json", "{\"name\": \"k\"}", 0644, js, sizeof js);
	mode_file(dir, "copy.so", "\177ELF launcher of k", 0644, cp, sizeof cp);
	snprintf(path, sizeof path, "%s/%s", outdir, name);
	if (new_writer(&w) != MC_OK || mc_writer_set_created(w, EPOCH) != MC_OK ||
	    mc_writer_add_file(w, "triton", "0/kern/k.so", so) != MC_OK ||
	    mc_writer_add_file(w, "triton", "0/kern/k.json", js) != MC_OK ||
	    mc_writer_add_file(w, "extra", "bin/copy.so", cp) != MC_OK ||
	    mc_writer_add_signer(w, k_test) != MC_OK || mc_writer_save(w, path) != MC_OK)
		die(name);
	mc_writer_free(w);
	if (unlink(so) != 0 || unlink(js) != 0 || unlink(cp) != 0 || rmdir(dir) != 0)
		die(dir);
	expect(name, "load", 0, "");
	hexhash(c_vu, n_vu, h);
	man = manifest_one("autotune", key_vu, n_vu, h, NULL);
	signed_with_manifest("manifest-executable-false.mcache",
			     edited(man, "\"}],\"objects\"", "\",\"executable\":false}],\"objects\""), 1);
	expect("manifest-executable-false.mcache", "load", 1,
	       "artifacts[0].executable is false (a writer leaves the member out instead)");
	man = manifest_one("autotune", key_vu, n_vu, h, NULL);
	signed_with_manifest("manifest-executable-number.mcache",
			     edited(man, "\"}],\"objects\"", "\",\"executable\":1}],\"objects\""), 1);
	expect("manifest-executable-number.mcache", "load", 1,
	       "artifacts[0].executable is not a boolean");
}

/* 7. Not bundles at all. */
static void
not_bundles(void)
{
	static const unsigned char gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	static const unsigned char zip[] = "PK\005\006\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
	unsigned char rnd[4096];
	size_t n;
	unsigned char *blob;

	spit("not-bundle-empty.bin", "", 0);
	expect("not-bundle-empty.bin", "load", 2, "not a megacache bundle");
	spit("not-bundle-gzip.bin", gz, sizeof gz);
	expect("not-bundle-gzip.bin", "load", 2, "not a megacache bundle");
	spit("not-bundle-zip.bin", zip, 22);
	expect("not-bundle-zip.bin", "load", 2, "not a megacache bundle");
	randombytes_buf_deterministic(rnd, sizeof rnd, (const unsigned char *)"megacache-vectors-random-bytes!!");
	spit("not-bundle-random.bin", rnd, sizeof rnd);
	expect("not-bundle-random.bin", "load", 2, "not a megacache bundle");
	blob = slurp("tests/data/torch-2.11/mlp-cpu-pgo.megacache", &n);
	spit("not-bundle-torch-blob.bin", blob, 4096);
	expect("not-bundle-torch-blob.bin", "load", 2, "not a megacache bundle");
	free(blob);
}

/* 8. Text that must reach a terminal escaped: validly signed bundles whose keys, types,
 * labels, member names carry terminal commands (OSC 52 sets the clipboard), a forged
 * line, a C1 control (CSI) and a right-to-left override. Each error must show them as
 * the visible escapes given. */
#define HOSTILE "\\u001b]52;c;cm0gLXJmIH4=\\u0007\\nmegacache: OK\xc2\x9b" "31m\xe2\x80\xae"
#define HOSTILE_SHOWN "\\x1b]52;c;cm0gLXJmIH4=\\x07\\x0amegacache: OK\\u009b31m\\u202e"

static void
escaped_text(void)
{
	char h[65], obj[80];
	const char *man;
	struct buf b;

	hostile_manifest("print-key-autotune.mcache", "autotune", "ab/" HOSTILE ".best_config",
			 "autotune key 'ab/" HOSTILE_SHOWN ".best_config' refused");
	hostile_manifest("print-key-extra.mcache", "extra", "logs/" HOSTILE ".txt",
			 "extra key 'logs/" HOSTILE_SHOWN ".txt' refused");
	hostile_manifest("print-type.mcache", "auto\\u001b[31mtune", key_vu,
			 "type 'auto\\x1b[31mtune' is not");
	hexhash(c_vu, n_vu, h);
	man = manifest_one("autotune", key_vu, n_vu, h, NULL);
	signed_with_manifest("print-label-name.mcache",
			     with_labels(man, "{\"\\u001b]0;megacache: OK\\u0007\":\"1\"}"), 1);
	expect("print-label-name.mcache", "load", 1, "label name '\\x1b]0;megacache: OK\\x07'");
	/* A label value with a C1 and a bidi control: refused by the reader, which
	 * names the character rather than printing it. */
	signed_with_manifest("print-label-value.mcache",
			     with_labels(man, "{\"torch\":\"2.11.0\xc2\x9b" "31m\xe2\x80\xae" "evil\"}"), 1);
	expect("print-label-value.mcache", "load", 1,
	       "label 'torch' contains control character U+009B");
	signed_with_manifest("print-unknown-member.mcache",
			     manifest_one("autotune", key_vu, n_vu, h,
					  ",\"\\u001b[2J\\u001b[Hmegacache: OK\":1"), 1);
	expect("print-unknown-member.mcache", "load", 1,
	       "unknown field '\\x1b[2J\\x1b[Hmegacache: OK'");
	/* Member names are raw header bytes: here an ESC, a BEL, a line feed, a lone
	 * C1 byte (not UTF-8) and a U+202E. */
	man = vu_manifest(obj);
	start_signed(&b, man);
	put_member(&b, "signatures/\x1b]52;c;cm0gLXJmIH4=\x07\n\x9b\xe2\x80\xae.minisig", "x", 1);
	put_member(&b, obj, c_vu, n_vu);
	finish(&b, "print-sig-member.mcache", "load", 1,
	       "bad signature member name 'signatures/\\x1b]52;c;cm0gLXJmIH4=\\x07\\x0a\\x9b\\u202e.minisig'");
}

#undef HOSTILE
#undef HOSTILE_SHOWN

/* Format version 1 records no GPU targets: a load checks its kernels as it reads them,
 * and a manifest that names gpu_targets is refused as version 1 does any unknown member. */
static void
gpu_targets_v1(void)
{
	static const struct triple kernel[] = {
		{"autotune", "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config",
		 "{\"XBLOCK\": 64}"},
		{"triton", "0/kern/k.cubin", "cubin of k"},
		{"triton", "0/kern/k.json", GPU_META_90}};
	char h[65];

	signed_triples("gpu-targets-v1.mcache", kernel, 3);
	expect("gpu-targets-v1.mcache", "load", 0, "");
	expect("gpu-targets-v1.mcache", "load-gpu-cuda:90", 0, "");
	expect("gpu-targets-v1.mcache", "load-gpu-cuda:80", 1, "gpu-targets-v1.mcache: holds 1 "
	       "Triton kernel for cuda:90, a GPU target this host lacks (this host: cuda:80)");
	expect("gpu-targets-v1.mcache", "load-gpu-skip-cuda:80", 0, "");
	hexhash(c_vu, n_vu, h);
	signed_with_manifest("gpu-targets-v1-member.mcache",
			     manifest_one("autotune", key_vu, n_vu, h, ",\"gpu_targets\":[\"cuda:90\"]"), 1);
	expect("gpu-targets-v1-member.mcache", "load", 1, "unknown field 'gpu_targets'");
}

/* The families in the order expected.tsv lists them: flips(), truncations() and
 * archive_order() read the valid bundles valid_v1() writes. */
int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mkvectors SRCDIR OUTDIR\n");
		return 2;
	}
	srcdir = argv[1];
	outdir = argv[2];
	if (mc_ctx_new(&ctx) != MC_OK)
		return 1;
	set_up();
	valid_v1();
	flips();
	truncations();
	sig_forged();
	sig_comments();
	sig_one_signer();
	manifest_keys();
	manifest_objects();
	json_syntax();
	json_forms();
	manifest_policy();
	archive_members();
	archive_order();
	bombs();
	zstd_frames_large();
	zstd_frames_small();
	inductor_sha256_false();
	limits();
	nested_tiers();
	triton_groups();
	export_keys();
	executable_bit();
	not_bundles();
	escaped_text();
	gpu_targets_v1();
	version2();
	vllm_vectors();
	fclose(tsv);
	mc_seckey_free(k_test);
	mc_seckey_free(k_test2);
	mc_seckey_free(k_other);
	mc_ctx_free(ctx);
	return 0;
}
