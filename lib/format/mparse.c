/*
 * mparse.c - the strict parser of a manifest, for the reader: it refuses anything the
 * writer (mrender.c) would not produce. A manifest read from a file keeps its tables
 * in temp files, so that a large one is never held whole.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format/format.h"

#define BAD(...) mc__err(ctx, MC_ERR_MANIFEST, __VA_ARGS__)
#define DOC MC_DOC(ctx)

/* Appends n bytes to one of a spilled table's temp files. */
static int
temp_write(mc_ctx *ctx, int fd, const void *p, size_t n, const char *what)
{
	if (n > 0 && mc__write_all(fd, p, n) != 0)
		return mc__err(ctx, MC_ERR_IO, "cannot write the %s's temporary file: %s", what,
			       strerror(errno));
	return MC_OK;
}

static int
check_members(mc_ctx *ctx, const cJSON *o, const char *what, const char *const *allowed)
{
	const cJSON *c, *d;
	size_t i;

	if (!cJSON_IsObject(o))
		return BAD("%s: %s is not an object", DOC, what);
	for (c = o->child; c != NULL; c = c->next) {
		int known = 0;
		for (i = 0; allowed[i] != NULL; i++) {
			const char *a = allowed[i][0] == '!' ? allowed[i] + 1 : allowed[i];
			if (strcmp(a, c->string) == 0)
				known = 1;
		}
		if (!known)
			return BAD("%s: %s has unknown field '%.64s'", DOC, what, c->string);
		for (d = c->next; d != NULL; d = d->next)
			if (strcmp(c->string, d->string) == 0)
				return BAD("%s: %s has field '%.64s' twice", DOC, what, c->string);
	}
	for (i = 0; allowed[i] != NULL; i++)
		if (allowed[i][0] == '!' && cJSON_GetObjectItemCaseSensitive(o, allowed[i] + 1) == NULL)
			return BAD("%s: %s lacks field '%s'", DOC, what, allowed[i] + 1);
	return MC_OK;
}

static int
get_uint(mc_ctx *ctx, const cJSON *o, const char *name, const char *what, uint64_t *v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);
	double d;

	if (n == NULL) {
		*v = 0;
		return MC_OK;
	}
	if (!cJSON_IsNumber(n))
		return BAD("%s: %s.%s is not a number", DOC, what, name);
	d = n->valuedouble;
	if (!isfinite(d) || d < 0 || d > (double)MC_JSON_INT_MAX || floor(d) != d)
		return BAD("%s: %s.%s is not an integer in 0..2^53-1", DOC, what, name);
	if (n->valuestring != NULL) /* a number not in plain digits: its text (mjson.c) */
		return BAD("%s: %s.%s is not an integer in plain decimal digits ('%s')", DOC, what,
			   name, n->valuestring);
	*v = (uint64_t)d;
	return MC_OK;
}

static int
get_str(mc_ctx *ctx, const cJSON *o, const char *name, const char *what, const char **v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsString(n) || n->valuestring == NULL)
		return BAD("%s: %s.%s is not a string", DOC, what, name);
	*v = n->valuestring;
	return MC_OK;
}

static int
hash_field(mc_ctx *ctx, const char *s, const char *what, unsigned char out[32])
{
	if (mc__unhex(s, out, 32) != 0) /* 64 digits, each lower-case hex, or refused */
		return BAD("%s: %s is not 64 lower-case hex digits", DOC, what);
	return MC_OK;
}

static int
type_name_ok(const char *t)
{
	size_t n = strlen(t), i;

	if (n == 0 || n > MC_TYPE_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_'))
			return 0;
	return 1;
}

static int
key_text_ok(const char *k)
{
	size_t n = strlen(k);

	return n > 0 && n <= MC_KEY_MAX;
}

/* ---- entries in the writer's own form ----
 * An entry exactly as mrender.c writes it (members in the tables' order, no white
 * space, strings without escapes, integers in plain digits) is read straight from the
 * text; any other goes through cJSON and check_members, get_str and get_uint. Both end
 * in the same checks, so they give the same verdict on an entry in the writer's form. */

struct fcur {
	const char *p, *end;
};

/* Passes the literal lit. */
static int
f_lit(struct fcur *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
		return 0;
	c->p += n;
	return 1;
}

/* A string's bytes up to its closing quote (passed), into buf: none may be a backslash
 * (an escape: the tree reads it), and they must fit with the NUL. */
static int
f_str(struct fcur *c, char *buf, size_t cap)
{
	const char *q = memchr(c->p, '"', (size_t)(c->end - c->p));
	size_t n;

	if (q == NULL || (n = (size_t)(q - c->p)) >= cap || memchr(c->p, '\\', n) != NULL)
		return 0;
	memcpy(buf, c->p, n);
	buf[n] = '\0';
	c->p = q + 1;
	return 1;
}

/* An integer in its one form: plain digits, no leading zero, at most 2^53-1. */
static int
f_uint(struct fcur *c, uint64_t *v)
{
	const char *s = c->p;
	uint64_t x = 0;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && c->p - s < 16) {
		x = x * 10 + (uint64_t)(*c->p - '0');
		c->p++;
	}
	if (c->p == s || (*s == '0' && c->p - s > 1) || x > MC_JSON_INT_MAX ||
	    (c->p < c->end && *c->p >= '0' && *c->p <= '9'))
		return 0;
	*v = x;
	return 1;
}

/* "name[idx]" into what (at least 48 bytes): how messages name a table's entry, made
 * for every entry, so without printf. */
static void
entry_name(char *what, const char *name, size_t idx)
{
	size_t n = strlen(name);

	memcpy(what, name, n);
	what[n++] = '[';
	n += mc__utoa(what + n, idx);
	what[n++] = ']';
	what[n] = '\0';
}

/* The object with this content hash: *idx, or MC_NO_INDEX when there is none; *o gets
 * its record. In format version 2, where a content may be stored twice, the first. */
static int
find_object(mc_ctx *ctx, const struct mc_manifest *m, const unsigned char hash[32], size_t *idx,
	    struct mc_mobject *o)
{
	size_t lo = 0, hi = m->nobjects;
	uint64_t want = mc__be64(hash);
	int rc;

