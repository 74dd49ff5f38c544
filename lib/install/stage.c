/*
 * stage.c - the staged files' temp names, and the folders made for them before content arrives.
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

/* The temp name for name at try tries: hidden, with this load's pid and token, so a
 * later load can tell a killed loader's leftovers (dirs.c, mc__clean_stale()). */
static void
temp_name(const struct loader *L, char *buf, size_t len, const char *name, unsigned tries)
{
	snprintf(buf, len, ".%.200s.mc%ld-%08x.tmp", name, L->pid, (unsigned)(L->token + tries));
}

/* Artifact art's destination and its folder (relative to its tier root), computed
 * again from the artifact as read through c; *ap (may be NULL) gets the artifact,
 * valid until the next use of c. */
static int
art_dest(mc_ctx *ctx, struct mc_acur *c, size_t art, char *dest, size_t destlen, char *dir,
	 size_t dirlen, const char **base, const struct mc_martifact **ap)
{
	const struct mc_martifact *a;
	int rc;

	c->ctx = ctx;
	if ((rc = mc__acur_get(c, art, &a)) != MC_OK ||
	    (rc = mc__dest_for(ctx, a->handler, a->key, a->sha256, dest, destlen)) != MC_OK)
		return rc;
	mc__split_dest(dest, dir, dirlen, base);
	if (ap != NULL)
		*ap = a;
	return MC_OK;
}

/* The folder of a unit (relative to its tier root), read through c. */
int
mc__unit_dir(mc_ctx *ctx, struct mc_acur *c, const struct unit *u, char *dir, size_t len)
{
	char dest[MC_PATH_MAX];
	const char *base;

	return art_dest(ctx, c, u->art, dest, sizeof dest, dir, len, &base, NULL);
}

void
mc__unit_names(const struct loader *L, const struct unit *u, const char *dir, struct unames *n)
{
	mc__split_dest(dir, n->parent, sizeof n->parent, &n->name);
	temp_name(L, n->tmp, sizeof n->tmp, n->name, u->tries);
	if (strcmp(n->parent, ".") == 0)
		snprintf(n->stage, sizeof n->stage, "%s", n->tmp);
	else
		snprintf(n->stage, sizeof n->stage, "%s/%s", n->parent, n->tmp);
}

/* Computes s's names from its artifact, read through c; *ap (may be NULL) gets the
 * artifact, valid until the next use of c. */
int
mc__staged_names(struct loader *L, mc_ctx *ctx, struct mc_acur *c, const struct staged *s,
		 struct snames *n, const struct mc_martifact **ap)
{
	int rc;

	if ((rc = art_dest(ctx, c, s->art, n->dest, sizeof n->dest, n->dir, sizeof n->dir, &n->base,
			   ap)) != MC_OK)
		return rc;
	if (s->unit == NO_UNIT) {
		snprintf(n->stage, sizeof n->stage, "%s", n->dir);
		temp_name(L, n->tmp, sizeof n->tmp, n->base, s->tries);
	} else {
		/* A private, fresh folder: files take their final names at once. */
		struct unames un;
		mc__unit_names(L, &L->units[s->unit], n->dir, &un);
		snprintf(n->stage, sizeof n->stage, "%s", un.stage);
		snprintf(n->tmp, sizeof n->tmp, "%s", n->base);
	}
	return MC_OK;
}

/* Keyed hashes of the folders scanned for stale temp files: each is scanned once.
 * A collision only skips a scan, which is housekeeping. */
struct hset {
	uint64_t *v; /* 0: empty */
	size_t cap, n;
	unsigned char key[crypto_shorthash_KEYBYTES];
};

