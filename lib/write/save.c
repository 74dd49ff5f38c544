/*
 * save.c - mc_writer_save: the first pass over the contents on the worker threads
 * (hashed, compressed into spool files), the manifest rendered from the sorted tables,
 * the signatures, and the bundle written: manifest, signatures, then each distinct
 * content once, ordered by hash.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "write/write.h"

/* ---- the first pass, on the worker threads ----
 * Each used object is read once: hashed (its hash is known only now for most) and
 * compressed into the worker's spool file. An object marked MC_WMARK_HASH is only
 * hashed. Each worker's compressed objects wait in its spool file until the manifest,
 * which records their stored hashes, has been written. */

#define PASS_BATCH 32           /* objects per item */
#define PASS_PATHS (256u * 1024) /* their paths are read at once when within this */

struct spool {
	struct mc_wread rd;   /* rd.ctx: the worker's context, once it has started */
	struct mc_wspool *ws; /* with compression */
	char *paths;          /* the paths of a batch of objects */
};

struct pass {
	mc_writer *w;
	const char *path;     /* the bundle's: spool files are made beside it */
	int out_fd;           /* or the descriptor it goes to (spool files in $TMPDIR) */
	const uint32_t *oi;
	struct spool *sp;     /* per worker */
	_Atomic uint64_t done;
	uint64_t total;
};

/* A piece of an object's content, on to the spool's compressor. */
static int
spool_piece(void *ud, const unsigned char *buf, size_t n, int last)
{
	return mc__wspool_piece(((struct spool *)ud)->ws, buf, n, last);
}

/* A worker's first object: its spool, when there is compression (beside the bundle,
 * or in $TMPDIR when there is no folder to make it in). */
static int
spool_start(struct pass *p, struct spool *sp, mc_ctx *wctx)
{
	sp->rd.ctx = wctx;
	sp->rd.halg = p->w->halg;
	if (p->w->level == 0)
		return MC_OK;
	return mc__wspool_new(wctx, p->w->level, p->w->version, p->out_fd >= 0 ? NULL : p->path,
			      &sp->ws);
}

/* Reads object o from its source, name, for its hash, which it sets or checks, and
 * checks the SHA-256 recorded; with compress set, into the spool too. */
static int
pass_read(mc_writer *w, struct spool *sp, struct mc_wobj *o, const char *name, int compress)
{
	unsigned char hash[MC_HASH_BYTES], sha[32];
	mc_ctx *wctx = sp->rd.ctx;
	struct mc_wsource src;
	int rc;

	if ((rc = mc__wsource_open(wctx, &src, w, o, name)) != MC_OK)
		return rc;
	rc = mc__wsource_digest(&sp->rd, &src, o->offset, o->size, hash,
				(o->flags & MC_WOBJ_CHECK_SHA) ? sha : NULL,
				compress ? spool_piece : NULL, sp);
	mc__wsource_close(&src);
	if (rc == MC_OK && (o->flags & MC_WOBJ_CHECK_SHA) && memcmp(sha, o->sha256, sizeof sha) != 0)
		rc = mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", name);
	if (rc != MC_OK)
		return rc;
	if (o->flags & MC_WOBJ_PENDING) {
		memcpy(o->hash, hash, sizeof hash);
		o->flags &= (uint8_t)~MC_WOBJ_PENDING;
	} else if (memcmp(hash, o->hash, sizeof hash) != 0) {
		return mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", name);
	}
	return MC_OK;
}

/* Hashes (and, when compress is set, compresses into the worker's spool) object o,
 * whose source is name, updating its record. */
static int
pass_one(struct pass *p, unsigned worker, mc_ctx *wctx, struct mc_wobj *o, const char *name,
	 int only_hash)
{
	mc_writer *w = p->w;
	struct spool *sp = &p->sp[worker];
	int rc, compress = !only_hash && w->level > 0;
	uint64_t done;

	if (sp->rd.ctx != wctx && (rc = spool_start(p, sp, wctx)) != MC_OK)
		return rc;
	if (compress) {
		o->spool = (uint16_t)worker;
		if ((rc = mc__wspool_begin(sp->ws, wctx, o)) != MC_OK)
			return rc;
	}
	if ((rc = pass_read(w, sp, o, name, compress)) != MC_OK)
		return rc;
	if (only_hash)
		return MC_OK;
	if (compress && (rc = mc__wspool_end(sp->ws, o)) != MC_OK)
		return rc;
	if (!compress) { /* stored as is */
		o->encoding = MC_ENC_NONE;
		o->stored_size = o->size;
		memcpy(o->stored_hash, o->hash, MC_HASH_BYTES);
	}
	done = atomic_fetch_add(&p->done, o->size) + o->size;
	if (worker == 0)
		mc__progress(w->ctx, "pack", done, p->total);
	return MC_OK;
}

/* Item k is objects k * PASS_BATCH on: their records, and their paths when they lie
 * close together, are read and written back in one piece each. */
