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

/* Tells fn (may be NULL) what became of artifact a, with its destination (computed
 * here when dest is NULL). */
void
mc__load_report(mc_bundle *b, mc_artifact_fn fn, void *ud, int what,
		const struct mc_martifact *a, const char *dest)
{
	char buf[MC_PATH_MAX];

	if (fn == NULL)
		return;
	if (dest == NULL) {
		if (mc__artifact_dest(b, a, buf, sizeof buf) != MC_OK)
			buf[0] = '\0'; /* not reached: the plan computed it */
		dest = buf;
	}
	fn(ud, what, a->type, a->key, dest, a->size);
}

/* Removes s's staged file (best effort), its folder opened through dc: a kernel left
 * out on a worker thread, a file of a unit that was not installed, the failure paths. */
static void
remove_staged(struct loader *L, mc_ctx *ctx, struct mc_acur *cur, struct dcur *dc,
	      struct staged *s)
{
	struct snames n;
	int dfd;

	if (s->made && mc__staged_names(L, ctx, cur, s, &n, NULL) == MC_OK &&
	    mc__dcur_open(L, ctx, dc, s->tier, n.stage, MC_DIR_OPEN, &dfd) == MC_OK && dfd >= 0)
		unlinkat(dfd, n.tmp, 0);
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

/* Deeper folders first; the tier roots' own (absolute paths) last. */
static int
made_order(const void *pa, const void *pb)
{
	const struct made_dir *a = pa, *b = pb;
	size_t da = 0, db = 0;
	const char *p;

	if ((a->tier == MC_NO_INDEX) != (b->tier == MC_NO_INDEX))
		return a->tier == MC_NO_INDEX ? 1 : -1;
	for (p = a->path; *p != '\0'; p++)
		da += *p == '/';
	for (p = b->path; *p != '\0'; p++)
		db += *p == '/';
	return da < db ? 1 : da > db ? -1 : 0;
}

/* Removes the folders this load made that are empty, each after those in it (one
 * that holds a file stays: rmdir fails). The workers made them in no set order. */
static void
remove_made_dirs(struct loader *L)
{
	size_t i;

	if (L->nmade > 1)
		qsort(L->made, L->nmade, sizeof *L->made, made_order);
	for (i = 0; i < L->nmade; i++) {
		struct made_dir *m = &L->made[i];
		if (m->tier == MC_NO_INDEX)
			rmdir(m->path);
		else
			unlinkat(L->tiers[m->tier].fd, m->path, AT_REMOVEDIR);
	}
}

void
mc__load_rollback(struct loader *L)
{
	struct dcur dc;
	size_t i;

	for (i = 0; i < L->nwk; i++)
		mc__close_object(L, L->ctx, &L->wk[i]);
	mc__dcur_init(&dc);
	for (i = 0; i < L->nst; i++) {
		if (L->st[i].fd >= 0)
			close(L->st[i].fd);
		L->st[i].fd = -1;
		remove_staged(L, L->ctx, &L->cur, &dc, &L->st[i]);
	}
	mc__dcur_close(&dc);
	for (i = 0; i < L->nunits; i++)
		remove_unit_temp(L, &L->units[i]);
	for (i = 0; i < L->ntiers; i++)
		if (L->tiers[i].fresh == MC_FRESH_STAGED) {
			mc__remove_tree(L->tiers[i].pfd, L->tiers[i].sname);
			L->tiers[i].fresh = MC_FRESH_NONE;
		}
	/* A folder another process filled meanwhile stays. */
	remove_made_dirs(L);
}

/* Item k of the commit on a worker thread: staged file k (outside units) renamed into
 * place, or removed when it is a kernel left out; past the staged files, unit
 * k - nst's temp folder renamed into place, or marked lost when another writer
 * installed the folder first. */
static int
commit_one(struct loader *L, unsigned worker, mc_ctx *ctx, size_t k)
{
	struct lworker *lw = &L->wk[worker];
	char dir[MC_PATH_MAX], where[MC_PATH_MAX];
	const char *what, *from, *to;
	struct snames n;
	struct unames un;
	size_t tier;
	int dfd, rc, fresh = 0;

	if (k < L->nst) {
		struct staged *s = &L->st[k];
		if (s->unit != NO_UNIT || !s->made)
			return MC_OK;
		if (mc__gpu_dropped(L->b, s->art)) { /* a kernel for another GPU */
			remove_staged(L, ctx, &lw->cur, &lw->dc, s);
			return MC_OK;
		}
		if (MC_IN_FRESH(&L->tiers[s->tier]))
			return MC_OK; /* in place in its fresh tree, renamed with it */
		if ((rc = mc__staged_names(L, ctx, &lw->cur, s, &n, NULL)) != MC_OK)
			return rc;
		tier = s->tier;
		what = n.dest;
		snprintf(where, sizeof where, "%s", n.dir);
		from = n.tmp;
		to = n.base;
	} else {
		struct unit *u = &L->units[k - L->nst];
		/* In a fresh tree, a unit is in place but for one left out (a kernel for
		 * another GPU), removed before the tree is renamed; elsewhere, that is
		 * removed once told of (mc__load_commit()). */
		fresh = MC_IN_FRESH(&L->tiers[u->tier]);
		if (!u->made || mc__gpu_dropped(L->b, u->art) != fresh)
			return MC_OK;
		lw->cur.ctx = ctx;
		if ((rc = mc__unit_dir(ctx, &lw->cur, u, dir, sizeof dir)) != MC_OK)
			return rc;
		mc__unit_names(L, u, dir, &un);
		tier = u->tier;
		what = dir; /* un.name points into it */
		snprintf(where, sizeof where, "%s", un.parent);
		from = un.tmp;
		to = un.name;
	}
	if ((rc = mc__dcur_open(L, ctx, &lw->dc, tier, where, MC_DIR_OPEN, &dfd)) != MC_OK)
		return rc;
	if (dfd < 0)
		return mc__err(ctx, MC_ERR_IO, "%s/%s: folder vanished during the load",
			       L->tiers[tier].root, where);
	if (fresh) {
		mc__remove_tree(dfd, from);
		L->units[k - L->nst].made = 0;
		return MC_OK;
	}
	if (renameat(dfd, from, dfd, to) == 0) {
		if (k < L->nst) {
			L->st[k].made = 0;
			L->st[k].placed = 1;
		} else {
			L->units[k - L->nst].made = 0;
		}
		return MC_OK;
	}
	if (k >= L->nst && (errno == EEXIST || errno == ENOTEMPTY)) {
		L->units[k - L->nst].lost = 1;
		return MC_OK;
	}
	return mc__err(ctx, MC_ERR_IO, "%s/%s: cannot rename into place: %s", L->tiers[tier].root,
		       what, strerror(errno));
}

/* commit_one(), and progress "install" (items done of all), told by the calling
 * thread's worker, as the callback is called from the calling thread only. */
static int
commit_item(void *ud, unsigned worker, mc_ctx *ctx, size_t k)
{
	struct loader *L = ud;
	int rc = commit_one(L, worker, ctx, k);
	uint64_t done = atomic_fetch_add(&L->committed, 1) + 1;

	if (worker == 0)
		mc__progress(ctx, "install", done, L->nst + L->nunits);
	return rc;
}

/* Renames folder from onto to in dfd unless to exists; -1 with errno EEXIST,
 * ENOTEMPTY or, where the file system cannot rename so, EINVAL or ENOSYS otherwise. A
 * plain rename would replace an empty folder another loader has just made and is
 * filling. */
static int
rename_noreplace(int dfd, const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
	return renameat2(dfd, from, dfd, to, RENAME_NOREPLACE);
#else
	(void)dfd, (void)from, (void)to;
	errno = ENOSYS;
	return -1;
#endif
}

/* The items of a tier now in place: nothing of them left to undo. */
static void
mark_placed(struct loader *L, size_t tier)
{
	size_t i;

	for (i = 0; i < L->nst; i++)
		if (L->st[i].tier == tier && L->st[i].unit == NO_UNIT && L->st[i].made) {
			L->st[i].made = 0;
			L->st[i].placed = 1;
		}
	for (i = 0; i < L->nunits; i++)
		if (L->units[i].tier == tier && !mc__gpu_dropped(L->b, L->units[i].art))
			L->units[i].made = 0;
}

/* Folder rel beneath folder dfd, opened one part at a time through no link. */
static int
open_beneath(int dfd, const char *rel)
{
	char part[MC_PATH_MAX];
	const char *c = rel;
	int cur = dup(dfd), next;
	size_t n;

	while (cur >= 0 && *c != '\0') {
		n = strcspn(c, "/");
		if (n >= sizeof part) {
			close(cur);
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(part, c, n);
		part[n] = '\0';
		c += n + strspn(c + n, "/");
		if (n == 0 || strcmp(part, ".") == 0)
			continue;
		next = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(cur);
		cur = next;
	}
	return cur;
}

/* Moves staged file s, or unit u's folder, from the staging folder sfd into the
 * root, the folders on the way made: a file replaces what is there, a unit whose
 * folder another writer installed first is lost (left in the staging folder). */
static int
move_one(struct loader *L, struct dcur *dc, int sfd, size_t tier, const char *dir,
	 const char *name, int unit)
{
	int from, to, rc, err;

	if ((rc = mc__dcur_open(L, L->ctx, dc, tier, dir, MC_DIR_MAKE, &to)) != MC_OK)
		return rc;
	if ((from = open_beneath(sfd, dir)) < 0)
		return mc__errno(L->ctx, MC_ERR_IO, "cannot open the staging folder", dir);
	rc = renameat(from, name, to, name) == 0 ? 0 : -1;
	err = errno;
	close(from);
	if (rc == 0 || (unit && (err == EEXIST || err == ENOTEMPTY)))
		return rc == 0 ? MC_OK : MC_ERR_EXISTS;
	return mc__err(L->ctx, MC_ERR_IO, "%s/%s/%s: cannot rename into place: %s",
		       L->tiers[tier].root, dir, name, strerror(err));
}

/* Another loader made the root of a fresh tier first: its staged files and units
 * moved into that root one by one, as a load into an existing root installs them. */
static int
commit_into_root(struct loader *L, size_t tier)
{
	struct tier_root *t = &L->tiers[tier];
	char dir[MC_PATH_MAX];
	struct snames n;
	struct unames un;
	struct dcur dc;
	size_t i;
	int sfd = t->fd, fd, rc;

	t->fd = -1; /* opened, or made, as a load opens a root, the folders checked */
	if ((rc = mc__open_dir_of(L, tier, ".", MC_DIR_MAKE, &fd)) != MC_OK) {
		close(sfd);
		return rc;
	}
	close(fd);
	for (i = 0; i < L->nwk; i++) /* their folders were the staging folder's */
		mc__dcur_close(&L->wk[i].dc);
	mc__dcur_init(&dc);
	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		if (s->tier != tier || s->unit != NO_UNIT || !s->made ||
		    (rc = mc__staged_names(L, L->ctx, &L->cur, s, &n, NULL)) != MC_OK)
			continue;
		if ((rc = move_one(L, &dc, sfd, tier, n.dir, n.base, 0)) == MC_OK) {
			s->made = 0;
			s->placed = 1;
		}
	}
	for (i = 0; i < L->nunits && rc == MC_OK; i++) {
		struct unit *u = &L->units[i];
		if (u->tier != tier || !u->made ||
		    (rc = mc__unit_dir(L->ctx, &L->cur, u, dir, sizeof dir)) != MC_OK)
			continue;
		mc__unit_names(L, u, dir, &un);
		if (!mc__gpu_dropped(L->b, u->art) &&
		    (rc = move_one(L, &dc, sfd, tier, un.parent, un.name, 1)) == MC_ERR_EXISTS) {
			u->lost = 1;
			rc = MC_OK;
		}
		u->made = 0; /* what stays goes with the staging folder */
	}
	mc__dcur_close(&dc);
	for (i = 0; i < L->nst; i++) /* the files of lost units go with it too */
		if (L->st[i].tier == tier && L->st[i].unit != NO_UNIT)
			L->st[i].made = 0;
	close(sfd);
	return rc;
}

/* The folders of root path p past its first n bytes (a root made inside another's
 * staging folder, and those on the way), counted among those the load made. */
static int
remember_inner(struct loader *L, const char *p, size_t n)
{
	char path[MC_PATH_MAX];
	size_t i;
	int rc = MC_OK;

	if (snprintf(path, sizeof path, "%s", p) >= (int)sizeof path)
		return MC_OK; /* not reached: the root was opened */
	for (i = n + 1; rc == MC_OK && i <= strlen(p); i++)
		if ((p[i] == '/' || p[i] == '\0') && p[i - 1] != '/') {
			path[i] = '\0';
			rc = mc__remember_root(L, path);
			path[i] = p[i];
		}
	return rc;
}

/* The folders made in tier's staging folder, which goes with it, forgotten: the
 * names of folders of the root are not theirs. */
static void
forget_made(struct loader *L, size_t tier)
{
	size_t i, k = 0, m;

	for (i = 0; i < L->nmade; i++) {
		m = L->made[i].tier;
		if (m != MC_NO_INDEX && (m == tier || (L->tiers[m].fresh == MC_FRESH_INNER &&
						       L->tiers[m].host == tier)))
			free(L->made[i].path);
		else
			L->made[k++] = L->made[i];
	}
	L->nmade = k;
}

/* A fresh tier's root, made in its staging folder with the roots inside it, renamed
 * into place; where the root was made meanwhile, or the file system cannot rename
 * without replacing, the content of each is moved into its root instead. */
static int
commit_fresh(struct loader *L, size_t tier)
{
	struct tier_root *t = &L->tiers[tier];
	char parent[MC_PATH_MAX], from[MC_PATH_MAX + 512];
	const char *base;
	size_t i;
	int rc;

	mc__split_dest(t->root, parent, sizeof parent, &base);
	snprintf(from, sizeof from, "%s/%s", t->sname, base);
	if (rename_noreplace(t->pfd, from, base) == 0) {
		unlinkat(t->pfd, t->sname, AT_REMOVEDIR); /* empty now */
		rc = mc__remember_root(L, t->root);
		for (i = 0; i < L->ntiers; i++)
			if (i == tier || (L->tiers[i].fresh == MC_FRESH_INNER && L->tiers[i].host == tier)) {
				mark_placed(L, i);
				L->tiers[i].fresh = MC_FRESH_RENAMED;
				if (i != tier && rc == MC_OK)
					rc = remember_inner(L, L->tiers[i].root, strlen(t->root));
			}
		return rc;
	}
	if (errno != EEXIST && errno != ENOTEMPTY && errno != EINVAL && errno != ENOSYS)
		return mc__errno(L->ctx, MC_ERR_IO, "cannot rename into place", t->root);
	forget_made(L, tier);
	t->fresh = MC_FRESH_NONE;
	rc = commit_into_root(L, tier);
	for (i = 0; i < L->ntiers; i++)
		if (L->tiers[i].fresh == MC_FRESH_INNER && L->tiers[i].host == tier) {
			L->tiers[i].fresh = MC_FRESH_NONE;
			if (rc == MC_OK)
				rc = commit_into_root(L, i);
		}
	mc__remove_tree(t->pfd, t->sname);
	free(t->sname);
	t->sname = NULL;
	return rc;
}

/* Tells fn what became of the files outside units: installed, replaced, or left out. */
static int
report_files(struct loader *L, mc_artifact_fn fn, void *ud)
{
	const struct mc_martifact *a;
	size_t i;
	int rc = MC_OK;

	for (i = 0; i < L->nst && rc == MC_OK && fn != NULL; i++) {
		struct staged *s = &L->st[i];
		int dropped;

		if (s->unit != NO_UNIT)
			continue;
		dropped = mc__gpu_dropped(L->b, s->art);
		if (!s->placed && !dropped)
			continue;
		if ((rc = mc__acur_get(&L->cur, s->art, &a)) != MC_OK)
			break;
		mc__load_report(L->b, fn, ud, dropped ? MC_LOAD_SKIPPED
					      : L->found[s->art] == MC_FOUND_DIFFERS ? MC_LOAD_REPLACED
					      : MC_LOAD_INSTALLED, a, NULL);
	}
	return rc;
}

int
mc__load_commit(struct loader *L, mc_artifact_fn fn, void *ud)
{
	const struct mc_martifact *a;
	struct dcur dc;
	uint64_t t;
	size_t i;
	int rc, r;

	/* The renames spread over the threads: those in different folders do not wait on
	 * each other. The files are told of afterwards, in order, on this thread. */
	t = mc__prof_start(L->ctx);
	atomic_store(&L->committed, 0);
	mc__progress(L->ctx, "install", 0, L->nst + L->nunits);
	rc = mc__parallel_all(L->ctx, L->nst + L->nunits, L->nwk, commit_item, L);
	for (i = 0; i < L->ntiers && rc == MC_OK; i++)
		if (L->tiers[i].fresh == MC_FRESH_STAGED)
			rc = commit_fresh(L, i);
	if (rc == MC_OK)
		mc__progress(L->ctx, "install", L->nst + L->nunits, L->nst + L->nunits);
	t = mc__prof_since(L->ctx, "renames", t, 0);
	if ((r = report_files(L, fn, ud)) != MC_OK && rc == MC_OK)
		rc = r;
	/* The files of the units: installed with their folder, or dropped with it. */
	mc__dcur_init(&dc);
	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		int dropped;

		if (s->unit == NO_UNIT)
			continue;
		dropped = mc__gpu_dropped(L->b, L->units[s->unit].art);
		if (L->units[s->unit].lost || dropped)
			remove_staged(L, L->ctx, &L->cur, &dc, s);
		s->made = 0;
		if (fn == NULL)
			continue;
		if ((rc = mc__acur_get(&L->cur, s->art, &a)) != MC_OK)
			break;
		mc__load_report(L->b, fn, ud, dropped ? MC_LOAD_SKIPPED
					      : L->units[s->unit].lost ? MC_LOAD_UNCHANGED
					      : MC_LOAD_INSTALLED, a, NULL);
	}
	mc__dcur_close(&dc);
	for (i = 0; i < L->nunits && rc == MC_OK; i++)
		if (L->units[i].lost || mc__gpu_dropped(L->b, L->units[i].art))
			remove_unit_temp(L, &L->units[i]);
	/* Kernels left out: the folders made for them alone go too. */
	if (rc == MC_OK && L->b->gt.drop != NULL)
		remove_made_dirs(L);
	mc__prof_since(L->ctx, "reports", t, 0);
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
