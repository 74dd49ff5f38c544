/*
 * install.c - installs a verified bundle's artifacts into their tier folders. Every
 * file is staged under a temp name beside its destination (O_EXCL, O_NOFOLLOW, folders
 * walked without following links) and renamed into place only after the whole bundle
 * verified; on failure the staged files and the folders made are removed again.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sodium.h>
#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif

#include "install/install.h"

/* Tells fn (may be NULL) what became of artifact a, with its destination (computed
 * here when dest is NULL). */
static void
report(mc_bundle *b, mc_artifact_fn fn, void *ud, int what, const struct mc_martifact *a,
       const char *dest)
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

struct tier_root {
	const char *name;
	const char *root;
	size_t named; /* of root: see open_tier_root() */
	int fd;
};

struct made_dir {
	size_t tier; /* (size_t)-1: an absolute path of a tier root */
	char *path;
};

#define NO_UNIT UINT32_MAX

/* A file being staged. A load may stage millions, so it holds no names: its folder,
 * temp name and final name are computed again from its artifact when needed. */
struct staged {
	uint32_t art;
	uint32_t unit;  /* the folder unit it belongs to, or NO_UNIT */
	int fd;         /* -1 when closed */
	uint16_t tier;
	uint8_t tries;  /* which of its temp names it has (another when one is taken) */
	uint8_t made;   /* the temp file exists */
};

/* A folder whose files are installed together (MC_TYPE_FOLDER_UNIT): staged in a
 * hidden temp folder beside it, renamed into place at commit. Its path is computed
 * again from one of its artifacts. */
struct unit {
	uint64_t hash;  /* of (tier, folder), for the lookup table */
	uint32_t art;   /* an artifact in the folder */
	uint16_t tier;
	uint8_t tries;  /* which of its temp names the temp folder has */
	uint8_t made;   /* the temp folder exists */
	uint8_t lost;   /* commit: another writer installed the folder first */
};

struct lworker {
	struct mc_acur cur; /* reads the artifacts of its files */
	size_t obj;         /* the object whose files are open */
	int open;
	uint64_t size;      /* of its content */
	uint64_t written;
};

struct loader {
	mc_bundle *b;
	mc_ctx *ctx;
	struct mc_acur cur;  /* on the calling thread */
	struct mc_acur ucur; /* find_unit's check of a unit's folder */
	uint32_t token;      /* random, part of this load's temp names */
	long pid;
	struct tier_root *tiers;
	size_t ntiers;
	struct made_dir *made;
	size_t nmade;
	struct staged *st;
	size_t nst;
	uint32_t *by_obj;          /* staged indices sorted by object */
	uint32_t *obj_first;       /* per object: first position in by_obj, nobjects+1 entries */
	unsigned char *unchanged;  /* per artifact */
	size_t empty_obj;          /* the object of empty content, when a file of it is staged */
	struct lworker *wk;        /* per worker thread */
	unsigned nwk;
	_Atomic int no_openat2; /* the kernel lacks it, or a filter refuses it */
	struct unit *units;
	size_t nunits;
	uint32_t *unit_tab; /* open addressing on (tier, folder): unit index + 1, 0 = empty */
	size_t unit_cap;    /* a power of two, at least twice nunits */
	/* The folder find_unit() last answered for, and its answer. */
	size_t last_tier, last_unit;
	char last_dir[MC_PATH_MAX];
};

static int
remember_dir(struct loader *L, size_t tier, const char *path)
{
	struct made_dir *m = realloc(L->made, (L->nmade + 1) * sizeof *m);

	if (m == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	L->made = m;
	if ((m[L->nmade].path = mc__strdup(path)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	m[L->nmade++].tier = tier;
	return MC_OK;
}

/* A folder a default adds to a root (torchinductor_<user> in a shared /tmp) may have
 * been made by someone else before us: torch would run what they later put there. It
 * must be ours (or root's) and not writable by others, unless sticky. */
static int
check_owner(struct loader *L, int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return mc__errno(L->ctx, MC_ERR_IO, "cannot inspect folder", path);
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
	    ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)))
		return mc__err(L->ctx, MC_ERR_UNSAFE_DEST, "%s: owned by another user (uid %lu) or "
			       "writable by others; refusing to write in it", path,
			       (unsigned long)st.st_uid);
	return MC_OK;
}

