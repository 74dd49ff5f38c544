/*
 * stream.c - reads a bundle's objects strictly, after its manifest and signatures:
 * every header, size, hash and padding byte, then the end of the archive, handing
 * each object's content to a sink, on one thread or on the context's workers.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "read/read.h"

/* Each object member is read with pread at the offset the manifest implies, so that
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
	struct mc_sha256 sha;   /* kept from object to object */
	struct mc_objout told;  /* the current object's, for done */
	unsigned char shabuf[MC_SHA256_BYTES];
};

struct sstate {
	mc_bundle *b;
	mc_par_sink psink;
	mc_obj_sink sink, raw;
	mc_obj_done ondone;
	void *ud;
	const unsigned char *want; /* the objects to read (NULL: all) */
	const unsigned char *hold; /* those psink takes whole (NULL: none) */
	size_t *items, nitems;     /* those read: items[k] (NULL: k itself) */
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
	pthread_mutex_t tlock; /* the GPU targets the kernels' metadata name (targets.c) */
};

static int
pread_full(struct sworker *w, void *buf, size_t n, uint64_t off)
{
	return mc__bundle_pread(w->ctx, w->s->b, buf, n, off);
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
wanted(const struct sstate *s, size_t i)
{
	return s->want == NULL || s->want[i];
}

static int
deliver(struct sworker *w, size_t i, const unsigned char *buf, size_t n)
{
	struct sstate *s = w->s;

	if (!wanted(s, i))
		return MC_OK;
	if (s->psink != NULL)
		return s->psink(s->ud, w->id, w->ctx, i, buf, n);
	return s->sink != NULL ? s->sink(s->ud, i, buf, n) : MC_OK;
}

static int
object_error(struct sworker *w, int rc)
{
	const mc_bundle *b = w->s->b;

	if (rc == MC_ERR_MALFORMED && strncmp(w->ctx->err, b->path, strlen(b->path)) != 0)
		rc = mc__err_prefix(w->ctx, rc, "%s: object %s", b->path, w->hex);
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

/* Object i's SHA-256, computed: its digest for the check after the pass, the whole of
 * it for done. */
static void
keep_sha(struct sworker *w, size_t i, const unsigned char sha[MC_SHA256_BYTES])
{
	w->s->sha[i] = sha_digest(w->s, sha);
	memcpy(w->shabuf, sha, MC_SHA256_BYTES);
	w->told.sha = w->shabuf;
}

/* Stored bytes other than the ones the manifest lists. */
static int
stored_mismatch(struct sworker *w)
{
	return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s: stored bytes do not match "
		       "their hash", w->s->b->path, w->hex);
}

/* A content that runs past its listed size. */
static int
overflow_error(struct sworker *w)
{
	return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s expands past its declared %llu "
		       "bytes", w->s->b->path, w->hex, (unsigned long long)w->obj.size);
}

/* A content that came out at other than its listed size. */
static int
size_mismatch(struct sworker *w, uint64_t produced)
{
	return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: object %s is %llu bytes, the manifest says "
		       "%llu", w->s->b->path, w->hex, (unsigned long long)produced,
		       (unsigned long long)w->obj.size);
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
	size_t n = (size_t)o->stored_size, np = (size_t)mc__padded(o->stored_size);
	unsigned char hash[MC_HASH_BYTES];
	const unsigned char *content;
	int rc, overflow = 0;

	if ((rc = grow(w, &w->in, &w->incap, np)) != MC_OK || (rc = pread_full(w, w->in, np, off)) != MC_OK)
		return rc;
	crypto_generichash(hash, sizeof hash, w->in, n, NULL, 0);
	if (sodium_memcmp(hash, o->stored_hash, sizeof hash) != 0)
		return stored_mismatch(w);
	if ((rc = mc__bundle_padding(w->ctx, b->path, w->in + n, np - n, member)) != MC_OK)
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
			return overflow_error(w);
		if (rc != MC_OK)
			return object_error(w, rc);
		if (produced != o->size)
			return size_mismatch(w, produced);
		content = w->out;
		crypto_generichash(hash, sizeof hash, content, (size_t)o->size, NULL, 0);
		if (sodium_memcmp(hash, o->hash, sizeof hash) != 0)
			return content_mismatch(w);
	}
	if (w->s->wants_sha != NULL && w->s->wants_sha[i]) {
		unsigned char sha[MC_SHA256_BYTES];
		if (mc__sha256_init(&w->sha) != MC_OK)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		mc__sha256_update(&w->sha, content, (size_t)o->size);
		mc__sha256_final(&w->sha, sha);
		keep_sha(w, i, sha);
	}
	if ((rc = mc__gpu_note(w->s->b, w->ctx, &w->s->tlock, i, content, (size_t)o->size)) !=
	    MC_OK)
		return rc;
	if (w->s->ondone != NULL) { /* handed over in one piece once checked */
		w->told.content = o->size > 0 ? content : (const unsigned char *)"";
		return MC_OK;
	}
	return o->size > 0 ? deliver(w, i, content, (size_t)o->size) : MC_OK;
}

