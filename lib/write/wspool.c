/*
 * wspool.c - spools: objects in their stored form, one after another in an unlinked
 * temp file, waiting for the bundle to be written. The save's first pass fills one per
 * worker; pull fills them as the store's entries arrive, and gives them to the writer.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "write/write.h"

struct mc_wspool {
	int fd;
	char *beside;    /* the file it is beside, which its messages name; NULL: $TMPDIR */
	int level;       /* 0: contents are kept as they are */
	uint64_t len;
	mc_zenc *z;
	mc_ctx *ctx;     /* the errors of the object being put */
	int halg, wlog;     /* the format version's hash and zstd window */
	struct mc_chash gs; /* of the stored bytes of the object being put */
};

int
mc__wspool_new(mc_ctx *ctx, int level, int version, const char *beside, struct mc_wspool **out)
{
	struct mc_wspool *sp;
	char *tmp = NULL;

	*out = NULL;
	if ((sp = calloc(1, sizeof *sp)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	sp->level = level;
	/* Format version 2 compresses whole blocks with a smaller window than version 1's
	 * objects, so that a reader holds less. */
	sp->halg = version == 1 ? MC_HALG_BLAKE2B : MC_HALG_SHA256;
	sp->wlog = version == 1 ? MC_ZSTD_WINDOW_LOG : MC_BLOCK_WINDOW_LOG;
	if (beside == NULL) { /* no folder to make it in: $TMPDIR's */
		sp->fd = mc__open_temp_anon(ctx);
	} else if ((sp->fd = mc__open_temp_beside(ctx, beside, &tmp, 0600)) >= 0) {
		unlink(tmp); /* the open descriptor keeps it; nothing is left behind */
		free(tmp);
	}
	if (sp->fd < 0) {
		free(sp);
		return MC_ERR_IO;
	}
	if (beside != NULL && (sp->beside = mc__strdup(beside)) == NULL) {
		mc__wspool_free(sp);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	*out = sp;
	return MC_OK;
}

void
mc__wspool_done(struct mc_wspool *sp)
{
	mc__zenc_free(sp->z);
	sp->z = NULL;
}

void
mc__wspool_free(struct mc_wspool *sp)
{
	if (sp == NULL)
		return;
	mc__zenc_free(sp->z);
	mc__chash_drop(&sp->gs);
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->beside);
	free(sp);
}

int
mc__wspool_fd(const struct mc_wspool *sp)
{
	return sp->fd;
}

/* A write to the spool failed (errno): told as a failure to write the file it is
 * beside, the one the caller named (its temp file is nameless), or of $TMPDIR. */
static int
spool_error(const struct mc_wspool *sp, mc_ctx *ctx)
{
	int e = errno;

	if (sp->beside != NULL)
		return mc__errno(ctx, MC_ERR_IO, "cannot write", sp->beside);
	return mc__err(ctx, MC_ERR_IO, "%s: cannot write a temp file there: %s", mc__tmpdir(),
		       e != 0 ? strerror(e) : "unexpected end of file");
}

static int
spool_out(void *ud, const unsigned char *buf, size_t n)
{
	struct mc_wspool *sp = ud;

	if (mc__write_all(sp->fd, buf, n) != 0)
		return spool_error(sp, sp->ctx);
	mc__chash_update(&sp->gs, buf, n);
	sp->len += n;
	return MC_OK;
}

int
mc__wspool_begin(struct mc_wspool *sp, mc_ctx *ctx, struct mc_wobj *o)
{
	int rc;

	sp->ctx = ctx;
	o->spool_off = sp->len;
	if (mc__chash_init(&sp->gs, sp->halg) != MC_OK)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	/* The compressor is made by the thread that uses it, and tells that one's context. */
	if (sp->level > 0 && sp->z == NULL &&
	    (rc = mc__zenc_new_window(ctx, sp->level, sp->wlog, &sp->z)) != MC_OK)
		return rc;
	return MC_OK;
}

int
mc__wspool_piece(struct mc_wspool *sp, const unsigned char *buf, size_t n, int last)
{
	return mc__zenc_run(sp->z, buf, n, last, spool_out, sp);
}

int
mc__wspool_end(struct mc_wspool *sp, struct mc_wobj *o)
{
	uint64_t zsize = sp->len - o->spool_off;

	o->encoding = MC_ENC_NONE;
	o->stored_size = o->size;
	memcpy(o->stored_hash, o->hash, MC_HASH_BYTES);
	if (sp->level == 0)
		return MC_OK;
	/* Stored as zstd only where any reader with the default caps takes it. */
	if (zsize < o->size && !mc__over_expansion(o->size, zsize, MC_DEFAULT_MAX_EXPANSION)) {
		o->encoding = MC_ENC_ZSTD;
		o->stored_size = zsize;
		mc__chash_final(&sp->gs, o->stored_hash);
		return MC_OK;
	}
	/* Stored as is: the spool forgets the frame. */
	if (ftruncate(sp->fd, (off_t)o->spool_off) != 0 ||
	    lseek(sp->fd, (off_t)o->spool_off, SEEK_SET) < 0)
		return spool_error(sp, sp->ctx);
	sp->len = o->spool_off;
	return MC_OK;
}

int
mc__wspool_put(struct mc_wspool *sp, mc_ctx *ctx, const unsigned char *c, size_t n,
	       struct mc_wobj *o)
{
	int rc;

	memset(o, 0, sizeof *o);
	o->size = n;
	o->path_off = MC_WOBJ_IN_DATA;
	o->flags = MC_WOBJ_SPOOLED;
	if (mc__chash(sp->halg, o->hash, c, n) != MC_OK)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = mc__wspool_begin(sp, ctx, o)) != MC_OK ||
	    (sp->level > 0 && (rc = mc__wspool_piece(sp, c, n, 1)) != MC_OK))
		return rc;
	if ((rc = mc__wspool_end(sp, o)) != MC_OK || o->encoding == MC_ENC_ZSTD)
		return rc;
	o->spool_off = sp->len; /* kept as it is */
	if (n > 0 && mc__write_all(sp->fd, c, n) != 0)
		return spool_error(sp, ctx);
	sp->len += n;
	return MC_OK;
}
