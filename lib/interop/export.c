/*
 * export.c - a torch blob made from a verified bundle: the layout the bundle recorded,
 * or one group per torch type in torch's order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interop/interop.h"

struct xent {
	const char *key;
	size_t object;
};

struct xgroup {
	const char *type;
	int id27;            /* the type's torch 2.7 id (a group made by type) */
	struct xent *ents;
	size_t n;
};

struct crcout {
	mc_ctx *ctx;
	int fd;
	const char *path;
	uint32_t crc;
};

static int
out_bytes(struct crcout *o, const void *buf, size_t n)
{
	o->crc = mc__crc32(o->crc, buf, n);
	if (mc__write_all(o->fd, buf, n) != 0)
		return mc__errno(o->ctx, MC_ERR_IO, "cannot write", o->path);
	return MC_OK;
}

static int
out_u64(struct crcout *o, uint64_t v)
{
	unsigned char b[8];

	mc__put_be64(b, v);
	return out_bytes(o, b, 8);
}

static int
out_str(struct crcout *o, const char *s)
{
	char *b64 = mc__b64_encode((const unsigned char *)s, strlen(s));
	int rc;

	if (b64 == NULL)
		return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = out_u64(o, strlen(b64))) == MC_OK)
		rc = out_bytes(o, b64, strlen(b64));
	free(b64);
	return rc;
}

/* The part of object obj, of size bytes, as bytes: u64 length, content. */
static int
out_part(struct crcout *o, const struct mc_parts *p, size_t obj, uint64_t size)
{
	unsigned char *buf;
	int fd, rc;

	if ((rc = out_u64(o, size)) != MC_OK || size == 0)
		return rc;
	if ((rc = mc__parts_open(p, obj, &fd)) != MC_OK)
		return rc;
	if ((buf = malloc(MC_IO_CHUNK)) == NULL) {
		close(fd);
		return mc__err(o->ctx, MC_ERR_NOMEM, "out of memory");
	}
	while (rc == MC_OK && size > 0) {
		size_t want = size < MC_IO_CHUNK ? (size_t)size : MC_IO_CHUNK;
		if (mc__read_full(fd, buf, want) != 0) {
			rc = mc__errno(o->ctx, MC_ERR_IO, "cannot read a temp file in", p->dirpath);
			break;
		}
		rc = out_bytes(o, buf, want);
		size -= want;
	}
	free(buf);
	close(fd);
	return rc;
}

static int
art_rank_cmp(const void *x, const void *y)
{
	const struct mc_martifact *a = x, *b = y;
	int ra = a->handler->export_rank, rb = b->handler->export_rank;

	if (ra != rb)
		return ra < rb ? -1 : 1;
	return strcmp(a->key, b->key);
}

static int
format_accepts(int format, const struct mc_martifact *a)
{
	if (a->handler == NULL)
		return 0;
	return format == MC_TORCH_FORMAT_2_7 ? a->handler->torch27_id >= 0 :
	       a->handler->export_rank >= 0;
}

static void
xgroups_free(struct xgroup *g, size_t ng)
{
	size_t i;

	for (i = 0; i < ng; i++)
		free(g[i].ents);
	free(g);
}

/* The groups the bundle recorded from its torch blob, as they were. */
static int
layout_recorded(mc_bundle *b, struct xgroup **gout, size_t *ngout)
{
	struct xgroup *g;
	size_t i, j;

	if ((g = calloc(b->m.ngroups + 1, sizeof *g)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < b->m.ngroups; i++) {
		g[i].type = b->m.groups[i].type;
		g[i].n = b->m.groups[i].nentries;
		if ((g[i].ents = calloc(g[i].n + 1, sizeof *g[i].ents)) == NULL) {
			xgroups_free(g, i);
			return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		}
		for (j = 0; j < g[i].n; j++) {
			g[i].ents[j].key = b->m.groups[i].entries[j].key;
			g[i].ents[j].object = b->m.groups[i].entries[j].object;
		}
	}
	*gout = g;
	*ngout = b->m.ngroups;
	return MC_OK;
}

/* The artifacts the format holds (keys copied into keys) in torch's order: by type
 * rank, then key. */
static int
ranked_artifacts(mc_bundle *b, int format, struct mc_arena *keys, struct mc_martifact *arts,
		 size_t *n)
{
	struct mc_acur cur;
	size_t i;
	int rc = MC_OK;

	*n = 0;
	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; rc == MC_OK && i < b->m.nartifacts; i++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&cur, i, &a)) == MC_OK && format_accepts(format, a)) {
			arts[*n] = *a;
			if ((arts[(*n)++].key = mc__arena_strdup(keys, a->key)) == NULL)
				rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		}
	}
	mc__acur_free(&cur);
	if (rc == MC_OK && *n > 1)
		qsort(arts, *n, sizeof *arts, art_rank_cmp);
	return rc;
}

