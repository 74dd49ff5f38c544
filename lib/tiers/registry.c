/*
 * registry.c - the context's registry: artifact types (the built-in tables', then what
 * callers register), the tiers they install into, and their roots.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tiers/tiers.h"

/* Frees what the registry holds. Freeing the context calls it through
 * ctx->free_registry, which every allocation for the registry sets first. */
static void
free_registry(mc_ctx *ctx)
{
	size_t i;

	for (i = 0; i < ctx->ntypes; i++)
		free(ctx->types[i].tier);
	free(ctx->types);
	for (i = 0; i < ctx->ntiers; i++) {
		free(ctx->tiers[i].name);
		free(ctx->tiers[i].root);
	}
	free(ctx->tiers);
}

static struct mc_tier *
find_tier(mc_ctx *ctx, const char *name, int create)
{
	struct mc_tier *t;
	size_t i;

	for (i = 0; i < ctx->ntiers; i++)
		if (strcmp(ctx->tiers[i].name, name) == 0)
			return &ctx->tiers[i];
	if (!create)
		return NULL;
	ctx->free_registry = free_registry;
	t = realloc(ctx->tiers, (ctx->ntiers + 1) * sizeof *t);
	if (t == NULL)
		return NULL;
	ctx->tiers = t;
	t = &ctx->tiers[ctx->ntiers];
	t->root = NULL;
	if ((t->name = mc__strdup(name)) == NULL)
		return NULL;
	ctx->ntiers++;
	return t;
}

static int
name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

