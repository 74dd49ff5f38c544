/*
 * keepnew.c - mc_writer_drop_known: a writer keeps only what earlier bundles lack, found
 * in one merge walk of its artifacts, sorted, and the bundles' tables, sorted too.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "write/write.h"

/* A base bundle as the walk reads it: its artifacts before next are passed. */
struct kbase {
	const mc_bundle *b;
	struct mc_acur cur;
	size_t next;
};

struct keepnew {
	mc_writer *w;
	struct kbase *bases;
	size_t nbases;
	struct mc_wsave sv;      /* the artifacts sorted; sv.kept */
	unsigned char *gone;     /* per artifact recorded, by the order recorded */
	struct mc_wread rd;      /* for the contents hashed */
	mc_diff_fn fn;
	void *ud;
	size_t ngone;
};

static int
kn_start(struct keepnew *kn, mc_writer *w, mc_bundle *const *bases, size_t n)
{
	size_t i, narts = (size_t)w->narts + 1;
	int rc;

	/* A base read from a pipe reads its tables now (format version 2). */
	for (i = 0; i < n; i++)
		if ((rc = mc__bundle_index(bases[i])) != MC_OK) {
			if (bases[i]->ctx != w->ctx)
				mc__err(w->ctx, rc, "%s", mc_ctx_error(bases[i]->ctx));
			return rc;
		}
	kn->w = w;
	kn->nbases = n;
	kn->sv.w = w;
	kn->rd.ctx = w->ctx;
	mc__store_init(&kn->sv.uniq, "artifact sort");
	mc__store_init(&kn->sv.dups, "artifact sort");
	if ((kn->bases = calloc(n + 1, sizeof *kn->bases)) == NULL ||
	    (kn->sv.oi = calloc((size_t)w->nobjs + 1, sizeof *kn->sv.oi)) == NULL ||
	    (kn->sv.kept = calloc(narts, sizeof *kn->sv.kept)) == NULL ||
	    (kn->gone = calloc(narts, 1)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		kn->bases[i].b = bases[i];
		mc__acur_init(&kn->bases[i].cur, w->ctx, &bases[i]->m, mc__find_type);
	}
	return MC_OK;
}

static void
kn_end(struct keepnew *kn)
{
	size_t i;

	for (i = 0; kn->bases != NULL && i < kn->nbases; i++)
		mc__acur_free(&kn->bases[i].cur);
	free(kn->bases);
	free(kn->sv.oi);
	free(kn->sv.kept);
	free(kn->gone);
	free(kn->rd.buf);
	mc__store_free(&kn->sv.uniq);
	mc__store_free(&kn->sv.dups);
}

/* Passes base kb's artifacts before (type, key); *x gets its artifact with that type
 * and key (valid until the cursor's next read), or NULL. A base's entry keyed by torch's
 * key alone (made before entries were kept) is compared as the key with its entry. */
static int
base_find(struct kbase *kb, const char *type, const char *key, const struct mc_martifact **x)
{
	*x = NULL;
	while (kb->next < kb->b->m.nartifacts) {
		const struct mc_martifact *y;
		char ky[MC_KEY_MAX + 1];
		int c, rc;

		if ((rc = mc__acur_get(&kb->cur, kb->next, &y)) != MC_OK)
			return rc;
		if ((c = strcmp(y->type, type)) == 0) {
			mc__entry_key(y->handler, y->key, y->sha256, ky, sizeof ky);
			c = strcmp(ky, key);
		}
		if (c == 0)
			*x = y;
		if (c >= 0)
			return MC_OK;
		kb->next++;
	}
	return MC_OK;
}

/* The hash of object i's content, by halg: the writer's is read from its source now
 * when it is pending (and recorded, so that neither this nor the save reads it twice
 * for it); another (a base bundle of the other format version's) is read each time. */
static int
object_hash(struct keepnew *kn, uint32_t i, int halg, unsigned char hash[MC_HASH_BYTES])
{
	mc_writer *w = kn->w;
	char name[MC_PATH_MAX];
	struct mc_wsource src;
	struct mc_wobj o;
	int rc;

	if ((rc = mc__wobj_get(w, w->ctx, i, &o)) != MC_OK)
		return rc;
	if (!(o.flags & MC_WOBJ_PENDING) && halg == w->halg) {
		memcpy(hash, o.hash, MC_HASH_BYTES);
		return MC_OK;
	}
	if ((rc = mc__wobj_path(w, w->ctx, &o, name)) != MC_OK ||
	    (rc = mc__wsource_open(w->ctx, &src, w, &o, name)) != MC_OK)
		return rc;
	kn->rd.halg = halg;
	rc = mc__wsource_digest(&kn->rd, &src, o.offset, o.size, hash, NULL, NULL, NULL);
	mc__wsource_close(&src);
	if (rc != MC_OK || halg != w->halg || !(o.flags & MC_WOBJ_PENDING))
		return rc;
	return mc__wobj_hashed(w, i, hash);
}

/* Artifact a, the one its (type, key) keeps: *known when a base has its type, key,
 * content and executable bit; else told to fn. Its content is read only when a base
 * has its size. */
static int
judge(struct keepnew *kn, const struct mc_wart *a, const char *key, int *known)
{
	mc_writer *w = kn->w;
	const char *type = w->types[a->type];
	unsigned char h[2][MC_HASH_BYTES]; /* BLAKE2b-256, SHA-256 */
	uint64_t size_a = 0;
	int rc, have_h[2] = {0, 0}, found = 0;
	size_t i;

	*known = 0;
	for (i = 0; i < kn->nbases; i++) {
		const struct mc_martifact *x;
		struct mc_mobject mo;
		int halg, k;

		if ((rc = base_find(&kn->bases[i], type, key, &x)) != MC_OK)
			return rc;
		if (x == NULL)
			continue;
		found = 1;
		size_a = x->size;
		if (x->size != a->size)
			continue;
		halg = kn->bases[i].b->m.halg;
		k = halg == MC_HALG_SHA256;
		if ((rc = mc__mobjects(w->ctx, &kn->bases[i].b->m, x->object, 1, &mo)) != MC_OK ||
		    (!have_h[k] && (rc = object_hash(kn, a->obj, halg, h[k])) != MC_OK))
			return rc;
		have_h[k] = 1;
		/* A file that became executable (or stopped) is new: its mode is installed. */
		if (memcmp(h[k], mo.hash, MC_HASH_BYTES) == 0 &&
		    x->executable == (int)a->executable) {
			*known = 1;
			return MC_OK;
		}
	}
	if (kn->fn != NULL)
		kn->fn(kn->ud, found ? MC_DIFF_CHANGED : MC_DIFF_ADDED, type, key, size_a, a->size);
	return MC_OK;
}

/* Walks the sorted artifacts, marking in kn->gone (by the order recorded of the one
 * each (type, key) keeps) those the bases know. */
static int
walk(struct keepnew *kn)
{
	mc_writer *w = kn->w;
	char key[MC_KEY_MAX + 1];
	struct mc_sreader r;
	struct mc_wart a;
	int rc, got = 1, known;

	rc = mc__sreader_init(w->ctx, &r, &kn->sv.uniq, 0, mc__store_size(&kn->sv.uniq),
			      MC_WSORT_READ);
	while (rc == MC_OK) {
		if ((rc = mc__wart_next(w->ctx, &r, &a, (unsigned char *)key, &got)) != MC_OK ||
		    !got)
			break;
		key[a.key_len] = '\0';
		if ((rc = judge(kn, &a, key, &known)) == MC_OK && known) {
			kn->gone[a.seq] = 1;
			kn->ngone++;
		}
	}
	free(r.buf);
	return rc;
}

int
mc_writer_drop_known(mc_writer *w, mc_bundle *const *bases, size_t n, mc_diff_fn fn, void *ud)
{
	struct keepnew kn;
	uint32_t i;
	size_t k;
	int rc;

	if (w == NULL || (bases == NULL && n > 0))
		return MC_ERR_INVALID;
	for (k = 0; k < n; k++)
		if (bases[k] == NULL)
			return MC_ERR_INVALID;
	memset(&kn, 0, sizeof kn);
	kn.fn = fn;
	kn.ud = ud;
	rc = kn_start(&kn, w, bases, n);
	if (rc == MC_OK)
		rc = mc__wsort_artifacts(&kn.sv);
	if (rc == MC_OK)
		rc = walk(&kn);
	if (rc == MC_OK && kn.ngone > 0) {
		/* Every artifact of a (type, key) goes with the one it keeps. In place: the
		 * one kept is recorded last (kept[i] >= i), so its mark is read before it
		 * is overwritten. */
		for (i = 0; i < w->narts; i++)
			kn.gone[i] = kn.gone[kn.sv.kept[i]];
		rc = mc__writer_drop(w, kn.gone);
	}
	kn_end(&kn);
	return rc;
}
