/*
 * install.h - the installer: puts a verified bundle's artifacts into the cache tiers,
 * all or nothing; not installed.
 */
#ifndef MC_INSTALL_H
#define MC_INSTALL_H

#include <pthread.h>
#include <stdatomic.h>

#include "read/read.h"

/* A tier among the selected artifacts': its root, open (fd) once it exists. */
struct tier_root {
	const char *name;
	const char *root;
	size_t named; /* of root: the part its setter named, see open_tier_root() */
	int fd;
	char *abs;    /* root made absolute, once a file to derive needs it (derive.c) */
	char **keys;  /* when a type of the tier derives all its files: the keys of the
		       * tier's selected artifacts, sorted (derive.c) */
	size_t nkeys;
	/* A root missing at load time: made whole in a private staging folder beside it,
	 * renamed onto it once at commit (stage.c, commit.c). */
	int pfd;      /* the root's parent, -1 when the root is not made so */
	char *sname;  /* the staging folder's name in pfd: a private folder holding the
		       * root under its own name, whose files take their final names at once */
	int fresh;    /* MC_FRESH_* */
	size_t host;  /* MC_FRESH_INNER: the tier whose staging folder holds this root
		       * (Triton's in torch's, by default) */
};

/* Where the tree of a root missing at load time is made: NONE, as ever; STAGED, in
 * its own staging folder; INNER, in another tier's (host); RENAMED, in place. Files of
 * a STAGED or INNER tier take their final names at once. */
enum { MC_FRESH_NONE = 0, MC_FRESH_STAGED = 1, MC_FRESH_INNER = 2, MC_FRESH_RENAMED = 3 };
#define MC_IN_FRESH(t) ((t)->fresh == MC_FRESH_STAGED || (t)->fresh == MC_FRESH_INNER)

/* A folder the load made, removed again by the rollback. */
struct made_dir {
	size_t tier; /* MC_NO_INDEX: an absolute path of a tier root */
	char *path;
};

/* A staged file outside any folder unit. */
#define NO_UNIT UINT32_MAX
/* A unit whose temp folder no job makes yet. */
#define NO_JOB UINT32_MAX

/* A file being staged. A load may stage millions, so it holds no names: its folder,
 * temp name and final name are computed again from its artifact when needed. */
struct staged {
	uint32_t art;
	uint32_t unit;  /* the folder unit it belongs to, or NO_UNIT */
	int fd;         /* -1 when closed */
	uint16_t tier;
	uint32_t job;   /* the job that makes its folder (stage.c) */
	uint8_t tries;  /* which of its temp names it has (another when one is taken) */
	unsigned made : 1;   /* the temp file exists */
	unsigned placed : 1; /* renamed into place (a file outside units) */
};

/* A folder whose files are installed together (MC_TYPE_FOLDER_UNIT): staged in a
 * hidden temp folder beside it, renamed into place at commit. Its path is computed
 * again from one of its artifacts. */
struct unit {
	uint64_t hash;  /* of (tier, folder), for the lookup table */
	uint32_t art;   /* an artifact in the folder */
	uint32_t job;   /* the job that makes its temp folder (stage.c) */
	uint16_t tier;
	uint8_t tries;  /* which of its temp names the temp folder has */
	uint8_t made;   /* the temp folder exists */
	uint8_t lost;   /* commit: another writer installed the folder first */
};

/* A thread's open folders: the one it opened last and those on its way there, so
 * that the next folder opened shares what it can (a folder's files are mostly
 * neighbours), and no thread walks from the tier root for each file: the kernel
 * counts every such walk on the root's shared entry. fd[k] is path's first end[k]
 * bytes; the last slot takes the rest of a deeper path. */
#define MC_DCUR_DEPTH 8
struct dcur {
	size_t tier; /* MC_NO_INDEX: none open */
	size_t n;
	size_t end[MC_DCUR_DEPTH];
	int fd[MC_DCUR_DEPTH];
	char path[MC_PATH_MAX];
};

