/*
 * reader.c - opens a bundle and reads its head strictly: the manifest, then the
 * signatures, checking every header and padding byte (stream.c reads the objects).
 * Also what the open bundle answers: its fields, the types selected, and its trust
 * policy, judged by sign/policy.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "read/read.h"

#define SIG_MEMBER_MAX 16384
#define SIG_COUNT_MAX 64

int
mc__bundle_padding(mc_ctx *ctx, const char *path, const unsigned char *pad, size_t n,
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
	return mc__bundle_padding(b->ctx, b->path, pad, n, member);
}

int
mc__bundle_header(mc_ctx *ctx, const char *path, const unsigned char *h, char *name,
		  uint64_t *size)
{
	int rc = mc__tar_header_parse(ctx, h, name, size);

	return rc < 0 ? mc__err_prefix(ctx, rc, "%s", path) : rc;
}

/* Reads the next header: MC_OK with name and size, 1 at the end-of-archive block. */
static int
next_header(mc_bundle *b, char *name, uint64_t *size)
{
	unsigned char h[MC_TAR_BLOCK];
	int rc;

	if ((rc = mc__zin_read(b->z, h, sizeof h)) != MC_OK)
		return rc;
	memcpy(b->peek, h, sizeof h);
	b->peek_at = mc__zin_tell(b->z) - sizeof h;
	if ((rc = mc__bundle_header(b->ctx, b->path, h, name, size)) == MC_OK)
		mc__zin_declare(b->z, mc__zin_tell(b->z) + (*size + MC_TAR_BLOCK - 1) /
				MC_TAR_BLOCK * MC_TAR_BLOCK + 2 * MC_TAR_BLOCK, 0);
	return rc;
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
 * are read and checked, to a private temp file and parsed from there in windows, so
 * that memory does not grow with the manifest. With more than one thread the first
 * read hashes the copy beside the parse; with one, and on later passes, the pieces are
 * hashed as they are read. */
#define MANIFEST_IN_MEMORY (1u << 20)
#define MANIFEST_PIECE (64u * 1024)

/* The prehash of a manifest read through a temp file, made from the copy (on a thread
 * of its own while the manifest is parsed from it, where one starts). */
struct mhash {
	int fd;
	uint64_t size;
	unsigned char *prehash;
	int err; /* 0 when done; else errno of the failed read (EIO: cut short), or ENOMEM */
	pthread_t thread;
};

static void *
mhash_run(void *arg)
{
	struct mhash *h = arg;
	crypto_generichash_state hs;
	unsigned char *buf = malloc(MANIFEST_PIECE);
	uint64_t at = 0;

	if (buf == NULL) {
		h->err = ENOMEM;
		return NULL;
	}
	mc__sig_prehash_init(&hs);
	while (at < h->size) {
		size_t k = h->size - at < MANIFEST_PIECE ? (size_t)(h->size - at) : MANIFEST_PIECE;
		if (mc__pread_full(h->fd, buf, k, at) != 0) {
			h->err = errno != 0 ? errno : EIO;
			break;
		}
		crypto_generichash_update(&hs, buf, k);
		at += k;
	}
	crypto_generichash_final(&hs, h->prehash, MC_SIG_PREHASH);
	free(buf);
	return NULL;
}

/* Parses the manifest copied to fd and meanwhile, on a thread of its own where one
 * starts, makes its prehash from the copy; the prehash is the manifest's when this
 * succeeds. */
static int
parse_hashing(mc_bundle *b, int fd, uint64_t size, const struct mc_mcheck *chk,
	      unsigned char prehash[MC_SIG_PREHASH])
{
	struct mhash h;
	int rc, thread;

	memset(&h, 0, sizeof h);
	h.fd = fd;
	h.size = size;
	h.prehash = prehash;
	thread = mc__thread_create(&h.thread, mhash_run, &h) == 0;
	rc = mc__manifest_parse_fd(b->ctx, fd, size, chk, &b->m);
	if (thread)
		pthread_join(h.thread, NULL);
	else
		mhash_run(&h);
	if (rc == MC_OK && h.err == ENOMEM)
		rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	else if (rc == MC_OK && h.err != 0)
		rc = mc__err(b->ctx, MC_ERR_IO, "cannot read the manifest's temporary copy: %s",
			     strerror(h.err));
	return rc;
}

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
	/* the first read with more than one thread hashes the copy beside the parse */
	int beside = first && mc__threads(b->ctx) > 1;

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
		free(buf);
		return mc__err_prefix(b->ctx, MC_ERR_IO, "%s: a manifest of %llu bytes is read "
				      "through a temporary file", b->path,
				      (unsigned long long)size);
	}
	mc__mcheck_init(&chk);
	mc__sig_prehash_init(&hs);
	while (rc == MC_OK && left > 0) {
		size_t k = left < MANIFEST_PIECE ? (size_t)left : MANIFEST_PIECE;
		if ((rc = mc__zin_read(b->z, buf, k)) != MC_OK)
			break;
		if (!beside)
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
	if (rc != MC_OK || !first) {
		crypto_generichash_final(&hs, prehash, MC_SIG_PREHASH);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (beside) {
		rc = parse_hashing(b, fd, size, &chk, prehash);
	} else {
		crypto_generichash_final(&hs, prehash, MC_SIG_PREHASH);
		rc = mc__manifest_parse_fd(b->ctx, fd, size, &chk, &b->m);
	}
	close(fd);
parsed: /* the parser's messages do not name the file */
	return rc != MC_OK ? mc__err_prefix(b->ctx, rc, "%s", b->path) : MC_OK;
}

static int
changed(mc_bundle *b)
{
	return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
}

/* Reads the manifest member. The first time its length and prehash are kept; later
 * passes must see the same bytes. */
static int
manifest_member(mc_bundle *b, int first)
{
	unsigned char prehash[MC_SIG_PREHASH];
	char name[101];
	uint64_t size;
	int rc;

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
		return changed(b);
	}
	return MC_OK;
}

