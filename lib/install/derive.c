/*
 * derive.c - files written for where they land: the bytes a type's derive hook gives
 * for a staged file (a Triton group file naming its folder), and whether such a file
 * on disk already holds what the load would write.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

int
mc__tier_abs(struct loader *L, size_t tier)
{
	struct tier_root *t = &L->tiers[tier];

	if (t->abs == NULL && (t->abs = mc__abs_path(t->root)) == NULL)
		return errno == ENOMEM ? mc__err(L->ctx, MC_ERR_NOMEM, "out of memory")
				       : mc__errno(L->ctx, MC_ERR_IO, "cannot tell the absolute path "
						   "of the cache folder", t->root);
	return MC_OK;
}

/* ---- what a derive hook may ask: the keys a load puts in place ---- */

static int
key_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Whether a type of tier derives all its files (and its hooks may ask about keys). */
static int
tier_asks(const mc_ctx *ctx, const char *tier)
{
	size_t i;

	for (i = 0; i < ctx->ntypes; i++)
		if ((ctx->types[i].flags & MC_TYPE_DERIVE_ALL) && ctx->types[i].derive != NULL &&
		    strcmp(ctx->types[i].tier, tier) == 0)
			return 1;
	return 0;
}

static int
tier_keys(struct loader *L, struct tier_root *t)
{
	const struct mc_bundle *b = L->b;
	const struct mc_martifact *a;
	size_t i, cap = 0;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < b->m.nartifacts; i++) {
		if (!b->sel[i] || (rc = mc__acur_get(&L->cur, i, &a)) != MC_OK ||
		    strcmp(a->handler->tier, t->name) != 0)
			continue;
		if ((rc = mc__grow(&t->keys, &cap, t->nkeys + 1, sizeof *t->keys)) != MC_OK ||
		    (t->keys[t->nkeys] = mc__strdup(a->key)) == NULL)
			return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		t->nkeys++;
	}
	if (rc == MC_OK && t->nkeys > 1)
		qsort(t->keys, t->nkeys, sizeof *t->keys, key_cmp);
	return rc;
}

int
mc__derive_keys(struct loader *L)
{
	size_t i;
	int rc;

	for (i = 0; i < L->ntiers; i++)
		if (tier_asks(L->ctx, L->tiers[i].name) && (rc = tier_keys(L, &L->tiers[i])) != MC_OK)
			return rc;
	return MC_OK;
}

struct asked {
	struct loader *L;
	size_t tier;
};

