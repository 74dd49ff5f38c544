/*
 * io.h - file input and output, temp files, and stores that spill to disk; not installed.
 */
#ifndef MC_IO_H
#define MC_IO_H

#include "core/core.h"

/* ---- opening what is read (fileio.c) ---- */

struct stat;
/* Opens path to read; refuses (without blocking) anything but a regular file. */
MC_HIDDEN int mc__open_regular(mc_ctx *ctx, const char *path, int *fd, struct stat *st);
/* Opens path to read as a stream: a regular file, or a pipe, FIFO, socket or device
 * read in order (a FIFO waits for its writer). Refuses a folder and a terminal. */
MC_HIDDEN int mc__open_input(mc_ctx *ctx, const char *path, int *fd, struct stat *st);
/* Checks that fd, which path names, can be read as mc__open_input() allows. */
MC_HIDDEN int mc__check_input(mc_ctx *ctx, int fd, const char *path, struct stat *st);

/* ---- file helpers (fileio.c) ---- */

MC_HIDDEN int mc__write_all(int fd, const void *buf, size_t n);
/* mc__write_all() for output whose reader may stall (a pipe): a signal that cancelled ctx
 * ends the wait, -1 with errno ECANCELED. */
MC_HIDDEN int mc__write_out(mc_ctx *ctx, int fd, const void *buf, size_t n);
/* Reads exactly n bytes; returns 0, or -1 with errno (EIO-like short read: errno 0). */
MC_HIDDEN int mc__read_full(int fd, void *buf, size_t n);
/* n bytes at off; -1 with errno (0 at the end of the file) when they cannot be had. */
MC_HIDDEN int mc__pread_full(int fd, void *buf, size_t n, uint64_t off);
MC_HIDDEN int mc__pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* Opens a temp file beside path (same folder), or, when path is a symbolic link, beside
 * the file it points to (dangling or not; not a link someone else owns in a shared
 * folder such as /tmp: MC_ERR_UNSAFE_DEST). It has the mode and (as root) the owner of
 * the file it is to replace, if any, else mode. Returns fd, and the temp name. */
MC_HIDDEN int mc__open_temp_beside(mc_ctx *ctx, const char *path, char **tmp_out, int mode);
/* A temp file beside path itself, a link at path not followed. */
MC_HIDDEN int mc__open_temp_here(mc_ctx *ctx, const char *path, char **tmp_out, int mode);
/* Makes the finished temp file tmp (open as fd; from mc__open_temp_beside()) the file
 * path, durably: its data flushed, fd closed, tmp renamed over the file it was made
 * beside (path, or what a link at path points to: the link stays), and the folder's
 * entry flushed. fd is closed and tmp gone either way; on a failure before the rename
 * (a context cancelled: MC_ERR_CANCELLED) tmp is removed and path left as it was. path
 * names it in messages. */
MC_HIDDEN int mc__commit_temp(mc_ctx *ctx, int fd, const char *tmp, const char *path);
/* The folder for temporary files: $TMPDIR, or /tmp when it is unset or empty. */
MC_HIDDEN const char *mc__tmpdir(void);
/* A private file with no name in $TMPDIR (or /tmp), gone when closed; -1 with the
 * error on ctx. */
MC_HIDDEN int mc__open_temp_anon(mc_ctx *ctx);
MC_HIDDEN int mc__read_small_file(mc_ctx *ctx, const char *path, size_t max, char **buf,
				  size_t *len);

/* Python's os.path.abspath(path), lexically: malloc'd, NULL with errno set on failure. */
MC_HIDDEN char *mc__abs_path(const char *path);

/* ---- stores (store.c): byte arrays that move to a temp file past MC_STORE_MEM ---- */

#define MC_STORE_MEM (256u * 1024)

struct mc_store {
	const char *what;   /* for messages: "the writer's <what>" */
	int fd;             /* -1 while everything is in buf */
	uint64_t flushed;   /* bytes in the file; buf holds the ones after them */
	unsigned char *buf;
	size_t len, cap;
};

MC_HIDDEN void mc__store_init(struct mc_store *s, const char *what);
MC_HIDDEN void mc__store_free(struct mc_store *s);
MC_HIDDEN uint64_t mc__store_size(const struct mc_store *s);
/* MC_ERR_IO naming the store and errno (0: an unexpected end). */
MC_HIDDEN int mc__store_error(mc_ctx *ctx, const struct mc_store *s, const char *verb);
/* Appends n bytes; *off (when not NULL) gets where they start. What an append adds
 * stays in memory until the next one when it is smaller than the buffer (4 KiB at
 * least), so mc__store_unappend() can take it back. */
MC_HIDDEN int mc__store_append(mc_ctx *ctx, struct mc_store *s, const void *p, size_t n,
			       uint64_t *off);
MC_HIDDEN int mc__store_unappend(struct mc_store *s, size_t n);
/* Copies n bytes at off into p (wr = 0), or p over them (wr = 1). Safe from several
 * threads on distinct bytes while nothing is appended. */
MC_HIDDEN int mc__store_io(mc_ctx *ctx, const struct mc_store *s, uint64_t off, void *p,
			   size_t n, int wr);
/* Reads a store forwards from off to end, through a buffer. */
struct mc_sreader {
	const struct mc_store *s;
	uint64_t off, end;  /* the next byte to fetch, and the last + 1 */
	unsigned char *buf;
	size_t cap, pos, len;
};
MC_HIDDEN int mc__sreader_init(mc_ctx *ctx, struct mc_sreader *r, const struct mc_store *s,
			      uint64_t off, uint64_t end, size_t cap);
MC_HIDDEN int mc__sreader_get(mc_ctx *ctx, struct mc_sreader *r, void *p, size_t n);

#endif /* MC_IO_H */
