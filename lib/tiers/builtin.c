/*
 * builtin.c - the built-in types: the one file that knows which tables of types the
 * library has, each of which registers itself, here for every new context.
 */
#include "config.h"

#include "tiers/tiers.h"

int
mc__register_builtin(mc_ctx *ctx)
{
	int rc;

	if ((rc = mc__register_torch(ctx)) != MC_OK)
		return rc;
	if ((rc = mc__register_vllm(ctx)) != MC_OK)
		return rc;
	ctx->nbuiltin = ctx->ntypes;
	return MC_OK;
}
