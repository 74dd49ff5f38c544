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

/* A hash field: 64 lower-case hex digits. */
static cJSON *
add_hash(cJSON *o, const char *k, const unsigned char h[32])
{
	char hex[65];

	mc__hex(h, 32, hex);
	return cJSON_AddStringToObject(o, k, hex);
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
	if (mc__grow(&b->p, &b->cap, b->len + n + 1, 1) != MC_OK) {
		b->bad = MC_ERR_NOMEM;
		return;
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

/* Artifact i and object i of a manifest being rendered: from its source, when it has
 * one, else from its tables. */
static void
art_at(const struct mc_manifest *m, size_t i, struct mc_martifact *out)
{
	if (m->src != NULL)
		m->src->artifact(m->src->ud, i, out);
	else
		*out = m->artifacts[i];
}

static void
obj_at(const struct mc_manifest *m, size_t i, struct mc_mobject *out)
{
	if (m->src != NULL)
		m->src->object(m->src->ud, i, out);
	else
		*out = m->objects[i];
}

/* The head: the object's first members, up to the labels, without its closing brace. */
static void
render_head(const struct mc_manifest *m, struct sbuf *b)
{
	cJSON *root = cJSON_CreateObject(), *labels = NULL;
	size_t i;
	int ok = root != NULL;

	ok = ok && cJSON_AddStringToObject(root, "format", "megacache") != NULL;
	/* A model made by hand (version 0) is version 1's. */
	ok = ok && add_int(root, "format_version", m->version == 2 ? 2 : 1) != NULL;
	ok = ok && add_int(root, "created", (uint64_t)m->created) != NULL;
	ok = ok && add_int(root, "bundle_version", m->bundle_version) != NULL;
	if (ok && m->expires != 0)
		ok = add_int(root, "expires", (uint64_t)m->expires) != NULL;
	ok = ok && (labels = cJSON_AddObjectToObject(root, "labels")) != NULL;
	for (i = 0; ok && i < m->nlabels; i++)
		ok = cJSON_AddStringToObject(labels, m->labels[i].key, m->labels[i].value) != NULL;
	if (ok && m->version == 2 && m->ngpu_targets > 0) {
		cJSON *gt = cJSON_AddArrayToObject(root, "gpu_targets");
		ok = gt != NULL;
		for (i = 0; ok && i < m->ngpu_targets; i++)
			ok = cJSON_AddItemToArray(gt, cJSON_CreateString(m->gpu_targets[i]));
	}
	if (ok && m->version == 2) {
		const struct mc_mindex *x = &m->index;
		cJSON *ix = cJSON_AddObjectToObject(root, "index");
		ok = ix != NULL && cJSON_AddStringToObject(ix, "encoding", x->encoding == MC_ENC_ZSTD
							   ? "zstd" : "none") != NULL;
		ok = ok && add_int(ix, "size", x->size) != NULL;
		ok = ok && add_int(ix, "stored_size", x->stored_size) != NULL;
		ok = ok && add_hash(ix, "stored_hash", x->stored_hash) != NULL;
	}
	sb_json(b, root, ok, 1);
}

/* Artifact i's members, with its object's content hash; 0 when out of memory. */
static int
render_artifact(const struct mc_manifest *m, size_t i, cJSON *o)
{
	struct mc_martifact a;
	struct mc_mobject ob;
	int ok;

	art_at(m, i, &a);
	obj_at(m, a.object, &ob);
	ok = cJSON_AddStringToObject(o, "type", a.type) != NULL;
	ok = ok && cJSON_AddStringToObject(o, "key", a.key) != NULL;
	ok = ok && add_int(o, "size", a.size) != NULL;
	ok = ok && add_hash(o, "hash", ob.hash) != NULL;
	if (ok && a.sha256 != NULL && m->version != 2)
		ok = add_hash(o, "sha256", a.sha256) != NULL;
	if (ok && a.executable) /* never false: absent means not executable */
		ok = cJSON_AddTrueToObject(o, "executable") != NULL;
	return ok;
}

/* Object i's members; 0 when out of memory. */
static int
render_object(const struct mc_manifest *m, size_t i, cJSON *o)
{
	struct mc_mobject ob;
	int ok;

	obj_at(m, i, &ob);
	ok = add_hash(o, "hash", ob.hash) != NULL;
	ok = ok && add_int(o, "size", ob.size) != NULL;
	if (m->version == 2)
		return ok;
	ok = ok && cJSON_AddStringToObject(o, "encoding",
					   ob.encoding == MC_ENC_ZSTD ? "zstd" : "none") != NULL;
	ok = ok && add_int(o, "stored_size", ob.stored_size) != NULL;
	ok = ok && add_hash(o, "stored_hash", ob.stored_hash) != NULL;
	return ok;
}

/* Block i's members (format version 2): a block stored as it is has no stored hash,
 * its bytes being its objects' contents, each checked by its hash. 0 when out of
 * memory. */
static int
render_block(const struct mc_manifest *m, size_t i, cJSON *o)
{
	const struct mc_mblock *bk = &m->blocks[i];
	int ok;

	ok = cJSON_AddStringToObject(o, "encoding", bk->encoding == MC_ENC_ZSTD ? "zstd"
				     : "none") != NULL;
	ok = ok && add_int(o, "objects", bk->n) != NULL;
	ok = ok && add_int(o, "stored_size", bk->stored_size) != NULL;
	if (bk->encoding == MC_ENC_ZSTD)
		ok = ok && add_hash(o, "stored_hash", bk->stored_hash) != NULL;
	return ok;
}

/* The n elements of a table, each an object that one fills, comma-separated. */
static void
render_table(const struct mc_manifest *m, struct sbuf *b, size_t n,
	     int (*one)(const struct mc_manifest *m, size_t i, cJSON *o))
{
	size_t i;

	for (i = 0; !b->bad && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		int ok = o != NULL && one(m, i, o);

		if (i > 0)
			sb_str(b, ",");
		sb_json(b, o, ok, 0);
	}
}

/* One torch blob group, added to groups: its type, and its entries with their
 * objects' size and content hash. 0 when out of memory. */
static int
render_group(const struct mc_manifest *m, const struct mc_mgroup *grp, cJSON *groups)
{
	cJSON *g = cJSON_CreateObject(), *ents = NULL;
	size_t j;
	int ok;

	ok = g != NULL && cJSON_AddItemToArray(groups, g) &&
	     cJSON_AddStringToObject(g, "type", grp->type) != NULL &&
	     (ents = cJSON_AddArrayToObject(g, "entries")) != NULL;
	for (j = 0; ok && j < grp->nentries; j++) {
		const struct mc_mentry *e = &grp->entries[j];
		struct mc_mobject ob;
		cJSON *o = cJSON_CreateObject();

		obj_at(m, e->object, &ob);
		ok = o != NULL && cJSON_AddItemToArray(ents, o) &&
		     cJSON_AddStringToObject(o, "key", e->key) != NULL &&
		     add_int(o, "size", ob.size) != NULL && add_hash(o, "hash", ob.hash) != NULL;
	}
	return ok;
}

/* The torch_blob member, after the tables. */
static void
render_torch_blob(const struct mc_manifest *m, struct sbuf *b)
{
	cJSON *tb = cJSON_CreateObject(), *groups = NULL;
	size_t i;
	int ok = tb != NULL && (groups = cJSON_AddArrayToObject(tb, "groups")) != NULL;

	for (i = 0; ok && i < m->ngroups; i++)
		ok = render_group(m, &m->groups[i], groups);
	sb_str(b, ",\"torch_blob\":");
	sb_json(b, tb, ok, 0);
}

/* The tables: artifacts, objects, in version 2 blocks, and the torch blob's layout. */
static void
render_tables(const struct mc_manifest *m, struct sbuf *b)
{
	sb_str(b, "\"artifacts\":[");
	render_table(m, b, m->nartifacts, render_artifact);
	sb_str(b, "],\"objects\":[");
	render_table(m, b, m->nobjects, render_object);
	if (m->version == 2) {
		sb_str(b, "],\"blocks\":[");
		render_table(m, b, m->nblocks, render_block);
	}
	sb_str(b, "]");
	if (!b->bad && m->has_torch_blob)
		render_torch_blob(m, b);
}

/* The whole text, into b or through its sink: the manifest (in version 2 its head
 * alone), or with index set a version 2 index. */
static int
render(mc_ctx *ctx, const struct mc_manifest *m, struct sbuf *b, int index)
{
	if (m->spilled) /* a reader's manifest: only the writer's are rendered */
		return mc__err(ctx, MC_ERR_INVALID, "a manifest read from a file is not rendered");
	if (index) {
		sb_str(b, "{");
		render_tables(m, b);
	} else {
		render_head(m, b);
		if (m->version != 2) {
			sb_str(b, ",");
			render_tables(m, b);
		}
	}
	sb_str(b, "}");
	if (b->sink != NULL)
		sb_flush(b);
	if (b->bad == MC_ERR_NOMEM)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory rendering the manifest");
	return b->bad;
}

int
mc__manifest_render(mc_ctx *ctx, const struct mc_manifest *m, char **out, size_t *outlen)
{
	struct sbuf sb = {NULL, 0, 0, 0, NULL, NULL};
	int rc;

	*out = NULL;
	if ((rc = render(ctx, m, &sb, 0)) != MC_OK) {
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
	int rc = render(ctx, m, &sb, 0);

	free(sb.p);
	return rc;
}

int
mc__index_write(mc_ctx *ctx, const struct mc_manifest *m, mc_text_sink sink, void *ud)
{
	struct sbuf sb = {NULL, 0, 0, 0, sink, ud};
	int rc = render(ctx, m, &sb, 1);

	free(sb.p);
	return rc;
}
