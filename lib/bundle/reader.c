/*
 * reader.c - opens a bundle and reads it strictly: the manifest, the signatures, then
 * each object in the order the manifest implies, checking every header, size, hash,
 * padding byte and the end of the archive. Also the bundle's trust policy, judged by
 * sign/policy.c.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "bundle/bundle.h"

#define SIG_MEMBER_MAX 16384
#define SIG_COUNT_MAX 64

/* The n padding bytes after member must be zero. */
static int
check_padding(mc_ctx *ctx, const char *path, const unsigned char *pad, size_t n,
	      const char *member)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (pad[i] != 0)
			return mc__err(ctx, MC_ERR_MALFORMED, "%s: nonzero padding after member %.100s",
				       path, member);
	return MC_OK;
}

static int
read_padding(mc_bundle *b, uint64_t size, const char *member)
{
	unsigned char pad[MC_TAR_BLOCK];
	size_t n = (size_t)((MC_TAR_BLOCK - size % MC_TAR_BLOCK) % MC_TAR_BLOCK);
	int rc;

	if (n == 0)
		return MC_OK;
	if ((rc = mc__zin_read(b->z, pad, n)) != MC_OK)
		return rc;
	return check_padding(b->ctx, b->path, pad, n, member);
}

/* Parses header h of the bundle at path: MC_OK with name and size, 1 for an
 * end-of-archive block; errors name the bundle. */
static int
parse_header(mc_ctx *ctx, const char *path, const unsigned char *h, char *name, uint64_t *size)
{
	int rc = mc__tar_header_parse(ctx, h, name, size);

	if (rc < 0) {
		char msg[MC_ERRBUF];
		snprintf(msg, sizeof msg, "%s", ctx->err);
		return mc__err(ctx, rc, "%s: %s", path, msg);
	}
	return rc;
}

/* Reads the next header: MC_OK with name and size, 1 at the end-of-archive block. */
static int
next_header(mc_bundle *b, char *name, uint64_t *size)
{
	unsigned char h[MC_TAR_BLOCK];
	int rc;

	if ((rc = mc__zin_read(b->z, h, sizeof h)) != MC_OK)
		return rc;
	return parse_header(b->ctx, b->path, h, name, size);
}

static int
sig_name_ok(const char *name, char id[17])
{
	size_t pl = strlen(MC_MEMBER_SIG_PREFIX), i;

	if (strlen(name) != pl + 16 + strlen(MC_MEMBER_SIG_SUFFIX) ||
	    strncmp(name, MC_MEMBER_SIG_PREFIX, pl) != 0 ||
	    strcmp(name + pl + 16, MC_MEMBER_SIG_SUFFIX) != 0)
		return 0;
	for (i = 0; i < 16; i++) {
		char c = name[pl + i];
		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')))
			return 0;
		id[i] = c;
	}
	id[16] = '\0';
	return 1;
}

static int
read_member(mc_bundle *b, const char *name, uint64_t size, unsigned char **out)
{
	unsigned char *buf = malloc(size + 1);
	int rc;

	*out = NULL;
	if (buf == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = mc__zin_read(b->z, buf, (size_t)size)) != MC_OK ||
	    (rc = read_padding(b, size, name)) != MC_OK) {
		free(buf);
		return rc;
	}
	buf[size] = '\0';
	*out = buf;
	return MC_OK;
}

/* Manifests up to this size are parsed from memory; larger ones are copied, as they
 * are read and hashed, to a private temp file and parsed from there in windows, so
 * that memory does not grow with the manifest. */
#define MANIFEST_IN_MEMORY (1u << 20)
#define MANIFEST_PIECE (64u * 1024)

/* Reads the manifest member of size bytes, giving the prehash its signatures sign;
 * the first time (first set) also checks and parses it into b->m. */