/* A folder to make before the files in it (stage.c): that of staged file st, or of
 * its unit's temp folder; clean: the folder (a unit's parent) is scanned for stale temp
 * files, which is done once per folder. */
enum { JOB_TODO = 0, JOB_RUNNING = 1, JOB_DONE = 2 };
struct fjob {
	uint32_t st;
	uint8_t clean;
	_Atomic int state; /* JOB_* */
};

/* A worker thread's state: the object whose staged files it is writing. */
struct lworker {
	struct dcur dc;     /* the folders it writes in */
	struct mc_acur cur; /* reads the artifacts of its files */
	size_t obj;         /* the object whose files are open */
	int open;
	uint64_t size;      /* of its content */
	uint64_t written;
	int derive;         /* a file of it is derived (tiers.h): the content is kept in buf */
	unsigned char *buf;
	size_t bufcap;
};

/* What the survey found at an artifact's destination. */
enum {
	MC_FOUND_NONE = 0,    /* nothing: the file is installed */
	MC_FOUND_SAME = 1,    /* an identical file: left alone */
	MC_FOUND_DIFFERS = 2  /* a file of other bytes or execute bit: replaced */
};

/* One mc_bundle_load(): what it found, staged and made. */
struct loader {
	mc_bundle *b;
	mc_ctx *ctx;
	struct mc_acur cur;  /* on the calling thread */
	struct mc_acur ucur; /* find_unit()'s check of a unit's folder */
	uint32_t token;      /* random, part of this load's temp names */
	long pid;
	uint32_t nskey;      /* mc__pid_ns_key(), part of them too */
	struct tier_root *tiers;
	size_t ntiers;
	pthread_mutex_t lock; /* for made, which the workers add to */
	struct made_dir *made;
	size_t nmade, madecap;
	struct staged *st;
	size_t nst;
	uint32_t *by_obj;          /* staged indices sorted by object */
	uint32_t *obj_first;       /* per object: first position in by_obj, nobjects+1 entries */
	unsigned char *found;      /* per artifact: what its destination held, MC_FOUND_* */
	unsigned char *hold;       /* per object: a file is derived from it (taken whole) */
	size_t empty_obj;          /* the object of empty content, when a file of it is staged */
	struct fjob *jobs;         /* the folders to make (stage.c) */
	size_t njobs;
	struct lworker *wk;        /* per worker thread */
	unsigned nwk;
	struct unit *units;
	size_t nunits, units_room;
	_Atomic uint64_t committed; /* the items of the commit done (commit.c) */
	uint32_t *unit_tab; /* open addressing on (tier, folder): unit index + 1, 0 = empty */
	size_t unit_cap;    /* a power of two, at least twice nunits */
	/* The folder find_unit() last answered for, and its answer. */
	size_t last_tier, last_unit;
	char last_dir[MC_PATH_MAX];
};

/* ---- tier roots and folders, never through a link (dirs.c) ---- */

/* What mc__open_dir_of() does with a folder that is missing. */
enum {
	MC_DIR_OPEN = 0,  /* nothing: *fd is -1 */
	MC_DIR_MAKE = 1,  /* makes it, and the folders on the way (a tier root: the calling
			   * thread only) */
	MC_DIR_PROBE = 2  /* a dry run: checks the first missing folder could be made, as
			   * the load would find it; *fd is -1 */
};

/* The index of the loader's tier named tier, or MC_NO_INDEX. */
MC_HIDDEN size_t mc__loader_tier(struct loader *L, const char *tier);
/* The tiers of the selected artifacts, their roots opened where they exist. */
MC_HIDDEN int mc__setup_tiers(struct loader *L);
/* Opens folder dir (relative to the tier root, "." for the root); create (MC_DIR_*)
 * says what is done when it or the root is missing (a folder made: mode 0777 less the
 * umask). */
MC_HIDDEN int mc__open_dir_of(struct loader *L, size_t tier, const char *dir, int create,
			      int *fd);
