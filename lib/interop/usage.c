/*
 * usage.c - what a job used of the loaded artifacts: which loaded files it read, told by
 * their access times against a mark set before it started, and which files it wrote
 * anew in the cache folders save records, told by their change times.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>

#include "interop/interop.h"

/* statfs(2)'s f_type of overlayfs (linux/magic.h). */
#define OVERLAYFS_MAGIC 0x794c7630

/* What is known of a loaded file. */
enum { FILE_ADDED, FILE_MARKED, FILE_READ, FILE_UNREAD, FILE_UNSEEN };

struct used_file {
	char *path;  /* its tier root and dest, repeated slashes made one */
	size_t type; /* in u->types */
	int written; /* a load wrote it (installed or replaced), not found it in place */
	int state;   /* FILE_* */
	int why;     /* MC_UNSEEN_*, for FILE_UNSEEN */
	dev_t dev;   /* as marked */
	ino_t ino;
	struct timespec mark; /* its access time once marked, as the filesystem keeps it */
};

/* A marked file's device and inode: the job may reach a loaded file by another path. */
struct inode_key {
	dev_t dev;
	ino_t ino;
};

struct used_type {
	char name[MC_TYPE_MAX + 1];
	size_t n[4]; /* MC_USED_* */
};

struct mc_usage {
	mc_ctx *ctx;
	int phase;  /* 0: adding, 1: started, 2: finished */
	int failed; /* the first failure of mc_usage_add() */
	struct used_file *files; /* sorted by path from the start */
	size_t nfiles, capfiles;
	struct inode_key *by_inode; /* the marked files, by device and inode */
	size_t nmarked;
	struct used_type *types;
	size_t ntypes, captypes;
	size_t *order; /* types in byte order of their names */
	struct timespec start;
	size_t unseen[MC_UNSEEN_KINDS];
};

static const char *const unseen_names[MC_UNSEEN_KINDS] = {
	[MC_UNSEEN_NOATIME] = "noatime",     [MC_UNSEEN_NOT_OWNER] = "not_owner",
	[MC_UNSEEN_READ_ONLY] = "read_only", [MC_UNSEEN_OVERLAYFS] = "overlayfs",
	[MC_UNSEEN_GONE] = "gone",           [MC_UNSEEN_OTHER] = "other",
};

const char *
mc_unseen_name(int why)
{
	return why >= 0 && why < MC_UNSEEN_KINDS ? unseen_names[why] : "unknown";
}

