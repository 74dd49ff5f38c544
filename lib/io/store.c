/*
 * store.c - append-only byte arrays that stay in memory up to MC_STORE_MEM and then move
 * to a nameless temp file, so that tables of any length cost little memory; and a
 * buffered reader that walks one forwards.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

void
mc__store_init(struct mc_store *s, const char *what)
{
	memset(s, 0, sizeof *s);
	s->what = what;
	s->fd = -1;
}

void
mc__store_free(struct mc_store *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	mc__store_init(s, s->what);
}

uint64_t
mc__store_size(const struct mc_store *s)
{
	return s->flushed + s->len;
}

int
mc__store_error(mc_ctx *ctx, const struct mc_store *s, const char *verb)
{
	return mc__err(ctx, MC_ERR_IO, "cannot %s the %s's temporary file: %s", verb, s->what,
		       errno != 0 ? strerror(errno) : "unexpected end of file");
}

/* Appends n bytes; *off (when not NULL) gets where they start. */
int
mc__store_append(mc_ctx *ctx, struct mc_store *s, const void *p, size_t n, uint64_t *off)
{
	if (off != NULL)
		*off = mc__store_size(s);
	if (s->len + n > s->cap && s->len + n <= MC_STORE_MEM) {
		size_t cap = s->cap ? s->cap : 4096;
		unsigned char *b;
		while (cap < s->len + n)
			cap *= 2;
		if (cap > MC_STORE_MEM)
			cap = MC_STORE_MEM;
		if ((b = realloc(s->buf, cap)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		s->buf = b;
		s->cap = cap;
	}
	if (s->len + n > s->cap) { /* the buffer goes to the file */
		if (s->fd < 0 && (s->fd = mc__open_temp_anon(ctx)) < 0)
			return MC_ERR_IO;
		errno = 0;
		if (mc__pwrite_full(s->fd, s->buf, s->len, s->flushed) != 0)
			return mc__store_error(ctx, s, "write");
		s->flushed += s->len;
		s->len = 0;
		if (n > s->cap) {
			if (mc__pwrite_full(s->fd, p, n, s->flushed) != 0)
				return mc__store_error(ctx, s, "write");
			s->flushed += n;
			return MC_OK;
		}
	}
	if (n > 0)
		memcpy(s->buf + s->len, p, n);
	s->len += n;
	return MC_OK;
}

int
mc__store_unappend(struct mc_store *s, size_t n)
{
	if (s->len < n)
		return MC_ERR_INVALID;
	s->len -= n;
	return MC_OK;
}

/* Copies n bytes at off into p (wr = 0), or p over them (wr = 1). Safe from several
 * threads on distinct bytes while nothing is appended. */
int
mc__store_io(mc_ctx *ctx, const struct mc_store *s, uint64_t off, void *p, size_t n, int wr)
{
	unsigned char *q = p;

	if (off < s->flushed) {
		size_t a = s->flushed - off < n ? (size_t)(s->flushed - off) : n;
		errno = 0;
		if ((wr ? mc__pwrite_full(s->fd, q, a, off) : mc__pread_full(s->fd, q, a, off)) != 0)
			return mc__store_error(ctx, s, wr ? "write" : "read");
		q += a;
		off += a;
		n -= a;
	}
	if (n == 0)
		return MC_OK;
	if (off - s->flushed + n > s->len) {
		errno = 0;
		return mc__store_error(ctx, s, "read");
	}
	if (wr)
		memcpy(s->buf + (off - s->flushed), q, n);
	else
		memcpy(q, s->buf + (off - s->flushed), n);
	return MC_OK;
}

int
mc__sreader_init(mc_ctx *ctx, struct mc_sreader *r, const struct mc_store *s, uint64_t off, uint64_t end,
	     size_t cap)
{
	memset(r, 0, sizeof *r);
	r->s = s;
	r->off = off;
	r->end = end;
	r->cap = cap;
	if ((r->buf = malloc(cap)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

int
mc__sreader_get(mc_ctx *ctx, struct mc_sreader *r, void *p, size_t n)
{
	unsigned char *q = p;

	while (n > 0) {
		size_t a;
		if (r->pos == r->len) {
			size_t want = r->end - r->off < r->cap ? (size_t)(r->end - r->off) : r->cap;
			int rc;
			if (want == 0) {
				errno = 0;
				return mc__store_error(ctx, r->s, "read");
			}
			if ((rc = mc__store_io(ctx, r->s, r->off, r->buf, want, 0)) != MC_OK)
				return rc;
			r->off += want;
			r->pos = 0;
			r->len = want;
		}
		a = r->len - r->pos < n ? r->len - r->pos : n;
		memcpy(q, r->buf + r->pos, a);
		r->pos += a;
		q += a;
		n -= a;
	}
	return MC_OK;
}
