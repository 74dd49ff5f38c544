/*
 * manifest.c - the bundle manifest: JSON rendering for the writer, and a strict parser
 * for the reader that refuses anything the writer would not produce.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "format/format.h"

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
mc__label_value_ok(const char *v, char *why, size_t whylen)
{
	size_t n = strlen(v);
	uint32_t cp;

	if (n > LABEL_VALUE_MAX) {
		snprintf(why, whylen, "is longer than %d bytes", LABEL_VALUE_MAX);
		return 0;
	}
	switch (mc__text_check(v, n, 0, &cp)) {
	case -1:
		snprintf(why, whylen, "is not valid UTF-8");
		return 0;
	case 1:
		snprintf(why, whylen, "contains control character U+%04X", (unsigned)cp);
		return 0;
	default:
		return 1;
	}
}

static int
temp_read_error(mc_ctx *ctx, const char *what)
{
	return mc__err(ctx, MC_ERR_IO, "cannot read the %s's temporary file: %s", what,
		       errno != 0 ? strerror(errno) : "unexpected end of file");
}

/* Appends n bytes to one of a spilled table's temp files. */
static int
temp_write(mc_ctx *ctx, int fd, const void *p, size_t n, const char *what)
{
	if (n > 0 && mc__write_all(fd, p, n) != 0)
		return mc__err(ctx, MC_ERR_IO, "cannot write the %s's temporary file: %s", what,
			       strerror(errno));
	return MC_OK;
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
	mc__arena_free(&m->strings);
	free(m->artifacts);
	for (i = 0; i < m->ngroups; i++) {
		for (j = 0; j < m->groups[i].nentries; j++)
			free(m->groups[i].entries[j].key);
		free(m->groups[i].entries);
		free(m->groups[i].type);
	}
	free(m->groups);
	free(m->objects);
	if (m->spilled) {
		close(m->objfd);
		close(m->artfd);
		close(m->keyfd);
	}
	free(m->oprefix);
	free(m->types);
	memset(m, 0, sizeof *m);
}

int
mc__mobjects(mc_ctx *ctx, const struct mc_manifest *m, size_t first, size_t n,
	     struct mc_mobject *out)
{
	if (!m->spilled) {
		memcpy(out, m->objects + first, n * sizeof *out);
		return MC_OK;
	}
	if (mc__pread_full(m->objfd, out, n * sizeof *out, (uint64_t)first * sizeof *out) != 0)
		return temp_read_error(ctx, "object table");
	return MC_OK;
}

void
mc__acur_init(struct mc_acur *c, mc_ctx *ctx, const struct mc_manifest *m,
	      mc_type_lookup lookup)
{
	memset(c, 0, sizeof *c);
	c->ctx = ctx;
	c->m = m;
	c->lookup = lookup;
}

void
mc__acur_free(struct mc_acur *c)
{
	free(c->rec);
	free(c->keys);
	memset(c, 0, sizeof *c);
}

/* Reads the records from i on, and their keys in one piece: a batch when the reads go
 * forwards, else the one record. */
static int
acur_fill(struct mc_acur *c, size_t i)
{
	const struct mc_manifest *m = c->m;
	size_t n = m->nartifacts - i < MC_ACUR_BATCH ? m->nartifacts - i : MC_ACUR_BATCH, k;
	uint64_t from, to;

	if (c->n > 0 && i != c->first + c->n)
		n = 1;
	c->n = 0;
	if (c->rec == NULL && (c->rec = malloc(MC_ACUR_BATCH * sizeof *c->rec)) == NULL)
		return mc__err(c->ctx, MC_ERR_NOMEM, "out of memory");
	if (mc__pread_full(m->artfd, c->rec, n * sizeof *c->rec, (uint64_t)i * sizeof *c->rec) != 0)
		return temp_read_error(c->ctx, "artifact table");
	/* The parse wrote them, so they are in order and in range; checked anyway, as the
	 * keys' buffer is sized from them. */
	from = c->rec[0].key_off;
	to = c->rec[n - 1].key_off + c->rec[n - 1].key_len + 1;
	for (k = 0; k < n; k++)
		if (c->rec[k].key_off < from || c->rec[k].key_off + c->rec[k].key_len + 1 > to ||
		    c->rec[k].key_len > MC_KEY_MAX || c->rec[k].type >= m->ntypes)
			return mc__err(c->ctx, MC_ERR_IO, "the artifact table's temporary file is "
				       "damaged");
	if (to - from > c->keycap) {
		char *p = realloc(c->keys, (size_t)(to - from));
		if (p == NULL)
			return mc__err(c->ctx, MC_ERR_NOMEM, "out of memory");
		c->keys = p;
		c->keycap = (size_t)(to - from);
	}
	if (mc__pread_full(m->keyfd, c->keys, (size_t)(to - from), from) != 0)
		return temp_read_error(c->ctx, "artifact table");
	for (k = 0; k < n; k++)
		if (c->keys[c->rec[k].key_off - from + c->rec[k].key_len] != '\0')
			return mc__err(c->ctx, MC_ERR_IO, "the artifact table's temporary file is "
				       "damaged");
	c->first = i;
	c->n = n;
	return MC_OK;
}

