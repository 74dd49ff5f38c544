/*
 * commit.c - renames the staged files and folders into place, or removes them; the sync to disk.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "install/install.h"

/* Removes s's staged file (best effort: on the failure paths). */
static void
remove_staged(struct loader *L, struct staged *s)
{
	struct snames n;
	int dfd;

	if (s->made && mc__staged_names(L, L->ctx, &L->cur, s, &n, NULL) == MC_OK &&
	    mc__open_dir_of(L, s->tier, n.stage, 0, &dfd) == MC_OK && dfd >= 0) {
		unlinkat(dfd, n.tmp, 0);
		close(dfd);
	}
	s->made = 0;
}

/* Removes u's temp folder, which its files have left (best effort). */
static void
remove_unit_temp(struct loader *L, struct unit *u)
{
	char dir[MC_PATH_MAX];
	struct unames n;
	int dfd;

	if (!u->made || mc__unit_dir(L->ctx, &L->cur, u, dir, sizeof dir) != MC_OK)
		return;
	mc__unit_names(L, u, dir, &n);
	if (mc__open_dir_of(L, u->tier, n.parent, 0, &dfd) == MC_OK && dfd >= 0) {
		if (unlinkat(dfd, n.tmp, AT_REMOVEDIR) == 0)
			u->made = 0;
		close(dfd);
	}
}

/* Removes the folders this load made that are empty, newest first (one that holds a
 * file stays: rmdir fails). */
static void
remove_made_dirs(struct loader *L)
{
	size_t i;

	for (i = L->nmade; i > 0; i--) {
		struct made_dir *m = &L->made[i - 1];
		if (m->tier == (size_t)-1)
			rmdir(m->path);
		else
			unlinkat(L->tiers[m->tier].fd, m->path, AT_REMOVEDIR);
	}
}

void
mc__load_rollback(struct loader *L)
{
	size_t i;

	for (i = 0; i < L->nwk; i++)
		mc__close_object(L, L->ctx, &L->wk[i]);
	for (i = 0; i < L->nst; i++) {
		if (L->st[i].fd >= 0)
			close(L->st[i].fd);
		L->st[i].fd = -1;
		remove_staged(L, &L->st[i]);
	}
	for (i = 0; i < L->nunits; i++)
		remove_unit_temp(L, &L->units[i]);
	/* Newest first; a folder another process filled meanwhile stays. */
	remove_made_dirs(L);
}

/* Renames the units' temp folders into place; one that another writer installed
 * first is kept, and ours marked lost. */
static int
commit_units(struct loader *L)
{
	size_t i;
	int dfd, rc = MC_OK;

	for (i = 0; i < L->nunits && rc == MC_OK; i++) {
		struct unit *u = &L->units[i];
		char dir[MC_PATH_MAX];
		struct unames n;

		if (!u->made || mc__gpu_dropped(L->b, u->art))
			continue;
		if ((rc = mc__unit_dir(L->ctx, &L->cur, u, dir, sizeof dir)) != MC_OK)
			break;
		mc__unit_names(L, u, dir, &n);
		if ((rc = mc__open_dir_of(L, u->tier, n.parent, 0, &dfd)) != MC_OK || dfd < 0) {
			rc = rc != MC_OK ? rc : mc__err(L->ctx, MC_ERR_IO, "%s/%s: folder vanished during "
							"the load", L->tiers[u->tier].root, n.parent);
			break;
		}
		if (renameat(dfd, n.tmp, dfd, n.name) == 0)
			u->made = 0;
		else if (errno == EEXIST || errno == ENOTEMPTY)
			u->lost = 1;
		else
			rc = mc__err(L->ctx, MC_ERR_IO, "%s/%s/%s: cannot rename into place: %s",
				     L->tiers[u->tier].root, n.parent, n.name, strerror(errno));
		close(dfd);
	}
	return rc;
}

