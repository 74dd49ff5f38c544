/*
 * diff.c - compares the artifacts of two bundles by (type, key), from their manifests.
 * An entry of torch's guarded caches keyed by torch's key alone (bundles made before
 * entries were kept) compares as the key with its entry.
 */
#include "config.h"

#include <string.h>

#include "read/read.h"

/* Whether two artifacts' contents are the same, from their manifests: by content hash
 * when the bundles hash alike; across format versions 1 and 2 by the SHA-256 a version 1
 * artifact gives (its type needs it), else they count as changed. */
static int
same_content(const mc_bundle *a, const struct mc_martifact *x, const struct mc_mobject *ox,
	     const mc_bundle *b, const struct mc_martifact *y, const struct mc_mobject *oy)
{
	if (a->m.halg == b->m.halg)
		return memcmp(ox->hash, oy->hash, MC_HASH_BYTES) == 0;
	if (a->m.halg == MC_HALG_BLAKE2B)
		return x->sha256 != NULL && memcmp(x->sha256, oy->hash, MC_HASH_BYTES) == 0;
	return y->sha256 != NULL && memcmp(y->sha256, ox->hash, MC_HASH_BYTES) == 0;
}

int
mc_bundle_diff(const mc_bundle *a, const mc_bundle *b, mc_diff_fn fn, void *ud)
{
	struct mc_acur ca, cb;
	size_t i = 0, j = 0;
	int rc = MC_OK;

	if (a == NULL || b == NULL || fn == NULL)
		return MC_ERR_INVALID;
	/* (never const themselves: mc_bundle_open made them) */
	if ((rc = mc_bundle_read_tables((mc_bundle *)a)) != MC_OK ||
	    (rc = mc_bundle_read_tables((mc_bundle *)b)) != MC_OK)
		return rc;
	mc__acur_init(&ca, a->ctx, &a->m, mc__find_type);
	mc__acur_init(&cb, b->ctx, &b->m, mc__find_type);
	/* Both artifact tables are sorted by (type, key): one merge walk. */
	while (rc == MC_OK && (i < a->m.nartifacts || j < b->m.nartifacts)) {
		const struct mc_martifact *x = NULL, *y = NULL;
		char kx[MC_KEY_MAX + 1], ky[MC_KEY_MAX + 1];
		int c;

		if ((i < a->m.nartifacts && (rc = mc__acur_get(&ca, i, &x)) != MC_OK) ||
		    (j < b->m.nartifacts && (rc = mc__acur_get(&cb, j, &y)) != MC_OK))
			break;
		if (x != NULL)
			mc__entry_key(x->handler, x->key, x->sha256, kx, sizeof kx);
		if (y != NULL)
			mc__entry_key(y->handler, y->key, y->sha256, ky, sizeof ky);
		if (x == NULL)
			c = 1;
		else if (y == NULL)
			c = -1;
		else if ((c = strcmp(x->type, y->type)) == 0)
			c = strcmp(kx, ky);
		if (c < 0) {
			fn(ud, MC_DIFF_REMOVED, x->type, kx, x->size, 0);
			i++;
		} else if (c > 0) {
			fn(ud, MC_DIFF_ADDED, y->type, ky, 0, y->size);
			j++;
		} else {
			struct mc_mobject ox, oy;
			if ((rc = mc__mobjects(a->ctx, &a->m, x->object, 1, &ox)) != MC_OK ||
			    (rc = mc__mobjects(b->ctx, &b->m, y->object, 1, &oy)) != MC_OK)
				break;
			if (!same_content(a, x, &ox, b, y, &oy) || x->executable != y->executable)
				fn(ud, MC_DIFF_CHANGED, x->type, kx, x->size, y->size);
			i++;
			j++;
		}
	}
	mc__acur_free(&ca);
	mc__acur_free(&cb);
	return rc;
}
