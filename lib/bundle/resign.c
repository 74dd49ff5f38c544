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

int
mc_bundle_add_signature(mc_bundle *b, const mc_seckey *sk, const char *out_path)
{
	struct resign r;
	struct mc_sig sig;
	char **texts = NULL, tc[128];
	size_t *lens = NULL, n = 0, i;
	char (*ids)[17] = NULL;
	char *mine = NULL;
	unsigned char *mbytes = NULL;
	size_t minelen = 0;
	int rc;

	if (b == NULL || sk == NULL || out_path == NULL)
		return MC_ERR_INVALID;
	snprintf(tc, sizeof tc, "timestamp:%lld\tfile:manifest.json\thashed", (long long)b->m.created);
	memset(&sig, 0, sizeof sig);
	if ((rc = mc__bundle_manifest(b, &mbytes)) != MC_OK ||
	    (rc = mc__sig_make(b->ctx, sk, mbytes, b->mlen, tc, &sig)) != MC_OK) {
		free(mbytes);
		return rc;
	}
	mine = mc__sig_render(&sig, &minelen);
	texts = calloc(b->nsigs + 1, sizeof *texts);
	lens = calloc(b->nsigs + 1, sizeof *lens);
	ids = calloc(b->nsigs + 1, sizeof *ids);
	if (mine == NULL || texts == NULL || lens == NULL || ids == NULL) {
		rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	/* The existing signatures in key-id order, with this key's replaced or inserted. */
	for (i = 0; i <= b->nsigs; i++) {
		int here = i == b->nsigs || strcmp(b->sigs[i].sig.id, sig.id) >= 0;
		if (here && mine != NULL) {
			texts[n] = mine;
			lens[n] = minelen;
			memcpy(ids[n++], sig.id, 17);
			mine = NULL;
			if (i < b->nsigs && strcmp(b->sigs[i].sig.id, sig.id) == 0)
				continue;
		}
		if (i < b->nsigs) {
			texts[n] = b->sigs[i].text;
			lens[n] = b->sigs[i].len;
			memcpy(ids[n++], b->sigs[i].sig.id, 17);
		}
	}
	memset(&r, 0, sizeof r);
	r.b = b;
	if ((rc = mc__emit_open(b->ctx, out_path, &r.e)) != MC_OK)
		goto out;
	if ((rc = mc__emit_head(r.e, (const char *)mbytes, b->mlen, texts, lens,
				(const char (*)[17])ids, n)) == MC_OK)
		rc = mc__bundle_stream(b, NULL, resign_sink, &r);
	/* Objects with no bytes never reached the sink. */
	while (rc == MC_OK && (r.started ? r.cur + 1 : 0) < b->m.nobjects)
		rc = resign_sink(&r, r.started ? r.cur + 1 : 0, NULL, 0);
	if (rc == MC_OK)
		rc = mc__emit_finish(r.e);
	else
		mc__emit_abort(r.e);
out:
	for (i = 0; i < n; i++)
		if (texts[i] != NULL) {
			size_t k;
			int borrowed = 0;
			for (k = 0; k < b->nsigs; k++)
				if (texts[i] == b->sigs[k].text)
					borrowed = 1;
			if (!borrowed)
				free(texts[i]);
		}
	free(mine);
	free(mbytes);
	free(texts);
	free(lens);
	free(ids);
	mc__sig_clear(&sig);
	return rc;
}
