/*
 * manifest.c - the bundle manifest: JSON rendering for the writer, and a strict parser
 * for the reader that refuses anything the writer would not produce.
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mc_private.h"

#define MANIFEST_DEPTH_MAX 6
#define JSON_INT_MAX 9007199254740991.0 /* 2^53 - 1: exact in a double */
#define LABEL_KEY_MAX 64
#define LABEL_VALUE_MAX 1024

int
mc__label_key_ok(const char *k)
{
	size_t n = strlen(k), i;

	if (n == 0 || n > LABEL_KEY_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

int
mc__label_value_ok(const char *v)
{
	size_t n = strlen(v), i;

	if (n > LABEL_VALUE_MAX || !mc__utf8_valid((const unsigned char *)v, n))
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return 0;
	return 1;
}

void
mc__manifest_free(struct mc_manifest *m)
{
	size_t i, j;

	for (i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	for (i = 0; i < m->nartifacts; i++) {
		free(m->artifacts[i].type);
		free(m->artifacts[i].key);
		free(m->artifacts[i].dest);
	}
	free(m->artifacts);
	for (i = 0; i < m->ngroups; i++) {
		for (j = 0; j < m->groups[i].nentries; j++)
			free(m->groups[i].entries[j].key);
		free(m->groups[i].entries);
		free(m->groups[i].type);
	}
	free(m->groups);
	free(m->objects);
	memset(m, 0, sizeof *m);
}

/* ---- rendering ---- */

static cJSON *
add_int(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v);
}

/* The manifest text is built entry by entry: each artifact and object is rendered by
 * cJSON on its own and appended, so that no tree of the whole manifest is ever held
 * (the bytes are the same as cJSON would print for the whole). */
struct sbuf {
	char *p;
	size_t len, cap;
	int bad;
};

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		if ((p = realloc(b->p, cap)) == NULL) {
			b->bad = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* Appends o printed (without its closing brace when open is set) and frees it. */
static void
sb_json(struct sbuf *b, cJSON *o, int ok, int open)
{
	char *t = ok && o != NULL ? cJSON_PrintUnformatted(o) : NULL;

	if (t == NULL)
		b->bad = 1;
	else
		sb_add(b, t, strlen(t) - (open ? 1 : 0));
	free(t);
	cJSON_Delete(o);
}

int
mc__manifest_render(mc_ctx *ctx, const struct mc_manifest *m, char **out, size_t *outlen)
{
	cJSON *root = cJSON_CreateObject(), *labels, *tb, *groups;
	struct sbuf sb = {NULL, 0, 0, 0};
	char hex[65];
	size_t i, j;
	int ok = root != NULL;

	*out = NULL;
	ok = ok && cJSON_AddStringToObject(root, "format", "megacache") != NULL;
	ok = ok && add_int(root, "format_version", MC_FORMAT_VERSION) != NULL;
	ok = ok && add_int(root, "created", (double)m->created) != NULL;
	ok = ok && add_int(root, "bundle_version", (double)m->bundle_version) != NULL;
	if (ok && m->expires != 0)
		ok = add_int(root, "expires", (double)m->expires) != NULL;
	ok = ok && (labels = cJSON_AddObjectToObject(root, "labels")) != NULL;
	for (i = 0; ok && i < m->nlabels; i++)
		ok = cJSON_AddStringToObject(labels, m->labels[i].key, m->labels[i].value) != NULL;
	sb_json(&sb, root, ok, 1);
	sb_str(&sb, ",\"artifacts\":[");
	for (i = 0; !sb.bad && i < m->nartifacts; i++) {
		const struct mc_martifact *a = &m->artifacts[i];
		cJSON *o = cJSON_CreateObject();

		ok = o != NULL && cJSON_AddStringToObject(o, "type", a->type) != NULL;
		ok = ok && cJSON_AddStringToObject(o, "key", a->key) != NULL;
		ok = ok && add_int(o, "size", (double)a->size) != NULL;
		ok = ok && cJSON_AddStringToObject(o, "hash", a->hash_hex) != NULL;
		if (ok && a->has_sha256) {
			mc__hex(a->sha256, 32, hex);
			ok = cJSON_AddStringToObject(o, "sha256", hex) != NULL;
		}
		if (i > 0)
			sb_str(&sb, ",");
		sb_json(&sb, o, ok, 0);
	}
	sb_str(&sb, "],\"objects\":[");
	for (i = 0; !sb.bad && i < m->nobjects; i++) {
		const struct mc_mobject *ob = &m->objects[i];
		cJSON *o = cJSON_CreateObject();

		ok = o != NULL && cJSON_AddStringToObject(o, "hash", ob->hash_hex) != NULL;
		ok = ok && add_int(o, "size", (double)ob->size) != NULL;
		ok = ok && cJSON_AddStringToObject(o, "encoding", ob->encoding == MC_ENC_ZSTD ? "zstd" : "none") != NULL;
		ok = ok && add_int(o, "stored_size", (double)ob->stored_size) != NULL;
		mc__hex(ob->stored_hash, 32, hex);
		ok = ok && cJSON_AddStringToObject(o, "stored_hash", hex) != NULL;
		if (i > 0)
			sb_str(&sb, ",");
		sb_json(&sb, o, ok, 0);
	}
	sb_str(&sb, "]");
	if (!sb.bad && m->has_torch_blob) {
		tb = cJSON_CreateObject();
		ok = tb != NULL && (groups = cJSON_AddArrayToObject(tb, "groups")) != NULL;
		for (i = 0; ok && i < m->ngroups; i++) {
			cJSON *g = cJSON_CreateObject(), *ents;
			ok = g != NULL && cJSON_AddItemToArray(groups, g) &&
			     cJSON_AddStringToObject(g, "type", m->groups[i].type) != NULL &&
			     (ents = cJSON_AddArrayToObject(g, "entries")) != NULL;
			for (j = 0; ok && j < m->groups[i].nentries; j++) {
				const struct mc_mentry *e = &m->groups[i].entries[j];
				cJSON *o = cJSON_CreateObject();
				ok = o != NULL && cJSON_AddItemToArray(ents, o) &&
				     cJSON_AddStringToObject(o, "key", e->key) != NULL &&
				     add_int(o, "size", (double)m->objects[e->object].size) != NULL &&
				     cJSON_AddStringToObject(o, "hash", m->objects[e->object].hash_hex) != NULL;
			}
		}
		sb_str(&sb, ",\"torch_blob\":");
		sb_json(&sb, tb, ok, 0);
	}
	sb_str(&sb, "}");
	if (sb.bad) {
		free(sb.p);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory rendering the manifest");
	}
	*out = sb.p;
	*outlen = sb.len;
	return MC_OK;
}

/* ---- parsing ---- */

#define BAD(...) mc__err(ctx, MC_ERR_MANIFEST, __VA_ARGS__)

/* Nesting depth of the JSON text, counted outside strings. */
static int
depth_ok(const unsigned char *s, size_t n, int max)
{
	int depth = 0, in_str = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > max)
				return 0;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return 1;
}

/* Every member of an object must be one of the allowed names, each at most once;
 * names listed with a leading '!' are required. */
static int
check_members(mc_ctx *ctx, const cJSON *o, const char *what, const char *const *allowed)
{
	const cJSON *c, *d;
	size_t i;

	if (!cJSON_IsObject(o))
		return BAD("manifest: %s is not an object", what);
	for (c = o->child; c != NULL; c = c->next) {
		int known = 0;
		for (i = 0; allowed[i] != NULL; i++) {
			const char *a = allowed[i][0] == '!' ? allowed[i] + 1 : allowed[i];
			if (strcmp(a, c->string) == 0)
				known = 1;
		}
		if (!known)
			return BAD("manifest: %s has unknown field '%.64s'", what, c->string);
		for (d = c->next; d != NULL; d = d->next)
			if (strcmp(c->string, d->string) == 0)
				return BAD("manifest: %s has field '%.64s' twice", what, c->string);
	}
	for (i = 0; allowed[i] != NULL; i++)
		if (allowed[i][0] == '!' && cJSON_GetObjectItemCaseSensitive(o, allowed[i] + 1) == NULL)
			return BAD("manifest: %s lacks field '%s'", what, allowed[i] + 1);
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
		return BAD("manifest: %s.%s is not a number", what, name);
	d = n->valuedouble;
	if (!isfinite(d) || d < 0 || d > JSON_INT_MAX || floor(d) != d)
		return BAD("manifest: %s.%s is not an integer in 0..2^53-1", what, name);
	*v = (uint64_t)d;
	return MC_OK;
}

static int
get_str(mc_ctx *ctx, const cJSON *o, const char *name, const char *what, const char **v)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsString(n) || n->valuestring == NULL)
		return BAD("manifest: %s.%s is not a string", what, name);
	*v = n->valuestring;
	return MC_OK;
}