/* Adds (tier, dir); *added is set when it was not there. */
static int
hset_add(struct hset *S, size_t tier, const char *dir, int *added)
{
	unsigned char in[MC_PATH_MAX + sizeof tier], out[crypto_shorthash_BYTES];
	size_t n = strlen(dir), i;
	uint64_t h;

	*added = 0;
	if (2 * (S->n + 1) > S->cap) {
		size_t cap = S->cap ? 2 * S->cap : 64, k;
		uint64_t *v = calloc(cap, sizeof *v);
		if (v == NULL)
			return MC_ERR_NOMEM;
		for (k = 0; k < S->cap; k++)
			if (S->v[k] != 0) {
				for (i = S->v[k] & (cap - 1); v[i] != 0; i = (i + 1) & (cap - 1))
					;
				v[i] = S->v[k];
			}
		free(S->v);
		S->v = v;
		S->cap = cap;
	}
	if (n >= MC_PATH_MAX)
		n = MC_PATH_MAX - 1;
	memcpy(in, &tier, sizeof tier);
	memcpy(in + sizeof tier, dir, n);
	crypto_shorthash(out, in, sizeof tier + n, S->key);
	memcpy(&h, out, sizeof h);
	h += h == 0;
	for (i = h & (S->cap - 1); S->v[i] != 0; i = (i + 1) & (S->cap - 1))
		if (S->v[i] == h)
			return MC_OK;
	S->v[i] = h;
	S->n++;
	*added = 1;
	return MC_OK;
}

/* Opens (making it as needed) folder dir of a tier, and scans it for stale temp files
 * unless it was scanned already. probe: checks instead that it could be made, and
 * files in it, as the load would find it; *dfd is then -1. */
static int
open_and_clean(struct loader *L, struct hset *S, size_t tier, const char *dir, int probe,
	       int *dfd)
{
	int rc, added;

	if ((rc = mc__open_dir_of(L, tier, dir, probe ? MC_DIR_PROBE : MC_DIR_MAKE, dfd)) != MC_OK)
		return rc;
	if (probe && *dfd >= 0) { /* one still to make (*dfd -1) would be the load's own */
		if (faccessat(*dfd, ".", W_OK | X_OK, AT_EACCESS) != 0)
			rc = mc__cannot_create(L->ctx, L, tier, dir, errno);
		close(*dfd);
		*dfd = -1;
	}
	if (probe)
		return rc;
	if (hset_add(S, tier, dir, &added) != MC_OK) {
		close(*dfd);
		*dfd = -1;
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (added)
		mc__clean_stale(*dfd);
	return MC_OK;
}

/* Makes the unit's temp folder in its parent (probe: checks it could). */
static int
unit_prepare(struct loader *L, struct hset *S, struct unit *u, const char *dir, int probe)
{
	struct unames n;
	int pfd, rc, err = 0;

	mc__unit_names(L, u, dir, &n);
	if ((rc = open_and_clean(L, S, u->tier, n.parent, probe, &pfd)) != MC_OK || probe)
		return rc;
	for (; u->tries < 16; u->tries++) {
		mc__unit_names(L, u, dir, &n);
		if (mkdirat(pfd, n.tmp, 0777) == 0) { /* less the umask: it becomes the folder */
			u->made = 1;
			break;
		}
		if ((err = errno) != EEXIST)
			break;
	}
	if (u->made)
		rc = mc__give_owner(L->ctx, -1, pfd, n.tmp, "%s/%s", L->tiers[u->tier].root, n.stage);
	close(pfd);
	if (!u->made)
		return mc__cannot_create(L->ctx, L, u->tier, n.parent, err);
	return rc;
}

/* Before any content arrives: makes the folders (each scanned once for stale temp
 * files) and the units' temp folders, or checks them (probe). Runs on the calling
 * thread. */
int
mc__stage_prepare(struct loader *L, int probe)
{
	struct hset S;
	char prev[MC_PATH_MAX] = "";
	size_t i, prevtier = (size_t)-1;
	int rc = MC_OK;

	memset(&S, 0, sizeof S);
	crypto_shorthash_keygen(S.key);
	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		struct snames n;
		int dfd;

		if (s->unit != NO_UNIT && L->units[s->unit].made)
			continue;
		if ((rc = mc__staged_names(L, L->ctx, &L->cur, s, &n, NULL)) != MC_OK)
			break;
		/* Files of one folder are mostly neighbours: opened once for them. */
		if (s->tier == prevtier && strcmp(prev, n.dir) == 0)
			continue;
		if (s->unit != NO_UNIT)
			rc = unit_prepare(L, &S, &L->units[s->unit], n.dir, probe);
		else if ((rc = open_and_clean(L, &S, s->tier, n.dir, probe, &dfd)) == MC_OK && dfd >= 0)
			close(dfd);
		if (rc != MC_OK)
			break;
		prevtier = s->tier;
		snprintf(prev, sizeof prev, "%s", n.dir);
	}
	free(S.v);
	return rc;
}
