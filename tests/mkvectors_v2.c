/*
 * mkvectors_v2.c - the vectors of format version 2 (SPEC.md section 12), and those of
 * the bounds both versions share: the expansion cap, sums of sizes, zstd frames no
 * writer makes.
 */
#include "mkvectors.h"

/* ---- format version 2 (SPEC.md section 12) ---- */

void
sha_hex(const void *d, size_t n, char out[65])
{
	unsigned char h[32];

	crypto_hash_sha256(h, d, n);
	mc__hex(h, 32, out);
}

/* A version 2 bundle signed by the test key: its manifest names index, stored as it is
 * (a different member name when iname is given), then the blocks blk[0..n-1] stored as
 * they are (blen[i] bytes; blen NULL: text), and any extra member. */
/* The gpu_targets member the next v2_bundle() writes into its manifest (its JSON
 * value), or NULL: none. */
static const char *v2_gpu;

void
v2_bundle(const char *name, const char *index, const char *iname, const char *const *blk,
	  const size_t *blen, size_t n, const char *extra, const char *cmd, int code,
	  const char *text)
{
	char man[1024], h[65], bn[32], gt[256] = "";
	struct buf b;
	size_t i;

	sha_hex(index, strlen(index), h);
	if (v2_gpu != NULL)
		snprintf(gt, sizeof gt, ",\"gpu_targets\":%s", v2_gpu);
	snprintf(man, sizeof man, "{\"format\":\"megacache\",\"format_version\":2,\"created\":%d,"
		 "\"bundle_version\":0,\"labels\":{}%s,\"index\":{\"encoding\":\"none\","
		 "\"size\":%zu,\"stored_size\":%zu,\"stored_hash\":\"%s\"}}", EPOCH, gt,
		 strlen(index), strlen(index), h);
	start_signed(&b, man);
	put_member(&b, iname != NULL ? iname : "index.json", index, strlen(index));
	for (i = 0; i < n; i++) {
		snprintf(bn, sizeof bn, "blocks/%zu", i);
		put_member(&b, bn, blk[i], blen != NULL ? blen[i] : strlen(blk[i]));
	}
	if (extra != NULL)
		put_member(&b, extra, "x", 1);
	finish(&b, name, cmd, code, text);
}

/* Two artifacts (the vu and ig configs) whose objects are objs, in one block: the index
 * text, with what follows the objects' table (the block table on) given as tail. */
static char *
v2_index(const char *arts, const char *objs, const char *tail)
{
	static char t[8192];

	snprintf(t, sizeof t, "{\"artifacts\":[%s],\"objects\":[%s],%s}", arts, objs, tail);
	return t;
}

#define V2_ART "{\"type\":\"autotune\",\"key\":\"%s\",\"size\":%zu,\"hash\":\"%s\"}"

/* Hand-made indexes: what a careless or hostile signer can sign. Most hold the ig and vu
 * configs (artifacts both, objects objs) in one block stored as it is (tail). */