/* Walks the folders of path from byte keep on, beneath the open folder start (taken
 * over), one component at a time and never through a link: what comes before keep is
 * the part a caller named. Missing folders are made when create is set and remembered
 * for the rollback, as (tier, path from keep) or, for tier (size_t)-1, as the whole
 * path; owned checks each folder with check_owner(). *fd is -1 with MC_OK when a
 * folder is missing and create is not set. Messages name the whole path. */
static int
walk_dirs(struct loader *L, mc_ctx *ctx, int start, char *path, size_t keep, size_t tier,
	  int create, int owned, int *fd)
{
	int cur = start, next, rc = MC_OK;
	size_t i, j;

	*fd = -1;
	for (i = keep; rc == MC_OK && cur >= 0; i = j) {
		char c;

		i += strspn(path + i, "/");
		if ((j = i + strcspn(path + i, "/")) == i)
			break;
		c = path[j];
		path[j] = '\0';
		if (strcmp(path + i, ".") != 0) {
			next = openat(cur, path + i, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0 && errno == ENOENT && create) {
				if (mkdirat(cur, path + i, 0755) == 0)
					rc = remember_dir(L, tier, tier == (size_t)-1 ? path : path + keep);
				else if (errno != EEXIST)
					rc = mc__err(ctx, MC_ERR_IO, "%s: cannot create folder: %s", path,
						     strerror(errno));
				if (rc == MC_OK)
					next = openat(cur, path + i,
						      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			}
			if (rc == MC_OK && next < 0 && (create || errno != ENOENT))
				rc = errno == ELOOP || errno == ENOTDIR
					     ? mc__err(ctx, MC_ERR_UNSAFE_DEST, "%s: is a symlink or not a "
						       "folder; refusing to write through it", path)
					     : mc__err(ctx, MC_ERR_IO, "%s: cannot open folder: %s", path,
						       strerror(errno));
			close(cur);
			cur = next;
			if (rc == MC_OK && cur >= 0 && owned)
				rc = check_owner(L, cur, path);
		}
		path[j] = c;
	}
	if (rc != MC_OK) {
		if (cur >= 0)
			close(cur);
		return rc;
	}
	*fd = cur;
	return MC_OK;
}

/* Opens a tier root, creating it when create is set (*fd is -1 with MC_OK when it is
 * missing and create is not). The part of the path its setter named is taken as
 * given, links and all; the folders a default adds beneath it (torchinductor_<user>
 * in a shared /tmp, triton in the inductor root) are walked one at a time without
 * following links, as every folder beneath a root is. */
static int
open_tier_root(struct loader *L, struct tier_root *t, int create, int *fd)
{
	char *p = mc__strdup(t->root), *s;
	int cur = -1, rc = MC_OK;

	*fd = -1;
	if (p == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	for (s = p + 1; create; s++) { /* the named part, made as mkdir -p would */
		if (*s == '/' || (size_t)(s - p) == t->named) {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0755) == 0)
				rc = remember_dir(L, (size_t)-1, p);
			else if (errno != EEXIST)
				rc = mc__errno(L->ctx, MC_ERR_IO, "cannot create folder", p);
			*s = c;
			if (rc != MC_OK || (size_t)(s - p) >= t->named)
				break;
		}
	}
	p[t->named] = '\0';
	if (rc == MC_OK && (cur = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 &&
	    (create || errno != ENOENT))
		rc = mc__errno(L->ctx, MC_ERR_IO, "cannot open tier folder", p);
	p[t->named] = t->root[t->named];
	if (rc == MC_OK && cur >= 0)
		rc = walk_dirs(L, L->ctx, cur, p, t->named, (size_t)-1, create, 1, fd);
	free(p);
	return rc;
}

/* Opens folder rel beneath the tier root, one component at a time and never through
 * a link; creates missing ones when create is set (the calling thread only). *fd is
 * -1 with MC_OK when a component is missing and create is not set. Errors go to ctx. */
static int
open_rel_dir(struct loader *L, mc_ctx *ctx, size_t tier, const char *rel, int create, int *fd)
{
	const struct tier_root *t = &L->tiers[tier];
	char path[2 * MC_PATH_MAX];
	size_t keep = strlen(t->root) + 1;
	int start;

	*fd = -1;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", t->root, rel) >= sizeof path)
		return mc__err(ctx, MC_ERR_INVALID, "path too long");
	if ((start = dup(t->fd)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", t->root);
	return walk_dirs(L, ctx, start, path, keep, tier, create, 0, fd);
}

static void
split_dest(const char *dest, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(dest, '/');

	if (slash == NULL) {
		snprintf(dir, dirlen, ".");
		*base = dest;
	} else {
		snprintf(dir, dirlen, "%.*s", (int)(slash - dest), dest);
		*base = slash + 1;
	}
}

static size_t
tier_index(struct loader *L, const char *tier)
{
	size_t i;

	for (i = 0; i < L->ntiers; i++)
		if (strcmp(L->tiers[i].name, tier) == 0)
			return i;
	return (size_t)-1;
}

static int
open_dir_of(struct loader *L, size_t tier, const char *dir, int create, int *fd)
{
	int rc;

	*fd = -1;
	if (L->tiers[tier].fd < 0) {
		if (!create)
			return MC_OK;
		if ((rc = open_tier_root(L, &L->tiers[tier], 1, &L->tiers[tier].fd)) != MC_OK)
			return rc;
	}
	if (strcmp(dir, ".") == 0) {
		*fd = dup(L->tiers[tier].fd);
		return *fd < 0 ? mc__errno(L->ctx, MC_ERR_IO, "cannot open", L->tiers[tier].root) : MC_OK;
	}
	return open_rel_dir(L, L->ctx, tier, dir, create, fd);
}

/* Is an identical file already at the destination? Refuses links and folders there. */
static int
check_existing(struct loader *L, size_t tier, const struct mc_martifact *a, const char *dest,
	       int *same)
{
	char dir[MC_PATH_MAX];
	const char *base;
	struct mc_mobject o;
	struct stat st;
	int dfd, fd, rc;

	*same = 0;
	split_dest(dest, dir, sizeof dir, &base);
	if ((rc = open_dir_of(L, tier, dir, 0, &dfd)) != MC_OK || dfd < 0)
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
	if ((uint64_t)st.st_size == a->size &&
	    (fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) >= 0) {
		crypto_generichash_state gs;
		unsigned char buf[65536], h[MC_HASH_BYTES];
		ssize_t r;

		crypto_generichash_init(&gs, NULL, 0, sizeof h);
		while ((r = read(fd, buf, sizeof buf)) > 0)
			crypto_generichash_update(&gs, buf, (size_t)r);
		crypto_generichash_final(&gs, h, sizeof h);
		close(fd);
		if (r == 0 && (rc = mc__mobjects(L->ctx, &L->b->m, a->object, 1, &o)) != MC_OK) {
			close(dfd);
			return rc;
		}
		*same = r == 0 && memcmp(h, o.hash, sizeof h) == 0;
	}
	close(dfd);
	return MC_OK;
}

/* Temp files and folders of loaders that were killed: ".<name>.mc<pid>-<rand>.tmp",
 * older than an hour, whose process is gone. Removed from the folders a load stages
 * into, so crashed loads leave no garbage for long. The age test keeps a live loader
 * in another pid namespace (a container sharing the cache) from losing its files. */
#define STALE_SECONDS 3600

static void
remove_tree_at(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(d), e->d_name, 0); /* a unit folder holds only files */
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void
clean_stale(int dfd)
{
	int fd = dup(dfd);
	DIR *d;
	struct dirent *e;
	time_t now = time(NULL);
	long self = (long)getpid();

	if (fd < 0 || (d = fdopendir(fd)) == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		const char *mc, *n = e->d_name;
		struct stat st;
		char *end;
		long pid;
		size_t len;

		if (n[0] != '.' || (len = strlen(n)) < 8 || strcmp(n + len - 4, ".tmp") != 0 ||
		    (mc = strstr(n, ".mc")) == NULL)
			continue;
		pid = strtol(mc + 3, &end, 10);
		if (end == mc + 3 || *end != '-' || pid <= 0 || pid == self)
			continue;
		if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 || now - st.st_mtime < STALE_SECONDS)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (S_ISDIR(st.st_mode))
			remove_tree_at(dfd, n);
		else if (S_ISREG(st.st_mode))
			unlinkat(dfd, n, 0);
	}
	closedir(d);
}

static void
temp_name(const struct loader *L, char *buf, size_t len, const char *name, unsigned tries)
{
	snprintf(buf, len, ".%.200s.mc%ld-%08x.tmp", name, L->pid, (unsigned)(L->token + tries));
}

/* A staged file's names: where it ends (dest, split into dir and base), the folder
 * it is staged in (relative to its tier root) and its name there. */
struct snames {
	char dest[MC_PATH_MAX];
	char dir[MC_PATH_MAX];
	const char *base;
	char stage[MC_PATH_MAX + 512];
	char tmp[512];
};

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
	split_dest(dest, dir, dirlen, base);
	if (ap != NULL)
		*ap = a;
	return MC_OK;
}

/* The folder of a unit (relative to its tier root), read through c. */
static int
unit_dir(mc_ctx *ctx, struct mc_acur *c, const struct unit *u, char *dir, size_t len)
{
	char dest[MC_PATH_MAX];
	const char *base;

	return art_dest(ctx, c, u->art, dest, sizeof dest, dir, len, &base, NULL);
}

/* A unit folder's parent, its name, and its temp folder's name and path. */
struct unames {
	char parent[MC_PATH_MAX];
	const char *name;
	char tmp[512];
	char stage[MC_PATH_MAX + 512];
};

static void
unit_names(const struct loader *L, const struct unit *u, const char *dir, struct unames *n)
{
	split_dest(dir, n->parent, sizeof n->parent, &n->name);
	temp_name(L, n->tmp, sizeof n->tmp, n->name, u->tries);
	if (strcmp(n->parent, ".") == 0)
		snprintf(n->stage, sizeof n->stage, "%s", n->tmp);
	else
		snprintf(n->stage, sizeof n->stage, "%s/%s", n->parent, n->tmp);
}

/* Computes s's names from its artifact, read through c; *ap (may be NULL) gets the
 * artifact, valid until the next use of c. */
static int
staged_names(struct loader *L, mc_ctx *ctx, struct mc_acur *c, const struct staged *s,
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
		unit_names(L, &L->units[s->unit], n->dir, &un);
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
 * unless it was scanned already. */
static int
open_and_clean(struct loader *L, struct hset *S, size_t tier, const char *dir, int *dfd)
{
	int rc, added;

	if ((rc = open_dir_of(L, tier, dir, 1, dfd)) != MC_OK)
		return rc;
	if (hset_add(S, tier, dir, &added) != MC_OK) {
		close(*dfd);
		*dfd = -1;
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (added)
		clean_stale(*dfd);
	return MC_OK;
}

/* Makes the unit's temp folder in its parent. */
static int
unit_prepare(struct loader *L, struct hset *S, struct unit *u, const char *dir)
{
	struct unames n;
	int pfd, rc, err = 0;

	unit_names(L, u, dir, &n);
	if ((rc = open_and_clean(L, S, u->tier, n.parent, &pfd)) != MC_OK)
		return rc;
	for (; u->tries < 16; u->tries++) {
		unit_names(L, u, dir, &n);
		if (mkdirat(pfd, n.tmp, 0755) == 0) {
			u->made = 1;
			break;
		}
		if ((err = errno) != EEXIST)
			break;
	}
	close(pfd);
	if (!u->made)
		return mc__err(L->ctx, MC_ERR_IO, "%s/%s: cannot create a temp folder: %s",
			       L->tiers[u->tier].root, n.parent, strerror(err));
	return MC_OK;
}

/* Before any content arrives: makes the folders (each scanned once for stale temp
 * files) and the units' temp folders. Runs on the calling thread. */
static int
prepare(struct loader *L)
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
		if ((rc = staged_names(L, L->ctx, &L->cur, s, &n, NULL)) != MC_OK)
			break;
		if (s->unit != NO_UNIT) {
			rc = unit_prepare(L, &S, &L->units[s->unit], n.dir);
			continue;
		}
		/* Files of one folder are mostly neighbours: opened once for them. */
		if (s->tier == prevtier && strcmp(prev, n.dir) == 0)
			continue;
		if ((rc = open_and_clean(L, &S, s->tier, n.dir, &dfd)) != MC_OK)
			break;
		close(dfd);
		prevtier = s->tier;
		snprintf(prev, sizeof prev, "%s", n.dir);
	}
	free(S.v);
	return rc;
}

/* Creates name in folder dir (relative to the tier root) exclusively, without
 * following a link anywhere on the way: openat2() where the kernel has it, else a
 * folder walk. */
static int
create_beneath(struct loader *L, mc_ctx *ctx, size_t tier, const char *dir, const char *name,
	       int *fd)
{
	char path[2 * MC_PATH_MAX];
	int dfd, rc;

	*fd = -1;
#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)
	if (!L->no_openat2) {
		struct open_how how;
		int k;

		memset(&how, 0, sizeof how);
		how.flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
		how.mode = 0644;
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
		if (strcmp(dir, ".") == 0)
			k = snprintf(path, sizeof path, "%s", name);
		else
			k = snprintf(path, sizeof path, "%s/%s", dir, name);
		if (k < 0 || (size_t)k >= sizeof path)
			return mc__err(ctx, MC_ERR_INVALID, "%s/%s: path too long", L->tiers[tier].root,
				       dir);
		*fd = (int)syscall(SYS_openat2, L->tiers[tier].fd, path, &how, sizeof how);
		if (*fd >= 0 || errno == EEXIST)
			return MC_OK;
		if (errno == ENOSYS || errno == EPERM)
			L->no_openat2 = 1;
		/* Anything else: the walk below names the part that is wrong. */
	}
#endif
	if ((rc = open_rel_dir(L, ctx, tier, dir, 0, &dfd)) != MC_OK)
		return rc;
	if (dfd < 0)
		return mc__err(ctx, MC_ERR_IO, "%s/%s: folder vanished during the load",
			       L->tiers[tier].root, dir);
	*fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	rc = errno;
	close(dfd);
	errno = rc;
	return MC_OK;
}

static int
stage_open(struct loader *L, mc_ctx *ctx, struct mc_acur *c, struct staged *s)
{
	struct snames n;
	int rc, err = 0;

	for (;;) {
		if ((rc = staged_names(L, ctx, c, s, &n, NULL)) != MC_OK ||
		    (rc = create_beneath(L, ctx, s->tier, n.stage, n.tmp, &s->fd)) != MC_OK)
			return rc;
		err = errno;
		if (s->fd >= 0 || err != EEXIST || s->unit != NO_UNIT || s->tries == 15)
			break;
		s->tries++; /* taken by another loader: another name */
	}
	if (s->fd < 0)
		return mc__err(ctx, MC_ERR_IO, "%s/%s/%s: cannot create: %s", L->tiers[s->tier].root,
			       n.stage, n.tmp, strerror(err));
	s->made = 1;
	return MC_OK;
}

/* The message for a failed write or close of s, naming its folder. */
static int
write_error(struct loader *L, mc_ctx *ctx, struct mc_acur *c, const struct staged *s, int err)
{
	struct snames n;

	if (staged_names(L, ctx, c, s, &n, NULL) != MC_OK)
		snprintf(n.stage, sizeof n.stage, "?");
	return mc__err(ctx, MC_ERR_IO, "%s/%s: cannot write: %s", L->tiers[s->tier].root, n.stage,
		       strerror(err));
}

static int
stage_close(struct loader *L, mc_ctx *ctx, struct mc_acur *c, struct staged *s)
{
	int rc = MC_OK;

	if (s->fd >= 0 && close(s->fd) != 0)
		rc = write_error(L, ctx, c, s, errno);
	s->fd = -1;
	return rc;
}

/* The files of the object a worker is writing. */
static int
close_current(struct loader *L, mc_ctx *ctx, struct lworker *lw)
{
	size_t k;
	int rc = MC_OK, r;

	if (!lw->open)
		return MC_OK;
	for (k = L->obj_first[lw->obj]; k < L->obj_first[lw->obj + 1]; k++)
		if ((r = stage_close(L, ctx, &lw->cur, &L->st[L->by_obj[k]])) != MC_OK && rc == MC_OK)
			rc = r;
	lw->open = 0;
	return rc;
}

static int
open_object(struct loader *L, mc_ctx *ctx, struct lworker *lw, size_t obj)
{
	const struct mc_martifact *a;
	size_t k;
	int rc;

	if ((rc = close_current(L, ctx, lw)) != MC_OK)
		return rc;
	lw->cur.ctx = ctx;
	/* The content's size is its artifacts' size. */
	if ((rc = mc__acur_get(&lw->cur, L->st[L->by_obj[L->obj_first[obj]]].art, &a)) != MC_OK)
		return rc;
	lw->obj = obj;
	lw->open = 1;
	lw->size = a->size;
	lw->written = 0;
	for (k = L->obj_first[obj]; k < L->obj_first[obj + 1]; k++)
		if ((rc = stage_open(L, ctx, &lw->cur, &L->st[L->by_obj[k]])) != MC_OK)
			return rc;
	return MC_OK;
}

static int
sink(void *ud, unsigned worker, mc_ctx *ctx, size_t obj, const unsigned char *buf, size_t n)
{
	struct loader *L = ud;
	struct lworker *lw = &L->wk[worker];
	size_t k;
	int rc;

	if (L->obj_first[obj] == L->obj_first[obj + 1])
		return MC_OK;
	if ((!lw->open || lw->obj != obj) && (rc = open_object(L, ctx, lw, obj)) != MC_OK)
		return rc;
	for (k = L->obj_first[obj]; k < L->obj_first[obj + 1]; k++) {
		struct staged *s = &L->st[L->by_obj[k]];
		if (mc__write_all(s->fd, buf, n) != 0)
			return write_error(L, ctx, &lw->cur, s, errno);
	}
	lw->written += n;
	if (lw->written == lw->size)
		return close_current(L, ctx, lw);
	return MC_OK;
}

/* Removes s's staged file (best effort: on the failure paths). */
static void
remove_staged(struct loader *L, struct staged *s)
{
	struct snames n;
	int dfd;

	if (s->made && staged_names(L, L->ctx, &L->cur, s, &n, NULL) == MC_OK &&
	    open_dir_of(L, s->tier, n.stage, 0, &dfd) == MC_OK && dfd >= 0) {
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

	if (!u->made || unit_dir(L->ctx, &L->cur, u, dir, sizeof dir) != MC_OK)
		return;
	unit_names(L, u, dir, &n);
	if (open_dir_of(L, u->tier, n.parent, 0, &dfd) == MC_OK && dfd >= 0) {
		if (unlinkat(dfd, n.tmp, AT_REMOVEDIR) == 0)
			u->made = 0;
		close(dfd);
	}
}

static void
rollback(struct loader *L)
{
	size_t i;

	for (i = 0; i < L->nwk; i++)
		close_current(L, L->ctx, &L->wk[i]);
	for (i = 0; i < L->nst; i++) {
		if (L->st[i].fd >= 0)
			close(L->st[i].fd);
		L->st[i].fd = -1;
		remove_staged(L, &L->st[i]);
	}
	for (i = 0; i < L->nunits; i++)
		remove_unit_temp(L, &L->units[i]);
	/* Newest first; a folder another process filled meanwhile stays. */
	for (i = L->nmade; i > 0; i--) {
		struct made_dir *m = &L->made[i - 1];
		if (m->tier == (size_t)-1)
			rmdir(m->path);
		else
			unlinkat(L->tiers[m->tier].fd, m->path, AT_REMOVEDIR);
	}
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

		if (!u->made)
			continue;
		if ((rc = unit_dir(L->ctx, &L->cur, u, dir, sizeof dir)) != MC_OK)
			break;
		unit_names(L, u, dir, &n);
		if ((rc = open_dir_of(L, u->tier, n.parent, 0, &dfd)) != MC_OK || dfd < 0) {
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
		if ((rc = staged_names(L, L->ctx, &L->cur, s, &n, &a)) != MC_OK)
			break;
		/* Files of one folder are neighbours in the artifact order: one open each. */
		if (s->tier != prevtier || strcmp(prev, n.dir) != 0) {
			if (dfd >= 0)
				close(dfd);
			if ((rc = open_dir_of(L, s->tier, n.dir, 0, &dfd)) != MC_OK)
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
		report(L->b, fn, ud, MC_LOAD_INSTALLED, a, n.dest);
	}
	if (dfd >= 0)
		close(dfd);
	return rc;
}

static int
commit(struct loader *L, mc_artifact_fn fn, void *ud)
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

		if (s->unit == NO_UNIT)
			continue;
		if (L->units[s->unit].lost)
			remove_staged(L, s);
		s->made = 0;
		if ((rc = staged_names(L, L->ctx, &L->cur, s, &n, &a)) != MC_OK)
			break;
		report(L->b, fn, ud, L->units[s->unit].lost ? MC_LOAD_UNCHANGED : MC_LOAD_INSTALLED, a,
		       n.dest);
	}
	for (i = 0; i < L->nunits && rc == MC_OK; i++)
		if (L->units[i].lost)
			remove_unit_temp(L, &L->units[i]);
	return rc;
}

static void
loader_free(struct loader *L)
{
	size_t i;

	for (i = 0; i < L->ntiers; i++)
		if (L->tiers[i].fd >= 0)
			close(L->tiers[i].fd);
	free(L->tiers);
	for (i = 0; i < L->nmade; i++)
		free(L->made[i].path);
	free(L->made);
	free(L->st);
	free(L->units);
	free(L->unit_tab);
	mc__acur_free(&L->cur);
	mc__acur_free(&L->ucur);
	for (i = 0; L->wk != NULL && i < L->nwk; i++)
		mc__acur_free(&L->wk[i].cur);
	free(L->wk);
	free(L->by_obj);
	free(L->obj_first);
	free(L->unchanged);
}

static int
setup_tiers(struct loader *L)
{
	const mc_bundle *b = L->b;
	size_t i;
	int rc;

	for (i = 0; i < b->m.nartifacts; i++) {
		const struct mc_martifact *a;
		struct tier_root *t;

		if (!b->sel[i])
			continue;
		if ((rc = mc__acur_get(&L->cur, i, &a)) != MC_OK)
			return rc;
		if (tier_index(L, a->handler->tier) != (size_t)-1)
			continue;
		if ((t = realloc(L->tiers, (L->ntiers + 1) * sizeof *t)) == NULL)
			return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		L->tiers = t;
		t = &L->tiers[L->ntiers++];
		t->name = a->handler->tier;
		t->fd = -1;
		if ((rc = mc__tier_root(L->ctx, t->name, &t->root, &t->named)) != MC_OK)
			return rc;
		/* Opened if it exists; made only when the first file is staged, so that a
		 * load refused before that leaves no trace. */
		if ((rc = open_tier_root(L, t, 0, &t->fd)) != MC_OK)
			return rc;
	}
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
		if ((rc = unit_dir(L->ctx, &L->ucur, u, udir, sizeof udir)) != MC_OK)
			return rc;
		if (strcmp(udir, dir) == 0) {
			*unit = L->unit_tab[i] - 1;
			break;
		}
	}
	if (*unit == NO_UNIT) {
		dfd = -1;
		if (L->tiers[tier].fd >= 0 && (rc = open_dir_of(L, tier, dir, 0, &dfd)) != MC_OK)
			return rc;
		if (dfd >= 0) {
			close(dfd);
		} else {
			if (L->nunits >= NO_UNIT)
				return mc__err(L->ctx, MC_ERR_LIMIT, "more than %lu folders to install",
					       (unsigned long)NO_UNIT - 1);
			if ((u = realloc(L->units, (L->nunits + 1) * sizeof *u)) == NULL)
				return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
			L->units = u;
			u = &u[L->nunits];
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

/* MC_LOAD_SYNC: one syncfs(2) per filesystem among the tier roots, which covers the
 * files, the renames and the folders made; a per-file fsync would cost a disk flush
 * each. Tiers whose files were all there already are flushed too: an earlier load
 * may have left them unwritten. */
static int
sync_tiers(struct loader *L)
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

/* Artifact i (selected): left alone when its file is there already with the same
 * content, else entered among the files to stage. */
static int
plan_artifact(struct loader *L, size_t i)
{
	const struct mc_martifact *a;
	char dir[MC_PATH_MAX], dest[MC_PATH_MAX];
	const char *base;
	struct staged *s;
	uint32_t unit = NO_UNIT;
	size_t tier;
	int rc, same = 0;

	if ((rc = mc__acur_get(&L->cur, i, &a)) != MC_OK)
		return rc;
	tier = tier_index(L, a->handler->tier);
	if ((rc = mc__artifact_dest(L->b, a, dest, sizeof dest)) != MC_OK)
		return rc;
	split_dest(dest, dir, sizeof dir, &base);
	if ((a->handler->flags & MC_TYPE_FOLDER_UNIT) && strcmp(dir, ".") != 0 &&
	    (rc = find_unit(L, tier, dir, i, &unit)) != MC_OK)
		return rc;
	if (unit == NO_UNIT && L->tiers[tier].fd >= 0 &&
	    (rc = check_existing(L, tier, a, dest, &same)) != MC_OK)
		return rc;
	if ((L->unchanged[i] = (unsigned char)same) != 0)
		return MC_OK;
	s = &L->st[L->nst++];
	s->art = (uint32_t)i; /* the plan refuses more than 2^32 - 1 artifacts */
	s->unit = unit;
	s->fd = -1;
	s->tier = (uint16_t)tier;
	L->obj_first[a->object + 1]++;
	if (a->size == 0) /* objects are unique by content: there is one such */
		L->empty_obj = a->object;
	return MC_OK;
}

/* What is already there, and what must be staged: the staged files grouped by
 * object (by_obj, obj_first) for the streaming sink. */
static int
plan_staging(struct loader *L)
{
	const struct mc_bundle *b = L->b;
	const struct mc_martifact *a;
	uint32_t *fill;
	size_t i;
	int rc = MC_OK;

	if ((L->unchanged = calloc(b->m.nartifacts + 1, sizeof *L->unchanged)) == NULL ||
	    (L->st = calloc(b->m.nartifacts + 1, sizeof *L->st)) == NULL ||
	    (L->obj_first = calloc(b->m.nobjects + 2, sizeof *L->obj_first)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
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

/* Stages every file: the folders made and cleaned, the bundle streamed to the files
 * on the worker threads. */
static int
stage_all(struct loader *L)
{
	unsigned nwk = mc__threads(L->ctx);
	size_t i;
	int rc;

	/* Counted only once there: rollback() walks them. */
	if ((L->wk = calloc(nwk, sizeof *L->wk)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	L->nwk = nwk;
	for (i = 0; i < L->nwk; i++)
		mc__acur_init(&L->wk[i].cur, L->ctx, &L->b->m, mc__find_type);
	rc = prepare(L);
	/* Empty content produces no data to stream: staged now. */
	if (rc == MC_OK && L->empty_obj != (size_t)-1 &&
	    (rc = open_object(L, L->ctx, &L->wk[0], L->empty_obj)) == MC_OK)
		rc = close_current(L, L->ctx, &L->wk[0]);
	if (rc == MC_OK)
		rc = mc__bundle_stream_par(L->b, sink, L);
	for (i = 0; i < L->nwk; i++) {
		int r = close_current(L, L->ctx, &L->wk[i]);
		if (rc == MC_OK)
			rc = r;
	}
	return rc;
}

/* Tells fn of the selected artifacts already in place (MC_LOAD_UNCHANGED) and,
 * unless only_unchanged, of the others as MC_LOAD_PLANNED. */
static int
report_selected(struct loader *L, mc_artifact_fn fn, void *ud, int only_unchanged)
{
	const struct mc_martifact *a;
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && fn != NULL && i < L->b->m.nartifacts; i++) {
		if (!L->b->sel[i] || (only_unchanged && !L->unchanged[i]))
			continue;
		if ((rc = mc__acur_get(&L->cur, i, &a)) == MC_OK)
			report(L->b, fn, ud, L->unchanged[i] ? MC_LOAD_UNCHANGED : MC_LOAD_PLANNED, a,
			       NULL);
	}
	return rc;
}

int
mc_bundle_load(mc_bundle *b, unsigned flags, mc_artifact_fn fn, void *ud)
{
	struct loader L;
	int rc, dry = (flags & MC_LOAD_DRY_RUN) != 0;

	if (b == NULL || (flags & ~(MC_LOAD_DRY_RUN | MC_LOAD_SYNC)) != 0)
		return MC_ERR_INVALID;
	memset(&L, 0, sizeof L);
	L.b = b;
	L.ctx = b->ctx;
	L.token = randombytes_random();
	L.pid = (long)getpid();
	L.empty_obj = (size_t)-1;
	L.last_tier = (size_t)-1;
	mc__acur_init(&L.cur, b->ctx, &b->m, mc__find_type);
	mc__acur_init(&L.ucur, b->ctx, &b->m, mc__find_type);
	if ((rc = mc__bundle_policy(b)) == MC_OK && (rc = mc__bundle_plan(b)) == MC_OK &&
	    (rc = setup_tiers(&L)) == MC_OK)
		rc = plan_staging(&L);
	if (rc == MC_OK && dry) {
		if ((rc = mc__bundle_stream_par(b, NULL, NULL)) == MC_OK)
			rc = report_selected(&L, fn, ud, 0);
	} else if (rc == MC_OK) {
		if ((rc = stage_all(&L)) == MC_OK)
			rc = commit(&L, fn, ud);
		if (rc == MC_OK && (flags & MC_LOAD_SYNC))
			rc = sync_tiers(&L);
		if (rc == MC_OK)
			rc = report_selected(&L, fn, ud, 1);
	}
	if (rc != MC_OK && !dry)
		rollback(&L);
	loader_free(&L);
	return rc;
}
