/*
 * writer.c - records artifacts (from memory, files, torch blobs) and saves them as a
 * bundle: manifest, signatures, then each distinct content once, ordered by hash.
 *
 * Memory stays small whatever the number of artifacts: the records of objects and
 * artifacts, the artifacts' keys, the sources' paths and contents given in memory go
 * to stores that move to nameless temp files once they pass a few hundred KiB. The
 * save sorts the artifacts in runs merged from those files, and holds 4 bytes per
 * object in memory (8 while it orders the objects).
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "bundle/bundle.h"

/* ---- the writer's records ---- */

#define WOBJ_PENDING 1    /* content not read yet: hashed (and deduplicated) at save */
#define WOBJ_CHECK_SHA 2  /* the save checks that the content still has sha256 */
#define WOBJ_IN_DATA UINT64_MAX /* path_off: the content is in the data store at offset */

struct wobj {
	unsigned char hash[MC_HASH_BYTES];
	unsigned char sha256[32];
	uint64_t size;
	uint64_t offset;      /* of the content in its source */
	uint64_t path_off;    /* the source's path in the data store, or WOBJ_IN_DATA */
	uint32_t path_len;
	uint8_t flags;
	/* Set at save: */
	uint8_t encoding;
	uint16_t spool;       /* the worker whose spool file holds the stored bytes */
	uint64_t spool_off, stored_size;
	unsigned char stored_hash[MC_HASH_BYTES];
};

/* An artifact, in the order recorded (its key in the keys store), or in a sorted run
 * or the save's table of kept artifacts (its key right after it). */
struct wart {
	uint64_t size;
	uint64_t key_off;
	uint32_t key_len;
	uint32_t type;        /* index into the writer's types */
	uint32_t obj;
	uint32_t seq;         /* the order recorded */
	uint32_t has_sha256;
	uint32_t pad;
	unsigned char sha256[32];
};

/* An object whose hash is known as it is recorded, for deduplication: its index + 1
 * (0 = empty) and the first 4 bytes of its hash. */
struct wslot {
	uint32_t idx1;
	uint32_t pref;
};

struct mc_writer {
	mc_ctx *ctx;
	struct mc_store objs;   /* struct wobj, by index */
	struct mc_store arts;   /* struct wart, in the order recorded */
	struct mc_store keys;   /* the artifacts' keys, one after another */
	struct mc_store data;   /* the sources' paths, and contents given in memory */
	uint32_t nobjs, narts;
	struct wslot *table;
	size_t tcap, tused;
	char **types;
	uint32_t ntypes, lasttype;
	char lastpath[MC_PATH_MAX]; /* the last source path stored, and where */
	int has_lastpath;
	uint64_t lastpath_off;
	struct wart last;     /* the artifact recorded last, while has_last */
	int has_last;
	struct mc_label *labels;
	size_t nlabels;
	uint64_t bundle_version;
	int64_t expires, created;
	int level;
	const mc_seckey **signers;
	size_t nsigners;
	/* A bundle made from exactly one torch blob and nothing else keeps its layout. */
	size_t nsources;
	int only_blob;
	struct mc_mgroup *groups;
	size_t ngroups;
	uint64_t total;
	int keep_unknown;
	mc_conflict_fn conflict;
	void *conflict_ud;
	struct cleanup {
		void (*fn)(void *);
		void *arg;
	} *cleanups;
	size_t ncleanups;
};