static void
version2_indexes(void)
{
	char hv[65], hi[65], hx[65], av[512], ai[512], ax[512], ov[128], oi[128], ox[128];
	char blk[8192], twice_blk[8192], tail[256], t2[256], both[1024], arts[1024];
	char objs[256], objs2[256], msg[256];
	const char *one[1] = {blk}, *one_twice[1] = {twice_blk};
	size_t len;

	sha_hex(c_vu, n_vu, hv);
	sha_hex(c_ig, n_ig, hi);
	sha_hex("other", 5, hx);
	snprintf(av, sizeof av, V2_ART, key_vu, n_vu, hv);
	snprintf(ai, sizeof ai, V2_ART, key_ig, n_ig, hi);
	snprintf(ax, sizeof ax, V2_ART, key_ig, n_ig, hx);
	snprintf(ov, sizeof ov, "{\"hash\":\"%s\",\"size\":%zu}", hv, n_vu);
	snprintf(oi, sizeof oi, "{\"hash\":\"%s\",\"size\":%zu}", hi, n_ig);
	snprintf(ox, sizeof ox, "{\"hash\":\"%s\",\"size\":%zu}", hx, n_ig);
	snprintf(blk, sizeof blk, "%.*s%.*s", (int)n_ig, (const char *)c_ig, (int)n_vu,
		 (const char *)c_vu);
	snprintf(both, sizeof both, "%s,%s", ai, av);
	snprintf(objs, sizeof objs, "%s,%s", oi, ov);
	snprintf(tail, sizeof tail, "\"blocks\":[{\"encoding\":\"none\",\"objects\":2,"
		 "\"stored_size\":%zu}]", n_ig + n_vu);
	v2_bundle("v2-index-plain.mcache", v2_index(both, objs, tail), NULL, one, NULL, 1, NULL,
		  "load", 0, "");
	/* The manifest cap on the index stored as is (SPEC.md 12.2): its stored size is told. */
	len = strlen(v2_index(both, objs, tail));
	snprintf(msg, sizeof msg, "load-max-manifest-bytes-%zu", len);
	expect("v2-index-plain.mcache", msg, 0, "");
	snprintf(msg, sizeof msg, "load-max-manifest-bytes-%zu", len - 1);
	snprintf(t2, sizeof t2, "v2-index-plain.mcache: index: stored in %zu bytes, over the "
		 "manifest cap of %zu", len, len - 1);
	expect("v2-index-plain.mcache", msg, 1, t2);
	/* The index's text, not JSON: told as the index's. */
	v2_bundle("v2-index-not-json.mcache", "{\"artifacts\":[}", NULL, one, NULL, 1, NULL,
		  "load", 1, "v2-index-not-json.mcache: index is not valid JSON");
	/* The same content twice (equal files the writer learnt of only by reading them). */
	snprintf(objs2, sizeof objs2, "%s,%s", ov, ov);
	snprintf(twice_blk, sizeof twice_blk, "%.*s%.*s", (int)n_vu, (const char *)c_vu,
		 (int)n_vu, (const char *)c_vu);
	snprintf(t2, sizeof t2, "\"blocks\":[{\"encoding\":\"none\",\"objects\":2,"
		 "\"stored_size\":%zu}]", 2 * n_vu);
	v2_bundle("v2-object-twice.mcache", v2_index(av, objs2, t2), NULL, one_twice, NULL, 1, NULL,
		  "load", 0, "");
	snprintf(msg, sizeof msg, "v2-object-unused.mcache: index: object %s is listed but no "
		 "artifact uses it", hi);
	v2_bundle("v2-object-unused.mcache", v2_index(av, objs, tail), NULL, one, NULL, 1, NULL,
		  "load", 1, msg);
	v2_bundle("v2-index-name.mcache", v2_index(both, objs, tail), "index.json.zst", one, NULL, 1,
		  NULL, "load", 1, "where index.json was expected");
	v2_bundle("v2-block-missing.mcache", v2_index(both, objs, tail), NULL, one, NULL, 0, NULL,
		  "load", 1, "where blocks/0 was expected");
	v2_bundle("v2-member-after.mcache", v2_index(both, objs, tail), NULL, one, NULL, 1, "blocks/1",
		  "load", 1, "v2-member-after.mcache: member 'blocks/1' is not listed in the index");
	len = n_ig + n_vu + 1; /* the block's member one byte longer than the index says */
	snprintf(msg, sizeof msg, "v2-block-size-mismatch.mcache: blocks/0 is stored in %zu bytes, "
		 "the index says %zu", len, len - 1);
	v2_bundle("v2-block-size-mismatch.mcache", v2_index(both, objs, tail), NULL, one, &len, 1,
		  NULL, "load", 1, msg);
	snprintf(objs2, sizeof objs2, "%s,%s", ox, ov);
	snprintf(arts, sizeof arts, "%s,%s", ax, av);
	v2_bundle("v2-object-hash-false.mcache", v2_index(arts, objs2, tail), NULL, one, NULL, 1, NULL,
		  "load", 1, "content does not match its hash");
	snprintf(t2, sizeof t2, "\"blocks\":[{\"encoding\":\"none\",\"objects\":1,"
		 "\"stored_size\":%zu}]", n_ig);
	v2_bundle("v2-block-count.mcache", v2_index(both, objs, t2), NULL, one, NULL, 1, NULL, "load",
		  1, "index: the blocks hold 1 objects, the object table lists 2");
	snprintf(t2, sizeof t2, "\"blocks\":[{\"encoding\":\"none\",\"objects\":2,"
		 "\"stored_size\":%zu,\"stored_hash\":\"%s\"}]", n_ig + n_vu, hv);
	v2_bundle("v2-block-none-hash.mcache", v2_index(both, objs, t2), NULL, one, NULL, 1, NULL,
		  "load", 1, "index: blocks[0] is stored as is but has a stored_hash");
	snprintf(arts, sizeof arts, "%s,{\"type\":\"autotune\",\"key\":\"%s\",\"size\":%zu,"
		 "\"hash\":\"%s\",\"sha256\":\"%s\"}", ai, key_vu, n_vu, hv, hv);
	v2_bundle("v2-artifact-sha256.mcache", v2_index(arts, objs, tail), NULL, one, NULL, 1, NULL,
		  "load", 1, "index: artifacts[1] has unknown field 'sha256'");
}

/* What a selection of types reads (SPEC.md section 12.4): the vu config (autotune) in
 * block 0, a byte of it changed, and the pgo probe in block 1, both stored as is. Every
 * load reads block 0, with --types pgo too; push, which sends only the pgo artifact,
 * does not (tests/tool/selection.sh and fleet.sh). */