/* Renames the staged files outside units into place. */
static int
commit_files(struct loader *L, mc_artifact_fn fn, void *ud)
{
	const struct mc_martifact *a;
	char prev[MC_PATH_MAX] = "";
	size_t i, prevtier = (size_t)-1;
	int dfd = -1, rc = MC_OK;

	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		struct snames n;

		if (s->unit != NO_UNIT)
			continue;
		if ((rc = mc__staged_names(L, L->ctx, &L->cur, s, &n, &a)) != MC_OK)
			break;
		if (mc__gpu_dropped(L->b, s->art)) { /* a kernel for another GPU */
			remove_staged(L, s);
			mc__load_report(L->b, fn, ud, MC_LOAD_SKIPPED, a, n.dest);
			continue;
		}
		/* Files of one folder are neighbours in the artifact order: one open each. */
		if (s->tier != prevtier || strcmp(prev, n.dir) != 0) {
			if (dfd >= 0)
				close(dfd);
			if ((rc = mc__open_dir_of(L, s->tier, n.dir, 0, &dfd)) != MC_OK)
				break;
			if (dfd < 0) {
				rc = mc__err(L->ctx, MC_ERR_IO, "%s/%s: folder vanished during the load",
					     L->tiers[s->tier].root, n.dir);
				break;
			}
			prevtier = s->tier;
			snprintf(prev, sizeof prev, "%s", n.dir);
		}
		if (renameat(dfd, n.tmp, dfd, n.base) != 0) {
			rc = mc__err(L->ctx, MC_ERR_IO, "%s/%s: cannot rename into place: %s",
				     L->tiers[s->tier].root, n.dest, strerror(errno));
			break;
		}
		s->made = 0;
		mc__load_report(L->b, fn, ud,
				L->found[s->art] == MC_FOUND_DIFFERS ? MC_LOAD_REPLACED : MC_LOAD_INSTALLED,
				a, n.dest);
	}
	if (dfd >= 0)
		close(dfd);
	return rc;
}

int
mc__load_commit(struct loader *L, mc_artifact_fn fn, void *ud)
{
	const struct mc_martifact *a;
	size_t i;
	int rc;

	if ((rc = commit_files(L, fn, ud)) == MC_OK)
		rc = commit_units(L);
	/* The files of the units: installed with their folder, or dropped with it. */
	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		struct snames n;

		int dropped;

		if (s->unit == NO_UNIT)
			continue;
		dropped = mc__gpu_dropped(L->b, L->units[s->unit].art);
		if (L->units[s->unit].lost || dropped)
			remove_staged(L, s);
		s->made = 0;
		if ((rc = mc__staged_names(L, L->ctx, &L->cur, s, &n, &a)) != MC_OK)
			break;
		mc__load_report(L->b, fn, ud, dropped ? MC_LOAD_SKIPPED
					      : L->units[s->unit].lost ? MC_LOAD_UNCHANGED
					      : MC_LOAD_INSTALLED, a, n.dest);
	}
	for (i = 0; i < L->nunits && rc == MC_OK; i++)
		if (L->units[i].lost || mc__gpu_dropped(L->b, L->units[i].art))
			remove_unit_temp(L, &L->units[i]);
	/* Kernels left out: the folders made for them alone go too. */
	if (rc == MC_OK && L->b->gt.drop != NULL)
		remove_made_dirs(L);
	return rc;
}

/* MC_LOAD_SYNC: one syncfs(2) per filesystem among the tier roots, which covers the
 * files, the renames and the folders made; a per-file fsync would cost a disk flush
 * each. Tiers whose files were all there already are flushed too: an earlier load
 * may have left them unwritten. */
int
mc__sync_tiers(struct loader *L)
{
	dev_t *seen = calloc(L->ntiers + 1, sizeof *seen);
	size_t i, j, n = 0;
	int rc = MC_OK;

	if (seen == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < L->ntiers && rc == MC_OK; i++) {
		struct stat st;

		if (L->tiers[i].fd < 0)
			continue;
		if (fstat(L->tiers[i].fd, &st) != 0) {
			rc = mc__errno(L->ctx, MC_ERR_IO, "cannot stat", L->tiers[i].root);
			break;
		}
		for (j = 0; j < n && seen[j] != st.st_dev; j++)
			;
		if (j < n)
			continue;
		seen[n++] = st.st_dev;
		if (syncfs(L->tiers[i].fd) != 0)
			rc = mc__errno(L->ctx, MC_ERR_IO, "installed, but cannot be flushed to disk",
				       L->tiers[i].root);
	}
	free(seen);
	return rc;
}
