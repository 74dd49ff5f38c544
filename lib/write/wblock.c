/*
 * wblock.c - the blocks of format version 2 at save (SPEC.md section 12): the stored
 * objects ordered by (extension, size, order recorded), so that contents alike lie close
 * together, and cut into blocks of up to MC_BLOCK_MAX bytes of content; each block is
 * read on one worker thread, its objects hashed and compressed together into one zstd
 * frame in the worker's spool file.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "write/write.h"

/* What a worker keeps from block to block. */
struct mc_wbworker {
	mc_ctx *ctx;          /* the worker's context, once it has started */
	struct mc_wread rd;
	struct mc_wspool *sp; /* with compression */
};

/* An object's place in the order: the extension of its source's file name (its first 8
 * bytes), its size, then the order recorded, which for a scanned folder is the order of
 * names. Files of one kind and near one size (the shared libraries of C++ kernels built
 * alike, say) are most often alike: side by side, the window finds what they share. A
 * torch blob's entries keep the blob's order (size 0 here), which groups them by type. */
struct okey {
	char ext[8];
	uint32_t idx;
	uint32_t part;        /* a blob's entry: its size does not count (24 bytes in all:
			       * a large save sorts hundreds of thousands) */
	uint64_t size;
};

/* The size the order takes. */
static uint64_t
okey_by(const struct okey *k)
{
	return k->part ? 0 : k->size;
}