static void
version2_selection(void)
{
	static const char *const name = "v2-flip-other-block.mcache";
	char hv[65], hp[65], index[1024], *b0;
	const char *blk[2];
	size_t len[2] = {n_vu, n_pgo};

	sha_hex(c_vu, n_vu, hv);
	sha_hex(c_pgo, n_pgo, hp);
	snprintf(index, sizeof index, "{\"artifacts\":[" V2_ART ",{\"type\":\"pgo\",\"key\":"
		 "\"megacache-probe:None:\",\"size\":%zu,\"hash\":\"%s\"}],\"objects\":"
		 "[{\"hash\":\"%s\",\"size\":%zu},{\"hash\":\"%s\",\"size\":%zu}],\"blocks\":"
		 "[{\"encoding\":\"none\",\"objects\":1,\"stored_size\":%zu},{\"encoding\":"
		 "\"none\",\"objects\":1,\"stored_size\":%zu}]}", key_vu, n_vu, hv, n_pgo, hp,
		 hv, n_vu, hp, n_pgo, n_vu, n_pgo);
	if ((b0 = malloc(n_vu)) == NULL)
		die("out of memory");
	memcpy(b0, c_vu, n_vu);
	b0[n_vu / 2] ^= 0x01;
	blk[0] = b0;
	blk[1] = (const char *)c_pgo;
	v2_bundle(name, index, NULL, blk, len, 2, NULL, "load", 1,
		  "content does not match its hash");
	expect(name, "load-types-pgo", 1, "content does not match its hash");
	free(b0);
}

/* The GPU targets of Triton kernels (SPEC.md section 12.2). The writer records the set
 * its kernels' metadata files name; a hand-made manifest that records another set, or
 * breaks the member's form, is refused; one without the member (format 1, or an older
 * writer's) is checked against the kernels themselves. */
static void
gpu_targets(void)
{
	static const struct triple kernels[] = {
		{"triton", "0/amd/__grp__a.json",
		 "{\"child_paths\": {\"a.hsaco\": \"a.hsaco\", \"a.json\": \"a.json\"}}"},
		{"triton", "0/amd/a.hsaco", "hsaco of a"},
		{"triton", "0/amd/a.json", "{\"name\": \"a\", \"target\": {\"backend\": \"hip\", "
		 "\"arch\": \"gfx942\", \"warp_size\": 64}}"},
		{"triton", "0/kern/__grp__k.json",
		 "{\"child_paths\": {\"k.cubin\": \"k.cubin\", \"k.json\": \"k.json\"}}"},
		{"triton", "0/kern/k.cubin", "cubin of k"},
		{"triton", "0/kern/k.json", GPU_META_90},
		{"autotune", "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config",
		 "{\"XBLOCK\": 64}"}};
	static const char *const name = "v2-gpu-targets.mcache";
	char index[2048], h[65];
	const char *blk[1] = {GPU_META_90};
	size_t n = strlen(GPU_META_90);

	signed_triples(name, kernels, sizeof kernels / sizeof kernels[0]);
	expect(name, "load", 0, "");
	expect(name, "load-gpu-cuda:90,hip:gfx942", 0, "");
	expect(name, "load-gpu-cuda:90", 1, "v2-gpu-targets.mcache: holds Triton kernels for "
	       "hip:gfx942, a GPU target this host lacks (this host: cuda:90)");
	expect(name, "load-gpu-cuda:80", 1, "holds Triton kernels for cuda:90 and hip:gfx942, "
	       "GPU targets this host lacks (this host: cuda:80)");
	expect(name, "load-gpu-skip-cuda:90", 0, "");
	sha_hex(GPU_META_90, n, h);
	snprintf(index, sizeof index, "{\"artifacts\":[{\"type\":\"triton\",\"key\":"
		 "\"0/kern/k.json\",\"size\":%zu,\"hash\":\"%s\"}],\"objects\":[{\"hash\":\"%s\","
		 "\"size\":%zu}],\"blocks\":[{\"encoding\":\"none\",\"objects\":1,"
		 "\"stored_size\":%zu}]}", n, h, h, n, n);
	v2_gpu = NULL; /* a writer from before gpu_targets */
	v2_bundle("v2-gpu-targets-absent.mcache", index, NULL, blk, NULL, 1, NULL, "load", 0, "");
	expect("v2-gpu-targets-absent.mcache", "load-gpu-cuda:80", 1, "v2-gpu-targets-absent.mcache: "
	       "holds 1 Triton kernel for cuda:90, a GPU target this host lacks (this host: cuda:80)");
	v2_gpu = "[\"cuda:80\"]";
	v2_bundle("v2-gpu-targets-false.mcache", index, NULL, blk, NULL, 1, NULL, "load", 1,
		  "v2-gpu-targets-false.mcache: the manifest's gpu_targets (cuda:80) are not the "
		  "targets its kernels name (cuda:90)");
	v2_gpu = "[\"cuda:80\",\"cuda:90\"]";
	v2_bundle("v2-gpu-targets-extra.mcache", index, NULL, blk, NULL, 1, NULL, "load", 1,
		  "gpu_targets (cuda:80, cuda:90) are not the targets its kernels name (cuda:90)");
	v2_gpu = "[\"cuda:90\",\"cuda:89\"]";
	v2_bundle("v2-gpu-targets-order.mcache", index, NULL, blk, NULL, 1, NULL, "load", 1,
		  "manifest: gpu_targets not in strictly ascending order at 'cuda:89'");
	v2_gpu = "[]";
	v2_bundle("v2-gpu-targets-empty.mcache", index, NULL, blk, NULL, 1, NULL, "load", 1,
		  "manifest: gpu_targets is empty (omit it for none)");
	v2_gpu = "[\"cuda 90\"]";
	v2_bundle("v2-gpu-targets-form.mcache", index, NULL, blk, NULL, 1, NULL, "load", 1,
		  "manifest: gpu_targets[0] is not a GPU target");
	v2_gpu = "[\"cuda:90\"]";
	v2_bundle("v2-gpu-targets-recorded.mcache", index, NULL, blk, NULL, 1, NULL, "load", 0, "");
	expect("v2-gpu-targets-recorded.mcache", "load-gpu-cuda:80", 1, "holds Triton kernels for "
	       "cuda:90, a GPU target this host lacks (this host: cuda:80)");
	v2_gpu = NULL;
}

