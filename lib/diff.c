/*
 * diff.c - compares the artifacts of two bundles by (type, key), from their manifests.
 */
#include "config.h"

#include <string.h>

#include "bundle_private.h"

int
mc_bundle_diff(const mc_bundle *a, const mc_bundle *b, mc_diff_fn fn, void *ud)
{
	size_t i = 0, j = 0;

	if (a == NULL || b == NULL || fn == NULL)
		return MC_ERR_INVALID;
	/* Both artifact tables are sorted by (type, key): one merge walk. */
	while (i < a->m.nartifacts || j < b->m.nartifacts) {
		const struct mc_martifact *x = i < a->m.nartifacts ? &a->m.artifacts[i] : NULL;
		const struct mc_martifact *y = j < b->m.nartifacts ? &b->m.artifacts[j] : NULL;
		int c;

		if (x == NULL)
			c = 1;
		else if (y == NULL)
			c = -1;
		else if ((c = strcmp(x->type, y->type)) == 0)
			c = strcmp(x->key, y->key);
		if (c < 0) {
			fn(ud, MC_DIFF_REMOVED, x->type, x->key, x->size, 0);
			i++;
		} else if (c > 0) {
			fn(ud, MC_DIFF_ADDED, y->type, y->key, 0, y->size);
			j++;
		} else {
			struct mc_mobject ox, oy;
			int rc;
			if ((rc = mc__mobjects(a->ctx, &a->m, x->object, 1, &ox)) != MC_OK ||
			    (rc = mc__mobjects(b->ctx, &b->m, y->object, 1, &oy)) != MC_OK)
				return rc;
			if (memcmp(ox.hash, oy.hash, MC_HASH_BYTES) != 0)
				fn(ud, MC_DIFF_CHANGED, x->type, x->key, x->size, y->size);
			i++;
			j++;
		}
	}
	return MC_OK;
}