/* One group per torch type the format holds, in torch's order. */
static int
layout_by_type(mc_bundle *b, int format, struct mc_arena *keys, struct xgroup **gout,
	       size_t *ngout)
{
	struct mc_martifact *arts = calloc(b->m.nartifacts + 1, sizeof *arts);
	struct xgroup *g = calloc(b->m.nartifacts + 1, sizeof *g);
	size_t n = 0, ng = 0, i;
	int rc;

	if (arts == NULL || g == NULL)
		rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	else
		rc = ranked_artifacts(b, format, keys, arts, &n);
	for (i = 0; rc == MC_OK && i < n; i++) {
		struct xgroup *last;
		if (ng == 0 || strcmp(g[ng - 1].type, arts[i].type) != 0) {
			g[ng].type = arts[i].type;
			g[ng].id27 = arts[i].handler->torch27_id;
			if ((g[ng++].ents = calloc(n + 1, sizeof *g[0].ents)) == NULL) {
				rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
				break;
			}
		}
		last = &g[ng - 1];
		last->ents[last->n].key = arts[i].key;
		last->ents[last->n++].object = arts[i].object;
	}
	free(arts);
	if (rc != MC_OK) {
		if (g != NULL)
			xgroups_free(g, ng);
		return rc;
	}
	*gout = g;
	*ngout = ng;
	return MC_OK;
}

/* The groups to write: the recorded layout, else the torch types in torch's order (their
 * keys copied into keys). */
static int
export_layout(mc_bundle *b, int format, struct mc_arena *keys, struct xgroup **gout,
	      size_t *ngout)
{
	*gout = NULL;
	*ngout = 0;
	if (b->m.has_torch_blob && format == MC_TORCH_FORMAT_CURRENT)
		return layout_recorded(b, gout, ngout);
	return layout_by_type(b, format, keys, gout, ngout);
}

/* Tells left_out of each artifact the format cannot hold. */
static int
report_left_out(mc_bundle *b, int format, mc_artifact_fn left_out, void *ud)
{
	struct mc_acur cur;
	size_t i;
	int rc = MC_OK;

	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; rc == MC_OK && i < b->m.nartifacts; i++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&cur, i, &a)) == MC_OK && !format_accepts(format, a))
			left_out(ud, MC_LOAD_PLANNED, a->type, a->key, NULL, a->size);
	}
	mc__acur_free(&cur);
	return rc;
}

/* Contents arrive in hash order but are written in blob order: the objects of the
 * groups are parked on disk beside the output, so memory stays bounded. need (per
 * object, malloc'd) must outlive p. */