static int
read_manifest(mc_bundle *b, uint64_t size, int first, unsigned char prehash[MC_SIG_PREHASH])
{
	crypto_generichash_state hs;
	struct mc_mcheck chk;
	unsigned char *buf;
	uint64_t left = size;
	int fd = -1, rc = MC_OK;

	if (first && size <= MANIFEST_IN_MEMORY) {
		if ((rc = read_member(b, MC_MEMBER_MANIFEST, size, &buf)) != MC_OK)
			return rc;
		mc__sig_prehash(buf, (size_t)size, prehash);
		rc = mc__manifest_parse(b->ctx, buf, (size_t)size, &b->m);
		free(buf);
		goto parsed;
	}
	if ((buf = malloc(MANIFEST_PIECE)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if (first && (fd = mc__open_temp_anon(b->ctx)) < 0) {
		char msg[MC_ERRBUF];
		snprintf(msg, sizeof msg, "%s", b->ctx->err);
		free(buf);
		return mc__err(b->ctx, MC_ERR_IO, "%s: a manifest of %llu bytes is read through a "
			       "temporary file: %s", b->path, (unsigned long long)size, msg);
	}
	mc__mcheck_init(&chk);
	crypto_generichash_init(&hs, NULL, 0, MC_SIG_PREHASH); /* as mc__sig_prehash */
	while (rc == MC_OK && left > 0) {
		size_t k = left < MANIFEST_PIECE ? (size_t)left : MANIFEST_PIECE;
		if ((rc = mc__zin_read(b->z, buf, k)) != MC_OK)
			break;
		crypto_generichash_update(&hs, buf, k);
		if (first) {
			mc__mcheck_feed(&chk, buf, k);
			if (mc__write_all(fd, buf, k) != 0)
				rc = mc__errno(b->ctx, MC_ERR_IO, "cannot write the manifest's temporary "
					       "copy", b->path);
		}
		left -= k;
	}
	free(buf);
	if (rc == MC_OK)
		rc = read_padding(b, size, MC_MEMBER_MANIFEST);
	crypto_generichash_final(&hs, prehash, MC_SIG_PREHASH);
	if (rc != MC_OK || !first) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rc = mc__manifest_parse_fd(b->ctx, fd, size, &chk, &b->m);
	close(fd);
parsed: /* the parser's messages do not name the file */
	if (rc != MC_OK) {
		char msg[MC_ERRBUF];
		snprintf(msg, sizeof msg, "%s", b->ctx->err);
		return mc__err(b->ctx, rc, "%s: %s", b->path, msg);
	}
	return MC_OK;
}

/* (Re)starts the stream and reads the manifest and signatures. The first time they
 * are kept; later passes must see the same bytes. */
static int
open_stream(mc_bundle *b)
{
	int first = !b->have_manifest;
	unsigned char prehash[MC_SIG_PREHASH];
	char name[101], prev[101] = "";
	unsigned char *buf;
	uint64_t size;
	size_t nsig = 0;
	int rc;

	mc__zin_free(b->z);
	b->z = NULL;
	b->fresh = 0;
	if (lseek(b->fd, 0, SEEK_SET) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot seek", b->path);
	if ((rc = mc__zin_new(b->ctx, b->fd, b->path, &b->z)) != MC_OK)
		return rc;
	if ((rc = next_header(b, name, &size)) != MC_OK) {
		if (rc == 1)
			rc = mc__err(b->ctx, MC_ERR_MALFORMED, "%s: empty archive", b->path);
		return rc;
	}
	if (strcmp(name, MC_MEMBER_MANIFEST) != 0)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: first member is '%.100s', not %s", b->path,
			       name, MC_MEMBER_MANIFEST);
	if (size > b->ctx->max_manifest)
		return mc__err(b->ctx, MC_ERR_LIMIT, "%s: manifest of %llu bytes is over the cap of %llu",
			       b->path, (unsigned long long)size,
			       (unsigned long long)b->ctx->max_manifest);
	if ((rc = read_manifest(b, size, first, prehash)) != MC_OK)
		return rc;
	if (first) {
		b->have_manifest = 1;
		b->mlen = (size_t)size;
		memcpy(b->mprehash, prehash, sizeof prehash);
	} else if (size != b->mlen || sodium_memcmp(prehash, b->mprehash, sizeof prehash) != 0) {
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	}
	for (;;) {
		char id[17];

		if ((rc = next_header(b, name, &size)) < 0)
			return rc;
		/* The first header after the signatures is read again, with the objects. */
		if (rc == 1 || strncmp(name, MC_MEMBER_SIG_PREFIX, strlen(MC_MEMBER_SIG_PREFIX)) != 0)
			break;
		if (!sig_name_ok(name, id))
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: bad signature member name '%.100s'",
				       b->path, name);
		if (strcmp(name, prev) <= 0)
			return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: signature members out of order or "
				       "repeated at '%s'", b->path, name);
		memcpy(prev, name, sizeof prev);
		if (size > SIG_MEMBER_MAX || nsig >= SIG_COUNT_MAX)
			return mc__err(b->ctx, MC_ERR_LIMIT, "%s: signature member too large or too many "
				       "signatures", b->path);
		if ((rc = read_member(b, name, size, &buf)) != MC_OK)
			return rc;
		if (first) {
			struct mc_bsig *s = realloc(b->sigs, (b->nsigs + 1) * sizeof *s);
			if (s == NULL) {
				free(buf);
				return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
			}
			b->sigs = s;
			s = &b->sigs[b->nsigs];
			memset(s, 0, sizeof *s);
			if ((rc = mc__sig_parse(b->ctx, (const char *)buf, (size_t)size, 1, &s->sig)) != MC_OK) {
				char msg[MC_ERRBUF];
				snprintf(msg, sizeof msg, "%s", b->ctx->err);
				free(buf);
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member %s: %s", b->path, name, msg);
			}
			s->text = (char *)buf;
			s->len = (size_t)size;
			b->nsigs++;
			if (strcmp(s->sig.id, id) != 0)
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member %s holds a signature by "
					       "key %s", b->path, name, s->sig.id);
		} else {
			int same = nsig < b->nsigs && size == b->sigs[nsig].len &&
				   memcmp(buf, b->sigs[nsig].text, (size_t)size) == 0;
			free(buf);
			if (!same)
				return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
		}
		nsig++;
	}
	if (!first && nsig != b->nsigs)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	b->fresh = 1;
	return MC_OK;
}

