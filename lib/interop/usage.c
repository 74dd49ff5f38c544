/*
 * usage.c - what a job used of the loaded artifacts: which loaded files it read, told by
 * their access times against a mark set before it started, and which files it wrote
 * anew in the cache folders save records, told by their change times; with
 * mc_usage_watch_all(), the files found in those folders are watched too.
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
	int found;   /* watched, found in the folders: no load added it (not counted) */
	int changed; /* its modification time moved after the mark: written in place */
	int state;   /* FILE_* */
	int why;     /* MC_UNSEEN_*, for FILE_UNSEEN */
	dev_t dev;   /* as marked */
	ino_t ino;
	struct timespec mark; /* its access time once marked, as the filesystem keeps it */
	struct timespec mtime; /* its modification time once marked (the change time moves
				* with any marking, another run's too) */
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
	int phase;  /* 0: adding, 1: started, 2: finished, 3: recorded */
	int failed; /* the first failure of mc_usage_add() */
	int watch_all; /* mc_usage_watch_all() */
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

static const char *const unseen_texts[MC_UNSEEN_KINDS] = {
	[MC_UNSEEN_NOATIME] = "on a noatime mount",
	[MC_UNSEEN_NOT_OWNER] = "owned by another user",
	[MC_UNSEEN_READ_ONLY] = "on a read-only mount",
	[MC_UNSEEN_OVERLAYFS] = "found in place on overlayfs",
	[MC_UNSEEN_GONE] = "removed or replaced during the job",
	[MC_UNSEEN_OTHER] = "other",
};

const char *
mc_unseen_name(int why)
{
	return why >= 0 && why < MC_UNSEEN_KINDS ? unseen_names[why] : "unknown";
}

const char *
mc_unseen_text(int why)
{
	return why >= 0 && why < MC_UNSEEN_KINDS ? unseen_texts[why] : "unknown";
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

int
mc__usage_join(char *buf, size_t len, const char *root, const char *rel)
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
	if (mc__usage_join(path, sizeof path, root, dest) != 0)
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
			if (u->files[k - 1].found && !u->files[i].found) /* a load's, then */
				u->files[k - 1].type = u->files[i].type;
			u->files[k - 1].found &= u->files[i].found;
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
	f->mtime = st.st_mtim;
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
		size_t *n;
		if (f->found)
			continue;
		n = u->types[f->type].n;
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
mc_usage_watch_all(mc_usage *u)
{
	if (u == NULL)
		return MC_ERR_INVALID;
	if (u->phase != 0)
		return mc__err(u->ctx, MC_ERR_INVALID, "mc_usage_watch_all: started already");
	u->watch_all = 1;
	return MC_OK;
}

/* The mc_scan_fn of the scan for the files to watch (ud: struct watch_scan). */
struct watch_scan {
	mc_usage *u;
	const char *root;
	int rc;
};

static void
on_watched(void *ud, int what, const char *rel, const char *type)
{
	struct watch_scan *s = ud;
	char path[MC_PATH_MAX];
	struct used_file *f;

	(void)type;
	if (what != MC_SCAN_RECORDED || s->rc != MC_OK)
		return;
	if (mc__usage_join(path, sizeof path, s->root, rel) != 0) {
		s->rc = mc__err(s->u->ctx, MC_ERR_INVALID, "%s/%s: path too long", s->root, rel);
		return;
	}
	if (mc__grow(&s->u->files, &s->u->capfiles, s->u->nfiles + 1, sizeof *s->u->files) !=
	    MC_OK) {
		s->rc = mc__err(s->u->ctx, MC_ERR_NOMEM, "out of memory");
		return;
	}
	f = &s->u->files[s->u->nfiles];
	memset(f, 0, sizeof *f);
	f->type = MC_NO_INDEX;
	f->found = 1;
	if ((f->path = mc__strdup(path)) == NULL)
		s->rc = mc__err(s->u->ctx, MC_ERR_NOMEM, "out of memory");
	else
		s->u->nfiles++;
}

/* The folders the scans record, in their order: the inductor root (with its triton/),
 * the triton_home root, the vllm root. */
static const char *const scanned_tiers[MC_USAGE_SCANS] = {"inductor", "triton_home", "vllm"};

int
mc__usage_scan(mc_ctx *ctx, mc_writer *w, size_t i, mc_scan_fn fn, void *ud,
	       const char **root)
{
	struct stat st;
	size_t named;
	int rc;

	*root = NULL;
	if ((rc = mc__tier_root(ctx, scanned_tiers[i], root, &named)) != MC_OK)
		return rc;
	if (stat(*root, &st) != 0 || !S_ISDIR(st.st_mode))
		return MC_OK;
	return i == 0   ? mc_writer_add_cache_dir(w, *root, fn, ud)
	       : i == 1 ? mc_writer_add_triton_cache(w, *root, fn, ud)
			: mc_writer_add_vllm_dir(w, *root, fn, ud);
}

/* mc_usage_watch_all(): the files the folders hold now, added as found. */
static int
watch_scan(mc_usage *u)
{
	struct watch_scan s = {u, NULL, MC_OK};
	mc_writer *w = NULL;
	size_t i;
	int rc;

	if ((rc = mc__writer_new(u->ctx, &w, 0)) != MC_OK) /* scans, never saves */
		return rc;
	for (i = 0; rc == MC_OK && s.rc == MC_OK && i < MC_USAGE_SCANS; i++)
		rc = mc__usage_scan(u->ctx, w, i, on_watched, &s, &s.root);
	mc_writer_free(w);
	return rc != MC_OK ? rc : s.rc;
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
	if (u->watch_all && (rc = watch_scan(u)) != MC_OK)
		return rc;
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
	f->changed = ts_cmp(&st.st_mtim, &f->mtime) != 0;
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

	if (what != MC_SCAN_RECORDED || mc__usage_join(path, sizeof path, s->root, rel) != 0 ||
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
	struct new_scan s = {u, NULL, 0};
	mc_writer *w = NULL;
	size_t i;
	int rc;

	if ((rc = mc__writer_new(u->ctx, &w, 0)) != MC_OK) /* scans, never saves */
		return rc;
	for (i = 0; rc == MC_OK && i < MC_USAGE_SCANS; i++)
		rc = mc__usage_scan(u->ctx, w, i, on_found, &s, &s.root);
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

int
mc__usage_file(const mc_usage *u, const char *path, int *why, int *changed)
{
	struct used_file key;
	const struct used_file *f;

	memset(&key, 0, sizeof key);
	key.path = (char *)path;
	*why = MC_UNSEEN_OTHER;
	*changed = 0;
	if (u->nfiles == 0 ||
	    (f = bsearch(&key, u->files, u->nfiles, sizeof *u->files, path_cmp)) == NULL)
		return MC_USEDF_NONE;
	*why = f->why;
	*changed = f->changed;
	return f->state == FILE_READ     ? MC_USEDF_READ
	       : f->state == FILE_UNREAD ? MC_USEDF_UNREAD
	       : f->state == FILE_UNSEEN ? MC_USEDF_UNSEEN
					 : MC_USEDF_NONE;
}

const struct timespec *
mc__usage_started(const mc_usage *u)
{
	return &u->start;
}

mc_ctx *
mc__usage_ctx(const mc_usage *u)
{
	return u->ctx;
}

int
mc__usage_to_record(mc_usage *u, int done)
{
	if (u->phase != 2)
		return mc__err(u->ctx, MC_ERR_INVALID, "what the job used: %s",
			       u->phase < 2 ? "the job is not finished (mc_usage_finish())"
					    : "recorded already");
	if (done)
		u->phase = 3;
	return MC_OK;
}
