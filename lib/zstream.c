/*
 * zstream.c - the bundle's compression layer: one zstd frame with fixed parameters, so
 * that its header has exactly one valid form, or a plain uncompressed tar. The reader
 * accepts only that: one frame, the canonical header, checksum verified, nothing after.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "mc_private.h"

/* Window 2^23: fixed whatever the level, so the header never depends on the level. */
#define MC_ZSTD_WINDOW_LOG 23

/* Magic (LE 0xFD2FB528), frame header descriptor 0x04 (checksum, no content size,
 * no dictionary, not single-segment), window descriptor for 2^23. */
const unsigned char mc__zstd_header[MC_ZSTD_HEADER_LEN] = {0x28, 0xb5, 0x2f, 0xfd, 0x04,
							   (MC_ZSTD_WINDOW_LOG - 10) << 3};

struct mc_zout {
	mc_ctx *ctx;
	int fd;
	ZSTD_CCtx *cctx; /* NULL: plain */
	unsigned char *buf;
	size_t cap, len;
};

static int
zout_flush(mc_zout *z)
{
	if (z->len > 0 && mc__write_all(z->fd, z->buf, z->len) != 0)
		return mc__errno(z->ctx, MC_ERR_IO, "cannot write", "bundle");
	z->len = 0;
	return MC_OK;
}

int
mc__zout_new(mc_ctx *ctx, int fd, int level, mc_zout **out)
{
	mc_zout *z = calloc(1, sizeof *z);

	*out = NULL;
	if (z == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	z->ctx = ctx;
	z->fd = fd;
	z->cap = level > 0 ? ZSTD_CStreamOutSize() : MC_IO_CHUNK;
	if ((z->buf = malloc(z->cap)) == NULL) {
		free(z);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (level > 0) {
		z->cctx = ZSTD_createCCtx();
		if (z->cctx == NULL ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_windowLog, MC_ZSTD_WINDOW_LOG)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_contentSizeFlag, 0)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_dictIDFlag, 0))) {
			mc__zout_free(z);
			return mc__err(ctx, MC_ERR_NOMEM, "cannot set up the zstd compressor");
		}
	}
	*out = z;
	return MC_OK;
}

static int
zout_run(mc_zout *z, const void *buf, size_t n, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer in = {buf, n, 0};
	int rc;

	for (;;) {
		ZSTD_outBuffer o = {z->buf, z->cap, z->len};
		size_t left = ZSTD_compressStream2(z->cctx, &o, &in, mode);

		if (ZSTD_isError(left))
			return mc__err(z->ctx, MC_ERR_IO, "zstd: %s", ZSTD_getErrorName(left));
		z->len = o.pos;
		if (z->len == z->cap && (rc = zout_flush(z)) != MC_OK)
			return rc;
		if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size)
			return MC_OK;
	}
}

int
mc__zout_write(mc_zout *z, const void *buf, size_t n)
{
	int rc;

	if (z->cctx != NULL)
		return zout_run(z, buf, n, ZSTD_e_continue);
	if (z->len + n > z->cap && (rc = zout_flush(z)) != MC_OK)
		return rc;
	if (n >= z->cap)
		return mc__write_all(z->fd, buf, n) == 0 ? MC_OK
							: mc__errno(z->ctx, MC_ERR_IO, "cannot write", "bundle");
	memcpy(z->buf + z->len, buf, n);
	z->len += n;
	return MC_OK;
}

int
mc__zout_finish(mc_zout *z)
{
	int rc;

	if (z->cctx != NULL && (rc = zout_run(z, NULL, 0, ZSTD_e_end)) != MC_OK)
		return rc;
	return zout_flush(z);
}

void
mc__zout_free(mc_zout *z)
{
	if (z == NULL)
		return;
	ZSTD_freeCCtx(z->cctx);
	free(z->buf);
	free(z);
}

struct mc_zin {
	mc_ctx *ctx;
	const char *path;
	int fd;
	int eof;          /* read() returned 0 */
	int frame_done;   /* the zstd frame ended */
	ZSTD_DCtx *dctx;  /* NULL: plain tar */
	unsigned char *in;
	size_t in_cap, in_pos, in_len;
	unsigned char *out;
	size_t out_cap, out_pos, out_len;
};

static int
zin_fill(mc_zin *z)
{
	ssize_t r;

	if (z->in_pos < z->in_len || z->eof)
		return MC_OK;
	do
		r = read(z->fd, z->in, z->in_cap);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return mc__errno(z->ctx, MC_ERR_IO, "cannot read", z->path);
	z->in_pos = 0;
	z->in_len = (size_t)r;
	if (r == 0)
		z->eof = 1;
	return MC_OK;
}