/* Keeps signature member name, its text buf (taken) of size bytes, which must hold a
 * signature by key id. */
static int
keep_sig(mc_bundle *b, const char *name, const char *id, unsigned char *buf, uint64_t size)
{
	struct mc_bsig *s = realloc(b->sigs, (b->nsigs + 1) * sizeof *s);
	int rc;

	if (s == NULL) {
		free(buf);
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	}
	b->sigs = s;
	s = &b->sigs[b->nsigs];
	memset(s, 0, sizeof *s);
	if ((rc = mc__sig_parse(b->ctx, (const char *)buf, (size_t)size, 1, &s->sig)) != MC_OK) {
		free(buf);
		return mc__err_prefix(b->ctx, MC_ERR_MALFORMED, "%s: member %s", b->path, name);
	}
	s->text = (char *)buf;
	s->len = (size_t)size;
	b->nsigs++;
	if (strcmp(s->sig.id, id) != 0)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member %s holds a signature by "
			       "key %s", b->path, name, s->sig.id);
	return MC_OK;
}

/* On a later pass: signature member i, buf (freed) of size bytes, must be as kept. */
static int
same_sig(mc_bundle *b, size_t i, unsigned char *buf, uint64_t size)
{
	int same = i < b->nsigs && size == b->sigs[i].len &&
		   memcmp(buf, b->sigs[i].text, (size_t)size) == 0;

	free(buf);
	return same ? MC_OK : changed(b);
}

/* Reads the signature members, in order of key id. The first time they are kept;
 * later passes must see the same ones. */
static int
sig_members(mc_bundle *b, int first)
{
	char name[101], prev[101] = "", id[17];
	unsigned char *buf;
	uint64_t size;
	size_t nsig = 0;
	int rc;

	for (;; nsig++) {
		if ((rc = next_header(b, name, &size)) < 0)
			return rc;
		/* The first header after the signatures is read again, with the objects (it is
		 * the index's in format version 2). */
		if (rc == 1 ||
		    strncmp(name, MC_MEMBER_SIG_PREFIX, strlen(MC_MEMBER_SIG_PREFIX)) != 0) {
			memcpy(b->next, name, sizeof b->next);
			b->next_size = size;
			b->next_end = rc == 1;
			break;
		}
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
		if ((rc = read_member(b, name, size, &buf)) != MC_OK ||
		    (rc = first ? keep_sig(b, name, id, buf, size) : same_sig(b, nsig, buf, size)) != MC_OK)
			return rc;
	}
	return !first && nsig != b->nsigs ? changed(b) : MC_OK;
}

