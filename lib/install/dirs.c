/*
 * dirs.c - tier roots, folders opened without following links (or checked, in a dry
 * run), owners, stale temp files.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

size_t
mc__loader_tier(struct loader *L, const char *tier)
{
	size_t i;

	for (i = 0; i < L->ntiers; i++)
		if (strcmp(L->tiers[i].name, tier) == 0)
			return i;
	return MC_NO_INDEX;
}

/* Any thread: the workers make folders too (stage.c). */
static int
remember_dir(struct loader *L, mc_ctx *ctx, size_t tier, const char *path)
{
	char *copy = mc__strdup(path);
	int rc = MC_OK;

	if (copy == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	pthread_mutex_lock(&L->lock);
	if (mc__grow(&L->made, &L->madecap, L->nmade + 1, sizeof *L->made) != MC_OK)
		rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (rc == MC_OK) {
		L->made[L->nmade].path = copy;
		L->made[L->nmade++].tier = tier;
	} else {
		free(copy);
	}
	pthread_mutex_unlock(&L->lock);
	return rc;
}

int
mc__remember_root(struct loader *L, const char *path)
{
	return remember_dir(L, L->ctx, MC_NO_INDEX, path);
}

int
mc__give_owner(mc_ctx *ctx, int fd, int dfd, const char *name, const char *fmt, ...)
{
	char what[2 * MC_PATH_MAX];
	va_list ap;
	int r, err;

	if (ctx->owner_uid == -1 && ctx->owner_gid == -1)
		return MC_OK;
	if (fd >= 0)
		r = fchown(fd, (uid_t)ctx->owner_uid, (gid_t)ctx->owner_gid);
	else
		r = fchownat(dfd, name, (uid_t)ctx->owner_uid, (gid_t)ctx->owner_gid,
			     AT_SYMLINK_NOFOLLOW);
	if (r == 0)
		return MC_OK;
	err = errno;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return mc__err(ctx, MC_ERR_IO, "%s: cannot give it to owner %ld:%ld: %s", what,
		       ctx->owner_uid, ctx->owner_gid, strerror(err));
}

int
mc__cannot_create(mc_ctx *ctx, const struct loader *L, size_t tier, const char *dir, int err)
{
	int root = strcmp(dir, ".") == 0;

	return mc__err(ctx, MC_ERR_IO, "%s%s%s: cannot create files in it: %s",
		       L->tiers[tier].root, root ? "" : "/", root ? "" : dir, strerror(err));
}

/* A folder a default adds to a root (torchinductor_<user> in a shared /tmp) may have
 * been made by someone else before us: torch would run what they later put there. It
 * must be ours, root's or the owner's this load gives its files to (an earlier load
 * gave it to them), and not writable by others, unless sticky. */
static int
check_owner(struct loader *L, int fd, const char *path)
{
	const long owner = L->ctx->owner_uid;
	struct stat st;

	if (fstat(fd, &st) != 0)
		return mc__errno(L->ctx, MC_ERR_IO, "cannot inspect folder", path);
	if ((st.st_uid != geteuid() && st.st_uid != 0 &&
	     (owner == -1 || st.st_uid != (uid_t)owner)) ||
	    ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)))
		return mc__err(L->ctx, MC_ERR_UNSAFE_DEST, "%s: owned by another user (uid %lu) or "
			       "writable by others; refusing to write in it", path,
			       (unsigned long)st.st_uid);
	return MC_OK;
}

/* Whether folder path could be made in the open folder cur: the error mkdirat()
 * would give, in walk_dirs()' words, when the process may not write and search cur. */
static int
probe_mkdir(mc_ctx *ctx, int cur, const char *path)
{
	if (faccessat(cur, ".", W_OK | X_OK, AT_EACCESS) == 0)
		return MC_OK;
	return mc__err(ctx, MC_ERR_IO, "%s: cannot create folder: %s", path, strerror(errno));
}