/* Reads n bytes at off of the bundle's file; a short file is a truncated bundle. */
static int
bundle_pread(mc_ctx *ctx, const mc_bundle *b, void *buf, size_t n, uint64_t off)
{
	if (mc__pread_full(b->fd, buf, n, off) == 0)
		return MC_OK;
	if (errno == 0)
		return mc__err(ctx, MC_ERR_MALFORMED, "%s: truncated", b->path);
	return mc__errno(ctx, MC_ERR_IO, "cannot read", b->path);
}

int
mc__bundle_manifest(mc_bundle *b, unsigned char **out)
{
	unsigned char prehash[MC_SIG_PREHASH], *buf;
	int rc;

	*out = NULL;
	if ((buf = malloc(b->mlen + 1)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = bundle_pread(b->ctx, b, buf, b->mlen, MC_TAR_BLOCK)) != MC_OK) {
		free(buf);
		return rc;
	}
	mc__sig_prehash(buf, b->mlen, prehash);
	if (sodium_memcmp(prehash, b->mprehash, sizeof prehash) != 0) {
		free(buf);
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	}
	buf[b->mlen] = '\0';
	*out = buf;
	return MC_OK;
}

int
mc_bundle_open(mc_ctx *ctx, const char *path, mc_bundle **out)
{
	mc_bundle *b;
	struct stat st;
	int rc;

	if (ctx == NULL || path == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((b = calloc(1, sizeof *b)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	b->ctx = ctx;
	mc__policy_init(&b->policy);
	b->fd = -1;
	mc__acur_init(&b->cur, ctx, &b->m, mc__find_type);
	if ((b->path = mc__strdup(path)) == NULL) {
		mc_bundle_free(b);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if ((rc = mc__open_regular(ctx, path, &b->fd, &st)) != MC_OK) {
		mc_bundle_free(b);
		return rc;
	}
	if ((rc = open_stream(b)) != MC_OK) {
		mc_bundle_free(b);
		return rc;
	}
	*out = b;
	return MC_OK;
}

void
mc_bundle_free(mc_bundle *b)
{
	size_t i;

	if (b == NULL)
		return;
	mc__zin_free(b->z);
	mc__zdec_free(b->dec);
	if (b->fd >= 0)
		close(b->fd);
	free(b->path);
	mc__manifest_free(&b->m);
	for (i = 0; i < b->nsigs; i++) {
		mc__sig_clear(&b->sigs[i].sig);
		free(b->sigs[i].text);
	}
	free(b->sigs);
	mc__policy_clear(&b->policy);
	for (i = 0; i < b->ntypes; i++)
		free(b->types[i]);
	free(b->types);
	free(b->sel);
	mc__acur_free(&b->cur);
	free(b);
}

/* ---- the objects ----
 * Each object member is read with pread at the offset the manifest implies, so that
 * workers check and decode objects independently. The outcome is the one of the
 * lowest-numbered object that failed, as if the members were read in order. */

struct sstate;

struct sworker { /* what a worker keeps between objects */
	struct sstate *s;
	unsigned id;
	mc_ctx *ctx;
	mc_zdec *dec;
	unsigned char *in, *out;
	size_t incap, outcap;
	struct mc_mobject obj;  /* the current object's record */
	char hex[MC_HASH_HEX]; /* and its content hash */
};

struct sstate {
	mc_bundle *b;
	mc_par_sink psink;
	mc_obj_sink sink, raw;
	void *ud;
	uint64_t *offs; /* of each object's header, then of the end blocks */
	/* Per object: set when an artifact gives its content's SHA-256, which a worker then
	 * computes; sha keeps a keyed 64-bit digest of it, 8 bytes an object rather than
	 * 32, which a signer cannot aim a false field at (both NULL when no artifact has
	 * one). */
	unsigned char *wants_sha;
	uint64_t *sha;
	unsigned char sha_key[crypto_shorthash_KEYBYTES];
	struct sworker *w;
	_Atomic uint64_t done;
	uint64_t total;
};

static uint64_t
padded(uint64_t n)
{
	return (n + MC_TAR_BLOCK - 1) / MC_TAR_BLOCK * MC_TAR_BLOCK;
}

static int
pread_full(struct sworker *w, void *buf, size_t n, uint64_t off)
{
	return bundle_pread(w->ctx, w->s->b, buf, n, off);
}

static int
grow(struct sworker *w, unsigned char **buf, size_t *cap, size_t need)
{
	unsigned char *p;

	if (need <= *cap)
		return MC_OK;
	if (need < 65536)
		need = 65536;
	if ((p = realloc(*buf, need)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	*buf = p;
	*cap = need;
	return MC_OK;
}

static int
deliver(struct sworker *w, size_t i, const unsigned char *buf, size_t n)
{
	struct sstate *s = w->s;

	if (s->psink != NULL)
		return s->psink(s->ud, w->id, w->ctx, i, buf, n);
	return s->sink != NULL ? s->sink(s->ud, i, buf, n) : MC_OK;
}

static int
object_error(struct sworker *w, int rc)
{
	const mc_bundle *b = w->s->b;

	if (rc == MC_ERR_MALFORMED && strncmp(w->ctx->err, b->path, strlen(b->path)) != 0) {
		char msg[MC_ERRBUF];
		snprintf(msg, sizeof msg, "%s", w->ctx->err);
		rc = mc__err(w->ctx, rc, "%s: object %s: %s", b->path, w->hex, msg);
	}
	return rc;
}

static uint64_t
sha_digest(const struct sstate *s, const unsigned char sha[32])
{
	unsigned char d[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(d, sha, 32, s->sha_key);
	memcpy(&v, d, sizeof v);
	return v;
}

/* A content that decompressed to other bytes than its hash names: the stored bytes
 * matched, so the signer listed a false hash. */
static int
content_mismatch(struct sworker *w)
{
	return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s: content does not match its hash",
		       w->s->b->path, w->hex);
}

/* An object small enough to hold: its stored bytes are authenticated before any of
 * them reaches the decompressor. */
static int
whole_object(struct sworker *w, size_t i, uint64_t off, const char *member)
{
	const mc_bundle *b = w->s->b;
	const struct mc_mobject *o = &w->obj;
	size_t n = (size_t)o->stored_size, np = (size_t)padded(o->stored_size);
	unsigned char hash[MC_HASH_BYTES];
	const unsigned char *content;
	int rc, overflow = 0;

	if ((rc = grow(w, &w->in, &w->incap, np)) != MC_OK || (rc = pread_full(w, w->in, np, off)) != MC_OK)
		return rc;
	crypto_generichash(hash, sizeof hash, w->in, n, NULL, 0);
	if (sodium_memcmp(hash, o->stored_hash, sizeof hash) != 0)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s: stored bytes do not match "
			       "their hash", b->path, w->hex);
	if ((rc = check_padding(w->ctx, b->path, w->in + n, np - n, member)) != MC_OK)
		return rc;
	if (w->s->raw != NULL && n > 0 && (rc = w->s->raw(w->s->ud, i, w->in, n)) != MC_OK)
		return rc;
	content = w->in;
	if (o->encoding == MC_ENC_ZSTD) {
		size_t produced = 0;
		if ((rc = grow(w, &w->out, &w->outcap, (size_t)o->size + 1)) != MC_OK)
			return rc;
		if (w->dec == NULL && (rc = mc__zdec_new(w->ctx, &w->dec)) != MC_OK)
			return rc;
		rc = mc__zdec_whole(w->dec, w->in, n, w->out, (size_t)o->size, &produced, &overflow);
		if (overflow)
			return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s expands past its declared "
				       "%llu bytes", b->path, w->hex, (unsigned long long)o->size);
		if (rc != MC_OK)
			return object_error(w, rc);
		if (produced != o->size)
			return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s is %llu bytes, the "
				       "manifest says %llu", b->path, w->hex,
				       (unsigned long long)produced, (unsigned long long)o->size);
		content = w->out;
		crypto_generichash(hash, sizeof hash, content, (size_t)o->size, NULL, 0);
		if (sodium_memcmp(hash, o->hash, sizeof hash) != 0)
			return content_mismatch(w);
	}
	if (w->s->wants_sha != NULL && w->s->wants_sha[i]) {
		unsigned char sha[32];
		crypto_hash_sha256(sha, content, (size_t)o->size);
		w->s->sha[i] = sha_digest(w->s, sha);
	}
	return o->size > 0 ? deliver(w, i, content, (size_t)o->size) : MC_OK;
}

struct streamed {
	struct sworker *w;
	size_t obj;
	uint64_t produced;
	crypto_generichash_state content; /* of a compressed object's output */
	crypto_hash_sha256_state sha;     /* when wanted */
	int want_sha;
};

static int
streamed_out(void *p, const unsigned char *buf, size_t n)
{
	struct streamed *st = p;
	const mc_bundle *b = st->w->s->b;
	const struct mc_mobject *o = &st->w->obj;

	if (n > o->size - st->produced)
		return mc__err(st->w->ctx, MC_ERR_INTEGRITY, "%s: object %s expands past its declared "
			       "%llu bytes", b->path, st->w->hex, (unsigned long long)o->size);
	st->produced += n;
	if (o->encoding == MC_ENC_ZSTD)
		crypto_generichash_update(&st->content, buf, n);
	if (st->want_sha)
		crypto_hash_sha256_update(&st->sha, buf, n);
	return deliver(st->w, st->obj, buf, n);
}

/* A large object, in chunks; its stored hash is checked at the end, before anything
 * written from it is used. */
static int
streamed_object(struct sworker *w, size_t i, uint64_t off, const char *member)
{
	const mc_bundle *b = w->s->b;
	const struct mc_mobject *o = &w->obj;
	unsigned char hash[MC_HASH_BYTES], pad[MC_TAR_BLOCK];
	crypto_generichash_state gs;
	struct streamed st = {.w = w, .obj = i};
	uint64_t left;
	size_t np;
	int rc = MC_OK, ended = 0;

	if ((rc = grow(w, &w->in, &w->incap, MC_IO_CHUNK)) != MC_OK)
		return rc;
	crypto_generichash_init(&gs, NULL, 0, MC_HASH_BYTES);
	crypto_generichash_init(&st.content, NULL, 0, MC_HASH_BYTES);
	if ((st.want_sha = w->s->wants_sha != NULL && w->s->wants_sha[i]))
		crypto_hash_sha256_init(&st.sha);
	if (o->encoding == MC_ENC_ZSTD) {
		if (w->dec == NULL && (rc = mc__zdec_new(w->ctx, &w->dec)) != MC_OK)
			return rc;
		mc__zdec_reset(w->dec);
	}
	for (left = o->stored_size; left > 0 && rc == MC_OK;) {
		size_t n = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = pread_full(w, w->in, n, off)) != MC_OK)
			break;
		crypto_generichash_update(&gs, w->in, n);
		if (w->s->raw != NULL && (rc = w->s->raw(w->s->ud, i, w->in, n)) != MC_OK)
			break;
		if (o->encoding == MC_ENC_ZSTD)
			rc = mc__zdec_run(w->dec, w->in, n, streamed_out, &st, &ended);
		else
			rc = streamed_out(&st, w->in, n);
		left -= n;
		off += n;
	}
	if (rc == MC_OK && o->encoding == MC_ENC_ZSTD && !ended)
		rc = mc__zdec_run(w->dec, NULL, 0, streamed_out, &st, &ended);
	if (rc != MC_OK)
		return object_error(w, rc);
	crypto_generichash_final(&gs, hash, sizeof hash);
	if (sodium_memcmp(hash, o->stored_hash, sizeof hash) != 0)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s: stored bytes do not match "
			       "their hash", b->path, w->hex);
	if (o->encoding == MC_ENC_ZSTD && !ended)
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: object %s: compressed data ends early",
			       b->path, w->hex);
	if (st.produced != o->size)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s is %llu bytes, the manifest "
			       "says %llu", b->path, w->hex, (unsigned long long)st.produced,
			       (unsigned long long)o->size);
	if (o->encoding == MC_ENC_ZSTD) {
		crypto_generichash_final(&st.content, hash, sizeof hash);
		if (sodium_memcmp(hash, o->hash, sizeof hash) != 0)
			return content_mismatch(w);
	}
	if (st.want_sha) {
		unsigned char sha[32];
		crypto_hash_sha256_final(&st.sha, sha);
		w->s->sha[i] = sha_digest(w->s, sha);
	}
	np = (size_t)(padded(o->stored_size) - o->stored_size);
	if (np > 0 && (rc = pread_full(w, pad, np, off)) != MC_OK)
		return rc;
	return check_padding(w->ctx, b->path, pad, np, member);
}

