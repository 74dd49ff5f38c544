/*
 * zstream.c - bytes in and out of a bundle: buffered reading of the archive file, and
 * the zstd compression of each object. Objects are compressed one by one, not the
 * archive as a whole, so that the stored bytes of each can be hashed into the signed
 * manifest: zstd has many encodings of one content, and only a hash of the stored
 * bytes makes every byte of a bundle authenticated.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "format/format.h"

/* ---- file input ---- */

struct mc_zin {
	mc_ctx *ctx;
	const char *path;
	int fd;
	int eof;
	unsigned char *buf;
	size_t cap, pos, len;
	uint64_t base;     /* bytes read before buf[0] */
	uint64_t declared; /* the bundle's size as far as known, and whether exactly */
	int exact;
	int (*at_end)(void *ud, mc_ctx *ctx); /* asked at the end of fd's bytes, or NULL */
	void *end_ud;
};

/* The end of fd's bytes so far: 1 when their source has more now (read again), else
 * whether it says they were all there were. */
static int
source_end(mc_zin *z)
{
	int rc = z->at_end != NULL ? z->at_end(z->end_ud, z->ctx) : MC_OK;

	z->eof = rc == MC_OK;
	return rc;
}

/* The smallest bundle: a manifest member of one byte, padded, and the end blocks. */
#define MIN_BUNDLE (4u * MC_TAR_BLOCK)

int
mc__truncated(mc_ctx *ctx, const char *path, uint64_t got, uint64_t size, int exact)
{
	return mc__err(ctx, MC_ERR_MALFORMED, "%s: truncated at byte %llu of a bundle that "
		       "declares %s%llu bytes; download it again", path, (unsigned long long)got,
		       exact ? "" : "at least ", (unsigned long long)size);
}

static int
zin_fill(mc_zin *z)
{
	ssize_t r;
	int rc;

	if (z->pos < z->len || z->eof)
		return MC_OK;
	/* A read from a pipe that a signal interrupts ends there once ctx is cancelled. */
	for (;;) {
		do
			r = mc__cancelled(z->ctx) ? 0 : read(z->fd, z->buf, z->cap);
		while (r < 0 && errno == EINTR);
		if (mc__cancelled(z->ctx))
			return mc__cancel_err(z->ctx);
		if (r < 0)
			return mc__errno(z->ctx, MC_ERR_IO, "cannot read", z->path);
		z->base += z->len;
		z->pos = 0;
		z->len = (size_t)r;
		if (r > 0 || (rc = source_end(z)) <= 0)
			return r > 0 ? MC_OK : rc;
	}
}

/* Whether the n bytes at p start as a torch cache blob does (format/SPEC.md section
 * 10): version 1 as a big-endian u64, after the CRC-32 or (torch 2.7's without one)
 * first. */
static int
torch_blob_start(const unsigned char *p, size_t n)
{
	static const unsigned char v1[8] = {0, 0, 0, 0, 0, 0, 0, 1};

	return (n >= 12 && memcmp(p + 4, v1, 8) == 0) || (n >= 8 && memcmp(p, v1, 8) == 0);
}

/* Input that is not a bundle's first block: empty, cut inside a bundle's first header
 * (every bundle starts with the name of its manifest member), or something else. */
static int
first_block_error(mc_zin *z)
{
	static const char first[] = MC_MEMBER_MANIFEST;
	size_t n = z->len < sizeof first ? z->len : sizeof first;

	if (z->len == 0)
		return mc__err(z->ctx, MC_ERR_NOT_BUNDLE, "%s: empty; not a megacache bundle", z->path);
	if (z->len < MC_TAR_BLOCK && memcmp(z->buf, first, n) == 0)
		return mc__truncated(z->ctx, z->path, z->len, MIN_BUNDLE, 0);
	if (torch_blob_start(z->buf, z->len))
		return mc__err(z->ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle but a torch "
			       "cache blob (of torch.compiler.save_cache_artifacts()); record it into "
			       "one with megacache pack --from-torch", z->path);
	return mc__err(z->ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle (no tar header)",
		       z->path);
}

int
mc__zin_new(mc_ctx *ctx, int fd, const char *path, mc_zin **out)
{
	return mc__zin_new_src(ctx, fd, path, NULL, NULL, out);
}