static int
hash_field(mc_ctx *ctx, const char *s, const char *what, unsigned char out[32])
{
	if (strlen(s) != 64 || !mc__is_lower_hex(s, 64) || mc__unhex(s, out, 32) != 0)
		return BAD("manifest: %s is not 64 lower-case hex digits", what);
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

static size_t
find_object(const struct mc_manifest *m, const unsigned char hash[32])
{
	size_t lo = 0, hi = m->nobjects;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(m->objects[mid].hash, hash, 32);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (size_t)-1;
}

/* The object table: sorted strictly by content hash; stored bytes described exactly. */
static int
parse_objects(mc_ctx *ctx, const cJSON *objs, struct mc_manifest *m)
{
	static const char *const fields[] = {"!hash", "!size", "!encoding", "!stored_size",
					     "!stored_hash", NULL};
	const cJSON *c;
	size_t n;
	int rc;

	if (!cJSON_IsArray(objs))
		return BAD("manifest: objects is not an array");
	n = (size_t)cJSON_GetArraySize(objs);
	if (n > ctx->max_artifacts)
		return mc__err(ctx, MC_ERR_LIMIT, "manifest lists %zu objects, over the cap of %llu", n,
			       (unsigned long long)ctx->max_artifacts);
	if (n > 0 && (m->objects = calloc(n, sizeof *m->objects)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (c = objs->child; c != NULL; c = c->next) {
		struct mc_mobject *o = &m->objects[m->nobjects];
		const char *hash = NULL, *enc = NULL, *shash = NULL;
		char what[48];

		snprintf(what, sizeof what, "objects[%zu]", m->nobjects);
		if ((rc = check_members(ctx, c, what, fields)) != MC_OK ||
		    (rc = get_str(ctx, c, "hash", what, &hash)) != MC_OK ||
		    (rc = get_str(ctx, c, "encoding", what, &enc)) != MC_OK ||
		    (rc = get_str(ctx, c, "stored_hash", what, &shash)) != MC_OK ||
		    (rc = get_uint(ctx, c, "size", what, &o->size)) != MC_OK ||
		    (rc = get_uint(ctx, c, "stored_size", what, &o->stored_size)) != MC_OK ||
		    (rc = hash_field(ctx, hash, what, o->hash)) != MC_OK ||
		    (rc = hash_field(ctx, shash, what, o->stored_hash)) != MC_OK)
			return rc;
		memcpy(o->hash_hex, hash, 65);
		if (strcmp(enc, "zstd") == 0) {
			o->encoding = MC_ENC_ZSTD;
		} else if (strcmp(enc, "none") == 0) {
			o->encoding = MC_ENC_NONE;
			if (o->stored_size != o->size || memcmp(o->stored_hash, o->hash, 32) != 0)
				return BAD("manifest: %s is stored as is but its stored size or hash differs",
					   what);
		} else {
			return BAD("manifest: %s has unknown encoding '%.20s'", what, enc);
		}
		if (o->size > ctx->max_artifact_bytes || o->stored_size > ctx->max_artifact_bytes)
			return mc__err(ctx, MC_ERR_LIMIT, "manifest: %s is over the per-artifact cap of %llu "
				       "bytes", what, (unsigned long long)ctx->max_artifact_bytes);
		/* Decompression stops at the declared size; the declared size itself is
		 * bounded by the stored size, so a small bundle cannot fill a disk. */
		if (o->encoding == MC_ENC_ZSTD && ctx->max_expansion != 0 &&
		    o->size / ctx->max_expansion > o->stored_size)
			return mc__err(ctx, MC_ERR_LIMIT, "manifest: %s expands %llu bytes to %llu, more "
				       "than the expansion cap of %llu", what,
				       (unsigned long long)o->stored_size, (unsigned long long)o->size,
				       (unsigned long long)ctx->max_expansion);
		m->nobjects++;
		if (m->nobjects > 1 && memcmp(o[-1].hash, o->hash, 32) >= 0)
			return BAD("manifest: objects not sorted by hash, or repeated, at %s", what);
	}
	return MC_OK;
}

/* Resolves a reference to an object, checking its size; marks it used. */
static int
ref_object(mc_ctx *ctx, struct mc_manifest *m, const unsigned char hash[32], uint64_t size,
	   const char *what, char *used, size_t *idx)
{
	size_t i = find_object(m, hash);

	if (i == (size_t)-1)
		return BAD("manifest: %s refers to an object not in the object table", what);
	if (m->objects[i].size != size)
		return BAD("manifest: %s gives size %llu, the object table %llu", what,
			   (unsigned long long)size, (unsigned long long)m->objects[i].size);
	used[i] = 1;
	*idx = i;
	return MC_OK;
}

static int
parse_labels(mc_ctx *ctx, const cJSON *labels, struct mc_manifest *m)
{
	const cJSON *c;
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
		if (!cJSON_IsString(c) || !mc__label_value_ok(c->valuestring))
			return BAD("manifest: label '%s' is not a string of printable UTF-8 up to 1024 "
				   "bytes", c->string);
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

static int
parse_artifacts(mc_ctx *ctx, const cJSON *arts, struct mc_manifest *m, char *used)
{
	static const char *const fields[] = {"!type", "!key", "!size", "!hash", "sha256", NULL};
	const cJSON *c;
	uint64_t total = 0;
	int rc;

	for (c = arts->child; c != NULL; c = c->next) {
		struct mc_martifact *a = &m->artifacts[m->nartifacts];
		const char *type = NULL, *key = NULL, *hash = NULL, *sha = NULL;
		char what[48];

		snprintf(what, sizeof what, "artifacts[%zu]", m->nartifacts);
		if ((rc = check_members(ctx, c, what, fields)) != MC_OK ||
		    (rc = get_str(ctx, c, "type", what, &type)) != MC_OK ||
		    (rc = get_str(ctx, c, "key", what, &key)) != MC_OK ||
		    (rc = get_str(ctx, c, "hash", what, &hash)) != MC_OK ||
		    (rc = get_uint(ctx, c, "size", what, &a->size)) != MC_OK)
			return rc;
		if (!type_name_ok(type))
			return BAD("manifest: %s.type '%.40s' is not 1-32 of [a-z0-9_]", what, type);
		if (!key_text_ok(key))
			return BAD("manifest: %s.key is empty or longer than %d bytes", what, MC_KEY_MAX);
		if ((rc = hash_field(ctx, hash, what, a->hash)) != MC_OK)
			return rc;
		memcpy(a->hash_hex, hash, 65);
		if (cJSON_GetObjectItemCaseSensitive(c, "sha256") != NULL) {
			if ((rc = get_str(ctx, c, "sha256", what, &sha)) != MC_OK ||
			    (rc = hash_field(ctx, sha, what, a->sha256)) != MC_OK)
				return rc;
			a->has_sha256 = 1;
		}
		if (a->size > ctx->max_artifact_bytes)
			return mc__err(ctx, MC_ERR_LIMIT, "manifest: %s is %llu bytes, over the cap of "
				       "%llu", what, (unsigned long long)a->size,
				       (unsigned long long)ctx->max_artifact_bytes);
		total += a->size;
		if (total > ctx->max_total_bytes)
			return mc__err(ctx, MC_ERR_LIMIT, "manifest: artifacts total more than the cap "
				       "of %llu bytes", (unsigned long long)ctx->max_total_bytes);
		if ((a->type = mc__strdup(type)) == NULL || (a->key = mc__strdup(key)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		m->nartifacts++;
		if (m->nartifacts > 1) {
			const struct mc_martifact *p = a - 1;
			int cmp = strcmp(p->type, a->type);
			if (cmp == 0)
				cmp = strcmp(p->key, a->key);
			if (cmp == 0)
				return BAD("manifest: duplicate artifact (%s, %.200s)", a->type, a->key);
			if (cmp > 0)
				return BAD("manifest: artifacts not sorted by (type, key) at %s", what);
		}
		if ((rc = ref_object(ctx, m, a->hash, a->size, what, used, &a->object)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

static int
parse_torch_blob(mc_ctx *ctx, const cJSON *tb, struct mc_manifest *m, char *used)
{
	static const char *const tbf[] = {"!groups", NULL};
	static const char *const gf[] = {"!type", "!entries", NULL};
	static const char *const ef[] = {"!key", "!size", "!hash", NULL};
	const cJSON *groups, *g, *e;
	size_t ng, total = 0;
	int rc;

	if ((rc = check_members(ctx, tb, "torch_blob", tbf)) != MC_OK)
		return rc;
	groups = cJSON_GetObjectItemCaseSensitive(tb, "groups");
	if (!cJSON_IsArray(groups))
		return BAD("manifest: torch_blob.groups is not an array");
	ng = (size_t)cJSON_GetArraySize(groups);
	if (ng > 0 && (m->groups = calloc(ng, sizeof *m->groups)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	m->has_torch_blob = 1;
	for (g = groups->child; g != NULL; g = g->next) {
		struct mc_mgroup *grp = &m->groups[m->ngroups];
		const cJSON *ents;
		const char *type = NULL;
		size_t ne;

		if ((rc = check_members(ctx, g, "torch_blob group", gf)) != MC_OK ||
		    (rc = get_str(ctx, g, "type", "torch_blob group", &type)) != MC_OK)
			return rc;
		if (!type_name_ok(type))
			return BAD("manifest: torch_blob group type '%.40s' is not 1-32 of [a-z0-9_]", type);
		if ((grp->type = mc__strdup(type)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		m->ngroups++;
		ents = cJSON_GetObjectItemCaseSensitive(g, "entries");
		if (!cJSON_IsArray(ents))
			return BAD("manifest: torch_blob group entries is not an array");
		ne = (size_t)cJSON_GetArraySize(ents);
		total += ne;
		if (total > ctx->max_artifacts)
			return mc__err(ctx, MC_ERR_LIMIT, "manifest: more than %llu torch blob entries",
				       (unsigned long long)ctx->max_artifacts);
		if (ne > 0 && (grp->entries = calloc(ne, sizeof *grp->entries)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		for (e = ents->child; e != NULL; e = e->next) {
			const char *key = NULL, *hash = NULL;
			unsigned char h[32];
			uint64_t size;

			if ((rc = check_members(ctx, e, "torch_blob entry", ef)) != MC_OK ||
			    (rc = get_str(ctx, e, "key", "torch_blob entry", &key)) != MC_OK ||
			    (rc = get_str(ctx, e, "hash", "torch_blob entry", &hash)) != MC_OK ||
			    (rc = get_uint(ctx, e, "size", "torch_blob entry", &size)) != MC_OK ||
			    (rc = hash_field(ctx, hash, "torch_blob entry hash", h)) != MC_OK)
				return rc;
			if (!key_text_ok(key))
				return BAD("manifest: torch_blob entry key is empty or too long");
			if ((rc = ref_object(ctx, m, h, size, "torch_blob entry", used,
					     &grp->entries[grp->nentries].object)) != MC_OK)
				return rc;
			if ((grp->entries[grp->nentries].key = mc__strdup(key)) == NULL)
				return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
			grp->nentries++;
		}
	}
	return MC_OK;
}

int
mc__manifest_parse(mc_ctx *ctx, const unsigned char *buf, size_t len, struct mc_manifest *m)
{
	static const char *const top[] = {"!format", "!format_version", "!created",
					  "!bundle_version", "expires", "!labels", "!artifacts",
					  "!objects", "torch_blob", NULL};
	const char *end = NULL, *fmt = NULL;
	cJSON *root = NULL;
	const cJSON *arts, *tb;
	char *used = NULL;
	size_t n, i;
	uint64_t v;
	int rc;

	memset(m, 0, sizeof *m);
	if (len > ctx->max_manifest)
		return mc__err(ctx, MC_ERR_LIMIT, "manifest of %zu bytes is over the cap of %llu", len,
			       (unsigned long long)ctx->max_manifest);
	if (!mc__utf8_valid(buf, len))
		return BAD("manifest is not valid UTF-8");
	if (memchr(buf, '\0', len) != NULL)
		return BAD("manifest contains a NUL byte");
	for (i = 0; i + 6 <= len; i++)
		if (buf[i] == '\\' && buf[i + 1] == 'u' && memcmp(buf + i + 2, "0000", 4) == 0)
			return BAD("manifest contains an escaped NUL character");
	if (!depth_ok(buf, len, MANIFEST_DEPTH_MAX))
		return BAD("manifest nests deeper than %d levels", MANIFEST_DEPTH_MAX);
	root = cJSON_ParseWithLengthOpts((const char *)buf, len, &end, 0);
	if (root == NULL)
		return BAD("manifest is not valid JSON");
	if (end != (const char *)buf + len) {
		rc = BAD("manifest has bytes after its JSON value");
		goto out;
	}
	if ((rc = check_members(ctx, root, "manifest", top)) != MC_OK ||
	    (rc = get_str(ctx, root, "format", "manifest", &fmt)) != MC_OK)
		goto out;
	if (strcmp(fmt, "megacache") != 0) {
		rc = BAD("manifest: format is '%.40s', not 'megacache'", fmt);
		goto out;
	}
	if ((rc = get_uint(ctx, root, "format_version", "manifest", &v)) != MC_OK)
		goto out;
	if (v != MC_FORMAT_VERSION) {
		rc = BAD("manifest: format version %llu is not supported (this megacache reads %d)",
			 (unsigned long long)v, MC_FORMAT_VERSION);
		goto out;
	}
	if ((rc = get_uint(ctx, root, "created", "manifest", &v)) != MC_OK)
		goto out;
	m->created = (int64_t)v;
	if ((rc = get_uint(ctx, root, "bundle_version", "manifest", &m->bundle_version)) != MC_OK ||
	    (rc = get_uint(ctx, root, "expires", "manifest", &v)) != MC_OK)
		goto out;
	m->expires = (int64_t)v;
	if (cJSON_GetObjectItemCaseSensitive(root, "expires") != NULL && v == 0) {
		rc = BAD("manifest: expires is 0 (omit it for no expiry)");
		goto out;
	}
	if ((rc = parse_labels(ctx, cJSON_GetObjectItemCaseSensitive(root, "labels"), m)) != MC_OK)
		goto out;
	arts = cJSON_GetObjectItemCaseSensitive(root, "artifacts");
	if (!cJSON_IsArray(arts)) {
		rc = BAD("manifest: artifacts is not an array");
		goto out;
	}
	n = (size_t)cJSON_GetArraySize(arts);
	if (n > ctx->max_artifacts) {
		rc = mc__err(ctx, MC_ERR_LIMIT, "manifest lists %zu artifacts, over the cap of %llu", n,
			     (unsigned long long)ctx->max_artifacts);
		goto out;
	}
	if ((rc = parse_objects(ctx, cJSON_GetObjectItemCaseSensitive(root, "objects"), m)) != MC_OK)
		goto out;
	if ((used = calloc(m->nobjects + 1, 1)) == NULL ||
	    (n > 0 && (m->artifacts = calloc(n, sizeof *m->artifacts)) == NULL)) {
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = parse_artifacts(ctx, arts, m, used)) != MC_OK)
		goto out;
	if ((tb = cJSON_GetObjectItemCaseSensitive(root, "torch_blob")) != NULL &&
	    (rc = parse_torch_blob(ctx, tb, m, used)) != MC_OK)
		goto out;
	for (i = 0; i < m->nobjects; i++)
		if (!used[i]) {
			rc = BAD("manifest: object %s is listed but no artifact uses it",
				 m->objects[i].hash_hex);
			goto out;
		}
out:
	free(used);
	cJSON_Delete(root);
	if (rc != MC_OK)
		mc__manifest_free(m);
	return rc;
}