/* Reads the header at off: MC_OK with name and size, 1 for an end-of-archive block. */
static int
header_at(struct sworker *w, uint64_t off, char *name, uint64_t *size)
{
	const mc_bundle *b = w->s->b;
	unsigned char h[MC_TAR_BLOCK];
	int rc;

	if ((rc = pread_full(w, h, sizeof h, off)) != MC_OK)
		return rc;
	return parse_header(w->ctx, b->path, h, name, size);
}

static int
one_object(struct sworker *w, size_t i, uint64_t off)
{
	const mc_bundle *b = w->s->b;
	const struct mc_mobject *o = &w->obj;
	size_t pl = strlen(MC_MEMBER_OBJ_PREFIX);
	char name[101];
	uint64_t size;
	int rc;

	if ((rc = mc__mobjects(w->ctx, &b->m, i, 1, &w->obj)) != MC_OK)
		return rc;
	mc__hex(o->hash, MC_HASH_BYTES, w->hex);
	if ((rc = header_at(w, off, name, &size)) < 0)
		return rc;
	if (rc == 1)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s listed in the manifest is "
			       "missing", b->path, w->hex);
	if (strncmp(name, MC_MEMBER_OBJ_PREFIX, pl) != 0 || strlen(name) != pl + 64 ||
	    !mc__is_lower_hex(name + pl, 64))
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: unexpected member '%.100s'", b->path, name);
	if (strcmp(name + pl, w->hex) != 0)
		return strcmp(name + pl, w->hex) < 0
			       ? mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s is not listed in the "
					 "manifest (or out of order)", b->path, name + pl)
			       : mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s listed in the "
					 "manifest is missing", b->path, w->hex);
	if (size != o->stored_size)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s is stored in %llu bytes, the "
			       "manifest says %llu", b->path, w->hex, (unsigned long long)size,
			       (unsigned long long)o->stored_size);
	if (o->stored_size <= MC_WHOLE_MAX && o->size <= MC_WHOLE_MAX)
		return whole_object(w, i, off + MC_TAR_BLOCK, name);
	return streamed_object(w, i, off + MC_TAR_BLOCK, name);
}