static int
pass_item(void *ud, unsigned worker, mc_ctx *wctx, size_t k)
{
	struct pass *p = ud;
	mc_writer *w = p->w;
	struct mc_wobj o[PASS_BATCH];
	char name[MC_PATH_MAX];
	uint32_t first = (uint32_t)(k * PASS_BATCH), n, j;
	uint64_t lo = UINT64_MAX, hi = 0;
	int rc, any = 0;

	n = w->nobjs - first < PASS_BATCH ? w->nobjs - first : PASS_BATCH;
	for (j = 0; j < n; j++) /* in version 2 the blocks' pass reads the stored ones */
		any |= (p->oi[first + j] == MC_WMARK_USED && w->version == 1) ||
		       p->oi[first + j] == MC_WMARK_HASH;
	if (!any)
		return MC_OK;
	if ((rc = mc__store_io(wctx, &w->objs, (uint64_t)first * sizeof *o, o, n * sizeof *o,
			       0)) != MC_OK)
		return rc;
	for (j = 0; j < n; j++)
		if (p->oi[first + j] != 0 && o[j].path_off != MC_WOBJ_IN_DATA) {
			lo = o[j].path_off < lo ? o[j].path_off : lo;
			hi = o[j].path_off + o[j].path_len > hi ? o[j].path_off + o[j].path_len : hi;
		}
	if (hi > lo && hi - lo <= PASS_PATHS) {
		struct spool *sp = &p->sp[worker];
		if (sp->paths == NULL && (sp->paths = malloc(PASS_PATHS)) == NULL)
			return mc__err(wctx, MC_ERR_NOMEM, "out of memory");
		if ((rc = mc__store_io(wctx, &w->data, lo, sp->paths, (size_t)(hi - lo),
				       0)) != MC_OK)
			return rc;
	} else {
		lo = hi = 0;
	}
	for (j = 0; j < n; j++) {
		int only_hash = p->oi[first + j] == MC_WMARK_HASH;
		if ((p->oi[first + j] != MC_WMARK_USED || w->version == 2) && !only_hash)
			continue;
		if (o[j].flags & MC_WOBJ_SPOOLED) { /* stored already (pull) */
			if (!only_hash)
				atomic_fetch_add(&p->done, o[j].size);
			continue;
		}
		if (!(o[j].flags & MC_WOBJ_PENDING) && (only_hash || w->level == 0))
			continue;
		if (hi > 0 && o[j].path_off != MC_WOBJ_IN_DATA) {
			memcpy(name, p->sp[worker].paths + (o[j].path_off - lo), o[j].path_len);
			name[o[j].path_len] = '\0';
		} else if ((rc = mc__wobj_path(w, wctx, &o[j], name)) != MC_OK) {
			return rc;
		}
		if ((rc = pass_one(p, worker, wctx, &o[j], name, only_hash)) != MC_OK)
			return rc;
	}
	return mc__store_io(wctx, &w->objs, (uint64_t)first * sizeof *o, o, n * sizeof *o, 1);
}

/* ---- the manifest ---- */

/* What the save renders the manifest from: the kept artifacts, read forwards from
 * their store, and the object records. A read error is kept in rc. */
struct saveview {
	mc_writer *w;
	struct mc_wsave *sv;
	const uint32_t *order;
	struct mc_sreader r;
	size_t next;           /* the artifact expected next */
	struct mc_wart a;
	char key[MC_KEY_MAX + 1];
	uint32_t cached;       /* the object table's entry in o, when have_o */
	int have_o;
	struct mc_wobj o;
	int rc;
};

static void
view_artifact(void *ud, size_t i, struct mc_martifact *out)
{
	struct saveview *v = ud;
	int got = 0;

	memset(out, 0, sizeof *out);
	out->type = out->key = "";
	if (i == 0) { /* a render starts */
		v->r.off = 0;
		v->r.pos = v->r.len = 0;
		v->next = 0;
	}
	if (v->rc != MC_OK)
		return;
	if (i != v->next) {
		v->rc = mc__err(v->w->ctx, MC_ERR_INVALID, "artifacts rendered out of order");
		return;
	}
	v->next++;
	if ((v->rc = mc__wart_next(v->w->ctx, &v->r, &v->a, (unsigned char *)v->key, &got)) != MC_OK)
		return;
	if (!got) {
		errno = 0;
		v->rc = mc__store_error(v->w->ctx, &v->sv->uniq, "read");
		return;
	}
	v->key[v->a.key_len] = '\0';
	out->type = v->w->types[v->a.type];
	out->key = v->key;
	out->size = v->a.size;
	out->sha256 = v->a.has_sha256 ? v->a.sha256 : NULL;
	out->object = v->sv->oi[v->a.obj];
	out->executable = v->a.executable != 0;
}

static void
view_object(void *ud, size_t i, struct mc_mobject *out)
{
	struct saveview *v = ud;
	const struct mc_wobj *o = &v->o;
	int stored;

	memset(out, 0, sizeof *out);
	if (v->rc != MC_OK)
		return;
	if (!v->have_o || v->cached != (uint32_t)i) {
		v->have_o = 0;
		if ((v->rc = mc__wobj_get(v->w, v->w->ctx, v->order[i], &v->o)) != MC_OK)
			return;
		v->cached = (uint32_t)i;
		v->have_o = 1;
	}
	/* At level 0 every object is stored as is, but one stored already (pull) is as it
	 * was stored. */
	stored = v->w->level > 0 || (o->flags & MC_WOBJ_SPOOLED);
	memcpy(out->hash, o->hash, MC_HASH_BYTES);
	out->size = o->size;
	out->encoding = stored ? o->encoding : MC_ENC_NONE;
	out->stored_size = stored ? o->stored_size : o->size;
	memcpy(out->stored_hash, stored ? o->stored_hash : o->hash, MC_HASH_BYTES);
}

static int
label_cmp(const void *x, const void *y)
{
	return strcmp(((const struct mc_label *)x)->key, ((const struct mc_label *)y)->key);
}

/* The manifest text as it is rendered: counted and prehashed, and written to e when
 * that is set. */
