/*
 * survey.c - what a load must stage: files not in place yet, grouped by object; folder units.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

/* What is at the destination: nothing, an identical file, or one that differs
 * (*found, MC_FOUND_*). Refuses links and folders there. One whose owner's execute bit
 * is not the artifact's differs: it is staged and renamed over, as a changed content
 * is, so that the load stays all or nothing. */
static int
check_existing(struct loader *L, size_t tier, const struct mc_martifact *a, const char *dest,
	       unsigned char *found)
{
	char dir[MC_PATH_MAX];
	const char *base;
	struct mc_mobject o;
	struct stat st;
	int dfd, fd, rc, same = 0;

	*found = MC_FOUND_NONE;
	mc__split_dest(dest, dir, sizeof dir, &base);
	if ((rc = mc__open_dir_of(L, tier, dir, 0, &dfd)) != MC_OK || dfd < 0)
		return rc;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		rc = errno == ENOENT ? MC_OK
				     : mc__err(L->ctx, MC_ERR_IO, "%s/%s: %s", L->tiers[tier].root, dest,
					       strerror(errno));
		close(dfd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(dfd);
		return mc__err(L->ctx, MC_ERR_UNSAFE_DEST, "%s/%s: exists and is %s; refusing to "
			       "replace it", L->tiers[tier].root, dest,
			       S_ISLNK(st.st_mode) ? "a symlink" : "not a regular file");
	}
	*found = MC_FOUND_DIFFERS;
	if (((st.st_mode & S_IXUSR) != 0) != a->executable) {
		close(dfd);
		return MC_OK;
	}
	/* A derived file holds other bytes than its content (and is small). */
	if ((uint64_t)st.st_size <= MC_DERIVE_MAX && mc__derives(a->handler, a->key)) {
		if ((rc = mc__derived_same(L, tier, a, dfd, dir, base, &same)) == MC_OK && same)
			*found = MC_FOUND_SAME;
		close(dfd);
		return rc;
	}
	if ((uint64_t)st.st_size == a->size &&
	    (fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) >= 0) {
		struct mc_chash gs = {0};
		unsigned char buf[65536], h[MC_HASH_BYTES];
		ssize_t r = -1;

		/* the bundle's content hash (MC_HALG_*) */
		if (mc__chash_init(&gs, L->b->m.halg) == MC_OK) {
			while ((r = read(fd, buf, sizeof buf)) > 0)
				mc__chash_update(&gs, buf, (size_t)r);
			mc__chash_final(&gs, h);
		}
		mc__chash_drop(&gs);
		close(fd);
		if (r == 0 && (rc = mc__mobjects(L->ctx, &L->b->m, a->object, 1, &o)) != MC_OK) {
			close(dfd);
			return rc;
		}
		if (r == 0 && memcmp(h, o.hash, sizeof h) == 0)
			*found = MC_FOUND_SAME;
	}
	close(dfd);
	return MC_OK;
}

static uint64_t
unit_hash(size_t tier, const char *dir)
{
	uint64_t h = 1469598103934665603ull ^ tier; /* FNV-1a */

	for (; *dir != '\0'; dir++)
		h = (h ^ (unsigned char)*dir) * 1099511628211ull;
	return h;
}

/* Enters unit k into the table of capacity cap. */
static void
unit_enter(uint32_t *tab, size_t cap, const struct unit *u, size_t k)
{
	size_t i;

	for (i = (size_t)u->hash & (cap - 1); tab[i] != 0; i = (i + 1) & (cap - 1))
		;
	tab[i] = (uint32_t)(k + 1);
}

/* Enters the newest unit into the table, growing it to keep it at most half full. */
static int
unit_index(struct loader *L)
{
	if (2 * L->nunits > L->unit_cap) {
		size_t cap = L->unit_cap ? 2 * L->unit_cap : 64, k;
		uint32_t *tab = calloc(cap, sizeof *tab);
		if (tab == NULL)
			return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		for (k = 0; k + 1 < L->nunits; k++)
			unit_enter(tab, cap, &L->units[k], k);
		free(L->unit_tab);
		L->unit_tab = tab;
		L->unit_cap = cap;
	}
	unit_enter(L->unit_tab, L->unit_cap, &L->units[L->nunits - 1], L->nunits - 1);
	return MC_OK;
}

/* The unit of folder dir, made on first use with artifact art; NO_UNIT when the
 * folder exists already (its files are then installed one by one, identical ones
 * left alone). */