/* Format version 2: the index's text as it is decompressed, checked and copied (to
 * memory, or for a large one to a private temp file). */
struct itext {
	mc_bundle *b;
	struct mc_mcheck chk;
	uint64_t got, size;
	int fd;
	unsigned char *buf;
};

static int
itext_out(void *ud, const unsigned char *p, size_t n)
{
	struct itext *t = ud;
	mc_bundle *b = t->b;

	if (n > t->size - t->got)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: the index expands past its declared "
			       "%llu bytes", b->path, (unsigned long long)t->size);
	mc__mcheck_feed(&t->chk, p, n);
	if (t->fd >= 0 && mc__write_all(t->fd, p, n) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot write the index's temporary copy",
				 b->path);
	if (t->fd < 0)
		memcpy(t->buf + t->got, p, n);
	t->got += n;
	return MC_OK;
}

/* Where the index's text goes: memory for a small one, else a temp file. */
static int
itext_start(struct itext *t, mc_bundle *b)
{
	const struct mc_mindex *x = &b->m.index;
	int rc;

	memset(t, 0, sizeof *t);
	t->b = b;
	t->size = x->size;
	t->fd = -1;
	mc__mcheck_init(&t->chk);
	if (x->size <= MANIFEST_IN_MEMORY) {
		if ((t->buf = malloc((size_t)x->size + 1)) == NULL)
			return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	} else if ((t->fd = mc__open_temp_anon(b->ctx)) < 0) {
		return mc__err_prefix(b->ctx, MC_ERR_IO, "%s: an index of %llu bytes is read "
				      "through a temporary file", b->path,
				      (unsigned long long)x->size);
	}
	if (x->encoding == MC_ENC_ZSTD) {
		if (b->dec == NULL && (rc = mc__zdec_new(b->ctx, &b->dec)) != MC_OK)
			return rc;
		mc__zdec_reset(b->dec);
	}
	return MC_OK;
}

/* Reads the index's stored bytes, hashing them, and the first time also its text. */
static int
index_read(mc_bundle *b, struct itext *t, unsigned char hash[MC_HASH_BYTES], int *ended,
	   int *unread)
{
	const struct mc_mindex *x = &b->m.index;
	struct mc_chash h;
	unsigned char *in;
	uint64_t left;
	int rc = MC_OK, zstd = x->encoding == MC_ENC_ZSTD;

	memset(&h, 0, sizeof h);
	if ((in = malloc(MANIFEST_PIECE)) == NULL || mc__chash_init(&h, MC_HALG_SHA256) != MC_OK) {
		free(in);
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	}
	/* After a failure to decode, the rest is still hashed: stored bytes other than the
	 * signer's are told as such. */
	for (left = x->stored_size; left > 0;) {
		size_t k = left < MANIFEST_PIECE ? (size_t)left : MANIFEST_PIECE;
		int io;
		if ((io = mc__zin_read(b->z, in, k)) != MC_OK) {
			*unread = 1;
			rc = io;
			break;
		}
		mc__chash_update(&h, in, k);
		if (t != NULL && rc == MC_OK)
			rc = zstd ? mc__zdec_run(b->dec, in, k, itext_out, t, ended)
				  : itext_out(t, in, k);
		left -= k;
	}
	if (rc == MC_OK && t != NULL && zstd && !*ended)
		rc = mc__zdec_run(b->dec, NULL, 0, itext_out, t, ended);
	if (rc != MC_OK && !*unread && strncmp(b->ctx->err, b->path, strlen(b->path)) != 0)
		rc = mc__err_prefix(b->ctx, rc, "%s: the index", b->path);
	free(in);
	mc__chash_final(&h, hash);
	mc__chash_drop(&h);
	return rc;
}