static int
work(void *ud, unsigned id, mc_ctx *wctx, size_t i)
{
	struct sstate *s = ud;
	struct sworker *w = &s->w[id];
	uint64_t done, n;
	int rc;

	if (w->ctx != wctx) { /* the first object of this worker in this pass */
		mc__zdec_free(w->dec);
		w->dec = NULL;
		w->ctx = wctx;
	}
	if ((rc = one_object(w, i, s->offs[i])) != MC_OK)
		return rc;
	n = w->obj.stored_size;
	done = atomic_fetch_add(&s->done, n) + n;
	if (id == 0)
		mc__progress(s->b->ctx, "verify", done, s->total);
	return MC_OK;
}

/* After the last object: the end-of-archive blocks, then the end of the file. */
static int
check_end(struct sworker *w, uint64_t off)
{
	mc_bundle *b = w->s->b;
	unsigned char zero[MC_TAR_BLOCK];
	char name[101];
	uint64_t size;
	struct stat st;
	size_t i;
	int rc;

	if ((rc = header_at(w, off, name, &size)) < 0)
		return rc;
	if (rc == 0)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: member '%.100s' is not listed in the "
			       "manifest", b->path, name);
	if ((rc = pread_full(w, zero, sizeof zero, off + MC_TAR_BLOCK)) != MC_OK)
		return rc;
	for (i = 0; i < sizeof zero; i++)
		if (zero[i] != 0)
			return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: bad end-of-archive marker", b->path);
	if (fstat(b->fd, &st) != 0)
		return mc__errno(w->ctx, MC_ERR_IO, "cannot read", b->path);
	if ((uint64_t)st.st_size != off + 2 * MC_TAR_BLOCK)
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: data after the end of the archive", b->path);
	return MC_OK;
}

