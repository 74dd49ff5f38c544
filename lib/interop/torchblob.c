/*
 * torchblob.c - torch's cache blobs, parsed by offsets without loading contents. All
 * integers big-endian; str = u64 length + text, bytes = u64 length + raw bytes.
 *  current (2.8+): u32 crc32 of the rest, u64 version 1, then groups of
 *                  str type (base64), u64 count, count x (str key (base64), bytes)
 *  2.7:            [u32 crc32], u64 version 1, then per artifact u64 type id
 *                  (0 inductor, 1 autotune, 2 aot_autograd, 3 pgo), str key, bytes;
 *                  strings base64 or raw: copies of both exist, told apart by the bytes
 *  vLLM envelope:  u32 crc32, bytes torch_key, str aot key (base64), bytes blob (current)
 * A parsed blob's artifacts are recorded into a writer (mc_writer_add_torch_blob) as
 * ranges of the blob file, or copied from a blob in memory
 * (mc_writer_add_torch_blob_memory), its groups kept as the layout an export gives back.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interop/interop.h"

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
	mc__strv_free(tb->gtypes, tb->ngroups);
	free(tb->env_torch_key);
	free(tb->env_aot_key);
	memset(tb, 0, sizeof *tb);
}

/* A blob being read: a file (fd), or bytes in memory (mem, when not NULL). path names
 * it in messages. */
struct tbr {
	mc_ctx *ctx;
	const char *path;
	int fd;
	const unsigned char *mem;
	uint64_t pos, size;
	int raw_strings; /* 2.7 copies without base64 */
};