/* The index's text, read whole and authenticated: its size, then the parse. */
static int
index_parse(mc_bundle *b, struct itext *t, int ended)
{
	const struct mc_mindex *x = &b->m.index;
	int rc;

	if (x->encoding == MC_ENC_ZSTD && !ended)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: the index's compressed data ends "
			       "early", b->path);
	if (t->got != x->size)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: the index is %llu bytes, the "
			       "manifest says %llu", b->path, (unsigned long long)t->got,
			       (unsigned long long)x->size);
	if (t->fd < 0)
		rc = mc__index_parse(b->ctx, t->buf, (size_t)x->size, &b->m);
	else
		rc = mc__index_parse_fd(b->ctx, t->fd, x->size, &t->chk, &b->m);
	return rc != MC_OK ? mc__err_prefix(b->ctx, rc, "%s", b->path) : MC_OK;
}

/* Format version 2: the index member, after the signatures. Its stored bytes must have
 * the hash the manifest gives; the first time its text is checked and parsed into
 * b->m, only once they did. */
static int
index_member(mc_bundle *b, int first)
{
	const struct mc_mindex *x = &b->m.index;
	const char *want = x->encoding == MC_ENC_ZSTD ? MC_MEMBER_INDEX_ZST : MC_MEMBER_INDEX;
	unsigned char hash[MC_HASH_BYTES];
	struct itext t;
	int rc, ended = 0, unread = 0;

	if (b->m.version != 2)
		return MC_OK;
	if (first && b->seq && !b->index_loading) { /* read when first needed */
		b->index_pending = 1;
		return MC_OK;
	}
	if (b->next_end || strcmp(b->next, want) != 0)
		return mc__err(b->ctx, MC_ERR_MALFORMED, "%s: member '%.100s' where %s was "
			       "expected", b->path, b->next_end ? "(end of archive)" : b->next, want);
	if (b->next_size != x->stored_size)
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: the index is stored in %llu bytes, "
			       "the manifest says %llu", b->path,
			       (unsigned long long)b->next_size, (unsigned long long)x->stored_size);
	memset(&t, 0, sizeof t);
	t.fd = -1;
	if (first && (rc = itext_start(&t, b)) != MC_OK)
		goto out;
	rc = index_read(b, first ? &t : NULL, hash, &ended, &unread);
	if (unread)
		goto out;
	if (sodium_memcmp(hash, x->stored_hash, sizeof hash) != 0) {
		rc = first ? mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: %s: stored bytes do not match "
				     "their hash", b->path, want) : changed(b);
		goto out;
	}
	if (rc != MC_OK || (rc = read_padding(b, x->stored_size, want)) != MC_OK)
		goto out;
	b->blocks_at = mc__zin_tell(b->z);
	if (first)
		rc = index_parse(b, &t, ended);
out:
	free(t.buf);
	if (t.fd >= 0)
		close(t.fd);
	return rc;
}

int
mc__bundle_index(mc_bundle *b)
{
	if (b->index_pending) {
		uint64_t t0 = mc__prof_start(b->ctx);
		b->index_pending = 0;
		b->index_loading = 1;
		b->index_rc = index_member(b, 1);
		b->index_loading = 0;
		mc__prof_since(b->ctx, "index", t0, 0);
	}
	return b->index_rc;
}

static int
layout_overflow(mc_bundle *b)
{
	return mc__err(b->ctx, MC_ERR_LIMIT, "%s: the sizes of its members overflow a 64-bit "
		       "sum", b->path);
}

/* A member of size bytes at *off: its header and its padded bytes passed. */
static int
layout_add(mc_bundle *b, uint64_t *off, uint64_t size)
{
	if (!mc__sum_add(off, MC_TAR_BLOCK) || !mc__sum_add(off, mc__padded(size)))
		return layout_overflow(b);
	return MC_OK;
}