int
mc__zin_new_src(mc_ctx *ctx, int fd, const char *path, int (*at_end)(void *ud, mc_ctx *ctx),
		void *ud, mc_zin **out)
{
	mc_zin *z = calloc(1, sizeof *z);
	int rc;

	*out = NULL;
	if (z == NULL || (z->buf = malloc(MC_IO_CHUNK)) == NULL) {
		free(z);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	z->ctx = ctx;
	z->path = path;
	z->fd = fd;
	z->cap = MC_IO_CHUNK;
	z->at_end = at_end;
	z->end_ud = ud;
	/* Gather the first block to tell whether this is a tar archive at all. */
	while (z->len < MC_TAR_BLOCK && !z->eof) {
		ssize_t r = mc__cancelled(ctx) ? -1 : read(fd, z->buf + z->len, z->cap - z->len);
		if (r < 0 && errno == EINTR && !mc__cancelled(ctx))
			continue;
		if (r < 0) {
			rc = mc__cancelled(ctx) ? mc__cancel_err(ctx)
						: mc__errno(ctx, MC_ERR_IO, "cannot read", path);
			mc__zin_free(z);
			return rc;
		}
		if (r == 0 && (rc = source_end(z)) < 0) {
			mc__zin_free(z);
			return rc;
		}
		z->len += (size_t)r;
	}
	if (z->len < MC_TAR_BLOCK || memcmp(z->buf + 257, "ustar\0" "00", 8) != 0) {
		rc = first_block_error(z);
		mc__zin_free(z);
		return rc;
	}
	z->declared = MIN_BUNDLE;
	*out = z;
	return MC_OK;
}

uint64_t
mc__zin_tell(const mc_zin *z)
{
	return z->base + z->pos;
}

void
mc__zin_declare(mc_zin *z, uint64_t size, int exact)
{
	z->declared = size;
	z->exact = exact;
}

int
mc__zin_read(mc_zin *z, void *buf, size_t n)
{
	unsigned char *p = buf;
	int rc;

	while (n > 0) {
		size_t k;

		if ((rc = zin_fill(z)) != MC_OK)
			return rc;
		if (z->pos == z->len)
			return mc__truncated(z->ctx, z->path, z->base + z->len, z->declared, z->exact);
		k = z->len - z->pos;
		if (k > n)
			k = n;
		memcpy(p, z->buf + z->pos, k);
		z->pos += k;
		p += k;
		n -= k;
	}
	return MC_OK;
}

int
mc__zin_expect_end(mc_zin *z)
{
	int rc;

	if ((rc = zin_fill(z)) != MC_OK)
		return rc;
	if (z->pos != z->len)
		return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: data after the end of the archive", z->path);
	return MC_OK;
}

void
mc__zin_free(mc_zin *z)
{
	if (z == NULL)
		return;
	free(z->buf);
	free(z);
}

/* ---- per-object compression ---- */

struct mc_zenc {
	mc_ctx *ctx;
	ZSTD_CCtx *cctx;
	unsigned char *out;
	size_t cap;
};

int
mc__zenc_new(mc_ctx *ctx, int level, mc_zenc **out)
{
	return mc__zenc_new_window(ctx, level, MC_ZSTD_WINDOW_LOG, out);
}

int
mc__zenc_new_window(mc_ctx *ctx, int level, int wlog, mc_zenc **out)
{
	mc_zenc *z = calloc(1, sizeof *z);

	*out = NULL;
	if (z == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	z->ctx = ctx;
	z->cap = ZSTD_CStreamOutSize();
	z->cctx = ZSTD_createCCtx();
	if (z->cctx == NULL || (z->out = malloc(z->cap)) == NULL ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog, wlog)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_dictIDFlag, 0))) {
		mc__zenc_free(z);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot set up the zstd compressor");
	}
	*out = z;
	return MC_OK;
}

int
mc__zenc_run(mc_zenc *z, const void *buf, size_t n, int end, mc_out_fn fn, void *ud)
{
	ZSTD_inBuffer in = {buf, n, 0};
	ZSTD_EndDirective mode = end ? ZSTD_e_end : ZSTD_e_continue;
	int rc;

	for (;;) {
		ZSTD_outBuffer o = {z->out, z->cap, 0};
		size_t left = ZSTD_compressStream2(z->cctx, &o, &in, mode);

		if (ZSTD_isError(left))
			return mc__err(z->ctx, MC_ERR_IO, "zstd: %s", ZSTD_getErrorName(left));
		if (o.pos > 0 && (rc = fn(ud, z->out, o.pos)) != MC_OK)
			return rc;
		if (end ? left == 0 : in.pos == in.size)
			return MC_OK;
	}
}

void
mc__zenc_free(mc_zenc *z)
{
	if (z == NULL)
		return;
	ZSTD_freeCCtx(z->cctx);
	free(z->out);
	free(z);
}

struct mc_zdec {
	mc_ctx *ctx;
	ZSTD_DCtx *dctx;
	unsigned char *out;
	size_t cap;
	int done;
	unsigned char magic[4]; /* the member's first bytes, as they arrive */
	size_t nmagic;
};

