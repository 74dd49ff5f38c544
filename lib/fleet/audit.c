/* audit.c - what in torch's and Triton's Redis caches no trusted bundle vouches for:
 * every entry of their key spaces, taken back to its artifact and hashed, against the
 * hashes the bundles' signed manifests list under its remote key. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "fleet/fleet.h"

struct vouch { /* a remote key a bundle has, and the hash of its content */
	char *rkey;
	unsigned char hash[MC_HASH_BYTES];
	int halg; /* which hash: its bundle's format version's */
};

struct audit {
	mc_ctx *ctx;
	unsigned spaces;
	const char *tformat;
	struct vouch *v;
	size_t n, cap;
	size_t unvouched;
	mc_remote_fn fn;
	void *ud;
};

static int
vouch_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vouch *)a)->rkey, ((const struct vouch *)b)->rkey);
}

static int
add_vouch(struct audit *au, const char *rkey, const unsigned char *hash, int halg)
{
	if (mc__grow(&au->v, &au->cap, au->n + 1, sizeof *au->v) != MC_OK)
		return mc__err(au->ctx, MC_ERR_NOMEM, "out of memory");
	if ((au->v[au->n].rkey = mc__strdup(rkey)) == NULL)
		return mc__err(au->ctx, MC_ERR_NOMEM, "out of memory");
	au->v[au->n].halg = halg;
	memcpy(au->v[au->n++].hash, hash, MC_HASH_BYTES);
	return MC_OK;
}

/* The remote keys of b's artifacts, once its signatures and policy are checked. */
static int
add_bundle(struct audit *au, mc_bundle *b)
{
	char rkey[MC_RKEY_MAX];
	struct mc_acur cur;
	struct mc_mobject o;
	size_t i;
	int rc;

	if ((rc = mc__bundle_policy(b)) != MC_OK)
		return rc;
	mc__acur_init(&cur, b->ctx, &b->m, NULL);
	for (i = 0; i < b->m.nartifacts && rc == MC_OK; i++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK ||
		    mc__remote_key(a->type, a->key, au->tformat, au->spaces, rkey, sizeof rkey) != MC_OK)
			continue;
		if ((rc = mc__mobjects(b->ctx, &b->m, a->object, 1, &o)) == MC_OK)
			rc = add_vouch(au, rkey, o.hash, b->m.halg);
	}
	mc__acur_free(&cur);
	if (rc != MC_OK && b->ctx != au->ctx)
		mc__err(au->ctx, rc, "%s", mc_ctx_error(b->ctx));
	return rc;
}

static int
audit_entry(void *ud, const char *rkey, const unsigned char *v, size_t vn)
{
	struct audit *au = ud;
	char key[MC_RKEY_MAX], why[128];
	unsigned char *c = NULL, hash[2][MC_HASH_BYTES]; /* BLAKE2b-256, SHA-256 */
	int have[2] = {0, 0};
	const char *type = NULL;
	struct vouch probe, *hit;
	size_t cn = 0;
	int rc, what = MC_REMOTE_UNVOUCHED;

	rc = mc__entry_read(au->ctx, rkey, v, vn, au->tformat, au->spaces, &type, key, sizeof key,
			    &c, &cn, why, sizeof why);
	if (rc == 2)
		return MC_OK;
	if (rc < 0)
		return mc__err(au->ctx, rc, "out of memory");
	if (rc == 1) {
		what = MC_REMOTE_ODD;
	} else {
		probe.rkey = (char *)rkey;
		if ((hit = bsearch(&probe, au->v, au->n, sizeof *au->v, vouch_cmp)) != NULL) {
			/* bsearch lands on any of a run of one key: look at all of it */
			while (hit > au->v && strcmp(hit[-1].rkey, rkey) == 0)
				hit--;
			what = MC_REMOTE_DIFFERS;
			for (; hit < au->v + au->n && strcmp(hit->rkey, rkey) == 0; hit++) {
				int k = hit->halg == MC_HALG_SHA256; /* each hash made once */
				if (!have[k] && mc__chash(hit->halg, hash[k], c, cn) != MC_OK) {
					rc = mc__err(au->ctx, MC_ERR_NOMEM, "out of memory");
					break;
				}
				have[k] = 1;
				if (memcmp(hit->hash, hash[k], MC_HASH_BYTES) == 0)
					what = MC_REMOTE_VOUCHED;
			}
		}
	}
	free(c);
	if (rc < 0)
		return rc;
	if (what != MC_REMOTE_VOUCHED)
		au->unvouched++;
	if (au->fn != NULL)
		au->fn(au->ud, what, rc == MC_OK ? type : NULL, rc == MC_OK ? key : NULL, rkey,
		       rc == MC_OK ? cn : vn);
	return MC_OK;
}

int
mc_redis_audit(mc_redis *r, mc_bundle *const *b, size_t n, unsigned flags, mc_remote_fn fn,
	       void *ud, size_t *unvouched)
{
	struct audit au;
	size_t i;
	int rc = MC_OK;

	if (r == NULL || (n > 0 && b == NULL))
		return MC_ERR_INVALID;
	memset(&au, 0, sizeof au);
	au.ctx = mc__redis_ctx(r), au.fn = fn, au.ud = ud;
	au.spaces = MC_SPACE_TORCH | (flags & MC_PULL_TRITON ? MC_SPACE_TRITON : 0);
	au.tformat = mc__redis_triton_format(r);
	for (i = 0; i < n && rc == MC_OK; i++)
		rc = add_bundle(&au, b[i]);
	if (rc == MC_OK) {
		qsort(au.v, au.n, sizeof *au.v, vouch_cmp);
		rc = mc__store_each(r, NULL, au.spaces, "audit", audit_entry, &au);
	}
	if (unvouched != NULL)
		*unvouched = au.unvouched;
	for (i = 0; i < au.n; i++)
		free(au.v[i].rkey);
	free(au.v);
	return rc;
}