/* Walks the folders of path from byte from (keep or past it, where start is open)
 * on, beneath the open folder start (taken over, or only read when lent: the caller
 * keeps it, and *fd is then never start itself), one component at a time and never
 * through a link: what comes before keep is the part a caller named. Missing folders are made when create is MC_DIR_MAKE,
 * remembered for the rollback, as (tier, path from keep) or, for tier MC_NO_INDEX, as
 * the whole path, and given the owner; with MC_DIR_PROBE the first missing one is
 * checked as probe_mkdir() does. owned checks each folder with check_owner(). *fd is
 * -1 with MC_OK when a folder is missing and none is made. Messages name the whole
 * path. */
static int
walk_dirs(struct loader *L, mc_ctx *ctx, int start, int lent, char *path, size_t keep,
	  size_t from, size_t tier, int create, int owned, int *fd)
{
	int cur = start, next, rc = MC_OK;
	size_t i, j;

	*fd = -1;
	for (i = from; rc == MC_OK && cur >= 0; i = j) {
		char c;

		i += strspn(path + i, "/");
		if ((j = i + strcspn(path + i, "/")) == i)
			break;
		c = path[j];
		path[j] = '\0';
		if (strcmp(path + i, ".") != 0) {
			int made = 0;

			next = openat(cur, path + i, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0 && errno == ENOENT && create == MC_DIR_PROBE) {
				/* The rest this load would make. */
				rc = probe_mkdir(ctx, cur, path);
				if (!lent || cur != start)
					close(cur);
				cur = -1;
				path[j] = c;
				break;
			}
			if (next < 0 && errno == ENOENT && create) {
				if (mkdirat(cur, path + i, 0777) == 0) { /* less the umask */
					made = 1;
					rc = remember_dir(L, ctx, tier, tier == MC_NO_INDEX ? path : path + keep);
				} else if (errno != EEXIST)
					rc = mc__err(ctx, MC_ERR_IO, "%s: cannot create folder: %s", path,
						     strerror(errno));
				if (rc == MC_OK)
					next = openat(cur, path + i,
						      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			}
			if (rc == MC_OK && next >= 0 && made) /* made just now */
				rc = mc__give_owner(ctx, next, -1, NULL, "%s", path);
			if (rc == MC_OK && next < 0 && (create || errno != ENOENT))
				rc = errno == ELOOP || errno == ENOTDIR
					     ? mc__err(ctx, MC_ERR_UNSAFE_DEST, "%s: is a symlink or not a "
						       "folder; refusing to write through it", path)
					     : mc__err(ctx, MC_ERR_IO, "%s: cannot open folder: %s", path,
						       strerror(errno));
			if (!lent || cur != start)
				close(cur);
			cur = next;
			if (rc == MC_OK && cur >= 0 && owned)
				rc = check_owner(L, cur, path);
		}
		path[j] = c;
	}
	if (rc != MC_OK) {
		if (cur >= 0 && (!lent || cur != start))
			close(cur);
		return rc;
	}
	if (lent && cur >= 0 && cur == start && (cur = dup(start)) < 0)
		return mc__errno(ctx, MC_ERR_IO, "cannot open", path);
	*fd = cur;
	return MC_OK;
}

/* The named part of a root (the first named bytes of p) as mkdir -p would find it:
 * what exists is taken as it is, links and all; the first folder missing must be one
 * the process may make in its parent (*missing is then set: the rest the load would
 * make), else the error mkdir would give, in open_tier_root()'s words. */
static int
probe_named(struct loader *L, char *p, size_t named, int *missing)
{
	struct stat st;
	char *s, *last = NULL, c;
	int rc = MC_OK;

	*missing = 0;
	for (s = p + 1; rc == MC_OK && !*missing && (size_t)(s - p) <= named; s++) {
		if (*s != '/' && (size_t)(s - p) != named)
			continue;
		c = *s;
		*s = '\0';
		if (lstat(p, &st) != 0) {
			if (errno == ENOENT) { /* its parent: the folder before, or / or . */
				if (last != NULL)
					*last = '\0';
				*missing = faccessat(AT_FDCWD, last != NULL ? p : p[0] == '/' ? "/" : ".",
						     W_OK | X_OK, AT_EACCESS) == 0;
				if (last != NULL)
					*last = '/';
			}
			if (!*missing)
				rc = mc__errno(L->ctx, MC_ERR_IO, "cannot create folder", p);
		}
		*s = c;
		if (*s == '/')
			last = s;
	}
	return rc;
}

int
mc__make_path(struct loader *L, char *p, size_t n)
{
	size_t k, nmade = L->nmade;
	char *s, c;
	int rc = MC_OK;

	for (s = p + 1; (size_t)(s - p) <= n; s++) {
		if (*s != '/' && (size_t)(s - p) != n)
			continue;
		c = *s;
		*s = '\0';
		if (mkdir(p, 0777) == 0)
			rc = remember_dir(L, L->ctx, MC_NO_INDEX, p);
		else if (errno != EEXIST)
			rc = mc__errno(L->ctx, MC_ERR_IO, "cannot create folder", p);
		*s = c;
		if (rc != MC_OK)
			break;
	}
	for (k = nmade; rc == MC_OK && k < L->nmade; k++)
		rc = mc__give_owner(L->ctx, -1, AT_FDCWD, L->made[k].path, "%s", L->made[k].path);
	return rc;
}

/* Opens a tier root, creating it when create is MC_DIR_MAKE (*fd is -1 with MC_OK when
 * it is missing and create is not), or checking with MC_DIR_PROBE that it could be
 * made. The part of the path its setter named is taken as given, links and all; the
 * folders a default adds beneath it (torchinductor_<user> in a shared /tmp, triton in
 * the inductor root) are walked one at a time without following links, as every
 * folder beneath a root is. Each folder made is given the owner. */
static int
open_tier_root(struct loader *L, struct tier_root *t, int create, int *fd)
{
	char *p = mc__strdup(t->root);
	int cur = -1, rc = MC_OK, make = create == MC_DIR_MAKE, missing = 0;

	*fd = -1;
	if (p == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	if (create == MC_DIR_PROBE)
		rc = probe_named(L, p, t->named, &missing);
	if (make)
		rc = mc__make_path(L, p, t->named);
	p[t->named] = '\0';
	if (rc == MC_OK && !missing && (cur = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 &&
	    (create || errno != ENOENT))
		rc = mc__errno(L->ctx, MC_ERR_IO, "cannot open the cache folder", p);
	p[t->named] = t->root[t->named];
	if (rc == MC_OK && cur >= 0)
		rc = walk_dirs(L, L->ctx, cur, 0, p, t->named, t->named, MC_NO_INDEX, create, 1, fd);
	free(p);
	return rc;
}

int
mc__setup_tiers(struct loader *L)
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
		if (mc__loader_tier(L, a->handler->tier) != MC_NO_INDEX)
			continue;
		if ((t = realloc(L->tiers, (L->ntiers + 1) * sizeof *t)) == NULL)
			return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
		L->tiers = t;
		t = &L->tiers[L->ntiers++];
		t->name = a->handler->tier;
		t->fd = -1;
		t->abs = NULL;
		t->keys = NULL;
		t->nkeys = 0;
		t->pfd = -1;
		t->sname = NULL;
		t->fresh = MC_FRESH_NONE;
		t->host = MC_NO_INDEX;
		if ((rc = mc__tier_root(L->ctx, t->name, &t->root, &t->named)) != MC_OK)
			return rc;
		/* Opened if it exists; made only when the first file is staged, so that a
		 * load refused before that leaves no trace. */
		if ((rc = open_tier_root(L, t, 0, &t->fd)) != MC_OK)
			return rc;
	}
	return MC_OK;
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

	*fd = -1;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", t->root, rel) >= sizeof path)
		return mc__err(ctx, MC_ERR_INVALID, "path too long");
	return walk_dirs(L, ctx, t->fd, 1, path, keep, keep, tier, create, 0, fd);
}

int
mc__open_dir_of(struct loader *L, size_t tier, const char *dir, int create, int *fd)
{
	int rc;

	*fd = -1;
	if (L->tiers[tier].fd < 0) {
		if (!create)
			return MC_OK;
		if (create == MC_DIR_PROBE) { /* missing: made by the load, if it can be */
			rc = open_tier_root(L, &L->tiers[tier], create, fd);
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			return rc;
		}
		if ((rc = open_tier_root(L, &L->tiers[tier], create, &L->tiers[tier].fd)) != MC_OK)
			return rc;
	}
	if (strcmp(dir, ".") == 0) {
		*fd = dup(L->tiers[tier].fd);
		return *fd < 0 ? mc__errno(L->ctx, MC_ERR_IO, "cannot open", L->tiers[tier].root) : MC_OK;
	}
	return open_rel_dir(L, L->ctx, tier, dir, create, fd);
}

void
mc__dcur_init(struct dcur *d)
{
	d->tier = MC_NO_INDEX;
	d->n = 0;
}

/* Closes the cursor's folders past the first keep. */
static void
dcur_cut(struct dcur *d, size_t keep)
{
	while (d->n > keep)
		close(d->fd[--d->n]);
	if (d->n == 0)
		d->tier = MC_NO_INDEX;
}

void
mc__dcur_close(struct dcur *d)
{
	dcur_cut(d, 0);
}

/* Opens folder dir of a tier through the cursor: the folders it shares with the one
 * opened last are kept open, the rest walked one component at a time, never through
 * a link (walk_dirs()); create as there (MC_DIR_OPEN or MC_DIR_MAKE). *fd belongs to
 * the cursor, valid until its next use; -1 with MC_OK when a folder is missing. */
int
mc__dcur_open(struct loader *L, mc_ctx *ctx, struct dcur *d, size_t tier, const char *dir,
	      int create, int *fd)
{
	const struct tier_root *t = &L->tiers[tier];
	char path[2 * MC_PATH_MAX];
	size_t keep = strlen(t->root) + 1, len, k, i, j;
	int rc;

	*fd = -1;
	if (t->fd < 0)
		return MC_OK; /* the root is made before the threads start */
	if (strcmp(dir, ".") == 0) {
		*fd = t->fd;
		return MC_OK;
	}
	if ((len = strlen(dir)) >= MC_PATH_MAX ||
	    (size_t)snprintf(path, sizeof path, "%s/%s", t->root, dir) >= sizeof path)
		return mc__err(ctx, MC_ERR_INVALID, "%s/%s: path too long", t->root, dir);
	if (d->tier != tier)
		dcur_cut(d, 0);
	/* The folders open already that dir passes through. The last slot holds the rest
	 * of a deep path: a folder below it is walked again from the slot before. */
	for (k = 0; k < d->n; k++) {
		size_t e = d->end[k];
		if (e > len || memcmp(d->path, dir, e) != 0 || (dir[e] != '/' && dir[e] != '\0'))
			break;
	}
	if (k == MC_DCUR_DEPTH && dir[d->end[k - 1]] != '\0')
		k--;
	dcur_cut(d, k);
	d->tier = tier;
	memcpy(d->path, dir, len + 1);
	for (i = k > 0 ? d->end[k - 1] : 0; dir[i] != '\0'; i = j) {
		int start = d->n > 0 ? d->fd[d->n - 1] : t->fd, next;
		size_t stop;

		i += strspn(dir + i, "/");
		if (dir[i] == '\0')
			break;
		j = i + strcspn(dir + i, "/");
		/* The last slot takes the rest of a deep path in one walk. */
		stop = d->n + 1 < MC_DCUR_DEPTH ? j : len;
		if (d->n >= MC_DCUR_DEPTH) { /* not reached: the slot before is walked again */
			dcur_cut(d, 0);
			return mc__err(ctx, MC_ERR_INVALID, "%s/%s: too deep", t->root, dir);
		}
		path[keep + stop] = '\0';
		rc = walk_dirs(L, ctx, start, 1, path, keep, keep + i, tier, create, 0, &next);
		path[keep + stop] = dir[stop] == '\0' ? '\0' : '/';
		if (rc != MC_OK || next < 0) {
			dcur_cut(d, 0);
			return rc;
		}
		d->end[d->n] = stop;
		d->fd[d->n++] = next;
		j = stop;
	}
	*fd = d->n > 0 ? d->fd[d->n - 1] : t->fd;
	return MC_OK;
}

int
mc__create_in(struct loader *L, mc_ctx *ctx, struct dcur *d, size_t tier, const char *dir,
	      const char *name, int executable, int *fd)
{
	int dfd, rc;

	*fd = -1;
	if ((rc = mc__dcur_open(L, ctx, d, tier, dir, MC_DIR_OPEN, &dfd)) != MC_OK)
		return rc;
	if (dfd < 0)
		return mc__err(ctx, MC_ERR_IO, "%s/%s: folder vanished during the load",
			       L->tiers[tier].root, dir);
	/* One component, no link followed, never an existing file: the folder is safe. */
	*fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		     executable ? 0777 : 0666);
	return MC_OK;
}