struct streamed {
	struct sworker *w;
	size_t obj;
	uint64_t produced;
	crypto_generichash_state stored;  /* of the stored bytes */
	crypto_generichash_state content; /* of a compressed object's output */
	int want_sha;                     /* the worker's sha runs */
	int ended; /* the compressed data came to its end */
};

static int
streamed_out(void *p, const unsigned char *buf, size_t n)
{
	struct streamed *st = p;
	const struct mc_mobject *o = &st->w->obj;

	if (n > o->size - st->produced)
		return overflow_error(st->w);
	st->produced += n;
	if (o->encoding == MC_ENC_ZSTD)
		crypto_generichash_update(&st->content, buf, n);
	if (st->want_sha)
		mc__sha256_update(&st->w->sha, buf, n);
	return deliver(st->w, st->obj, buf, n);
}

/* Feeds the stored bytes at off, chunk by chunk, to their hash, the raw sink and the
 * decoder, or straight out when they are not compressed. */
static int
streamed_feed(struct streamed *st, uint64_t off)
{
	struct sworker *w = st->w;
	const struct mc_mobject *o = &w->obj;
	int zstd = o->encoding == MC_ENC_ZSTD, rc = MC_OK;
	uint64_t left;

	for (left = o->stored_size; left > 0 && rc == MC_OK;) {
		size_t n = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = pread_full(w, w->in, n, off)) != MC_OK)
			break;
		crypto_generichash_update(&st->stored, w->in, n);
		if (w->s->raw != NULL && (rc = w->s->raw(w->s->ud, st->obj, w->in, n)) != MC_OK)
			break;
		if (zstd)
			rc = mc__zdec_run(w->dec, w->in, n, streamed_out, st, &st->ended);
		else
			rc = streamed_out(st, w->in, n);
		left -= n;
		off += n;
	}
	if (rc == MC_OK && zstd && !st->ended)
		rc = mc__zdec_run(w->dec, NULL, 0, streamed_out, st, &st->ended);
	return rc;
}

/* After the last chunk: the stored bytes' hash, the end of the compressed data, the
 * size and the content's hashes. */
static int
streamed_check(struct streamed *st)
{
	struct sworker *w = st->w;
	const mc_bundle *b = w->s->b;
	const struct mc_mobject *o = &w->obj;
	unsigned char hash[MC_HASH_BYTES];

	crypto_generichash_final(&st->stored, hash, sizeof hash);
	if (sodium_memcmp(hash, o->stored_hash, sizeof hash) != 0)
		return stored_mismatch(w);
	if (o->encoding == MC_ENC_ZSTD && !st->ended)
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: object %s: compressed data ends early",
			       b->path, w->hex);
	if (st->produced != o->size)
		return size_mismatch(w, st->produced);
	if (o->encoding == MC_ENC_ZSTD) {
		crypto_generichash_final(&st->content, hash, sizeof hash);
		if (sodium_memcmp(hash, o->hash, sizeof hash) != 0)
			return content_mismatch(w);
	}
	if (st->want_sha) {
		unsigned char sha[MC_SHA256_BYTES];
		mc__sha256_final(&w->sha, sha);
		keep_sha(w, st->obj, sha);
	}
	return MC_OK;
}