/* Adds type d (checked) with ud to the registry. */
static int
add_type(mc_ctx *ctx, const struct mc_typedesc *d, void *ud)
{
	struct mc_type *types, *t;

	if (!name_ok(d->name, MC_TYPE_MAX))
		return mc__err(ctx, MC_ERR_INVALID, "type name '%s' is not 1-32 of [a-z0-9_]", d->name);
	if (!name_ok(d->tier, MC_TYPE_MAX))
		return mc__err(ctx, MC_ERR_INVALID, "tier name '%s' is not 1-32 of [a-z0-9_]", d->tier);
	/* MC_TYPE_DERIVE_ALL: the library's own tables, whose types have hooks */
	if ((d->flags & ~(MC_TYPE_WANTS_SHA256 | MC_TYPE_FOLDER_UNIT |
			  (d->derive != NULL ? MC_TYPE_DERIVE_ALL : 0))) != 0)
		return mc__err(ctx, MC_ERR_INVALID, "type %s: unknown flags", d->name);
	if (mc__find_type(ctx, d->name) != NULL)
		return mc__err(ctx, MC_ERR_INVALID, "type %s is already registered", d->name);
	ctx->free_registry = free_registry;
	types = realloc(ctx->types, (ctx->ntypes + 1) * sizeof *types);
	if (types == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	ctx->types = types;
	t = &types[ctx->ntypes];
	memset(t, 0, sizeof *t);
	memcpy(t->name, d->name, strlen(d->name) + 1);
	if ((t->tier = mc__strdup(d->tier)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	t->flags = d->flags;
	t->key_check = d->key_check;
	t->dest_path = d->dest_path;
	t->ud = ud;
	t->default_root = d->default_root;
	t->torch27_id = d->torch27_id;
	t->export_rank = d->export_rank;
	t->record = d->record;
	t->derive = d->derive;
	t->unit_key = d->unit_key;
	t->used_role = d->used_role;
	ctx->ntypes++;
	return MC_OK;
}

int
mc__register_types(mc_ctx *ctx, const struct mc_typedesc *d, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = add_type(ctx, &d[i], ctx)) != MC_OK)
			return rc;
	return MC_OK;
}

int
mc_ctx_set_tier_root(mc_ctx *ctx, const char *tier, const char *path)
{
	struct mc_tier *t;
	char *copy;

	if (ctx == NULL || tier == NULL || path == NULL)
		return MC_ERR_INVALID;
	if (!name_ok(tier, MC_TYPE_MAX))
		return mc__err(ctx, MC_ERR_INVALID, "tier name '%s' is not 1-32 of [a-z0-9_]", tier);
	if (path[0] == '\0' || strlen(path) >= MC_PATH_MAX)
		return mc__err(ctx, MC_ERR_INVALID, "the cache folder for %s: empty or too long path",
			       tier);
	if ((t = find_tier(ctx, tier, 1)) == NULL || (copy = mc__strdup(path)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	free(t->root);
	t->root = copy;
	t->named = strlen(copy);
	ctx->roots_gen++;
	if (strcmp(tier, "triton") == 0)
		ctx->triton_flat = 1;
	return MC_OK;
}

int
mc_ctx_tier_root(mc_ctx *ctx, const char *tier, const char **path)
{
	size_t named;

	return mc__tier_root(ctx, tier, path, &named);
}

/* The default root of a tier: that of its first type that has one. */
static mc_root_fn
default_root(const mc_ctx *ctx, const char *tier)
{
	size_t i;

	for (i = 0; i < ctx->ntypes; i++)
		if (ctx->types[i].default_root != NULL && strcmp(ctx->types[i].tier, tier) == 0)
			return ctx->types[i].default_root;
	return NULL;
}

int
mc__tier_root(mc_ctx *ctx, const char *tier, const char **path, size_t *named)
{
	struct mc_tier *t;
	mc_root_fn dflt;
	char *root;
	size_t root_named;
	int rc;

	if (ctx == NULL || tier == NULL || path == NULL)
		return MC_ERR_INVALID;
	*path = NULL;
	t = find_tier(ctx, tier, 0);
	if (t != NULL && t->root != NULL) {
		*path = t->root;
		*named = t->named;
		return MC_OK;
	}
	if ((dflt = default_root(ctx, tier)) == NULL)
		return mc__err(ctx, MC_ERR_INVALID, "tier %s has no root folder set", tier);
	if ((rc = dflt(ctx, &root, &root_named)) != MC_OK)
		return rc;
	if ((t = find_tier(ctx, tier, 1)) == NULL) {
		free(root);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	t->root = root;
	t->named = root_named;
	*path = t->root;
	*named = t->named;
	return MC_OK;
}

int
mc_ctx_register_type(mc_ctx *ctx, const char *type, const char *tier, unsigned flags,
		     mc_key_check_fn key_check, mc_dest_path_fn dest_path, void *ud)
{
	struct mc_typedesc d = {.name = type, .tier = tier, .flags = flags,
				 .key_check = key_check, .dest_path = dest_path,
				 .torch27_id = -1, .export_rank = -1};

	if (ctx == NULL || type == NULL || tier == NULL || key_check == NULL || dest_path == NULL)
		return MC_ERR_INVALID;
	return add_type(ctx, &d, ud);
}

const char *
mc_ctx_type_tier(const mc_ctx *ctx, const char *type)
{
	const struct mc_type *t;

	if (ctx == NULL || type == NULL || (t = mc__find_type(ctx, type)) == NULL)
		return NULL;
	return t->tier;
}

const char *
mc_ctx_type_name(const mc_ctx *ctx, size_t i)
{
	if (ctx == NULL || i >= ctx->ntypes)
		return NULL;
	return ctx->types[i].name;
}

const struct mc_type *
mc__find_type(const mc_ctx *ctx, const char *type)
{
	size_t i;

	for (i = 0; i < ctx->ntypes; i++)
		if (strcmp(ctx->types[i].name, type) == 0)
			return &ctx->types[i];
	return NULL;
}

int
mc__unit_folder(const struct mc_type *t, const char *key)
{
	return (t->flags & MC_TYPE_FOLDER_UNIT) != 0 || (t->unit_key != NULL && t->unit_key(key));
}

/* A destination must be a plain relative path: no absolute path, no empty, "." or ".."
 * component, no backslash and no control character. Handlers are trusted to compute
 * paths, but this check keeps one buggy handler from escaping its tier. */
static int
dest_ok(const char *p)
{
	const char *c = p, *seg = p;
	uint32_t cp;

	/* No character a terminal or a log would take as a control, as in labels; only
	 * valid UTF-8; no backslash. */
	if (*p == '\0' || *p == '/' || strchr(p, '\\') != NULL ||
	    mc__text_check(p, strlen(p), 0, &cp) != 0)
		return 0;
	for (;; c++) {
		if (*c == '/' || *c == '\0') {
			size_t n = (size_t)(c - seg);
			if (n == 0 || (n == 1 && seg[0] == '.') ||
			    (n == 2 && seg[0] == '.' && seg[1] == '.') || n > 255)
				return 0;
			if (*c == '\0')
				return 1;
			seg = c + 1;
		}
	}
}

int
mc__key_check(mc_ctx *ctx, const struct mc_type *t, const char *key)
{
	char why[256] = "";
	int rc;

	if (strlen(key) == 0 || strlen(key) > MC_KEY_MAX)
		return mc__err(ctx, MC_ERR_BAD_KEY, "%s key of %zu bytes (must be 1-%d)", t->name,
			       strlen(key), MC_KEY_MAX);
	rc = t->key_check(t->ud, key, why, sizeof why);
	why[sizeof why - 1] = '\0';
	if (rc != MC_OK)
		return mc__err(ctx, MC_ERR_BAD_KEY, "%s key '%.200s' refused: %s", t->name, key,
			       why[0] ? why : "wrong shape");
	return MC_OK;
}

int
mc__dest_for(mc_ctx *ctx, const struct mc_type *t, const char *key, const unsigned char *sha256,
	     char *buf, size_t buflen)
{
	char first;
	int rc;

	if ((rc = mc__key_check(ctx, t, key)) != MC_OK)
		return rc;
	if ((t->flags & MC_TYPE_WANTS_SHA256) && sha256 == NULL)
		return mc__err(ctx, MC_ERR_MANIFEST, "%s artifact '%.200s' has no sha256", t->name, key);
	buf[0] = '\0';
	/* A built-in handler may tell why it failed (its tier's root cannot be told) on the
	 * context: its message is kept; an earlier one is left as it was otherwise. */
	first = ctx->err[0];
	ctx->err[0] = '\0';
	rc = t->dest_path(t->ud, key, (t->flags & MC_TYPE_WANTS_SHA256) ? sha256 : NULL, buf, buflen);
	if (rc != MC_OK && ctx->err[0] != '\0')
		return rc;
	if (ctx->err[0] == '\0')
		ctx->err[0] = first;
	if (rc != MC_OK || memchr(buf, '\0', buflen) == NULL)
		return mc__err(ctx, MC_ERR_BAD_KEY, "%s key '%.200s': handler gave no destination",
			       t->name, key);
	if (!dest_ok(buf))
		return mc__err(ctx, MC_ERR_BAD_KEY, "%s key '%.200s': destination '%.200s' is not a "
			       "plain relative path", t->name, key, buf);
	return MC_OK;
}