/* Bytes of a version 2 bundle the library made, changed at offset at into name. */
static void
v2_changed(const char *from, const char *name, size_t at, int cut, const char *text)
{
	unsigned char *p;
	size_t n;

	p = read_in(outdir, from, &n);
	if (at >= n)
		die(name);
	if (cut)
		n = at;
	else
		p[at] ^= 0x01;
	spit(name, p, n);
	expect(name, "load", 1, text);
	free(p);
}

/* Where the member named name starts its data in the file. */
static size_t
v2_member_at(const char *file, const char *name)
{
	unsigned char *p;
	size_t n, i;

	p = read_in(outdir, file, &n);
	for (i = 0; i + 512 <= n; i += 512)
		if (strcmp((const char *)p + i, name) == 0 &&
		    memcmp(p + i + 257, "ustar", 5) == 0) {
			free(p);
			return i + 512;
		}
	die(name);
	return 0;
}

/* ---- the expansion cap at its boundary (SPEC.md section 7) ----
 * size / stored_size, rounded down, at most the default cap of 4,096: a member of S
 * stored bytes may hold 4096 * S + S - 1 bytes; one more is refused. */

#define CAP 4096u

/* A zstd frame in f of nrle RLE blocks of 128 KiB of c, a last RLE block of last bytes
 * of c, then (tail not NULL) a raw block of tail: its content appended to *content. */
static void
rle_run(struct buf *f, size_t nrle, uint32_t last, int c, const char *tail, struct buf *content)
{
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3}; /* window 2^23 */
	unsigned char *fill = malloc(131072), b = (unsigned char)c;
	size_t i;

	if (fill == NULL)
		die("rle_run");
	memset(fill, c, 131072);
	put(f, head, sizeof head);
	for (i = 0; i < nrle; i++) {
		put_block(f, 0, 1, 131072);
		put(f, &b, 1);
		put(content, fill, 131072);
	}
	put_block(f, tail == NULL, 1, last);
	put(f, &b, 1);
	put(content, fill, last);
	if (tail != NULL) {
		put_block(f, 1, 0, (uint32_t)strlen(tail));
		put(f, tail, strlen(tail));
		put(content, tail, strlen(tail));
	}
	free(fill);
}

/* A version 2 bundle of one zstd block, frame f, whose content c is cut into n objects
 * of size[i] bytes (distinct contents, at most 10), each the content of an artifact pgo
 * "zstd:<i>:". */
