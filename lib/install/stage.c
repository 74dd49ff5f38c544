/*
 * stage.c - the staged files' temp names, and the folders made for them before content arrives.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

/* The temp name for name at try tries: hidden, with this load's pid, token and pid
 * namespace, so a later load can tell a killed loader's leftovers (dirs.c,
 * mc__clean_stale()). */
static void
temp_name(const struct loader *L, char *buf, size_t len, const char *name, unsigned tries)
{
	snprintf(buf, len, ".%.200s.mc%ld-%08x-%08x.tmp", name, L->pid,
		 (unsigned)(L->token + tries), (unsigned)L->nskey);
}

/* The name a file or unit folder of tier is staged under beside its place: name itself
 * in a private, fresh tree, else a temp name. */
static void
stage_name(const struct loader *L, size_t tier, char *buf, size_t len, const char *name,
	   unsigned tries)
{
	if (MC_IN_FRESH(&L->tiers[tier]))
		snprintf(buf, len, "%s", name);
	else
		temp_name(L, buf, len, name, tries);
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
	stage_name(L, u->tier, n->tmp, sizeof n->tmp, n->name, u->tries);
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
		stage_name(L, s->tier, n->tmp, sizeof n->tmp, n->base, s->tries);
	} else {
		/* A private, fresh folder: files take their final names at once. */
		struct unames un;
		mc__unit_names(L, &L->units[s->unit], n->dir, &un);
		snprintf(n->stage, sizeof n->stage, "%s", un.stage);
		snprintf(n->tmp, sizeof n->tmp, "%s", n->base);
	}
	return MC_OK;
}

/* Keyed hashes of folders, each with a value: the folders scanned for stale temp
 * files (each once: a collision only skips a scan, which is housekeeping), and the job
 * that makes a folder (checked against the job's folder on a hit). */
struct hset {
	uint64_t *v; /* 0: empty */
	uint32_t *val;
	size_t cap, n;
	unsigned char key[crypto_shorthash_KEYBYTES];
};

/* Finds (tier, dir), adding it when it was not there (*added set); *val points at
 * its value. */