	*idx = MC_NO_INDEX;
	/* The first entry whose hash prefix is not below this one's (the prefixes lie
	 * close together, the records may be in a temp file); equal prefixes are told
	 * apart by their records. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->oprefix[mid] < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < m->nobjects && m->oprefix[lo] == want; lo++) {
		size_t at = m->oorder != NULL ? m->oorder[lo] : lo;
		if ((rc = mc__mobjects(ctx, m, at, 1, o)) != MC_OK)
			return rc;
		if (memcmp(o->hash, hash, 32) == 0) {
			*idx = at;
			return MC_OK;
		}
	}
	return MC_OK;
}

/* One entry of the object table: sorted strictly by content hash, stored bytes
 * described exactly. */
struct obj_walk {
	struct mc_manifest *m;
	unsigned char prev[MC_HASH_BYTES]; /* the hash of the entry before */
	struct mc_mobject *buf;            /* spilled: records not yet written */
	size_t nbuf;
};

#define OBJ_BUF 512

/* Writes the records waiting in w->buf to the table's temp file. */
static int
obj_flush(mc_ctx *ctx, struct obj_walk *w)
{
	int rc = temp_write(ctx, w->m->objfd, w->buf, w->nbuf * sizeof *w->buf, "object table");

	w->nbuf = 0;
	return rc;
}

/* An object entry's members, as the text has them. */
struct obj_in {
	const char *hash, *encoding, *stored_hash;
	uint64_t size, stored_size;
};

/* Object idx's record kept: in the table, or for a spilled one in its temp file. */
static int
obj_keep(mc_ctx *ctx, struct obj_walk *w, size_t idx, const struct mc_mobject *rec)
{
	struct mc_manifest *m = w->m;
	int rc;

	m->oprefix[idx] = mc__be64(rec->hash);
	if (!m->ospilled) {
		m->objects[idx] = *rec;
	} else {
		w->buf[w->nbuf++] = *rec;
		if (w->nbuf == OBJ_BUF && (rc = obj_flush(ctx, w)) != MC_OK)
			return rc;
	}
	m->nobjects++;
	return MC_OK;
}

/* The checks on an object entry's members, and the entry kept. */
static int
obj_finish(mc_ctx *ctx, struct obj_walk *w, size_t idx, const struct obj_in *in)
{
	struct mc_mobject rec, *o = &rec;
	char what[48];
	int rc;

	memset(&rec, 0, sizeof rec); /* padding too: records go to a file */
	entry_name(what, "objects", idx);
	o->size = in->size;
	o->stored_size = in->stored_size;
	if ((rc = hash_field(ctx, in->hash, what, o->hash)) != MC_OK ||
	    (rc = hash_field(ctx, in->stored_hash, what, o->stored_hash)) != MC_OK)
		return rc;
	if (strcmp(in->encoding, "zstd") == 0) {
		o->encoding = MC_ENC_ZSTD;
	} else if (strcmp(in->encoding, "none") == 0) {
		o->encoding = MC_ENC_NONE;
		if (o->stored_size != o->size || memcmp(o->stored_hash, o->hash, 32) != 0)
			return BAD("%s: %s is stored as is but its stored size or hash differs", DOC,
				   what);
	} else {
		return BAD("%s: %s has unknown encoding '%.20s'", DOC, what, in->encoding);
	}
	if (o->size > ctx->max_artifact_bytes || o->stored_size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s is over the per-artifact cap of %llu "
			       "bytes", DOC, what, (unsigned long long)ctx->max_artifact_bytes);
	/* Decompression stops at the declared size; the declared size itself is
	 * bounded by the stored size, so a small bundle cannot fill a disk. */
	if (o->encoding == MC_ENC_ZSTD && mc__over_expansion(o->size, o->stored_size,
							     ctx->max_expansion))
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s expands %llu bytes to %llu, more "
			       "than the expansion cap of %llu", DOC, what,
			       (unsigned long long)o->stored_size, (unsigned long long)o->size,
			       (unsigned long long)ctx->max_expansion);
	if (idx > 0 && memcmp(w->prev, o->hash, 32) >= 0)
		return BAD("%s: objects not sorted by hash, or repeated, at %s", DOC, what);
	memcpy(w->prev, o->hash, 32);
	return obj_keep(ctx, w, idx, &rec);
}

/* A format version 2 object entry: its content's hash and size, in the blocks' order. */
static int
obj2_finish(mc_ctx *ctx, struct obj_walk *w, size_t idx, const char *hash, uint64_t size)
{
	struct mc_mobject rec;
	char what[48];
	int rc;

	memset(&rec, 0, sizeof rec);
	entry_name(what, "objects", idx);
	rec.size = size;
	if ((rc = hash_field(ctx, hash, what, rec.hash)) != MC_OK)
		return rc;
	if (size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s is over the per-artifact cap of %llu "
			       "bytes", DOC, what, (unsigned long long)ctx->max_artifact_bytes);
	return obj_keep(ctx, w, idx, &rec);
}

static int
object_entry(mc_ctx *ctx, const cJSON *c, size_t idx, void *ud)
{
	static const char *const fields[] = {"!hash", "!size", "!encoding", "!stored_size",
					     "!stored_hash", NULL};
	static const char *const fields2[] = {"!hash", "!size", NULL};
	struct obj_walk *w = ud;
	struct obj_in in;
	char what[48];
	int rc;

	entry_name(what, "objects", idx);
	if (w->m->version == 2) {
		if ((rc = check_members(ctx, c, what, fields2)) != MC_OK ||
		    (rc = get_str(ctx, c, "hash", what, &in.hash)) != MC_OK ||
		    (rc = get_uint(ctx, c, "size", what, &in.size)) != MC_OK)
			return rc;
		return obj2_finish(ctx, w, idx, in.hash, in.size);
	}
	if ((rc = check_members(ctx, c, what, fields)) != MC_OK ||
	    (rc = get_str(ctx, c, "hash", what, &in.hash)) != MC_OK ||
	    (rc = get_str(ctx, c, "encoding", what, &in.encoding)) != MC_OK ||
	    (rc = get_str(ctx, c, "stored_hash", what, &in.stored_hash)) != MC_OK ||
	    (rc = get_uint(ctx, c, "size", what, &in.size)) != MC_OK ||
	    (rc = get_uint(ctx, c, "stored_size", what, &in.stored_size)) != MC_OK)
		return rc;
	return obj_finish(ctx, ud, idx, &in);
}

/* An object entry in the writer's form (mc_jfast_fn). */
static size_t
object_fast(mc_ctx *ctx, const char *p, size_t n, size_t idx, void *ud, int *rc)
{
	char hash[66], enc[8], shash[66];
	struct fcur c = {p, p + n};
	struct obj_in in = {hash, enc, shash, 0, 0};
	struct obj_walk *w = ud;

	if (!f_lit(&c, "{\"hash\":\"") || !f_str(&c, hash, sizeof hash) ||
	    !f_lit(&c, ",\"size\":") || !f_uint(&c, &in.size))
		return 0;
	if (w->m->version == 2) {
		if (!f_lit(&c, "}"))
			return 0;
		*rc = obj2_finish(ctx, w, idx, hash, in.size);
		return (size_t)(c.p - p);
	}
	if (!f_lit(&c, ",\"encoding\":\"") || !f_str(&c, enc, sizeof enc) ||
	    !f_lit(&c, ",\"stored_size\":") || !f_uint(&c, &in.stored_size) ||
	    !f_lit(&c, ",\"stored_hash\":\"") || !f_str(&c, shash, sizeof shash) ||
	    !f_lit(&c, "}"))
		return 0;
	*rc = obj_finish(ctx, ud, idx, &in);
	return (size_t)(c.p - p);
}

