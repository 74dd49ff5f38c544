/*
 * writer.c - records artifacts (from memory, files, torch blobs) and saves them as a
 * bundle: manifest, signatures, then each distinct content once, ordered by hash.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "emit_private.h"

struct wobj {
	unsigned char hash[MC_HASH_BYTES];
	uint64_t size;
	unsigned char *data; /* content in memory, or NULL */
	char *path;          /* else a range of this file */
	uint64_t offset;
	int pending;         /* content not read yet: hashed (and deduplicated) at save */
	int check_sha;       /* the save checks that the content still has this SHA-256 */
	unsigned char sha256[32];
	size_t out_index;    /* position in the saved manifest's object table */
	/* Set at save: */
	size_t canon;        /* the object with the same content that is kept */
	int encoding;
	unsigned spool;      /* the worker whose spool file holds the stored bytes */
	uint64_t spool_off, stored_size;
	unsigned char stored_hash[MC_HASH_BYTES];
};

struct wart {
	char *type;
	char *key;
	size_t obj;
	size_t seq;
	int has_sha256;
	unsigned char sha256[32];
};

struct mc_writer {
	mc_ctx *ctx;
	struct wobj *objs;
	size_t nobjs, capobjs;
	size_t *table; /* open addressing on hash: object index + 1, 0 = empty */
	size_t tcap;
	struct wart *arts;
	size_t narts, caparts;
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
	struct mc_arena strings; /* the artifacts' types and keys, the sources' paths */
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
	for (i = 0; i < w->nobjs; i++)
		free(w->objs[i].data);
	free(w->objs);
	free(w->table);
	free(w->arts);
	mc__arena_free(&w->strings);
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

static size_t
slot_of(const unsigned char *hash, size_t cap)
{
	size_t h;

	memcpy(&h, hash, sizeof h);
	return h & (cap - 1);
}

static int
table_grow(mc_writer *w)
{
	size_t cap = w->tcap ? w->tcap * 2 : 1024, i;
	size_t *t = calloc(cap, sizeof *t);

	if (t == NULL)
		return -1;
	for (i = 0; i < w->nobjs; i++) {
		size_t s = slot_of(w->objs[i].hash, cap);
		if (w->objs[i].pending)
			continue;
		while (t[s] != 0)
			s = (s + 1) & (cap - 1);
		t[s] = i + 1;
	}
	free(w->table);
	w->table = t;
	w->tcap = cap;
	return 0;
}

/* Makes room for objs[nobjs], zeroed. */
static int
new_object(mc_writer *w)
{
	if (w->nobjs == w->capobjs) {
		size_t cap = w->capobjs ? w->capobjs * 2 : 64;
		struct wobj *o = realloc(w->objs, cap * sizeof *o);
		if (o == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->objs = o;
		w->capobjs = cap;
	}
	memset(&w->objs[w->nobjs], 0, sizeof w->objs[0]);
	return MC_OK;
}

/* Returns the index of the object with this hash, adding it if new (*added = 1). */
static int
intern_object(mc_writer *w, const unsigned char *hash, uint64_t size, size_t *idx, int *added)
{
	size_t s;
	int rc;

	*added = 0;
	if ((w->nobjs + 1) * 2 > w->tcap && table_grow(w) != 0)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (s = slot_of(hash, w->tcap); w->table[s] != 0; s = (s + 1) & (w->tcap - 1)) {
		struct wobj *o = &w->objs[w->table[s] - 1];
		if (memcmp(o->hash, hash, MC_HASH_BYTES) == 0) {
			*idx = w->table[s] - 1;
			return MC_OK;
		}
	}
	if ((rc = new_object(w)) != MC_OK)
		return rc;
	memcpy(w->objs[w->nobjs].hash, hash, MC_HASH_BYTES);
	w->objs[w->nobjs].size = size;
	w->table[s] = w->nobjs + 1;
	*idx = w->nobjs++;
	*added = 1;
	return MC_OK;
}

/* The path of a new object idx: shared with the object before it when they are
 * ranges of one file (a torch blob). */
static char *
source_path(mc_writer *w, size_t idx, const char *path)
{
	if (idx > 0 && w->objs[idx - 1].path != NULL && strcmp(w->objs[idx - 1].path, path) == 0)
		return w->objs[idx - 1].path;
	return mc__arena_strdup(&w->strings, path);
}

static int
add_artifact(mc_writer *w, const char *type, const char *key, size_t obj, const unsigned char *sha)
{
	struct wart *a;

	if (w->narts == w->caparts) {
		size_t cap = w->caparts ? w->caparts * 2 : 64;
		a = realloc(w->arts, cap * sizeof *a);
		if (a == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->arts = a;
		w->caparts = cap;
	}
	a = &w->arts[w->narts];
	memset(a, 0, sizeof *a);
	/* Sources add many files of one type in a row: the type is stored once for them. */
	if (w->narts > 0 && strcmp(a[-1].type, type) == 0)
		a->type = a[-1].type;
	else if ((a->type = mc__arena_strdup(&w->strings, type)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	if ((a->key = mc__arena_strdup(&w->strings, key)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	a->obj = obj;
	a->seq = w->narts;
	if (sha != NULL) {
		a->has_sha256 = 1;
		memcpy(a->sha256, sha, 32);
	}
	w->narts++;
	w->total += w->objs[obj].size;
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
	unsigned char hash[MC_HASH_BYTES], sha[32];
	const struct mc_type *t;
	unsigned char *copy;
	size_t idx;
	int rc, added;

	if (w == NULL || type == NULL || key == NULL || (data == NULL && len > 0))
		return MC_ERR_INVALID;
	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if ((uint64_t)len > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s %.200s: %zu bytes is over the per-artifact "
			       "cap", type, key, len);
	crypto_generichash(hash, sizeof hash, data, len, NULL, 0);
	if (t->flags & MC_TYPE_WANTS_SHA256)
		crypto_hash_sha256(sha, data, len);
	if ((copy = malloc(len ? len : 1)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	memcpy(copy, data, len);
	if ((rc = intern_object(w, hash, len, &idx, &added)) != MC_OK) {
		free(copy);
		return rc;
	}
	if (added && w->objs[idx].data == NULL && w->objs[idx].path == NULL)
		w->objs[idx].data = copy;
	else
		free(copy);
	w->only_blob = 0;
	w->nsources++;
	return add_artifact(w, type, key, idx, (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL);
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
};

struct pass {
	mc_writer *w;
	const char *path; /* the bundle's: spool files are made beside it */
	size_t *items;    /* object indices */
	struct spool *sp; /* per worker */
	_Atomic uint64_t done;
	uint64_t total;
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

/* Reads size bytes at offset of path in pieces into sp->buf (in one piece up to
 * MC_WHOLE_MAX), computing their BLAKE2b (hash) and SHA-256 (sha), either of which may
 * be NULL; with compress set, each piece goes on to the spool's compressor. */
static int
read_source(struct spool *sp, const char *path, uint64_t offset, uint64_t size,
	    unsigned char *hash, unsigned char *sha, int compress)
{
	crypto_generichash_state gs;
	crypto_hash_sha256_state ss;
	uint64_t left = size;
	size_t piece = size <= MC_WHOLE_MAX ? (size_t)size : MC_IO_CHUNK;
	int fd, rc = MC_OK;

	if (piece > sp->cap) {
		unsigned char *p = realloc(sp->buf, piece < 65536 ? 65536 : piece);
		if (p == NULL)
			return mc__err(sp->ctx, MC_ERR_NOMEM, "out of memory");
		sp->buf = p;
		sp->cap = piece < 65536 ? 65536 : piece;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return mc__errno(sp->ctx, MC_ERR_IO, "cannot open", path);
	crypto_generichash_init(&gs, NULL, 0, MC_HASH_BYTES);
	crypto_hash_sha256_init(&ss);
	while (rc == MC_OK && left > 0) {
		size_t want = left < piece ? (size_t)left : piece, got = 0;
		while (got < want) {
			ssize_t r = pread(fd, sp->buf + got, want - got,
					  (off_t)(offset + size - left + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				if (r == 0)
					errno = 0;
				rc = mc__errno(sp->ctx, MC_ERR_IO, "cannot read (did it shrink?)", path);
				break;
			}
			got += (size_t)r;
		}
		if (rc != MC_OK)
			break;
		if (hash != NULL)
			crypto_generichash_update(&gs, sp->buf, want);
		if (sha != NULL)
			crypto_hash_sha256_update(&ss, sp->buf, want);
		left -= want;
		if (compress)
			rc = mc__zenc_run(sp->z, sp->buf, want, left == 0, spool_out, sp);
	}
	close(fd);
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
	unsigned char hash[MC_HASH_BYTES], sha[32];
	const struct mc_type *t;
	size_t idx;
	int fd, rc, added, want_sha;

	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if (size > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s: %llu bytes is over the per-artifact cap of "
			       "%llu", path, (unsigned long long)size,
			       (unsigned long long)w->ctx->max_artifact_bytes);
	want_sha = (t->flags & MC_TYPE_WANTS_SHA256) != 0;
	/* Contents are hashed and compressed at save, on the worker threads, reading each
	 * once. A type that needs the SHA-256 for its destination gets it here (the save
	 * computes it again, to notice a change); a blob's layout needs the hash now. */
	if (want_sha || object_out != NULL) {
		struct spool rd;

		memset(&rd, 0, sizeof rd);
		rd.ctx = w->ctx;
		rd.fd = -1;
		rc = read_source(&rd, path, offset, size, object_out != NULL ? hash : NULL,
				 want_sha ? sha : NULL, 0);
		free(rd.buf);
		if (rc != MC_OK)
			return rc;
	} else {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return mc__errno(w->ctx, MC_ERR_IO, "cannot open", path);
		close(fd);
	}
	if (object_out == NULL) {
		if ((rc = new_object(w)) != MC_OK)
			return rc;
		idx = w->nobjs;
		if ((w->objs[idx].path = source_path(w, idx, path)) == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->objs[idx].offset = offset;
		w->objs[idx].size = size;
		w->objs[idx].pending = 1;
		w->objs[idx].check_sha = want_sha;
		if (want_sha)
			memcpy(w->objs[idx].sha256, sha, sizeof sha);
		w->nobjs++;
		return add_artifact(w, type, key, idx, want_sha ? sha : NULL);
	}
	if ((rc = intern_object(w, hash, size, &idx, &added)) != MC_OK)
		return rc;
	if (added) {
		if ((w->objs[idx].path = source_path(w, idx, path)) == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		w->objs[idx].offset = offset;
	}
	if (object_out != NULL)
		*object_out = idx;
	return add_artifact(w, type, key, idx, want_sha ? sha : NULL);
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
mc_writer_add_torch_blob(mc_writer *w, const char *path)
{
	struct mc_tb tb;
	size_t i, obj, g;
	int rc;

	if (w == NULL || path == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__torch_blob_parse(w->ctx, path, &tb)) != MC_OK)
		return rc;
	free_groups(w);
	if (tb.ngroups > 0 && (w->groups = calloc(tb.ngroups, sizeof *w->groups)) == NULL) {
		mc__torch_blob_free(&tb);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	w->ngroups = tb.ngroups;
	for (g = 0; g < tb.ngroups; g++)
		if ((w->groups[g].type = mc__strdup(tb.gtypes[g])) == NULL) {
			mc__torch_blob_free(&tb);
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		}
	for (i = 0; i < tb.nitems; i++) {
		struct mc_tb_item *it = &tb.items[i];
		struct mc_mgroup *grp = &w->groups[it->group];
		struct mc_mentry *e;

		rc = mc__writer_add_range(w, it->type, it->key, path, it->offset, it->size, &obj);
		if (rc != MC_OK) {
			char msg[MC_ERRBUF];
			snprintf(msg, sizeof msg, "%s", w->ctx->err);
			mc__err(w->ctx, rc, "%s: artifact %zu: %s", path, i + 1, msg);
			break;
		}
		e = realloc(grp->entries, (grp->nentries + 1) * sizeof *e);
		if (e == NULL) {
			rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		grp->entries = e;
		e[grp->nentries].object = obj;
		if ((e[grp->nentries].key = mc__strdup(it->key)) == NULL) {
			rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		grp->nentries++;
	}
	if (rc == MC_OK && tb.env_torch_key != NULL)
		rc = mc_writer_set_label(w, "vllm.torch_key", tb.env_torch_key);
	if (rc == MC_OK && tb.env_aot_key != NULL && mc__label_value_ok(tb.env_aot_key))
		rc = mc_writer_set_label(w, "vllm.aot_key", tb.env_aot_key);
	/* Only the current format's groups are a layout export can reproduce. */
	if (!tb.layout)
		w->only_blob = 0;
	mc__torch_blob_free(&tb);
	w->nsources++;
	return rc;
}

int
mc_writer_set_label(mc_writer *w, const char *key, const char *value)
{
	struct mc_label *l;
	size_t i;
	char *v;

	if (w == NULL || key == NULL || value == NULL)
		return MC_ERR_INVALID;
	if (!mc__label_key_ok(key))
		return mc__err(w->ctx, MC_ERR_INVALID, "label name '%.64s' is not 1-64 of [A-Za-z0-9_.-]",
			       key);
	if (!mc__label_value_ok(value))
		return mc__err(w->ctx, MC_ERR_INVALID, "label %s: value must be printable UTF-8 of at "
			       "most 1024 bytes", key);
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
	struct wart *a;

	if (w->narts == 0)
		return;
	a = &w->arts[--w->narts];
	w->total -= w->objs[a->obj].size; /* its strings stay in the arena until the end */
}

const unsigned char *
mc__writer_last_sha256(const mc_writer *w)
{
	return w->narts > 0 && w->arts[w->narts - 1].has_sha256 ? w->arts[w->narts - 1].sha256 : NULL;
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

static int
art_cmp(const void *x, const void *y)
{
	const struct wart *a = x, *b = y;
	int c = strcmp(a->type, b->type);

	if (c == 0)
		c = strcmp(a->key, b->key);
	if (c == 0)
		c = a->seq < b->seq ? -1 : a->seq > b->seq;
	return c;
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

/* What the save renders the manifest from: the writer's records, not copies. */
struct saveview {
	mc_writer *w;
	uint32_t *uniq;  /* per manifest artifact: the last record of its (type, key) */
	uint32_t *order; /* per manifest object: its record, in hash order */
};

static void
view_artifact(void *ud, size_t i, struct mc_martifact *out)
{
	const struct saveview *v = ud;
	const struct wart *a = &v->w->arts[v->uniq[i]];
	const struct wobj *o = &v->w->objs[v->w->objs[a->obj].canon];

	memset(out, 0, sizeof *out);
	out->type = a->type;
	out->key = a->key;
	out->size = o->size;
	out->sha256 = a->has_sha256 ? a->sha256 : NULL;
	out->object = o->out_index;
}

static void
view_object(void *ud, size_t i, struct mc_mobject *out)
{
	const struct saveview *v = ud;
	const struct wobj *o = &v->w->objs[v->order[i]];
	int stored = v->w->level > 0; /* else every object is stored as is */

	memset(out, 0, sizeof *out);
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
	unsigned char *buf;
	uint64_t left = o->size;
	int fd, rc = MC_OK;

	if (o->data != NULL) {
		*done += o->size;
		return o->size > 0 ? fn(ud, o->data, (size_t)o->size) : MC_OK;
	}
	if ((fd = open(o->path, O_RDONLY | O_CLOEXEC)) < 0)
		return mc__errno(w->ctx, MC_ERR_IO, "cannot open", o->path);
	if ((buf = malloc(MC_IO_CHUNK)) == NULL) {
		close(fd);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	crypto_generichash_init(&gs, NULL, 0, sizeof hash);
	while (rc == MC_OK && left > 0) {
		size_t want = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		ssize_t r = pread(fd, buf, want, (off_t)(o->offset + o->size - left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = 0;
			rc = mc__errno(w->ctx, MC_ERR_IO, "cannot read (did it shrink?)", o->path);
			break;
		}
		crypto_generichash_update(&gs, buf, (size_t)r);
		rc = fn(ud, buf, (size_t)r);
		left -= (uint64_t)r;
		*done += (uint64_t)r;
		mc__progress(w->ctx, "pack", *done, total);
	}
	free(buf);
	close(fd);
	crypto_generichash_final(&gs, hash, sizeof hash);
	if (rc == MC_OK && memcmp(hash, o->hash, MC_HASH_BYTES) != 0)
		rc = mc__err(w->ctx, MC_ERR_IO, "%s: content changed while packing", o->path);
	return rc;
}

static int
emit_out(void *ud, const unsigned char *buf, size_t n)
{
	return mc__emit_data(ud, buf, n);
}

/* ---- the save's first pass, on the worker threads ----
 * Each used object is read once: hashed (its hash is known only now for most) and
 * compressed into the worker's spool file. */

static int
pass_item(void *ud, unsigned worker, mc_ctx *wctx, size_t k)
{
	struct pass *p = ud;
	mc_writer *w = p->w;
	struct spool *sp = &p->sp[worker];
	struct wobj *o = &w->objs[p->items[k]];
	unsigned char hash[MC_HASH_BYTES];
	uint64_t done;
	int rc;

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
	o->spool = worker;
	o->spool_off = sp->len;
	crypto_generichash_init(&sp->gs, NULL, 0, MC_HASH_BYTES);
	if (o->data != NULL) {
		memcpy(hash, o->hash, sizeof hash);
		rc = w->level > 0 ? mc__zenc_run(sp->z, o->data, (size_t)o->size, 1, spool_out, sp)
				  : MC_OK;
	} else {
		unsigned char sha[32];
		rc = read_source(sp, o->path, o->offset, o->size, hash, o->check_sha ? sha : NULL,
				 w->level > 0);
		if (rc == MC_OK && o->check_sha && memcmp(sha, o->sha256, sizeof sha) != 0)
			rc = mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", o->path);
	}
	if (rc != MC_OK)
		return rc;
	if (o->pending) {
		memcpy(o->hash, hash, sizeof hash);
		o->pending = 0;
	} else if (memcmp(hash, o->hash, sizeof hash) != 0) {
		return mc__err(wctx, MC_ERR_IO, "%s: content changed while packing", o->path);
	}
	o->encoding = MC_ENC_NONE;
	o->stored_size = o->size;
	memcpy(o->stored_hash, o->hash, MC_HASH_BYTES);
	if (w->level > 0) {
		if (sp->len - o->spool_off < o->size) {
			o->encoding = MC_ENC_ZSTD;
			o->stored_size = sp->len - o->spool_off;
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

/* After the first pass: objects with equal contents become one, the first recorded
 * (so the choice does not depend on the workers). canon[i] for every used object. */
static int
dedup(mc_writer *w, const char *used)
{
	size_t cap = 1024, i, *t;

	while (cap < w->nobjs * 2 + 2)
		cap *= 2;
	if ((t = calloc(cap, sizeof *t)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->nobjs; i++) {
		size_t s;
		if (!used[i])
			continue;
		w->objs[i].canon = i;
		for (s = slot_of(w->objs[i].hash, cap); t[s] != 0; s = (s + 1) & (cap - 1))
			if (memcmp(w->objs[t[s] - 1].hash, w->objs[i].hash, MC_HASH_BYTES) == 0) {
				w->objs[i].canon = t[s] - 1;
				break;
			}
		if (t[s] == 0)
			t[s] = i + 1;
	}
	free(t);
	return MC_OK;
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
	struct saveview view = {w, NULL, NULL};
	struct hashpref *hp = NULL;
	unsigned char prehash[MC_SIG_PREHASH], again[MC_SIG_PREHASH];
	size_t i, j, nuniq = 0, nsig = 0, nitems = 0;
	char **sigtxt = NULL;
	size_t *siglen = NULL;
	uint64_t jlen = 0, again_len = 0;
	char (*sigid)[17] = NULL;
	uint64_t done = 0, total = 0, spare = 0;
	struct pass pass;
	unsigned nworkers = mc__threads(w->ctx), k;
	mc_emit *e = NULL;
	int rc = MC_OK;
	char *used = NULL;

	if (w == NULL || path == NULL)
		return MC_ERR_INVALID;
	memset(&m, 0, sizeof m);
	memset(&pass, 0, sizeof pass);
	if (w->narts > UINT32_MAX - 1 || w->nobjs > UINT32_MAX - 1)
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %lu artifacts",
			       (unsigned long)UINT32_MAX - 1);
	/* Artifacts sorted by (type, key); for a repeated pair the last recorded wins. */
	if (w->narts > 1)
		qsort(w->arts, w->narts, sizeof *w->arts, art_cmp);
	if ((view.uniq = malloc((w->narts + 1) * sizeof *view.uniq)) == NULL ||
	    (used = calloc(w->nobjs + 1, 1)) == NULL ||
	    (pass.items = malloc((w->nobjs + 1) * sizeof *pass.items)) == NULL ||
	    (pass.sp = calloc(nworkers, sizeof *pass.sp)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (k = 0; k < nworkers; k++)
		pass.sp[k].fd = -1;
	for (i = 0; i < w->narts; i = j) {
		for (j = i + 1; j < w->narts && strcmp(w->arts[j].type, w->arts[i].type) == 0 &&
				strcmp(w->arts[j].key, w->arts[i].key) == 0;
		     j++)
			;
		used[w->arts[j - 1].obj] = 1;
	}
	if (w->only_blob && w->nsources == 1)
		for (i = 0; i < w->ngroups; i++)
			for (j = 0; j < w->groups[i].nentries; j++)
				used[w->groups[i].entries[j].object] = 1;
	/* The first pass: every used object read once, hashed and compressed. */
	for (i = 0; i < w->nobjs; i++)
		if (used[i] && (w->level > 0 || w->objs[i].pending)) {
			pass.items[nitems++] = i;
			pass.total += w->objs[i].size;
		}
	pass.w = w;
	pass.path = path;
	if ((rc = mc__parallel(w->ctx, nitems, nworkers, pass_item, &pass)) != MC_OK ||
	    (rc = dedup(w, used)) != MC_OK)
		goto out;
	done = atomic_load(&pass.done);
	for (i = 0; i < w->narts; i = j) {
		int differ = 0;

		for (j = i + 1; j < w->narts && strcmp(w->arts[j].type, w->arts[i].type) == 0 &&
				strcmp(w->arts[j].key, w->arts[i].key) == 0;
		     j++)
			differ |= memcmp(w->objs[w->arts[j].obj].hash, w->objs[w->arts[i].obj].hash,
					 MC_HASH_BYTES) != 0;
		if (differ && w->conflict != NULL)
			w->conflict(w->conflict_ud, w->arts[i].type, w->arts[i].key);
		view.uniq[m.nartifacts++] = (uint32_t)(j - 1);
	}
	/* The object table: the kept objects sorted by hash. */
	for (i = 0; i < w->nobjs; i++)
		nuniq += used[i] && w->objs[i].canon == i;
	if ((hp = malloc((nuniq + 1) * sizeof *hp)) == NULL ||
	    (view.order = malloc((nuniq + 1) * sizeof *view.order)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0, j = 0; i < w->nobjs; i++)
		if (used[i] && w->objs[i].canon == i) {
			hp[j].pref = mc__be64(w->objs[i].hash);
			hp[j++].idx = (uint32_t)i;
		}
	if (nuniq > 1)
		qsort(hp, nuniq, sizeof *hp, hashpref_cmp);
	for (i = 0; i < nuniq; i++) { /* equal prefixes: ordered by the whole hash */
		size_t k2 = i;
		uint32_t x = hp[i].idx;
		while (k2 > 0 && hp[k2 - 1].pref == hp[i].pref &&
		       memcmp(w->objs[view.order[k2 - 1]].hash, w->objs[x].hash, MC_HASH_BYTES) > 0) {
			view.order[k2] = view.order[k2 - 1];
			k2--;
		}
		view.order[k2] = x;
	}
	free(hp);
	hp = NULL;
	for (i = 0; i < nuniq; i++) {
		w->objs[view.order[i]].out_index = i;
		total += w->objs[view.order[i]].size;
	}
	m.nobjects = nuniq;
	src.ud = &view;
	src.artifact = view_artifact;
	src.object = view_object;
	m.src = &src;
	if (w->only_blob && w->nsources == 1) {
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
				size_t c = w->objs[w->groups[i].entries[j].object].canon;
				m.groups[i].entries[j].object = w->objs[c].out_index;
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
	if ((rc = write_manifest(w->ctx, &m, NULL, prehash, &jlen)) != MC_OK)
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
	if ((rc = mc__emit_member(e, MC_MEMBER_MANIFEST, jlen)) != MC_OK ||
	    (rc = write_manifest(w->ctx, &m, e, again, &again_len)) != MC_OK)
		goto out;
	if (again_len != jlen || memcmp(again, prehash, sizeof prehash) != 0) {
		rc = mc__err(w->ctx, MC_ERR_INVALID, "%s: the manifest rendered differently twice",
			     path);
		goto out;
	}
	if ((rc = mc__emit_sigs(e, sigtxt, siglen, (const char (*)[17])sigid, nsig)) != MC_OK)
		goto out;
	for (i = 0; i < nuniq && rc == MC_OK; i++) {
		const struct wobj *o = &w->objs[view.order[i]];
		struct mc_mobject mo;
		char name[128];

		view_object(&view, i, &mo);
		mc__object_member(mo.hash, name, sizeof name);
		if ((rc = mc__emit_member(e, name, mo.stored_size)) != MC_OK)
			break;
		if (mo.encoding == MC_ENC_ZSTD)
			rc = copy_spooled(w, e, pass.sp[o->spool].fd, o->spool_off, mo.stored_size);
		else
			rc = read_object(w, o, emit_out, e, w->level > 0 ? &spare : &done, total);
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
	}
	free(pass.sp);
	free(pass.items);
	if (m.groups != NULL)
		for (i = 0; i < m.ngroups; i++)
			free(m.groups[i].entries);
	free(m.groups);
	free(view.uniq);
	free(view.order);
	free(hp);
	free(used);
	for (i = 0; i < nsig; i++)
		free(sigtxt[i]);
	free(sigtxt);
	free(siglen);
	free(sigid);
	return rc;
}