int
mc__zin_new(mc_ctx *ctx, int fd, const char *path, mc_zin **out)
{
	mc_zin *z = calloc(1, sizeof *z);
	size_t got = 0;
	int rc;

	*out = NULL;
	if (z == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	z->ctx = ctx;
	z->path = path;
	z->fd = fd;
	z->in_cap = ZSTD_DStreamInSize();
	if (z->in_cap < MC_TAR_BLOCK)
		z->in_cap = MC_TAR_BLOCK;
	z->out_cap = ZSTD_DStreamOutSize();
	if ((z->in = malloc(z->in_cap)) == NULL || (z->out = malloc(z->out_cap)) == NULL) {
		mc__zin_free(z);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	/* Gather enough bytes to tell the format: a zstd header or a first tar header. */
	while (got < MC_TAR_BLOCK) {
		ssize_t r = read(fd, z->in + got, MC_TAR_BLOCK - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = mc__errno(ctx, MC_ERR_IO, "cannot read", path);
			mc__zin_free(z);
			return rc;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	z->in_len = got;
	if (got >= 4 && memcmp(z->in, mc__zstd_header, 4) == 0) {
		if (got < MC_ZSTD_HEADER_LEN || memcmp(z->in, mc__zstd_header, MC_ZSTD_HEADER_LEN) != 0) {
			mc__zin_free(z);
			return mc__err(ctx, MC_ERR_MALFORMED, "%s: zstd frame header is not the one "
				       "megacache writes (format/SPEC.md)", path);
		}
		if ((z->dctx = ZSTD_createDCtx()) == NULL ||
		    ZSTD_isError(ZSTD_DCtx_setParameter(z->dctx, ZSTD_d_windowLogMax, MC_ZSTD_WINDOW_LOG))) {
			mc__zin_free(z);
			return mc__err(ctx, MC_ERR_NOMEM, "cannot set up the zstd decompressor");
		}
	} else if (got == MC_TAR_BLOCK && memcmp(z->in + 257, "ustar\0" "00", 8) == 0) {
		memcpy(z->out, z->in, got);
		z->out_len = got;
		z->in_len = 0;
	} else {
		mc__zin_free(z);
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle (neither zstd "
			       "nor tar data)", path);
	}
	*out = z;
	return MC_OK;
}

/* Makes at least one more decompressed byte available, or reports why none comes. */
static int
zin_more(mc_zin *z)
{
	int rc;

	z->out_pos = z->out_len = 0;
	if (z->dctx == NULL) {
		if ((rc = zin_fill(z)) != MC_OK)
			return rc;
		if (z->eof)
			return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: truncated", z->path);
		/* Plain tar: hand over the input buffer's bytes. */
		memcpy(z->out, z->in + z->in_pos, z->in_len - z->in_pos);
		z->out_len = z->in_len - z->in_pos;
		z->in_pos = z->in_len;
		return MC_OK;
	}
	while (z->out_len == 0) {
		ZSTD_inBuffer in;
		ZSTD_outBuffer o = {z->out, z->out_cap, 0};
		size_t ret;

		if (z->frame_done)
			return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: truncated (compressed frame ended "
				       "early)", z->path);
		if ((rc = zin_fill(z)) != MC_OK)
			return rc;
		if (z->eof && z->in_pos == z->in_len)
			return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: truncated", z->path);
		in.src = z->in;
		in.size = z->in_len;
		in.pos = z->in_pos;
		ret = ZSTD_decompressStream(z->dctx, &o, &in);
		z->in_pos = in.pos;
		if (ZSTD_isError(ret))
			return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: corrupt compressed data (%s)",
				       z->path, ZSTD_getErrorName(ret));
		z->out_len = o.pos;
		if (ret == 0)
			z->frame_done = 1;
	}
	return MC_OK;
}

int
mc__zin_read(mc_zin *z, void *buf, size_t n)
{
	unsigned char *p = buf;
	int rc;

	while (n > 0) {
		size_t k;

		if (z->out_pos == z->out_len && (rc = zin_more(z)) != MC_OK)
			return rc;
		k = z->out_len - z->out_pos;
		if (k > n)
			k = n;
		memcpy(p, z->out + z->out_pos, k);
		z->out_pos += k;
		p += k;
		n -= k;
	}
	return MC_OK;
}

int
mc__zin_expect_end(mc_zin *z)
{
	int rc;

	if (z->out_pos != z->out_len)
		return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: data after the end of the archive", z->path);
	if (z->dctx != NULL) {
		/* Drain the frame: it must end without producing another byte. */
		while (!z->frame_done) {
			ZSTD_inBuffer in;
			ZSTD_outBuffer o = {z->out, z->out_cap, 0};
			size_t ret;

			if ((rc = zin_fill(z)) != MC_OK)
				return rc;
			if (z->eof && z->in_pos == z->in_len)
				return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: truncated (compressed frame "
					       "does not end)", z->path);
			in.src = z->in;
			in.size = z->in_len;
			in.pos = z->in_pos;
			ret = ZSTD_decompressStream(z->dctx, &o, &in);
			z->in_pos = in.pos;
			if (ZSTD_isError(ret))
				return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: corrupt compressed data (%s)",
					       z->path, ZSTD_getErrorName(ret));
			if (o.pos != 0)
				return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: data after the end of the "
					       "archive", z->path);
			if (ret == 0)
				z->frame_done = 1;
		}
	}
	if ((rc = zin_fill(z)) != MC_OK)
		return rc;
	if (z->in_pos != z->in_len || !z->eof)
		return mc__err(z->ctx, MC_ERR_MALFORMED, "%s: trailing bytes after the bundle", z->path);
	return MC_OK;
}

int
mc__zin_compressed(const mc_zin *z)
{
	return z->dctx != NULL;
}

void
mc__zin_free(mc_zin *z)
{
	if (z == NULL)
		return;
	ZSTD_freeDCtx(z->dctx);
	free(z->in);
	free(z->out);
	free(z);
}
