/*
 * mkvectors_common.c - what the families of mkvectors share: the run (its keys, the
 * test artifacts, expected.tsv), a raw bundle builder, and the writers of the vectors
 * every format version has.
 */
#include "mkvectors.h"

const char *srcdir, *outdir;
mc_ctx *ctx;
mc_seckey *k_test, *k_test2, *k_other;
FILE *tsv;
/* The format version the library's writer makes here: 1 for the vectors of version 1,
 * which must stay byte for byte what they are; 2 for those of section 12. */
int fmt_version = 1;

void
die(const char *what)
{
	fprintf(stderr, "mkvectors: %s: %s\n", what, ctx ? mc_ctx_error(ctx) : "");
	exit(1);
}

/* A writer of the format version in fmt_version. */
int
new_writer(mc_writer **w)
{
	int rc = mc_writer_new(ctx, w);

	return rc == MC_OK ? mc_writer_set_format_version(*w, fmt_version) : rc;
}

unsigned char *
read_in(const char *dir, const char *rel, size_t *len)
{
	char path[4096];
	char *buf;

	snprintf(path, sizeof path, "%s/%s", dir, rel);
	if (mc__read_small_file(ctx, path, 1 << 26, &buf, len) != MC_OK)
		die(path);
	return (unsigned char *)buf;
}

unsigned char *
slurp(const char *rel, size_t *len)
{
	return read_in(srcdir, rel, len);
}

void
spit(const char *name, const void *buf, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", outdir, name);
	if ((f = fopen(path, "wb")) == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0)
		die(path);
}

void
expect(const char *file, const char *cmd, int code, const char *text)
{
	fprintf(tsv, "%s\t%s\t%d\t%s\n", file, cmd, code, text);
}

static mc_seckey *
key(const char *name)
{
	char path[4096];
	mc_seckey *sk;

	snprintf(path, sizeof path, "%s/format/vectors/keys/%s", srcdir, name);
	if (mc_seckey_load(ctx, path, NULL, NULL, &sk) != MC_OK)
		die(path);
	return sk;
}

/* The keys, the test artifacts' contents, and expected.tsv begun. */
void
set_up(void)
{
	char path[4096];

	k_test = key("test.key");
	k_test2 = key("test2.key");
	k_other = key("other.key");
	c_vu = slurp("tests/data/small/vu.best_config", &n_vu);
	c_ig = slurp("tests/data/small/ig.best_config", &n_ig);
	c_pgo = slurp("tests/data/small/code_state.pkl", &n_pgo);
	snprintf(path, sizeof path, "%s/expected.tsv", outdir);
	if ((tsv = fopen(path, "w")) == NULL)
		die(path);
	fprintf(tsv, "# file\tcommand\texit\terror text (substring of stderr)\n");
}

/* ---- a raw bundle builder: any manifest, any members, any headers ---- */

void
put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 4096;
		if ((b->p = realloc(b->p, b->cap)) == NULL)
			die("out of memory");
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

void
put_member_hdr(struct buf *b, const unsigned char hdr[512], const void *data, size_t n)
{
	static const unsigned char zero[512];

	put(b, hdr, 512);
	put(b, data, n);
	put(b, zero, (512 - n % 512) % 512);
}

void
put_member(struct buf *b, const char *name, const void *data, size_t n)
{
	unsigned char hdr[512];

	if (mc__tar_header_render(name, n, hdr) != MC_OK)
		die(name);
	put_member_hdr(b, hdr, data, n);
}

void
put_end(struct buf *b)
{
	static const unsigned char zero[1024];

	put(b, zero, sizeof zero);
}

/* A signature member by sk; tc, when given, is a trusted comment signed as it is, even one
 * the library's writer refuses to sign. */
