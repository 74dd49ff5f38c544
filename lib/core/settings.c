/*
 * settings.c - the context's own settings: caps, progress, worker threads, the owner of
 * what a load makes; and libsodium set up once. Its life is context.c's, its registry of
 * types and tiers tiers/registry.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "core/core.h"

void
mc_ctx_cancel(mc_ctx *ctx)
{
	if (ctx != NULL && ctx->cancel != NULL)
		atomic_store(ctx->cancel, 1);
}

int
mc__cancel_err(mc_ctx *ctx)
{
	return mc__err(ctx, MC_ERR_CANCELLED, "cancelled");
}

int
mc__crypto_init(mc_ctx *ctx)
{
	/* 1 means "already initialised"; only a negative value is a failure. */
	if (sodium_init() < 0)
		return mc__err(ctx, MC_ERR_CRYPTO, "libsodium could not be initialised");
	return MC_OK;
}

void
mc_ctx_set_progress(mc_ctx *ctx, mc_progress_fn fn, void *ud)
{
	if (ctx == NULL)
		return;
	ctx->progress = fn;
	ctx->progress_ud = ud;
}

void
mc__progress(mc_ctx *ctx, const char *phase, uint64_t done, uint64_t total)
{
	if (ctx->progress != NULL)
		ctx->progress(ctx->progress_ud, phase, done, total);
}

int
mc_ctx_set_limit(mc_ctx *ctx, int which, uint64_t value)
{
	if (ctx == NULL || (value == 0 && which != MC_LIMIT_EXPANSION))
		return MC_ERR_INVALID;
	switch (which) {
	case MC_LIMIT_EXPANSION: ctx->max_expansion = value; break;
	case MC_LIMIT_MANIFEST_BYTES: ctx->max_manifest = value; break;
	case MC_LIMIT_ARTIFACTS: ctx->max_artifacts = value; break;
	case MC_LIMIT_ARTIFACT_BYTES: ctx->max_artifact_bytes = value; break;
	case MC_LIMIT_TOTAL_BYTES: ctx->max_total_bytes = value; break;
	default: return mc__err(ctx, MC_ERR_INVALID, "unknown limit %d", which);
	}
	return MC_OK;
}

int
mc_ctx_set_threads(mc_ctx *ctx, unsigned n)
{
	if (ctx == NULL || n > 1024)
		return MC_ERR_INVALID;
	ctx->threads = n;
	return MC_OK;
}

/* An id fits uid_t and gid_t (32 bits on Linux) and is not their -1, which chown()
 * takes as "unchanged". */
static int
id_ok(long id)
{
	return id == -1 || (id >= 0 && (unsigned long long)id < 0xffffffffull);
}

int
mc_ctx_set_owner(mc_ctx *ctx, long uid, long gid)
{
	if (ctx == NULL)
		return MC_ERR_INVALID;
	if (!id_ok(uid) || !id_ok(gid))
		return mc__err(ctx, MC_ERR_INVALID, "owner %ld:%ld: an id is -1 (unchanged) or 0 to "
			       "4294967294", uid, gid);
	if ((uid != -1 || gid != -1) && geteuid() != 0)
		return mc__err(ctx, MC_ERR_INVALID, "giving the files a load makes to another owner "
			       "needs root; this process runs as uid %lu", (unsigned long)geteuid());
	ctx->owner_uid = uid;
	ctx->owner_gid = gid;
	return MC_OK;
}

unsigned
mc__threads(const mc_ctx *ctx)
{
	long n = ctx->threads > 0 ? (long)ctx->threads : sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > MC_MAX_THREADS ? MC_MAX_THREADS : (unsigned)n;
}

/* ---- registry settings ---- */

struct mc_regset *
mc__regset(mc_ctx *ctx)
{
	if (ctx->reg == NULL && (ctx->reg = calloc(1, sizeof *ctx->reg)) == NULL)
		mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	return ctx->reg;
}

/* Frees s, a secret wiped first. */
static void
free_secret(char *s)
{
	if (s != NULL) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

void
mc__regset_free(struct mc_regset *r)
{
	if (r == NULL)
		return;
	free(r->ca);
	free(r->user);
	free_secret(r->password);
	free(r);
}

/* The seconds of MC_REGISTRY_TIMEOUT: 1 to 86400, decimal. */
static int
parse_timeout(const char *v, unsigned *out)
{
	char *end;
	unsigned long n;

	if (v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < 1 || n > 86400)
		return -1;
	*out = (unsigned)n;
	return 0;
}

int
mc_ctx_set_registry(mc_ctx *ctx, int which, const char *value)
{
	struct mc_regset *r;
	char *copy = NULL, **slot;

	if (ctx == NULL)
		return MC_ERR_INVALID;
	if ((r = mc__regset(ctx)) == NULL)
		return MC_ERR_NOMEM;
	switch (which) {
	case MC_REGISTRY_PLAIN_HTTP:
		r->plain_http = value != NULL && strcmp(value, "0") != 0;
		return MC_OK;
	case MC_REGISTRY_TIMEOUT:
		if (value == NULL)
			r->timeout = 0;
		else if (parse_timeout(value, &r->timeout) != 0)
			return mc__err(ctx, MC_ERR_INVALID, "registry timeout: '%s' is not 1 to 86400 "
				       "seconds", value);
		return MC_OK;
	case MC_REGISTRY_CA: slot = &r->ca; break;
	case MC_REGISTRY_USER: slot = &r->user; break;
	case MC_REGISTRY_PASSWORD: slot = &r->password; break;
	default: return mc__err(ctx, MC_ERR_INVALID, "unknown registry setting %d", which);
	}
	if (value != NULL && (copy = strdup(value)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (which == MC_REGISTRY_PASSWORD)
		free_secret(*slot);
	else
		free(*slot);
	*slot = copy;
	return MC_OK;
}

const char *
mc_ctx_registry_digest(const mc_ctx *ctx, int which)
{
	if (ctx == NULL || ctx->reg == NULL || which < 0 || which > 1 ||
	    ctx->reg->digest[which][0] == '\0')
		return NULL;
	return ctx->reg->digest[which];
}

uint64_t
mc_ctx_registry_size(const mc_ctx *ctx)
{
	return ctx == NULL || ctx->reg == NULL ? 0 : ctx->reg->size;
}