/* Up to n bytes at off, as pread() gives them; off is at most r->size. */
static ssize_t
tb_pread(const struct tbr *r, void *buf, size_t n, uint64_t off)
{
	ssize_t got;

	if (r->mem != NULL) {
		if (n > r->size - off)
			n = (size_t)(r->size - off);
		memcpy(buf, r->mem + off, n);
		return (ssize_t)n;
	}
	do
		got = pread(r->fd, buf, n, (off_t)off);
	while (got < 0 && errno == EINTR);
	return got;
}

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
	got = tb_pread(r, buf, n, r->pos);
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
	if (r->raw_strings) {
		memcpy(dec, raw, (size_t)n);
		dn = (size_t)n;
	} else if (mc__b64_decode((const char *)raw, (size_t)n, dec, sizeof dec - 1, &dn) != 0) {
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

/* Is the u32 at r->pos the CRC-32 of the bytes after it up to r->size? */
static int
crc_matches(struct tbr *r, int *match)
{
	unsigned char head[4], *buf;
	uint32_t crc = 0;
	uint64_t off = r->pos + 4;
	int rc = MC_OK;

	*match = 0;
	if ((rc = tb_read(r, head, 4, "crc32 header")) != MC_OK)
		return rc;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	while (off < r->size) {
		size_t want = r->size - off < MC_IO_CHUNK ? (size_t)(r->size - off) : MC_IO_CHUNK;
		ssize_t got = tb_pread(r, buf, want, off);
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
	*match = crc == ((uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
			 (uint32_t)head[2] << 8 | head[3]);
	return rc;
}

static int
push_group(struct tbr *r, struct mc_tb *tb, char *type)
{
	char **gt = realloc(tb->gtypes, (tb->ngroups + 1) * sizeof *gt);

	if (gt == NULL) {
		free(type);
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	}
	tb->gtypes = gt;
	gt[tb->ngroups++] = type;
	if (mc__find_type(r->ctx, type) == NULL)
		return mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: unknown artifact type '%.40s' in "
			       "group %zu", r->path, type, tb->ngroups);
	return MC_OK;
}

/* One (key, content) entry of the current group. */
static int
read_entry(struct tbr *r, struct mc_tb *tb, const char *type)
{
	struct mc_tb_item *it;
	uint64_t len;
	int rc;

	if (tb->nitems >= r->ctx->max_artifacts)
		return mc__err(r->ctx, MC_ERR_LIMIT, "%s: more than %llu artifacts", r->path,
			       (unsigned long long)r->ctx->max_artifacts);
	if (mc__grow(&tb->items, &tb->capitems, tb->nitems + 1, sizeof *tb->items) != MC_OK)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	it = &tb->items[tb->nitems];
	memset(it, 0, sizeof *it);
	it->group = tb->ngroups - 1;
	if ((it->type = mc__strdup(type)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	tb->nitems++;
	if ((rc = tb_str(r, &it->key, "artifact key")) != MC_OK ||
	    (rc = tb_u64(r, &len, "content length")) != MC_OK)
		return rc;
	if (len > r->size - r->pos) {
		r->pos -= 8;
		return tb_bad(r, "content length past the end");
	}
	it->offset = r->pos;
	it->size = len;
	r->pos += len;
	return MC_OK;
}

/* The current format's groups, from r->pos to r->size. */
static int
parse_groups(struct tbr *r, struct mc_tb *tb)
{
	int rc;

	while (r->pos < r->size) {
		char *type = NULL;
		uint64_t count, i;

		if ((rc = tb_str(r, &type, "group type")) != MC_OK || (rc = push_group(r, tb, type)) != MC_OK ||
		    (rc = tb_u64(r, &count, "group count")) != MC_OK)
			return rc;
		/* Each entry takes at least 24 bytes: a count past the end is a lie. */
		if (count > (r->size - r->pos) / 24) {
			r->pos -= 8;
			return tb_bad(r, "group count past the end");
		}
		for (i = 0; i < count; i++)
			if ((rc = read_entry(r, tb, tb->gtypes[tb->ngroups - 1])) != MC_OK)
				return rc;
	}
	tb->layout = 1;
	return MC_OK;
}

/* torch 2.7: an enum type id per artifact. Each artifact is a group of one. */
static int
parse_27(struct tbr *r, struct mc_tb *tb)
{
	int rc;

	while (r->pos < r->size) {
		const struct mc_typedesc *d;
		uint64_t id;
		char *type;

		if ((rc = tb_u64(r, &id, "type id")) != MC_OK)
			return rc;
		if ((d = mc__builtin_torch27(id)) == NULL) {
			r->pos -= 8;
			return tb_bad(r, "unknown type id");
		}
		if ((type = mc__strdup(d->name)) == NULL)
			return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
		if ((rc = push_group(r, tb, type)) != MC_OK || (rc = read_entry(r, tb, d->name)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

/* Every key must be one its handler accepts: the test that tells base64 keys from raw. */
static int
keys_ok(mc_ctx *ctx, const struct mc_tb *tb)
{
	char dest[MC_PATH_MAX], saved[MC_ERRBUF];
	static const unsigned char zero[32];
	size_t i;

	memcpy(saved, ctx->err, sizeof saved);
	for (i = 0; i < tb->nitems; i++) {
		const struct mc_type *t = mc__find_type(ctx, tb->items[i].type);
		if (mc__dest_for(ctx, t, tb->items[i].key, zero, dest, sizeof dest) != MC_OK) {
			memcpy(ctx->err, saved, sizeof saved);
			return 0;
		}
		/* torch's keys name no entry: a blob's key that does is not torch's */
		if (mc__torch_key_len(t, tb->items[i].key) != strlen(tb->items[i].key))
			return 0;
	}
	return 1;
}

static uint64_t
peek_u64(struct tbr *r, uint64_t at, int *ok)
{
	unsigned char b[8];

	*ok = at + 8 <= r->size && tb_pread(r, b, 8, at) == 8;
	return *ok ? mc__be64(b) : 0;
}

static int
parse_27_any(struct tbr *r, struct mc_tb *tb, uint64_t start)
{
	int rc;

	/* First with base64 strings, then raw; the one whose keys all fit their types wins. */
	r->pos = start;
	r->raw_strings = 0;
	if ((rc = parse_27(r, tb)) == MC_OK && keys_ok(r->ctx, tb)) {
		tb->format = MC_TORCH_FORMAT_2_7;
		return MC_OK;
	}
	mc__torch_blob_free(tb);
	r->pos = start;
	r->raw_strings = 1;
	if ((rc = parse_27(r, tb)) == MC_OK) {
		tb->format = MC_TORCH_FORMAT_2_7;
		return MC_OK;
	}
	return rc;
}

/* vLLM's envelope after its CRC-32: bytes torch_key, str aot key, then bytes blob to
 * the end, a current-format blob with its own CRC-32. */
static int
parse_envelope(struct tbr *r, struct mc_tb *tb)
{
	uint64_t klen, blen, inner;
	unsigned char key[256];
	int rc, ok, crc_ok;

	klen = peek_u64(r, 4, &ok);
	r->pos = 12;
	if (!ok || klen == 0 || klen > sizeof key || klen > r->size - 12)
		return tb_bad(r, "neither a torch cache blob nor a vLLM envelope");
	if ((rc = tb_read(r, key, (size_t)klen, "torch key")) != MC_OK ||
	    (rc = tb_str(r, &tb->env_aot_key, "aot_autograd key")) != MC_OK ||
	    (rc = tb_u64(r, &blen, "inner blob length")) != MC_OK)
		return rc;
	if (blen != r->size - r->pos)
		return tb_bad(r, "inner blob length does not reach the end");
	if ((tb->env_torch_key = malloc(2 * klen + 1)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	mc__hex(key, (size_t)klen, tb->env_torch_key);
	inner = r->pos;
	if ((rc = crc_matches(r, &crc_ok)) != MC_OK)
		return rc;
	if (!crc_ok)
		return mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: not a valid torch cache blob: "
			       "crc32 mismatch in the vLLM envelope's inner blob", r->path);
	if (peek_u64(r, inner + 4, &ok) != 1 || !ok) {
		r->pos = inner + 4;
		return tb_bad(r, "unsupported encoding version");
	}
	r->pos = inner + 12;
	rc = parse_groups(r, tb);
	tb->format = MC_TORCH_FORMAT_VLLM;
	return rc;
}

/* A file whose first four bytes are the CRC-32 of the rest: the current format, 2.7
 * with its CRC-32, or vLLM's envelope. */
static int
parse_crc_ok(struct tbr *r, struct mc_tb *tb)
{
	int rc, ok0, ok1;
	uint64_t v0 = peek_u64(r, 4, &ok0), v1 = peek_u64(r, 12, &ok1);

	if (ok0 && v0 == 1 && ok1 && v1 <= 3)
		return parse_27_any(r, tb, 12);
	if (ok0 && v0 == 1) {
		r->pos = 12;
		rc = parse_groups(r, tb);
		tb->format = MC_TORCH_FORMAT_CURRENT;
		return rc;
	}
	if (ok0 && v0 < 8) {
		r->pos = 4;
		return tb_bad(r, "unsupported encoding version");
	}
	return parse_envelope(r, tb);
}

/* A file without a CRC-32 in front: 2.7 written without one, else an error that says
 * what it looks like. */
static int
parse_crc_bad(struct tbr *r, struct mc_tb *tb)
{
	int ok0, ok1;
	uint64_t v0 = peek_u64(r, 0, &ok0), v1 = peek_u64(r, 8, &ok1);

	if (ok0 && v0 == 1 && ok1 && v1 <= 3)
		return parse_27_any(r, tb, 8);
	if (r->size >= 12 && peek_u64(r, 4, &ok0) == 1 && ok0)
		return mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: not a valid torch cache blob: crc32 "
			       "mismatch", r->path);
	r->pos = 0;
	return r->size < 4 ? tb_bad(r, "crc32 header")
			   : tb_bad(r, "not a torch cache blob of any known format");
}

/* Parses the blob r opens (r->size set), whichever its format. */
static int
tb_parse(struct tbr *r, struct mc_tb *tb)
{
	int rc, crc_ok = 0;

	if ((rc = crc_matches(r, &crc_ok)) == MC_OK)
		rc = crc_ok ? parse_crc_ok(r, tb) : parse_crc_bad(r, tb);
	if (rc == MC_OK && tb->nitems == 0)
		rc = mc__err(r->ctx, MC_ERR_TORCH_FORMAT, "%s: the torch cache blob holds no artifacts",
			     r->path);
	if (rc != MC_OK)
		mc__torch_blob_free(tb);
	return rc;
}

int
mc__torch_blob_parse(mc_ctx *ctx, const char *path, struct mc_tb *tb)
{
	struct tbr r = {ctx, path, -1, NULL, 0, 0, 0};
	struct stat st;
	int rc;

	memset(tb, 0, sizeof *tb);
	if ((rc = mc__open_regular(ctx, path, &r.fd, &st)) != MC_OK)
		return rc;
	r.size = (uint64_t)st.st_size;
	rc = tb_parse(&r, tb);
	close(r.fd);
	return rc;
}

int
mc__torch_blob_parse_mem(mc_ctx *ctx, const void *data, size_t len, struct mc_tb *tb)
{
	struct tbr r = {ctx, MC_TB_IN_MEMORY, -1, data, 0, len, 0};

	memset(tb, 0, sizeof *tb);
	if (r.mem == NULL)
		r.mem = (const unsigned char *)"";
	return tb_parse(&r, tb);
}

/* Records a parsed blob's artifacts, and its groups as the layout an export gives
 * back: contents as ranges of the file path, or copied from data (the blob in memory,
 * when not NULL); name names the blob in messages. */
static int
record_blob(mc_writer *w, const char *name, const char *path, const unsigned char *data,
	    const struct mc_tb *tb)
{
	mc_ctx *ctx = mc__writer_ctx(w);
	size_t i, obj;
	int rc;

	if ((rc = mc__writer_blob_groups(w, tb->gtypes, tb->ngroups)) != MC_OK)
		return rc;
	for (i = 0; rc == MC_OK && i < tb->nitems; i++) {
		const struct mc_tb_item *it = &tb->items[i];
		const struct mc_type *t = mc__find_type(ctx, it->type);

		/* torch's keys name no entry: the artifact gets its entry from the content */
		if (mc__torch_key_len(t, it->key) != strlen(it->key)) {
			rc = mc__err(ctx, MC_ERR_BAD_KEY, "%s: artifact %zu: %s key '%.200s' names "
				     "an entry, which torch's keys do not", name, i + 1, it->type,
				     it->key);
			break;
		}
		/* A blob holds no file modes: its artifacts are never executable. */
		if (data != NULL)
			rc = mc__writer_add_bytes(w, it->type, it->key, data + it->offset,
						  (size_t)it->size, 0, &obj);
		else
			rc = mc__writer_add_range(w, it->type, it->key, path, it->offset, it->size,
						  0, &obj);
		if (rc != MC_OK) {
			mc__err_prefix(ctx, rc, "%s: artifact %zu", name, i + 1);
			break;
		}
		rc = mc__writer_blob_entry(w, it->group, it->key, obj);
	}
	/* as a scan of vLLM's root notes it: the torch builds of several, a caller's kept */
	if (rc == MC_OK && tb->env_torch_key != NULL)
		rc = mc__writer_note_label(w, "vllm.torch_key", tb->env_torch_key);
	if (rc == MC_OK && tb->env_aot_key != NULL &&
	    mc__label_value_ok(tb->env_aot_key, NULL, 0))
		rc = mc_writer_set_label(w, "vllm.aot_key", tb->env_aot_key);
	mc__writer_blob_done(w, tb->layout);
	return rc;
}

int
mc_writer_add_torch_blob(mc_writer *w, const char *path)
{
	struct mc_tb tb;
	int rc;

	if (w == NULL || path == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__torch_blob_parse(mc__writer_ctx(w), path, &tb)) != MC_OK)
		return rc;
	rc = record_blob(w, path, path, NULL, &tb);
	mc__torch_blob_free(&tb);
	return rc;
}

int
mc_writer_add_torch_blob_memory(mc_writer *w, const void *data, size_t len)
{
	struct mc_tb tb;
	int rc;

	if (w == NULL || (data == NULL && len > 0))
		return MC_ERR_INVALID;
	if ((rc = mc__torch_blob_parse_mem(mc__writer_ctx(w), data, len, &tb)) != MC_OK)
		return rc;
	rc = record_blob(w, MC_TB_IN_MEMORY, NULL, data, &tb);
	mc__torch_blob_free(&tb);
	return rc;
}