static int
park_contents(mc_bundle *b, const char *out_path, const struct xgroup *g, size_t ng,
	      char **need, struct mc_parts *p)
{
	char *prefix;
	size_t i, j;
	int rc;

	if ((*need = calloc(b->m.nobjects + 1, 1)) == NULL ||
	    (prefix = malloc(strlen(out_path) + 8)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < ng; i++)
		for (j = 0; j < g[i].n; j++)
			(*need)[g[i].ents[j].object] = 1;
	sprintf(prefix, "%s.mc", out_path);
	rc = mc__parts_extract(b, prefix, *need, p);
	free(prefix);
	return rc;
}

/* The blob after its CRC-32: the version, then the groups (2.7: a type id before each
 * entry instead). */
static int
write_groups(struct crcout *o, mc_bundle *b, int format, const struct xgroup *g, size_t ng,
	     const struct mc_parts *p)
{
	size_t i, j;
	int rc = out_u64(o, 1);

	for (i = 0; rc == MC_OK && i < ng; i++) {
		if (format == MC_TORCH_FORMAT_CURRENT && (rc = out_str(o, g[i].type)) == MC_OK)
			rc = out_u64(o, g[i].n);
		for (j = 0; rc == MC_OK && j < g[i].n; j++) {
			size_t obj = g[i].ents[j].object;
			struct mc_mobject ob;
			if (format == MC_TORCH_FORMAT_2_7 && (rc = out_u64(o, (uint64_t)g[i].id27)) != MC_OK)
				break;
			if ((rc = out_str(o, g[i].ents[j].key)) == MC_OK &&
			    (rc = mc__mobjects(b->ctx, &b->m, obj, 1, &ob)) == MC_OK)
				rc = out_part(o, p, obj, ob.size);
		}
	}
	return rc;
}

/* Writes the blob to a temp file beside out_path, fills in its CRC-32 and renames it
 * into place. */
static int
write_blob(mc_bundle *b, const char *out_path, int format, const struct xgroup *g, size_t ng,
	   const struct mc_parts *p)
{
	struct crcout o = {b->ctx, -1, out_path, 0};
	unsigned char head[4] = {0};
	char *tmp = NULL;
	int rc;

	if ((o.fd = mc__open_temp_beside(b->ctx, out_path, &tmp, 0644)) < 0)
		return MC_ERR_IO;
	if (mc__write_all(o.fd, head, 4) != 0)
		rc = mc__errno(b->ctx, MC_ERR_IO, "cannot write", out_path);
	else
		rc = write_groups(&o, b, format, g, ng, p);
	if (rc == MC_OK) {
		head[0] = (unsigned char)(o.crc >> 24);
		head[1] = (unsigned char)(o.crc >> 16);
		head[2] = (unsigned char)(o.crc >> 8);
		head[3] = (unsigned char)o.crc;
		if (mc__pwrite_full(o.fd, head, 4, 0) != 0)
			rc = mc__errno(b->ctx, MC_ERR_IO, "cannot write", out_path);
	}
	if (rc == MC_OK) {
		rc = mc__commit_temp(b->ctx, o.fd, tmp, out_path);
	} else {
		close(o.fd);
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

int
mc_bundle_export_torch(mc_bundle *b, const char *out_path)
{
	return mc_bundle_export_torch_as(b, out_path, MC_TORCH_FORMAT_CURRENT, NULL, NULL);
}

int
mc_bundle_export_torch_as(mc_bundle *b, const char *out_path, int format, mc_artifact_fn left_out,
			  void *ud)
{
	struct mc_parts p;
	struct xgroup *g = NULL;
	struct mc_arena keys = {NULL};
	char *need = NULL;
	size_t ng = 0;
	int rc;

	if (b == NULL || out_path == NULL ||
	    (format != MC_TORCH_FORMAT_CURRENT && format != MC_TORCH_FORMAT_2_7))
		return MC_ERR_INVALID;
	memset(&p, 0, sizeof p);
	p.dfd = -1;
	p.fd = -1;
	/* What verify refuses is not exported either: every key, the recorded layout's
	 * too, is checked by its handler, since torch makes file names of them. */
	if ((rc = mc__bundle_policy(b)) == MC_OK && (rc = mc__bundle_plan(b)) == MC_OK &&
	    (rc = export_layout(b, format, &keys, &g, &ng)) == MC_OK && left_out != NULL)
		rc = report_left_out(b, format, left_out, ud);
	if (rc == MC_OK && ng == 0)
		rc = mc__err(b->ctx, MC_ERR_INVALID, "%s: no torch artifacts to export", b->path);
	if (rc == MC_OK && (rc = park_contents(b, out_path, g, ng, &need, &p)) == MC_OK)
		rc = write_blob(b, out_path, format, g, ng, &p);
	mc__parts_remove(&p);
	free(need);
	xgroups_free(g, ng);
	mc__arena_free(&keys);
	return rc;
}