void
mc__split_dest(const char *dest, char *dir, size_t dirlen, const char **base)
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

/* Temp files and folders of loaders that were killed: ".<name>.mc<pid>-<rand>-<ns>.tmp"
 * (older ones lack "-<ns>"), whose process is gone. Removed from the folders a load
 * stages into, so a crashed or killed load leaves no garbage for long. <ns> tells the
 * host's boot and the pid namespace the loader ran in: a pid is asked about only where
 * it is one of ours, and otherwise (a loader in another container sharing the cache,
 * whose pid means nothing here, or an older name) the temp must also be an hour old,
 * so that a live loader never loses its files. */
#define STALE_SECONDS 3600

uint32_t
mc__pid_ns_key(void)
{
	unsigned char h[crypto_generichash_BYTES_MIN], in[40 + 2 * sizeof(uint64_t)];
	uint64_t ns[2];
	struct stat st;
	ssize_t n;
	uint32_t key;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, in, 40);
	close(fd);
	if (n < 32 || stat("/proc/self/ns/pid", &st) != 0)
		return 0;
	ns[0] = (uint64_t)st.st_dev;
	ns[1] = (uint64_t)st.st_ino;
	memcpy(in + n, ns, sizeof ns);
	crypto_generichash(h, sizeof h, in, (size_t)n + sizeof ns, NULL, 0);
	key = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	return key + (key == 0); /* 0: unknown */
}