static int
hset_add(struct hset *S, size_t tier, const char *dir, int *added, uint32_t **val)
{
	unsigned char in[MC_PATH_MAX + sizeof tier], out[crypto_shorthash_BYTES];
	size_t n = strlen(dir), i;
	uint64_t h;

	*added = 0;
	if (2 * (S->n + 1) > S->cap) {
		size_t cap = S->cap ? 2 * S->cap : 64, k;
		uint64_t *v = calloc(cap, sizeof *v);
		uint32_t *nv = calloc(cap, sizeof *nv);
		if (v == NULL || nv == NULL) {
			free(v);
			free(nv);
			return MC_ERR_NOMEM;
		}
		for (k = 0; k < S->cap; k++)
			if (S->v[k] != 0) {
				for (i = S->v[k] & (cap - 1); v[i] != 0; i = (i + 1) & (cap - 1))
					;
				v[i] = S->v[k];
				nv[i] = S->val[k];
			}
		free(S->v);
		free(S->val);
		S->v = v;
		S->val = nv;
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
		if (S->v[i] == h) {
			*val = &S->val[i];
			return MC_OK;
		}
	S->v[i] = h;
	S->val[i] = 0;
	S->n++;
	*added = 1;
	*val = &S->val[i];
	return MC_OK;
}

static void
hset_free(struct hset *S)
{
	free(S->v);
	free(S->val);
}

/* The folder job j makes (its staged file's, or its unit's temp folder's parent); fdir
 * gets the staged file's folder. Reads nothing that the thread writing the file
 * changes (its temp name's tries). */
static int
job_folder(struct loader *L, mc_ctx *ctx, struct mc_acur *c, const struct fjob *j,
	   char fdir[MC_PATH_MAX], struct unames *un, const char **dir)
{
	const struct staged *s = &L->st[j->st];
	char dest[MC_PATH_MAX];
	const char *base;
	int rc;

	if ((rc = art_dest(ctx, c, s->art, dest, sizeof dest, fdir, MC_PATH_MAX, &base, NULL)) !=
	    MC_OK)
		return rc;
	*dir = fdir;
	if (s->unit != NO_UNIT) {
		mc__unit_names(L, &L->units[s->unit], fdir, un);
		*dir = un->parent;
	}
	return MC_OK;
}

/* Makes the unit's temp folder in its parent, open as pfd; a job run again after the
 * owner could not be given tries that again, in the folder it made. */
static int
unit_mkdir(struct loader *L, mc_ctx *ctx, struct unit *u, const char *dir, int pfd)
{
	struct unames n;
	int err = 0;

	if (u->made) {
		mc__unit_names(L, u, dir, &n);
		return mc__give_owner(ctx, -1, pfd, n.tmp, "%s/%s", L->tiers[u->tier].root, n.stage);
	}
	for (; u->tries < 16; u->tries++) {
		mc__unit_names(L, u, dir, &n);
		if (mkdirat(pfd, n.tmp, 0777) == 0) { /* less the umask: it becomes the folder */
			u->made = 1;
			return mc__give_owner(ctx, -1, pfd, n.tmp, "%s/%s", L->tiers[u->tier].root,
					      n.stage);
		}
		if ((err = errno) != EEXIST)
			break;
	}
	return mc__cannot_create(ctx, L, u->tier, n.parent, err);
}

/* A dry run's check of job j: its folder could be made, and files in it. */
static int
probe_job(struct loader *L, const struct fjob *j)
{
	const struct staged *s = &L->st[j->st];
	char fdir[MC_PATH_MAX];
	struct unames un;
	const char *dir;
	int dfd, rc;

	if ((rc = job_folder(L, L->ctx, &L->cur, j, fdir, &un, &dir)) != MC_OK)
		return rc;
	if ((rc = mc__open_dir_of(L, s->tier, dir, MC_DIR_PROBE, &dfd)) != MC_OK || dfd < 0)
		return rc; /* one still to make (dfd -1) would be the load's own */
	if (faccessat(dfd, ".", W_OK | X_OK, AT_EACCESS) != 0)
		rc = mc__cannot_create(L->ctx, L, s->tier, dir, errno);
	close(dfd);
	return rc;
}

/* Job j on a worker thread: its folder made (and those on its way), scanned for stale
 * temp files when the job says, a unit's temp folder made in it. */
static int
run_job(struct loader *L, mc_ctx *ctx, struct lworker *lw, struct fjob *j)
{
	struct staged *s = &L->st[j->st];
	char fdir[MC_PATH_MAX];
	struct unames un;
	const char *dir;
	int dfd, rc;

	if ((rc = job_folder(L, ctx, &lw->cur, j, fdir, &un, &dir)) != MC_OK ||
	    (rc = mc__dcur_open(L, ctx, &lw->dc, s->tier, dir, MC_DIR_MAKE, &dfd)) != MC_OK)
		return rc;
	if (dfd < 0) /* not reached: made, or an error */
		return mc__err(ctx, MC_ERR_IO, "%s/%s: folder vanished during the load",
			       L->tiers[s->tier].root, dir);
	if (j->clean)
		mc__clean_stale(dfd, L->nskey, NULL);
	return s->unit != NO_UNIT ? unit_mkdir(L, ctx, &L->units[s->unit], fdir, dfd) : MC_OK;
}

/* Job j, once: run by the first thread that needs it, while the others wait for it; one
 * that failed is run again by the next that needs it (and fails as it did). */
int
mc__stage_job(struct loader *L, mc_ctx *ctx, struct lworker *lw, uint32_t job)
{
	struct fjob *j = &L->jobs[job];
	int st, rc;

	for (;;) {
		if ((st = atomic_load(&j->state)) == JOB_DONE)
			return MC_OK;
		if (st == JOB_TODO && atomic_compare_exchange_strong(&j->state, &st, JOB_RUNNING))
			break;
		sched_yield();
	}
	rc = run_job(L, ctx, lw, j);
	atomic_store(&j->state, rc == MC_OK ? JOB_DONE : JOB_TODO);
	return rc;
}

/* The jobs not done, in order, on the calling thread: after a pass that failed, the
 * first folder that cannot be made is told, as it would be were the folders all made
 * before any content (the dry run checks them so). */
int
mc__stage_rest(struct loader *L)
{
	size_t i;
	int rc = MC_OK;

	for (i = 0; i < L->njobs && rc == MC_OK; i++)
		rc = mc__stage_job(L, L->ctx, &L->wk[0], (uint32_t)i);
	return rc;
}

/* Lists the folders to make before the files in them: one job per folder of files
 * outside units and per unit (its temp folder, in its parent), each staged file given
 * its job; each folder to scan for stale temp files marked once. */
static int
list_jobs(struct loader *L, struct hset *C, struct hset *F)
{
	char prev[MC_PATH_MAX] = "";
	uint32_t *val, prevjob = 0;
	size_t i, prevtier = MC_NO_INDEX;
	int rc = MC_OK, added;

	for (i = 0; i < L->nst && rc == MC_OK; i++) {
		struct staged *s = &L->st[i];
		struct snames n;
		struct unames un;
		const char *dir;

		if (s->unit != NO_UNIT && L->units[s->unit].job != NO_JOB) {
			s->job = L->units[s->unit].job;
			continue;
		}
		if ((rc = mc__staged_names(L, L->ctx, &L->cur, s, &n, NULL)) != MC_OK)
			break;
		/* A folder's files are mostly neighbours. */
		if (s->unit == NO_UNIT && s->tier == prevtier && strcmp(prev, n.dir) == 0) {
			s->job = prevjob;
			continue;
		}
		prevtier = s->tier;
		snprintf(prev, sizeof prev, "%s", n.dir);
		if (s->unit == NO_UNIT) {
			if (hset_add(F, s->tier, n.dir, &added, &val) != MC_OK)
				return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
			if (!added) { /* the job of a folder met before, unless a collision */
				struct snames m;
				const struct staged *o = &L->st[L->jobs[*val].st];
				if ((rc = mc__staged_names(L, L->ctx, &L->cur, o, &m, NULL)) != MC_OK)
					break;
				if (o->tier == s->tier && strcmp(m.dir, n.dir) == 0) {
					s->job = prevjob = *val;
					continue;
				}
			} else {
				*val = (uint32_t)L->njobs;
			}
		}
		dir = prev;
		if (s->unit != NO_UNIT) {
			mc__unit_names(L, &L->units[s->unit], prev, &un);
			dir = un.parent;
			L->units[s->unit].job = (uint32_t)L->njobs;
		}
		if (hset_add(C, s->tier, dir, &added, &val) != MC_OK)
			return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		L->jobs[L->njobs].st = (uint32_t)i;
		L->jobs[L->njobs].clean = (uint8_t)added;
		s->job = prevjob = (uint32_t)L->njobs++;
	}
	return rc;
}

/* The part of root path p that lies within root r (the slashes after r skipped: ""
 * when p is r), or NULL when p is neither r nor beneath it. */
static const char *
within(const char *p, const char *r)
{
	size_t n = strlen(r);

	if (strncmp(p, r, n) != 0 || (p[n] != '/' && p[n] != '\0'))
		return NULL;
	return p + n + strspn(p + n, "/");
}

/* Whether root path p names its folders plainly: no empty, "." or ".." part (past a
 * leading "/"), so that where one root lies within another can be told from the text. */
static int
plain_path(const char *p)
{
	const char *c = p + (p[0] == '/'), *end;

	for (; ; c = end + 1) {
		end = c + strcspn(c, "/");
		if (end == c || (end - c == 1 && c[0] == '.') ||
		    (end - c == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (*end == '\0')
			return 1;
	}
}

/* Splits t's root into its parent and last part: 1 when a folder of the load's may go
 * beside it (the last part a name, the parent within what the root's setter named). */
static int
split_root(const struct tier_root *t, char *parent, size_t len, const char **base)
{
	mc__split_dest(t->root, parent, len, base);
	return **base != '\0' && strcmp(*base, ".") != 0 && strcmp(*base, "..") != 0 &&
	       (size_t)(*base - t->root) <= t->named + 1;
}

/* Makes tier's staging folder beside its missing root, when the parent exists (or is
 * made) within what the root's setter named (torch's default torchinductor_<user> in
 * /tmp, made whole, is ours: a folder planted there first makes the rename fail): a
 * private folder (0700) holding the root under its own name, made as it would be beside
 * it (the parent's group, set-group-ID bit and default ACL pass down through the private
 * folder). Leaves the tier as it was when the folders cannot be made. */
static int
stage_root(struct loader *L, size_t tier)
{
	struct tier_root *t = &L->tiers[tier];
	char parent[MC_PATH_MAX], name[512];
	const char *base;
	int pfd, wfd, fd = -1, rc;

	if (!split_root(t, parent, sizeof parent, &base))
		return MC_OK;
	if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 && errno == ENOENT &&
	    parent[0] != '\0' && (rc = mc__make_path(L, parent, strlen(parent))) != MC_OK)
		return rc;
	if (pfd < 0 && (pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return MC_OK;
	mc__clean_stale(pfd, L->nskey, NULL);
	temp_name(L, name, sizeof name, base, 0);
	if (mkdirat(pfd, name, 0700) != 0) {
		close(pfd);
		return MC_OK;
	}
	if ((wfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		if (mkdirat(wfd, base, 0777) == 0) /* less the umask */
			fd = openat(wfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(wfd);
	}
	if (fd < 0 || (t->sname = mc__strdup(name)) == NULL) {
		rc = fd < 0 ? MC_OK : mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		if (fd >= 0)
			close(fd);
		mc__remove_tree(pfd, name);
		close(pfd);
		return rc;
	}
	t->fd = fd;
	t->pfd = pfd;
	t->fresh = MC_FRESH_STAGED;
	return mc__give_owner(L->ctx, fd, -1, NULL, "%s", t->root);
}

/* Makes the missing root of tier inside the staging folder of host, whose root it lies
 * beneath, the folders on the way made as the load makes folders. */
static int
stage_inner(struct loader *L, size_t tier, size_t host)
{
	struct tier_root *t = &L->tiers[tier];
	const char *rel = within(t->root, L->tiers[host].root);
	char path[MC_PATH_MAX], *c, *end;
	int cur, next, rc = MC_OK;

	if (snprintf(path, sizeof path, "%s", rel) >= (int)sizeof path)
		return mc__err(L->ctx, MC_ERR_INVALID, "%s: path too long", t->root);
	if ((cur = dup(L->tiers[host].fd)) < 0)
		return mc__errno(L->ctx, MC_ERR_IO, "cannot open", L->tiers[host].root);
	for (c = path; rc == MC_OK && *c != '\0'; c = end + strspn(end, "/")) {
		end = c + strcspn(c, "/");
		if (*end != '\0')
			*end++ = '\0';
		if (mkdirat(cur, c, 0777) != 0 && errno != EEXIST) /* less the umask */
			rc = mc__err(L->ctx, MC_ERR_IO, "%s: cannot create folder %s: %s", t->root, c,
				     strerror(errno));
		else if ((next = openat(cur, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			rc = mc__errno(L->ctx, MC_ERR_IO, "cannot open the staging folder", t->root);
		else {
			close(cur);
			cur = next;
			rc = mc__give_owner(L->ctx, cur, -1, NULL, "%s", t->root);
		}
	}
	if (rc != MC_OK) {
		close(cur);
		return rc;
	}
	t->fd = cur;
	t->fresh = MC_FRESH_INNER;
	t->host = host;
	return MC_OK;
}

/* A root that exists: the staging folders a killed load left beside it, which only a
 * load staging it again would find, removed. */
static void
clean_beside(struct loader *L, size_t tier)
{
	const struct tier_root *t = &L->tiers[tier];
	char parent[MC_PATH_MAX], prefix[512];
	const char *base;
	int pfd;

	if (!split_root(t, parent, sizeof parent, &base) ||
	    (pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	snprintf(prefix, sizeof prefix, ".%.200s.mc", base);
	mc__clean_stale(pfd, L->nskey, prefix);
	close(pfd);
}

int
mc__stage_fresh(struct loader *L)
{
	unsigned char *jobs = calloc(L->ntiers + 1, 1);
	size_t i, j;
	int rc = MC_OK;

	if (jobs == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < L->njobs; i++) /* 1: files to make; 2: and a missing root */
		jobs[L->st[L->jobs[i].st].tier] = 1;
	for (i = 0; i < L->ntiers; i++) {
		if (jobs[i] && L->tiers[i].fd >= 0 && plain_path(L->tiers[i].root))
			clean_beside(L, i);
		jobs[i] += jobs[i] && L->tiers[i].fd < 0;
		if (jobs[i] == 2 && !plain_path(L->tiers[i].root))
			break; /* how the roots nest is not plain: all made as ever */
	}
	if (i < L->ntiers)
		memset(jobs, 0, L->ntiers);
	/* The outermost missing roots first (of tiers of one root, the first), then those
	 * within a staged one. */
	for (i = 0; i < L->ntiers && rc == MC_OK; i++) {
		for (j = 0; j < L->ntiers; j++) {
			const char *rel = within(L->tiers[i].root, L->tiers[j].root);
			if (j != i && jobs[j] == 2 && rel != NULL && (*rel != '\0' || j < i))
				break;
		}
		if (jobs[i] == 2 && j == L->ntiers)
			rc = stage_root(L, i);
	}
	for (i = 0; i < L->ntiers && rc == MC_OK; i++)
		for (j = 0; j < L->ntiers && L->tiers[i].fd < 0 && jobs[i] == 2 && rc == MC_OK; j++)
			if (L->tiers[j].fresh == MC_FRESH_STAGED &&
			    within(L->tiers[i].root, L->tiers[j].root) != NULL)
				rc = stage_inner(L, i, j);
	free(jobs);
	return rc;
}

/* Lists the jobs (list_jobs()); the threads run them as their first files arrive
 * (mc__stage_job()); the tier roots are made now. A dry run (probe) checks the jobs
 * now instead, on the calling thread, that they could be made and files made in them,
 * writing nothing. */
int
mc__stage_prepare(struct loader *L, int probe)
{
	struct hset C, F;
	char msg[MC_ERRBUF];
	size_t i, k;
	int rc, r;

	memset(&C, 0, sizeof C);
	memset(&F, 0, sizeof F);
	crypto_shorthash_keygen(C.key);
	crypto_shorthash_keygen(F.key);
	if ((L->jobs = calloc(L->nst + 1, sizeof *L->jobs)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < L->nunits; i++)
		L->units[i].job = NO_JOB;
	rc = list_jobs(L, &C, &F);
	hset_free(&C);
	hset_free(&F);
	if (rc == MC_OK && !probe)
		rc = mc__stage_fresh(L);
	for (i = 0; i < L->njobs && rc == MC_OK; i++) {
		const struct staged *s = &L->st[L->jobs[i].st];
		int fd;

		if (probe)
			rc = probe_job(L, &L->jobs[i]);
		else if (L->tiers[s->tier].fd < 0 &&
			 (rc = mc__open_dir_of(L, s->tier, ".", MC_DIR_MAKE, &fd)) == MC_OK)
			close(fd);
	}
	if (rc == MC_OK || probe)
		return rc;
	/* A root that cannot be made is told after the folders of the jobs before it, as
	 * the dry run checks them. */
	snprintf(msg, sizeof msg, "%s", L->ctx->err);
	for (k = 0; k + 1 < i; k++)
		if ((r = mc__stage_job(L, L->ctx, &L->wk[0], (uint32_t)k)) != MC_OK)
			return r;
	snprintf(L->ctx->err, sizeof L->ctx->err, "%s", msg);
	return rc;
}