static void
v2_block_of(const char *name, const struct buf *f, const struct buf *c, const size_t *size,
	    size_t n, int code, const char *text)
{
	const char *blk[1] = {(const char *)f->p};
	char arts[1024] = "", objs[1024] = "", index[3072], hc[65], hf[65];
	size_t i, at = 0, k;

	for (i = 0; i < n; at += size[i], i++) {
		sha_hex(c->p + at, size[i], hc);
		k = strlen(arts);
		snprintf(arts + k, sizeof arts - k, "%s{\"type\":\"pgo\",\"key\":\"zstd:%zu:\","
			 "\"size\":%zu,\"hash\":\"%s\"}", i > 0 ? "," : "", i, size[i], hc);
		k = strlen(objs);
		snprintf(objs + k, sizeof objs - k, "%s{\"hash\":\"%s\",\"size\":%zu}",
			 i > 0 ? "," : "", hc, size[i]);
	}
	if (at != c->n || n > 10)
		die(name);
	sha_hex(f->p, f->n, hf);
	snprintf(index, sizeof index, "{\"artifacts\":[%s],\"objects\":[%s],\"blocks\":"
		 "[{\"encoding\":\"zstd\",\"objects\":%zu,\"stored_size\":%zu,"
		 "\"stored_hash\":\"%s\"}]}", arts, objs, n, f->n, hf);
	v2_bundle(name, index, NULL, blk, &f->n, 1, NULL, "load", code, text);
}

/* A version 2 bundle of one artifact (pgo "zstd:0:") in one zstd block, frame f: the
 * block's content is the artifact's. */
static void
v2_zstd_block(const char *name, const struct buf *f, const struct buf *c, int code,
	      const char *text)
{
	v2_block_of(name, f, c, &c->n, 1, code, text);
}

/* A version 2 bundle whose index is the zstd frame f (content c), then with vu set its
 * one block, the vu config stored as is, else none. */
static void
v2_framed(const char *name, const struct buf *f, const struct buf *c, int vu, const char *cmd,
	  int code, const char *text)
{
	char man[1024], hf[65];
	struct buf b;

	sha_hex(f->p, f->n, hf);
	snprintf(man, sizeof man, "{\"format\":\"megacache\",\"format_version\":2,\"created\":%d,"
		 "\"bundle_version\":0,\"labels\":{},\"index\":{\"encoding\":\"zstd\",\"size\":%zu,"
		 "\"stored_size\":%zu,\"stored_hash\":\"%s\"}}", EPOCH, c->n, f->n, hf);
	start_signed(&b, man);
	put_member(&b, "index.json.zst", f->p, f->n);
	if (vu)
		put_member(&b, "blocks/0", c_vu, n_vu);
	finish(&b, name, cmd, code, text);
}

/* A version 2 bundle whose index is the zstd frame f (content c), its one block the vu
 * config stored as is. */
static void
v2_zstd_index(const char *name, const struct buf *f, const struct buf *c, int code,
	      const char *text)
{
	v2_framed(name, f, c, 1, "load", code, text);
}

/* Into t (n bytes), the index of a bundle whose one block is the vu config stored as is. */
static char *
vu_index(char *t, size_t n)
{
	char hv[65];

	sha_hex(c_vu, n_vu, hv);
	snprintf(t, n, "{\"artifacts\":[" V2_ART "],\"objects\":[{\"hash\":\"%s\","
		 "\"size\":%zu}],\"blocks\":[{\"encoding\":\"none\",\"objects\":1,"
		 "\"stored_size\":%zu}]}", key_vu, n_vu, hv, hv, n_vu, n_vu);
	return t;
}

/* The manifest cap on a zstd index (SPEC.md 12.2) of size bytes of text, in the vector
 * name: at the cap it loads; a byte below it, refused, naming the text's size. */
static void
text_cap(const char *name, size_t size)
{
	char cmd[64], text[256];

	snprintf(cmd, sizeof cmd, "load-max-manifest-bytes-%zu", size);
	expect(name, cmd, 0, "");
	snprintf(cmd, sizeof cmd, "load-max-manifest-bytes-%zu", size - 1);
	snprintf(text, sizeof text, "%s: index: %zu bytes of text, over the manifest cap of %zu",
		 name, size, size - 1);
	expect(name, cmd, 1, text);
}

/* An index a writer never compresses: a zstd frame of one raw block, 9 bytes longer than
 * its text, refused as such (SPEC.md 12.3). The manifest cap is told of its stored size. */
static void
index_raw_frame(void)
{
	static const char *const name = "v2-index-zstd-raw.mcache";
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3};
	struct buf f = {0}, c = {0};
	char index[1024], cmd[64], text[256];
	size_t len = strlen(vu_index(index, sizeof index));

	put(&f, head, sizeof head);
	put_block(&f, 1, 0, (uint32_t)len);
	put(&f, index, len);
	put(&c, index, len);
	snprintf(text, sizeof text, "%s: manifest: index is stored as zstd in %zu bytes, not "
		 "fewer than the %zu it holds (a writer stores it as is)", name, f.n, len);
	v2_zstd_index(name, &f, &c, 1, text);
	snprintf(cmd, sizeof cmd, "load-max-manifest-bytes-%zu", len);
	snprintf(text, sizeof text, "%s: index: stored in %zu bytes, over the manifest cap of %zu",
		 name, f.n, len);
	expect(name, cmd, 1, text);
	free(f.p);
	free(c.p);
}