MC_HIDDEN void mc__dcur_init(struct dcur *d);
MC_HIDDEN void mc__dcur_close(struct dcur *d);
/* Opens folder dir (relative to the tier root, "." for the root) through cursor d, never
 * through a link, making missing ones when create is MC_DIR_MAKE (any thread, once the
 * tier root exists); *fd belongs to d, valid until its next use, -1 with MC_OK when a
 * folder is missing and none is made. */
MC_HIDDEN int mc__dcur_open(struct loader *L, mc_ctx *ctx, struct dcur *d, size_t tier,
			    const char *dir, int create, int *fd);
/* Creates name in folder dir of a tier exclusively, following no link, with mode 0666
 * (0777 when executable) less the umask (applied by the kernel: a group-shared cache,
 * umask 002, stays group-writable); the folder is opened through d. *fd is -1 with
 * errno set and MC_OK when the file cannot be made, an error when dir is wrong. */
MC_HIDDEN int mc__create_in(struct loader *L, mc_ctx *ctx, struct dcur *d, size_t tier,
			    const char *dir, const char *name, int executable, int *fd);
/* Gives what this load has just made the owner set on ctx (mc_ctx_set_owner()), if
 * one is: the file or folder open as fd, else name in folder dfd, a link not followed.
 * The message names it as fmt says. */