static int
okey_cmp(const void *x, const void *y)
{
	const struct okey *a = x, *b = y;
	int c = memcmp(a->ext, b->ext, sizeof a->ext);

	if (c != 0)
		return c;
	if (okey_by(a) != okey_by(b))
		return okey_by(a) < okey_by(b) ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* The extension of the last component of path: what follows its last dot, none for a
 * name whose only dot comes first. */
static void
ext_of(const char *path, char ext[8])
{
	const char *base = strrchr(path, '/'), *dot;
	size_t n;

	base = base != NULL ? base + 1 : path;
	dot = strrchr(base, '.');
	memset(ext, 0, 8);
	if (dot == NULL || dot == base)
		return;
	n = strlen(dot + 1);
	memcpy(ext, dot + 1, n < 8 ? n : 8);
}

/* The keys of the stored objects. */
static int
object_keys(struct mc_wsave *sv, struct okey *k, uint32_t *n)
{
	mc_writer *w = sv->w;
	char path[MC_PATH_MAX];
	struct mc_wobj o;
	uint32_t i;
	int rc;

	*n = 0;
	for (i = 0; i < w->nobjs; i++) {
		if (sv->oi[i] != MC_WMARK_USED)
			continue;
		if ((rc = mc__wobj_get(w, w->ctx, i, &o)) != MC_OK)
			return rc;
		memset(k[*n].ext, 0, sizeof k[*n].ext);
		if (o.path_off != MC_WOBJ_IN_DATA && !(o.flags & MC_WOBJ_SPOOLED)) {
			if ((rc = mc__wobj_path(w, w->ctx, &o, path)) != MC_OK)
				return rc;
			ext_of(path, k[*n].ext);
		}
		k[*n].idx = i;
		k[*n].size = o.size;
		k[*n].part = (o.flags & MC_WOBJ_PART) != 0;
		(*n)++;
	}
	return MC_OK;
}

/* Cuts the ordered objects into blocks: one ends before the object that would take it
 * past MC_BLOCK_MAX, so a larger object is a block of its own. */
static int
cut_blocks(struct mc_wblocks *bl, const struct okey *k)
{
	struct mc_wblock *b = NULL;
	uint32_t i;

	if ((bl->b = calloc((size_t)bl->n + 1, sizeof *bl->b)) == NULL)
		return mc__err(bl->w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < bl->n; i++) {
		if (b == NULL || b->size + k[i].size > MC_BLOCK_MAX) {
			b = &bl->b[bl->nb++];
			b->first = i;
		}
		b->n++;
		b->size += k[i].size;
		bl->order[i] = k[i].idx;
		bl->total += k[i].size;
	}
	return MC_OK;
}

int
mc__wblocks_plan(struct mc_wblocks *bl, struct mc_wsave *sv, const char *beside)
{
	mc_writer *w = sv->w;
	struct okey *k;
	uint32_t i, n = 0;
	int rc;

	memset(bl, 0, sizeof *bl);
	bl->w = w;
	bl->beside = beside;
	bl->nworkers = mc__threads(w->ctx);
	for (i = 0; i < w->nobjs; i++)
		n += sv->oi[i] == MC_WMARK_USED;
	if ((k = malloc(((size_t)n + 1) * sizeof *k)) == NULL ||
	    (bl->order = malloc(((size_t)n + 1) * sizeof *bl->order)) == NULL ||
	    (bl->wk = calloc(bl->nworkers, sizeof *bl->wk)) == NULL) {
		free(k);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	if ((rc = object_keys(sv, k, &bl->n)) == MC_OK) {
		qsort(k, bl->n, sizeof *k, okey_cmp);
		rc = cut_blocks(bl, k);
	}
	free(k);
	return rc;
}

/* A piece of an object's content, on to the block's frame: the last piece of the last
 * object ends it. */
struct bfeed {
	struct mc_wspool *sp;
	int last_object;
};

static int
block_piece(void *ud, const unsigned char *buf, size_t n, int last)
{
	struct bfeed *f = ud;

	return mc__wspool_piece(f->sp, buf, n, last && f->last_object);
}

/* Object j of block b: read, hashed, and compressed into the frame when sp is set. */
static int
block_object(struct mc_wblocks *bl, struct mc_wbworker *wk, uint32_t j, int last)
{
	mc_writer *w = bl->w;
	mc_ctx *ctx = wk->ctx;
	uint32_t idx = bl->order[j];
	unsigned char hash[MC_HASH_BYTES];
	char name[MC_PATH_MAX];
	struct bfeed f = {wk->sp, last};
	struct mc_wsource src;
	struct mc_wobj o;
	int rc;

	if ((rc = mc__wobj_get(w, ctx, idx, &o)) != MC_OK ||
	    (rc = mc__wobj_path(w, ctx, &o, name)) != MC_OK ||
	    (rc = mc__wsource_open(ctx, &src, w, &o, name)) != MC_OK)
		return rc;
	rc = mc__wsource_digest(&wk->rd, &src, o.offset, o.size, hash, NULL,
				wk->sp != NULL ? block_piece : NULL, &f);
	mc__wsource_close(&src);
	if (rc != MC_OK)
		return rc;
	if (!(o.flags & MC_WOBJ_PENDING) && memcmp(hash, o.hash, sizeof hash) != 0)
		return mc__err(ctx, MC_ERR_IO, "%s: content changed while packing", name);
	if (!(o.flags & (MC_WOBJ_PENDING | MC_WOBJ_NAMED)))
		return MC_OK;
	memcpy(o.hash, hash, sizeof hash);
	o.flags &= (uint8_t)~MC_WOBJ_PENDING;
	if ((o.flags & MC_WOBJ_NAMED) && !mc__torch_named_by(name, hash)) {
		o.flags |= MC_WOBJ_MISNAMED;
		atomic_fetch_add(&bl->misnamed, 1);
	}
	return mc__store_io(ctx, &w->objs, (uint64_t)idx * sizeof o, &o, sizeof o, 1);
}

/* Block k, on a worker. */
static int
block_item(void *ud, unsigned worker, mc_ctx *wctx, size_t k)
{
	struct mc_wblocks *bl = ud;
	struct mc_wbworker *wk = &bl->wk[worker];
	struct mc_wblock *b = &bl->b[k];
	mc_writer *w = bl->w;
	struct mc_wobj bo; /* the block, as one object of the spool */
	uint64_t done, t0 = mc__prof_start(wctx);
	uint32_t j;
	int rc;

	if (wk->ctx != wctx) { /* this worker's first block */
		wk->ctx = wk->rd.ctx = wctx;
		wk->rd.halg = w->halg;
		wk->rd.max_piece = MC_IO_CHUNK; /* a block is compressed as a stream anyway */
		if (w->level > 0 && wk->sp == NULL &&
		    (rc = mc__wspool_new(wctx, w->level, w->version, bl->beside, &wk->sp)) != MC_OK)
			return rc;
	}
	memset(&bo, 0, sizeof bo);
	bo.size = b->size;
	if (wk->sp != NULL && (rc = mc__wspool_begin(wk->sp, wctx, &bo)) != MC_OK)
		return rc;
	for (j = 0; j < b->n; j++)
		if ((rc = block_object(bl, wk, b->first + j, j + 1 == b->n)) != MC_OK)
			return rc;
	b->encoding = MC_ENC_NONE;
	b->stored_size = b->size;
	if (wk->sp != NULL && (rc = mc__wspool_end(wk->sp, &bo)) != MC_OK)
		return rc;
	if (wk->sp != NULL && bo.encoding == MC_ENC_ZSTD) {
		b->encoding = MC_ENC_ZSTD;
		b->stored_size = bo.stored_size;
		b->spool = (uint16_t)worker;
		b->spool_off = bo.spool_off;
		memcpy(b->stored_hash, bo.stored_hash, MC_HASH_BYTES);
	}
	mc__prof_since(wctx, "block threads", t0, 1);
	done = atomic_fetch_add(&bl->done, b->size) + b->size;
	if (worker == 0)
		mc__progress(w->ctx, "pack", done, bl->total);
	return MC_OK;
}

/* The order the workers take the blocks in: the longest first, so that none starts last
 * while the others are done. A block's time is mostly its bytes, compressed, and its
 * files, each opened, read and closed (about as long as 8 KiB compressed); the bench
 * corpus's blocks are all 16 MiB but hold from 33 to 5,074 files. NULL: in order. */
static uint64_t
block_cost(const void *ud, size_t k)
{
	const struct mc_wblock *b = &((const struct mc_wblocks *)ud)->b[k];

	return b->size + (uint64_t)b->n * 8192;
}

static int
block_order(const struct mc_wblocks *bl, size_t **out)
{
	*out = NULL;
	if (bl->nworkers < 2 || bl->nb < 2)
		return MC_OK;
	return mc__longest_first(bl->w->ctx, bl->nb, block_cost, bl, out);
}

int
mc__wblocks_pass(struct mc_wblocks *bl)
{
	size_t *order;
	unsigned k;
	int rc = block_order(bl, &order);

	if (rc == MC_OK)
		rc = mc__parallel_in(bl->w->ctx, bl->nb, bl->nworkers, block_item, bl, order);
	free(order);

	/* The compressors and read buffers are done with: only the spool files stay. */
	for (k = 0; k < bl->nworkers; k++) {
		if (bl->wk[k].sp != NULL)
			mc__wspool_done(bl->wk[k].sp);
		free(bl->wk[k].rd.buf);
		bl->wk[k].rd.buf = NULL;
		bl->wk[k].rd.cap = 0;
	}
	return rc;
}

int
mc__wblocks_fd(const struct mc_wblocks *bl, const struct mc_wblock *b)
{
	return mc__wspool_fd(bl->wk[b->spool].sp);
}

void
mc__wblocks_free(struct mc_wblocks *bl)
{
	unsigned k;

	for (k = 0; bl->wk != NULL && k < bl->nworkers; k++) {
		mc__wspool_free(bl->wk[k].sp);
		free(bl->wk[k].rd.buf);
	}
	free(bl->wk);
	free(bl->order);
	free(bl->b);
	memset(bl, 0, sizeof *bl);
}