struct mtext {
	mc_ctx *ctx;
	crypto_generichash_state st;
	uint64_t len;
	mc_emit *e;
};

static int
mtext_sink(void *ud, const char *p, size_t n)
{
	struct mtext *t = ud;

	crypto_generichash_update(&t->st, (const unsigned char *)p, n);
	t->len += n;
	if (t->e == NULL && t->len > t->ctx->max_manifest)
		return mc__err(t->ctx, MC_ERR_LIMIT, "manifest of more than %llu bytes is over the cap",
			       (unsigned long long)t->ctx->max_manifest);
	return t->e != NULL ? mc__emit_data(t->e, p, n) : MC_OK;
}

/* Renders m, into e when it is not NULL; gives its prehash and length. */
static int
write_manifest(mc_ctx *ctx, const struct mc_manifest *m, mc_emit *e,
	       unsigned char prehash[MC_SIG_PREHASH], uint64_t *len)
{
	struct mtext mt;
	int rc;

	memset(&mt, 0, sizeof mt);
	mt.ctx = ctx;
	mt.e = e;
	mc__sig_prehash_init(&mt.st);
	if ((rc = mc__manifest_write(ctx, m, mtext_sink, &mt)) != MC_OK)
		return rc;
	crypto_generichash_final(&mt.st, prehash, MC_SIG_PREHASH);
	*len = mt.len;
	return MC_OK;
}

/* ---- writing the bundle ---- */

/* Reads one object's content from its source in chunks, hashing it again: a source
 * file that changed since it was recorded fails the save instead of producing a bad
 * bundle. */
static int
read_object(mc_writer *w, const struct mc_wobj *o, mc_out_fn fn, void *ud, uint64_t *done,
	    uint64_t total)
{
	unsigned char hash[MC_HASH_BYTES];
	struct mc_chash gs = {0};
	char name[MC_PATH_MAX];
	struct mc_wsource src;
	unsigned char *buf;
	uint64_t left = o->size;
	int rc;

	if ((rc = mc__wobj_path(w, w->ctx, o, name)) != MC_OK ||
	    (rc = mc__wsource_open(w->ctx, &src, w, o, name)) != MC_OK)
		return rc;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL || mc__chash_init(&gs, w->halg) != MC_OK) {
		free(buf);
		mc__wsource_close(&src);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	while (rc == MC_OK && left > 0) {
		size_t want = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = mc__wsource_read(w->ctx, &src, buf, want, o->offset + o->size - left)) !=
		    MC_OK)
			break;
		mc__chash_update(&gs, buf, want);
		rc = fn(ud, buf, want);
		left -= want;
		*done += want;
		mc__progress(w->ctx, "pack", *done, total);
	}
	free(buf);
	mc__wsource_close(&src);
	mc__chash_final(&gs, hash);
	mc__chash_drop(&gs);
	if (rc == MC_OK && memcmp(hash, o->hash, MC_HASH_BYTES) != 0)
		rc = mc__err(w->ctx, MC_ERR_IO, "%s: content changed while packing", name);
	return rc;
}

static int
emit_out(void *ud, const unsigned char *buf, size_t n)
{
	return mc__emit_data(ud, buf, n);
}