/* Whether the name ending before end has a field "-" and 8 lower-case hex digits last. */
static int
hex_field(const char *n, const char *end)
{
	const char *p;

	if (end - n < 9 || end[-9] != '-')
		return 0;
	for (p = end - 8; p < end; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

/* Whether n is a loader's temp name: its pid, and its <ns> key (0 when it has none).
 * Read backwards: <name> may hold ".mc" itself. */
static int
temp_owner(const char *n, long *pid, uint32_t *key)
{
	size_t len = strlen(n);
	const char *end, *dig;

	if (n[0] != '.' || len < 4 || strcmp(n + len - 4, ".tmp") != 0)
		return 0;
	end = n + len - 4;
	*key = 0;
	if (hex_field(n, end) && hex_field(n, end - 9)) {
		*key = (uint32_t)strtoul(end - 8, NULL, 16); /* stops at the ".tmp" */
		end -= 9;
	}
	if (!hex_field(n, end))
		return 0;
	end -= 9;
	for (dig = end; dig > n && dig[-1] >= '0' && dig[-1] <= '9'; dig--)
		;
	if (dig == end || end - dig > 10 || dig - n < 4 || memcmp(dig - 3, ".mc", 3) != 0)
		return 0;
	*pid = strtol(dig, NULL, 10); /* stops at the "-" */
	return *pid > 0 && *pid <= INT_MAX; /* a pid_t: none a process can have is read as one */
}

/* The deepest a tree a load removes goes: a load's own are a few folders deep; one planted
 * among stale temp names (a shared /tmp) must not take the stack or the descriptors. */
#define REMOVE_DEPTH 32

static void
remove_tree_at(int dfd, const char *name, int depth)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	if (depth >= REMOVE_DEPTH || (d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			remove_tree_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

void
mc__remove_tree(int dfd, const char *name)
{
	remove_tree_at(dfd, name, 0);
}

void
mc__clean_stale(int dfd, uint32_t key, const char *prefix)
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
		const char *n = e->d_name;
		struct stat st;
		uint32_t ns;
		long pid;

		if ((prefix != NULL && strncmp(n, prefix, strlen(prefix)) != 0) ||
		    !temp_owner(n, &pid, &ns) || pid == self)
			continue;
		if (fstatat(dfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    ((ns == 0 || ns != key) && now - st.st_mtime < STALE_SECONDS))
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (S_ISDIR(st.st_mode))
			mc__remove_tree(dfd, n);
		else if (S_ISREG(st.st_mode))
			unlinkat(dfd, n, 0);
	}
	closedir(d);
}
