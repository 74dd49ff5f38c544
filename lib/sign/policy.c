/*
 * policy.c - the trust policy as a value: which keys are trusted, how many must sign,
 * the lowest version, the time and the labels a bundle must have, and the one check of
 * a bundle's signatures and facts against it.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sign/sign.h"

void
mc__policy_init(struct mc_policy *p)
{
	memset(p, 0, sizeof *p);
	p->threshold = 1;
}

void
mc__policy_clear(struct mc_policy *p)
{
	size_t i;

	free(p->trusted);
	for (i = 0; i < p->nrequired; i++) {
		free(p->req_keys[i]);
		free(p->req_values[i]);
	}
	free(p->req_keys);
	free(p->req_values);
	mc__policy_init(p);
}

int
mc__policy_trust(mc_ctx *ctx, struct mc_policy *p, const mc_pubkey *pk)
{
	const mc_pubkey **t;
	size_t i;

	for (i = 0; i < p->ntrusted; i++)
		if (memcmp(p->trusted[i]->keynum, pk->keynum, 8) == 0) {
			if (memcmp(p->trusted[i]->pk, pk->pk, 32) != 0)
				return mc__err(ctx, MC_ERR_INVALID, "two different trusted keys share "
					       "the key id %s", pk->id);
			return MC_OK; /* the same key given twice counts once */
		}
	if ((t = realloc(p->trusted, (p->ntrusted + 1) * sizeof *t)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	t[p->ntrusted++] = pk;
	p->trusted = t;
	return MC_OK;
}

int
mc__policy_require_label(mc_ctx *ctx, struct mc_policy *p, const char *key, const char *value)
{
	size_t n = p->nrequired;
	char **k, **v, *ks, *vs;

	/* Both arrays grow first; the count only once both strings are held. */
	if ((k = realloc(p->req_keys, (n + 1) * sizeof *k)) != NULL)
		p->req_keys = k;
	if ((v = realloc(p->req_values, (n + 1) * sizeof *v)) != NULL)
		p->req_values = v;
	if (k == NULL || v == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	ks = mc__strdup(key);
	vs = mc__strdup(value);
	if (ks == NULL || vs == NULL) {
		free(ks);
		free(vs);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	k[n] = ks;
	v[n] = vs;
	p->nrequired = n + 1;
	return MC_OK;
}

/* The distinct public keys among the trusted keys marked in hit (all when NULL): one
 * Ed25519 key given under several key ids is one signer, not several. */
static size_t
distinct_keys(const struct mc_policy *p, const unsigned char *hit)
{
	size_t i, j, n = 0;

	for (i = 0; i < p->ntrusted; i++) {
		if (hit != NULL && !hit[i])
			continue;
		for (j = 0; j < i; j++)
			if ((hit == NULL || hit[j]) && memcmp(p->trusted[j]->pk, p->trusted[i]->pk, 32) == 0)
				break;
		n += j == i;
	}
	return n;
}

int
mc__policy_sig_state(const struct mc_policy *p, const struct mc_sig *sig,
		     const unsigned char *prehash, size_t *which)
{
	size_t j;

	if (p->insecure)
		return MC_SIG_NOT_CHECKED;
	/* No two trusted keys share a key id (mc__policy_trust): the first match is the key. */
	for (j = 0; j < p->ntrusted; j++) {
		if (memcmp(sig->keynum, p->trusted[j]->keynum, 8) != 0)
			continue;
		if (which != NULL)
			*which = j;
		return mc__sig_verify_prehashed(sig, p->trusted[j], prehash) == 0 ? MC_SIG_VERIFIED
										     : MC_SIG_BROKEN;
	}
	return MC_SIG_NOT_CHECKED;
}

/* Verifies every signature by a trusted key id, marking in hit the keys that signed;
 * good counts the signatures that verified. */
static int
verify_trusted(mc_ctx *ctx, const struct mc_policy *p, const struct mc_policy_facts *f,
	       unsigned char *hit, size_t *good)
{
	size_t i, j;

	*good = 0;
	for (i = 0; i < f->nsigs; i++)
		switch (mc__policy_sig_state(p, f->sigs[i], f->prehash, &j)) {
		case MC_SIG_BROKEN:
			return mc__err(ctx, MC_ERR_BAD_SIGNATURE, "%s: the signature by trusted "
				       "key %s does not verify", f->path, f->sigs[i]->id);
		case MC_SIG_VERIFIED:
			hit[j] = 1;
			(*good)++;
			break;
		default:
			break;
		}
	return MC_OK;
}

/* Counts the distinct trusted keys whose signatures verify against the threshold. */
static int
check_signers(mc_ctx *ctx, const struct mc_policy *p, const struct mc_policy_facts *f)
{
	size_t good, keys, ntrusted = distinct_keys(p, NULL);
	unsigned char *hit;
	int rc;

	if (p->ntrusted == 0)
		return mc__err(ctx, MC_ERR_INVALID, "%s: no trusted public key given", f->path);
	if (p->threshold > ntrusted)
		return mc__err(ctx, MC_ERR_THRESHOLD, "%s: threshold %u cannot be met: only "
			       "%zu distinct trusted key%s given", f->path, p->threshold, ntrusted,
			       ntrusted == 1 ? "" : "s");
	if ((hit = calloc(p->ntrusted, 1)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	rc = verify_trusted(ctx, p, f, hit, &good);
	keys = distinct_keys(p, hit);
	free(hit);
	if (rc != MC_OK)
		return rc;
	if (good == 0)
		return f->nsigs == 0
			       ? mc__err(ctx, MC_ERR_NO_SIGNATURE, "%s: the bundle is not signed", f->path)
			       : mc__err(ctx, MC_ERR_NO_SIGNATURE, "%s: no signature by a trusted key "
					 "(signed by %zu untrusted key%s, first %s)", f->path, f->nsigs,
					 f->nsigs == 1 ? "" : "s", f->sigs[0]->id);
	if (keys < p->threshold)
		return mc__err(ctx, MC_ERR_THRESHOLD, "%s: %zu valid trusted signature%s, %u "
			       "required%s", f->path, keys, keys == 1 ? "" : "s", p->threshold,
			       keys < good ? " (one public key under several key ids counts once)" : "");
	return MC_OK;
}

/* Every required label must be among the bundle's with the same value. */
static int
check_labels(mc_ctx *ctx, const struct mc_policy *p, const struct mc_policy_facts *f)
{
	size_t i, j;

	for (i = 0; i < p->nrequired; i++) {
		const char *have = NULL;
		for (j = 0; j < f->nlabels; j++)
			if (strcmp(f->label_keys[j], p->req_keys[i]) == 0)
				have = f->label_values[j];
		if (have == NULL)
			return mc__err(ctx, MC_ERR_LABEL, "%s: label %s=%s is required; the bundle has "
				       "no label %s", f->path, p->req_keys[i], p->req_values[i],
				       p->req_keys[i]);
		if (strcmp(have, p->req_values[i]) != 0)
			return mc__err(ctx, MC_ERR_LABEL, "%s: label %s is '%s' in the bundle, '%s' "
				       "required", f->path, p->req_keys[i], have, p->req_values[i]);
	}
	return MC_OK;
}

/* t as ISO 8601 in UTC (2026-12-01T00:00:00Z), the form the tool prints times in; a
 * time gmtime cannot take stays a number. */
static void
utc_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
}

int
mc__policy_check(mc_ctx *ctx, const struct mc_policy *p, const struct mc_policy_facts *f)
{
	char at[32], now_at[32];
	int64_t now;
	int rc;

	if (!p->insecure && (rc = check_signers(ctx, p, f)) != MC_OK)
		return rc;
	now = p->have_now ? p->now : (int64_t)time(NULL);
	if (f->expires != 0 && now >= f->expires) {
		utc_time(f->expires, at, sizeof at);
		utc_time(now, now_at, sizeof now_at);
		return mc__err(ctx, MC_ERR_EXPIRED, "%s: expired at %s (now %s)", f->path, at,
			       now_at);
	}
	if (f->version < p->min_version)
		return mc__err(ctx, MC_ERR_ROLLBACK, "%s: bundle version %llu is below the minimum "
			       "%llu", f->path, (unsigned long long)f->version,
			       (unsigned long long)p->min_version);
	return check_labels(ctx, p, f);
}