static void
expansion_boundaries(void)
{
	static const char over[] = "more than the expansion cap of 4096";
	/* RLE frames of one block: 10 bytes stored */
	const struct {
		const char *name;
		uint32_t size;
		int code;
	} obj[] = {
		{"expansion-object-at-cap.mcache", CAP * 10, 0},
		{"expansion-object-top.mcache", CAP * 10 + 9, 0},
		{"expansion-object-over.mcache", CAP * 10 + 10, 1},
	}, blk[] = {
		{"v2-expansion-block-at-cap.mcache", CAP * 10, 0},
		{"v2-expansion-block-top.mcache", CAP * 10 + 9, 0},
		{"v2-expansion-block-over.mcache", CAP * 10 + 10, 1},
	};
	char index[1024];
	size_t i, k, len;

	for (i = 0; i < sizeof obj / sizeof obj[0]; i++) {
		struct buf f = {0}, c = {0};
		rle_run(&f, 0, obj[i].size, 'b', NULL, &c);
		if (f.n != 10)
			die("expansion frame");
		zstd_object_as(obj[i].name, "zstd:0:", f.p, f.n, c.p, c.n, NULL, obj[i].code,
			       obj[i].code ? over : "");
		free(f.p);
		free(c.p);
		memset(&f, 0, sizeof f);
		memset(&c, 0, sizeof c);
		rle_run(&f, 0, blk[i].size, 'b', NULL, &c);
		v2_zstd_block(blk[i].name, &f, &c, blk[i].code, blk[i].code ? over : "");
		free(f.p);
		free(c.p);
	}
	/* The index: spaces before its text (insignificant whitespace), in k RLE blocks
	 * and a raw one: a stored size T of 6 + 4k + 3 + len, a size of T * 4096 (at the
	 * cap), T * 4096 + T - 1 (its top), T * 4097 (over). */
	len = strlen(vu_index(index, sizeof index));
	for (i = 0; i < 3; i++) {
		static const char *const names[] = {"v2-expansion-index-at-cap.mcache",
						    "v2-expansion-index-top.mcache",
						    "v2-expansion-index-over.mcache"};
		struct buf f = {0}, c = {0};
		size_t stored = 0, size = 0, spaces;
		for (k = 1; k < 64; k++) {
			stored = 6 + 4 * (k + 1) + 3 + len;
			size = i == 0 ? stored * CAP : i == 1 ? stored * CAP + stored - 1
							      : stored * (CAP + 1);
			spaces = size - len;
			if (spaces > k * 131072 && spaces <= (k + 1) * 131072)
				break;
		}
		spaces = size - len;
		rle_run(&f, k, (uint32_t)(spaces - k * 131072), ' ', index, &c);
		if (f.n != stored || c.n != size)
			die("expansion index frame");
		v2_zstd_index(names[i], &f, &c, i < 2 ? 0 : 1, i < 2 ? "" : over);
		if (i == 0)
			text_cap(names[i], c.n);
		free(f.p);
		free(c.p);
	}
}

/* ---- sums of sizes that pass 2^64 - 1 (SPEC.md section 7) ----
 * Indexes of thousands of entries, each size 2^53 - 1, the largest an integer field
 * holds: 2,049 of them sum past 2^64 - 1. Loaded with every byte cap at 2^64 - 1
 * (load-size-caps-max), so that the sum alone refuses them. The index is compressed by
 * the library; no block is read. */

#define BIG "9007199254740991" /* 2^53 - 1 */