int
mc__acur_get(struct mc_acur *c, size_t i, const struct mc_martifact **out)
{
	const struct mc_manifest *m = c->m;
	struct mc_martifact *a = &c->a;
	int rc;

	*out = NULL;
	if (!m->spilled) {
		*a = m->artifacts[i];
	} else {
		const struct mc_arec *r;
		if ((i < c->first || i >= c->first + c->n) && (rc = acur_fill(c, i)) != MC_OK)
			return rc;
		r = &c->rec[i - c->first];
		a->type = m->types[r->type];
		a->key = c->keys + (r->key_off - c->rec[0].key_off);
		a->size = r->size;
		a->sha256 = r->has_sha ? r->sha256 : NULL;
		a->object = (size_t)r->object;
	}
	if (a->type != c->htype) { /* a run of one type shares its string */
		c->htype = a->type;
		c->handler = c->lookup != NULL ? c->lookup(c->ctx, a->type) : NULL;
	}
	a->handler = c->handler;
	*out = a;
	return MC_OK;
}

/* ---- rendering ---- */

/* An integer field, in its one form (SPEC.md section 3): plain digits, which cJSON's
 * printing of a double does not always give (it prints 10^15 as 1e+15). */
static cJSON *
add_int(cJSON *o, const char *k, uint64_t v)
{
	char t[24];

	snprintf(t, sizeof t, "%llu", (unsigned long long)v);
	return cJSON_AddRawToObject(o, k, t);
}

/* The manifest text is built entry by entry: each artifact and object is rendered by
 * cJSON on its own and appended, so that no tree of the whole manifest is ever held
 * (the bytes are the same as cJSON would print for the whole). With a sink, the text
 * goes out in pieces of up to SB_CHUNK bytes and is not held whole either. */
#define SB_CHUNK 65536

struct sbuf {
	char *p;
	size_t len, cap;
	int bad; /* an error: MC_ERR_NOMEM, or what the sink returned */
	mc_text_sink sink;
	void *ud;
};

static void
sb_flush(struct sbuf *b)
{
	int rc;

	if (b->bad || b->len == 0)
		return;
	if ((rc = b->sink(b->ud, b->p, b->len)) != MC_OK)
		b->bad = rc;
	b->len = 0;
}

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	int rc;

	if (b->bad)
		return;
	if (b->sink != NULL && b->len + n + 1 > SB_CHUNK) {
		sb_flush(b);
		if (n + 1 > SB_CHUNK) {
			if (!b->bad && (rc = b->sink(b->ud, s, n)) != MC_OK)
				b->bad = rc;
			return;
		}
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		if ((p = realloc(b->p, cap)) == NULL) {
			b->bad = MC_ERR_NOMEM;
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

	if (t == NULL) {
		if (!b->bad)
			b->bad = MC_ERR_NOMEM;
	} else {
		sb_add(b, t, strlen(t) - (open ? 1 : 0));
	}
	free(t);
	cJSON_Delete(o);
}

/* Artifact i and object i of a manifest being rendered. */
static void
render_art(const struct mc_manifest *m, size_t i, struct mc_martifact *out)
{
	if (m->src != NULL)
		m->src->artifact(m->src->ud, i, out);
	else
		*out = m->artifacts[i];
}

static void
render_obj(const struct mc_manifest *m, size_t i, struct mc_mobject *out)
{
	if (m->src != NULL)
		m->src->object(m->src->ud, i, out);
	else
		*out = m->objects[i];
}

static int
render(mc_ctx *ctx, const struct mc_manifest *m, struct sbuf *b)
{
	cJSON *root, *labels, *tb, *groups;
	struct sbuf sb = *b;
	char hex[65];
	size_t i, j;
	int ok;

	if (m->spilled) /* a reader's manifest: only the writer's are rendered */
		return mc__err(ctx, MC_ERR_INVALID, "a manifest read from a file is not rendered");
	ok = (root = cJSON_CreateObject()) != NULL;

	ok = ok && cJSON_AddStringToObject(root, "format", "megacache") != NULL;
	ok = ok && add_int(root, "format_version", MC_FORMAT_VERSION) != NULL;
	ok = ok && add_int(root, "created", (uint64_t)m->created) != NULL;
	ok = ok && add_int(root, "bundle_version", m->bundle_version) != NULL;
	if (ok && m->expires != 0)
		ok = add_int(root, "expires", (uint64_t)m->expires) != NULL;
	ok = ok && (labels = cJSON_AddObjectToObject(root, "labels")) != NULL;
	for (i = 0; ok && i < m->nlabels; i++)
		ok = cJSON_AddStringToObject(labels, m->labels[i].key, m->labels[i].value) != NULL;
	sb_json(&sb, root, ok, 1);
	sb_str(&sb, ",\"artifacts\":[");
	for (i = 0; !sb.bad && i < m->nartifacts; i++) {
		struct mc_martifact art, *a = &art;
		struct mc_mobject ob;
		cJSON *o = cJSON_CreateObject();

		render_art(m, i, a);
		render_obj(m, a->object, &ob);
		ok = o != NULL && cJSON_AddStringToObject(o, "type", a->type) != NULL;
		ok = ok && cJSON_AddStringToObject(o, "key", a->key) != NULL;
		ok = ok && add_int(o, "size", a->size) != NULL;
		mc__hex(ob.hash, 32, hex);
		ok = ok && cJSON_AddStringToObject(o, "hash", hex) != NULL;
		if (ok && a->sha256 != NULL) {
			mc__hex(a->sha256, 32, hex);
			ok = cJSON_AddStringToObject(o, "sha256", hex) != NULL;
		}
		if (i > 0)
			sb_str(&sb, ",");
		sb_json(&sb, o, ok, 0);
	}
	sb_str(&sb, "],\"objects\":[");
	for (i = 0; !sb.bad && i < m->nobjects; i++) {
		struct mc_mobject rec, *ob = &rec;
		cJSON *o = cJSON_CreateObject();

		render_obj(m, i, ob);
		mc__hex(ob->hash, 32, hex);
		ok = o != NULL && cJSON_AddStringToObject(o, "hash", hex) != NULL;
		ok = ok && add_int(o, "size", ob->size) != NULL;
		ok = ok && cJSON_AddStringToObject(o, "encoding", ob->encoding == MC_ENC_ZSTD ? "zstd" : "none") != NULL;
		ok = ok && add_int(o, "stored_size", ob->stored_size) != NULL;
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
				struct mc_mobject ob;
				cJSON *o = cJSON_CreateObject();
				render_obj(m, e->object, &ob);
				mc__hex(ob.hash, 32, hex);
				ok = o != NULL && cJSON_AddItemToArray(ents, o) &&
				     cJSON_AddStringToObject(o, "key", e->key) != NULL &&
				     add_int(o, "size", ob.size) != NULL &&
				     cJSON_AddStringToObject(o, "hash", hex) != NULL;
			}
		}
		sb_str(&sb, ",\"torch_blob\":");
		sb_json(&sb, tb, ok, 0);
	}
	sb_str(&sb, "}");
	if (sb.sink != NULL)
		sb_flush(&sb);
	*b = sb;
	if (sb.bad == MC_ERR_NOMEM)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory rendering the manifest");
	return sb.bad;
}