/* The artifacts' SHA-256 fields: before the objects are read (check not set), marks
 * the objects whose SHA-256 the workers are to compute; after, compares each field
 * with its content's. A field decides a destination, so a false one is refused like
 * a false hash. */
static int
sha_walk(mc_bundle *b, struct sstate *s, int check)
{
	const struct mc_martifact *a;
	struct mc_acur cur;
	size_t i;
	int rc = MC_OK;

	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; i < b->m.nartifacts && rc == MC_OK; i++) {
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK || a->sha256 == NULL)
			continue;
		if (!check && s->wants_sha == NULL &&
		    ((s->wants_sha = calloc(b->m.nobjects, 1)) == NULL ||
		     (s->sha = malloc(b->m.nobjects * sizeof *s->sha)) == NULL))
			rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		else if (!check)
			s->wants_sha[a->object] = 1;
		else if (sha_digest(s, a->sha256) != s->sha[a->object])
			rc = mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: %s artifact %.200s: content does "
				     "not match its sha256", b->path, a->type, a->key);
	}
	mc__acur_free(&cur);
	return rc;
}

static int
stream(mc_bundle *b, unsigned nworkers, mc_par_sink psink, mc_obj_sink sink, mc_obj_sink raw,
       void *ud)
{
	struct sstate s;
	struct mc_mobject recs[64]; /* the object table, read 64 records at a time */
	uint64_t off;
	size_t i;
	unsigned k;
	int rc = MC_OK;

	if (!b->fresh && (rc = open_stream(b)) != MC_OK)
		return rc;
	b->fresh = 0;
	memset(&s, 0, sizeof s);
	s.b = b;
	s.psink = psink;
	s.sink = sink;
	s.raw = raw;
	s.ud = ud;
	if (nworkers == 0)
		nworkers = 1;
	if ((s.offs = malloc((b->m.nobjects + 1) * sizeof *s.offs)) == NULL ||
	    (s.w = calloc(nworkers, sizeof *s.w)) == NULL) {
		free(s.offs);
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	}
	off = MC_TAR_BLOCK + padded(b->mlen);
	for (i = 0; i < b->nsigs; i++)
		off += MC_TAR_BLOCK + padded(b->sigs[i].len);
	for (i = 0; i < b->m.nobjects; i++) {
		const struct mc_mobject *o = &recs[i % 64];
		if (i % 64 == 0 &&
		    (rc = mc__mobjects(b->ctx, &b->m, i, b->m.nobjects - i < 64 ? b->m.nobjects - i : 64,
				       recs)) != MC_OK)
			break;
		s.offs[i] = off;
		off += MC_TAR_BLOCK + padded(o->stored_size);
		s.total += o->stored_size;
	}
	s.offs[i] = off;
	if (rc == MC_OK)
		rc = sha_walk(b, &s, 0);
	crypto_shorthash_keygen(s.sha_key);
	if (rc != MC_OK) {
		free(s.offs);
		free(s.w);
		free(s.wants_sha);
		free(s.sha);
		return rc;
	}
	for (k = 0; k < nworkers; k++) {
		s.w[k].s = &s;
		s.w[k].id = k;
	}
	/* The bundle's decoder serves a lone worker, whose context is the bundle's. */
	s.w[0].ctx = b->ctx;
	s.w[0].dec = b->dec;
	b->dec = NULL;
	rc = mc__parallel(b->ctx, b->m.nobjects, nworkers, work, &s);
	if (rc == MC_OK && s.wants_sha != NULL)
		rc = sha_walk(b, &s, 1);
	if (rc == MC_OK) {
		struct sworker end = {.s = &s, .ctx = b->ctx};
		rc = check_end(&end, s.offs[b->m.nobjects]);
	}
	for (k = 0; k < nworkers; k++) {
		if (s.w[k].ctx == b->ctx && b->dec == NULL)
			b->dec = s.w[k].dec; /* kept for the next pass */
		else
			mc__zdec_free(s.w[k].dec);
		free(s.w[k].in);
		free(s.w[k].out);
	}
	free(s.w);
	free(s.offs);
	free(s.wants_sha);
	free(s.sha);
	return rc;
}