void
put_sig(struct buf *b, const mc_seckey *sk, const char *manifest, size_t mlen, const char *tc)
{
	struct mc_sig sig;
	char name[64], deftc[128], *text;
	unsigned char *both;
	size_t len;

	snprintf(deftc, sizeof deftc, "timestamp:%d\tfile:manifest.json\thashed", EPOCH);
	if (mc__sig_make(ctx, sk, (const unsigned char *)manifest, mlen, deftc, &sig) != MC_OK)
		die("sign");
	if (tc != NULL) {
		len = strlen(tc);
		free(sig.trusted_comment);
		if ((sig.trusted_comment = mc__strdup(tc)) == NULL || (both = malloc(64 + len)) == NULL)
			die("out of memory");
		memcpy(both, sig.sig, 64);
		memcpy(both + 64, tc, len);
		crypto_sign_detached(sig.global_sig, NULL, both, 64 + len, sk->sk);
		free(both);
	}
	text = mc__sig_render(&sig, &len);
	snprintf(name, sizeof name, "signatures/%s.minisig", sig.id);
	put_member(b, name, text, len);
	free(text);
	mc__sig_clear(&sig);
}

int
bomb_out(struct buf *b, const unsigned char *d, size_t n)
{
	put(b, d, n);
	return MC_OK;
}

void
save_raw(const char *name, const struct buf *tar)
{
	spit(name, tar->p, tar->n);
}

/* A bundle under construction: the manifest member first, signed by the test key. */
void
start(struct buf *b, const char *man)
{
	memset(b, 0, sizeof *b);
	put_member(b, "manifest.json", man, strlen(man));
}

void
start_signed(struct buf *b, const char *man)
{
	start(b, man);
	put_sig(b, k_test, man, strlen(man), NULL);
}

/* Ends the archive, writes the vector and records what loading it must give. */
void
finish(struct buf *b, const char *name, const char *cmd, int code, const char *text)
{
	put_end(b);
	save_raw(name, b);
	expect(name, cmd, code, text);
	free(b->p);
	b->p = NULL;
}

/* Content of the small test artifacts. */
unsigned char *c_vu, *c_ig, *c_pgo;
size_t n_vu, n_ig, n_pgo;
const char *key_vu = "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config";
const char *key_ig = "ig/4284062ea9a84465a56e21b40068c15a3f8fb827c0ab27e61d71153e3e3fadcc.best_config";

void
hexhash(const unsigned char *d, size_t n, char out[65])
{
	unsigned char h[32];

	crypto_generichash(h, 32, d, n, NULL, 0);
	mc__hex(h, 32, out);
}

/* A signed bundle of one pgo artifact (key) stored as zstd: stored is the member's
 * bytes, content what they are meant to decompress to, hash (NULL: the content's) what
 * the manifest calls it; everything else is consistent. */
void
zstd_object_as(const char *name, const char *key, const unsigned char *stored, size_t sn,
	       const unsigned char *content, size_t n, const char *hash, int code,
	       const char *msg)
{
	struct buf b;
	char man[16384], ch[65], sh[65], obj[128];

	if (hash == NULL)
		hexhash(content, n, ch);
	else
		snprintf(ch, sizeof ch, "%s", hash);
	hexhash(stored, sn, sh);
	snprintf(man, sizeof man,
		 "{\"format\":\"megacache\",\"format_version\":1,\"created\":%d,\"bundle_version\":0,"
		 "\"labels\":{},\"artifacts\":[{\"type\":\"pgo\",\"key\":\"%s\",\"size\":%zu,"
		 "\"hash\":\"%s\"}],\"objects\":[{\"hash\":\"%s\",\"size\":%zu,\"encoding\":\"zstd\","
		 "\"stored_size\":%zu,\"stored_hash\":\"%s\"}]}",
		 EPOCH, key, n, ch, ch, n, sn, sh);
	start_signed(&b, man);
	snprintf(obj, sizeof obj, "objects/%s", ch);
	put_member(&b, obj, stored, sn);
	finish(&b, name, "load", code, msg);
}

/* Appends a zstd block header (RFC 8878 3.1.1.2): last flag, type (0 raw, 1 RLE),
 * and size. */
void
put_block(struct buf *f, int last, int type, uint32_t size)
{
	uint32_t v = size << 3 | (uint32_t)type << 1 | (uint32_t)(last != 0);
	unsigned char h[3] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16)};

	put(f, h, 3);
}