int
mc__manifest_render(mc_ctx *ctx, const struct mc_manifest *m, char **out, size_t *outlen)
{
	struct sbuf sb = {NULL, 0, 0, 0, NULL, NULL};
	int rc;

	*out = NULL;
	if ((rc = render(ctx, m, &sb)) != MC_OK) {
		free(sb.p);
		return rc;
	}
	*out = sb.p;
	*outlen = sb.len;
	return MC_OK;
}

int
mc__manifest_write(mc_ctx *ctx, const struct mc_manifest *m, mc_text_sink sink, void *ud)
{
	struct sbuf sb = {NULL, 0, 0, 0, sink, ud};
	int rc = render(ctx, m, &sb);

	free(sb.p);
	return rc;
}

/* ---- parsing ---- */

#define BAD(...) mc__err(ctx, MC_ERR_MANIFEST, __VA_ARGS__)

/* ---- whole-text checks, fed in pieces ---- */

void
mc__mcheck_init(struct mc_mcheck *c)
{
	memset(c, 0, sizeof *c);
}

/* Where the UTF-8 sequence that starts at s[i] would end, if s[i] is a lead byte;
 * i + 1 for anything else (which the validator then judges). */
static size_t
utf8_end(const unsigned char *s, size_t i)
{
	unsigned char c = s[i];

	if ((c & 0xe0) == 0xc0)
		return i + 2;
	if ((c & 0xf0) == 0xe0)
		return i + 3;
	if ((c & 0xf8) == 0xf0)
		return i + 4;
	return i + 1;
}

/* UTF-8 across pieces: a sequence cut by the end of a piece waits in c->u8 for the
 * next one; each complete run goes through mc__utf8_valid. */
static void
check_utf8(struct mc_mcheck *c, const unsigned char *p, size_t n)
{
	size_t i = 0, cut, k;

	if (c->nu8 > 0) {
		size_t want = utf8_end(c->u8, 0) - c->nu8;
		size_t take = want < n ? want : n;
		memcpy(c->u8 + c->nu8, p, take);
		c->nu8 += take;
		i = take;
		if (take < want)
			return;
		if (!mc__utf8_valid(c->u8, c->nu8))
			c->bad_utf8 = 1;
		c->nu8 = 0;
	}
	/* A lead byte in the last three whose sequence passes the end is carried. */
	cut = n;
	for (k = n; k > i && n - k < 3; k--)
		if (p[k - 1] >= 0xc0) {
			if (utf8_end(p, k - 1) > n)
				cut = k - 1;
			break;
		}
	if (!mc__utf8_valid(p + i, cut - i))
		c->bad_utf8 = 1;
	memcpy(c->u8, p + cut, n - cut);
	c->nu8 = n - cut;
}