int
mc_usage_new(mc_ctx *ctx, mc_usage **out)
{
	mc_usage *u;

	if (out == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	if (ctx == NULL)
		return MC_ERR_INVALID;
	if ((u = calloc(1, sizeof *u)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	u->ctx = ctx;
	*out = u;
	return MC_OK;
}

void
mc_usage_free(mc_usage *u)
{
	size_t i;

	if (u == NULL)
		return;
	for (i = 0; i < u->nfiles; i++)
		free(u->files[i].path);
	free(u->files);
	free(u->by_inode);
	free(u->types);
	free(u->order);
	free(u);
}

/* The index of type name in u->types, added when new; MC_NO_INDEX when out of memory. */
static size_t
type_index(mc_usage *u, const char *name)
{
	size_t i;

	for (i = 0; i < u->ntypes; i++)
		if (strcmp(u->types[i].name, name) == 0)
			return i;
	if (u->ntypes == u->captypes) { /* both arrays grow alike */
		size_t tcap = u->captypes, ocap = u->captypes;
		if (mc__grow(&u->types, &tcap, i + 1, sizeof *u->types) != MC_OK ||
		    mc__grow(&u->order, &ocap, i + 1, sizeof *u->order) != MC_OK)
			return MC_NO_INDEX;
		u->captypes = tcap;
	}
	memset(&u->types[i], 0, sizeof u->types[i]);
	snprintf(u->types[i].name, sizeof u->types[i].name, "%s", name);
	u->order[i] = i;
	u->ntypes++;
	return i;
}

/* root "/" rel into buf (len bytes), each run of slashes made one and a trailing slash
 * dropped: two spellings of one root meet. 0, or -1 when it does not fit. */
static int
join_path(char *buf, size_t len, const char *root, const char *rel)
{
	size_t o = 0;
	const char *parts[2] = {root, rel}, *c;
	int i;

	for (i = 0; i < 2; i++) {
		if (i == 1 && o < len)
			buf[o++] = '/';
		for (c = parts[i]; *c != '\0' && o < len; c++)
			if (!(*c == '/' && o > 0 && buf[o - 1] == '/'))
				buf[o++] = *c;
	}
	if (o >= len)
		return -1;
	while (o > 1 && buf[o - 1] == '/')
		o--;
	buf[o] = '\0';
	return 0;
}

static int
add_fail(mc_usage *u, int rc)
{
	if (u->failed == MC_OK)
		u->failed = rc;
	return rc;
}

int
mc_usage_add(mc_usage *u, int what, const char *type, const char *dest)
{
	const struct mc_type *t;
	const char *root;
	char path[MC_PATH_MAX];
	size_t named, ti;
	struct used_file *f;
	int rc;

	if (u == NULL)
		return MC_ERR_INVALID;
	if (type == NULL || dest == NULL || u->phase != 0 ||
	    (what != MC_LOAD_INSTALLED && what != MC_LOAD_REPLACED && what != MC_LOAD_UNCHANGED))
		return add_fail(u, mc__err(u->ctx, MC_ERR_INVALID, "mc_usage_add: %s",
					   u->phase != 0 ? "started already"
					   : type == NULL || dest == NULL ? "no type or destination"
									 : "not a file loaded"));
	if ((t = mc__find_type(u->ctx, type)) == NULL)
		return add_fail(u, mc__err(u->ctx, MC_ERR_UNKNOWN_TYPE, "unknown type %s", type));
	if ((rc = mc__tier_root(u->ctx, t->tier, &root, &named)) != MC_OK)
		return add_fail(u, rc);
	if (join_path(path, sizeof path, root, dest) != 0)
		return add_fail(u, mc__err(u->ctx, MC_ERR_INVALID, "%s/%s: path too long", root,
					   dest));
	if (mc__grow(&u->files, &u->capfiles, u->nfiles + 1, sizeof *u->files) != MC_OK)
		return add_fail(u, mc__err(u->ctx, MC_ERR_NOMEM, "out of memory"));
	f = &u->files[u->nfiles];
	memset(f, 0, sizeof *f);
	if ((ti = type_index(u, type)) == MC_NO_INDEX || (f->path = mc__strdup(path)) == NULL)
		return add_fail(u, mc__err(u->ctx, MC_ERR_NOMEM, "out of memory"));
	f->type = ti;
	f->written = what != MC_LOAD_UNCHANGED;
	u->nfiles++;
	return MC_OK;
}

static int
path_cmp(const void *a, const void *b)
{
	return strcmp(((const struct used_file *)a)->path, ((const struct used_file *)b)->path);
}

/* Sorts the files by path and keeps one per path (two bundles may hold one file): the
 * first added, written when any load wrote it. */
static void
dedupe(mc_usage *u)
{
	size_t i, k = 0;

	if (u->nfiles > 1)
		qsort(u->files, u->nfiles, sizeof *u->files, path_cmp);
	for (i = 0; i < u->nfiles; i++) {
		if (k > 0 && strcmp(u->files[k - 1].path, u->files[i].path) == 0) {
			u->files[k - 1].written |= u->files[i].written;
			free(u->files[i].path);
			continue;
		}
		u->files[k++] = u->files[i];
	}
	u->nfiles = k;
}

static void
unseen(struct used_file *f, int why)
{
	f->state = FILE_UNSEEN;
	f->why = why;
}

/* Why the file at f->path (a regular file) cannot show its reads, from its mount: -1
 * when it can. */
static int
mount_unseen(const struct used_file *f)
{
	struct statvfs vfs;
	struct statfs fs;

	if (statvfs(f->path, &vfs) != 0 || statfs(f->path, &fs) != 0)
		return errno == ENOENT ? MC_UNSEEN_GONE : MC_UNSEEN_OTHER;
	if (vfs.f_flag & ST_RDONLY)
		return MC_UNSEEN_READ_ONLY;
	if (vfs.f_flag & ST_NOATIME)
		return MC_UNSEEN_NOATIME;
	if (fs.f_type == OVERLAYFS_MAGIC && !f->written)
		return MC_UNSEEN_OVERLAYFS;
	return -1;
}

/* errno after a failed call on a loaded file, as a reason it is not seen. */
static int
errno_unseen(void)
{
	switch (errno) {
	case ENOENT: return MC_UNSEEN_GONE;
	case EPERM:
	case EACCES: return MC_UNSEEN_NOT_OWNER; /* times only its owner may set */
	case EROFS: return MC_UNSEEN_READ_ONLY;
	default: return MC_UNSEEN_OTHER;
	}
}

/* Sets mark as f's access time (its modification time left), which makes its change
 * time now: relatime then takes the next read's time. -1 when marked, else why not. */
static int
mark_file(struct used_file *f, const struct timespec *mark)
{
	struct timespec ts[2] = {*mark, {0, UTIME_OMIT}};
	struct stat st;
	int why;

	if (lstat(f->path, &st) != 0)
		return errno == ENOENT ? MC_UNSEEN_GONE : MC_UNSEEN_OTHER;
	if (!S_ISREG(st.st_mode))
		return MC_UNSEEN_OTHER;
	if ((why = mount_unseen(f)) >= 0)
		return why;
	if (utimensat(AT_FDCWD, f->path, ts, AT_SYMLINK_NOFOLLOW) != 0)
		return errno_unseen();
	/* read back: a filesystem keeps the time to its own precision */
	if (lstat(f->path, &st) != 0 || !S_ISREG(st.st_mode))
		return MC_UNSEEN_GONE;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->mark = st.st_atim;
	f->state = FILE_MARKED;
	return -1;
}

static int
ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}


static int
inode_cmp(const void *a, const void *b)
{
	const struct inode_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The per-type counts of the loaded files and the reasons they were not seen, and the
 * types in name order. */
static void
tally(mc_usage *u)
{
	size_t i, j;

	memset(u->unseen, 0, sizeof u->unseen);
	for (i = 0; i < u->ntypes; i++)
		u->types[i].n[MC_USED_INSTALLED] = u->types[i].n[MC_USED_READ] =
			u->types[i].n[MC_USED_NOT_SEEN] = 0;
	for (i = 0; i < u->nfiles; i++) {
		const struct used_file *f = &u->files[i];
		size_t *n = u->types[f->type].n;
		n[MC_USED_INSTALLED]++;
		n[MC_USED_READ] += f->state == FILE_READ;
		if (f->state == FILE_UNSEEN) {
			n[MC_USED_NOT_SEEN]++;
			u->unseen[f->why]++;
		}
	}
	/* a few types: an insertion sort */
	for (i = 0; i < u->ntypes; i++)
		u->order[i] = i;
	for (i = 1; i < u->ntypes; i++)
		for (j = i; j > 0 && strcmp(u->types[u->order[j - 1]].name,
					    u->types[u->order[j]].name) > 0; j--) {
			size_t t = u->order[j];
			u->order[j] = u->order[j - 1];
			u->order[j - 1] = t;
		}
}

/* The marked files by device and inode. */
static int
index_inodes(mc_usage *u)
{
	size_t i, k = 0;

	for (i = 0; i < u->nfiles; i++)
		k += u->files[i].state == FILE_MARKED;
	if (k > 0 && (u->by_inode = malloc(k * sizeof *u->by_inode)) == NULL)
		return mc__err(u->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < u->nfiles; i++)
		if (u->files[i].state == FILE_MARKED) {
			u->by_inode[u->nmarked].dev = u->files[i].dev;
			u->by_inode[u->nmarked++].ino = u->files[i].ino;
		}
	if (u->nmarked > 1)
		qsort(u->by_inode, u->nmarked, sizeof *u->by_inode, inode_cmp);
	return MC_OK;
}

int
mc_usage_start(mc_usage *u)
{
	struct timespec mark;
	size_t i;
	int rc, why;

	if (u == NULL)
		return MC_ERR_INVALID;
	if (u->failed != MC_OK)
		return u->failed;
	if (u->phase != 0)
		return mc__err(u->ctx, MC_ERR_INVALID, "mc_usage_start: started already");
	dedupe(u);
	clock_gettime(CLOCK_REALTIME, &mark);
	mark.tv_sec -= 2;
	for (i = 0; i < u->nfiles; i++)
		if ((why = mark_file(&u->files[i], &mark)) >= 0)
			unseen(&u->files[i], why);
	if ((rc = index_inodes(u)) != MC_OK)
		return rc;
	/* the clock the kernel stamps files with: a file changed from now on has a change
	 * time at or after it */
	clock_gettime(CLOCK_REALTIME_COARSE, &u->start);
	u->phase = 1;
	tally(u);
	return MC_OK;
}

/* After the job: read or unread (-1), else why not seen: gone, or another file in its
 * place. */
static int
check_file(struct used_file *f)
{
	struct stat st;

	if (lstat(f->path, &st) != 0)
		return errno == ENOENT ? MC_UNSEEN_GONE : MC_UNSEEN_OTHER;
	if (st.st_dev != f->dev || st.st_ino != f->ino)
		return MC_UNSEEN_GONE;
	f->state = ts_cmp(&st.st_atim, &f->mark) != 0 ? FILE_READ : FILE_UNREAD;
	return -1;
}

/* Whether the file at path (st: its lstat) is a loaded one. */
static int
loaded(const mc_usage *u, const char *path, const struct stat *st)
{
	struct used_file f;
	struct inode_key k;

	memset(&f, 0, sizeof f);
	f.path = (char *)path;
	k.dev = st->st_dev;
	k.ino = st->st_ino;
	/* bsearch() is given no empty array: its base may be NULL then */
	return (u->nfiles > 0 &&
		bsearch(&f, u->files, u->nfiles, sizeof *u->files, path_cmp) != NULL) ||
	       (u->nmarked > 0 &&
		bsearch(&k, u->by_inode, u->nmarked, sizeof *u->by_inode, inode_cmp) != NULL);
}

/* The mc_scan_fn of the scans for new files (ud: struct new_scan). */
struct new_scan {
	mc_usage *u;
	const char *root;
	int nomem;
};

static void
on_found(void *ud, int what, const char *rel, const char *type)
{
	struct new_scan *s = ud;
	char path[MC_PATH_MAX];
	struct stat st;
	size_t ti;

	if (what != MC_SCAN_RECORDED || join_path(path, sizeof path, s->root, rel) != 0 ||
	    lstat(path, &st) != 0 || ts_cmp(&st.st_ctim, &s->u->start) < 0 ||
	    loaded(s->u, path, &st))
		return;
	if ((ti = type_index(s->u, type)) == MC_NO_INDEX)
		s->nomem = 1;
	else
		s->u->types[ti].n[MC_USED_NEW]++;
}

/* Counts the new files in the folders save records (bin/record.c; the Python package's
 * SAVE_TIERS): torch's cache dir, Triton's own cache and vLLM's root. The
 * scans record into a writer that is never saved: in bundle format 2 that reads no
 * content but Triton's small group files, and the heads of vLLM's notes and artifacts
 * for its labels. */
static int
scan_new(mc_usage *u)
{
	static const char *const tiers[3] = {"inductor", "triton_home", "vllm"};
	struct new_scan s = {u, NULL, 0};
	mc_writer *w = NULL;
	struct stat st;
	size_t named, i;
	int rc;

	if ((rc = mc__writer_new(u->ctx, &w, 0)) != MC_OK) /* scans, never saves */
		return rc;
	for (i = 0; rc == MC_OK && i < sizeof tiers / sizeof tiers[0]; i++) {
		if ((rc = mc__tier_root(u->ctx, tiers[i], &s.root, &named)) != MC_OK)
			break;
		if (stat(s.root, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		rc = i == 0   ? mc_writer_add_cache_dir(w, s.root, on_found, &s)
		     : i == 1 ? mc_writer_add_triton_cache(w, s.root, on_found, &s)
			      : mc_writer_add_vllm_dir(w, s.root, on_found, &s);
	}
	mc_writer_free(w);
	if (rc == MC_OK && s.nomem)
		rc = mc__err(u->ctx, MC_ERR_NOMEM, "out of memory");
	return rc;
}

int
mc_usage_finish(mc_usage *u)
{
	size_t i;
	int rc, why;

	if (u == NULL)
		return MC_ERR_INVALID;
	if (u->phase != 1)
		return mc__err(u->ctx, MC_ERR_INVALID, "mc_usage_finish: %s",
			       u->phase == 0 ? "not started" : "finished already");
	for (i = 0; i < u->nfiles; i++)
		if (u->files[i].state == FILE_MARKED && (why = check_file(&u->files[i])) >= 0)
			unseen(&u->files[i], why);
	u->phase = 2;
	if ((rc = scan_new(u)) != MC_OK)
		for (i = 0; i < u->ntypes; i++)
			u->types[i].n[MC_USED_NEW] = 0;
	tally(u);
	return rc;
}

const char *
mc_usage_type(const mc_usage *u, size_t i)
{
	return u != NULL && i < u->ntypes ? u->types[u->order[i]].name : NULL;
}

size_t
mc_usage_count(const mc_usage *u, size_t i, int which)
{
	if (u == NULL || i >= u->ntypes || which < MC_USED_INSTALLED || which > MC_USED_NOT_SEEN)
		return 0;
	return u->types[u->order[i]].n[which];
}

size_t
mc_usage_not_seen(const mc_usage *u, int why)
{
	return u != NULL && why >= 0 && why < MC_UNSEEN_KINDS ? u->unseen[why] : 0;
}
