/*
 * writer.c - the writer's handle and options, and its records of artifacts (from
 * memory, files, torch blobs) and of their contents, each distinct content once.
 *
 * Memory stays small whatever the number of artifacts: the records of objects and
 * artifacts, the artifacts' keys, the sources' paths and contents given in memory go
 * to stores that move to nameless temp files once they pass a few hundred KiB. The
 * save (save.c) sorts them (wsort.c) and writes the bundle.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "write/write.h"

#define LABEL_VALUE_MAX 1024 /* bytes of a label's value (SPEC.md section 3.1) */

/* An object whose hash is known as it is recorded, for deduplication: its index + 1
 * (0 = empty) and the first 4 bytes of its hash. */
struct mc_wslot {
	uint32_t idx1;
	uint32_t pref;
};

int
mc__writer_new(mc_ctx *ctx, mc_writer **out, int saves)
{
	mc_writer *w;
	int rc;

	if (ctx == NULL || out == NULL)
		return MC_ERR_INVALID;
	/* A bundle that could not be written is told before any work for it. */
	if (saves && (rc = mc__emit_ready(ctx)) != MC_OK)
		return rc;
	if ((w = calloc(1, sizeof *w)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	w->ctx = ctx;
	w->level = 3;
	w->version = MC_FORMAT_VERSION;
	w->halg = MC_HALG_SHA256;
	w->only_blob = 1;
	mc__store_init(&w->objs, "object table");
	mc__store_init(&w->arts, "artifact table");
	mc__store_init(&w->keys, "artifact keys");
	mc__store_init(&w->data, "source list");
	*out = w;
	return MC_OK;
}

int
mc_writer_new(mc_ctx *ctx, mc_writer **out)
{
	return mc__writer_new(ctx, out, 1);
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
	mc__strv_free(w->types, w->ntypes);
	for (i = 0; i < w->nlabels; i++) {
		free(w->labels[i].key);
		free(w->labels[i].value);
	}
	free(w->labels);
	mc__strv_free(w->noted, w->nnoted);
	free(w->signers);
	free_groups(w);
	for (i = 0; i < w->nspools; i++)
		mc__wspool_free(w->spools[i]);
	free(w->spools);
	for (i = 0; i < w->ncleanups; i++)
		w->cleanups[i].fn(w->cleanups[i].arg);
	free(w->cleanups);
	free(w);
}

int
mc__writer_adopt(mc_writer *w, void (*fn)(void *), void *arg)
{
	struct mc_wcleanup *c = realloc(w->cleanups, (w->ncleanups + 1) * sizeof *c);

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

int
mc__wobj_get(mc_writer *w, mc_ctx *ctx, uint32_t i, struct mc_wobj *o)
{
	return mc__store_io(ctx, &w->objs, (uint64_t)i * sizeof *o, o, sizeof *o, 0);
}

int
mc__wobj_hash(mc_writer *w, uint32_t i, unsigned char hash[MC_HASH_BYTES])
{
	return mc__store_io(w->ctx, &w->objs,
			    (uint64_t)i * sizeof(struct mc_wobj) + offsetof(struct mc_wobj, hash), hash,
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
slot_put(struct mc_wslot *t, size_t cap, struct mc_wslot e)
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
	struct mc_wslot *t = calloc(cap, sizeof *t);

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
		if ((rc = mc__wobj_hash(w, w->table[s].idx1 - 1, h)) != MC_OK)
			return rc;
		if (memcmp(h, hash, sizeof h) == 0) {
			*idx = w->table[s].idx1 - 1;
			*found = 1;
			return MC_OK;
		}
	}
	return MC_OK;
}

/* Enters object idx, whose hash is known, into the table. */
static int
table_add(mc_writer *w, uint32_t idx, const unsigned char *hash)
{
	struct mc_wslot e;
	int rc;

	if ((w->tused + 1) * 2 > w->tcap && (rc = table_grow(w)) != MC_OK)
		return rc;
	e.idx1 = idx + 1;
	e.pref = hash_pref(hash);
	slot_put(w->table, w->tcap, e);
	w->tused++;
	return MC_OK;
}

/* Records o as object *idx; one whose hash is known goes into the table. */
static int
new_object(mc_writer *w, const struct mc_wobj *o, uint32_t *idx)
{
	int rc;

	if (w->nobjs >= UINT32_MAX - 1)
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %lu objects",
			       (unsigned long)UINT32_MAX - 2);
	if (!(o->flags & MC_WOBJ_PENDING) && (rc = table_add(w, w->nobjs, o->hash)) != MC_OK)
		return rc;
	if ((rc = mc__store_append(w->ctx, &w->objs, o, sizeof *o, NULL)) != MC_OK)
		return rc;
	*idx = w->nobjs++;
	return MC_OK;
}

int
mc__wobj_hashed(mc_writer *w, uint32_t i, const unsigned char hash[MC_HASH_BYTES])
{
	struct mc_wobj o;
	int rc;

	if ((rc = mc__wobj_get(w, w->ctx, i, &o)) != MC_OK || !(o.flags & MC_WOBJ_PENDING))
		return rc;
	memcpy(o.hash, hash, MC_HASH_BYTES);
	o.flags &= (uint8_t)~MC_WOBJ_PENDING;
	if ((rc = mc__store_io(w->ctx, &w->objs, (uint64_t)i * sizeof o, &o, sizeof o, 1)) != MC_OK)
		return rc;
	/* A graph file whose name the save has yet to check is shared with no later one. */
	return (o.flags & MC_WOBJ_NAMED) ? MC_OK : table_add(w, i, hash);
}

/* Stores path as o's source: once for a run of objects from one file (a torch blob). */
static int
source_path(mc_writer *w, struct mc_wobj *o, const char *path)
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

int
mc__wobj_path(mc_writer *w, mc_ctx *ctx, const struct mc_wobj *o, char *buf)
{
	int rc;

	if (o->path_off == MC_WOBJ_IN_DATA) {
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
	     const unsigned char *sha, int executable)
{
	char ekey[MC_KEY_MAX + 1];
	struct mc_wart a;
	int rc;

	if (w->narts >= UINT32_MAX - 1)
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %lu artifacts",
			       (unsigned long)UINT32_MAX - 2);
	/* One entry of torch's guarded caches given by torch's key alone (a blob's, a
	 * caller's) is keyed with its entry, as a scan keys it. */
	if (sha != NULL && mc__entry_key(mc__find_type(w->ctx, type), key, sha, ekey, sizeof ekey))
		key = ekey;
	memset(&a, 0, sizeof a);
	if ((rc = type_index(w, type, &a.type)) != MC_OK)
		return rc;
	a.key_len = (uint32_t)strlen(key);
	if ((rc = mc__store_append(w->ctx, &w->keys, key, a.key_len, &a.key_off)) != MC_OK)
		return rc;
	a.obj = obj;
	a.seq = w->narts;
	a.size = size;
	a.executable = executable != 0;
	a.blob = w->in_blob ? (uint32_t)w->nsources + 1 : 0;
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

/* A key of t that names an entry of torch's guarded caches must name this content,
 * whose SHA-256 is sha (readers refuse it otherwise); a scan, which keys a file by its
 * name, tells of a misnamed one itself. */
static int
entry_check(mc_writer *w, const struct mc_type *t, const char *key, const unsigned char *sha)
{
	if (sha != NULL && !mc__key_entry_ok(t, key, sha))
		return mc__err(w->ctx, MC_ERR_BAD_KEY, "%s key '%.200s': its entry is not the hash "
			       "of its content", t->name, key);
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
mc__writer_add_bytes(mc_writer *w, const char *type, const char *key, const void *data,
		     size_t len, int executable, size_t *object_out)
{
	unsigned char sha[32];
	const struct mc_type *t;
	struct mc_wobj o;
	uint32_t idx;
	int rc, found;

	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if ((uint64_t)len > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s %.200s: %zu bytes is over the per-artifact "
			       "cap", type, key, len);
	memset(&o, 0, sizeof o);
	if (mc__chash(w->halg, o.hash, data, len) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	if ((t->flags & MC_TYPE_WANTS_SHA256) && w->halg == MC_HALG_SHA256)
		memcpy(sha, o.hash, sizeof sha);
	else if ((t->flags & MC_TYPE_WANTS_SHA256) && mc__sha256(sha, data, len) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = entry_check(w, t, key, (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL)) != MC_OK ||
	    (rc = find_object(w, o.hash, &idx, &found)) != MC_OK)
		return rc;
	if (!found) {
		o.size = len;
		o.path_off = MC_WOBJ_IN_DATA;
		if (object_out != NULL) /* a blob's entry: its groups name it */
			o.flags |= MC_WOBJ_PART;
		if ((rc = mc__store_append(w->ctx, &w->data, data, len, &o.offset)) != MC_OK ||
		    (rc = new_object(w, &o, &idx)) != MC_OK)
			return rc;
	}
	if (object_out != NULL)
		*object_out = idx;
	return add_artifact(w, type, key, idx, len, (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL,
			    executable);
}

int
mc_writer_add_memory(mc_writer *w, const char *type, const char *key, const void *data, size_t len)
{
	int rc;

	if (w == NULL || type == NULL || key == NULL || (data == NULL && len > 0))
		return MC_ERR_INVALID;
	if ((rc = mc__writer_add_bytes(w, type, key, data, len, 0, NULL)) != MC_OK)
		return rc;
	w->only_blob = 0;
	w->nsources++;
	return MC_OK;
}

int
mc__writer_add_range(mc_writer *w, const char *type, const char *key, const char *path,
		     uint64_t offset, uint64_t size, unsigned how, size_t *object_out)
{
	unsigned char sha[32];
	const unsigned char *known;
	const struct mc_type *t;
	struct mc_wsource src;
	struct mc_wobj o;
	uint32_t idx;
	int rc, found = 0, want_sha, hashed;

	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if (size > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s: %llu bytes is over the per-artifact cap of "
			       "%llu", path, (unsigned long long)size,
			       (unsigned long long)w->ctx->max_artifact_bytes);
	/* The content hash is needed now by a blob's layout, and by an entry of torch's
	 * guarded caches that no scan named (its key gets or checks its entry); the save
	 * checks it again as it reads. */
	hashed = object_out != NULL || ((t->flags & MC_TYPE_WANTS_SHA256) &&
					 w->halg == MC_HALG_SHA256 && !(how & MC_WADD_NAMED));
	/* Contents are hashed and compressed at save, on the worker threads, reading each
	 * once. In version 1 a type that needs the SHA-256 for its destination gets it here
	 * (the save computes it again, to notice a change); in version 2 it is the content
	 * hash, which the save computes. A blob's layout needs the hash now. */
	want_sha = (t->flags & MC_TYPE_WANTS_SHA256) && w->halg != MC_HALG_SHA256;
	memset(&o, 0, sizeof o);
	/* A content read only at save is opened only there (a file that cannot be opened
	 * fails the save as it would here, naming it). */
	if (want_sha || hashed) {
		struct mc_wread rd;

		if ((rc = mc__wsource_open(w->ctx, &src, w, NULL, path)) != MC_OK)
			return rc;
		memset(&rd, 0, sizeof rd);
		rd.ctx = w->ctx;
		rd.halg = w->halg;
		rc = mc__wsource_digest(&rd, &src, offset, size, hashed ? o.hash : NULL,
					want_sha ? sha : NULL, NULL, NULL);
		free(rd.buf);
		mc__wsource_close(&src);
		if (rc != MC_OK)
			return rc;
	}
	/* The SHA-256 a type wants: read above in version 1; in version 2 the content hash,
	 * known here only where the content was read. */
	known = want_sha ? sha : (t->flags & MC_TYPE_WANTS_SHA256) && hashed ? o.hash : NULL;
	if ((!(how & MC_WADD_NAMED) && (rc = entry_check(w, t, key, known)) != MC_OK) ||
	    (hashed && (rc = find_object(w, o.hash, &idx, &found)) != MC_OK))
		return rc;
	if (!found) {
		o.offset = offset;
		o.size = size;
		o.flags |= object_out != NULL ? MC_WOBJ_PART : hashed ? 0 : MC_WOBJ_PENDING;
		if (want_sha) {
			o.flags |= MC_WOBJ_CHECK_SHA;
			memcpy(o.sha256, sha, sizeof sha);
		}
		if ((how & MC_WADD_NAMED) && w->halg == MC_HALG_SHA256)
			o.flags |= MC_WOBJ_NAMED;
		if ((rc = source_path(w, &o, path)) != MC_OK || (rc = new_object(w, &o, &idx)) != MC_OK)
			return rc;
	}
	if (object_out != NULL)
		*object_out = idx;
	return add_artifact(w, type, key, idx, size, known, (how & MC_WADD_EXEC) != 0);
}

int
mc__writer_spool(mc_writer *w, struct mc_wspool *sp, uint16_t *idx)
{
	struct mc_wspool **v;

	if (w->nspools >= UINT16_MAX) {
		mc__wspool_free(sp);
		return mc__err(w->ctx, MC_ERR_LIMIT, "more than %u spools", UINT16_MAX);
	}
	if ((v = realloc(w->spools, (w->nspools + 1) * sizeof *v)) == NULL) {
		mc__wspool_free(sp);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	w->spools = v;
	*idx = (uint16_t)w->nspools;
	v[w->nspools++] = sp;
	return MC_OK;
}

int
mc__writer_add_spooled(mc_writer *w, const char *type, const char *key, const struct mc_wobj *o,
		       const unsigned char sha[32])
{
	const struct mc_type *t;
	uint32_t idx;
	int rc, found;

	if ((rc = check_artifact(w, type, key, &t)) != MC_OK)
		return rc;
	if (o->size > w->ctx->max_artifact_bytes)
		return mc__err(w->ctx, MC_ERR_LIMIT, "%s %s: %llu bytes is over the per-artifact "
			       "cap of %llu", type, key, (unsigned long long)o->size,
			       (unsigned long long)w->ctx->max_artifact_bytes);
	if (!(o->flags & MC_WOBJ_SPOOLED) || o->spool >= w->nspools)
		return mc__err(w->ctx, MC_ERR_INVALID, "%s %s: not in a spool of the writer's",
			       type, key);
	/* Version 2 compresses contents together in blocks: it reads them as they are. */
	if (w->version == 2 && o->encoding != MC_ENC_NONE)
		return mc__err(w->ctx, MC_ERR_INVALID, "%s %s: spooled compressed, which format "
			       "version 2 does not take", type, key);
	if ((rc = entry_check(w, t, key, (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL)) != MC_OK ||
	    (rc = find_object(w, o->hash, &idx, &found)) != MC_OK ||
	    (!found && (rc = new_object(w, o, &idx)) != MC_OK))
		return rc;
	return add_artifact(w, type, key, idx, o->size,
			    (t->flags & MC_TYPE_WANTS_SHA256) ? sha : NULL, 0);
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
	/* Only the owner's execute bit is recorded: never setuid, setgid or write bits. */
	if ((rc = mc__writer_add_range(w, type, key, path, 0, (uint64_t)st.st_size,
				       (st.st_mode & S_IXUSR) ? MC_WADD_EXEC : 0, NULL)) != MC_OK)
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
	w->in_blob = 1;
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
	w->in_blob = 0;
	w->nsources++;
}

static int
put_label(mc_writer *w, const char *key, const char *value)
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

/* Where key is among the labels a scan set (mc__writer_note_label), not the caller:
 * MC_NO_INDEX when it is not; unnote() takes it off, the caller's now. */
static size_t
noted_index(const mc_writer *w, const char *key)
{
	size_t i;

	for (i = 0; i < w->nnoted; i++)
		if (strcmp(w->noted[i], key) == 0)
			return i;
	return MC_NO_INDEX;
}

static void
unnote(mc_writer *w, const char *key)
{
	size_t i = noted_index(w, key);

	if (i == MC_NO_INDEX)
		return;
	free(w->noted[i]);
	w->noted[i] = w->noted[--w->nnoted];
}

int
mc_writer_set_label(mc_writer *w, const char *key, const char *value)
{
	int rc = put_label(w, key, value);

	/* the caller's value, which a scan leaves as it is */
	if (rc == MC_OK)
		unnote(w, key);
	return rc;
}

static const char *
label_value(const mc_writer *w, const char *key)
{
	size_t i;

	for (i = 0; i < w->nlabels; i++)
		if (strcmp(w->labels[i].key, key) == 0)
			return w->labels[i].value;
	return NULL;
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The n values v sorted, each once, joined with ',' into buf (LABEL_VALUE_MAX + 1 bytes)
 * as far as they fit: the values that sort first are kept. */
static void
join_values(char **v, size_t n, char *buf)
{
	size_t i, at = 0, k;

	qsort(v, n, sizeof *v, str_cmp);
	for (i = 0; i < n; i++) {
		if (i > 0 && strcmp(v[i], v[i - 1]) == 0)
			continue;
		k = strlen(v[i]);
		if (at + (at > 0) + k > LABEL_VALUE_MAX)
			break;
		if (at > 0)
			buf[at++] = ',';
		memcpy(buf + at, v[i], k);
		at += k;
	}
	buf[at] = '\0';
}

int
mc__writer_note_label(mc_writer *w, const char *key, const char *value)
{
	const char *old = label_value(w, key);
	char *copy, *c, **v, buf[LABEL_VALUE_MAX + 1];
	size_t n = 1, i;

	if (value[0] == '\0' || strchr(value, ',') != NULL || strlen(value) > LABEL_VALUE_MAX)
		return mc__err(w->ctx, MC_ERR_INVALID, "label %s: a value found is empty, holds a "
			       "',' or is longer than %d bytes", key, LABEL_VALUE_MAX);
	if (old != NULL && noted_index(w, key) == MC_NO_INDEX)
		return MC_OK; /* the caller's */
	if ((copy = mc__strdup(old != NULL ? old : "")) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (c = copy; *c != '\0'; c++)
		n += *c == ',';
	if ((v = malloc((n + 1) * sizeof *v)) == NULL) {
		free(copy);
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	}
	/* the values found before, then this one */
	n = 0;
	for (c = copy; old != NULL; c++) {
		v[n++] = c;
		if ((c = strchr(c, ',')) == NULL)
			break;
		*c = '\0';
	}
	v[n++] = (char *)value;
	join_values(v, n, buf);
	free(v);
	free(copy);
	i = noted_index(w, key);
	if (i == MC_NO_INDEX &&
	    (mc__grow(&w->noted, &w->capnoted, w->nnoted + 1, sizeof *w->noted) != MC_OK ||
	     (w->noted[w->nnoted] = mc__strdup(key)) == NULL))
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	if (i == MC_NO_INDEX)
		w->nnoted++;
	return put_label(w, key, buf);
}

int
mc_writer_set_bundle_version(mc_writer *w, uint64_t version)
{
	if (w == NULL || version > MC_JSON_INT_MAX)
		return MC_ERR_INVALID;
	w->bundle_version = version;
	return MC_OK;
}

int
mc_writer_set_expires(mc_writer *w, int64_t t)
{
	if (w == NULL || t < 0 || t > (int64_t)MC_JSON_INT_MAX)
		return MC_ERR_INVALID;
	w->expires = t;
	return MC_OK;
}

int
mc_writer_set_created(mc_writer *w, int64_t t)
{
	if (w == NULL || t < 0 || t > (int64_t)MC_JSON_INT_MAX)
		return MC_ERR_INVALID;
	w->created = t;
	return MC_OK;
}

int
mc_writer_set_format_version(mc_writer *w, int version)
{
	if (w == NULL || (version != 1 && version != MC_FORMAT_VERSION) || w->nobjs > 0 ||
	    w->narts > 0)
		return MC_ERR_INVALID;
	w->version = version;
	w->halg = version == 1 ? MC_HALG_BLAKE2B : MC_HALG_SHA256;
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

/* Rewrites the artifact table: keep(w, i, &a, arg, &drop) sees each artifact in the
 * order recorded (and may change it); those it drops are taken back. With rekey the
 * keys are copied again in the order recorded, as the sort reads them: a key keep
 * gives (appended to w->keys) takes its artifact's place. */
static int
rewrite_arts(mc_writer *w, int (*keep)(mc_writer *, uint32_t, struct mc_wart *, void *, int *),
	     void *arg, int rekey)
{
	struct mc_store arts, keys;
	struct mc_sreader r;
	struct mc_wart a;
	char key[MC_KEY_MAX];
	uint32_t i, n = 0;
	uint64_t total = 0;
	int rc, drop;

	mc__store_init(&arts, "artifact table");
	mc__store_init(&keys, "artifact keys");
	rc = mc__sreader_init(w->ctx, &r, &w->arts, 0, mc__store_size(&w->arts), MC_WSORT_READ);
	for (i = 0; rc == MC_OK && i < w->narts; i++) {
		drop = 0;
		if ((rc = mc__sreader_get(w->ctx, &r, &a, sizeof a)) != MC_OK ||
		    (rc = keep(w, i, &a, arg, &drop)) != MC_OK || drop)
			continue;
		if (rekey &&
		    ((rc = mc__store_io(w->ctx, &w->keys, a.key_off, key, a.key_len, 0)) != MC_OK ||
		     (rc = mc__store_append(w->ctx, &keys, key, a.key_len, &a.key_off)) != MC_OK))
			break;
		a.seq = n++; /* the sort's "last recorded wins" needs seq to grow with the place */
		total += a.size;
		rc = mc__store_append(w->ctx, &arts, &a, sizeof a, NULL);
	}
	free(r.buf);
	if (rc != MC_OK) {
		mc__store_free(&arts);
		mc__store_free(&keys);
		return rc;
	}
	/* The blob's groups name objects that may be gone now: no layout to keep. */
	if (n < w->narts)
		w->only_blob = 0;
	w->has_last = 0;
	mc__store_free(&w->arts);
	w->arts = arts;
	if (rekey) {
		mc__store_free(&w->keys);
		w->keys = keys;
	}
	w->narts = n;
	w->total = total;
	return MC_OK;
}

static int
drop_gone(mc_writer *w, uint32_t i, struct mc_wart *a, void *gone, int *drop)
{
	*drop = ((const unsigned char *)gone)[i] != 0;
	return MC_OK;
}

int
mc__writer_drop(mc_writer *w, const unsigned char *gone)
{
	return rewrite_arts(w, drop_gone, (void *)gone, 0);
}

void
mc__writer_set_scan(mc_writer *w, mc_scan_fn fn, void *ud)
{
	w->scan_fn = fn;
	w->scan_ud = ud;
}

/* The path, relative to its cache dir, of the source of a's object o, a misnamed
 * graph file: as many of its last components as the type's destination has. */
static int
misnamed_rel(mc_writer *w, const struct mc_wart *a, const struct mc_wobj *o, char *path,
	     const char **rel)
{
	char dest[MC_PATH_MAX], key[MC_KEY_MAX + 1];
	const char *d;
	size_t n = 1;
	int rc;

	if ((rc = mc__store_io(w->ctx, &w->keys, a->key_off, key, a->key_len, 0)) != MC_OK ||
	    (rc = mc__wobj_path(w, w->ctx, o, path)) != MC_OK)
		return rc;
	key[a->key_len] = '\0';
	if ((rc = mc__dest_for(w->ctx, mc__find_type(w->ctx, w->types[a->type]), key, o->hash,
			       dest, sizeof dest)) != MC_OK)
		return rc;
	for (d = dest; *d != '\0'; d++)
		n += *d == '/';
	for (*rel = path + strlen(path); *rel > path; (*rel)--)
		if ((*rel)[-1] == '/' && --n == 0)
			break;
	return MC_OK;
}

/* What mc__writer_misnamed did, told (and the objects of those kept as "extra" no
 * longer checked by name) only once the new table is in place. */
struct mnote {
	uint32_t obj, gone;
	uint64_t rel_off;
	uint32_t rel_len;
};

struct mlog {
	struct mnote *v;
	size_t n, cap;
	struct mc_store rels;
};

/* Artifact a, whose object o is a misnamed graph file: either gone or (keep_unknown)
 * made type "extra" at its path; noted in log. */
static int
misnamed_one(mc_writer *w, struct mc_wart *a, const struct mc_wobj *o, struct mlog *log,
	     int *gone)
{
	char path[MC_PATH_MAX];
	const struct mc_type *t;
	struct mnote *m;
	const char *rel;
	int rc;

	if ((rc = misnamed_rel(w, a, o, path, &rel)) != MC_OK)
		return rc;
	if (mc__grow(&log->v, &log->cap, log->n + 1, sizeof *log->v) != MC_OK)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	m = &log->v[log->n];
	m->obj = a->obj;
	m->rel_len = (uint32_t)strlen(rel);
	if ((rc = mc__store_append(w->ctx, &log->rels, rel, m->rel_len, &m->rel_off)) != MC_OK)
		return rc;
	log->n++;
	*gone = !w->keep_unknown || check_artifact(w, "extra", rel, &t) != MC_OK;
	m->gone = (uint32_t)*gone;
	if (*gone)
		return MC_OK;
	a->key_len = m->rel_len;
	a->has_sha256 = 0;
	if ((rc = type_index(w, "extra", &a->type)) != MC_OK)
		return rc;
	return mc__store_append(w->ctx, &w->keys, rel, a->key_len, &a->key_off);
}

static int
drop_misnamed(mc_writer *w, uint32_t i, struct mc_wart *a, void *log, int *drop)
{
	const struct mc_type *t = mc__find_type(w->ctx, w->types[a->type]);
	struct mc_wobj o;
	int rc;

	if (t == NULL || !(t->flags & MC_TYPE_WANTS_SHA256))
		return MC_OK;
	if ((rc = mc__wobj_get(w, w->ctx, a->obj, &o)) != MC_OK || !(o.flags & MC_WOBJ_MISNAMED))
		return rc;
	return misnamed_one(w, a, &o, log, drop);
}

/* Tells the scan of each file noted, and marks the objects of those kept as "extra"
 * checked. */
static int
misnamed_told(mc_writer *w, const struct mlog *log)
{
	char rel[MC_PATH_MAX];
	struct mc_wobj o;
	size_t i;
	int rc;

	for (i = 0; i < log->n; i++) {
		const struct mnote *m = &log->v[i];
		if ((rc = mc__store_io(w->ctx, &log->rels, m->rel_off, rel, m->rel_len, 0)) !=
		    MC_OK)
			return rc;
		rel[m->rel_len] = '\0';
		if (!m->gone) {
			if ((rc = mc__wobj_get(w, w->ctx, m->obj, &o)) != MC_OK)
				return rc;
			o.flags &= (uint8_t)~(MC_WOBJ_NAMED | MC_WOBJ_MISNAMED);
			if ((rc = mc__store_io(w->ctx, &w->objs, (uint64_t)m->obj * sizeof o, &o,
					       sizeof o, 1)) != MC_OK)
				return rc;
		}
		if (w->scan_fn != NULL)
			w->scan_fn(w->scan_ud, m->gone ? MC_SCAN_SKIPPED : MC_SCAN_RECORDED, rel,
				   m->gone ? "file name is not the hash of its content" : "extra");
	}
	return MC_OK;
}

int
mc__writer_misnamed(mc_writer *w, size_t *n)
{
	struct mlog log;
	int rc;

	memset(&log, 0, sizeof log);
	mc__store_init(&log.rels, "misnamed files");
	if ((rc = rewrite_arts(w, drop_misnamed, &log, 1)) == MC_OK)
		rc = misnamed_told(w, &log);
	*n = log.n;
	free(log.v);
	mc__store_free(&log.rels);
	return rc;
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

size_t
mc_writer_saved_count(const mc_writer *w)
{
	return w == NULL ? 0 : w->saved_narts;
}

uint64_t
mc_writer_saved_bytes(const mc_writer *w)
{
	return w == NULL ? 0 : w->saved_total;
}