/* Appends the text s. */
static void
puts_buf(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* A bundle of the index text c (zstd-compressed here) and no block, refused with text. */
static void
sum_vector(const char *name, struct buf *c, const char *text)
{
	struct buf f = {0};
	char msg[256];
	mc_zenc *z;

	if (mc__zenc_new_window(ctx, 3, MC_BLOCK_WINDOW_LOG, &z) != MC_OK ||
	    mc__zenc_run(z, c->p, c->n, 1, (mc_out_fn)bomb_out, &f) != MC_OK)
		die(name);
	mc__zenc_free(z);
	snprintf(msg, sizeof msg, "%s: %s", name, text);
	v2_framed(name, &f, c, 0, "load-size-caps-max", 1, msg);
	free(f.p);
	free(c->p);
}

/* The index of artifacts pgo "k0000".. (nart, each of 2^53 - 1 bytes) all naming one
 * content, stored in nobj objects (the first, then nobj - 1 repeats), in blocks of per
 * objects each, stored as is or (zstd) as 10 bytes. */
static void
sum_index(struct buf *c, size_t nart, size_t nobj, size_t per, int zstd)
{
	char h[65], e[256];
	size_t i;

	sha_hex("x", 1, h);
	puts_buf(c, "{\"artifacts\":[");
	for (i = 0; i < nart; i++) {
		snprintf(e, sizeof e, "%s{\"type\":\"pgo\",\"key\":\"k%04zu\",\"size\":" BIG
			 ",\"hash\":\"%s\"}", i > 0 ? "," : "", i, h);
		puts_buf(c, e);
	}
	puts_buf(c, "],\"objects\":[");
	for (i = 0; i < nobj; i++) {
		snprintf(e, sizeof e, "%s{\"hash\":\"%s\",\"size\":" BIG "}", i > 0 ? "," : "", h);
		puts_buf(c, e);
	}
	puts_buf(c, "],\"blocks\":[");
	for (i = 0; i < nobj / per; i++) {
		if (zstd)
			snprintf(e, sizeof e, "%s{\"encoding\":\"zstd\",\"objects\":%zu,"
				 "\"stored_size\":10,\"stored_hash\":\"%s\"}", i > 0 ? "," : "", per, h);
		else
			snprintf(e, sizeof e, "%s{\"encoding\":\"none\",\"objects\":%zu,"
				 "\"stored_size\":" BIG "}", i > 0 ? "," : "", per);
		puts_buf(c, e);
	}
	puts_buf(c, "]}");
}

/* ---- zstd frames no writer makes (SPEC.md sections 3.3 and 12.3) ----
 * A writer stores a content as zstd only when the frame is smaller, so never an empty
 * one. Format 2 readers refuse a zstd block (or index) that is not smaller: a 10-byte RLE
 * frame of 11 bytes loads, of 10 bytes is refused, as is the 9-byte frame of an empty
 * content. Format 1 readers take such objects, as they always did: a raw-block frame of
 * the vu config, and the empty frame. */
static void
zstd_not_smaller(void)
{
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3};
	static const char not_smaller[] = "v2-zstd-block-not-smaller.mcache: index: blocks[0] "
		"is stored as zstd in 10 bytes, not fewer than the 10 it holds";
	static const char empty[] = "v2-zstd-block-empty.mcache: index: blocks[0] is stored "
		"as zstd in 9 bytes, not fewer than the 0 it holds";
	struct buf f = {0}, c = {0};

	rle_run(&f, 0, 11, 'b', NULL, &c);
	v2_zstd_block("v2-zstd-block-smaller.mcache", &f, &c, 0, "");
	free(f.p);
	free(c.p);
	memset(&f, 0, sizeof f);
	memset(&c, 0, sizeof c);
	rle_run(&f, 0, 10, 'b', NULL, &c);
	v2_zstd_block("v2-zstd-block-not-smaller.mcache", &f, &c, 1, not_smaller);
	free(f.p);
	free(c.p);
	memset(&f, 0, sizeof f);
	memset(&c, 0, sizeof c);
	put(&f, head, sizeof head);
	put_block(&f, 1, 0, 0);
	v2_zstd_block("v2-zstd-block-empty.mcache", &f, &c, 1, empty);
	zstd_object_as("zstd-object-empty.mcache", "zstd:0:", f.p, f.n, (const unsigned char *)"",
		       0, NULL, 0, "");
	free(f.p);
	memset(&f, 0, sizeof f);
	put(&f, head, sizeof head);
	put_block(&f, 1, 0, (uint32_t)n_vu);
	put(&f, c_vu, n_vu);
	zstd_object_as("zstd-object-not-smaller.mcache", "zstd:0:", f.p, f.n, c_vu, n_vu, NULL, 0,
		       "");
	free(f.p);
}

/* ---- a block's size (SPEC.md section 12.3) ---- */

/* The per-content cap bounds a block's content, the sum of its objects' sizes, as it
 * does its stored bytes: a 10-byte RLE frame of 300 bytes, cut into objects of 100 and
 * 200, loads with a cap of 300 and is refused with 299. */
static void
block_caps(void)
{
	static const char *const name = "v2-block-cap.mcache";
	static const size_t size[2] = {100, 200};
	struct buf f = {0}, c = {0};

	rle_run(&f, 0, 300, 'b', NULL, &c);
	v2_block_of(name, &f, &c, size, 2, 0, "");
	expect(name, "load-max-artifact-bytes-300", 0, "");
	expect(name, "load-max-artifact-bytes-299", 1, "v2-block-cap.mcache: index: blocks[0] "
	       "holds 300 bytes of content, over the per-artifact cap of 299 bytes");
	free(f.p);
	free(c.p);
}

/* Appends to the frame f, and to its content c, n bytes of x as RLE blocks of at most
 * 128 KiB (the block maximum); last: the run's last block ends the frame. */