int
mc__bundle_stream(mc_bundle *b, mc_obj_sink sink, mc_obj_sink raw, void *ud)
{
	return stream(b, 1, NULL, sink, raw, ud);
}

int
mc__bundle_stream_par(mc_bundle *b, mc_par_sink sink, void *ud)
{
	return stream(b, mc__threads(b->ctx), sink, NULL, NULL, ud);
}

/* ---- trust policy ---- */

int
mc_bundle_trust(mc_bundle *b, const mc_pubkey *pk)
{
	if (b == NULL || pk == NULL)
		return MC_ERR_INVALID;
	return mc__policy_trust(b->ctx, &b->policy, pk);
}

int
mc_bundle_set_threshold(mc_bundle *b, unsigned k)
{
	if (b == NULL || k == 0)
		return MC_ERR_INVALID;
	b->policy.threshold = k;
	return MC_OK;
}

int
mc_bundle_set_min_version(mc_bundle *b, uint64_t v)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->policy.min_version = v;
	return MC_OK;
}

int
mc_bundle_set_now(mc_bundle *b, int64_t t)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->policy.have_now = 1;
	b->policy.now = t;
	return MC_OK;
}

int
mc_bundle_require_label(mc_bundle *b, const char *key, const char *value)
{
	if (b == NULL || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	return mc__policy_require_label(b->ctx, &b->policy, key, value);
}

int
mc_bundle_set_insecure(mc_bundle *b, int insecure)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	b->policy.insecure = insecure != 0;
	return MC_OK;
}

