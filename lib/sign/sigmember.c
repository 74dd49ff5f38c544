/*
 * sigmember.c - the signature member of a bundle's manifest, as saving a bundle and
 * adding a signature to one both make it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sign/sign.h"

int
mc__sig_member(mc_ctx *ctx, const mc_seckey *sk, const unsigned char prehash[MC_SIG_PREHASH],
	       int64_t created, char **text, size_t *len, char id[17])
{
	struct mc_sig sig;
	char tc[128];
	int rc;

	*text = NULL;
	snprintf(tc, sizeof tc, MC_SIG_TRUSTED_FMT, (long long)created);
	if ((rc = mc__sig_make_prehashed(ctx, sk, prehash, tc, &sig)) != MC_OK)
		return rc;
	*text = mc__sig_render(&sig, len);
	memcpy(id, sig.id, 17);
	mc__sig_clear(&sig);
	if (*text == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}