void
rle_bytes(struct buf *f, struct buf *c, int x, size_t n, int last)
{
	unsigned char *fill = malloc(131072), b = (unsigned char)x;

	if (fill == NULL)
		die("rle_bytes");
	memset(fill, x, 131072);
	while (n > 0) {
		uint32_t k = n < 131072 ? (uint32_t)n : 131072;
		put_block(f, last && k == n, 1, k);
		put(f, &b, 1);
		put(c, fill, k);
		n -= k;
	}
	free(fill);
}

/* A writer cuts a block before the object that would take it past 16 MiB, so a block of
 * several objects holds at most 16 MiB and a larger object is a block alone: objects of
 * 8 MiB (a raw block of 4,200 bytes, then RLE) and of 8 MiB or 8 MiB + 1 (RLE) in one
 * block, and one of 16 MiB + 1 alone. The raw bytes keep the expansion under the cap. */
static void
block_max(void)
{
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3};
	static const struct {
		const char *name;
		size_t n, size[2];
		int code;
	} v[] = {
		{"v2-block-max-at.mcache", 2, {8u << 20, 8u << 20}, 0},
		{"v2-block-max-over.mcache", 2, {8u << 20, (8u << 20) + 1}, 1},
		{"v2-block-max-alone.mcache", 1, {(16u << 20) + 1, 0}, 0},
	};
	char raw[4200], text[256];
	size_t i;

	memset(raw, 'a', sizeof raw);
	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		struct buf f = {0}, c = {0};
		put(&f, head, sizeof head);
		put_block(&f, 0, 0, sizeof raw);
		put(&f, raw, sizeof raw);
		put(&c, raw, sizeof raw);
		rle_bytes(&f, &c, 'b', v[i].size[0] - sizeof raw, v[i].n == 1);
		if (v[i].n == 2)
			rle_bytes(&f, &c, 'c', v[i].size[1], 1);
		snprintf(text, sizeof text, "%s: index: blocks[0] holds 2 objects of %zu bytes, over "
			 "the 16777216 bytes (16 MiB) a block of several objects may hold", v[i].name,
			 c.n);
		v2_block_of(v[i].name, &f, &c, v[i].size, v[i].n, v[i].code, v[i].code ? text : "");
		free(f.p);
		free(c.p);
	}
}

/* One zstd block of 2,049 objects: the block's size. 2,049 artifacts of one object: the
 * artifacts' total. One artifact, its content stored 2,049 times, a block each: the
 * contents' total, repeats counted (each is read). 2,048 times: the contents' total fits
 * (2^64 - 2,048), the blocks' stored bytes do, but not with their headers: where the
 * members lie. */
static void
size_sums(void)
{
	static const struct {
		const char *name;
		size_t nart, nobj, per;
		int zstd;
		const char *text;
	} v[] = {
		{"v2-sum-block-wraps.mcache", 1, 2049, 2049, 1,
		 "index: blocks[0]: its objects' sizes overflow a 64-bit sum"},
		{"v2-sum-artifacts-wrap.mcache", 2049, 1, 1, 0,
		 "index: the artifacts' sizes overflow a 64-bit sum"},
		{"v2-sum-contents-wrap.mcache", 1, 2049, 1, 0,
		 "index: the contents' sizes overflow a 64-bit sum"},
		{"v2-sum-members-wrap.mcache", 1, 2048, 1, 0,
		 "the sizes of its members overflow a 64-bit sum"},
	};
	size_t i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		struct buf c = {0};
		sum_index(&c, v[i].nart, v[i].nobj, v[i].per, v[i].zstd);
		sum_vector(v[i].name, &c, v[i].text);
	}
}

void
version2(void)
{
	size_t at;

	fmt_version = 2;
	valid_trio("v2-");
	graph_entries("v2-");
	expansion_boundaries();
	index_raw_frame();
	at = v2_member_at("v2-valid-signed.mcache", "blocks/0");
	v2_changed("v2-valid-signed.mcache", "v2-flip-block.mcache", at + 20, 0,
		   "blocks/0: stored bytes do not match their hash");
	v2_changed("v2-valid-signed.mcache", "v2-trunc-block.mcache", at + 20, 1, "truncated");
	at = v2_member_at("v2-valid-signed.mcache", "index.json.zst");
	v2_changed("v2-valid-signed.mcache", "v2-flip-index.mcache", at + 20, 0,
		   "index.json.zst: stored bytes do not match their hash");
	at = v2_member_at("v2-valid-plain.mcache", "blocks/0");
	v2_changed("v2-valid-plain.mcache", "v2-flip-plain-block.mcache", at + 20, 0,
		   "content does not match its hash");
	version2_indexes();
	version2_selection();
	size_sums();
	block_caps();
	block_max();
	zstd_not_smaller();
	gpu_targets();
}
