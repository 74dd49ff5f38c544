/*
 * torchblob.c - torch's cache blob (torch.compiler.save_cache_artifacts(), 2.8 and
 * later): parsed by offsets without loading contents, and written back by export.
 * Layout (all integers big-endian): u32 crc32 of the rest, u64 version 1, then groups
 * of str type, u64 count, count x (str key, bytes content); str = u64 length + base64.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_private.h"

#define TB_STR_MAX (MC_KEY_MAX * 2)

void
mc__torch_blob_free(struct mc_tb *tb)
{
	size_t i;

	for (i = 0; i < tb->nitems; i++) {
		free(tb->items[i].type);
		free(tb->items[i].key);
	}
	free(tb->items);
	for (i = 0; i < tb->ngroups; i++)
		free(tb->gtypes[i]);
	free(tb->gtypes);
	memset(tb, 0, sizeof *tb);
}

struct tbr {
	mc_ctx *ctx;
	const char *path;
	int fd;
	uint64_t pos, size;
};

static int
tb_bad(struct tbr *r, const char *what)
{
	return mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: not a valid torch cache blob: %s at byte %llu",
		       r->path, what, (unsigned long long)r->pos);
}

static int
tb_read(struct tbr *r, void *buf, size_t n, const char *what)
{
	ssize_t got;

	if (r->size - r->pos < n)
		return tb_bad(r, what);
	do
		got = pread(r->fd, buf, n, (off_t)r->pos);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return mc__errno(r->ctx, MC_ERR_IO, "cannot read", r->path);
	if ((size_t)got != n)
		return tb_bad(r, what);
	r->pos += n;
	return MC_OK;
}

static int
tb_u64(struct tbr *r, uint64_t *v, const char *what)
{
	unsigned char b[8];
	int rc = tb_read(r, b, 8, what);

	if (rc == MC_OK)
		*v = mc__be64(b);
	return rc;
}

/* str: u64 length, base64 text of UTF-8. Returns a NUL-terminated string. */
static int
tb_str(struct tbr *r, char **out, const char *what)
{
	unsigned char raw[TB_STR_MAX], dec[TB_STR_MAX];
	uint64_t n;
	size_t dn;
	int rc;

	*out = NULL;
	if ((rc = tb_u64(r, &n, what)) != MC_OK)
		return rc;
	if (n == 0 || n > TB_STR_MAX || n > r->size - r->pos) {
		r->pos -= 8;
		return tb_bad(r, n == 0 ? "empty string" : "string length out of range");
	}
	if ((rc = tb_read(r, raw, (size_t)n, what)) != MC_OK)
		return rc;
	if (mc__b64_decode((const char *)raw, (size_t)n, dec, sizeof dec - 1, &dn) != 0) {
		r->pos -= n;
		return tb_bad(r, "invalid base64 string");
	}
	if (memchr(dec, '\0', dn) != NULL || !mc__utf8_valid(dec, dn)) {
		r->pos -= n;
		return tb_bad(r, "string is not UTF-8 text");
	}
	dec[dn] = '\0';
	if ((*out = mc__strdup((const char *)dec)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

static int
crc_check(struct tbr *r)
{
	unsigned char head[4], *buf;
	uint32_t crc = 0;
	uint64_t off = 4;
	int rc = MC_OK;

	if ((rc = tb_read(r, head, 4, "crc32 header")) != MC_OK)
		return rc;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	while (off < r->size) {
		size_t want = r->size - off < MC_IO_CHUNK ? (size_t)(r->size - off) : MC_IO_CHUNK;
		ssize_t got = pread(r->fd, buf, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got == 0)
				errno = 0;
			rc = mc__errno(r->ctx, MC_ERR_IO, "cannot read", r->path);
			break;
		}
		crc = mc__crc32(crc, buf, (size_t)got);
		off += (uint64_t)got;
	}
	free(buf);
	if (rc == MC_OK && crc != ((uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
				   (uint32_t)head[2] << 8 | head[3]))
		rc = mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: not a valid torch cache blob: crc32 "
			     "mismatch", r->path);
	return rc;
}

int
mc__torch_blob_parse(mc_ctx *ctx, const char *path, struct mc_tb *tb)
{
	struct tbr r = {ctx, path, -1, 0, 0};
	struct stat st;
	uint64_t version;
	int rc;

	memset(tb, 0, sizeof *tb);
	if ((r.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	if (fstat(r.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(r.fd);
		return mc__err(ctx, MC_ERR_IO, "%s: not a regular file", path);
	}
	r.size = (uint64_t)st.st_size;
	if ((rc = crc_check(&r)) != MC_OK || (rc = tb_u64(&r, &version, "version")) != MC_OK)
		goto out;
	if (version != 1) {
		r.pos -= 8;
		rc = tb_bad(&r, "unsupported encoding version");
		goto out;
	}
	while (r.pos < r.size) {
		char *type = NULL, **gt;
		uint64_t count, i;

		if ((rc = tb_str(&r, &type, "group type")) != MC_OK)
			goto out;
		gt = realloc(tb->gtypes, (tb->ngroups + 1) * sizeof *gt);
		if (gt == NULL) {
			free(type);
			rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
			goto out;
		}
		tb->gtypes = gt;
		gt[tb->ngroups++] = type;
		if (mc__find_type(ctx, type) == NULL) {
			rc = mc__err(ctx, MC_ERR_TORCH_FORMAT, "%s: unknown artifact type '%.40s' in "
				     "group %zu", path, type, tb->ngroups);
			goto out;
		}
		if ((rc = tb_u64(&r, &count, "group count")) != MC_OK)
			goto out;
		/* Each entry takes at least 24 bytes: a count past the end is a lie. */
		if (count > (r.size - r.pos) / 24 || tb->nitems + count > ctx->max_artifacts) {
			r.pos -= 8;
			rc = count > (r.size - r.pos) / 24 ? tb_bad(&r, "group count past the end")
							   : mc__err(ctx, MC_ERR_LIMIT, "%s: more than %llu artifacts",
								     path, (unsigned long long)ctx->max_artifacts);
			goto out;
		}
		if (count > 0) {
			struct mc_tb_item *it = realloc(tb->items, (tb->nitems + count) * sizeof *it);
			if (it == NULL) {
				rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
				goto out;
			}
			tb->items = it;
		}
		for (i = 0; i < count; i++) {
			struct mc_tb_item *it = &tb->items[tb->nitems];
			uint64_t len;

			memset(it, 0, sizeof *it);
			it->group = tb->ngroups - 1;
			if ((it->type = mc__strdup(type)) == NULL) {
				rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
				goto out;
			}
			tb->nitems++;
			if ((rc = tb_str(&r, &it->key, "artifact key")) != MC_OK ||
			    (rc = tb_u64(&r, &len, "content length")) != MC_OK)
				goto out;
			if (len > r.size - r.pos) {
				r.pos -= 8;
				rc = tb_bad(&r, "content length past the end");
				goto out;
			}
			it->offset = r.pos;
			it->size = len;
			r.pos += len;
		}
	}
	if (tb->nitems == 0)
		rc = mc__err(ctx, MC_ERR_TORCH_FORMAT, "%s: the torch cache blob holds no artifacts", path);
out:
	close(r.fd);
	if (rc != MC_OK)
		mc__torch_blob_free(tb);
	return rc;
}
