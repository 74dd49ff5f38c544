/*
 * emit.c - writes the bundle container: ustar members, into a temp file that is
 * flushed to disk and renamed over the target once complete, or straight into a
 * descriptor the caller gives (standard output). The members go through libarchive,
 * or, in a build configured --without-libarchive, are framed here with the one header
 * form tar.c renders; both write the same bytes (SPEC.md section 2.1).
 *
 * libarchive is loaded (dlopen) when the first bundle is written, not linked: a load
 * or a verify, which write none, then start without it and the libraries it brings
 * (libxml2, ICU, libstdc++, nettle, lzma, lz4, bz2, acl), which cost a cold start about
 * 0.03 s on a GPU host.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MC_WITH_LIBARCHIVE
#include <dlfcn.h>
#include <pthread.h>

#include <archive.h>
#include <archive_entry.h>
#endif

#include "format/format.h"

struct mc_emit {
	mc_ctx *ctx;
	char *path;
	char *tmp;
	int fd;
	int borrowed; /* fd is the caller's: written, never closed, renamed or removed */
	unsigned char *buf; /* output buffer */
	size_t len;
	uint64_t out;    /* bytes written to fd */
	uint64_t kicked; /* of them, those whose write-back to disk was started */
#ifdef MC_WITH_LIBARCHIVE
	int failed; /* the message of a failed write is on ctx, not on the archive */
	struct archive *a;
	struct archive_entry *entry;
#else
	uint64_t left; /* data bytes the current member still expects */
	size_t pad;    /* zero bytes that follow them */
#endif
};

/* The failure of a write to the output: a cancel that ended it, or the error. */
static int
emit_failed(mc_emit *e)
{
	if (errno == ECANCELED && mc__cancelled(e->ctx))
		return mc__cancel_err(e->ctx);
	return mc__errno(e->ctx, MC_ERR_IO, "cannot write", e->path);
}

/* Bytes of a file of ours written since its write-back was last started: past this,
 * the disk is given them while the rest is made, and the flush before the rename only
 * waits for the last of them. */
#define EMIT_KICK (8u << 20)

static int
emit_write(mc_emit *e, const void *buf, size_t n)
{
	if (mc__write_out(e->ctx, e->fd, buf, n) != 0)
		return emit_failed(e);
	e->out += n;
#ifdef SYNC_FILE_RANGE_WRITE
	if (!e->borrowed && e->out - e->kicked >= EMIT_KICK) {
		/* A hint: where it fails, the flush writes it all. */
		(void)sync_file_range(e->fd, (off_t)e->kicked, (off_t)(e->out - e->kicked),
				      SYNC_FILE_RANGE_WRITE);
		e->kicked = e->out;
	}
#endif
	return MC_OK;
}

static int
emit_flush(mc_emit *e)
{
	int rc;

	if (e->len > 0 && (rc = emit_write(e, e->buf, e->len)) != MC_OK)
		return rc;
	e->len = 0;
	return MC_OK;
}

/* Buffered output to the file; large pieces skip the buffer. */
static int
emit_put(mc_emit *e, const void *buf, size_t n)
{
	int rc;

	if (e->len + n > MC_IO_CHUNK && (rc = emit_flush(e)) != MC_OK)
		return rc;
	if (n >= MC_IO_CHUNK)
		return emit_write(e, buf, n);
	memcpy(e->buf + e->len, buf, n);
	e->len += n;
	return MC_OK;
}

#ifdef MC_WITH_LIBARCHIVE

/* The calls used, as archive.h and archive_entry.h declare them. */
#define LA_CALLS(X)                                                                       \
	X(archive_write_new) X(archive_write_set_format_ustar)                            \
	X(archive_write_set_bytes_per_block) X(archive_write_set_bytes_in_last_block)     \
	X(archive_write_open2) X(archive_write_header) X(archive_write_data)              \
	X(archive_write_close) X(archive_write_free) X(archive_error_string)              \
	X(archive_set_error) X(archive_entry_new) X(archive_entry_free)                   \
	X(archive_entry_clear) X(archive_entry_set_pathname) X(archive_entry_set_size)    \
	X(archive_entry_set_filetype) X(archive_entry_set_perm)                           \
	X(archive_entry_set_uid) X(archive_entry_set_gid) X(archive_entry_set_mtime)

#define LA_FIELD(f) __typeof__(f) *f;
static struct {
	LA_CALLS(LA_FIELD)
} la;
#undef LA_FIELD
static char la_error[512]; /* why it could not be loaded; empty when it was */
static pthread_once_t la_once = PTHREAD_ONCE_INIT;