/* The index of the first key of t not below key. */
static size_t
key_lower(const struct tier_root *t, const char *key)
{
	size_t lo = 0, hi = t->nkeys, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(t->keys[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The hooks' has(): key is one of the tier's selected artifacts, or the folder of some
 * (key and '/' begin theirs), or a file or folder (not a link) at its place in the tier
 * already. */
static int
tier_has(void *ud, const char *key)
{
	const struct asked *q = ud;
	const struct tier_root *t = &q->L->tiers[q->tier];
	char path[2 * MC_PATH_MAX];
	size_t i, n = strlen(key);
	struct stat st;

	if ((i = key_lower(t, key)) < t->nkeys && strcmp(t->keys[i], key) == 0)
		return 1;
	if (n + 1 < sizeof path) {
		memcpy(path, key, n);
		memcpy(path + n, "/", 2);
		if ((i = key_lower(t, path)) < t->nkeys && strncmp(t->keys[i], path, n + 1) == 0)
			return 1;
	}
	if (t->abs == NULL || snprintf(path, sizeof path, "%s/%s", t->abs, key) >= (int)sizeof path)
		return 0;
	return lstat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
}

/* The absolute path of folder dir (relative to the tier root, "." for the root). */
static int
abs_dir(struct loader *L, mc_ctx *ctx, size_t tier, const char *dir, char *path, size_t len)
{
	const char *root = L->tiers[tier].abs;
	int k;

	if (root == NULL) /* not reached: mc__tier_abs() ran when the file was planned */
		return mc__err(ctx, MC_ERR_INVALID, "%s: no absolute path", L->tiers[tier].root);
	if (strcmp(dir, ".") == 0)
		k = snprintf(path, len, "%s", root);
	else
		k = snprintf(path, len, "%s%s%s", root, root[strlen(root) - 1] == '/' ? "" : "/",
			     dir);
	if (k < 0 || (size_t)k >= len)
		return mc__err(ctx, MC_ERR_INVALID, "%s/%s: path too long", root, dir);
	return MC_OK;
}

int
mc__derive_for(struct loader *L, mc_ctx *ctx, size_t tier, const struct mc_martifact *a,
	       const char *dir, const unsigned char *rec, size_t n, unsigned char **out,
	       size_t *outn)
{
	char path[2 * MC_PATH_MAX], why[MC_ERRBUF] = "";
	struct asked q = {L, tier};
	struct mc_hook_env env = {ctx, path, tier_has, &q, why, sizeof why};
	int rc;

	*out = NULL;
	*outn = 0;
	if ((rc = abs_dir(L, ctx, tier, dir, path, sizeof path)) != MC_OK)
		return rc;
	if ((rc = a->handler->derive(a->key, rec, n, &env, out, outn)) == MC_OK)
		return MC_OK;
	if (why[0] != '\0')
		return mc__err(ctx, rc, "%s: cannot write %s %.200s there: %s", path, a->type,
			       a->key, why);
	if (rc == MC_ERR_INVALID) /* the path goes into the file as JSON text */
		return mc__err(ctx, rc, "%s: cannot write %s %.200s there: the folder's path is "
			       "not UTF-8", path, a->type, a->key);
	return mc__err(ctx, rc, "%s: cannot write %s %.200s there: %s", path, a->type, a->key,
		       mc_strerror(rc));
}

/* The file base of folder dfd, whole (at most MC_DERIVE_MAX bytes): *buf NULL when it
 * cannot be read or is larger. */
static int
read_small_at(mc_ctx *ctx, int dfd, const char *base, unsigned char **buf, size_t *n)
{
	struct stat st;
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	*buf = NULL;
	if (fd < 0)
		return MC_OK;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= MC_DERIVE_MAX) {
		if ((*buf = malloc((size_t)st.st_size + 1)) == NULL) {
			close(fd);
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		}
		*n = (size_t)st.st_size;
		if (mc__read_full(fd, *buf, *n) != 0) {
			free(*buf);
			*buf = NULL;
		}
	}
	close(fd);
	return MC_OK;
}

/* Is the derivable file base in folder dir (dfd) of a tier what the load would write?
 * Its recorded form must be the artifact's content, and that form derived for this
 * folder must give the file's bytes. */
int
mc__derived_same(struct loader *L, size_t tier, const struct mc_martifact *a, int dfd,
		 const char *dir, const char *base, int *same)
{
	unsigned char *disk, *canon = NULL, *out = NULL, h[MC_HASH_BYTES];
	const unsigned char *c, *d;
	size_t n = 0, cn = 0, dn = 0;
	char path[2 * MC_PATH_MAX];
	struct mc_hook_env env = {L->ctx, path, NULL, NULL, NULL, 0};
	struct mc_mobject o;
	int rc;

	*same = 0;
	if ((rc = abs_dir(L, L->ctx, tier, dir, path, sizeof path)) != MC_OK)
		return rc;
	if ((rc = read_small_at(L->ctx, dfd, base, &disk, &n)) != MC_OK || disk == NULL)
		return rc;
	if ((rc = a->handler->record(a->key, disk, n, &env, &canon, &cn)) != MC_OK) {
		free(disk);
		/* one it cannot record is not what the load would write */
		return rc == MC_ERR_NOMEM ? mc__err(L->ctx, rc, "out of memory") : MC_OK;
	}
	c = canon != NULL ? canon : disk;
	cn = canon != NULL ? cn : n;
	if ((rc = mc__derive_for(L, L->ctx, tier, a, dir, c, cn, &out, &dn)) == MC_OK) {
		d = out != NULL ? out : c;
		dn = out != NULL ? dn : cn;
		if (mc__chash(L->b->m.halg, h, c, cn) != MC_OK)
			rc = mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		else if (dn == n && memcmp(d, disk, n) == 0 &&
		    (rc = mc__mobjects(L->ctx, &L->b->m, a->object, 1, &o)) == MC_OK)
			*same = memcmp(h, o.hash, sizeof h) == 0;
	}
	free(out);
	free(canon);
	free(disk);
	return rc;
}