static int
find_unit(struct loader *L, size_t tier, const char *dir, size_t art, uint32_t *unit)
{
	struct unit *u;
	size_t i;
	uint64_t h;
	int dfd, rc;

	/* A folder's files are mostly neighbours in the artifact order. */
	if (L->last_tier == tier && strcmp(L->last_dir, dir) == 0) {
		*unit = (uint32_t)L->last_unit;
		return MC_OK;
	}
	h = unit_hash(tier, dir);
	*unit = NO_UNIT;
	for (i = (size_t)h & (L->unit_cap - 1); L->unit_cap > 0 && L->unit_tab[i] != 0;
	     i = (i + 1) & (L->unit_cap - 1)) {
		char udir[MC_PATH_MAX];
		u = &L->units[L->unit_tab[i] - 1];
		if (u->hash != h || u->tier != tier)
			continue;
		if ((rc = mc__unit_dir(L->ctx, &L->ucur, u, udir, sizeof udir)) != MC_OK)
			return rc;
		if (strcmp(udir, dir) == 0) {
			*unit = L->unit_tab[i] - 1;
			break;
		}
	}
	if (*unit == NO_UNIT) {
		dfd = -1;
		if (L->tiers[tier].fd >= 0 &&
		    (rc = mc__open_dir_of(L, tier, dir, 0, &dfd)) != MC_OK)
			return rc;
		if (dfd >= 0) {
			close(dfd);
		} else {
			if (L->nunits >= NO_UNIT)
				return mc__err(L->ctx, MC_ERR_LIMIT, "more than %lu folders to install",
					       (unsigned long)NO_UNIT - 1);
			if (mc__grow(&L->units, &L->units_room, L->nunits + 1, sizeof *L->units) !=
			    MC_OK)
				return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
			u = &L->units[L->nunits];
			memset(u, 0, sizeof *u);
			u->tier = (uint16_t)tier;
			u->art = (uint32_t)art;
			u->hash = h;
			*unit = (uint32_t)L->nunits++;
			if ((rc = unit_index(L)) != MC_OK)
				return rc;
		}
	}
	L->last_tier = tier;
	L->last_unit = *unit;
	snprintf(L->last_dir, sizeof L->last_dir, "%s", dir);
	return MC_OK;
}

/* Artifact i (selected): left alone when its file is there already with the same
 * content, else entered among the files to stage (L->found[i] tells whether one that
 * differs is there). */
static int
plan_artifact(struct loader *L, size_t i)
{
	const struct mc_martifact *a;
	char dir[MC_PATH_MAX], dest[MC_PATH_MAX];
	const char *base;
	struct staged *s;
	uint32_t unit = NO_UNIT;
	size_t tier;
	int rc;

	if ((rc = mc__acur_get(&L->cur, i, &a)) != MC_OK)
		return rc;
	if ((a->handler->flags & MC_TYPE_DERIVE_ALL) && a->size > MC_DERIVE_MAX &&
	    mc__derives(a->handler, a->key))
		return mc__err(L->ctx, MC_ERR_LIMIT, "%s: %s %.200s: %" PRIu64 " bytes, over the %u "
			       "a file of its type may have", L->b->path, a->type, a->key, a->size,
			       MC_DERIVE_MAX);
	tier = mc__loader_tier(L, a->handler->tier);
	if ((rc = mc__artifact_dest(L->b, a, dest, sizeof dest)) != MC_OK)
		return rc;
	mc__split_dest(dest, dir, sizeof dir, &base);
	if (mc__derives(a->handler, a->key) && (rc = mc__tier_abs(L, tier)) != MC_OK)
		return rc;
	if (mc__unit_folder(a->handler, a->key) && strcmp(dir, ".") != 0 &&
	    (rc = find_unit(L, tier, dir, i, &unit)) != MC_OK)
		return rc;
	if (unit == NO_UNIT && L->tiers[tier].fd >= 0 &&
	    (rc = check_existing(L, tier, a, dest, &L->found[i])) != MC_OK)
		return rc;
	if (L->found[i] == MC_FOUND_SAME)
		return MC_OK;
	s = &L->st[L->nst++];
	s->art = (uint32_t)i; /* the plan refuses more than 2^32 - 1 artifacts */
	s->unit = unit;
	s->fd = -1;
	s->tier = (uint16_t)tier;
	L->obj_first[a->object + 1]++;
	if (mc__derives(a->handler, a->key))
		L->hold[a->object] = 1;
	if (a->size == 0) /* objects are unique by content: there is one such */
		L->empty_obj = a->object;
	return MC_OK;
}

/* What is already there, and what must be staged: the staged files grouped by
 * object (by_obj, obj_first) for the streaming sink. */
int
mc__plan_staging(struct loader *L)
{
	const struct mc_bundle *b = L->b;
	const struct mc_martifact *a;
	uint32_t *fill;
	size_t i;
	int rc = MC_OK;

	if ((L->found = calloc(b->m.nartifacts + 1, sizeof *L->found)) == NULL ||
	    (L->st = calloc(b->m.nartifacts + 1, sizeof *L->st)) == NULL ||
	    (L->obj_first = calloc(b->m.nobjects + 2, sizeof *L->obj_first)) == NULL ||
	    (L->hold = calloc(b->m.nobjects + 1, 1)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	if ((rc = mc__derive_keys(L)) != MC_OK)
		return rc;
	for (i = 0; i < b->m.nartifacts; i++)
		if (b->sel[i] && (rc = plan_artifact(L, i)) != MC_OK)
			return rc;
	for (i = 0; i < b->m.nobjects; i++)
		L->obj_first[i + 1] += L->obj_first[i];
	fill = calloc(b->m.nobjects + 1, sizeof *fill);
	if (fill == NULL || (L->by_obj = calloc(L->nst + 1, sizeof *L->by_obj)) == NULL) {
		free(fill);
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	}
	for (i = 0; rc == MC_OK && i < L->nst; i++)
		if ((rc = mc__acur_get(&L->cur, L->st[i].art, &a)) == MC_OK)
			L->by_obj[L->obj_first[a->object] + fill[a->object]++] = (uint32_t)i;
	free(fill);
	return rc;
}
