/*
 * wsource.c - reading the writer's sources: a range of a file, or a content given in
 * memory (in the data store), read in pieces and hashed on the way.
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "write/write.h"

int
mc__wsource_open(mc_ctx *ctx, struct mc_wsource *src, const mc_writer *w, const struct mc_wobj *o,
		 const char *path)
{
	src->name = path;
	src->st = &w->data;
	src->fd = -1;
	src->borrowed = 0;
	src->base = 0;
	if (o != NULL && (o->flags & MC_WOBJ_SPOOLED)) { /* kept as it is (format version 2) */
		src->fd = mc__wspool_fd(w->spools[o->spool]);
		src->borrowed = 1;
		src->base = o->spool_off;
		src->name = "spool file";
		return MC_OK;
	}
	if (o != NULL && o->path_off == MC_WOBJ_IN_DATA)
		return MC_OK;
	/* O_NONBLOCK: a FIFO swapped in after the scan cannot hang pack. */
	if ((src->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	return MC_OK;
}

void
mc__wsource_close(struct mc_wsource *src)
{
	if (src->fd >= 0 && !src->borrowed)
		close(src->fd);
	src->fd = -1;
}

int
mc__wsource_read(mc_ctx *ctx, const struct mc_wsource *src, void *buf, size_t n, uint64_t off)
{
	if (src->fd < 0)
		return mc__store_io(ctx, src->st, off, buf, n, 0);
	if (mc__pread_full(src->fd, buf, n, src->base + off) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot read (did it shrink?)", src->name);
	return MC_OK;
}

int
mc__wsource_digest(struct mc_wread *rd, const struct mc_wsource *src, uint64_t offset,
		   uint64_t size, unsigned char *hash, unsigned char *sha, mc_wpiece_fn fn, void *ud)
{
	struct mc_chash gs;
	struct mc_sha256 ss = {0};
	unsigned char *sha_out = sha; /* where the content hash is the SHA-256, one hash */
	int copy = 0;
	uint64_t left = size;
	size_t piece = size <= MC_WHOLE_MAX ? (size_t)size : MC_IO_CHUNK;
	int rc = MC_OK;

	if (rd->max_piece != 0 && piece > rd->max_piece)
		piece = rd->max_piece;
	if (piece > rd->cap) {
		unsigned char *p = realloc(rd->buf, piece < 65536 ? 65536 : piece);
		if (p == NULL)
			return mc__err(rd->ctx, MC_ERR_NOMEM, "out of memory");
		rd->buf = p;
		rd->cap = piece < 65536 ? 65536 : piece;
	}
	memset(&gs, 0, sizeof gs);
	if (rd->halg == MC_HALG_SHA256 && sha != NULL) {
		copy = hash != NULL;
		if (hash == NULL)
			hash = sha;
		sha = NULL;
	}
	if ((sha != NULL && mc__sha256_init(&ss) != MC_OK) ||
	    (hash != NULL && mc__chash_init(&gs, rd->halg) != MC_OK)) {
		mc__sha256_drop(&ss);
		return mc__err(rd->ctx, MC_ERR_NOMEM, "out of memory");
	}
	while (rc == MC_OK && left > 0) {
		size_t want = left < piece ? (size_t)left : piece;
		if ((rc = mc__wsource_read(rd->ctx, src, rd->buf, want, offset + size - left)) != MC_OK)
			break;
		if (hash != NULL)
			mc__chash_update(&gs, rd->buf, want);
		if (sha != NULL)
			mc__sha256_update(&ss, rd->buf, want);
		left -= want;
		if (fn != NULL)
			rc = fn(ud, rd->buf, want, left == 0);
	}
	if (hash != NULL)
		mc__chash_final(&gs, hash);
	mc__chash_drop(&gs);
	if (sha != NULL) {
		mc__sha256_final(&ss, sha);
		mc__sha256_drop(&ss);
	}
	if (copy)
		memcpy(sha_out, hash, MC_SHA256_BYTES);
	return rc;
}