struct art_walk {
	struct mc_manifest *m;
	char *used; /* per object: named by an artifact or torch blob entry */
	uint64_t total;
	/* spilled: records and keys not yet written, and the entry before */
	struct mc_arec *rec;
	size_t nrec;
	char *keys;
	size_t nkeys;
	uint64_t key_off;
	char prev[MC_KEY_MAX + 1];
};

#define ART_BUF 512
#define KEY_BUF (256 * 1024)

/* Writes the records and keys waiting in w to the table's temp files. */
static int
art_flush(mc_ctx *ctx, struct art_walk *w)
{
	int rc;

	if ((rc = temp_write(ctx, w->m->artfd, w->rec, w->nrec * sizeof *w->rec,
			     "artifact table")) == MC_OK)
		rc = temp_write(ctx, w->m->keyfd, w->keys, w->nkeys, "artifact table");
	w->nrec = 0;
	w->nkeys = 0;
	return rc;
}

/* Keeps a parsed artifact: in the table, or for a spilled one in the temp files. */
static int
art_keep(mc_ctx *ctx, struct art_walk *w, const struct mc_martifact *a, const char *type,
	 const char *key)
{
	struct mc_manifest *m = w->m;
	size_t klen = strlen(key), idx = m->nartifacts;
	struct mc_arec *r;
	int rc;

	if (!m->spilled) {
		struct mc_martifact *t = &m->artifacts[idx];
		*t = *a;
		/* The table is sorted by type: a type is stored once, with its first artifact. */
		if (idx > 0 && strcmp(t[-1].type, type) == 0)
			t->type = t[-1].type;
		else if ((t->type = mc__arena_strdup(&m->strings, type)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		if ((t->key = mc__arena_strdup(&m->strings, key)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		return MC_OK;
	}
	if (m->ntypes == 0 || strcmp(m->types[m->ntypes - 1], type) != 0) {
		char **t = realloc(m->types, (m->ntypes + 1) * sizeof *t);
		if (t == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		m->types = t;
		if ((t[m->ntypes] = mc__arena_strdup(&m->strings, type)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		m->ntypes++;
	}
	if ((w->nrec == ART_BUF || w->nkeys + klen + 1 > KEY_BUF) &&
	    (rc = art_flush(ctx, w)) != MC_OK)
		return rc;
	r = &w->rec[w->nrec++];
	memset(r, 0, sizeof *r); /* padding too: records go to a file */
	r->size = a->size;
	r->object = a->object;
	r->key_off = w->key_off;
	r->key_len = (uint32_t)klen;
	r->type = (uint32_t)(m->ntypes - 1);
	r->has_sha = a->sha256 != NULL;
	r->executable = (uint32_t)a->executable;
	if (a->sha256 != NULL)
		memcpy(r->sha256, a->sha256, sizeof r->sha256);
	memcpy(w->keys + w->nkeys, key, klen + 1);
	w->nkeys += klen + 1;
	w->key_off += klen + 1;
	return MC_OK;
}

/* Resolves a reference to an object, checking its size; marks it used. */
static int
ref_object(mc_ctx *ctx, struct mc_manifest *m, const unsigned char hash[32], uint64_t size,
	   const char *what, char *used, size_t *idx)
{
	struct mc_mobject o;
	size_t i;
	int rc;

	if ((rc = find_object(ctx, m, hash, &i, &o)) != MC_OK)
		return rc;
	if (i == MC_NO_INDEX)
		return BAD("%s: %s refers to an object not in the object table", DOC, what);
	if (o.size != size)
		return BAD("%s: %s gives size %llu, the object table %llu", DOC, what,
			   (unsigned long long)size, (unsigned long long)o.size);
	used[i] = 1;
	*idx = i;
	return MC_OK;
}

static int
parse_labels(mc_ctx *ctx, const cJSON *labels, struct mc_manifest *m)
{
	const cJSON *c;
	char why[64];
	size_t n = 0;

	if (!cJSON_IsObject(labels))
		return BAD("manifest: labels is not an object");
	for (c = labels->child; c != NULL; c = c->next)
		n++;
	if (n > 1024)
		return BAD("manifest: more than 1024 labels");
	if (n > 0 && (m->labels = calloc(n, sizeof *m->labels)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (c = labels->child; c != NULL; c = c->next) {
		if (!mc__label_key_ok(c->string))
			return BAD("manifest: label name '%.64s' is not 1-64 of [A-Za-z0-9_.-]", c->string);
		if (!cJSON_IsString(c))
			return BAD("manifest: label '%s' is not a string", c->string);
		if (!mc__label_value_ok(c->valuestring, why, sizeof why))
			return BAD("manifest: label '%s' %s", c->string, why);
		if (m->nlabels > 0 && strcmp(m->labels[m->nlabels - 1].key, c->string) >= 0)
			return BAD("manifest: labels not in strictly ascending order at '%s'", c->string);
		m->labels[m->nlabels].key = mc__strdup(c->string);
		m->labels[m->nlabels].value = mc__strdup(c->valuestring);
		m->nlabels++;
		if (m->labels[m->nlabels - 1].key == NULL || m->labels[m->nlabels - 1].value == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	return MC_OK;
}

/* Format version 2's gpu_targets: 1..1024 targets, each "<backend>:<arch>", strictly
 * ascending (SPEC.md section 12.6). */
static int
parse_gpu_targets(mc_ctx *ctx, const cJSON *t, struct mc_manifest *m)
{
	const cJSON *c;
	size_t n = 0;

	if (t == NULL)
		return MC_OK;
	if (!cJSON_IsArray(t))
		return BAD("manifest: gpu_targets is not an array");
	for (c = t->child; c != NULL; c = c->next)
		n++;
	if (n == 0)
		return BAD("manifest: gpu_targets is empty (omit it for none)");
	if (n > 1024)
		return BAD("manifest: more than 1024 gpu_targets");
	if ((m->gpu_targets = calloc(n, sizeof *m->gpu_targets)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (c = t->child; c != NULL; c = c->next) {
		if (!cJSON_IsString(c) || !mc__gpu_target_ok(c->valuestring))
			return BAD("manifest: gpu_targets[%zu] is not a GPU target "
				   "(<backend>:<arch>, such as cuda:90)", m->ngpu_targets);
		if (m->ngpu_targets > 0 &&
		    strcmp(m->gpu_targets[m->ngpu_targets - 1], c->valuestring) >= 0)
			return BAD("manifest: gpu_targets not in strictly ascending order at '%s'",
				   c->valuestring);
		if ((m->gpu_targets[m->ngpu_targets] = mc__strdup(c->valuestring)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		m->ngpu_targets++;
	}
	return MC_OK;
}

/* An artifact's SHA-256 kept: into the arena, or for a spilled table h itself, which
 * art_keep copies. In format version 2 it is the content hash, given to every artifact. */
static int
art_hash_sha(mc_ctx *ctx, struct mc_manifest *m, const unsigned char h[32],
	     const unsigned char **out)
{
	if (m->spilled)
		*out = h;
	else if ((*out = mc__arena_dup(&m->strings, h, 32)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

/* An artifact's optional sha256 field, from the tree c or else the text (sha, NULL when
 * absent; read here, not by the caller, so that a tree's entry is checked in the same
 * order as before): into the arena, or for a spilled table into sh, which art_keep
 * copies. */
static int
art_sha256(mc_ctx *ctx, const cJSON *c, const char *sha, const char *what,
	   struct mc_manifest *m, unsigned char sh[32], const unsigned char **out)
{
	int rc;

	if (c != NULL && cJSON_GetObjectItemCaseSensitive(c, "sha256") == NULL)
		return MC_OK;
	if (c != NULL && (rc = get_str(ctx, c, "sha256", what, &sha)) != MC_OK)
		return rc;
	if (sha == NULL)
		return MC_OK;
	if ((rc = hash_field(ctx, sha, what, sh)) != MC_OK)
		return rc;
	return art_hash_sha(ctx, m, sh, out);
}


/* An artifact's optional executable member: true when present, never false (a writer
 * leaves it out instead), so that one manifest has one form. */
static int
art_executable(mc_ctx *ctx, const cJSON *c, const char *what, int *out)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "executable");

	*out = 0;
	if (e == NULL)
		return MC_OK;
	if (!cJSON_IsBool(e))
		return BAD("%s: %s.executable is not a boolean", DOC, what);
	if (!cJSON_IsTrue(e))
		return BAD("%s: %s.executable is false (a writer leaves the member out "
			   "instead)", DOC, what);
	*out = 1;
	return MC_OK;
}

/* The contents' total, *total, with size added: within the cap, and a sum that does
 * not overflow (what: "artifacts" or "contents"). */
static int
total_add(mc_ctx *ctx, uint64_t *total, uint64_t size, const char *what)
{
	if (!mc__sum_add(total, size))
		return mc__err(ctx, MC_ERR_LIMIT, "%s: the %s' sizes overflow a 64-bit sum", DOC,
			       what);
	if (*total > ctx->max_total_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s total more than the cap of %llu bytes",
			       DOC, what, (unsigned long long)ctx->max_total_bytes);
	return MC_OK;
}

/* The caps on one artifact's size and on all of them together. */
static int
art_caps(mc_ctx *ctx, struct art_walk *w, uint64_t size, const char *what)
{
	if (size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s is %llu bytes, over the cap of "
			       "%llu", DOC, what, (unsigned long long)size,
			       (unsigned long long)ctx->max_artifact_bytes);
	return total_add(ctx, &w->total, size, "artifacts");
}

/* Artifact idx comes strictly after the one before it, by (type, key). */
static int
art_order(mc_ctx *ctx, const struct art_walk *w, size_t idx, const char *type,
	  const char *key, const char *what)
{
	const struct mc_manifest *m = w->m;
	const char *ptype, *pkey;
	int cmp;

	if (idx == 0)
		return MC_OK;
	if (m->spilled) {
		ptype = m->types[m->ntypes - 1];
		pkey = w->prev;
	} else {
		ptype = m->artifacts[idx - 1].type;
		pkey = m->artifacts[idx - 1].key;
	}
	if ((cmp = strcmp(ptype, type)) == 0)
		cmp = strcmp(pkey, key);
	if (cmp == 0)
		return BAD("%s: duplicate artifact (%s, %.200s)", DOC, type, key);
	if (cmp > 0)
		return BAD("%s: artifacts not sorted by (type, key) at %s", DOC, what);
	return MC_OK;
}

/* An artifact entry's members, as the text has them; sha NULL when absent. */
struct art_in {
	const char *type, *key, *hash, *sha;
	uint64_t size;
	int executable;
};

/* The checks on an artifact entry's members, and the entry kept; c: its tree, from
 * which the optional members are read (NULL: in has them). */
static int
art_finish(mc_ctx *ctx, struct art_walk *w, size_t idx, const struct art_in *in,
	   const cJSON *c)
{
	struct mc_manifest *m = w->m;
	struct mc_martifact a;
	unsigned char h[MC_HASH_BYTES], sh[32];
	char what[48];
	int rc;

	memset(&a, 0, sizeof a);
	a.size = in->size;
	a.executable = in->executable;
	entry_name(what, "artifacts", idx);
	if (!type_name_ok(in->type))
		return BAD("%s: %s.type '%.40s' is not 1-32 of [a-z0-9_]", DOC, what, in->type);
	if (!key_text_ok(in->key))
		return BAD("%s: %s.key is empty or longer than %d bytes", DOC, what, MC_KEY_MAX);
	if (m->version == 2 && (in->sha != NULL ||
				(c != NULL && cJSON_GetObjectItemCaseSensitive(c, "sha256") != NULL)))
		return BAD("%s: %s has unknown field 'sha256' (in format version 2 the "
			   "content hash is the SHA-256)", DOC, what);
	if ((rc = hash_field(ctx, in->hash, what, h)) != MC_OK ||
	    (m->version == 2 && (rc = art_hash_sha(ctx, m, h, &a.sha256)) != MC_OK) ||
	    (m->version != 2 &&
	     (rc = art_sha256(ctx, c, in->sha, what, m, sh, &a.sha256)) != MC_OK) ||
	    (c != NULL && (rc = art_executable(ctx, c, what, &a.executable)) != MC_OK) ||
	    (rc = art_caps(ctx, w, a.size, what)) != MC_OK ||
	    (rc = art_order(ctx, w, idx, in->type, in->key, what)) != MC_OK ||
	    (rc = ref_object(ctx, m, h, a.size, what, w->used, &a.object)) != MC_OK ||
	    (rc = art_keep(ctx, w, &a, in->type, in->key)) != MC_OK)
		return rc;
	if (m->spilled)
		memcpy(w->prev, in->key, strlen(in->key) + 1);
	m->nartifacts++;
	return MC_OK;
}

/* One entry of the artifact table, sorted strictly by (type, key). */
static int
artifact_entry(mc_ctx *ctx, const cJSON *c, size_t idx, void *ud)
{
	static const char *const fields[] = {"!type", "!key", "!size", "!hash", "sha256",
					     "executable", NULL};
	struct art_in in = {NULL, NULL, NULL, NULL, 0, 0};
	char what[48];
	int rc;

	entry_name(what, "artifacts", idx);
	if ((rc = check_members(ctx, c, what, fields)) != MC_OK ||
	    (rc = get_str(ctx, c, "type", what, &in.type)) != MC_OK ||
	    (rc = get_str(ctx, c, "key", what, &in.key)) != MC_OK ||
	    (rc = get_str(ctx, c, "hash", what, &in.hash)) != MC_OK ||
	    (rc = get_uint(ctx, c, "size", what, &in.size)) != MC_OK)
		return rc;
	return art_finish(ctx, ud, idx, &in, c);
}

/* An artifact entry in the writer's form (mc_jfast_fn). */
static size_t
artifact_fast(mc_ctx *ctx, const char *p, size_t n, size_t idx, void *ud, int *rc)
{
	char type[MC_TYPE_MAX + 2], key[MC_KEY_MAX + 2], hash[66], sha[66];
	struct fcur c = {p, p + n};
	struct art_in in = {type, key, hash, NULL, 0, 0};

	if (!f_lit(&c, "{\"type\":\"") || !f_str(&c, type, sizeof type) ||
	    !f_lit(&c, ",\"key\":\"") || !f_str(&c, key, sizeof key) ||
	    !f_lit(&c, ",\"size\":") || !f_uint(&c, &in.size) ||
	    !f_lit(&c, ",\"hash\":\"") || !f_str(&c, hash, sizeof hash))
		return 0;
	if (f_lit(&c, ",\"sha256\":\"")) {
		if (!f_str(&c, sha, sizeof sha))
			return 0;
		in.sha = sha;
	}
	if (f_lit(&c, ",\"executable\":true"))
		in.executable = 1;
	if (!f_lit(&c, "}"))
		return 0;
	*rc = art_finish(ctx, ud, idx, &in, NULL);
	return (size_t)(c.p - p);
}

/* One entry of a torch blob group: a key, and the object it names. */
static int
tb_entry(mc_ctx *ctx, const cJSON *e, struct mc_manifest *m, char *used, struct mc_mgroup *grp)
{
	static const char *const ef[] = {"!key", "!size", "!hash", NULL};
	const char *key = NULL, *hash = NULL;
	unsigned char h[32];
	uint64_t size;
	int rc;

	if ((rc = check_members(ctx, e, "torch_blob entry", ef)) != MC_OK ||
	    (rc = get_str(ctx, e, "key", "torch_blob entry", &key)) != MC_OK ||
	    (rc = get_str(ctx, e, "hash", "torch_blob entry", &hash)) != MC_OK ||
	    (rc = get_uint(ctx, e, "size", "torch_blob entry", &size)) != MC_OK ||
	    (rc = hash_field(ctx, hash, "torch_blob entry hash", h)) != MC_OK)
		return rc;
	if (!key_text_ok(key))
		return BAD("%s: torch_blob entry key is empty or too long", DOC);
	if ((rc = ref_object(ctx, m, h, size, "torch_blob entry", used,
			     &grp->entries[grp->nentries].object)) != MC_OK)
		return rc;
	if ((grp->entries[grp->nentries].key = mc__strdup(key)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	grp->nentries++;
	return MC_OK;
}

/* One group of the torch blob: its type and its entries, which *total counts
 * against the cap on artifacts. */
static int
tb_group(mc_ctx *ctx, const cJSON *g, struct mc_manifest *m, char *used, size_t *total)
{
	static const char *const gf[] = {"!type", "!entries", NULL};
	struct mc_mgroup *grp = &m->groups[m->ngroups];
	const cJSON *ents, *e;
	const char *type = NULL;
	size_t ne;
	int rc;

	if ((rc = check_members(ctx, g, "torch_blob group", gf)) != MC_OK ||
	    (rc = get_str(ctx, g, "type", "torch_blob group", &type)) != MC_OK)
		return rc;
	if (!type_name_ok(type))
		return BAD("%s: torch_blob group type '%.40s' is not 1-32 of [a-z0-9_]", DOC, type);
	if ((grp->type = mc__strdup(type)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	m->ngroups++;
	ents = cJSON_GetObjectItemCaseSensitive(g, "entries");
	if (!cJSON_IsArray(ents))
		return BAD("%s: torch_blob group entries is not an array", DOC);
	ne = (size_t)cJSON_GetArraySize(ents);
	*total += ne;
	if (*total > ctx->max_artifacts)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: more than %llu torch blob entries", DOC,
			       (unsigned long long)ctx->max_artifacts);
	if (ne > 0 && (grp->entries = calloc(ne, sizeof *grp->entries)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (e = ents->child; e != NULL; e = e->next)
		if ((rc = tb_entry(ctx, e, m, used, grp)) != MC_OK)
			return rc;
	return MC_OK;
}

static int
parse_torch_blob(mc_ctx *ctx, const cJSON *tb, struct mc_manifest *m, char *used)
{
	static const char *const tbf[] = {"!groups", NULL};
	const cJSON *groups, *g;
	size_t ng, total = 0;
	int rc;

	if ((rc = check_members(ctx, tb, "torch_blob", tbf)) != MC_OK)
		return rc;
	groups = cJSON_GetObjectItemCaseSensitive(tb, "groups");
	if (!cJSON_IsArray(groups))
		return BAD("%s: torch_blob.groups is not an array", DOC);
	ng = (size_t)cJSON_GetArraySize(groups);
	if (ng > 0 && (m->groups = calloc(ng, sizeof *m->groups)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	m->has_torch_blob = 1;
	for (g = groups->child; g != NULL; g = g->next)
		if ((rc = tb_group(ctx, g, m, used, &total)) != MC_OK)
			return rc;
	return MC_OK;
}

/* The format and its version, which decide the rest. */
static int
parse_version(mc_ctx *ctx, const cJSON *root, struct mc_manifest *m)
{
	const char *fmt = NULL;
	uint64_t v;
	int rc;

	if (!cJSON_IsObject(root))
		return BAD("manifest: manifest is not an object");
	if ((rc = get_str(ctx, root, "format", "manifest", &fmt)) != MC_OK)
		return rc;
	if (strcmp(fmt, "megacache") != 0)
		return BAD("manifest: format is '%.40s', not 'megacache'", fmt);
	if ((rc = get_uint(ctx, root, "format_version", "manifest", &v)) != MC_OK)
		return rc;
	/* A later version is told apart from a broken manifest: a pipeline upgrades for
	 * one and distrusts the other. (The number is read before any signature is
	 * checked: a bundle that only claims it is refused all the same.) */
	if (v > MC_FORMAT_VERSION)
		return mc__err(ctx, MC_ERR_UNSUPPORTED_VERSION, "manifest: bundle format version "
			       "%llu is newer than this megacache reads (1 to %d): upgrade megacache "
			       "to read it", (unsigned long long)v, MC_FORMAT_VERSION);
	if (v != 1 && v != MC_FORMAT_VERSION)
		return BAD("manifest: format version %llu is not supported (this megacache reads 1 "
			   "to %d)", (unsigned long long)v, MC_FORMAT_VERSION);
	m->version = (int)v;
	m->halg = v == 1 ? MC_HALG_BLAKE2B : MC_HALG_SHA256;
	return MC_OK;
}

/* The top-level fields before the tables: times and labels. */
static int
parse_head(mc_ctx *ctx, const cJSON *root, struct mc_manifest *m)
{
	uint64_t v;
	int rc;

	if ((rc = get_uint(ctx, root, "created", "manifest", &v)) != MC_OK)
		return rc;
	m->created = (int64_t)v;
	if ((rc = get_uint(ctx, root, "bundle_version", "manifest", &m->bundle_version)) != MC_OK ||
	    (rc = get_uint(ctx, root, "expires", "manifest", &v)) != MC_OK)
		return rc;
	m->expires = (int64_t)v;
	if (cJSON_GetObjectItemCaseSensitive(root, "expires") != NULL && v == 0)
		return BAD("manifest: expires is 0 (omit it for no expiry)");
	return parse_labels(ctx, cJSON_GetObjectItemCaseSensitive(root, "labels"), m);
}

/* A member's encoding: "zstd" or "none". */
static int
get_encoding(mc_ctx *ctx, const cJSON *o, const char *what, int *enc)
{
	const char *e = NULL;
	int rc;

	if ((rc = get_str(ctx, o, "encoding", what, &e)) != MC_OK)
		return rc;
	if (strcmp(e, "zstd") == 0)
		*enc = MC_ENC_ZSTD;
	else if (strcmp(e, "none") == 0)
		*enc = MC_ENC_NONE;
	else
		return BAD("%s: %s has unknown encoding '%.20s'", DOC, what, e);
	return MC_OK;
}

/* Format version 2: how a member (the index, a block) of size bytes is stored in
 * stored_size: as is, in exactly its size; as zstd, in fewer bytes (a writer stores a
 * frame that is not smaller as is instead, an empty content among them: SPEC.md 12.3)
 * and within the expansion cap. */
static int
stored_form(mc_ctx *ctx, const char *what, int enc, uint64_t size, uint64_t stored_size)
{
	if (enc == MC_ENC_NONE && stored_size != size)
		return BAD("%s: %s is stored as is but its stored size differs", DOC, what);
	if (enc == MC_ENC_ZSTD && stored_size >= size)
		return BAD("%s: %s is stored as zstd in %llu bytes, not fewer than the %llu it "
			   "holds (a writer stores it as is)", DOC, what,
			   (unsigned long long)stored_size, (unsigned long long)size);
	if (enc == MC_ENC_ZSTD && mc__over_expansion(size, stored_size, ctx->max_expansion))
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s expands %llu bytes to %llu, more "
			       "than the expansion cap of %llu", DOC, what,
			       (unsigned long long)stored_size, (unsigned long long)size,
			       (unsigned long long)ctx->max_expansion);
	return MC_OK;
}

/* Format version 2: the index member, as the manifest describes it (SPEC.md 12.2). */
static int
parse_index_desc(mc_ctx *ctx, const cJSON *root, struct mc_manifest *m)
{
	static const char *const f[] = {"!encoding", "!size", "!stored_size", "!stored_hash",
					NULL};
	const cJSON *ix = cJSON_GetObjectItemCaseSensitive(root, "index");
	struct mc_mindex *x = &m->index;
	const char *h = NULL;
	int rc;

	if ((rc = check_members(ctx, ix, "index", f)) != MC_OK ||
	    (rc = get_encoding(ctx, ix, "index", &x->encoding)) != MC_OK ||
	    (rc = get_uint(ctx, ix, "size", "index", &x->size)) != MC_OK ||
	    (rc = get_uint(ctx, ix, "stored_size", "index", &x->stored_size)) != MC_OK ||
	    (rc = get_str(ctx, ix, "stored_hash", "index", &h)) != MC_OK ||
	    (rc = hash_field(ctx, h, "index.stored_hash", x->stored_hash)) != MC_OK)
		return rc;
	/* Each size is told as what it is: the member's, then its text's. */
	if (x->stored_size > ctx->max_manifest)
		return mc__err(ctx, MC_ERR_LIMIT, "index: stored in %llu bytes, over the manifest "
			       "cap of %llu", (unsigned long long)x->stored_size,
			       (unsigned long long)ctx->max_manifest);
	if (x->size > ctx->max_manifest)
		return mc__err(ctx, MC_ERR_LIMIT, "index: %llu bytes of text, over the manifest cap "
			       "of %llu", (unsigned long long)x->size,
			       (unsigned long long)ctx->max_manifest);
	return stored_form(ctx, "index", x->encoding, x->size, x->stored_size);
}

/* The artifacts or objects member: an array, of at most the cap's number of entries. */
static int
check_table(mc_ctx *ctx, const cJSON *root, const char *name, const struct mc_jtable *t)
{
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, name)))
		return BAD("%s: %s is not an array", DOC, name);
	if (t->n > ctx->max_artifacts)
		return mc__err(ctx, MC_ERR_LIMIT, "%s lists %zu %s, over the cap of %llu", DOC, t->n,
			       name, (unsigned long long)ctx->max_artifacts);
	return MC_OK;
}

/* Room for the tables of n artifacts and k objects: arrays, or for a text read from a
 * file (d->fd set), temp files and the buffers in front of them (for the objects only
 * when their table is over ctx->objects_in_memory). */
static int
walk_alloc(mc_ctx *ctx, const struct mc_jdoc *d, struct art_walk *w, struct obj_walk *ow,
	   size_t n, size_t k)
{
	struct mc_manifest *m = w->m;
	int ok;

	if (d->fd >= 0) {
		m->objfd = m->artfd = m->keyfd = -1;
		m->spilled = 1;
		m->ospilled = k > ctx->objects_in_memory / sizeof *m->objects;
		if ((m->ospilled && (m->objfd = mc__open_temp_anon(ctx)) < 0) ||
		    (m->artfd = mc__open_temp_anon(ctx)) < 0 ||
		    (m->keyfd = mc__open_temp_anon(ctx)) < 0)
			return MC_ERR_IO;
	}
	ok = (m->oprefix = calloc(k + 1, sizeof *m->oprefix)) != NULL;
	if (ok && m->ospilled)
		ok = (ow->buf = calloc(OBJ_BUF, sizeof *ow->buf)) != NULL;
	else if (ok)
		ok = k == 0 || (m->objects = calloc(k, sizeof *m->objects)) != NULL;
	if (!ok)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (m->spilled)
		ok = (w->rec = calloc(ART_BUF, sizeof *w->rec)) != NULL &&
		     (w->keys = malloc(KEY_BUF)) != NULL;
	else
		ok = n == 0 || (m->artifacts = calloc(n, sizeof *m->artifacts)) != NULL;
	if (!ok || (w->used = calloc(k + 1, 1)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

/* The object table of format version 2, in the blocks' order: sorted by hash prefix
 * (ties by position) into oprefix and oorder, for find_object. */
static int
order_objects(mc_ctx *ctx, struct mc_manifest *m)
{
	struct mc_hashpref *v;
	size_t k, n = m->nobjects;

	if ((v = malloc((n + 1) * sizeof *v)) == NULL ||
	    (m->oorder = malloc((n + 1) * sizeof *m->oorder)) == NULL ||
	    (m->dup = calloc(n + 1, 1)) == NULL) {
		free(v);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	for (k = 0; k < n; k++) {
		v[k].pref = m->oprefix[k];
		v[k].idx = (uint32_t)k;
	}
	qsort(v, n, sizeof *v, mc__hashpref_cmp);
	for (k = 0; k < n; k++) {
		m->oprefix[k] = v[k].pref;
		m->oorder[k] = v[k].idx;
	}
	free(v);
	return MC_OK;
}

/* One entry of the block table (version 2): the next n objects, one member. */
struct blk_walk {
	struct mc_manifest *m;
	size_t next; /* the first object of the next block */
};

/* The sum of the sizes of objects first .. first + n - 1, those of block what. */
static int
objects_size(mc_ctx *ctx, const struct mc_manifest *m, size_t first, size_t n,
	     const char *what, uint64_t *sum)
{
	struct mc_mobject o[64];
	size_t i, k;
	int rc;

	*sum = 0;
	for (i = 0; i < n; i += k) {
		size_t j;
		k = n - i < 64 ? n - i : 64;
		if ((rc = mc__mobjects(ctx, m, first + i, k, o)) != MC_OK)
			return rc;
		for (j = 0; j < k; j++)
			if (!mc__sum_add(sum, o[j].size))
				return mc__err(ctx, MC_ERR_LIMIT, "%s: %s: its objects' sizes "
					       "overflow a 64-bit sum", DOC, what);
	}
	return MC_OK;
}

/* The per-content cap on block what (b), its size known: a block is decompressed as one
 * piece of content, so the cap bounds its content, the sum of its objects' sizes, as it
 * bounds its stored bytes. */
static int
block_caps(mc_ctx *ctx, const char *what, const struct mc_mblock *b)
{
	unsigned long long cap = (unsigned long long)ctx->max_artifact_bytes;

	if (b->size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s holds %llu bytes of content, over the "
			       "per-artifact cap of %llu bytes", DOC, what,
			       (unsigned long long)b->size, cap);
	if (b->stored_size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "%s: %s is stored in %llu bytes, over the "
			       "per-artifact cap of %llu bytes", DOC, what,
			       (unsigned long long)b->stored_size, cap);
	return MC_OK;
}

static int
block_entry(mc_ctx *ctx, const cJSON *c, size_t idx, void *ud)
{
	static const char *const f[] = {"!encoding", "!objects", "!stored_size", "stored_hash",
					NULL};
	struct blk_walk *w = ud;
	struct mc_manifest *m = w->m;
	struct mc_mblock *b = &m->blocks[idx];
	const char *h = NULL;
	uint64_t n;
	char what[48];
	int rc;

	entry_name(what, "blocks", idx);
	if ((rc = check_members(ctx, c, what, f)) != MC_OK ||
	    (rc = get_encoding(ctx, c, what, &b->encoding)) != MC_OK ||
	    (rc = get_uint(ctx, c, "objects", what, &n)) != MC_OK ||
	    (rc = get_uint(ctx, c, "stored_size", what, &b->stored_size)) != MC_OK)
		return rc;
	/* A block stored as it is has no stored hash: its objects' hashes cover it. */
	if (b->encoding == MC_ENC_NONE &&
	    cJSON_GetObjectItemCaseSensitive(c, "stored_hash") != NULL)
		return BAD("%s: %s is stored as is but has a stored_hash", DOC, what);
	if (b->encoding == MC_ENC_ZSTD &&
	    ((rc = get_str(ctx, c, "stored_hash", what, &h)) != MC_OK ||
	     (rc = hash_field(ctx, h, what, b->stored_hash)) != MC_OK))
		return rc;
	if (n == 0 || n > m->nobjects - w->next)
		return BAD("%s: %s holds %llu objects, %zu are left", DOC, what,
			   (unsigned long long)n, m->nobjects - w->next);
	b->first = w->next;
	b->n = (size_t)n;
	w->next += b->n;
	if ((rc = objects_size(ctx, m, b->first, b->n, what, &b->size)) != MC_OK)
		return rc;
	/* The writer's rule (SPEC.md 12.5): a block is cut before the object that would take
	 * it past 16 MiB, so only an object alone makes a larger one. */
	if (b->n > 1 && b->size > MC_BLOCK_MAX)
		return BAD("%s: %s holds %zu objects of %llu bytes, over the %u bytes (16 MiB) a "
			   "block of several objects may hold", DOC, what, b->n,
			   (unsigned long long)b->size, MC_BLOCK_MAX);
	if ((rc = block_caps(ctx, what, b)) != MC_OK)
		return rc;
	m->nblocks++;
	return stored_form(ctx, what, b->encoding, b->size, b->stored_size);
}

/* Every object is named by an artifact or a torch blob entry; in version 2 one that
 * repeats the content of an earlier one is marked, and used as that one is. */
static int
check_used(mc_ctx *ctx, const struct mc_manifest *m, const char *used, uint64_t *total)
{
	char hex[MC_HASH_HEX];
	struct mc_mobject o;
	size_t i, first;
	int rc;

	for (i = 0; i < m->nobjects; i++)
		if (!used[i]) {
			if ((rc = mc__mobjects(ctx, m, i, 1, &o)) != MC_OK)
				return rc;
			if (m->dup != NULL) {
				struct mc_mobject f;
				if ((rc = find_object(ctx, m, o.hash, &first, &f)) != MC_OK)
					return rc;
				if (first < i && used[first]) {
					/* decompressed and hashed too: counted in the total */
					m->dup[i] = 1;
					if ((rc = total_add(ctx, total, o.size, "contents")) != MC_OK)
						return rc;
					continue;
				}
			}
			mc__hex(o.hash, MC_HASH_BYTES, hex);
			return BAD("%s: object %s is listed but no artifact uses it", DOC, hex);
		}
	return MC_OK;
}

/* Version 2: the block table, after the objects, which its entries cover in order. */
static int
walk_blocks(mc_ctx *ctx, struct mc_jdoc *d, struct mc_manifest *m, struct mc_jtable *blks,
	    struct blk_walk *bw)
{
	int rc;

	if ((rc = order_objects(ctx, m)) != MC_OK)
		return rc;
	if (blks->n > 0 && (m->blocks = calloc(blks->n, sizeof *m->blocks)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	d->i = blks->at;
	if (blks->n > 0 &&
	    (rc = mc__jdoc_array(ctx, d, NULL, block_entry, bw, &blks->n)) != MC_OK)
		return rc;
	if (bw->next != m->nobjects)
		return BAD("%s: the blocks hold %zu objects, the object table lists %zu", DOC,
			   bw->next, m->nobjects);
	return MC_OK;
}

/* The tables: objects (and in version 2 blocks) first, then artifacts, then the torch
 * blob's layout. */
static int
walk_tables(mc_ctx *ctx, struct mc_jdoc *d, struct mc_manifest *m, const cJSON *root,
	    struct mc_jtable *arts, struct mc_jtable *objs, struct mc_jtable *blks)
{
	struct art_walk w;
	struct obj_walk ow;
	struct blk_walk bw = {m, 0};
	const cJSON *tb;
	int rc;

	memset(&ow, 0, sizeof ow);
	ow.m = m;
	memset(&w, 0, sizeof w);
	w.m = m;
	if ((rc = check_table(ctx, root, "artifacts", arts)) != MC_OK ||
	    (rc = check_table(ctx, root, "objects", objs)) != MC_OK ||
	    (m->version == 2 && (rc = check_table(ctx, root, "blocks", blks)) != MC_OK) ||
	    (rc = walk_alloc(ctx, d, &w, &ow, arts->n, objs->n)) != MC_OK)
		goto out;
	d->i = objs->at;
	if (objs->n > 0 &&
	    ((rc = mc__jdoc_array(ctx, d, object_fast, object_entry, &ow, &objs->n)) != MC_OK ||
	     (m->ospilled && (rc = obj_flush(ctx, &ow)) != MC_OK)))
		goto out;
	if (m->version == 2 && (rc = walk_blocks(ctx, d, m, blks, &bw)) != MC_OK)
		goto out;
	d->i = arts->at;
	if (arts->n > 0 &&
	    ((rc = mc__jdoc_array(ctx, d, artifact_fast, artifact_entry, &w, &arts->n)) != MC_OK ||
	     (m->spilled && (rc = art_flush(ctx, &w)) != MC_OK)))
		goto out;
	if ((tb = cJSON_GetObjectItemCaseSensitive(root, "torch_blob")) != NULL &&
	    (rc = parse_torch_blob(ctx, tb, m, w.used)) != MC_OK)
		goto out;
	rc = check_used(ctx, m, w.used, &w.total);
out:
	/* The lookup by hash serves the parse alone: its 8 to 12 bytes an object go. */
	free(m->oprefix);
	free(m->oorder);
	m->oprefix = NULL;
	m->oorder = NULL;
	free(ow.buf);
	free(w.rec);
	free(w.keys);
	free(w.used);
	return rc;
}

/* The walk over a manifest's text that passed the whole-text checks. */
static int
walk_doc(mc_ctx *ctx, struct mc_jdoc *d, struct mc_manifest *m)
{
	static const char *const top[] = {"!format", "!format_version", "!created",
					  "!bundle_version", "expires", "!labels", "!artifacts",
					  "!objects", "torch_blob", NULL};
	static const char *const top2[] = {"!format", "!format_version", "!created",
					   "!bundle_version", "expires", "!labels", "gpu_targets",
					   "!index", NULL};
	cJSON *root = NULL;
	struct mc_jtable arts = {0, 0}, objs = {0, 0}, blks = {0, 0};
	int rc;

	if ((rc = mc__jdoc_top(ctx, d, &root, &arts, &objs, &blks)) != MC_OK ||
	    (rc = parse_version(ctx, root, m)) != MC_OK ||
	    (rc = check_members(ctx, root, "manifest", m->version == 1 ? top : top2)) != MC_OK ||
	    (rc = parse_head(ctx, root, m)) != MC_OK)
		goto out;
	if (m->version == 1)
		rc = walk_tables(ctx, d, m, root, &arts, &objs, &blks);
	else if ((rc = parse_gpu_targets(ctx, cJSON_GetObjectItemCaseSensitive(root, "gpu_targets"),
					 m)) == MC_OK)
		rc = parse_index_desc(ctx, root, m);
out:
	cJSON_Delete(root);
	return rc;
}

/* The walk over a version 2 index's text (its manifest already parsed into m). */
static int
walk_index(mc_ctx *ctx, struct mc_jdoc *d, struct mc_manifest *m)
{
	static const char *const top[] = {"!artifacts", "!objects", "!blocks", "torch_blob",
					  NULL};
	cJSON *root = NULL;
	struct mc_jtable arts = {0, 0}, objs = {0, 0}, blks = {0, 0};
	int rc;

	rc = mc__jdoc_top(ctx, d, &root, &arts, &objs, &blks);
	if (rc == MC_OK)
		rc = check_members(ctx, root, "index", top);
	if (rc == MC_OK)
		rc = walk_tables(ctx, d, m, root, &arts, &objs, &blks);
	cJSON_Delete(root);
	return rc;
}

/* The cap and the whole-text checks (c has seen all of the text), then the walk of a
 * manifest (index not set: m is reset first) or of a version 2 index into m; on failure
 * m is left empty, or for an index as it was before (its head: a reader may hold its
 * labels). */
static int
parse_doc(mc_ctx *ctx, struct mc_jdoc *d, const struct mc_mcheck *c, struct mc_manifest *m,
	  int index)
{
	struct mc_manifest head;
	int rc;

	if (!index)
		memset(m, 0, sizeof *m);
	head = *m; /* for an index: the head alone, no table yet */
	ctx->parsing_index = index;
	if (d->n > ctx->max_manifest) {
		rc = mc__err(ctx, MC_ERR_LIMIT, "%s of %llu bytes is over the cap of %llu", DOC,
			     (unsigned long long)d->n, (unsigned long long)ctx->max_manifest);
		goto out;
	}
	if ((rc = mc__mcheck_end(ctx, c)) != MC_OK)
		goto out;
	rc = index ? walk_index(ctx, d, m) : walk_doc(ctx, d, m);
	if (d->ioerr == ENOMEM)
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	else if (d->ioerr != 0)
		rc = mc__err(ctx, MC_ERR_IO, "cannot read the %s's temporary copy: %s", DOC,
			     strerror(d->ioerr));
out:
	ctx->parsing_index = 0;
	if (rc != MC_OK && index) { /* the tables go, the head stays */
		m->labels = NULL;
		m->nlabels = 0;
		m->gpu_targets = NULL;
		m->ngpu_targets = 0;
		mc__manifest_free(m);
		*m = head;
	} else if (rc != MC_OK) {
		mc__manifest_free(m);
	}
	return rc;
}

/* A text held in memory: a manifest, or with index set a version 2 index. */
static int
parse_mem(mc_ctx *ctx, const unsigned char *buf, size_t len, struct mc_manifest *m, int index)
{
	struct mc_jdoc d;
	struct mc_mcheck c;

	memset(&d, 0, sizeof d);
	d.s = buf;
	d.wn = len;
	d.n = len;
	d.fd = -1;
	mc__mcheck_init(&c);
	mc__mcheck_feed(&c, buf, len);
	return parse_doc(ctx, &d, &c, m, index);
}

int
mc__manifest_parse(mc_ctx *ctx, const unsigned char *buf, size_t len, struct mc_manifest *m)
{
	return parse_mem(ctx, buf, len, m, 0);
}

int
mc__index_parse(mc_ctx *ctx, const unsigned char *buf, size_t len, struct mc_manifest *m)
{
	return parse_mem(ctx, buf, len, m, 1);
}

static int
parse_fd(mc_ctx *ctx, int fd, uint64_t len, const struct mc_mcheck *c, struct mc_manifest *m,
	 int index)
{
	struct mc_jdoc d;
	int rc;

	memset(&d, 0, sizeof d);
	d.n = len;
	d.fd = fd;
	rc = parse_doc(ctx, &d, c, m, index);
	free(d.buf);
	return rc;
}

int
mc__manifest_parse_fd(mc_ctx *ctx, int fd, uint64_t len, const struct mc_mcheck *c,
		      struct mc_manifest *m)
{
	return parse_fd(ctx, fd, len, c, m, 0);
}

int
mc__index_parse_fd(mc_ctx *ctx, int fd, uint64_t len, const struct mc_mcheck *c,
		   struct mc_manifest *m)
{
	return parse_fd(ctx, fd, len, c, m, 1);
}
