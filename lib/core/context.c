/*
 * context.c - the context's life: made with its default caps and the built-in types,
 * and freed with what its registry holds. Its settings are settings.c's, its registry
 * of types and tiers tiers/registry.c's.
 */
#include "config.h"

#include <stdlib.h>

#include "core/core.h"

/* Default caps; format/SPEC.md documents them. */
#define MC_DEFAULT_MAX_MANIFEST (64ull << 20)
#define MC_DEFAULT_MAX_ARTIFACTS 1000000ull
#define MC_DEFAULT_MAX_ARTIFACT_BYTES ((8ull << 30) - 1) /* ustar size field */
#define MC_DEFAULT_MAX_TOTAL_BYTES (256ull << 30)

static void
ctx_init(mc_ctx *ctx)
{
	ctx->max_manifest = MC_DEFAULT_MAX_MANIFEST;
	ctx->max_artifacts = MC_DEFAULT_MAX_ARTIFACTS;
	ctx->max_artifact_bytes = MC_DEFAULT_MAX_ARTIFACT_BYTES;
	ctx->max_total_bytes = MC_DEFAULT_MAX_TOTAL_BYTES;
	ctx->max_expansion = MC_DEFAULT_MAX_EXPANSION;
	ctx->objects_in_memory = MC_OBJECTS_IN_MEMORY;
	ctx->owner_uid = -1;
	ctx->owner_gid = -1;
	ctx->cancel = &ctx->cancel_flag;
}

/* The built-in types come from tiers/, above core/: mc__register_builtin() is the one
 * function of a part above that core/ calls (lib/README.md). */
int
mc_ctx_new(mc_ctx **out)
{
	mc_ctx *ctx;
	int rc;

	if (out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	ctx = calloc(1, sizeof *ctx);
	if (ctx == NULL)
		return MC_ERR_NOMEM;
	ctx_init(ctx);
	mc__prof_init(ctx);
	if ((rc = mc__crypto_init(ctx)) != MC_OK) {
		mc_ctx_free(ctx);
		return rc;
	}
	if ((rc = mc__register_builtin(ctx)) != MC_OK) {
		mc_ctx_free(ctx);
		return rc;
	}
	*out = ctx;
	return MC_OK;
}

void
mc_ctx_free(mc_ctx *ctx)
{
	if (ctx == NULL)
		return;
	mc__prof_report(ctx);
	if (ctx->free_registry != NULL)
		ctx->free_registry(ctx);
	mc__regset_free(ctx->reg);
	free(ctx);
}