static int
copy_spooled(mc_writer *w, mc_emit *e, int fd, uint64_t off, uint64_t n)
{
	unsigned char *buf = malloc(MC_IO_CHUNK);
	int rc = MC_OK;

	if (buf == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	while (rc == MC_OK && n > 0) {
		size_t want = n < MC_IO_CHUNK ? (size_t)n : MC_IO_CHUNK;
		if (mc__pread_full(fd, buf, want, off) != 0) {
			rc = mc__err(w->ctx, MC_ERR_IO, "cannot read the spool file");
			break;
		}
		rc = mc__emit_data(e, buf, want);
		off += want;
		n -= want;
	}
	free(buf);
	return rc;
}


/* ---- the save ---- */

/* The signatures, ordered by key id. */
struct sigs {
	char **txt;
	size_t *len;
	char (*id)[17];
	size_t n;
};

struct job {
	mc_writer *w;
	const char *path;
	int out_fd;            /* where the bundle goes instead of path, or -1 */
	int layout;            /* a bundle of one torch blob keeps its layout */
	unsigned nworkers;
	struct mc_wsave sv;
	struct pass pass;
	uint32_t *order;       /* the object table: the kept objects, by hash */
	uint32_t nobjects;
	uint64_t done, total;  /* progress of the bytes read, of all the kept objects' */
	struct saveview view;
	struct mc_msource src;
	struct mc_manifest m;
	unsigned char prehash[MC_SIG_PREHASH];
	uint64_t mlen;
	struct sigs sigs;
	/* format version 2: the blocks, and the index (its frame in isp) */
	struct mc_wblocks bl;
	struct mc_wspool *isp;
	struct mc_wobj io;
	int again;             /* the blocks' pass found misnamed graph files */
};

static int
job_start(struct job *j, mc_writer *w, const char *path, int out_fd)
{
	memset(j, 0, sizeof *j);
	j->w = w;
	j->path = path;
	j->out_fd = out_fd;
	j->nworkers = mc__threads(w->ctx);
	j->layout = w->only_blob && w->nsources == 1;
	j->sv.w = w;
	mc__store_init(&j->sv.uniq, "artifact sort");
	mc__store_init(&j->sv.dups, "artifact sort");
	if ((j->sv.oi = calloc((size_t)w->nobjs + 1, sizeof *j->sv.oi)) == NULL ||
	    (j->pass.sp = calloc(j->nworkers, sizeof *j->pass.sp)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

static void
job_end(struct job *j)
{
	size_t i;
	unsigned k;

	for (k = 0; j->pass.sp != NULL && k < j->nworkers; k++) {
		mc__wspool_free(j->pass.sp[k].ws);
		free(j->pass.sp[k].rd.buf);
		free(j->pass.sp[k].paths);
	}
	free(j->pass.sp);
	mc__strv_free(j->m.gpu_targets, j->m.ngpu_targets);
	if (j->m.groups != NULL)
		for (i = 0; i < j->m.ngroups; i++)
			free(j->m.groups[i].entries);
	free(j->m.groups);
	free(j->view.r.buf);
	free(j->m.blocks);
	if (j->order != j->bl.order)
		free(j->order);
	mc__wblocks_free(&j->bl);
	mc__wspool_free(j->isp);
	free(j->sv.oi);
	mc__store_free(&j->sv.uniq);
	mc__store_free(&j->sv.dups);
	mc__strv_free(j->sigs.txt, j->sigs.n);
	free(j->sigs.len);
	free(j->sigs.id);
}

/* ---- format version 2: the index and the blocks ---- */

/* The index's text as it is rendered: hashed and counted, and written to e, or into
 * the index's frame when spool is set. */
struct itext {
	struct job *j;
	struct mc_chash h;
	uint64_t len;
	mc_emit *e;
	int spool;
	struct mc_pipe *pipe;  /* with spool: the thread that compresses, if any */
};

static int
itext_sink(void *ud, const char *p, size_t n)
{
	struct itext *t = ud;
	mc_ctx *ctx = t->j->w->ctx;

	mc__chash_update(&t->h, p, n);
	t->len += n;
	if (t->len > ctx->max_manifest)
		return mc__err(ctx, MC_ERR_LIMIT, "index of more than %llu bytes is over the "
			       "manifest cap", (unsigned long long)ctx->max_manifest);
	if (t->e != NULL)
		return mc__emit_data(t->e, p, n);
	if (t->pipe != NULL)
		return mc__pipe_put(t->pipe, p, n);
	return t->spool ? mc__wspool_piece(t->j->isp, (const unsigned char *)p, n, 0) : MC_OK;
}

/* A piece of the index's text into its frame, on the thread that compresses it; the
 * piece of no bytes that ends the text ends the frame (the renderer hands on none
 * before). */
static int
index_piece(void *ud, mc_ctx *wctx, const void *buf, size_t n)
{
	struct job *j = ud;
	int rc;

	(void)wctx; /* the spool was begun with it */
	if (n > 0)
		return mc__wspool_piece(j->isp, buf, n, 0);
	if ((rc = mc__wspool_piece(j->isp, NULL, 0, 1)) != MC_OK)
		return rc;
	return mc__wspool_end(j->isp, &j->io);
}

static int
write_index(struct job *j, mc_emit *e, int spool, struct mc_pipe *pipe,
	    unsigned char hash[MC_HASH_BYTES], uint64_t *len)
{
	struct itext t;
	int rc;

	memset(&t, 0, sizeof t);
	t.j = j;
	t.e = e;
	t.spool = spool;
	t.pipe = pipe;
	if (mc__chash_init(&t.h, j->w->halg) != MC_OK)
		return mc__err(j->w->ctx, MC_ERR_NOMEM, "out of memory");
	rc = mc__index_write(j->w->ctx, &j->m, itext_sink, &t);
	if (rc == MC_OK && j->view.rc != MC_OK)
		rc = j->view.rc;
	mc__chash_final(&t.h, hash);
	mc__chash_drop(&t.h);
	*len = t.len;
	return rc;
}

/* The index, compressed into a spool file of its own at a level above 0: what the
 * manifest says of it. With more than one thread, it is compressed on a second one
 * while the first renders it. */
static int
make_index(struct job *j)
{
	mc_writer *w = j->w;
	struct mc_mindex *x = &j->m.index;
	struct mc_pipe *pipe = NULL;
	int rc, rc2, spool = w->level > 0;

	memset(&j->io, 0, sizeof j->io);
	if (spool && mc__threads(w->ctx) > 1 &&
	    (rc = mc__pipe_start(w->ctx, index_piece, j, &pipe)) != MC_OK)
		return rc;
	if (spool && ((rc = mc__wspool_new(w->ctx, w->level, w->version, j->out_fd >= 0 ? NULL
					   : j->path, &j->isp)) != MC_OK ||
		      (rc = mc__wspool_begin(j->isp, pipe != NULL ? mc__pipe_ctx(pipe) : w->ctx,
					     &j->io)) != MC_OK)) {
		mc__pipe_end(pipe);
		return rc;
	}
	rc = write_index(j, NULL, spool, pipe, j->io.hash, &j->io.size);
	if (pipe != NULL) {
		if (rc == MC_OK)
			rc = mc__pipe_put(pipe, "", 0);
		rc2 = mc__pipe_end(pipe);
		rc = rc != MC_OK ? rc : rc2;
	} else if (rc == MC_OK && spool) {
		if ((rc = mc__wspool_piece(j->isp, NULL, 0, 1)) == MC_OK)
			rc = mc__wspool_end(j->isp, &j->io);
	}
	if (rc != MC_OK)
		return rc;
	if (spool)
		mc__wspool_done(j->isp);
	if (!spool) {
		j->io.encoding = MC_ENC_NONE;
		j->io.stored_size = j->io.size;
		memcpy(j->io.stored_hash, j->io.hash, MC_HASH_BYTES);
	}
	x->encoding = j->io.encoding;
	x->size = j->io.size;
	x->stored_size = j->io.stored_size;
	memcpy(x->stored_hash, j->io.stored_hash, MC_HASH_BYTES);
	return MC_OK;
}

/* The index member: its frame from the spool, or its text rendered again. */
static int
emit_index(struct job *j, mc_emit *e)
{
	const struct mc_mindex *x = &j->m.index;
	unsigned char hash[MC_HASH_BYTES];
	uint64_t len = 0;
	int rc;

	if ((rc = mc__emit_member(e, x->encoding == MC_ENC_ZSTD ? MC_MEMBER_INDEX_ZST
				  : MC_MEMBER_INDEX, x->stored_size)) != MC_OK)
		return rc;
	if (x->encoding == MC_ENC_ZSTD)
		return copy_spooled(j->w, e, mc__wspool_fd(j->isp), j->io.spool_off,
				    x->stored_size);
	if ((rc = write_index(j, e, 0, NULL, hash, &len)) != MC_OK)
		return rc;
	if (len != x->size || memcmp(hash, x->stored_hash, sizeof hash) != 0)
		return mc__err(j->w->ctx, MC_ERR_INVALID, "%s: the index rendered differently "
			       "twice", j->path);
	return MC_OK;
}

/* Each block in order: its frame from a spool, or its objects' contents read again. */
static int
emit_blocks(struct job *j, mc_emit *e)
{
	mc_writer *w = j->w;
	uint64_t spare = 0;
	uint32_t k, i;
	int rc = MC_OK;

	for (k = 0; k < j->bl.nb && rc == MC_OK; k++) {
		const struct mc_wblock *b = &j->bl.b[k];
		char name[32];

		snprintf(name, sizeof name, "%s%u", MC_MEMBER_BLOCK_PREFIX, (unsigned)k);
		if ((rc = mc__emit_member(e, name, b->stored_size)) != MC_OK)
			break;
		if (b->encoding == MC_ENC_ZSTD) {
			rc = copy_spooled(w, e, mc__wblocks_fd(&j->bl, b), b->spool_off,
					  b->stored_size);
			continue;
		}
		for (i = 0; i < b->n && rc == MC_OK; i++) {
			struct mc_wobj o;
			if ((rc = mc__wobj_get(w, w->ctx, j->bl.order[b->first + i], &o)) == MC_OK)
				rc = read_object(w, &o, emit_out, e, &spare, j->total);
		}
	}
	return rc;
}

/* A bundle that keeps its blob's layout stores every object the groups name. */
static int
mark_layout(struct job *j)
{
	mc_writer *w = j->w;
	size_t i, k;
	int rc;

	for (i = 0; j->layout && i < w->ngroups; i++)
		for (k = 0; k < w->groups[i].nentries; k++) {
			uint32_t x = (uint32_t)w->groups[i].entries[k].object;
			struct mc_wobj o;
			if (j->sv.oi[x] == MC_WMARK_USED)
				continue;
			if ((rc = mc__wobj_get(w, w->ctx, x, &o)) != MC_OK)
				return rc;
			j->sv.oi[x] = MC_WMARK_USED;
			j->sv.pass_total += o.size;
		}
	return MC_OK;
}

/* Graph files the blocks' pass found misnamed are taken back, or kept as "extra"
 * (mc__writer_misnamed), and the artifacts sorted again. Where the objects stored stay
 * the same (kept as "extra"), the blocks are good as they are; otherwise (one taken
 * back, or another file of its key kept in its place) j->again tells the save to start
 * over. */
static int
misnamed(struct job *j)
{
	mc_writer *w = j->w;
	unsigned char *used; /* the objects stored, a bit each */
	uint32_t i;
	size_t n;
	int rc;

	if (atomic_load(&j->bl.misnamed) == 0)
		return MC_OK;
	if ((rc = mc__writer_misnamed(w, &n)) != MC_OK || n == 0)
		return rc;
	if ((used = calloc((size_t)w->nobjs / 8 + 1, 1)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->nobjs; i++) {
		used[i / 8] |= (unsigned char)((j->sv.oi[i] == MC_WMARK_USED) << (i % 8));
		j->sv.oi[i] = 0;
	}
	mc__store_free(&j->sv.uniq);
	mc__store_free(&j->sv.dups);
	j->sv.nuniq = 0;
	j->sv.uniq_bytes = 0;
	j->sv.pass_total = 0;
	if ((rc = mc__wsort_artifacts(&j->sv)) == MC_OK && (rc = mark_layout(j)) == MC_OK)
		for (i = 0; i < w->nobjs; i++)
			j->again |= (j->sv.oi[i] == MC_WMARK_USED) !=
				    ((used[i / 8] >> (i % 8)) & 1);
	free(used);
	return rc;
}

/* The first pass: every used object read once, hashed and compressed; then the
 * conflicts, which need every listed object's hash. */
static int
first_pass(struct job *j)
{
	mc_writer *w = j->w;
	uint64_t t = mc__prof_start(w->ctx);
	int rc;

	if (w->version == 2 &&
	    ((rc = mc__wblocks_plan(&j->bl, &j->sv, j->out_fd >= 0 ? NULL : j->path)) != MC_OK ||
	     (rc = mc__wblocks_pass(&j->bl)) != MC_OK || (rc = misnamed(j)) != MC_OK))
		return rc;
	t = mc__prof_since(w->ctx, "blocks", t, 0);
	if (j->again)
		return MC_OK;
	j->pass.w = w;
	j->pass.path = j->path;
	j->pass.out_fd = j->out_fd;
	j->pass.oi = j->sv.oi;
	j->pass.total = j->sv.pass_total;
	if ((rc = mc__parallel(w->ctx, ((size_t)w->nobjs + PASS_BATCH - 1) / PASS_BATCH,
			       j->nworkers, pass_item, &j->pass)) != MC_OK ||
	    (rc = mc__wsort_conflicts(&j->sv)) != MC_OK)
		return rc;
	mc__prof_since(w->ctx, "pass", t, 0);
	mc__store_free(&j->sv.dups);
	j->done = atomic_load(&j->pass.done);
	return MC_OK;
}

/* Format version 2's object table: the stored objects in the blocks' order. */
static int
block_objects(struct job *j)
{
	struct mc_manifest *m = &j->m;
	uint32_t k;

	j->order = j->bl.order;
	j->nobjects = j->bl.n;
	j->total = j->bl.total;
	for (k = 0; k < j->bl.n; k++)
		j->sv.oi[j->bl.order[k]] = k;
	if ((m->blocks = calloc((size_t)j->bl.nb + 1, sizeof *m->blocks)) == NULL)
		return mc__err(j->w->ctx, MC_ERR_NOMEM, "out of memory");
	for (k = 0; k < j->bl.nb; k++) {
		const struct mc_wblock *b = &j->bl.b[k];
		struct mc_mblock *mb = &m->blocks[k];
		mb->encoding = b->encoding;
		mb->size = b->size;
		mb->stored_size = b->stored_size;
		memcpy(mb->stored_hash, b->stored_hash, MC_HASH_BYTES);
		mb->first = b->first;
		mb->n = b->n;
	}
	m->nblocks = j->bl.nb;
	return MC_OK;
}

/* The blob's groups in the manifest, their entries naming places in the object table. */
static int
layout_groups(struct job *j)
{
	mc_writer *w = j->w;
	struct mc_manifest *m = &j->m;
	size_t i, k;

	m->has_torch_blob = 1;
	m->ngroups = w->ngroups;
	if ((m->groups = calloc(w->ngroups + 1, sizeof *m->groups)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->ngroups; i++) {
		m->groups[i].type = w->groups[i].type;
		m->groups[i].nentries = w->groups[i].nentries;
		m->groups[i].entries = calloc(w->groups[i].nentries + 1, sizeof(struct mc_mentry));
		if (m->groups[i].entries == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		for (k = 0; k < w->groups[i].nentries; k++) {
			m->groups[i].entries[k].key = w->groups[i].entries[k].key;
			m->groups[i].entries[k].object = j->sv.oi[w->groups[i].entries[k].object];
		}
	}
	return MC_OK;
}

/* ---- format version 2: the GPU targets of the kernels ---- */

/* Adds target t to the sorted, distinct list of the manifest model. */
static int
add_gpu_target(struct job *j, const char *t)
{
	struct mc_manifest *m = &j->m;
	size_t i;
	char **v;
	int c = 1;

	for (i = 0; i < m->ngpu_targets && (c = strcmp(m->gpu_targets[i], t)) < 0; i++)
		;
	if (c == 0)
		return MC_OK;
	if (m->ngpu_targets == 1024)
		return mc__err(j->w->ctx, MC_ERR_LIMIT, "%s: kernels for more than 1024 GPU targets",
			       j->path);
	if ((v = realloc(m->gpu_targets, (m->ngpu_targets + 1) * sizeof *v)) == NULL)
		return mc__err(j->w->ctx, MC_ERR_NOMEM, "out of memory");
	m->gpu_targets = v;
	memmove(v + i + 1, v + i, (m->ngpu_targets - i) * sizeof *v);
	if ((v[i] = mc__strdup(t)) == NULL) {
		memmove(v + i, v + i + 1, (m->ngpu_targets - i) * sizeof *v);
		return mc__err(j->w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	m->ngpu_targets++;
	return MC_OK;
}

/* The target a kept kernel metadata file names, read again from its source (small:
 * at most MC_DERIVE_MAX) and checked against the hash the first pass gave it. */
static int
meta_target(struct job *j, uint32_t obj, unsigned char **buf, size_t *cap)
{
	mc_writer *w = j->w;
	unsigned char hash[MC_HASH_BYTES];
	char name[MC_PATH_MAX], t[MC_GPU_TARGET_LEN];
	struct mc_chash h = {0};
	struct mc_wsource src;
	struct mc_wobj o;
	int rc;

	if ((rc = mc__wobj_get(w, w->ctx, obj, &o)) != MC_OK)
		return rc;
	if (o.size == 0 || o.size > MC_DERIVE_MAX)
		return MC_OK;
	if (*cap < o.size) {
		unsigned char *p = realloc(*buf, (size_t)o.size);
		if (p == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		*buf = p;
		*cap = (size_t)o.size;
	}
	if ((rc = mc__wobj_path(w, w->ctx, &o, name)) != MC_OK ||
	    (rc = mc__wsource_open(w->ctx, &src, w, &o, name)) != MC_OK)
		return rc;
	rc = mc__wsource_read(w->ctx, &src, *buf, (size_t)o.size, o.offset);
	mc__wsource_close(&src);
	if (rc != MC_OK)
		return rc;
	if (mc__chash_init(&h, w->halg) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	mc__chash_update(&h, *buf, (size_t)o.size);
	mc__chash_final(&h, hash);
	mc__chash_drop(&h);
	if (memcmp(hash, o.hash, sizeof hash) != 0)
		return mc__err(w->ctx, MC_ERR_IO, "%s: content changed while packing", name);
	if (mc__kernel_target(*buf, (size_t)o.size, t))
		rc = add_gpu_target(j, t);
	return rc;
}

/* The targets of the kept artifacts that are Triton kernels' metadata files (SPEC.md
 * section 12.6), into the manifest model. */
static int
gpu_targets(struct job *j)
{
	mc_writer *w = j->w;
	struct mc_sreader r;
	struct mc_wart a;
	char key[MC_KEY_MAX + 1];
	unsigned char *buf = NULL;
	size_t cap = 0;
	int rc, got = 1;

	if ((rc = mc__sreader_init(w->ctx, &r, &j->sv.uniq, 0, mc__store_size(&j->sv.uniq),
				   MC_WSORT_READ)) != MC_OK)
		return rc;
	while (rc == MC_OK) {
		if ((rc = mc__wart_next(w->ctx, &r, &a, (unsigned char *)key, &got)) != MC_OK || !got)
			break;
		key[a.key_len] = '\0';
		if (mc__kernel_meta(mc__find_type(w->ctx, w->types[a.type]), key))
			rc = meta_target(j, a.obj, &buf, &cap);
	}
	free(buf);
	free(r.buf);
	return rc;
}

/* The manifest's model: the sorted tables seen through j->view, the blob's groups
 * when it keeps its layout, and the labels in name order. */
static int
manifest_model(struct job *j)
{
	mc_writer *w = j->w;
	struct mc_manifest *m = &j->m;
	int rc;

	j->view.w = w;
	j->view.sv = &j->sv;
	j->view.order = j->order;
	if ((rc = mc__sreader_init(w->ctx, &j->view.r, &j->sv.uniq, 0,
				   mc__store_size(&j->sv.uniq), MC_WSORT_READ)) != MC_OK)
		return rc;
	m->version = w->version;
	m->halg = w->halg;
	m->nartifacts = j->sv.nuniq;
	m->nobjects = j->nobjects;
	j->src.ud = &j->view;
	j->src.artifact = view_artifact;
	j->src.object = view_object;
	m->src = &j->src;
	if (j->layout && (rc = layout_groups(j)) != MC_OK)
		return rc;
	if (w->nlabels > 1)
		qsort(w->labels, w->nlabels, sizeof *w->labels, label_cmp);
	m->labels = w->labels;
	m->nlabels = w->nlabels;
	m->created = w->created;
	m->bundle_version = w->bundle_version;
	m->expires = w->expires;
	return MC_OK;
}

/* Renders the manifest through the view, into e when it is not NULL. */
static int
render(struct job *j, mc_emit *e, unsigned char prehash[MC_SIG_PREHASH], uint64_t *len)
{
	int rc = write_manifest(j->w->ctx, &j->m, e, prehash, len);

	return j->view.rc != MC_OK ? j->view.rc : rc;
}

/* Each signer's signature of the manifest's prehash, kept ordered by key id. */
static int
sign_manifest(struct job *j)
{
	mc_writer *w = j->w;
	struct sigs *s = &j->sigs;
	size_t i, k;
	int rc;

	if (w->nsigners > 0 &&
	    ((s->txt = calloc(w->nsigners, sizeof *s->txt)) == NULL ||
	     (s->len = calloc(w->nsigners, sizeof *s->len)) == NULL ||
	     (s->id = calloc(w->nsigners, sizeof *s->id)) == NULL))
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->nsigners; i++) {
		char *text, id[17];
		size_t len;

		rc = mc__sig_member(w->ctx, w->signers[i], j->prehash, w->created, &text, &len, id);
		if (rc != MC_OK)
			return rc;
		for (k = s->n; k > 0 && strcmp(s->id[k - 1], id) > 0; k--) {
			s->txt[k] = s->txt[k - 1];
			s->len[k] = s->len[k - 1];
			memcpy(s->id[k], s->id[k - 1], 17);
		}
		s->txt[k] = text;
		s->len[k] = len;
		memcpy(s->id[k], id, 17);
		s->n++;
	}
	return MC_OK;
}

/* Each object in table order: its zstd frame from the spool, or its content read again
 * from its source. */
static int
emit_objects(struct job *j, mc_emit *e)
{
	mc_writer *w = j->w;
	uint64_t spare = 0;
	size_t i;
	int rc = MC_OK;

	for (i = 0; i < j->nobjects && rc == MC_OK; i++) {
		struct mc_mobject mo;
		char name[128];

		view_object(&j->view, i, &mo);
		if ((rc = j->view.rc) != MC_OK)
			break;
		mc__object_member(mo.hash, name, sizeof name);
		if ((rc = mc__emit_member(e, name, mo.stored_size)) != MC_OK)
			break;
		if (j->view.o.flags & MC_WOBJ_SPOOLED)
			rc = copy_spooled(w, e, mc__wspool_fd(w->spools[j->view.o.spool]),
					  j->view.o.spool_off, mo.stored_size);
		else if (mo.encoding == MC_ENC_ZSTD)
			rc = copy_spooled(w, e, mc__wspool_fd(j->pass.sp[j->view.o.spool].ws),
					  j->view.o.spool_off, mo.stored_size);
		else
			rc = read_object(w, &j->view.o, emit_out, e, w->level > 0 ? &spare : &j->done,
					 j->total);
	}
	return rc;
}

/* Writes the bundle: the manifest rendered again (it must come out the same), the
 * signatures, the objects. */
static int
emit_bundle(struct job *j)
{
	unsigned char again[MC_SIG_PREHASH];
	uint64_t again_len = 0;
	mc_emit *e = NULL;
	int rc;

	if ((rc = j->out_fd >= 0 ? mc__emit_open_fd(j->w->ctx, j->out_fd, j->path, &e)
				 : mc__emit_open(j->w->ctx, j->path, &e)) != MC_OK ||
	    (rc = mc__emit_member(e, MC_MEMBER_MANIFEST, j->mlen)) != MC_OK ||
	    (rc = render(j, e, again, &again_len)) != MC_OK)
		goto out;
	if (again_len != j->mlen || memcmp(again, j->prehash, sizeof again) != 0) {
		rc = mc__err(j->w->ctx, MC_ERR_INVALID, "%s: the manifest rendered differently twice",
			     j->path);
		goto out;
	}
	if ((rc = mc__emit_sigs(e, j->sigs.txt, j->sigs.len, (const char (*)[17])j->sigs.id,
				j->sigs.n)) != MC_OK)
		goto out;
	if (j->w->version == 1)
		rc = emit_objects(j, e);
	else if ((rc = emit_index(j, e)) == MC_OK)
		rc = emit_blocks(j, e);
	if (rc != MC_OK)
		goto out;
	rc = mc__emit_finish(e);
	e = NULL;
out:
	mc__emit_abort(e);
	return rc;
}

/* The save of a job started at time t, step by step: the artifacts sorted by (type,
 * key), the last recorded of a pair kept; the first pass, which ends the save early
 * with *again set when it found graph files misnamed; the object table. The manifest
 * is rendered twice, never held whole: once for its size and prehash, which the
 * signatures need before it is written, then into the file. */
static int
save_steps(struct job *j, int *again, uint64_t t)
{
	mc_writer *w = j->w;
	int rc;

	if ((rc = mc__wsort_artifacts(&j->sv)) != MC_OK)
		return rc;
	if ((rc = mark_layout(j)) != MC_OK)
		return rc;
	t = mc__prof_since(w->ctx, "sort", t, 0);
	if ((rc = first_pass(j)) != MC_OK)
		return rc;
	if ((*again = j->again))
		return MC_OK;
	rc = w->version == 2 ? block_objects(j)
			     : mc__wsort_objects(&j->sv, &j->order, &j->nobjects, &j->total);
	if (rc != MC_OK)
		return rc;
	t = mc__prof_start(w->ctx);
	if (w->version != 1 && (rc = gpu_targets(j)) != MC_OK)
		return rc;
	t = mc__prof_since(w->ctx, "targets", t, 0);
	if ((rc = manifest_model(j)) != MC_OK)
		return rc;
	if (w->version != 1 && (rc = make_index(j)) != MC_OK)
		return rc;
	t = mc__prof_since(w->ctx, "index", t, 0);
	if ((rc = render(j, NULL, j->prehash, &j->mlen)) != MC_OK)
		return rc;
	if ((rc = sign_manifest(j)) != MC_OK)
		return rc;
	t = mc__prof_since(w->ctx, "manifest", t, 0);
	rc = emit_bundle(j);
	mc__prof_since(w->ctx, "write", t, 0);
	return rc;
}

/* Writes the bundle; *again is set instead when the first pass found graph files whose
 * names are not their contents' hashes. */
static int
save_once(mc_writer *w, const char *path, int out_fd, int *again)
{
	uint64_t t = mc__prof_start(w->ctx);
	struct job j;
	int rc;

	if ((rc = job_start(&j, w, path, out_fd)) == MC_OK)
		rc = save_steps(&j, again, t);
	if (rc == MC_OK && !*again) {
		w->saved_narts = j.sv.nuniq;
		w->saved_total = j.sv.uniq_bytes;
	}
	job_end(&j);
	return rc;
}

/* Misnamed graph files are found as the blocks' pass reads them (a content is read
 * once). One taken back leaves its block with a content no artifact uses, and another
 * file of its key (recorded before it, so far left out) may take its place: the save
 * is made again. Each time again resolves at least one graph file, so it ends. */
static int
save(mc_writer *w, const char *path, int out_fd)
{
	uint64_t runs, most = (uint64_t)w->narts + 1;
	int rc, again = 1;

	for (runs = 0; again; runs++) {
		if (runs > 0 && w->narts == 0) /* as a scan that found nothing */
			return mc__err(w->ctx, MC_ERR_INVALID, "%s: nothing written: every file "
				       "recorded was a graph file whose name is not the hash of "
				       "its content", path);
		if (runs > most)
			return mc__err(w->ctx, MC_ERR_IO, "%s: graph files changed while packing",
				       path);
		if ((rc = save_once(w, path, out_fd, &again)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

/* A save to a registry reference: written whole to a temp file, then pushed. */
static int
save_to_reference(mc_writer *w, const char *ref)
{
	int fd = mc__open_temp_anon(w->ctx), rc;

	if (fd < 0)
		return MC_ERR_IO;
	if ((rc = save(w, ref, fd)) == MC_OK)
		rc = mc__push_bundle(w->ctx, fd, ref);
	close(fd);
	return rc;
}

int
mc_writer_save(mc_writer *w, const char *path)
{
	if (w == NULL || path == NULL)
		return MC_ERR_INVALID;
	if (mc_is_reference(path))
		return save_to_reference(w, path);
	return save(w, path, -1);
}

int
mc_writer_save_fd(mc_writer *w, int fd, const char *name)
{
	if (w == NULL || fd < 0 || name == NULL)
		return MC_ERR_INVALID;
	return save(w, name, fd);
}