static void
la_load(void)
{
	void *h = dlopen(MC_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (h == NULL) {
		e = dlerror();
		snprintf(la_error, sizeof la_error, "%s", e != NULL ? e : MC_LIBARCHIVE_SONAME);
		return;
	}
#define LA_SYM(f)                                                                          \
	if (la_error[0] == '\0' && (*(void **)&la.f = dlsym(h, #f)) == NULL)               \
		snprintf(la_error, sizeof la_error, "%s: no %s", MC_LIBARCHIVE_SONAME, #f);
	LA_CALLS(LA_SYM)
#undef LA_SYM
	/* Kept loaded to the process's end: the calls are used from any thread. */
}

int
mc__emit_ready(mc_ctx *ctx)
{
	pthread_once(&la_once, la_load);
	if (la_error[0] != '\0')
		return mc__err(ctx, MC_ERR_IO, "cannot write bundles: libarchive, which this build "
			       "writes them through, cannot be loaded: %s", la_error);
	return MC_OK;
}

static la_ssize_t
emit_write_cb(struct archive *a, void *ud, const void *buf, size_t n)
{
	mc_emit *e = ud;

	if (emit_put(e, buf, n) != MC_OK) {
		la.archive_set_error(a, EIO, "%s", e->ctx->err);
		e->failed = 1;
		return -1;
	}
	return (la_ssize_t)n;
}

/* Records of 10240 bytes but no padding of the last: the file ends after the end blocks. */
static int
ustar_start(mc_emit *e)
{
	int rc;

	if ((rc = mc__emit_ready(e->ctx)) != MC_OK)
		return rc;
	e->a = la.archive_write_new();
	if (e->a == NULL || la.archive_write_set_format_ustar(e->a) != ARCHIVE_OK ||
	    la.archive_write_set_bytes_per_block(e->a, 10240) != ARCHIVE_OK ||
	    la.archive_write_set_bytes_in_last_block(e->a, 1) != ARCHIVE_OK ||
	    la.archive_write_open2(e->a, e, NULL, emit_write_cb, NULL, NULL) != ARCHIVE_OK)
		return mc__err(e->ctx, MC_ERR_IO, "%s: cannot start the archive: %s", e->path,
			       e->a ? la.archive_error_string(e->a) : "out of memory");
	if ((e->entry = la.archive_entry_new()) == NULL)
		return mc__err(e->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

static int
archive_fail(mc_emit *e, const char *what)
{
	if (e->failed) /* the write callback set the message */
		return mc__cancelled(e->ctx) ? MC_ERR_CANCELLED : MC_ERR_IO;
	return mc__err(e->ctx, MC_ERR_IO, "%s: %s: %s", e->path, what, la.archive_error_string(e->a));
}

int
mc__emit_member(mc_emit *e, const char *name, uint64_t size)
{
	la.archive_entry_clear(e->entry);
	la.archive_entry_set_pathname(e->entry, name);
	la.archive_entry_set_size(e->entry, (la_int64_t)size);
	la.archive_entry_set_filetype(e->entry, AE_IFREG);
	la.archive_entry_set_perm(e->entry, 0644);
	la.archive_entry_set_uid(e->entry, 0);
	la.archive_entry_set_gid(e->entry, 0);
	la.archive_entry_set_mtime(e->entry, 0, 0);
	if (la.archive_write_header(e->a, e->entry) != ARCHIVE_OK)
		return archive_fail(e, "cannot write a member header");
	return MC_OK;
}

int
mc__emit_data(mc_emit *e, const void *buf, size_t n)
{
	while (n > 0) {
		la_ssize_t w = la.archive_write_data(e->a, buf, n);
		if (w <= 0)
			return archive_fail(e, "cannot write member data");
		buf = (const unsigned char *)buf + w;
		n -= (size_t)w;
	}
	return MC_OK;
}

static int
ustar_close(mc_emit *e)
{
	if (la.archive_write_close(e->a) != ARCHIVE_OK)
		return archive_fail(e, "cannot finish the archive");
	return MC_OK;
}

static void
ustar_free(mc_emit *e)
{
	if (e->a != NULL)
		la.archive_write_free(e->a);
	if (e->entry != NULL)
		la.archive_entry_free(e->entry);
}

#else /* the writer's own ustar framing */

int
mc__emit_ready(mc_ctx *ctx)
{
	return MC_OK;
}

static const unsigned char zeros[2 * MC_TAR_BLOCK];

static int
ustar_start(mc_emit *e)
{
	return MC_OK;
}

/* Ends the current member: the zero bytes its declared size still lacks (as libarchive
 * writes them), then the padding to a whole block. */
static int
emit_end_member(mc_emit *e)
{
	int rc;

	while (e->left > 0) {
		size_t n = e->left < sizeof zeros ? (size_t)e->left : sizeof zeros;

		if ((rc = emit_put(e, zeros, n)) != MC_OK)
			return rc;
		e->left -= n;
	}
	rc = emit_put(e, zeros, e->pad);
	e->pad = 0;
	return rc;
}

int
mc__emit_member(mc_emit *e, const char *name, uint64_t size)
{
	unsigned char h[MC_TAR_BLOCK];
	int rc;

	if ((rc = emit_end_member(e)) != MC_OK)
		return rc;
	if (mc__tar_header_render(name, size, h) != MC_OK)
		return mc__err(e->ctx, MC_ERR_INVALID,
			       "%s: cannot write a member header: '%s' has no ustar form", e->path, name);
	e->left = size;
	e->pad = (size_t)((MC_TAR_BLOCK - size % MC_TAR_BLOCK) % MC_TAR_BLOCK);
	return emit_put(e, h, sizeof h);
}

int
mc__emit_data(mc_emit *e, const void *buf, size_t n)
{
	if (n > e->left)
		return mc__err(e->ctx, MC_ERR_IO,
			       "%s: cannot write member data: more than its header declares", e->path);
	e->left -= n;
	return emit_put(e, buf, n);
}

static int
ustar_close(mc_emit *e)
{
	int rc;

	if ((rc = emit_end_member(e)) != MC_OK)
		return rc;
	return emit_put(e, zeros, sizeof zeros);
}

static void
ustar_free(mc_emit *e)
{
}

#endif /* MC_WITH_LIBARCHIVE */

/* Starts the archive into fd, which is taken over when tmp (the temp file's name, taken
 * too) is set, and borrowed when not. */
static int
emit_start(mc_ctx *ctx, const char *path, int fd, char *tmp, mc_emit **out)
{
	mc_emit *e = calloc(1, sizeof *e);
	int rc;

	*out = NULL;
	if (e == NULL || (e->path = mc__strdup(path)) == NULL) {
		if (tmp != NULL) {
			close(fd);
			unlink(tmp);
			free(tmp);
		}
		free(e);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	e->ctx = ctx;
	e->fd = fd;
	e->tmp = tmp;
	e->borrowed = tmp == NULL;
	if ((e->buf = malloc(MC_IO_CHUNK)) == NULL) {
		mc__emit_abort(e);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if ((rc = ustar_start(e)) != MC_OK) {
		mc__emit_abort(e);
		return rc;
	}
	*out = e;
	return MC_OK;
}

int
mc__emit_open(mc_ctx *ctx, const char *path, mc_emit **out)
{
	char *tmp = NULL;
	int fd;

	*out = NULL;
	if ((fd = mc__open_temp_beside(ctx, path, &tmp, 0644)) < 0)
		return MC_ERR_IO;
	return emit_start(ctx, path, fd, tmp, out);
}

int
mc__emit_open_fd(mc_ctx *ctx, int fd, const char *name, mc_emit **out)
{
	return emit_start(ctx, name, fd, NULL, out);
}

int
mc__emit_finish(mc_emit *e)
{
	int rc = ustar_close(e);

	if (rc == MC_OK)
		rc = emit_flush(e);
	if (rc == MC_OK && !e->borrowed) {
		uint64_t t = mc__prof_start(e->ctx);
		rc = mc__commit_temp(e->ctx, e->fd, e->tmp, e->path);
		mc__prof_since(e->ctx, "flush and rename", t, 0);
		e->fd = -1;
		free(e->tmp);
		e->tmp = NULL;
	}
	mc__emit_abort(e);
	return rc;
}

void
mc__emit_abort(mc_emit *e)
{
	if (e == NULL)
		return;
	ustar_free(e);
	free(e->buf);
	if (e->fd >= 0 && !e->borrowed)
		close(e->fd);
	if (e->tmp != NULL) {
		unlink(e->tmp);
		free(e->tmp);
	}
	free(e->path);
	free(e);
}

int
mc__emit_head(mc_emit *e, const char *manifest, size_t mlen, char *const *sigs,
	      const size_t *siglens, const char (*sigids)[17], size_t nsigs)
{
	int rc;

	if ((rc = mc__emit_member(e, MC_MEMBER_MANIFEST, mlen)) != MC_OK ||
	    (rc = mc__emit_data(e, manifest, mlen)) != MC_OK)
		return rc;
	return mc__emit_sigs(e, sigs, siglens, sigids, nsigs);
}

int
mc__emit_sigs(mc_emit *e, char *const *sigs, const size_t *siglens, const char (*sigids)[17],
	      size_t nsigs)
{
	char name[64];
	size_t i;
	int rc;

	for (i = 0; i < nsigs; i++) {
		snprintf(name, sizeof name, "%s%s%s", MC_MEMBER_SIG_PREFIX, sigids[i],
			 MC_MEMBER_SIG_SUFFIX);
		if ((rc = mc__emit_member(e, name, siglens[i])) != MC_OK ||
		    (rc = mc__emit_data(e, sigs[i], siglens[i])) != MC_OK)
			return rc;
	}
	return MC_OK;
}