int
mc__bundle_policy(mc_bundle *b)
{
	const struct mc_sig *sigs[SIG_COUNT_MAX]; /* as many as a bundle may have */
	const char **labels = NULL;
	struct mc_policy_facts f = {
		.path = b->path, .prehash = b->mprehash, .sigs = sigs, .nsigs = b->nsigs,
		.version = b->m.bundle_version, .expires = b->m.expires,
	};
	size_t i;
	int rc;

	for (i = 0; i < b->nsigs; i++)
		sigs[i] = &b->sigs[i].sig;
	/* The labels, in the form the policy takes, only when some are required. */
	if (b->policy.nrequired > 0 && b->m.nlabels > 0) {
		if ((labels = malloc(2 * b->m.nlabels * sizeof *labels)) == NULL)
			return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		for (i = 0; i < b->m.nlabels; i++) {
			labels[i] = b->m.labels[i].key;
			labels[b->m.nlabels + i] = b->m.labels[i].value;
		}
		f.label_keys = labels;
		f.label_values = labels + b->m.nlabels;
		f.nlabels = b->m.nlabels;
	}
	rc = mc__policy_check(b->ctx, &b->policy, &f);
	free(labels);
	return rc;
}

int
mc_bundle_check_signatures(mc_bundle *b)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	return mc__bundle_policy(b);
}

int
mc_bundle_verify(mc_bundle *b)
{
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_policy(b)) != MC_OK || (rc = mc__bundle_plan(b)) != MC_OK)
		return rc;
	return mc__bundle_stream_par(b, NULL, NULL);
}

/* ---- accessors ---- */

int64_t
mc_bundle_created(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.created;
}

uint64_t
mc_bundle_version(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.bundle_version;
}

int64_t
mc_bundle_expires(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.expires;
}

size_t
mc_bundle_label_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.nlabels;
}

int
mc_bundle_label(const mc_bundle *b, size_t i, const char **key, const char **value)
{
	if (b == NULL || i >= b->m.nlabels || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	*key = b->m.labels[i].key;
	*value = b->m.labels[i].value;
	return MC_OK;
}

size_t
mc_bundle_signature_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->nsigs;
}

const char *
mc_bundle_signature_key_id(const mc_bundle *b, size_t i)
{
	return b == NULL || i >= b->nsigs ? NULL : b->sigs[i].sig.id;
}

size_t
mc_bundle_artifact_count(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.nartifacts;
}

int
mc_bundle_artifact(const mc_bundle *b, size_t i, const char **type, const char **key,
		   uint64_t *size, const char **hash)
{
	const struct mc_martifact *a;
	struct mc_mobject o;
	char *hex;
	int rc;

	if (b == NULL || i >= b->m.nartifacts)
		return MC_ERR_INVALID;
	/* b is never const itself: mc_bundle_open made it. */
	if ((rc = mc__acur_get(&((mc_bundle *)b)->cur, i, &a)) != MC_OK)
		return rc;
	hex = ((mc_bundle *)b)->hex;
	if (type != NULL)
		*type = a->type;
	if (key != NULL)
		*key = a->key;
	if (size != NULL)
		*size = a->size;
	if (hash != NULL) {
		if ((rc = mc__mobjects(b->ctx, &b->m, a->object, 1, &o)) != MC_OK)
			return rc;
		mc__hex(o.hash, MC_HASH_BYTES, hex);
		*hash = hex;
	}
	return MC_OK;
}

int
mc_bundle_select_type(mc_bundle *b, const char *type)
{
	char **t;

	if (b == NULL || type == NULL)
		return MC_ERR_INVALID;
	if (mc__find_type(b->ctx, type) == NULL)
		return mc__err(b->ctx, MC_ERR_INVALID, "unknown artifact type '%.40s'", type);
	if ((t = realloc(b->types, (b->ntypes + 1) * sizeof *t)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	b->types = t;
	if ((t[b->ntypes] = mc__strdup(type)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	b->ntypes++;
	b->planned = 0;
	return MC_OK;
}

int
mc__type_selected(const mc_bundle *b, const char *type)
{
	size_t i;

	if (b->ntypes == 0)
		return 1;
	for (i = 0; i < b->ntypes; i++)
		if (strcmp(b->types[i], type) == 0)
			return 1;
	return 0;
}