int
mc__bundle_layout(mc_bundle *b, uint64_t *offs, uint64_t *end)
{
	struct mc_mobject recs[64]; /* the object table, read 64 records at a time */
	uint64_t off;
	size_t i, n;
	int rc;

	if (b->m.version == 2) {
		for (i = 0, off = b->blocks_at; i < b->m.nblocks; i++) {
			if (offs != NULL)
				offs[i] = off;
			if ((rc = layout_add(b, &off, b->m.blocks[i].stored_size)) != MC_OK)
				return rc;
		}
	} else {
		off = MC_TAR_BLOCK + mc__padded(b->mlen);
		for (i = 0; i < b->nsigs; i++) /* 64 of 16 KiB at most */
			off += MC_TAR_BLOCK + mc__padded(b->sigs[i].len);
		for (i = 0; i < b->m.nobjects; i++) {
			n = b->m.nobjects - i < 64 ? b->m.nobjects - i : 64;
			if (i % 64 == 0 && (rc = mc__mobjects(b->ctx, &b->m, i, n, recs)) != MC_OK)
				return rc;
			if (offs != NULL)
				offs[i] = off;
			if ((rc = layout_add(b, &off, recs[i % 64].stored_size)) != MC_OK)
				return rc;
		}
	}
	/* and the end-of-archive blocks after the last */
	if (off > UINT64_MAX - 2 * MC_TAR_BLOCK)
		return layout_overflow(b);
	*end = off;
	return MC_OK;
}

int
mc__bundle_whole(mc_bundle *b)
{
	struct stat st;
	uint64_t size;
	int rc;

	if (b->seq)
		return MC_OK;
	if ((rc = mc__bundle_layout(b, NULL, &size)) != MC_OK)
		return rc;
	size += 2 * MC_TAR_BLOCK; /* the end */
	if (b->remote != NULL && (rc = mc__ostream_end(b->remote, b->ctx)) != MC_OK)
		return rc;
	if (fstat(b->fd, &st) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot stat", b->path);
	if ((uint64_t)st.st_size < size)
		return mc__truncated(b->ctx, b->path, (uint64_t)st.st_size, size, 1);
	return MC_OK;
}

int
mc_bundle_read_tables(mc_bundle *b)
{
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_index(b)) != MC_OK)
		return rc;
	return mc__bundle_whole(b);
}