MC_HIDDEN int mc__give_owner(mc_ctx *ctx, int fd, int dfd, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The error for a file or temp folder that cannot be made in folder dir of a tier
 * (err: the errno), in the words of a load and of a dry run. */
MC_HIDDEN int mc__cannot_create(mc_ctx *ctx, const struct loader *L, size_t tier, const char *dir,
				int err);
/* Splits dest into its folder ("." for none) and its last component. */
MC_HIDDEN void mc__split_dest(const char *dest, char *dir, size_t dirlen, const char **base);
/* The key of this host's boot and this process's pid namespace that a load's temp
 * names carry (0: unknown), so that a later load knows which pids it can ask about. */
MC_HIDDEN uint32_t mc__pid_ns_key(void);
/* Removes the temp files and folders that killed loaders left in folder dfd (those
 * whose names start with prefix, when not NULL): at once those of a process gone that
 * carry key, else once they are an hour old. */
MC_HIDDEN void mc__clean_stale(int dfd, uint32_t key, const char *prefix);
/* Folder path (as a tier root is named) counted among those the load made: removed by
 * the rollback, or at the end when left empty by the kernels left out. */
MC_HIDDEN int mc__remember_root(struct loader *L, const char *path);
/* The first n bytes of path p made as mkdir -p would, following links, the folders
 * made remembered for the rollback and given the owner. */
MC_HIDDEN int mc__make_path(struct loader *L, char *p, size_t n);
/* Removes name in folder dfd and, when a folder, all beneath it to 32 levels, following
 * no link (best effort). */
MC_HIDDEN void mc__remove_tree(int dfd, const char *name);

/* ---- what is staged (survey.c) ---- */

/* Selected artifacts already in place, the files to stage grouped by object. */
MC_HIDDEN int mc__plan_staging(struct loader *L);

/* ---- staged files' names, folders made before content arrives (stage.c) ---- */

/* A staged file's names: where it ends (dest, split into dir and base), the folder
 * it is staged in (relative to its tier root) and its name there. */
struct snames {
	char dest[MC_PATH_MAX];
	char dir[MC_PATH_MAX];
	const char *base;
	char stage[MC_PATH_MAX + 512];
	char tmp[512];
};

/* Computes s's names from its artifact, read through c; *ap (may be NULL) gets the
 * artifact, valid until the next use of c. */
MC_HIDDEN int mc__staged_names(struct loader *L, mc_ctx *ctx, struct mc_acur *c,
			       const struct staged *s, struct snames *n,
			       const struct mc_martifact **ap);

/* A unit folder's parent, its name, and its temp folder's name and path. */
struct unames {
	char parent[MC_PATH_MAX];
	const char *name;
	char tmp[512];
	char stage[MC_PATH_MAX + 512];
};

/* The folder of a unit (relative to its tier root), read through c. */
MC_HIDDEN int mc__unit_dir(mc_ctx *ctx, struct mc_acur *c, const struct unit *u, char *dir,
			   size_t len);
/* Unit u's names, dir being its folder. */
MC_HIDDEN void mc__unit_names(const struct loader *L, const struct unit *u, const char *dir,
			      struct unames *n);
/* Lists the folders of the staged files and the units' temp folders to make (the
 * worker threads make them, L->wk: mc__stage_job()), and makes the tier roots; probe (a
 * dry run, on the calling thread): checks they could be made, and files made in them,
 * writing nothing. */
MC_HIDDEN int mc__stage_prepare(struct loader *L, int probe);
/* The tiers with files to make whose roots are missing, in a parent that exists and
 * that their setter named: each gets a private staging folder (mode 0700, the owner
 * given) beside its root, opened as the root, the parent scanned for stale temp files
 * first; a missing root beneath one of them (Triton's in torch's) is made inside that
 * folder. A tier that cannot be staged is left as it was: its root is made as ever. */
MC_HIDDEN int mc__stage_fresh(struct loader *L);
/* Makes the folder of job (once, whichever thread asks first). */
MC_HIDDEN int mc__stage_job(struct loader *L, mc_ctx *ctx, struct lworker *lw, uint32_t job);
/* The jobs not done, in order, on the calling thread: a folder that cannot be made is
 * told before what failed in the pass. */
MC_HIDDEN int mc__stage_rest(struct loader *L);

/* ---- the content written into the staged files (write.c) ---- */

/* Stages every file: folders made, the bundle streamed to them on the worker threads. */
MC_HIDDEN int mc__stage_all(struct loader *L);
/* Closes the files of the object worker lw is writing, if any. */
MC_HIDDEN int mc__close_object(struct loader *L, mc_ctx *ctx, struct lworker *lw);

/* ---- files written for where they land (derive.c) ---- */

/* Makes tier's root absolute, as Python's os.path.abspath() would (calling thread). */
MC_HIDDEN int mc__tier_abs(struct loader *L, size_t tier);
/* The keys each tier's derive hooks may ask about (tier_root.keys): before planning. */
MC_HIDDEN int mc__derive_keys(struct loader *L);
/* The bytes to write for artifact a (a derivable one) of content rec, n at folder dir
 * (relative to the tier root, "." for the root): *out malloc'd, or NULL when rec is
 * written as it is. Errors go to ctx. */
MC_HIDDEN int mc__derive_for(struct loader *L, mc_ctx *ctx, size_t tier,
			     const struct mc_martifact *a, const char *dir,
			     const unsigned char *rec, size_t n, unsigned char **out,
			     size_t *outn);
/* Whether the derivable file base in folder dir (open as dfd) of a tier already holds
 * what the load would write for a. */
MC_HIDDEN int mc__derived_same(struct loader *L, size_t tier, const struct mc_martifact *a,
			       int dfd, const char *dir, const char *base, int *same);

/* ---- into place, or back (commit.c) ---- */

/* Tells fn (may be NULL) what became of artifact a, with its destination (computed
 * here when dest is NULL). */
MC_HIDDEN void mc__load_report(mc_bundle *b, mc_artifact_fn fn, void *ud, int what,
			       const struct mc_martifact *a, const char *dest);

/* Renames the staged files and units into place, telling fn of each. */
MC_HIDDEN int mc__load_commit(struct loader *L, mc_artifact_fn fn, void *ud);
/* Removes the staged files, the units' temp folders and the folders made. */
MC_HIDDEN void mc__load_rollback(struct loader *L);
/* MC_LOAD_SYNC: flushes each filesystem among the tier roots. */
MC_HIDDEN int mc__sync_tiers(struct loader *L);

#endif /* MC_INSTALL_H */