void
mc__mcheck_feed(struct mc_mcheck *c, const unsigned char *p, size_t n)
{
	size_t i;

	if (!c->bad_utf8)
		check_utf8(c, p, n);
	if (memchr(p, '\0', n) != NULL)
		c->has_nul = 1;
	for (i = 0; i < n; i++) {
		unsigned char b = p[i];

		/* cJSON skips any byte up to 0x20 between tokens, and a UTF-8 BOM before a
		 * value, and takes a string's bytes as they are; RFC 8259 allows only space,
		 * tab, LF and CR between tokens, and no byte below 0x20 in a string. */
		if ((b < 0x20 || b >= 0x80) && !c->has_stray &&
		    (c->in_str ? b < 0x20 : b != '\t' && b != '\n' && b != '\r')) {
			c->has_stray = 1;
			c->stray = b;
			c->stray_str = c->in_str;
			c->stray_at = c->fed + i;
		}
		/* An escape \u in a string followed by four zeros is a NUL; an escaped
		 * backslash followed by the text u0000 is not. */
		if (c->nesc0 > 0) {
			if (b != '0')
				c->nesc0 = 0;
			else if (++c->nesc0 == 5) {
				c->has_esc0 = 1;
				c->nesc0 = 0;
			}
		}
		/* Nesting depth, counted outside strings. */
		if (c->skip) {
			c->skip = 0;
			c->nesc0 = b == 'u';
		} else if (c->in_str) {
			if (b == '\\')
				c->skip = 1;
			else if (b == '"')
				c->in_str = 0;
		} else if (b == '"') {
			c->in_str = 1;
		} else if (b == '{' || b == '[') {
			if (++c->depth > MANIFEST_DEPTH_MAX)
				c->too_deep = 1;
		} else if (b == '}' || b == ']') {
			c->depth--;
		}
	}
	c->fed += n;
}

int
mc__mcheck_end(mc_ctx *ctx, const struct mc_mcheck *c)
{
	if (c->bad_utf8 || c->nu8 > 0)
		return BAD("manifest is not valid UTF-8");
	if (c->has_nul)
		return BAD("manifest contains a NUL byte");
	if (c->has_esc0)
		return BAD("manifest contains an escaped NUL character");
	if (c->has_stray && c->stray_str)
		return BAD("manifest is not valid JSON: a raw control byte 0x%02x inside a string "
			   "at byte %llu", c->stray, (unsigned long long)c->stray_at);
	if (c->has_stray)
		return BAD("manifest is not valid JSON: byte 0x%02x between tokens at byte %llu",
			   c->stray, (unsigned long long)c->stray_at);
	if (c->too_deep)
		return BAD("manifest nests deeper than %d levels", MANIFEST_DEPTH_MAX);
	return MC_OK;
}

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
	if (n->valuestring != NULL) /* the text of a number not in plain digits: jnum_forms */
		return BAD("manifest: %s.%s is not an integer in plain decimal digits ('%s')", what,
			   name, n->valuestring);
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

/* The object with this content hash: *idx, or (size_t)-1 when there is none; *o gets
 * its record. */
static int
find_object(mc_ctx *ctx, const struct mc_manifest *m, const unsigned char hash[32], size_t *idx,
	    struct mc_mobject *o)
{
	size_t lo = 0, hi = m->nobjects;
	int rc;