/* ---- valid bundles, made by the library ---- */

void
valid(const char *name, int level, const mc_seckey *s1, const mc_seckey *s2)
{
	char path[4096];
	mc_writer *w;

	snprintf(path, sizeof path, "%s/%s", outdir, name);
	if (new_writer(&w) != MC_OK || mc_writer_set_created(w, EPOCH) != MC_OK ||
	    mc_writer_set_compression(w, level) != MC_OK ||
	    mc_writer_set_label(w, "torch", "2.11.0+cu130") != MC_OK ||
	    mc_writer_set_bundle_version(w, 7) != MC_OK ||
	    mc_writer_add_memory(w, "autotune", key_vu, c_vu, n_vu) != MC_OK ||
	    mc_writer_add_memory(w, "autotune", key_ig, c_ig, n_ig) != MC_OK ||
	    mc_writer_add_memory(w, "pgo", "megacache-probe:None:", c_pgo, n_pgo) != MC_OK ||
	    (s1 && mc_writer_add_signer(w, s1) != MC_OK) || (s2 && mc_writer_add_signer(w, s2) != MC_OK) ||
	    mc_writer_save(w, path) != MC_OK)
		die(name);
	mc_writer_free(w);
}

/* A signed bundle of the given (type, key, content) triples, made by the library:
 * what a trusted but careless or hostile producer can sign. */
void
signed_triples(const char *name, const struct triple *t, size_t n)
{
	char path[4096];
	mc_writer *w;
	size_t i;

	snprintf(path, sizeof path, "%s/%s", outdir, name);
	if (new_writer(&w) != MC_OK || mc_writer_set_created(w, EPOCH) != MC_OK)
		die(name);
	for (i = 0; i < n; i++)
		if (mc_writer_add_memory(w, t[i].type, t[i].key, t[i].data, strlen(t[i].data)) != MC_OK)
			die(name);
	if (mc_writer_add_signer(w, k_test) != MC_OK || mc_writer_save(w, path) != MC_OK)
		die(name);
	mc_writer_free(w);
}

/* The valid vectors of the format version being made, their names after pre: signed,
 * stored as is (level 0), and signed by two keys. */
void
valid_trio(const char *pre)
{
	char signed_[64], plain[64], two[64];

	snprintf(signed_, sizeof signed_, "%svalid-signed.mcache", pre);
	snprintf(plain, sizeof plain, "%svalid-plain.mcache", pre);
	snprintf(two, sizeof two, "%svalid-two-signers.mcache", pre);
	valid(signed_, 3, k_test, NULL);
	expect(signed_, "load", 0, "");
	valid(plain, 0, k_test, NULL);
	expect(plain, "load", 0, "");
	valid(two, 3, k_test, k_test2);
	expect(two, "load-threshold2", 0, "");
}

/* The entries of one FX graph key and of one AOTAutograd key (SPEC.md section 4): two
 * each, given by torch's key alone as a blob gives them, each kept with its entry. */
void
graph_entries(const char *pre)
{
	char path[4096], name[64];
	mc_writer *w;

	snprintf(name, sizeof name, "%svalid-entries.mcache", pre);
	snprintf(path, sizeof path, "%s/%s", outdir, name);
	if (new_writer(&w) != MC_OK || mc_writer_set_created(w, EPOCH) != MC_OK ||
	    mc_writer_add_memory(w, "inductor", FX_KEY, c_vu, n_vu) != MC_OK ||
	    mc_writer_add_memory(w, "inductor", FX_KEY, c_ig, n_ig) != MC_OK ||
	    mc_writer_add_memory(w, "aot_autograd", AOT_KEY, c_ig, n_ig) != MC_OK ||
	    mc_writer_add_memory(w, "aot_autograd", AOT_KEY, c_pgo, n_pgo) != MC_OK ||
	    mc_writer_add_signer(w, k_test) != MC_OK || mc_writer_save(w, path) != MC_OK)
		die(name);
	mc_writer_free(w);
	expect(name, "load", 0, "");
	expect(name, "export", 0, "");
}