int
mc_writer_new(mc_ctx *ctx, mc_writer **out)
{
	mc_writer *w;

	if (ctx == NULL || out == NULL)
		return MC_ERR_INVALID;
	if ((w = calloc(1, sizeof *w)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	w->ctx = ctx;
	w->level = 3;
	w->only_blob = 1;
	mc__store_init(&w->objs, "object table");
	mc__store_init(&w->arts, "artifact table");
	mc__store_init(&w->keys, "artifact keys");
	mc__store_init(&w->data, "source list");
	*out = w;
	return MC_OK;
}

static void
free_groups(mc_writer *w)
{
	size_t i, j;

	for (i = 0; i < w->ngroups; i++) {
		for (j = 0; j < w->groups[i].nentries; j++)
			free(w->groups[i].entries[j].key);
		free(w->groups[i].entries);
		free(w->groups[i].type);
	}
	free(w->groups);
	w->groups = NULL;
	w->ngroups = 0;
}

void
mc_writer_free(mc_writer *w)
{
	size_t i;

	if (w == NULL)
		return;
	mc__store_free(&w->objs);
	mc__store_free(&w->arts);
	mc__store_free(&w->keys);
	mc__store_free(&w->data);
	free(w->table);
	for (i = 0; i < w->ntypes; i++)
		free(w->types[i]);
	free(w->types);
	for (i = 0; i < w->nlabels; i++) {
		free(w->labels[i].key);
		free(w->labels[i].value);
	}
	free(w->labels);
	free(w->signers);
	free_groups(w);
	for (i = 0; i < w->ncleanups; i++)
		w->cleanups[i].fn(w->cleanups[i].arg);
	free(w->cleanups);
	free(w);
}

int
mc__writer_adopt(mc_writer *w, void (*fn)(void *), void *arg)
{
	struct cleanup *c = realloc(w->cleanups, (w->ncleanups + 1) * sizeof *c);

	if (c == NULL)
		return MC_ERR_NOMEM;
	c[w->ncleanups].fn = fn;
	c[w->ncleanups++].arg = arg;
	w->cleanups = c;
	return MC_OK;
}

void
mc_writer_set_conflict_fn(mc_writer *w, mc_conflict_fn fn, void *ud)
{
	if (w == NULL)
		return;
	w->conflict = fn;
	w->conflict_ud = ud;
}

static int
obj_get(mc_writer *w, mc_ctx *ctx, uint32_t i, struct wobj *o)
{
	return mc__store_io(ctx, &w->objs, (uint64_t)i * sizeof *o, o, sizeof *o, 0);
}

/* Object i's hash alone. */
static int
obj_hash(mc_writer *w, uint32_t i, unsigned char hash[MC_HASH_BYTES])
{
	return mc__store_io(w->ctx, &w->objs,
			    (uint64_t)i * sizeof(struct wobj) + offsetof(struct wobj, hash), hash,
			    MC_HASH_BYTES, 0);
}

static uint32_t
hash_pref(const unsigned char *hash)
{
	return (uint32_t)hash[0] | (uint32_t)hash[1] << 8 | (uint32_t)hash[2] << 16 |
	       (uint32_t)hash[3] << 24;
}

/* Puts e into the table t of cap slots (a power of two), at its first free place. */
static void
slot_put(struct wslot *t, size_t cap, struct wslot e)
{
	size_t s;

	for (s = e.pref & (cap - 1); t[s].idx1 != 0; s = (s + 1) & (cap - 1))
		;
	t[s] = e;
}

static int
table_grow(mc_writer *w)
{
	size_t cap = w->tcap ? w->tcap * 2 : 1024, i;
	struct wslot *t = calloc(cap, sizeof *t);

	if (t == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->tcap; i++)
		if (w->table[i].idx1 != 0)
			slot_put(t, cap, w->table[i]);
	free(w->table);
	w->table = t;
	w->tcap = cap;
	return MC_OK;
}

/* The object already recorded with this hash: *idx, and *found = 1. */
static int
find_object(mc_writer *w, const unsigned char *hash, uint32_t *idx, int *found)
{
	uint32_t pref = hash_pref(hash);
	size_t s;

	*found = 0;
	for (s = w->tcap ? pref & (w->tcap - 1) : 0; w->tcap && w->table[s].idx1 != 0;
	     s = (s + 1) & (w->tcap - 1)) {
		unsigned char h[MC_HASH_BYTES];
		int rc;
		if (w->table[s].pref != pref)
			continue;
		if ((rc = obj_hash(w, w->table[s].idx1 - 1, h)) != MC_OK)
			return rc;
		if (memcmp(h, hash, sizeof h) == 0) {
			*idx = w->table[s].idx1 - 1;
			*found = 1;
			return MC_OK;
		}
	}
	return MC_OK;
}

/* Records o as object *idx; one whose hash is known goes into the table. */
static int
new_object(mc_writer *w, const struct wobj *o, uint32_t *idx)
{
	int rc;

	if (w->nobjs >= UINT32_MAX - 1)
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %lu objects",
			       (unsigned long)UINT32_MAX - 2);
	if (!(o->flags & WOBJ_PENDING)) {
		struct wslot e;
		if ((w->tused + 1) * 2 > w->tcap && (rc = table_grow(w)) != MC_OK)
			return rc;
		e.idx1 = w->nobjs + 1;
		e.pref = hash_pref(o->hash);
		slot_put(w->table, w->tcap, e);
		w->tused++;
	}
	if ((rc = mc__store_append(w->ctx, &w->objs, o, sizeof *o, NULL)) != MC_OK)
		return rc;
	*idx = w->nobjs++;
	return MC_OK;
}

/* Stores path as o's source: once for a run of objects from one file (a torch blob). */
static int
source_path(mc_writer *w, struct wobj *o, const char *path)
{
	size_t n = strlen(path);
	int rc;

	if (n >= MC_PATH_MAX)
		return mc__err(w->ctx, MC_ERR_INVALID, "%.200s...: path too long", path);
	o->path_len = (uint32_t)n;
	if (w->has_lastpath && strcmp(w->lastpath, path) == 0) {
		o->path_off = w->lastpath_off;
		return MC_OK;
	}
	if ((rc = mc__store_append(w->ctx, &w->data, path, n, &o->path_off)) != MC_OK)
		return rc;
	memcpy(w->lastpath, path, n + 1);
	w->has_lastpath = 1;
	w->lastpath_off = o->path_off;
	return MC_OK;
}

/* The source path of o, read back into buf (MC_PATH_MAX bytes). */
static int
object_path(mc_writer *w, mc_ctx *ctx, const struct wobj *o, char *buf)
{
	int rc;

	if (o->path_off == WOBJ_IN_DATA) {
		snprintf(buf, MC_PATH_MAX, "(content given in memory)");
		return MC_OK;
	}
	if ((rc = mc__store_io(ctx, &w->data, o->path_off, buf, o->path_len, 0)) != MC_OK)
		return rc;
	buf[o->path_len] = '\0';
	return MC_OK;
}

static int
type_index(mc_writer *w, const char *type, uint32_t *out)
{
	uint32_t i;
	char **t;

	/* Sources add many files of one type in a row. */
	if (w->ntypes > 0 && strcmp(w->types[w->lasttype], type) == 0) {
		*out = w->lasttype;
		return MC_OK;
	}
	for (i = 0; i < w->ntypes; i++)
		if (strcmp(w->types[i], type) == 0)
			break;
	if (i == w->ntypes) {
		if ((t = realloc(w->types, (w->ntypes + 1) * sizeof *t)) == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->types = t;
		if ((t[i] = mc__strdup(type)) == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->ntypes++;
	}
	*out = w->lasttype = i;
	return MC_OK;
}

static int
add_artifact(mc_writer *w, const char *type, const char *key, uint32_t obj, uint64_t size,
	     const unsigned char *sha)
{
	struct wart a;
	int rc;

	if (w->narts >= UINT32_MAX - 1)
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %lu artifacts",
			       (unsigned long)UINT32_MAX - 2);
	memset(&a, 0, sizeof a);
	if ((rc = type_index(w, type, &a.type)) != MC_OK)
		return rc;
	a.key_len = (uint32_t)strlen(key);
	if ((rc = mc__store_append(w->ctx, &w->keys, key, a.key_len, &a.key_off)) != MC_OK)
		return rc;
	a.obj = obj;
	a.seq = w->narts;
	a.size = size;
	if (sha != NULL) {
		a.has_sha256 = 1;
		memcpy(a.sha256, sha, 32);
	}
	if ((rc = mc__store_append(w->ctx, &w->arts, &a, sizeof a, NULL)) != MC_OK)
		return rc;
	w->last = a;
	w->has_last = 1;
	w->narts++;
	w->total += size;
	return MC_OK;
}

/* Checks type and key before anything is read, so a bad key fails fast. */
static int
check_artifact(mc_writer *w, const char *type, const char *key, const struct mc_type **tp)
{
	static const unsigned char zero[32];
	char dest[MC_PATH_MAX];
	const struct mc_type *t = mc__find_type(w->ctx, type);

	if (t == NULL)
		return mc__err(w->ctx, MC_ERR_UNKNOWN_TYPE, "unknown artifact type '%.40s'", type);
	*tp = t;
	return mc__dest_for(w->ctx, t, key, zero, dest, sizeof dest);
}

int
mc_writer_add_memory(mc_writer *w, const char *type, const char *key, const void *data, size_t len)
{
	unsigned char sha[32];
	const struct mc_type *t;
	struct wobj o;
	uint32_t idx;
	int rc, found;

	if (w == NULL || type == NULL || key == NULL || (data == NULL && len > 0))
		return MC_ERR_INVALID;
	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if ((uint64_t)len > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s %.200s: %zu bytes is over the per-artifact "
			       "cap", type, key, len);
	memset(&o, 0, sizeof o);
	crypto_generichash(o.hash, sizeof o.hash, data, len, NULL, 0);
	if (t->flags & MC_TYPE_WANTS_SHA256)
		crypto_hash_sha256(sha, data, len);
	if ((rc = find_object(w, o.hash, &idx, &found)) != MC_OK)
		return rc;
	if (!found) {
		o.size = len;
		o.path_off = WOBJ_IN_DATA;
		if ((rc = mc__store_append(w->ctx, &w->data, data, len, &o.offset)) != MC_OK ||
		    (rc = new_object(w, &o, &idx)) != MC_OK)
			return rc;
	}
	w->only_blob = 0;
	w->nsources++;
	return add_artifact(w, type, key, idx, len, (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL);
}

/* Reading sources. At save, each worker's compressed objects wait in its spool file
 * until the manifest, which records their stored hashes, has been written. */
struct spool {
	mc_ctx *ctx;        /* the context for messages (a worker's, at save) */
	int fd;
	uint64_t len;
	mc_zenc *z;
	crypto_generichash_state gs;
	unsigned char *buf;
	size_t cap;
	char *paths;        /* the paths of a batch of objects (at save) */
};

static int
spool_out(void *ud, const unsigned char *buf, size_t n)
{
	struct spool *sp = ud;

	if (mc__write_all(sp->fd, buf, n) != 0)
		return mc__errno(sp->ctx, MC_ERR_IO, "cannot write the spool file", "temp");
	crypto_generichash_update(&sp->gs, buf, n);
	sp->len += n;
	return MC_OK;
}

/* Where an object's content is read from: a range of a file, or of the data store. */
struct source {
	int fd;                    /* or -1: the store */
	const struct mc_store *st;
	const char *name;          /* for messages */
};

static int
source_open(mc_ctx *ctx, struct source *src, const mc_writer *w, const struct wobj *o,
	    const char *path)
{
	src->name = path;
	src->st = &w->data;
	src->fd = -1;
	if (o != NULL && o->path_off == WOBJ_IN_DATA)
		return MC_OK;
	/* O_NONBLOCK: a FIFO swapped in after the scan cannot hang pack. */
	if ((src->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	return MC_OK;
}

static void
source_close(struct source *src)
{
	if (src->fd >= 0)
		close(src->fd);
	src->fd = -1;
}

static int
source_read(mc_ctx *ctx, const struct source *src, void *buf, size_t n, uint64_t off)
{
	if (src->fd < 0)
		return mc__store_io(ctx, src->st, off, buf, n, 0);
	if (mc__pread_full(src->fd, buf, n, off) != 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot read (did it shrink?)", src->name);
	return MC_OK;
}

/* Reads size bytes at offset of src in pieces into sp->buf (in one piece up to
 * MC_WHOLE_MAX), computing their BLAKE2b (hash) and SHA-256 (sha), either of which may
 * be NULL; with compress set, each piece goes on to the spool's compressor. */
static int
read_source(struct spool *sp, const struct source *src, uint64_t offset, uint64_t size,
	    unsigned char *hash, unsigned char *sha, int compress)
{
	crypto_generichash_state gs;
	crypto_hash_sha256_state ss;
	uint64_t left = size;
	size_t piece = size <= MC_WHOLE_MAX ? (size_t)size : MC_IO_CHUNK;
	int rc = MC_OK;

	if (piece > sp->cap) {
		unsigned char *p = realloc(sp->buf, piece < 65536 ? 65536 : piece);
		if (p == NULL)
			return mc__err(sp->ctx, MC_ERR_NOMEM, "out of memory");
		sp->buf = p;
		sp->cap = piece < 65536 ? 65536 : piece;
	}
	crypto_generichash_init(&gs, NULL, 0, MC_HASH_BYTES);
	crypto_hash_sha256_init(&ss);
	while (rc == MC_OK && left > 0) {
		size_t want = left < piece ? (size_t)left : piece;
		if ((rc = source_read(sp->ctx, src, sp->buf, want, offset + size - left)) != MC_OK)
			break;
		if (hash != NULL)
			crypto_generichash_update(&gs, sp->buf, want);
		if (sha != NULL)
			crypto_hash_sha256_update(&ss, sp->buf, want);
		left -= want;
		if (compress)
			rc = mc__zenc_run(sp->z, sp->buf, want, left == 0, spool_out, sp);
	}
	if (hash != NULL)
		crypto_generichash_final(&gs, hash, MC_HASH_BYTES);
	if (sha != NULL)
		crypto_hash_sha256_final(&ss, sha);
	return rc;
}

int
mc__writer_add_range(mc_writer *w, const char *type, const char *key, const char *path,
		     uint64_t offset, uint64_t size, size_t *object_out)
{
	unsigned char sha[32];
	const struct mc_type *t;
	struct source src;
	struct wobj o;
	uint32_t idx;
	int rc, found = 0, want_sha;

	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if (size > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s: %llu bytes is over the per-artifact cap of "
			       "%llu", path, (unsigned long long)size,
			       (unsigned long long)w->ctx->max_artifact_bytes);
	want_sha = (t->flags & MC_TYPE_WANTS_SHA256) != 0;
	memset(&o, 0, sizeof o);
	/* Contents are hashed and compressed at save, on the worker threads, reading each
	 * once. A type that needs the SHA-256 for its destination gets it here (the save
	 * computes it again, to notice a change); a blob's layout needs the hash now. */
	if ((rc = source_open(w->ctx, &src, w, NULL, path)) != MC_OK)
		return rc;
	if (want_sha || object_out != NULL) {
		struct spool rd;

		memset(&rd, 0, sizeof rd);
		rd.ctx = w->ctx;
		rd.fd = -1;
		rc = read_source(&rd, &src, offset, size, object_out != NULL ? o.hash : NULL,
				 want_sha ? sha : NULL, 0);
		free(rd.buf);
	}
	source_close(&src);
	if (rc != MC_OK)
		return rc;
	if (object_out != NULL && (rc = find_object(w, o.hash, &idx, &found)) != MC_OK)
		return rc;
	if (!found) {
		o.offset = offset;
		o.size = size;
		if (object_out == NULL)
			o.flags |= WOBJ_PENDING;
		if (want_sha) {
			o.flags |= WOBJ_CHECK_SHA;
			memcpy(o.sha256, sha, sizeof sha);
		}
		if ((rc = source_path(w, &o, path)) != MC_OK || (rc = new_object(w, &o, &idx)) != MC_OK)
			return rc;
	}
	if (object_out != NULL)
		*object_out = idx;
	return add_artifact(w, type, key, idx, size, want_sha ? sha : NULL);
}
int
mc_writer_add_file(mc_writer *w, const char *type, const char *key, const char *path)
{
	struct stat st;
	int rc;

	if (w == NULL || type == NULL || key == NULL || path == NULL)
		return MC_ERR_INVALID;
	if (stat(path, &st) != 0)
		return mc__errno(w->ctx, MC_ERR_IO, "cannot open", path);
	if (!S_ISREG(st.st_mode))
		return mc__err(w->ctx, MC_ERR_IO, "%s: not a regular file", path);
	if ((rc = mc__writer_add_range(w, type, key, path, 0, (uint64_t)st.st_size, NULL)) != MC_OK)
		return rc;
	w->only_blob = 0;
	w->nsources++;
	return MC_OK;
}

int
mc__writer_blob_groups(mc_writer *w, char *const *gtypes, size_t n)
{
	size_t g;

	free_groups(w);
	if (n > 0 && (w->groups = calloc(n, sizeof *w->groups)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	w->ngroups = n;
	for (g = 0; g < n; g++)
		if ((w->groups[g].type = mc__strdup(gtypes[g])) == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

int
mc__writer_blob_entry(mc_writer *w, size_t g, const char *key, size_t obj)
{
	struct mc_mgroup *grp = &w->groups[g];
	struct mc_mentry *e;

	e = realloc(grp->entries, (grp->nentries + 1) * sizeof *e);
	if (e == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	grp->entries = e;
	e[grp->nentries].object = obj;
	if ((e[grp->nentries].key = mc__strdup(key)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	grp->nentries++;
	return MC_OK;
}

void
mc__writer_blob_done(mc_writer *w, int layout)
{
	/* Only the current format's groups are a layout export can reproduce. */
	if (!layout)
		w->only_blob = 0;
	w->nsources++;
}

int
mc_writer_set_label(mc_writer *w, const char *key, const char *value)
{
	struct mc_label *l;
	size_t i;
	char *v, why[64];

	if (w == NULL || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	if (!mc__label_key_ok(key))
		return mc__err(w->ctx, MC_ERR_INVALID, "label name '%.64s' is not 1-64 of [A-Za-z0-9_.-]",
			       key);
	if (!mc__label_value_ok(value, why, sizeof why))
		return mc__err(w->ctx, MC_ERR_INVALID, "label %s: value %s", key, why);
	if ((v = mc__strdup(value)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->nlabels; i++)
		if (strcmp(w->labels[i].key, key) == 0) {
			free(w->labels[i].value);
			w->labels[i].value = v;
			return MC_OK;
		}
	if (w->nlabels >= 1024) {
		free(v);
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than 1024 labels");
	}
	l = realloc(w->labels, (w->nlabels + 1) * sizeof *l);
	if (l == NULL || (l[w->nlabels].key = mc__strdup(key)) == NULL) {
		if (l != NULL)
			w->labels = l;
		free(v);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	l[w->nlabels].value = v;
	w->labels = l;
	w->nlabels++;
	return MC_OK;
}

int
mc_writer_set_bundle_version(mc_writer *w, uint64_t version)
{
	if (w == NULL || version > 9007199254740991ull)
		return MC_ERR_INVALID;
	w->bundle_version = version;
	return MC_OK;
}

int
mc_writer_set_expires(mc_writer *w, int64_t t)
{
	if (w == NULL || t < 0 || t > 9007199254740991ll)
		return MC_ERR_INVALID;
	w->expires = t;
	return MC_OK;
}

int
mc_writer_set_created(mc_writer *w, int64_t t)
{
	if (w == NULL || t < 0 || t > 9007199254740991ll)
		return MC_ERR_INVALID;
	w->created = t;
	return MC_OK;
}

int
mc_writer_set_compression(mc_writer *w, int level)
{
	if (w == NULL || level < 0 || level > 19)
		return MC_ERR_INVALID;
	w->level = level;
	return MC_OK;
}

int
mc_writer_add_signer(mc_writer *w, const mc_seckey *sk)
{
	const mc_seckey **s;
	size_t i;

	if (w == NULL || sk == NULL)
		return MC_ERR_INVALID;
	for (i = 0; i < w->nsigners; i++)
		if (memcmp(w->signers[i]->keynum, sk->keynum, 8) == 0)
			return mc__err(w->ctx, MC_ERR_INVALID, "key %s is already a signer", sk->id);
	if ((s = realloc(w->signers, (w->nsigners + 1) * sizeof *s)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	s[w->nsigners++] = sk;
	w->signers = s;
	return MC_OK;
}

void
mc__writer_drop_last(mc_writer *w)
{
	/* The last record is still in the store's buffer: an append keeps what it adds
	 * there. Its key stays in the keys store, unreferenced. */
	if (!w->has_last || mc__store_unappend(&w->arts, sizeof w->last) != MC_OK)
		return;
	w->narts--;
	w->total -= w->last.size;
	w->has_last = 0;
}

const unsigned char *
mc__writer_last_sha256(const mc_writer *w)
{
	return w->has_last && w->last.has_sha256 ? w->last.sha256 : NULL;
}

int
mc_writer_set_keep_unknown(mc_writer *w, int keep)
{
	if (w == NULL)
		return MC_ERR_INVALID;
	w->keep_unknown = keep != 0;
	return MC_OK;
}

int
mc__writer_keep_unknown(const mc_writer *w)
{
	return w->keep_unknown;
}

mc_ctx *
mc__writer_ctx(mc_writer *w)
{
	return w->ctx;
}

void
mc__writer_note_source(mc_writer *w, size_t n)
{
	(void)n;
	w->only_blob = 0;
	w->nsources++;
}

size_t
mc_writer_artifact_count(const mc_writer *w)
{
	return w == NULL ? 0 : w->narts;
}

uint64_t
mc_writer_total_bytes(const mc_writer *w)
{
	return w == NULL ? 0 : w->total;
}


/* ---- the save ---- */

#define MARK_USED UINT32_MAX      /* the object of a kept artifact */
#define MARK_HASH (UINT32_MAX - 1) /* only hashed: an overridden artifact's, for conflicts */

/* Artifacts are sorted by (type, key, order recorded) in runs of at most RUN_ARTS
 * records and RUN_KEYS bytes of keys, which are then merged. */
#define RUN_ARTS 16384
#define RUN_KEYS (2u << 20)
#define RUN_READ (16u * 1024)   /* each run's read buffer while merging */

struct save {
	mc_writer *w;
	uint32_t *rank;        /* per type: its place in name order */
	struct mc_store runs;    /* sorted runs: struct wart, then its key */
	uint64_t *run_off;     /* where each run starts; run_off[nruns] is the end */
	size_t nruns;
	struct mc_store uniq;    /* the kept artifacts, sorted: struct wart, then its key */
	uint32_t nuniq;
	struct mc_store dups;    /* struct wdup: the artifacts of every repeated (type, key) */
	uint32_t *oi;          /* per object: 0, MARK_USED or MARK_HASH; then its place in
				* the object table */
	uint64_t pass_total;
};

struct wdup {
	uint64_t uniq_off;     /* the kept artifact's record */
	uint32_t obj;
	uint32_t first;        /* the first of its (type, key) */
};

static int
rank_types(struct save *sv)
{
	mc_writer *w = sv->w;
	uint32_t i, j;

	if ((sv->rank = calloc(w->ntypes + 1, sizeof *sv->rank)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->ntypes; i++)
		for (j = 0; j < w->ntypes; j++)
			sv->rank[i] += strcmp(w->types[j], w->types[i]) < 0;
	return MC_OK;
}

static int
key_cmp(const unsigned char *a, uint32_t na, const unsigned char *b, uint32_t nb)
{
	int c = memcmp(a, b, na < nb ? na : nb);

	return c != 0 ? c : na < nb ? -1 : na > nb;
}

struct runent {
	const unsigned char *key;
	uint32_t key_len, rank, seq, i;
};

static int
runent_cmp(const void *x, const void *y)
{
	const struct runent *a = x, *b = y;
	int c;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if ((c = key_cmp(a->key, a->key_len, b->key, b->key_len)) != 0)
		return c;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Writes the artifacts to sv->runs as sorted runs. */
static int
sort_runs(struct save *sv)
{
	mc_writer *w = sv->w;
	struct wart *rec = malloc(RUN_ARTS * sizeof *rec);
	struct runent *ent = malloc(RUN_ARTS * sizeof *ent);
	unsigned char *keys = NULL;
	size_t keycap = 0, n, i;
	uint32_t first;
	int rc = MC_OK;

	if (rec == NULL || ent == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (first = 0; rc == MC_OK && first < w->narts; first += (uint32_t)n) {
		uint64_t k0;
		size_t kb;
		void *ro;

		n = w->narts - first < RUN_ARTS ? w->narts - first : RUN_ARTS;
		if ((rc = mc__store_io(w->ctx, &w->arts, (uint64_t)first * sizeof *rec, rec, n * sizeof *rec,
				   0)) != MC_OK)
			break;
		/* Keys are stored in the order recorded: a run's are one range. */
		k0 = rec[0].key_off;
		for (i = 1; i < n && rec[i].key_off + rec[i].key_len - k0 <= RUN_KEYS; i++)
			;
		n = i;
		kb = (size_t)(rec[n - 1].key_off + rec[n - 1].key_len - k0);
		if (kb + 1 > keycap) {
			unsigned char *k = realloc(keys, kb + 1);
			if (k == NULL) {
				rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
				break;
			}
			keys = k;
			keycap = kb + 1;
		}
		if ((rc = mc__store_io(w->ctx, &w->keys, k0, keys, kb, 0)) != MC_OK)
			break;
		for (i = 0; i < n; i++) {
			ent[i].key = keys + (rec[i].key_off - k0);
			ent[i].key_len = rec[i].key_len;
			ent[i].rank = sv->rank[rec[i].type];
			ent[i].seq = rec[i].seq;
			ent[i].i = (uint32_t)i;
		}
		qsort(ent, n, sizeof *ent, runent_cmp);
		if ((ro = realloc(sv->run_off, (sv->nruns + 2) * sizeof *sv->run_off)) == NULL) {
			rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		sv->run_off = ro;
		sv->run_off[sv->nruns++] = mc__store_size(&sv->runs);
		for (i = 0; rc == MC_OK && i < n; i++) {
			rc = mc__store_append(w->ctx, &sv->runs, &rec[ent[i].i], sizeof *rec, NULL);
			if (rc == MC_OK)
				rc = mc__store_append(w->ctx, &sv->runs, ent[i].key, ent[i].key_len, NULL);
		}
	}
	if (rc == MC_OK && sv->run_off != NULL)
		sv->run_off[sv->nruns] = mc__store_size(&sv->runs);
out:
	free(rec);
	free(ent);
	free(keys);
	return rc;
}

/* A run being merged: its next artifact and key. */
struct mrun {
	struct mc_sreader r;
	struct wart a;
	uint32_t rank;
	unsigned char key[MC_KEY_MAX];
};

/* Reads a record and its key from r; *got = 0 at the end. */
static int
next_record(mc_ctx *ctx, struct mc_sreader *r, struct wart *a, unsigned char *key, int *got)
{
	int rc;

	*got = 0;
	if (r->pos == r->len && r->off == r->end)
		return MC_OK;
	if ((rc = mc__sreader_get(ctx, r, a, sizeof *a)) != MC_OK)
		return rc;
	if (a->key_len > MC_KEY_MAX) {
		errno = 0;
		return mc__store_error(ctx, r->s, "read");
	}
	if ((rc = mc__sreader_get(ctx, r, key, a->key_len)) != MC_OK)
		return rc;
	*got = 1;
	return MC_OK;
}

static int
mrun_cmp(const struct mrun *a, const struct mrun *b)
{
	int c;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if ((c = key_cmp(a->key, a->a.key_len, b->key, b->a.key_len)) != 0)
		return c;
	return a->a.seq < b->a.seq ? -1 : a->a.seq > b->a.seq;
}

static void
heap_down(struct mrun **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct mrun *t;
		if (l < n && mrun_cmp(h[l], h[m]) < 0)
			m = l;
		if (l + 1 < n && mrun_cmp(h[l + 1], h[m]) < 0)
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* The end of a (type, key): its last recorded artifact is kept; when there were more,
 * all of them are listed in sv->dups for the conflict check. */
static int
end_group(struct save *sv, const struct wart *a, const unsigned char *key, const uint32_t *grp,
	  size_t ngrp)
{
	mc_writer *w = sv->w;
	struct wdup d;
	size_t i;
	int rc;

	if ((rc = mc__store_append(w->ctx, &sv->uniq, a, sizeof *a, &d.uniq_off)) != MC_OK ||
	    (rc = mc__store_append(w->ctx, &sv->uniq, key, a->key_len, NULL)) != MC_OK)
		return rc;
	sv->nuniq++;
	if (sv->oi[a->obj] != MARK_USED) {
		sv->oi[a->obj] = MARK_USED;
		sv->pass_total += a->size;
	}
	if (ngrp == 0 || w->conflict == NULL)
		return MC_OK;
	for (i = 0; i <= ngrp; i++) {
		d.obj = i < ngrp ? grp[i] : a->obj;
		d.first = i == 0;
		if (sv->oi[d.obj] == 0)
			sv->oi[d.obj] = MARK_HASH;
		if ((rc = mc__store_append(w->ctx, &sv->dups, &d, sizeof d, NULL)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

/* Merges the runs into sv->uniq, one artifact per (type, key), and marks the objects
 * the save reads. */
static int
merge_runs(struct save *sv)
{
	mc_writer *w = sv->w;
	struct mrun *runs = calloc(sv->nruns + 1, sizeof *runs), **h = NULL;
	struct wart cur;
	unsigned char *curkey = malloc(MC_KEY_MAX);
	uint32_t *grp = NULL;
	size_t nh = 0, ngrp = 0, capgrp = 0, i;
	int rc = MC_OK, got, have = 0;

	if (runs == NULL || curkey == NULL ||
	    (h = malloc((sv->nruns + 1) * sizeof *h)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < sv->nruns && rc == MC_OK; i++) {
		rc = mc__sreader_init(w->ctx, &runs[i].r, &sv->runs, sv->run_off[i], sv->run_off[i + 1],
				  RUN_READ);
		if (rc == MC_OK)
			rc = next_record(w->ctx, &runs[i].r, &runs[i].a, runs[i].key, &got);
		if (rc == MC_OK && got) {
			runs[i].rank = sv->rank[runs[i].a.type];
			h[nh++] = &runs[i];
		}
	}
	for (i = nh; i-- > 0;)
		heap_down(h, nh, i);
	while (rc == MC_OK && nh > 0) {
		struct mrun *t = h[0];

		if (have && sv->rank[cur.type] == t->rank &&
		    key_cmp(curkey, cur.key_len, t->key, t->a.key_len) == 0) {
			if (ngrp == capgrp) {
				uint32_t *g = realloc(grp, (capgrp = capgrp ? capgrp * 2 : 16) * sizeof *g);
				if (g == NULL) {
					rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
					break;
				}
				grp = g;
			}
			grp[ngrp++] = cur.obj;
		} else {
			if (have && (rc = end_group(sv, &cur, curkey, grp, ngrp)) != MC_OK)
				break;
			ngrp = 0;
		}
		cur = t->a;
		memcpy(curkey, t->key, t->a.key_len);
		have = 1;
		if ((rc = next_record(w->ctx, &t->r, &t->a, t->key, &got)) != MC_OK)
			break;
		if (got)
			t->rank = sv->rank[t->a.type];
		else
			h[0] = h[--nh];
		heap_down(h, nh, 0);
	}
	if (rc == MC_OK && have)
		rc = end_group(sv, &cur, curkey, grp, ngrp);
out:
	for (i = 0; runs != NULL && i < sv->nruns; i++)
		free(runs[i].r.buf);
	free(runs);
	free(h);
	free(curkey);
	free(grp);
	return rc;
}

/* Tells the conflict callback of every (type, key) recorded with different contents;
 * after the first pass, when every listed object has its hash. */
static int
report_conflicts(struct save *sv)
{
	mc_writer *w = sv->w;
	unsigned char h0[MC_HASH_BYTES], h[MC_HASH_BYTES];
	unsigned char key[MC_KEY_MAX + 1];
	struct mc_sreader r;
	struct wdup d;
	uint64_t goff = 0;
	int rc, differ = 0, more = 1;

	if (w->conflict == NULL || mc__store_size(&sv->dups) == 0)
		return MC_OK;
	if ((rc = mc__sreader_init(w->ctx, &r, &sv->dups, 0, mc__store_size(&sv->dups), RUN_READ)) != MC_OK)
		return rc;
	while (rc == MC_OK) {
		more = !(r.pos == r.len && r.off == r.end);
		if (more && (rc = mc__sreader_get(w->ctx, &r, &d, sizeof d)) != MC_OK)
			break;
		if ((!more || d.first) && differ) { /* the group before ends */
			struct wart a;
			if ((rc = mc__store_io(w->ctx, &sv->uniq, goff, &a, sizeof a, 0)) != MC_OK ||
			    (rc = mc__store_io(w->ctx, &sv->uniq, goff + sizeof a, key, a.key_len, 0)) != MC_OK)
				break;
			key[a.key_len] = '\0';
			w->conflict(w->conflict_ud, w->types[a.type], (const char *)key);
		}
		if (!more)
			break;
		rc = obj_hash(w, d.obj, d.first ? h0 : h);
		if (d.first) {
			goff = d.uniq_off;
			differ = 0;
		} else {
			differ |= memcmp(h, h0, sizeof h) != 0;
		}
	}
	free(r.buf);
	return rc;
}

/* An object to sort by hash: the first 8 bytes, big-endian, decide nearly always. */
struct hashpref {
	uint64_t pref;
	uint32_t idx;
};

static int
hashpref_cmp(const void *x, const void *y)
{
	const struct hashpref *a = x, *b = y;

	if (a->pref != b->pref)
		return a->pref < b->pref ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

struct fullhash {
	unsigned char hash[MC_HASH_BYTES];
	uint32_t idx;
	uint64_t size;
};

static int
fullhash_cmp(const void *x, const void *y)
{
	const struct fullhash *a = x, *b = y;
	int c = memcmp(a->hash, b->hash, MC_HASH_BYTES);

	return c != 0 ? c : a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* After the first pass: the object table. Objects with equal contents become one, the
 * first recorded (so the choice does not depend on the workers), and the kept ones are
 * ordered by hash: *order lists them, and sv->oi gives every used object its place. */
static int
order_objects(struct save *sv, uint32_t **order_out, uint32_t *n_out, uint64_t *total)
{
	mc_writer *w = sv->w;
	struct hashpref *hp = NULL;
	struct fullhash *f = NULL;
	uint32_t *order = NULL, (*alias)[2] = NULL;
	size_t nused = 0, nalias = 0, capalias = 0, nf = 0, i, e, r;
	uint32_t nu = 0;
	struct mc_sreader rd;
	struct wobj o;
	int rc = MC_OK;

	memset(&rd, 0, sizeof rd);
	*total = 0;
	for (i = 0; i < w->nobjs; i++)
		nused += sv->oi[i] == MARK_USED;
	if ((hp = malloc((nused + 1) * sizeof *hp)) == NULL ||
	    (order = malloc((nused + 1) * sizeof *order)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	rc = mc__sreader_init(w->ctx, &rd, &w->objs, 0, mc__store_size(&w->objs), 256 * sizeof o);
	for (i = 0, e = 0; rc == MC_OK && i < w->nobjs; i++) {
		if ((rc = mc__sreader_get(w->ctx, &rd, &o, sizeof o)) != MC_OK)
			break;
		if (sv->oi[i] == MARK_USED) {
			hp[e].pref = mc__be64(o.hash);
			hp[e++].idx = (uint32_t)i;
			*total += o.size;
		}
	}
	if (rc != MC_OK)
		goto out;
	if (nused > 1)
		qsort(hp, nused, sizeof *hp, hashpref_cmp);
	for (i = 0; rc == MC_OK && i < nused; i = e) {
		for (e = i + 1; e < nused && hp[e].pref == hp[i].pref; e++)
			;
		if (e - i == 1) {
			order[nu++] = hp[i].idx;
			continue;
		}
		/* Equal prefixes: ordered by the whole hash; equal hashes are one object. */
		if (e - i > nf) {
			struct fullhash *g = realloc(f, (e - i) * sizeof *f);
			if (g == NULL) {
				rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
				break;
			}
			f = g;
			nf = e - i;
		}
		for (r = 0; rc == MC_OK && r < e - i; r++) {
			rc = obj_get(w, w->ctx, hp[i + r].idx, &o);
			memcpy(f[r].hash, o.hash, MC_HASH_BYTES);
			f[r].idx = hp[i + r].idx;
			f[r].size = o.size;
		}
		if (rc != MC_OK)
			break;
		qsort(f, e - i, sizeof *f, fullhash_cmp);
		for (r = 0; r < e - i; r++) {
			if (r == 0 || memcmp(f[r].hash, f[r - 1].hash, MC_HASH_BYTES) != 0) {
				order[nu++] = f[r].idx;
				continue;
			}
			if (nalias == capalias) {
				void *a = realloc(alias, (capalias = capalias ? capalias * 2 : 64) *
						  sizeof *alias);
				if (a == NULL) {
					rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
					break;
				}
				alias = a;
			}
			alias[nalias][0] = f[r].idx;
			alias[nalias++][1] = order[nu - 1];
			*total -= f[r].size;
		}
	}
	if (rc != MC_OK)
		goto out;
	for (i = 0; i < nu; i++)
		sv->oi[order[i]] = (uint32_t)i;
	for (i = 0; i < nalias; i++)
		sv->oi[alias[i][0]] = sv->oi[alias[i][1]];
	*order_out = order;
	*n_out = nu;
	order = NULL;
out:
	free(rd.buf);
	free(hp);
	free(f);
	free(alias);
	free(order);
	return rc;
}

/* What the save renders the manifest from: the kept artifacts, read forwards from
 * their store, and the object records. A read error is kept in rc. */
struct saveview {
	mc_writer *w;
	struct save *sv;
	const uint32_t *order;
	struct mc_sreader r;
	size_t next;           /* the artifact expected next */
	struct wart a;
	char key[MC_KEY_MAX + 1];
	uint32_t cached;       /* the object table's entry in o, when have_o */
	int have_o;
	struct wobj o;
	int rc;
};

static void
view_artifact(void *ud, size_t i, struct mc_martifact *out)
{
	struct saveview *v = ud;
	int got = 0;

	memset(out, 0, sizeof *out);
	out->type = out->key = "";
	if (i == 0) { /* a render starts */
		v->r.off = 0;
		v->r.pos = v->r.len = 0;
		v->next = 0;
	}
	if (v->rc != MC_OK)
		return;
	if (i != v->next) {
		v->rc = mc__err(v->w->ctx, MC_ERR_INVALID, "artifacts rendered out of order");
		return;
	}
	v->next++;
	if ((v->rc = next_record(v->w->ctx, &v->r, &v->a, (unsigned char *)v->key, &got)) != MC_OK)
		return;
	if (!got) {
		errno = 0;
		v->rc = mc__store_error(v->w->ctx, &v->sv->uniq, "read");
		return;
	}
	v->key[v->a.key_len] = '\0';
	out->type = v->w->types[v->a.type];
	out->key = v->key;
	out->size = v->a.size;
	out->sha256 = v->a.has_sha256 ? v->a.sha256 : NULL;
	out->object = v->sv->oi[v->a.obj];
}

static void
view_object(void *ud, size_t i, struct mc_mobject *out)
{
	struct saveview *v = ud;
	const struct wobj *o = &v->o;
	int stored = v->w->level > 0; /* else every object is stored as is */

	memset(out, 0, sizeof *out);
	if (v->rc != MC_OK)
		return;
	if (!v->have_o || v->cached != (uint32_t)i) {
		v->have_o = 0;
		if ((v->rc = obj_get(v->w, v->w->ctx, v->order[i], &v->o)) != MC_OK)
			return;
		v->cached = (uint32_t)i;
		v->have_o = 1;
	}
	memcpy(out->hash, o->hash, MC_HASH_BYTES);
	out->size = o->size;
	out->encoding = stored ? o->encoding : MC_ENC_NONE;
	out->stored_size = stored ? o->stored_size : o->size;
	memcpy(out->stored_hash, stored ? o->stored_hash : o->hash, MC_HASH_BYTES);
}

static int
label_cmp(const void *x, const void *y)
{
	return strcmp(((const struct mc_label *)x)->key, ((const struct mc_label *)y)->key);
}

/* Reads one object's content from its source in chunks, hashing it again: a source
 * file that changed since it was recorded fails the save instead of producing a bad
 * bundle. */
static int
read_object(mc_writer *w, const struct wobj *o, mc_out_fn fn, void *ud, uint64_t *done,
	    uint64_t total)
{
	unsigned char hash[MC_HASH_BYTES];
	crypto_generichash_state gs;
	char name[MC_PATH_MAX];
	struct source src;
	unsigned char *buf;
	uint64_t left = o->size;
	int rc;

	if ((rc = object_path(w, w->ctx, o, name)) != MC_OK ||
	    (rc = source_open(w->ctx, &src, w, o, name)) != MC_OK)
		return rc;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL) {
		source_close(&src);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	crypto_generichash_init(&gs, NULL, 0, sizeof hash);
	while (rc == MC_OK && left > 0) {
		size_t want = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = source_read(w->ctx, &src, buf, want, o->offset + o->size - left)) != MC_OK)
			break;
		crypto_generichash_update(&gs, buf, want);
		rc = fn(ud, buf, want);
		left -= want;
		*done += want;
		mc__progress(w->ctx, "pack", *done, total);
	}
	free(buf);
	source_close(&src);
	crypto_generichash_final(&gs, hash, sizeof hash);
	if (rc == MC_OK && memcmp(hash, o->hash, MC_HASH_BYTES) != 0)
		rc = mc__err(w->ctx, MC_ERR_IO, "%s: content changed while packing", name);
	return rc;
}

static int
emit_out(void *ud, const unsigned char *buf, size_t n)
{
	return mc__emit_data(ud, buf, n);
}

/* ---- the save's first pass, on the worker threads ----
 * Each used object is read once: hashed (its hash is known only now for most) and
 * compressed into the worker's spool file. An object marked MARK_HASH is only hashed. */

#define PASS_BATCH 32           /* objects per item */
#define PASS_PATHS (256u * 1024) /* their paths are read at once when within this */

struct pass {
	mc_writer *w;
	const char *path;     /* the bundle's: spool files are made beside it */
	const uint32_t *oi;
	struct spool *sp;     /* per worker */
	_Atomic uint64_t done;
	uint64_t total;
};

/* Hashes (and, when compress is set, compresses into the worker's spool) object o,
 * whose source is name, updating its record. */
static int
pass_one(struct pass *p, unsigned worker, mc_ctx *wctx, struct wobj *o, const char *name,
	 int only_hash)
{
	mc_writer *w = p->w;
	struct spool *sp = &p->sp[worker];
	unsigned char hash[MC_HASH_BYTES], sha[32];
	int rc, compress = !only_hash && w->level > 0;
	struct source src;
	uint64_t done;

	if (sp->ctx != wctx) { /* this worker's first object */
		sp->ctx = wctx;
		if (w->level > 0) {
			char *tmp = NULL;
			if ((sp->fd = mc__open_temp_beside(wctx, p->path, &tmp, 0600)) < 0)
				return MC_ERR_IO;
			unlink(tmp); /* the open descriptor keeps it; nothing is left behind */
			free(tmp);
			if ((rc = mc__zenc_new(wctx, w->level, &sp->z)) != MC_OK)
				return rc;
		}
	}
	if (compress) {
		o->spool = (uint16_t)worker;
		o->spool_off = sp->len;
		crypto_generichash_init(&sp->gs, NULL, 0, MC_HASH_BYTES);
	}
	if ((rc = source_open(wctx, &src, w, o, name)) != MC_OK)
		return rc;
	rc = read_source(sp, &src, o->offset, o->size, hash,
			 (o->flags & WOBJ_CHECK_SHA) ? sha : NULL, compress);
	source_close(&src);
	if (rc == MC_OK && (o->flags & WOBJ_CHECK_SHA) && memcmp(sha, o->sha256, sizeof sha) != 0)
		rc = mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", name);
	if (rc != MC_OK)
		return rc;
	if (o->flags & WOBJ_PENDING) {
		memcpy(o->hash, hash, sizeof hash);
		o->flags &= (uint8_t)~WOBJ_PENDING;
	} else if (memcmp(hash, o->hash, sizeof hash) != 0) {
		return mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", name);
	}
	if (only_hash)
		return MC_OK;
	o->encoding = MC_ENC_NONE;
	o->stored_size = o->size;
	memcpy(o->stored_hash, o->hash, MC_HASH_BYTES);
	if (compress) {
		uint64_t zsize = sp->len - o->spool_off;
		/* Stored as zstd only where any reader with the default caps takes it. */
		if (zsize < o->size && o->size / MC_DEFAULT_MAX_EXPANSION <= zsize) {
			o->encoding = MC_ENC_ZSTD;
			o->stored_size = zsize;
			crypto_generichash_final(&sp->gs, o->stored_hash, MC_HASH_BYTES);
		} else { /* stored as is: the spool forgets it */
			if (ftruncate(sp->fd, (off_t)o->spool_off) != 0 ||
			    lseek(sp->fd, (off_t)o->spool_off, SEEK_SET) < 0)
				return mc__errno(wctx, MC_ERR_IO, "cannot rewind the spool file", "temp");
			sp->len = o->spool_off;
		}
	}
	done = atomic_fetch_add(&p->done, o->size) + o->size;
	if (worker == 0)
		mc__progress(w->ctx, "pack", done, p->total);
	return MC_OK;
}

/* Item k is objects k * PASS_BATCH on: their records, and their paths when they lie
 * close together, are read and written back in one piece each. */
static int
pass_item(void *ud, unsigned worker, mc_ctx *wctx, size_t k)
{
	struct pass *p = ud;
	mc_writer *w = p->w;
	struct wobj o[PASS_BATCH];
	char name[MC_PATH_MAX];
	uint32_t first = (uint32_t)(k * PASS_BATCH), n, j;
	uint64_t lo = UINT64_MAX, hi = 0;
	int rc, any = 0;

	n = w->nobjs - first < PASS_BATCH ? w->nobjs - first : PASS_BATCH;
	for (j = 0; j < n; j++)
		any |= p->oi[first + j] == MARK_USED || p->oi[first + j] == MARK_HASH;
	if (!any)
		return MC_OK;
	if ((rc = mc__store_io(wctx, &w->objs, (uint64_t)first * sizeof *o, o, n * sizeof *o, 0)) != MC_OK)
		return rc;
	for (j = 0; j < n; j++)
		if (p->oi[first + j] != 0 && o[j].path_off != WOBJ_IN_DATA) {
			lo = o[j].path_off < lo ? o[j].path_off : lo;
			hi = o[j].path_off + o[j].path_len > hi ? o[j].path_off + o[j].path_len : hi;
		}
	if (hi > lo && hi - lo <= PASS_PATHS) {
		struct spool *sp = &p->sp[worker];
		if (sp->paths == NULL && (sp->paths = malloc(PASS_PATHS)) == NULL)
			return mc__err(wctx, MC_ERR_NOMEM, "out of memory");
		if ((rc = mc__store_io(wctx, &w->data, lo, sp->paths, (size_t)(hi - lo), 0)) != MC_OK)
			return rc;
	} else {
		lo = hi = 0;
	}
	for (j = 0; j < n; j++) {
		int only_hash = p->oi[first + j] == MARK_HASH;
		if (p->oi[first + j] != MARK_USED && !only_hash)
			continue;
		if (!(o[j].flags & WOBJ_PENDING) && (only_hash || w->level == 0))
			continue;
		if (hi > 0 && o[j].path_off != WOBJ_IN_DATA) {
			memcpy(name, p->sp[worker].paths + (o[j].path_off - lo), o[j].path_len);
			name[o[j].path_len] = '\0';
		} else if ((rc = object_path(w, wctx, &o[j], name)) != MC_OK) {
			return rc;
		}
		if ((rc = pass_one(p, worker, wctx, &o[j], name, only_hash)) != MC_OK)
			return rc;
	}
	return mc__store_io(wctx, &w->objs, (uint64_t)first * sizeof *o, o, n * sizeof *o, 1);
}

static int
copy_spooled(mc_writer *w, mc_emit *e, int fd, uint64_t off, uint64_t n)
{
	unsigned char *buf = malloc(MC_IO_CHUNK);
	int rc = MC_OK;

	if (buf == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	while (rc == MC_OK && n > 0) {
		size_t want = n < MC_IO_CHUNK ? (size_t)n : MC_IO_CHUNK;
		ssize_t r = pread(fd, buf, want, (off_t)off);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			rc = mc__err(w->ctx, MC_ERR_IO, "cannot read the spool file");
			break;
		}
		rc = mc__emit_data(e, buf, (size_t)r);
		off += (uint64_t)r;
		n -= (uint64_t)r;
	}
	free(buf);
	return rc;
}

/* The manifest text as it is rendered: counted and prehashed, and written to e when
 * that is set. */
struct mtext {
	mc_ctx *ctx;
	crypto_generichash_state st;
	uint64_t len;
	mc_emit *e;
};

static int
mtext_sink(void *ud, const char *p, size_t n)
{
	struct mtext *t = ud;

	crypto_generichash_update(&t->st, (const unsigned char *)p, n);
	t->len += n;
	if (t->e == NULL && t->len > t->ctx->max_manifest)
		return mc__err(t->ctx, MC_ERR_LIMIT, "manifest of more than %llu bytes is over the cap",
			       (unsigned long long)t->ctx->max_manifest);
	return t->e != NULL ? mc__emit_data(t->e, p, n) : MC_OK;
}

/* Renders m, into e when it is not NULL; gives its prehash and length. */
static int
write_manifest(mc_ctx *ctx, const struct mc_manifest *m, mc_emit *e,
	       unsigned char prehash[MC_SIG_PREHASH], uint64_t *len)
{
	struct mtext mt;
	int rc;

	memset(&mt, 0, sizeof mt);
	mt.ctx = ctx;
	mt.e = e;
	crypto_generichash_init(&mt.st, NULL, 0, MC_SIG_PREHASH);
	if ((rc = mc__manifest_write(ctx, m, mtext_sink, &mt)) != MC_OK)
		return rc;
	crypto_generichash_final(&mt.st, prehash, MC_SIG_PREHASH);
	*len = mt.len;
	return MC_OK;
}


int
mc_writer_save(mc_writer *w, const char *path)
{
	struct mc_manifest m;
	struct mc_msource src;
	struct save sv;
	struct saveview view;
	unsigned char prehash[MC_SIG_PREHASH], again[MC_SIG_PREHASH];
	size_t i, j, nsig = 0;
	uint32_t *order = NULL, nuniq = 0;
	char **sigtxt = NULL;
	size_t *siglen = NULL;
	uint64_t jlen = 0, again_len = 0;
	char (*sigid)[17] = NULL;
	uint64_t done = 0, total = 0, spare = 0;
	struct pass pass;
	unsigned nworkers = mc__threads(w->ctx), k;
	int layout = w->only_blob && w->nsources == 1;
	mc_emit *e = NULL;
	int rc = MC_OK;

	if (w == NULL || path == NULL)
		return MC_ERR_INVALID;
	memset(&m, 0, sizeof m);
	memset(&pass, 0, sizeof pass);
	memset(&sv, 0, sizeof sv);
	memset(&view, 0, sizeof view);
	sv.w = w;
	mc__store_init(&sv.runs, "artifact sort");
	mc__store_init(&sv.uniq, "artifact sort");
	mc__store_init(&sv.dups, "artifact sort");
	if ((sv.oi = calloc((size_t)w->nobjs + 1, sizeof *sv.oi)) == NULL ||
	    (pass.sp = calloc(nworkers, sizeof *pass.sp)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (k = 0; k < nworkers; k++)
		pass.sp[k].fd = -1;
	/* Artifacts sorted by (type, key); for a repeated pair the last recorded wins. */
	if ((rc = rank_types(&sv)) != MC_OK || (rc = sort_runs(&sv)) != MC_OK ||
	    (rc = merge_runs(&sv)) != MC_OK)
		goto out;
	mc__store_free(&sv.runs);
	if (layout)
		for (i = 0; i < w->ngroups; i++)
			for (j = 0; j < w->groups[i].nentries; j++) {
				uint32_t x = (uint32_t)w->groups[i].entries[j].object;
				struct wobj o;
				if (sv.oi[x] == MARK_USED)
					continue;
				if ((rc = obj_get(w, w->ctx, x, &o)) != MC_OK)
					goto out;
				sv.oi[x] = MARK_USED;
				sv.pass_total += o.size;
			}
	/* The first pass: every used object read once, hashed and compressed. */
	pass.w = w;
	pass.path = path;
	pass.oi = sv.oi;
	pass.total = sv.pass_total;
	if ((rc = mc__parallel(w->ctx, ((size_t)w->nobjs + PASS_BATCH - 1) / PASS_BATCH, nworkers,
				 pass_item, &pass)) != MC_OK ||
	    (rc = report_conflicts(&sv)) != MC_OK)
		goto out;
	mc__store_free(&sv.dups);
	done = atomic_load(&pass.done);
	/* The object table: the kept objects sorted by hash. */
	if ((rc = order_objects(&sv, &order, &nuniq, &total)) != MC_OK)
		goto out;
	view.w = w;
	view.sv = &sv;
	view.order = order;
	if ((rc = mc__sreader_init(w->ctx, &view.r, &sv.uniq, 0, mc__store_size(&sv.uniq), RUN_READ)) != MC_OK)
		goto out;
	m.nartifacts = sv.nuniq;
	m.nobjects = nuniq;
	src.ud = &view;
	src.artifact = view_artifact;
	src.object = view_object;
	m.src = &src;
	if (layout) {
		m.has_torch_blob = 1;
		m.ngroups = w->ngroups;
		m.groups = calloc(w->ngroups + 1, sizeof *m.groups);
		if (m.groups == NULL) {
			rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
			goto out;
		}
		for (i = 0; i < w->ngroups && rc == MC_OK; i++) {
			m.groups[i].type = w->groups[i].type;
			m.groups[i].nentries = w->groups[i].nentries;
			m.groups[i].entries = calloc(w->groups[i].nentries + 1, sizeof(struct mc_mentry));
			if (m.groups[i].entries == NULL) {
				rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
				break;
			}
			for (j = 0; j < w->groups[i].nentries; j++) {
				m.groups[i].entries[j].key = w->groups[i].entries[j].key;
				m.groups[i].entries[j].object = sv.oi[w->groups[i].entries[j].object];
			}
		}
		if (rc != MC_OK)
			goto out;
	}
	if (w->nlabels > 1)
		qsort(w->labels, w->nlabels, sizeof *w->labels, label_cmp);
	m.labels = w->labels;
	m.nlabels = w->nlabels;
	m.created = w->created;
	m.bundle_version = w->bundle_version;
	m.expires = w->expires;
	/* The manifest is rendered twice, never held whole: once for its size and
	 * prehash, which the signatures need before it is written, then into the file. */
	rc = write_manifest(w->ctx, &m, NULL, prehash, &jlen);
	if (view.rc != MC_OK)
		rc = view.rc;
	if (rc != MC_OK)
		goto out;
	/* Signatures, ordered by key id. */
	if (w->nsigners > 0 &&
	    ((sigtxt = calloc(w->nsigners, sizeof *sigtxt)) == NULL ||
	     (siglen = calloc(w->nsigners, sizeof *siglen)) == NULL ||
	     (sigid = calloc(w->nsigners, sizeof *sigid)) == NULL)) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < w->nsigners; i++) {
		struct mc_sig sig;
		char tc[128];

		snprintf(tc, sizeof tc, MC_SIG_TRUSTED_FMT, (long long)w->created);
		if ((rc = mc__sig_make_prehashed(w->ctx, w->signers[i], prehash, tc, &sig)) != MC_OK)
			goto out;
		/* Insertion keeps the arrays sorted by key id. */
		for (j = nsig; j > 0 && strcmp(sigid[j - 1], sig.id) > 0; j--) {
			sigtxt[j] = sigtxt[j - 1];
			siglen[j] = siglen[j - 1];
			memcpy(sigid[j], sigid[j - 1], 17);
		}
		sigtxt[j] = mc__sig_render(&sig, &siglen[j]);
		memcpy(sigid[j], sig.id, 17);
		mc__sig_clear(&sig);
		nsig++;
		if (sigtxt[j] == NULL) {
			rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
			goto out;
		}
	}
	if ((rc = mc__emit_open(w->ctx, path, &e)) != MC_OK)
		goto out;
	if ((rc = mc__emit_member(e, MC_MEMBER_MANIFEST, jlen)) != MC_OK)
		goto out;
	rc = write_manifest(w->ctx, &m, e, again, &again_len);
	if (view.rc != MC_OK)
		rc = view.rc;
	if (rc != MC_OK)
		goto out;
	if (again_len != jlen || memcmp(again, prehash, sizeof prehash) != 0) {
		rc = mc__err(w->ctx, MC_ERR_INVALID, "%s: the manifest rendered differently twice",
			     path);
		goto out;
	}
	if ((rc = mc__emit_sigs(e, sigtxt, siglen, (const char (*)[17])sigid, nsig)) != MC_OK)
		goto out;
	for (i = 0; i < nuniq && rc == MC_OK; i++) {
		struct mc_mobject mo;
		char name[128];

		view_object(&view, i, &mo);
		if ((rc = view.rc) != MC_OK)
			break;
		mc__object_member(mo.hash, name, sizeof name);
		if ((rc = mc__emit_member(e, name, mo.stored_size)) != MC_OK)
			break;
		if (mo.encoding == MC_ENC_ZSTD)
			rc = copy_spooled(w, e, pass.sp[view.o.spool].fd, view.o.spool_off,
					  mo.stored_size);
		else
			rc = read_object(w, &view.o, emit_out, e, w->level > 0 ? &spare : &done, total);
	}
	if (rc == MC_OK) {
		rc = mc__emit_finish(e);
		e = NULL;
	}
out:
	mc__emit_abort(e);
	for (k = 0; pass.sp != NULL && k < nworkers; k++) {
		mc__zenc_free(pass.sp[k].z);
		if (pass.sp[k].fd >= 0)
			close(pass.sp[k].fd);
		free(pass.sp[k].buf);
		free(pass.sp[k].paths);
	}
	free(pass.sp);
	if (m.groups != NULL)
		for (i = 0; i < m.ngroups; i++)
			free(m.groups[i].entries);
	free(m.groups);
	free(view.r.buf);
	free(order);
	free(sv.rank);
	free(sv.run_off);
	free(sv.oi);
	mc__store_free(&sv.runs);
	mc__store_free(&sv.uniq);
	mc__store_free(&sv.dups);
	for (i = 0; i < nsig; i++)
		free(sigtxt[i]);
	free(sigtxt);
	free(siglen);
	free(sigid);
	return rc;
}