int
mc__zdec_new(mc_ctx *ctx, mc_zdec **out)
{
	mc_zdec *z = calloc(1, sizeof *z);

	*out = NULL;
	if (z == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	z->ctx = ctx;
	z->cap = ZSTD_DStreamOutSize();
	z->dctx = ZSTD_createDCtx();
	/* The window is capped at what the writer uses: memory stays bounded. */
	if (z->dctx == NULL || (z->out = malloc(z->cap)) == NULL ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(z->dctx, ZSTD_d_windowLogMax, MC_ZSTD_WINDOW_LOG))) {
		mc__zdec_free(z);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot set up the zstd decompressor");
	}
	*out = z;
	return MC_OK;
}

void
mc__zdec_reset(mc_zdec *z)
{
	ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
	z->done = 0;
	z->nmagic = 0;
}

/* The decoder would skip a skippable frame as if it were not there; the member must
 * be one zstd frame, so one is refused where it starts. What follows the frame is
 * refused by the callers, once the decoder says the frame ended. */
static int
check_magic(mc_zdec *z, const unsigned char *buf, size_t n)
{
	size_t k = 4 - z->nmagic;
	uint32_t m;

	if (z->nmagic == 4 || n == 0)
		return MC_OK;
	if (k > n)
		k = n;
	memcpy(z->magic + z->nmagic, buf, k);
	if ((z->nmagic += k) < 4)
		return MC_OK;
	m = (uint32_t)z->magic[0] | (uint32_t)z->magic[1] << 8 | (uint32_t)z->magic[2] << 16 |
	    (uint32_t)z->magic[3] << 24;
	if ((m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START)
		return mc__err(z->ctx, MC_ERR_MALFORMED, "a skippable frame, where one zstd frame "
			       "must be");
	return MC_OK;
}

static int
after_end(mc_zdec *z)
{
	return mc__err(z->ctx, MC_ERR_MALFORMED, "bytes after the end of the zstd frame");
}

static int
corrupt(mc_zdec *z, size_t ret)
{
	return mc__err(z->ctx, MC_ERR_MALFORMED, "corrupt compressed data (%s)",
		       ZSTD_getErrorName(ret));
}

int
mc__zdec_run(mc_zdec *z, const void *buf, size_t n, mc_out_fn fn, void *ud, int *done)
{
	ZSTD_inBuffer in = {buf, n, 0};
	int rc;

	if ((rc = check_magic(z, buf, n)) != MC_OK)
		return rc;
	for (;;) {
		ZSTD_outBuffer o = {z->out, z->cap, 0};
		size_t ret;

		if (z->done) {
			if (in.pos < in.size)
				return after_end(z);
			break;
		}
		ret = ZSTD_decompressStream(z->dctx, &o, &in);
		if (ZSTD_isError(ret))
			return corrupt(z, ret);
		if (o.pos > 0 && (rc = fn(ud, z->out, o.pos)) != MC_OK)
			return rc;
		if (ret == 0)
			z->done = 1;
		else if (in.pos == in.size && o.pos < o.size)
			break;
	}
	*done = z->done;
	return MC_OK;
}

/* The same streaming decoder as mc__zdec_run, writing straight into dst: objects read
 * whole and objects read in pieces get one verdict on every frame (the one-shot
 * decoder accepts some frames the streaming one refuses, such as a block larger than
 * the block maximum). */
int
mc__zdec_whole(mc_zdec *z, const void *src, size_t n, void *dst, size_t cap, size_t *produced,
	       int *overflow)
{
	ZSTD_inBuffer in = {src, n, 0};
	ZSTD_outBuffer o = {dst, cap + 1, 0}; /* a byte past cap: output that would pass it */
	size_t ret = 1;
	int rc;

	*produced = 0;
	*overflow = 0;
	mc__zdec_reset(z);
	if ((rc = check_magic(z, src, n)) != MC_OK)
		return rc;
	while (ret != 0) {
		ret = ZSTD_decompressStream(z->dctx, &o, &in);
		if (ZSTD_isError(ret))
			return corrupt(z, ret);
		if (o.pos > cap) {
			*overflow = 1;
			return MC_ERR_INTEGRITY;
		}
		if (ret != 0 && in.pos == in.size && o.pos < o.size)
			return mc__err(z->ctx, MC_ERR_MALFORMED, "compressed data ends early");
	}
	if (in.pos < in.size)
		return after_end(z);
	*produced = o.pos;
	return MC_OK;
}

void
mc__zdec_free(mc_zdec *z)
{
	if (z == NULL)
		return;
	ZSTD_freeDCtx(z->dctx);
	free(z->out);
	free(z);
}
