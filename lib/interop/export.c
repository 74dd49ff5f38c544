/*
 * export.c - a torch blob made from a verified bundle: the layout the bundle recorded,
 * or one group per torch type in torch's order; written to a file, or into memory.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
 * rank, then key; each key then cut to torch's own (the entries of one key follow each
 * other, in their keys' order). */
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
	for (i = 0; rc == MC_OK && i < *n; i++)
		((char *)arts[i].key)[mc__torch_key_len(arts[i].handler, arts[i].key)] = '\0';
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

/* What an export writes from: the groups, and their contents parked in a temp folder. */
struct xplan {
	struct xgroup *g;
	size_t ng;
	struct mc_arena keys; /* the keys of groups made by type */
	char *need;           /* per object: parked */
	struct mc_parts p;
};

/* Contents arrive in hash order but are written in blob order: the objects of the
 * groups are parked on disk in a folder <prefix>XXXXXX, so memory stays bounded; a
 * failure to write them names name (the blob's file, or the temp folder). */
static int
park_contents(mc_bundle *b, const char *prefix, const char *name, struct xplan *x)
{
	size_t i, j;

	if ((x->need = calloc(b->m.nobjects + 1, 1)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < x->ng; i++)
		for (j = 0; j < x->g[i].n; j++)
			x->need[x->g[i].ents[j].object] = 1;
	return mc__parts_extract(b, prefix, name, x->need, &x->p);
}

/* The checks of an export, then its groups and their contents parked (see
 * park_contents); export_done() undoes it, failed or not. */
static int
export_prepare(mc_bundle *b, int format, const char *prefix, const char *name,
	       mc_artifact_fn left_out, void *ud, struct xplan *x)
{
	int rc;

	memset(x, 0, sizeof *x);
	x->p.dfd = -1;
	x->p.fd = -1;
	/* What verify refuses is not exported either: every key, the recorded layout's
	 * too, is checked by its handler, since torch makes file names of them. */
	rc = mc__bundle_checks(b, NULL, NULL);
	if (rc == MC_OK)
		rc = export_layout(b, format, &x->keys, &x->g, &x->ng);
	if (rc == MC_OK && left_out != NULL)
		rc = report_left_out(b, format, left_out, ud);
	if (rc == MC_OK && x->ng == 0)
		rc = mc__err(b->ctx, MC_ERR_INVALID, "%s: no torch artifacts to export", b->path);
	if (rc == MC_OK)
		rc = park_contents(b, prefix, name, x);
	return rc;
}

static void
export_done(struct xplan *x)
{
	mc__parts_remove(&x->p);
	free(x->need);
	xgroups_free(x->g, x->ng);
	mc__arena_free(&x->keys);
}

/* The blob after its CRC-32: the version, then the groups (2.7: a type id before each
 * entry instead). */
static int
write_groups(struct crcout *o, mc_bundle *b, int format, const struct xplan *x)
{
	size_t i, j;
	int rc = out_u64(o, 1);

	for (i = 0; rc == MC_OK && i < x->ng; i++) {
		const struct xgroup *g = &x->g[i];
		if (format == MC_TORCH_FORMAT_CURRENT && (rc = out_str(o, g->type)) == MC_OK)
			rc = out_u64(o, g->n);
		for (j = 0; rc == MC_OK && j < g->n; j++) {
			size_t obj = g->ents[j].object;
			struct mc_mobject ob;
			if (format == MC_TORCH_FORMAT_2_7 && (rc = out_u64(o, (uint64_t)g->id27)) != MC_OK)
				break;
			if ((rc = out_str(o, g->ents[j].key)) == MC_OK &&
			    (rc = mc__mobjects(b->ctx, &b->m, obj, 1, &ob)) == MC_OK)
				rc = out_part(o, &x->p, obj, ob.size);
		}
	}
	return rc;
}

/* Writes the blob to fd, an empty file (name names it in messages): its groups, then
 * its CRC-32 in front. */
static int
write_blob(mc_bundle *b, int fd, const char *name, int format, const struct xplan *x)
{
	struct crcout o = {b->ctx, fd, name, 0};
	unsigned char head[4] = {0};
	int rc;

	if (mc__write_all(fd, head, 4) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot write", name);
	if ((rc = write_groups(&o, b, format, x)) != MC_OK)
		return rc;
	head[0] = (unsigned char)(o.crc >> 24);
	head[1] = (unsigned char)(o.crc >> 16);
	head[2] = (unsigned char)(o.crc >> 8);
	head[3] = (unsigned char)o.crc;
	if (mc__pwrite_full(fd, head, 4, 0) != 0)
		return mc__errno(b->ctx, MC_ERR_IO, "cannot write", name);
	return MC_OK;
}

/* The blob written to a temp file beside out_path, renamed into place when complete. */
static int
write_file(mc_bundle *b, const char *out_path, int format, const struct xplan *x)
{
	char *tmp = NULL;
	int fd, rc;

	if ((fd = mc__open_temp_beside(b->ctx, out_path, &tmp, 0644)) < 0)
		return MC_ERR_IO;
	if ((rc = write_blob(b, fd, out_path, format, x)) == MC_OK) {
		rc = mc__commit_temp(b->ctx, fd, tmp, out_path);
	} else {
		close(fd);
		unlink(tmp);
	}
	free(tmp);
	return rc;
}

/* The blob written to a nameless temp file and read back into one buffer (malloc'd),
 * so that it is held once, at its size. */
static int
write_memory(mc_bundle *b, int format, const struct xplan *x, unsigned char **out,
	     size_t *len)
{
	unsigned char *buf = NULL;
	struct stat st;
	int fd, rc;

	if ((fd = mc__open_temp_anon(b->ctx)) < 0)
		return MC_ERR_IO;
	if ((rc = write_blob(b, fd, MC_TB_IN_MEMORY, format, x)) == MC_OK && fstat(fd, &st) != 0)
		rc = mc__errno(b->ctx, MC_ERR_IO, "cannot read back", MC_TB_IN_MEMORY);
	if (rc == MC_OK && (uint64_t)st.st_size > SIZE_MAX - 1)
		rc = mc__err(b->ctx, MC_ERR_LIMIT, "%s: %llu bytes do not fit in memory",
			     MC_TB_IN_MEMORY, (unsigned long long)st.st_size);
	if (rc == MC_OK && (buf = malloc((size_t)st.st_size + 1)) == NULL)
		rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if (rc == MC_OK && mc__pread_full(fd, buf, (size_t)st.st_size, 0) != 0)
		rc = mc__errno(b->ctx, MC_ERR_IO, "cannot read back", MC_TB_IN_MEMORY);
	close(fd);
	if (rc != MC_OK) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = (size_t)st.st_size;
	return MC_OK;
}

int
mc_bundle_export_torch(mc_bundle *b, const char *out_path)
{
	return mc_bundle_export_torch_as(b, out_path, MC_TORCH_FORMAT_CURRENT, NULL, NULL);
}

static int
format_ok(int format)
{
	return format == MC_TORCH_FORMAT_CURRENT || format == MC_TORCH_FORMAT_2_7;
}

int
mc_bundle_export_torch_as(mc_bundle *b, const char *out_path, int format, mc_artifact_fn left_out,
			  void *ud)
{
	struct xplan x;
	char *prefix;
	int rc;

	if (b == NULL || out_path == NULL || !format_ok(format))
		return MC_ERR_INVALID;
	/* The contents are parked beside the output, where there is room for it. */
	if ((prefix = malloc(strlen(out_path) + 4)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	sprintf(prefix, "%s.mc", out_path);
	if ((rc = export_prepare(b, format, prefix, out_path, left_out, ud, &x)) == MC_OK)
		rc = write_file(b, out_path, format, &x);
	export_done(&x);
	free(prefix);
	return rc;
}

int
mc_bundle_export_torch_memory(mc_bundle *b, int format, const void **data, size_t *len,
			      mc_artifact_fn left_out, void *ud)
{
	const char *tmpdir = mc__tmpdir();
	unsigned char *buf = NULL;
	struct xplan x;
	char *prefix;
	size_t n = 0;
	int rc;

	if (b == NULL || data == NULL || len == NULL || !format_ok(format))
		return MC_ERR_INVALID;
	free(b->torch_blob);
	b->torch_blob = NULL;
	*data = NULL;
	*len = 0;
	if ((prefix = malloc(strlen(tmpdir) + sizeof "/megacache-export.")) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	sprintf(prefix, "%s/megacache-export.", tmpdir);
	if ((rc = export_prepare(b, format, prefix, tmpdir, left_out, ud, &x)) == MC_OK)
		rc = write_memory(b, format, &x, &buf, &n);
	export_done(&x);
	free(prefix);
	if (rc == MC_OK) {
		b->torch_blob = buf;
		*data = buf;
		*len = n;
	}
	return rc;
}
