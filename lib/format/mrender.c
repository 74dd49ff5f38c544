/*
 * mrender.c - the manifest's JSON text, as the writer makes it: rendered entry by
 * entry, into one buffer or handed to a sink in pieces.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format/format.h"

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