int
mc__bundle_open_stream(mc_bundle *b)
{
	int first = !b->have_manifest, rc;

	if (b->seq && b->z != NULL)
		return mc__bundle_once(b->ctx, b);
	mc__zin_free(b->z);
	b->z = NULL;
	b->fresh = 0;
	if (!b->seq && lseek(b->fd, 0, SEEK_SET) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot seek", b->path);
	if ((rc = mc__zin_new_src(b->ctx, b->fd, b->path, b->remote ? mc__ostream_more : NULL,
				  b->remote, &b->z)) != MC_OK ||
	    (rc = manifest_member(b, first)) != MC_OK || (rc = sig_members(b, first)) != MC_OK ||
	    (rc = index_member(b, first)) != MC_OK)
		return rc;
	b->fresh = 1;
	return MC_OK;
}

int
mc__bundle_remote_why(mc_bundle *b, int rc)
{
	int why;

	if (rc == MC_OK || rc == MC_ERR_CANCELLED || rc == MC_ERR_DIGEST_MISMATCH || b->remote == NULL)
		return rc;
	why = mc__ostream_status(b->remote);
	if (why != MC_ERR_DIGEST_MISMATCH && why != MC_ERR_REMOTE)
		return rc;
	return mc__ostream_end(b->remote, b->ctx); /* says why */
}

int
mc__bundle_once(mc_ctx *ctx, const mc_bundle *b)
{
	return mc__err(ctx, MC_ERR_INVALID, "%s: read from a pipe, which can be read only once; "
		       "this needs a file", b->path);
}

int
mc__bundle_pread(mc_ctx *ctx, const mc_bundle *b, void *buf, size_t n, uint64_t off)
{
	struct stat st;
	int rc;

	if (b->remote != NULL && (rc = mc__ostream_wait(b->remote, off + n, ctx)) != MC_OK)
		return rc;
	if (b->seq && off == b->peek_at && n == MC_TAR_BLOCK) {
		memcpy(buf, b->peek, n);
		return MC_OK;
	}
	if (b->seq)
		return off == mc__zin_tell(b->z) ? mc__zin_read(b->z, buf, n) : mc__bundle_once(ctx, b);
	if (mc__pread_full(b->fd, buf, n, off) == 0)
		return MC_OK;
	if (errno == 0 && fstat(b->fd, &st) == 0)
		return mc__truncated(ctx, b->path, (uint64_t)st.st_size,
				     b->declared ? b->declared : off + n, b->declared != 0);
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
	if ((rc = mc__bundle_pread(b->ctx, b, buf, b->mlen, MC_TAR_BLOCK)) != MC_OK) {
		free(buf);
		return rc;
	}
	mc__sig_prehash(buf, b->mlen, prehash);
	if (sodium_memcmp(prehash, b->mprehash, sizeof prehash) != 0) {
		free(buf);
		return changed(b);
	}
	buf[b->mlen] = '\0';
	*out = buf;
	return MC_OK;
}

/* Opens the bundle read from fd (taken over), which name names; a regular file read
 * from its start is read at will, anything else in order. */
static int
open_fd(mc_ctx *ctx, int fd, const struct stat *st, const char *name, struct mc_ostream *remote,
	mc_bundle **out)
{
	mc_bundle *b;
	uint64_t t0 = mc__prof_start(ctx);
	int rc;

	if ((b = calloc(1, sizeof *b)) == NULL) {
		close(fd);
		mc__ostream_free(remote);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	b->ctx = ctx;
	b->remote = remote;
	mc__policy_init(&b->policy);
	b->fd = fd;
	b->seq = !S_ISREG(st->st_mode) || lseek(fd, 0, SEEK_CUR) != 0;
	mc__acur_init(&b->cur, ctx, &b->m, mc__find_type);
	if ((b->path = mc__strdup(name)) == NULL)
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	else
		rc = mc__bundle_remote_why(b, mc__bundle_open_stream(b));
	if (rc != MC_OK) {
		mc_bundle_free(b);
		return rc;
	}
	mc__prof_since(ctx, "open", t0, 0);
	*out = b;
	return MC_OK;
}

/* Starts reading the bundle a registry reference names: *fd reads it in order, *remote
 * is the stream behind it. The manifest is read and checked first. */
static int
open_reference(mc_ctx *ctx, const char *ref, int *fd, struct mc_ostream **remote)
{
	struct mc_layer layer;
	struct mc_oci *o;
	int rc;

	if ((rc = mc__oci_new(ctx, ref, &o)) != MC_OK)
		return rc;
	if ((rc = mc__oci_resolve(o, &layer)) != MC_OK) {
		mc__oci_free(o);
		return rc;
	}
	mc__oci_note(ctx, &layer);
	return mc__oci_stream(o, &layer, fd, remote);
}

int
mc_bundle_open(mc_ctx *ctx, const char *path, mc_bundle **out)
{
	struct stat st;
	int fd, rc;

	struct mc_ostream *remote = NULL;

	if (ctx == NULL || path == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if (mc_is_reference(path)) {
		if ((rc = open_reference(ctx, path, &fd, &remote)) != MC_OK)
			return rc;
		if (fstat(fd, &st) != 0) {
			rc = mc__errno(ctx, MC_ERR_IO, "cannot read", path);
			close(fd);
			mc__ostream_free(remote);
			return rc;
		}
	} else if ((rc = mc__open_input(ctx, path, &fd, &st)) != MC_OK)
		return rc;
	return open_fd(ctx, fd, &st, path, remote, out);
}

int
mc_bundle_open_fd(mc_ctx *ctx, int fd, const char *name, mc_bundle **out)
{
	struct stat st;
	int own, rc;

	if (ctx == NULL || fd < 0 || name == NULL || out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if ((rc = mc__check_input(ctx, fd, name, &st)) != MC_OK)
		return rc;
	if ((own = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot read", name);
	return open_fd(ctx, own, &st, name, NULL, out);
}

void
mc_bundle_free(mc_bundle *b)
{
	uint64_t t;
	size_t i;

	if (b == NULL)
		return;
	t = mc__prof_start(b->ctx);
	mc__zin_free(b->z);
	mc__zdec_free(b->dec);
	if (b->fd >= 0)
		close(b->fd);
	mc__ostream_free(b->remote); /* its thread ends once fd is closed */
	free(b->path);
	mc__manifest_free(&b->m);
	for (i = 0; i < b->nsigs; i++) {
		mc__sig_clear(&b->sigs[i].sig);
		free(b->sigs[i].text);
	}
	free(b->sigs);
	mc__policy_clear(&b->policy);
	mc__strv_free(b->types, b->ntypes);
	free(b->sel);
	mc__acur_free(&b->cur);
	mc__acur_free(&b->fcur);
	free(b->torch_blob);
	mc__gpu_free(b);
	mc__prof_since(b->ctx, "free", t, 0);
	free(b);
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
	return rc == MC_OK ? mc__bundle_index(b) : rc;
}

int
mc_bundle_check_signatures(mc_bundle *b)
{
	if (b == NULL)
		return MC_ERR_INVALID;
	return mc__bundle_policy(b);
}

/* ---- accessors ---- */

int
mc_bundle_format_version(const mc_bundle *b)
{
	return b == NULL ? 0 : b->m.version;
}

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

int
mc_bundle_signature_state(const mc_bundle *b, size_t i)
{
	if (b == NULL || i >= b->nsigs)
		return MC_ERR_INVALID;
	return mc__policy_sig_state(&b->policy, &b->sigs[i].sig, b->mprehash, NULL);
}

const char *
mc_sig_state_name(int state)
{
	switch (state) {
	case MC_SIG_VERIFIED: return "verified";
	case MC_SIG_BROKEN: return "broken";
	case MC_SIG_NOT_CHECKED: return "not_checked";
	default: return "unknown";
	}
}

size_t
mc_bundle_artifact_count(const mc_bundle *b)
{
	/* b is never const itself: mc_bundle_open made it. */
	if (b == NULL || mc__bundle_index((mc_bundle *)b) != MC_OK)
		return 0;
	return b->m.nartifacts;
}

int
mc_bundle_artifact(const mc_bundle *b, size_t i, const char **type, const char **key,
		   uint64_t *size, const char **hash)
{
	const struct mc_martifact *a;
	struct mc_mobject o;
	char *hex;
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	/* b is never const itself: mc_bundle_open made it. */
	if ((rc = mc__bundle_index((mc_bundle *)b)) != MC_OK)
		return rc;
	if (i >= b->m.nartifacts)
		return MC_ERR_INVALID;
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

/* Artifact i, read through the cursor of the queries below (b is never const itself:
 * mc_bundle_open made it). */
static int
query_artifact(const mc_bundle *cb, size_t i, const struct mc_martifact **a)
{
	mc_bundle *b = (mc_bundle *)cb;

	if (b->fcur.m == NULL)
		mc__acur_init(&b->fcur, b->ctx, &b->m, NULL);
	return mc__acur_get(&b->fcur, i, a);
}

int
mc_bundle_artifact_executable(const mc_bundle *b, size_t i)
{
	const struct mc_martifact *a;
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_index((mc_bundle *)b)) != MC_OK)
		return rc;
	if (i >= b->m.nartifacts)
		return MC_ERR_INVALID;
	if ((rc = query_artifact(b, i, &a)) != MC_OK)
		return rc;
	return a->executable;
}

int
mc_bundle_find_artifact(const mc_bundle *b, const char *type, const char *key, size_t *index)
{
	const struct mc_martifact *a;
	size_t lo = 0, hi, mid;
	int rc, cmp;

	if (b == NULL || type == NULL || key == NULL || index == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_index((mc_bundle *)b)) != MC_OK)
		return rc;
	/* The table is sorted by (type, key). Callers mostly ask in its order (a load
	 * reports so): the one after the last found is tried first. */
	hi = b->m.nartifacts;
	mid = b->find_next;
	while (lo < hi) {
		if (mid < lo || mid >= hi)
			mid = lo + (hi - lo) / 2;
		if ((rc = query_artifact(b, mid, &a)) != MC_OK)
			return rc;
		if ((cmp = strcmp(a->type, type)) == 0)
			cmp = strcmp(a->key, key);
		if (cmp == 0) {
			*index = mid;
			((mc_bundle *)b)->find_next = mid + 1;
			return MC_OK;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
		mid = lo + (hi - lo) / 2;
	}
	return mc__err(b->ctx, MC_ERR_INVALID, "the bundle has no artifact %s %.200s", type, key);
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