/* A large object, in chunks; its stored hash is checked at the end, before anything
 * written from it is used. */
static int
streamed_object(struct sworker *w, size_t i, uint64_t off, const char *member)
{
	const struct mc_mobject *o = &w->obj;
	unsigned char pad[MC_TAR_BLOCK];
	struct streamed st = {.w = w, .obj = i};
	size_t np = (size_t)(mc__padded(o->stored_size) - o->stored_size);
	int rc;

	if ((rc = grow(w, &w->in, &w->incap, MC_IO_CHUNK)) != MC_OK)
		return rc;
	crypto_generichash_init(&st.stored, NULL, 0, MC_HASH_BYTES);
	crypto_generichash_init(&st.content, NULL, 0, MC_HASH_BYTES);
	if ((st.want_sha = w->s->wants_sha != NULL && w->s->wants_sha[i]) &&
	    mc__sha256_init(&w->sha) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	if (o->encoding == MC_ENC_ZSTD) {
		if (w->dec == NULL && (rc = mc__zdec_new(w->ctx, &w->dec)) != MC_OK)
			return rc;
		mc__zdec_reset(w->dec);
	}
	if ((rc = streamed_feed(&st, off)) != MC_OK)
		return object_error(w, rc);
	if ((rc = streamed_check(&st)) != MC_OK)
		return rc;
	off += o->stored_size;
	if (np > 0 && (rc = pread_full(w, pad, np, off)) != MC_OK)
		return rc;
	return mc__bundle_padding(w->ctx, w->s->b->path, pad, np, member);
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
	return mc__bundle_header(w->ctx, b->path, h, name, size);
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

/* ---- format version 2: blocks (SPEC.md section 12) ----
 * A block's stored bytes are hashed and decompressed in chunks; what comes out is cut
 * into its objects, each hashed (SHA-256) as it passes. An object of up to 1 MiB that a
 * caller waits for whole (done, or hold), or that is a kernel's metadata (targets.c
 * reads it), is held until its hash checked and then handed on whole; any other is
 * handed on in pieces as it comes, and its hash checked at its end (a sink that writes
 * files is rolled back when it does not match). A zstd block's stored hash is checked at its
 * end, before the pass can succeed. */

/* Objects of a block up to this size can be held until their hash checked and handed
 * on whole (a worker holds this much, beside its 4 MiB window). The loader holds those
 * it derives files from (MC_DERIVE_MAX, 1 MiB), so that it parses checked bytes only. */
#define BLOCK_WHOLE_MAX (1u << 20)

struct bsplit {
	struct sworker *w;
	const struct mc_mblock *bk;
	size_t i, end;         /* the current object; one past the block's last */
	uint64_t got;          /* of the current object's content */
	int whole;             /* the current object is held in w->out */
	struct mc_chash stored;
	int ended;             /* the frame came to its end */
	int told;              /* done was told of a failure (its own) */
};

static int bobj_end(struct bsplit *sp);

/* The content of object i, which checked: handed on, whole when it was held. */
static int
bobj_deliver(struct bsplit *sp)
{
	struct sworker *w = sp->w;
	struct sstate *s = w->s;
	size_t i = sp->i;
	int rc = MC_OK;

	if (s->b->m.dup[i] || !wanted(s, i))
		return MC_OK;
	if (sp->whole && s->ondone == NULL && w->obj.size > 0)
		rc = deliver(w, i, w->out, (size_t)w->obj.size);
	if (rc != MC_OK || s->ondone == NULL)
		return rc;
	memset(&w->told, 0, sizeof w->told);
	w->told.obj = i;
	w->told.size = (size_t)w->obj.size;
	w->told.sha = w->shabuf;
	w->told.content = !sp->whole ? NULL : w->obj.size > 0 ? w->out
					   : (const unsigned char *)"";
	if ((rc = s->ondone(s->ud, w->id, w->ctx, &w->told)) != MC_OK)
		sp->told = 1;
	return rc;
}

/* A block that failed at object sp->i: done is told of it at the first object from
 * there on that it waits for (as a failed object of version 1 is told), so that it
 * hands on nothing after it. Returns what done returns. */
static int
bobj_failed(struct bsplit *sp, int rc)
{
	struct sworker *w = sp->w;
	struct sstate *s = w->s;
	size_t i;

	if (s->ondone == NULL || sp->told)
		return rc;
	for (i = sp->i; i < sp->end; i++)
		if (wanted(s, i) && !s->b->m.dup[i]) {
			memset(&w->told, 0, sizeof w->told);
			w->told.obj = i;
			w->told.rc = rc;
			return s->ondone(s->ud, w->id, w->ctx, &w->told);
		}
	return rc;
}

/* Starts the objects from sp->i on: each one of size 0 is done at once. */
static int
bobj_next(struct bsplit *sp)
{
	struct sworker *w = sp->w;
	int rc;

	for (; sp->i < sp->end; sp->i++) {
		if ((rc = mc__mobjects(w->ctx, &w->s->b->m, sp->i, 1, &w->obj)) != MC_OK)
			return rc;
		mc__hex(w->obj.hash, MC_HASH_BYTES, w->hex);
		sp->got = 0;
		sp->whole = w->obj.size <= BLOCK_WHOLE_MAX &&
			    (w->s->ondone != NULL || mc__gpu_reads(w->s->b, sp->i) ||
			     (w->s->hold != NULL && w->s->hold[sp->i]));
		if (sp->whole &&
		    (rc = grow(w, &w->out, &w->outcap, (size_t)w->obj.size + 1)) != MC_OK)
			return rc;
		if (mc__sha256_init(&w->sha) != MC_OK)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		if (w->obj.size > 0)
			return MC_OK;
		if ((rc = bobj_end(sp)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

/* The current object's content came whole: its hash, then on to the sink. */
static int
bobj_end(struct bsplit *sp)
{
	struct sworker *w = sp->w;

	int rc;

	mc__sha256_final(&w->sha, w->shabuf);
	if (sodium_memcmp(w->shabuf, w->obj.hash, MC_HASH_BYTES) != 0)
		return content_mismatch(w);
	if (sp->whole && (rc = mc__gpu_note(w->s->b, w->ctx, &w->s->tlock, sp->i, w->out,
					    (size_t)w->obj.size)) != MC_OK)
		return rc;
	return bobj_deliver(sp);
}

/* Content bytes of the block (decompressed, or as stored), cut into its objects. */
static int
bsplit_out(void *p, const unsigned char *buf, size_t n)
{
	struct bsplit *sp = p;
	struct sworker *w = sp->w;
	int rc;

	while (n > 0) {
		size_t take;
		if (sp->i >= sp->end)
			return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: block %zu expands past its "
				       "objects' %llu bytes", w->s->b->path,
				       (size_t)(sp->bk - w->s->b->m.blocks),
				       (unsigned long long)sp->bk->size);
		take = w->obj.size - sp->got < n ? (size_t)(w->obj.size - sp->got) : n;
		mc__sha256_update(&w->sha, buf, take);
		if (sp->whole)
			memcpy(w->out + sp->got, buf, take);
		else if (!w->s->b->m.dup[sp->i] && (rc = deliver(w, sp->i, buf, take)) != MC_OK)
			return rc;
		sp->got += take;
		buf += take;
		n -= take;
		if (sp->got == w->obj.size) {
			if ((rc = bobj_end(sp)) != MC_OK)
				return rc;
			sp->i++;
			if ((rc = bobj_next(sp)) != MC_OK)
				return rc;
		}
	}
	return MC_OK;
}

/* Block k's member name. */
static void
block_name(size_t k, char *name, size_t n)
{
	snprintf(name, n, "%s%zu", MC_MEMBER_BLOCK_PREFIX, k);
}

/* Block k's stored bytes from *off on, in chunks: hashed, and decoded and cut into
 * objects until a failure (rc on entry, or the first); after one the rest is still
 * hashed, so that a change of the stored bytes is told as such. Returns that failure;
 * *unread set when the bytes could not be read (or the bundle ends), which it tells. */
static int
block_feed(struct sworker *w, struct bsplit *sp, size_t k, uint64_t *off, int rc, int *unread)
{
	int zstd = sp->bk->encoding == MC_ENC_ZSTD, io;
	uint64_t left;

	*unread = 0;
	for (left = sp->bk->stored_size; left > 0;) {
		size_t n = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((io = pread_full(w, w->in, n, *off)) != MC_OK) {
			*unread = 1;
			return io;
		}
		if (rc == MC_OK && w->s->raw != NULL)
			rc = w->s->raw(w->s->ud, k, w->in, n);
		if (zstd)
			mc__chash_update(&sp->stored, w->in, n);
		if (rc == MC_OK)
			rc = zstd ? mc__zdec_run(w->dec, w->in, n, bsplit_out, sp, &sp->ended)
				  : bsplit_out(sp, w->in, n);
		left -= n;
		*off += n;
	}
	if (rc == MC_OK && zstd && !sp->ended)
		rc = mc__zdec_run(w->dec, NULL, 0, bsplit_out, sp, &sp->ended);
	return rc;
}

/* Block k's header at off, then its stored bytes in chunks. */
static int
block_pass(struct sworker *w, size_t k, uint64_t off, struct bsplit *spp)
{
	const mc_bundle *b = w->s->b;
	const struct mc_mblock *bk = &b->m.blocks[k];
	struct bsplit *sp = spp;
	char name[101], want[32];
	unsigned char pad[MC_TAR_BLOCK], hash[MC_HASH_BYTES];
	uint64_t size;
	int zstd = bk->encoding == MC_ENC_ZSTD, rc, unread;

	sp->w = w;
	sp->bk = bk;
	block_name(k, want, sizeof want);
	snprintf(w->hex, sizeof w->hex, "%s", want);
	if ((rc = header_at(w, off, name, &size)) < 0)
		return rc;
	if (rc == 1 || strcmp(name, want) != 0)
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: member '%.100s' where %s was "
			       "expected", b->path, rc == 1 ? "(end of archive)" : name, want);
	if (size != bk->stored_size)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: %s is stored in %llu bytes, the "
			       "index says %llu", b->path, want, (unsigned long long)size,
			       (unsigned long long)bk->stored_size);
	if ((rc = grow(w, &w->in, &w->incap, MC_IO_CHUNK)) != MC_OK)
		return rc;
	if (zstd) {
		if (w->dec == NULL && (rc = mc__zdec_new(w->ctx, &w->dec)) != MC_OK)
			return rc;
		mc__zdec_reset(w->dec);
	}
	memset(&sp->stored, 0, sizeof sp->stored);
	if (mc__chash_init(&sp->stored, MC_HALG_SHA256) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	rc = bobj_next(sp);
	off += MC_TAR_BLOCK;
	rc = block_feed(w, sp, k, &off, rc, &unread);
	if (unread) {
		mc__chash_drop(&sp->stored);
		return rc;
	}
	mc__chash_final(&sp->stored, hash);
	mc__chash_drop(&sp->stored);
	/* Stored bytes other than the signer's explain any failure to decode them. */
	if (zstd && sodium_memcmp(hash, bk->stored_hash, sizeof hash) != 0)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: %s: stored bytes do not match their "
			       "hash", b->path, want);
	if (rc != MC_OK)
		return object_error(w, rc);
	if (zstd && !sp->ended)
		return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: %s: compressed data ends early",
			       b->path, want);
	if (sp->i < sp->end)
		return mc__err(w->ctx, MC_ERR_INTEGRITY, "%s: %s holds fewer bytes than its "
			       "objects' %llu", b->path, want, (unsigned long long)bk->size);
	size = mc__padded(bk->stored_size) - bk->stored_size;
	if (size > 0 && (rc = pread_full(w, pad, (size_t)size, off)) != MC_OK)
		return rc;
	return mc__bundle_padding(w->ctx, b->path, pad, (size_t)size, want);
}

/* Block k, whose failure done is told of. */
static int
one_block(struct sworker *w, size_t k, uint64_t off)
{
	struct bsplit sp;
	int rc;

	memset(&sp, 0, sizeof sp);
	sp.i = w->s->b->m.blocks[k].first;
	sp.end = sp.i + w->s->b->m.blocks[k].n;
	if ((rc = block_pass(w, k, off, &sp)) != MC_OK)
		rc = bobj_failed(&sp, rc);
	return rc;
}

/* Object i (format version 1), done told of it. */
static int
object_told(struct sworker *w, size_t i)
{
	struct sstate *s = w->s;
	int rc;

	memset(&w->told, 0, sizeof w->told);
	w->told.obj = i;
	rc = one_object(w, i, s->offs[i]);
	if (s->ondone != NULL && wanted(s, i)) {
		w->told.rc = rc;
		w->told.size = rc == MC_OK ? (size_t)w->obj.size : 0;
		rc = s->ondone(s->ud, w->id, w->ctx, &w->told);
	}
	return rc;
}

static int
work(void *ud, unsigned id, mc_ctx *wctx, size_t k)
{
	struct sstate *s = ud;
	struct sworker *w = &s->w[id];
	size_t i = s->items != NULL ? s->items[k] : k;
	uint64_t done, n, t0 = mc__prof_start(wctx);
	int rc;

	if (w->ctx != wctx) { /* the first object of this worker in this pass */
		mc__zdec_free(w->dec);
		w->dec = NULL;
		w->ctx = wctx;
	}
	/* a block tells done of its objects itself */
	rc = s->b->m.version == 2 ? one_block(w, i, s->offs[i]) : object_told(w, i);
	mc__prof_since(wctx, "stream threads", t0, 1);
	if (rc != MC_OK)
		return rc;
	n = s->b->m.version == 2 ? s->b->m.blocks[i].stored_size : w->obj.stored_size;
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
			       "%s", b->path, name, b->m.version == 2 ? "index" : "manifest");
	if ((rc = pread_full(w, zero, sizeof zero, off + MC_TAR_BLOCK)) != MC_OK)
		return rc;
	for (i = 0; i < sizeof zero; i++)
		if (zero[i] != 0)
			return mc__err(w->ctx, MC_ERR_MALFORMED, "%s: bad end-of-archive marker", b->path);
	if (b->seq)
		return mc__zin_expect_end(b->z);
	/* a registry's layer: the bundle's size (told before its bytes are all waited for),
	 * whole, and the bytes its manifest names, before the pass ends */
	if (b->remote != NULL && mc__ostream_size(b->remote) != off + 2 * MC_TAR_BLOCK) {
		mc__ostream_stop(b->remote); /* what more it promises is not waited for */
		return mc__err(w->ctx, MC_ERR_DIGEST_MISMATCH, "%s: the layer is %llu bytes by its "
			       "descriptor, but the bundle in it ends at %llu: not the bundle its "
			       "manifest names", b->path, (unsigned long long)mc__ostream_size(b->remote),
			       (unsigned long long)(off + 2 * MC_TAR_BLOCK));
	}
	if (b->remote != NULL && (rc = mc__ostream_end(b->remote, w->ctx)) != MC_OK)
		return rc;
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
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK || a->sha256 == NULL ||
		    !wanted(s, a->object))
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

/* What a pass works on: objects in format version 1, blocks in 2. */
static size_t
nunits(const mc_bundle *b)
{
	return b->m.version == 2 ? b->m.nblocks : b->m.nobjects;
}

/* Version 2: whether block k holds an object the pass hands on. */
static int
block_wanted(const struct sstate *s, size_t k)
{
	const struct mc_mblock *bk = &s->b->m.blocks[k];
	size_t i;

	for (i = bk->first; i < bk->first + bk->n; i++)
		if (wanted(s, i))
			return 1;
	return 0;
}

/* The sum of the stored sizes the pass reads, for progress: within the layout, whose
 * sum did not overflow. */
static int
pass_total(struct sstate *s)
{
	const mc_bundle *b = s->b;
	struct mc_mobject recs[64]; /* the object table, read 64 records at a time */
	size_t i, n = nunits(b);
	int rc;

	for (i = 0; i < n; i++) {
		if (b->m.version == 2) {
			if (s->items == NULL || block_wanted(s, i))
				s->total += b->m.blocks[i].stored_size;
			continue;
		}
		if (i % 64 == 0 &&
		    (rc = mc__mobjects(b->ctx, &b->m, i, n - i < 64 ? n - i : 64, recs)) != MC_OK)
			return rc;
		if (s->items == NULL || wanted(s, i))
			s->total += recs[i % 64].stored_size;
	}
	return MC_OK;
}

/* The size the bundle declares, for the message of a bundle cut short. */
static void
declare_size(const struct sstate *s)
{
	mc_bundle *b = s->b;

	b->declared = s->offs[nunits(b)] + 2 * MC_TAR_BLOCK;
	if (b->seq)
		mc__zin_declare(b->z, b->declared, 1);
}

/* Sets up a pass of nworkers: the objects' offsets, the SHA-256 to compute, the
 * workers' records. */
static int
sstate_init(struct sstate *s, unsigned nworkers)
{
	mc_bundle *b = s->b;
	unsigned k;
	int rc;

	if ((s->offs = malloc((nunits(b) + 1) * sizeof *s->offs)) == NULL ||
	    (s->w = calloc(nworkers, sizeof *s->w)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = mc__bundle_layout(b, s->offs, &s->offs[nunits(b)])) != MC_OK ||
	    (rc = pass_total(s)) != MC_OK ||
	    (b->m.version == 1 && (rc = sha_walk(b, s, 0)) != MC_OK))
		return rc;
	declare_size(s);
	crypto_shorthash_keygen(s->sha_key);
	for (k = 0; k < nworkers; k++) {
		s->w[k].s = s;
		s->w[k].id = k;
	}
	/* The bundle's decoder serves a lone worker, whose context is the bundle's. */
	s->w[0].ctx = b->ctx;
	s->w[0].dec = b->dec;
	b->dec = NULL;
	return MC_OK;
}

/* Ends a pass, keeping for the next the decoder of a worker on the bundle's context. */
static void
sstate_free(struct sstate *s, unsigned nworkers)
{
	mc_bundle *b = s->b;
	unsigned k;

	for (k = 0; s->w != NULL && k < nworkers; k++) {
		if (s->w[k].ctx == b->ctx && b->dec == NULL)
			b->dec = s->w[k].dec;
		else
			mc__zdec_free(s->w[k].dec);
		free(s->w[k].in);
		free(s->w[k].out);
		mc__sha256_drop(&s->w[k].sha);
	}
	free(s->w);
	free(s->offs);
	free(s->wants_sha);
	free(s->sha);
	pthread_mutex_destroy(&s->tlock);
}

/* The objects a pass reads when it is given some: a file's are read where they lie,
 * the others not at all; a stream's are all read, in order, and only those given are
 * handed on. */
static int
select_items(struct sstate *s)
{
	mc_bundle *b = s->b;
	size_t i, n = nunits(b);

	if (s->want == NULL || b->seq)
		return MC_OK;
	if ((s->items = malloc((n > 0 ? n : 1) * sizeof *s->items)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < n; i++)
		if (b->m.version == 2 ? block_wanted(s, i) : s->want[i])
			s->items[s->nitems++] = i;
	return MC_OK;
}

/* The order the workers take a file's blocks in: the longest first, so that none of
 * them starts last while the others are done. A block's time is mostly its bytes and,
 * for a load, its files (each created, written and closed: about as long as 16 KiB
 * decompressed and hashed); the bench corpus's blocks are all 16 MiB but hold from 33
 * to 5,074 files. NULL when in order: from a stream, or for one worker. */
static uint64_t
block_cost(const void *ud, size_t k)
{
	const struct mc_mblock *bk = &((const mc_bundle *)ud)->m.blocks[k];

	return bk->size + (uint64_t)bk->n * 16384;
}

static int
block_order(mc_bundle *b, unsigned nworkers, size_t **out)
{
	*out = NULL;
	if (b->m.version != 2 || b->seq || nworkers < 2 || b->m.nblocks < 2)
		return MC_OK;
	return mc__longest_first(b->ctx, b->m.nblocks, block_cost, b, out);
}

/* The pass's work: the items selected, the workers' state made, and the items run (a
 * bundle's blocks the costliest first). */
static int
run_items(mc_bundle *b, unsigned nworkers, struct sstate *s)
{
	size_t *order = NULL;
	int rc;

	if ((rc = select_items(s)) != MC_OK)
		return rc;
	if ((rc = sstate_init(s, nworkers)) != MC_OK)
		return rc;
	if (s->items == NULL && (rc = block_order(b, nworkers, &order)) != MC_OK)
		return rc;
	rc = mc__parallel_in(b->ctx, s->items != NULL ? s->nitems : nunits(b), nworkers, work, s,
			     order);
	free(order);
	return rc;
}

/* A pass over the bundle's objects, as set in s (its callbacks, want and ud). */
static int
stream(mc_bundle *b, unsigned nworkers, struct sstate *s)
{
	int rc;

	if ((!b->fresh && (rc = mc__bundle_open_stream(b)) != MC_OK) ||
	    (rc = mc__bundle_index(b)) != MC_OK)
		return rc;
	b->fresh = 0;
	if (nworkers == 0 || b->seq) /* a stream is read in order, by one worker */
		nworkers = 1;
	s->b = b;
	if ((rc = mc__gpu_prepare(b)) != MC_OK)
		return rc;
	pthread_mutex_init(&s->tlock, NULL); /* destroyed by sstate_free() */
	rc = run_items(b, nworkers, s);
	if (rc == MC_OK && s->wants_sha != NULL)
		rc = sha_walk(b, s, 1);
	if (rc == MC_OK) {
		struct sworker end = {.s = s, .ctx = b->ctx};
		rc = check_end(&end, s->offs[nunits(b)]);
	}
	if (rc == MC_OK && s->want == NULL)
		rc = mc__gpu_derived(b);
	rc = mc__bundle_remote_why(b, rc);
	/* Only worker 0 reports on the way; a pass that got through ends at its total. */
	if (rc == MC_OK)
		mc__progress(b->ctx, "verify", s->total, s->total);
	sstate_free(s, nworkers);
	free(s->items);
	return rc;
}

int
mc__bundle_stream(mc_bundle *b, mc_obj_sink sink, mc_obj_sink raw, void *ud)
{
	struct sstate s = {.sink = sink, .raw = raw, .ud = ud};

	return stream(b, 1, &s);
}

int
mc__bundle_stream_par(mc_bundle *b, mc_par_sink sink, const unsigned char *hold, void *ud)
{
	struct sstate s = {.psink = sink, .hold = hold, .ud = ud};

	return stream(b, mc__threads(b->ctx), &s);
}

int
mc__bundle_stream_some(mc_bundle *b, const unsigned char *want, mc_par_sink sink,
		       mc_obj_done done, void *ud)
{
	struct sstate s = {.psink = sink, .ondone = done, .want = want, .ud = ud};

	return stream(b, mc__threads(b->ctx), &s);
}

