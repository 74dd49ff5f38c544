/*
 * resign.c - a copy of a bundle with one more signature: the manifest and every
 * object's (in format version 2 the index's and every block's) stored bytes copied as
 * they are, the new signature among the others in key-id order (replacing one by the
 * same key).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read/read.h"

struct resign {
	mc_bundle *b;
	mc_emit *e;
	size_t cur;
	int started;
};

/* Member k after the index or the signatures: object k's, or in format version 2 block
 * k's. */
static int
unit_member(const mc_bundle *b, size_t k, char *name, size_t n, uint64_t *size)
{
	struct mc_mobject o;
	int rc;

	if (b->m.version == 2) {
		snprintf(name, n, "%s%zu", MC_MEMBER_BLOCK_PREFIX, k);
		*size = b->m.blocks[k].stored_size;
		return MC_OK;
	}
	if ((rc = mc__mobjects(b->ctx, &b->m, k, 1, &o)) != MC_OK)
		return rc;
	mc__object_member(o.hash, name, n);
	*size = o.stored_size;
	return MC_OK;
}

static int
resign_sink(void *ud, size_t obj, const unsigned char *buf, size_t n)
{
	struct resign *r = ud;
	char name[128];
	uint64_t size;
	int rc;

	/* Stored bytes are copied as they are, in the same order; each member starts at
	 * its first byte. */
	while (!r->started || r->cur != obj) {
		size_t next = r->started ? r->cur + 1 : 0;
		if ((rc = unit_member(r->b, next, name, sizeof name, &size)) != MC_OK ||
		    (rc = mc__emit_member(r->e, name, size)) != MC_OK)
			return rc;
		r->cur = next;
		r->started = 1;
	}
	return n > 0 ? mc__emit_data(r->e, buf, n) : MC_OK;
}

/* The bundle's signatures in key-id order, with mine (by key id) replacing that key's
 * or inserted; texts, lens and ids have room for b->nsigs + 1. Returns how many. */
static size_t
merge_sigs(const mc_bundle *b, char *mine, size_t minelen, const char *id, char **texts,
	   size_t *lens, char (*ids)[17])
{
	size_t i, n = 0;
	int placed = 0;

	for (i = 0; i <= b->nsigs; i++) {
		int here = i == b->nsigs || strcmp(b->sigs[i].sig.id, id) >= 0;
		if (here && !placed) {
			texts[n] = mine;
			lens[n] = minelen;
			memcpy(ids[n++], id, 17);
			placed = 1;
			if (i < b->nsigs && strcmp(b->sigs[i].sig.id, id) == 0)
				continue;
		}
		if (i < b->nsigs) {
			texts[n] = b->sigs[i].text;
			lens[n] = b->sigs[i].len;
			memcpy(ids[n++], b->sigs[i].sig.id, 17);
		}
	}
	return n;
}

/* Format version 2: the index member copied as it is stored, its bytes checked again
 * against the hash the manifest gives. */
static int
copy_index(struct resign *r)
{
	mc_bundle *b = r->b;
	const struct mc_mindex *x = &b->m.index;
	uint64_t off = b->blocks_at - (x->stored_size + MC_TAR_BLOCK - 1) / MC_TAR_BLOCK *
					      MC_TAR_BLOCK, left;
	unsigned char *buf, hash[MC_HASH_BYTES];
	struct mc_chash h = {0};
	int rc;

	if ((buf = malloc(MC_IO_CHUNK)) == NULL || mc__chash_init(&h, MC_HALG_SHA256) != MC_OK) {
		free(buf);
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	}
	rc = mc__emit_member(r->e, x->encoding == MC_ENC_ZSTD ? MC_MEMBER_INDEX_ZST
			     : MC_MEMBER_INDEX, x->stored_size);
	for (left = x->stored_size; left > 0 && rc == MC_OK;) {
		size_t n = left < MC_IO_CHUNK ? (size_t)left : MC_IO_CHUNK;
		if ((rc = mc__bundle_pread(b->ctx, b, buf, n, off)) != MC_OK)
			break;
		mc__chash_update(&h, buf, n);
		rc = mc__emit_data(r->e, buf, n);
		left -= n;
		off += n;
	}
	mc__chash_final(&h, hash);
	mc__chash_drop(&h);
	free(buf);
	if (rc == MC_OK && memcmp(hash, x->stored_hash, sizeof hash) != 0)
		rc = mc__err(b->ctx, MC_ERR_MALFORMED, "%s: changed while being read", b->path);
	return rc;
}

/* Writes the copy: the manifest's bytes, the n signatures, then every object; to fd
 * when it is not -1 (out_path names it then), else to out_path. */
static int
write_copy(mc_bundle *b, const char *out_path, int fd, const unsigned char *mbytes,
	   char *const *texts, const size_t *lens, const char (*ids)[17], size_t n)
{
	struct resign r;
	size_t units;
	int rc;

	memset(&r, 0, sizeof r);
	r.b = b;
	if (fd >= 0)
		rc = mc__emit_open_fd(b->ctx, fd, out_path, &r.e);
	else
		rc = mc__emit_open(b->ctx, out_path, &r.e);
	if (rc != MC_OK)
		return rc;
	units = b->m.version == 2 ? b->m.nblocks : b->m.nobjects;
	rc = mc__emit_head(r.e, (const char *)mbytes, b->mlen, texts, lens, ids, n);
	if (rc == MC_OK && (b->m.version == 1 || (rc = copy_index(&r)) == MC_OK))
		rc = mc__bundle_stream(b, NULL, resign_sink, &r);
	/* Members with no bytes never reached the sink. */
	while (rc == MC_OK && (r.started ? r.cur + 1 : 0) < units)
		rc = resign_sink(&r, r.started ? r.cur + 1 : 0, NULL, 0);
	if (rc == MC_OK)
		return mc__emit_finish(r.e);
	mc__emit_abort(r.e);
	return rc;
}

int
mc_bundle_add_signature(mc_bundle *b, const mc_seckey *sk, const char *out_path)
{
	char **texts = NULL, *mine = NULL, id[17];
	char (*ids)[17] = NULL;
	size_t *lens = NULL, minelen = 0, n;
	unsigned char *mbytes = NULL;
	int rc, fd;

	if (b == NULL || sk == NULL || out_path == NULL)
		return MC_ERR_INVALID;
	/* The manifest read back matches the prehash the signature is made of. */
	if ((rc = mc__bundle_manifest(b, &mbytes)) != MC_OK ||
	    (rc = mc__sig_member(b->ctx, sk, b->mprehash, b->m.created, &mine, &minelen, id)) !=
		    MC_OK)
		goto out;
	texts = calloc(b->nsigs + 1, sizeof *texts);
	lens = calloc(b->nsigs + 1, sizeof *lens);
	ids = calloc(b->nsigs + 1, sizeof *ids);
	if (texts == NULL || lens == NULL || ids == NULL) {
		rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	n = merge_sigs(b, mine, minelen, id, texts, lens, ids);
	if (!mc_is_reference(out_path))
		rc = write_copy(b, out_path, -1, mbytes, texts, lens, (const char (*)[17])ids, n);
	else if ((fd = mc__open_temp_anon(b->ctx)) < 0)
		rc = MC_ERR_IO;
	else {
		rc = write_copy(b, out_path, fd, mbytes, texts, lens, (const char (*)[17])ids, n);
		if (rc == MC_OK)
			rc = mc__push_bundle(b->ctx, fd, out_path);
		close(fd);
	}
out:
	free(mine);
	free(mbytes);
	free(texts);
	free(lens);
	free(ids);
	return rc;
}
