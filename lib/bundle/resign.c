/*
 * resign.c - a copy of a bundle with one more signature: the manifest and every
 * object's stored bytes copied as they are, the new signature among the others in
 * key-id order (replacing one by the same key).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "bundle/bundle.h"

struct resign {
	mc_bundle *b;
	mc_emit *e;
	size_t cur;
	int started;
};

static int
resign_sink(void *ud, size_t obj, const unsigned char *buf, size_t n)
{
	struct resign *r = ud;
	char name[128];
	int rc;

	/* Stored bytes are copied as they are, in the same order; each member starts at
	 * its first byte. */
	while (!r->started || r->cur != obj) {
		size_t next = r->started ? r->cur + 1 : 0;
		struct mc_mobject o;
		if ((rc = mc__mobjects(r->b->ctx, &r->b->m, next, 1, &o)) != MC_OK)
			return rc;
		mc__object_member(o.hash, name, sizeof name);
		if ((rc = mc__emit_member(r->e, name, o.stored_size)) != MC_OK)
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

/* Writes the copy: the manifest's bytes, the n signatures, then every object. */
static int
write_copy(mc_bundle *b, const char *out_path, const unsigned char *mbytes, char *const *texts,
	   const size_t *lens, const char (*ids)[17], size_t n)
{
	struct resign r;
	int rc;

	memset(&r, 0, sizeof r);
	r.b = b;
	if ((rc = mc__emit_open(b->ctx, out_path, &r.e)) != MC_OK)
		return rc;
	if ((rc = mc__emit_head(r.e, (const char *)mbytes, b->mlen, texts, lens, ids, n)) == MC_OK)
		rc = mc__bundle_stream(b, NULL, resign_sink, &r);
	/* Objects with no bytes never reached the sink. */
	while (rc == MC_OK && (r.started ? r.cur + 1 : 0) < b->m.nobjects)
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
	int rc;

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
	rc = write_copy(b, out_path, mbytes, texts, lens, (const char (*)[17])ids, n);
out:
	free(mine);
	free(mbytes);
	free(texts);
	free(lens);
	free(ids);
	return rc;
}