	*idx = (size_t)-1;
	if (m->spilled) {
		/* The first entry whose hash prefix is not below this one's; equal prefixes
		 * are told apart by their records. */
		uint64_t want = mc__be64(hash);
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (m->oprefix[mid] < want)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < m->nobjects && m->oprefix[lo] == want; lo++) {
			if ((rc = mc__mobjects(ctx, m, lo, 1, o)) != MC_OK)
				return rc;
			if (memcmp(o->hash, hash, 32) == 0) {
				*idx = lo;
				return MC_OK;
			}
		}
		return MC_OK;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(m->objects[mid].hash, hash, 32);
		if (c == 0) {
			*idx = mid;
			*o = m->objects[mid];
			return MC_OK;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return MC_OK;
}

/* ---- the document, a member or an array element at a time ----
 *
 * The manifest is never made into one cJSON tree: a tree of a large manifest takes
 * several times its size. The top-level object is walked here, its two large arrays
 * element by element, and each value is handed to cJSON as its own small tree. This
 * walk only finds where values end (nesting was bounded beforehand); cJSON still reads
 * every byte of every value, so what is refused is what a whole-tree parse refuses. */

struct jdoc {
	const unsigned char *s; /* the window: bytes [w0, w0 + wn) of the text */
	uint64_t w0;
	size_t wn;
	uint64_t n, i;          /* the text's length; the cursor */
	int fd;                 /* where the text is read from; -1: s holds all of it */
	unsigned char *buf;     /* the window's storage when read from fd */
	size_t cap;
	int ioerr;              /* errno of a failed read */
};

#define JDOC_WINDOW (256u * 1024)

/* Makes the window hold [at, at + want), clipped to the text; -1 on a read error. */
static int
jload(struct jdoc *d, uint64_t at, size_t want)
{
	if (at - d->w0 < d->wn && at + want <= d->w0 + d->wn)
		return 0;
	if (d->fd < 0 || at >= d->n)
		return -1;
	if (want < JDOC_WINDOW)
		want = JDOC_WINDOW;
	if (want > d->n - at)
		want = (size_t)(d->n - at);
	if (want > d->cap) {
		unsigned char *nb = realloc(d->buf, want);
		if (nb == NULL) {
			d->ioerr = ENOMEM;
			return -1;
		}
		d->buf = nb;
		d->cap = want;
	}
	d->s = d->buf;
	d->wn = 0;
	if (mc__pread_full(d->fd, d->buf, want, at) != 0) {
		d->ioerr = errno != 0 ? errno : EIO;
		return -1;
	}
	d->w0 = at;
	d->wn = want;
	return 0;
}

/* The byte at i, or -1 past the end of the text (or on a read error). */
static inline int
jbyte(struct jdoc *d, uint64_t i)
{
	if (i - d->w0 < d->wn)
		return d->s[i - d->w0];
	if (i >= d->n || jload(d, i, JDOC_WINDOW) != 0)
		return -1;
	return d->s[i - d->w0];
}

static void
jws(struct jdoc *d)
{
	int c;

	while ((c = jbyte(d, d->i)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		d->i++;
}

static int
jat(struct jdoc *d, char c)
{
	return jbyte(d, d->i) == (unsigned char)c;
}

/* Moves past the value at d->i; 0 when it does not end before the text does. */
static int
jskip(struct jdoc *d)
{
	uint64_t i = d->i;
	int depth = 0, in_str = 0, c = jbyte(d, i);

	if (c < 0)
		return 0;
	if (c != '"' && c != '{' && c != '[') {
		while ((c = jbyte(d, i)) > 0 && memchr(",]} \t\r\n", c, 7) == NULL)
			i++;
		if (i == d->i)
			return 0;
		d->i = i;
		return 1;
	}
	for (; (c = jbyte(d, i)) >= 0; i++) {
		if (in_str) {
			if (c == '\\') {
				i++;
			} else if (c == '"') {
				in_str = 0;
				if (depth == 0)
					break;
			}
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if ((c == '}' || c == ']') && --depth == 0) {
			break;
		}
	}
	if (c < 0)
		return 0;
	d->i = i + 1;
	return 1;
}

/* ---- numbers ----
 *
 * cJSON reads a number with strtod: it takes forms RFC 8259 does not (07, 1., -.5) and
 * keeps only the value, so 7, 7.0 and 7e0 look alike. So the text of each value cJSON
 * took is read again, its numbers in step with the tree's (both go in document order):
 * one outside RFC 8259's grammar is a syntax error, and one that is not plain digits
 * keeps its text on its item, in valuestring (which cJSON leaves NULL for a number and
 * frees with the item), for get_uint to refuse. */

#define JNUM_SHOWN 24 /* bytes of a number's text quoted in a message */

struct jnums {
	const char *s; /* the value's text */
	size_t n, i;
	uint64_t at;   /* where it starts in the manifest */
};

/* The next number outside strings: where it starts, and its length as the run of
 * characters cJSON reads as one; 0 when there is none. */
static size_t
jnum_next(struct jnums *t, const char **start)
{
	static const char numch[] = "0123456789+-.eE";
	size_t i, k;

	for (i = t->i; i < t->n; i++) {
		char c = t->s[i];
		const char *q;
		if (c == '"') {
			/* To the quote that ends the string: one after an even run of
			 * backslashes (the run stops at the opening quote at the latest). */
			do {
				if ((q = memchr(t->s + i + 1, '"', t->n - i - 1)) == NULL) {
					t->i = t->n;
					return 0;
				}
				i = (size_t)(q - t->s);
				for (k = 0; t->s[i - 1 - k] == '\\'; k++)
					;
			} while (k % 2 == 1);
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			for (k = i; k < t->n && memchr(numch, t->s[k], sizeof numch - 1) != NULL; k++)
				;
			*start = t->s + i;
			t->i = k;
			return k - i;
		}
	}
	t->i = t->n;
	return 0;
}

static size_t
digits_end(const char *s, size_t i, size_t n)
{
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

/* How much of s is an RFC 8259 number; *intlen: how much is its sign and integer part. */
static size_t
json_number_len(const char *s, size_t n, size_t *intlen)
{
	size_t i = 0, d;

	*intlen = 0;
	if (i < n && s[i] == '-')
		i++;
	d = i;
	i = i < n && s[i] == '0' ? i + 1 : digits_end(s, i, n);
	if (i == d)
		return 0;
	*intlen = i;
	if (i < n && s[i] == '.') {
		d = ++i;
		if ((i = digits_end(s, i, n)) == d)
			return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		d = i;
		if ((i = digits_end(s, i, n)) == d)
			return 0;
	}
	return i;
}

/* Checks the numbers of the tree at item (and of its siblings after it) against t. */
static int
jnum_forms(mc_ctx *ctx, cJSON *item, struct jnums *t)
{
	const char *s = NULL;
	size_t n, intlen, shown;
	int rc;

	for (; item != NULL; item = item->next) {
		if (item->child != NULL && (rc = jnum_forms(ctx, item->child, t)) != MC_OK)
			return rc;
		if (!cJSON_IsNumber(item))
			continue;
		if ((n = jnum_next(t, &s)) == 0)
			return BAD("manifest is not valid JSON");
		shown = n < JNUM_SHOWN ? n : JNUM_SHOWN;
		if (json_number_len(s, n, &intlen) != n) {
			unsigned long long at = (unsigned long long)(t->at + (uint64_t)(s - t->s));
			if (intlen > 0 && s[intlen - 1] == '0' && intlen < n && s[intlen] >= '0' &&
			    s[intlen] <= '9')
				return BAD("manifest is not valid JSON: the number '%.*s' at byte %llu "
					   "has a leading zero", (int)shown, s, at);
			return BAD("manifest is not valid JSON: '%.*s' at byte %llu is not a JSON "
				   "number", (int)shown, s, at);
		}
		if (s[0] == '-' || intlen != n) {
			if ((item->valuestring = cJSON_malloc(shown + 1)) == NULL)
				return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
			memcpy(item->valuestring, s, shown);
			item->valuestring[shown] = '\0';
		}
	}
	return MC_OK;
}

/* Parses the value at d->i into its own tree and moves past it. */
static int
jvalue(mc_ctx *ctx, struct jdoc *d, cJSON **out)
{
	uint64_t start = d->i;
	const char *p = NULL, *end = NULL;
	struct jnums nums;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (jskip(d) && jload(d, start, (size_t)(d->i - start)) == 0) {
		len = (size_t)(d->i - start);
		p = (const char *)d->s + (start - d->w0);
		*out = cJSON_ParseWithLengthOpts(p, len, &end, 0);
		if (*out != NULL && end != p + len) {
			cJSON_Delete(*out);
			*out = NULL;
		}
	}
	if (*out == NULL)
		return BAD("manifest is not valid JSON");
	nums.s = p;
	nums.n = len;
	nums.i = 0;
	nums.at = start;
	if ((rc = jnum_forms(ctx, *out, &nums)) != MC_OK) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return rc;
}

typedef int (*jelem_fn)(mc_ctx *ctx, const cJSON *e, size_t idx, void *ud);

/* Walks the array whose '[' is at d->i, calling fn (when not NULL) with each element;
 * *count gets the number of elements. */
static int
jarray(mc_ctx *ctx, struct jdoc *d, jelem_fn fn, void *ud, size_t *count)
{
	size_t k = 0;
	int rc;

	d->i++;
	jws(d);
	if (jat(d, ']')) {
		d->i++;
		*count = 0;
		return MC_OK;
	}
	for (;;) {
		jws(d);
		if (fn == NULL) {
			if (!jskip(d))
				return BAD("manifest is not valid JSON");
		} else {
			cJSON *e;
			if ((rc = jvalue(ctx, d, &e)) != MC_OK)
				return rc;
			rc = fn(ctx, e, k, ud);
			cJSON_Delete(e);
			if (rc != MC_OK)
				return rc;
		}
		k++;
		jws(d);
		if (jat(d, ',')) {
			d->i++;
		} else if (jat(d, ']')) {
			d->i++;
			break;
		} else {
			return BAD("manifest is not valid JSON");
		}
	}
	*count = k;
	return MC_OK;
}

/* Where a table's '[' is (0: nowhere) and how many elements it has. */
struct jtable {
	size_t at, n;
};

/* The top level: every member goes into root, each as its own tree, except an
 * "artifacts" or "objects" array, which is only walked over: root gets an empty array
 * in its place, and *arts or *objs where it is. No byte may follow the value. */
static int
jtop(mc_ctx *ctx, struct jdoc *d, cJSON **rootp, struct jtable *arts, struct jtable *objs)
{
	cJSON *root, *name = NULL, *v;
	int rc;

	*rootp = NULL;
	jws(d);
	if (!jat(d, '{')) {
		if ((rc = jvalue(ctx, d, rootp)) != MC_OK)
			return rc;
		goto end;
	}
	if ((*rootp = root = cJSON_CreateObject()) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	d->i++;
	jws(d);
	if (jat(d, '}')) {
		d->i++;
		goto end;
	}
	for (;;) {
		struct jtable *at = NULL;

		jws(d);
		if (!jat(d, '"'))
			return BAD("manifest is not valid JSON");
		if ((rc = jvalue(ctx, d, &name)) != MC_OK)
			return rc;
		jws(d);
		if (!jat(d, ':')) {
			cJSON_Delete(name);
			return BAD("manifest is not valid JSON");
		}
		d->i++;
		jws(d);
		if (cJSON_GetObjectItemCaseSensitive(root, name->valuestring) != NULL) {
			rc = BAD("manifest: manifest has field '%.64s' twice", name->valuestring);
			cJSON_Delete(name);
			return rc;
		}
		if (strcmp(name->valuestring, "artifacts") == 0)
			at = arts;
		else if (strcmp(name->valuestring, "objects") == 0)
			at = objs;
		if (at != NULL && jat(d, '[')) {
			at->at = d->i;
			rc = jarray(ctx, d, NULL, NULL, &at->n);
			v = rc == MC_OK ? cJSON_CreateArray() : NULL;
			if (rc == MC_OK && v == NULL)
				rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		} else {
			rc = jvalue(ctx, d, &v);
		}
		if (rc == MC_OK && !cJSON_AddItemToObject(root, name->valuestring, v)) {
			cJSON_Delete(v);
			rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		}
		cJSON_Delete(name);
		if (rc != MC_OK)
			return rc;
		jws(d);
		if (jat(d, ',')) {
			d->i++;
		} else if (jat(d, '}')) {
			d->i++;
			break;
		} else {
			return BAD("manifest is not valid JSON");
		}
	}
end:
	if (d->i != d->n)
		return BAD("manifest has bytes after its JSON value");
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

static int
object_entry(mc_ctx *ctx, const cJSON *c, size_t idx, void *ud)
{
	static const char *const fields[] = {"!hash", "!size", "!encoding", "!stored_size",
					     "!stored_hash", NULL};
	struct obj_walk *w = ud;
	struct mc_manifest *m = w->m;
	struct mc_mobject rec, *o = &rec;
	const char *hash = NULL, *enc = NULL, *shash = NULL;
	char what[48];
	int rc;

	memset(&rec, 0, sizeof rec); /* padding too: records go to a file */
	snprintf(what, sizeof what, "objects[%zu]", idx);
	if ((rc = check_members(ctx, c, what, fields)) != MC_OK ||
	    (rc = get_str(ctx, c, "hash", what, &hash)) != MC_OK ||
	    (rc = get_str(ctx, c, "encoding", what, &enc)) != MC_OK ||
	    (rc = get_str(ctx, c, "stored_hash", what, &shash)) != MC_OK ||
	    (rc = get_uint(ctx, c, "size", what, &o->size)) != MC_OK ||
	    (rc = get_uint(ctx, c, "stored_size", what, &o->stored_size)) != MC_OK ||
	    (rc = hash_field(ctx, hash, what, o->hash)) != MC_OK ||
	    (rc = hash_field(ctx, shash, what, o->stored_hash)) != MC_OK)
		return rc;
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
	if (idx > 0 && memcmp(w->prev, o->hash, 32) >= 0)
		return BAD("manifest: objects not sorted by hash, or repeated, at %s", what);
	memcpy(w->prev, o->hash, 32);
	if (!m->spilled) {
		m->objects[idx] = rec;
	} else {
		m->oprefix[idx] = mc__be64(o->hash);
		w->buf[w->nbuf++] = rec;
		if (w->nbuf == OBJ_BUF && (rc = obj_flush(ctx, w)) != MC_OK)
			return rc;
	}
	m->nobjects++;
	return MC_OK;
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
	if (i == (size_t)-1)
		return BAD("manifest: %s refers to an object not in the object table", what);
	if (o.size != size)
		return BAD("manifest: %s gives size %llu, the object table %llu", what,
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

/* One entry of the artifact table, sorted strictly by (type, key). */
static int
artifact_entry(mc_ctx *ctx, const cJSON *c, size_t idx, void *ud)
{
	static const char *const fields[] = {"!type", "!key", "!size", "!hash", "sha256", NULL};
	struct art_walk *w = ud;
	struct mc_manifest *m = w->m;
	struct mc_martifact art, *a = &art;
	const char *type = NULL, *key = NULL, *hash = NULL, *sha = NULL, *ptype, *pkey;
	unsigned char h[MC_HASH_BYTES], sh[32];
	char what[48];
	int rc;

	memset(&art, 0, sizeof art);
	snprintf(what, sizeof what, "artifacts[%zu]", idx);
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
	if ((rc = hash_field(ctx, hash, what, h)) != MC_OK)
		return rc;
	if (cJSON_GetObjectItemCaseSensitive(c, "sha256") != NULL) {
		if ((rc = get_str(ctx, c, "sha256", what, &sha)) != MC_OK ||
		    (rc = hash_field(ctx, sha, what, sh)) != MC_OK)
			return rc;
		if (m->spilled)
			a->sha256 = sh;
		else if ((a->sha256 = mc__arena_dup(&m->strings, sh, sizeof sh)) == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (a->size > ctx->max_artifact_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "manifest: %s is %llu bytes, over the cap of "
			       "%llu", what, (unsigned long long)a->size,
			       (unsigned long long)ctx->max_artifact_bytes);
	w->total += a->size;
	if (w->total > ctx->max_total_bytes)
		return mc__err(ctx, MC_ERR_LIMIT, "manifest: artifacts total more than the cap "
			       "of %llu bytes", (unsigned long long)ctx->max_total_bytes);
	if (idx > 0) {
		int cmp;
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
			return BAD("manifest: duplicate artifact (%s, %.200s)", type, key);
		if (cmp > 0)
			return BAD("manifest: artifacts not sorted by (type, key) at %s", what);
	}
	if ((rc = ref_object(ctx, m, h, a->size, what, w->used, &a->object)) != MC_OK ||
	    (rc = art_keep(ctx, w, a, type, key)) != MC_OK)
		return rc;
	if (m->spilled)
		memcpy(w->prev, key, strlen(key) + 1);
	m->nartifacts++;
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

/* The walk over a text that passed the whole-text checks. */
static int
walk_doc(mc_ctx *ctx, struct jdoc *d, struct mc_manifest *m)
{
	static const char *const top[] = {"!format", "!format_version", "!created",
					  "!bundle_version", "expires", "!labels", "!artifacts",
					  "!objects", "torch_blob", NULL};
	struct art_walk w;
	struct obj_walk ow;
	const char *fmt = NULL;
	cJSON *root = NULL;
	const cJSON *tb;
	struct jtable arts = {0, 0}, objs = {0, 0};
	size_t n, k, i;
	uint64_t v;
	int rc;

	memset(&ow, 0, sizeof ow);
	ow.m = m;
	memset(&w, 0, sizeof w);
	w.m = m;
	if ((rc = jtop(ctx, d, &root, &arts, &objs)) != MC_OK ||
	    (rc = check_members(ctx, root, "manifest", top)) != MC_OK ||
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
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "artifacts"))) {
		rc = BAD("manifest: artifacts is not an array");
		goto out;
	}
	n = arts.n;
	if (n > ctx->max_artifacts) {
		rc = mc__err(ctx, MC_ERR_LIMIT, "manifest lists %zu artifacts, over the cap of %llu", n,
			     (unsigned long long)ctx->max_artifacts);
		goto out;
	}
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "objects"))) {
		rc = BAD("manifest: objects is not an array");
		goto out;
	}
	k = objs.n;
	if (k > ctx->max_artifacts) {
		rc = mc__err(ctx, MC_ERR_LIMIT, "manifest lists %zu objects, over the cap of %llu", k,
			     (unsigned long long)ctx->max_artifacts);
		goto out;
	}
	/* A manifest read from a file keeps its tables in files too. */
	if (d->fd >= 0) {
		m->objfd = m->artfd = m->keyfd = -1;
		m->spilled = 1;
		if ((m->objfd = mc__open_temp_anon(ctx)) < 0 ||
		    (m->artfd = mc__open_temp_anon(ctx)) < 0 ||
		    (m->keyfd = mc__open_temp_anon(ctx)) < 0) {
			rc = MC_ERR_IO;
			goto out;
		}
	}
	if ((k > 0 && !m->spilled && (m->objects = calloc(k, sizeof *m->objects)) == NULL) ||
	    (m->spilled && ((m->oprefix = calloc(k + 1, sizeof *m->oprefix)) == NULL ||
			    (ow.buf = calloc(OBJ_BUF, sizeof *ow.buf)) == NULL ||
			    (w.rec = calloc(ART_BUF, sizeof *w.rec)) == NULL ||
			    (w.keys = malloc(KEY_BUF)) == NULL)) ||
	    (w.used = calloc(k + 1, 1)) == NULL ||
	    (n > 0 && !m->spilled && (m->artifacts = calloc(n, sizeof *m->artifacts)) == NULL)) {
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	d->i = objs.at;
	if (k > 0 && ((rc = jarray(ctx, d, object_entry, &ow, &k)) != MC_OK ||
		      (m->spilled && (rc = obj_flush(ctx, &ow)) != MC_OK)))
		goto out;
	d->i = arts.at;
	if (n > 0 && ((rc = jarray(ctx, d, artifact_entry, &w, &n)) != MC_OK ||
		      (m->spilled && (rc = art_flush(ctx, &w)) != MC_OK)))
		goto out;
	if ((tb = cJSON_GetObjectItemCaseSensitive(root, "torch_blob")) != NULL &&
	    (rc = parse_torch_blob(ctx, tb, m, w.used)) != MC_OK)
		goto out;
	for (i = 0; i < m->nobjects; i++)
		if (!w.used[i]) {
			char hex[MC_HASH_HEX];
			struct mc_mobject o;
			if ((rc = mc__mobjects(ctx, m, i, 1, &o)) != MC_OK)
				goto out;
			mc__hex(o.hash, MC_HASH_BYTES, hex);
			rc = BAD("manifest: object %s is listed but no artifact uses it", hex);
			goto out;
		}
out:
	free(ow.buf);
	free(w.rec);
	free(w.keys);
	free(w.used);
	cJSON_Delete(root);
	return rc;
}

/* The cap and the whole-text checks (c has seen all of the text), then the walk; m is
 * left empty on failure. */
static int
parse_doc(mc_ctx *ctx, struct jdoc *d, const struct mc_mcheck *c, struct mc_manifest *m)
{
	int rc;

	memset(m, 0, sizeof *m);
	if (d->n > ctx->max_manifest)
		return mc__err(ctx, MC_ERR_LIMIT, "manifest of %llu bytes is over the cap of %llu",
			       (unsigned long long)d->n, (unsigned long long)ctx->max_manifest);
	if ((rc = mc__mcheck_end(ctx, c)) != MC_OK)
		return rc;
	rc = walk_doc(ctx, d, m);
	if (d->ioerr == ENOMEM)
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	else if (d->ioerr != 0)
		rc = mc__err(ctx, MC_ERR_IO, "cannot read the manifest's temporary copy: %s",
			     strerror(d->ioerr));
	if (rc != MC_OK)
		mc__manifest_free(m);
	return rc;
}

int
mc__manifest_parse(mc_ctx *ctx, const unsigned char *buf, size_t len, struct mc_manifest *m)
{
	struct jdoc d;
	struct mc_mcheck c;

	memset(&d, 0, sizeof d);
	d.s = buf;
	d.wn = len;
	d.n = len;
	d.fd = -1;
	mc__mcheck_init(&c);
	mc__mcheck_feed(&c, buf, len);
	return parse_doc(ctx, &d, &c, m);
}

int
mc__manifest_parse_fd(mc_ctx *ctx, int fd, uint64_t len, const struct mc_mcheck *c,
		      struct mc_manifest *m)
{
	struct jdoc d;
	int rc;

	memset(&d, 0, sizeof d);
	d.n = len;
	d.fd = fd;
	rc = parse_doc(ctx, &d, c, m);
	free(d.buf);
	return rc;
}
