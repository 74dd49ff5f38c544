/*
 * write.h - writing a bundle: the writer and its records, the sources of contents, the
 * spools, the save's sorted tables and blocks, and what writes a bundle from others
 * (merge, keeping what is new); not installed.
 */
#ifndef MC_WRITE_H
#define MC_WRITE_H

#include "read/read.h"

struct mc_wspool;
struct mc_wobj;

/* ---- the writer: what the sources in interop/, fleet/ and merge.c add (writer.c) ---- */

/* Records an artifact whose content is size bytes at offset of the file path. how:
 * MC_WADD_EXEC, it is installed executable (the file it comes from had the owner's
 * execute bit, SPEC.md section 3.2); MC_WADD_NAMED, the file's name must be torch's
 * base32 of its content's SHA-256 (a graph file of a scanned cache dir), checked as
 * soon as the content is read. *object_out (may be NULL) gets its object's index. */
#define MC_WADD_EXEC 1u
#define MC_WADD_NAMED 2u
/* mc_writer_new(), for a writer that saves (the writing checked for first: libarchive
 * loaded), or not (saves 0: one that only scans folders, mc_usage's). */
MC_HIDDEN int mc__writer_new(mc_ctx *ctx, mc_writer **out, int saves);
MC_HIDDEN int mc__writer_add_range(mc_writer *w, const char *type, const char *key,
				   const char *path, uint64_t offset, uint64_t size,
				   unsigned how, size_t *object_out);
/* Records an artifact whose content is len bytes at data (copied), as
 * mc_writer_add_memory() does but counting no source, and executable as above;
 * *object_out (may be NULL) gets the index of its object. */
MC_HIDDEN int mc__writer_add_bytes(mc_writer *w, const char *type, const char *key,
				   const void *data, size_t len, int executable,
				   size_t *object_out);
MC_HIDDEN mc_ctx *mc__writer_ctx(mc_writer *w);
/* Gives sp to w, which frees it: *idx is its number, for the records of the objects in
 * it. */
MC_HIDDEN int mc__writer_spool(mc_writer *w, struct mc_wspool *sp, uint16_t *idx);
/* Records an artifact whose object is in one of w's spools (o from mc__wspool_put(),
 * o->spool set): nothing is read again. sha: the SHA-256 of the content, used when the
 * type wants one. An object of the same hash already recorded is used instead. */
MC_HIDDEN int mc__writer_add_spooled(mc_writer *w, const char *type, const char *key,
				     const struct mc_wobj *o, const unsigned char sha[32]);
/* Runs cleanup(arg) when the writer is freed. */
MC_HIDDEN int mc__writer_adopt(mc_writer *w, void (*cleanup)(void *), void *arg);
MC_HIDDEN int mc__writer_keep_unknown(const mc_writer *w);
/* The scan's mc_scan_fn, told at save of a graph file found misnamed (MC_WADD_NAMED). */
MC_HIDDEN void mc__writer_set_scan(mc_writer *w, mc_scan_fn fn, void *ud);
/* The SHA-256 recorded for the last artifact, or NULL when it is not known yet; and
 * taking the artifact back. */
MC_HIDDEN const unsigned char *mc__writer_last_sha256(const mc_writer *w);
MC_HIDDEN void mc__writer_drop_last(mc_writer *w);
/* A torch blob's groups, by type (replacing any before), an entry of group g, and
 * the end of the blob: layout says whether its groups are the current format's, which
 * an export can give back. */
MC_HIDDEN int mc__writer_blob_groups(mc_writer *w, char *const *gtypes, size_t n);
MC_HIDDEN int mc__writer_blob_entry(mc_writer *w, size_t g, const char *key, size_t obj);
MC_HIDDEN void mc__writer_blob_done(mc_writer *w, int layout);
/* Counts a source that added n artifacts (a bundle of one torch blob keeps its layout). */
MC_HIDDEN void mc__writer_note_source(mc_writer *w, size_t n);
/* Adds value to label key as a scan found it: such a label holds the distinct values
 * found, sorted and joined with ',', as many as fit in a label's value (those that sort
 * first). A label the caller set (mc_writer_set_label(), before or after) is the
 * caller's, and stays as it was set. value: not empty, no ','. */
MC_HIDDEN int mc__writer_note_label(mc_writer *w, const char *key, const char *value);

/* ---- the writer's records (writer.c) ---- */

#define MC_WOBJ_PENDING 1    /* content not read yet: hashed (and deduplicated) at save */
#define MC_WOBJ_CHECK_SHA 2  /* the save checks that the content still has sha256 */
#define MC_WOBJ_SPOOLED 4    /* stored already, in the writer's spool number spool */
#define MC_WOBJ_NAMED 8      /* the source's name must be torch's base32 of the SHA-256 */
#define MC_WOBJ_MISNAMED 16  /* ... and the save found it is not */
#define MC_WOBJ_PART 32      /* an entry of a torch blob, whose order the blocks keep */
#define MC_WOBJ_IN_DATA UINT64_MAX /* path_off: the content is in the data store at offset */

struct mc_wobj {
	unsigned char hash[MC_HASH_BYTES];
	unsigned char sha256[32];
	uint64_t size;
	uint64_t offset;      /* of the content in its source */
	uint64_t path_off;    /* the source's path in the data store, or MC_WOBJ_IN_DATA */
	uint32_t path_len;
	uint8_t flags;
	/* Set at save: */
	uint8_t encoding;
	uint16_t spool;       /* the worker whose spool file holds the stored bytes; with
			       * MC_WOBJ_SPOOLED, the number of the writer's spool */
	uint64_t spool_off, stored_size;
	unsigned char stored_hash[MC_HASH_BYTES];
};

/* An artifact, in the order recorded (its key in the keys store), or in a sorted run
 * or the save's table of kept artifacts (its key right after it). */
struct mc_wart {
	uint64_t size;
	uint64_t key_off;
	uint32_t key_len;
	uint32_t type;        /* index into the writer's types */
	uint32_t obj;
	uint32_t seq;         /* the order recorded: its place in the writer's arts */
	uint32_t has_sha256;
	uint32_t executable;  /* the source file had the owner's execute bit */
	uint32_t blob;        /* from a torch blob: 1 + the sources before it; else 0 */
	unsigned char sha256[32];
};

struct mc_wslot;

struct mc_writer {
	mc_ctx *ctx;
	struct mc_store objs;   /* struct mc_wobj, by index */
	struct mc_store arts;   /* struct mc_wart, in the order recorded */
	struct mc_store keys;   /* the artifacts' keys, one after another */
	struct mc_store data;   /* the sources' paths, and contents given in memory */
	uint32_t nobjs, narts;
	struct mc_wslot *table; /* the objects whose hash is known, for deduplication */
	size_t tcap, tused;
	char **types;
	uint32_t ntypes, lasttype;
	char lastpath[MC_PATH_MAX]; /* the last source path stored, and where */
	int has_lastpath;
	uint64_t lastpath_off;
	struct mc_wart last;    /* the artifact recorded last, while has_last */
	int has_last;
	struct mc_label *labels;
	size_t nlabels;
	char **noted;           /* the labels a scan set (mc__writer_note_label) */
	size_t nnoted, capnoted;
	uint64_t bundle_version;
	int64_t expires, created;
	int level;
	int version, halg;      /* the format version written, and its content hash */
	const mc_seckey **signers;
	size_t nsigners;
	/* A bundle made from exactly one torch blob and nothing else keeps its layout. */
	size_t nsources;
	int only_blob;
	int in_blob;            /* a torch blob's artifacts are being recorded */
	struct mc_mgroup *groups;
	size_t ngroups;
	uint64_t total;
	uint32_t saved_narts;   /* what the last save wrote: one artifact per (type, key) */
	uint64_t saved_total;
	int keep_unknown;
	mc_scan_fn scan_fn;     /* of the last cache dir scanned: hears of misnamed files */
	void *scan_ud;
	mc_conflict_fn conflict;
	void *conflict_ud;
	struct mc_wspool **spools; /* given by mc__writer_spool() */
	size_t nspools;
	struct mc_wcleanup {
		void (*fn)(void *);
		void *arg;
	} *cleanups;
	size_t ncleanups;
};

/* Object i's record; its hash alone; the path of its source into buf (MC_PATH_MAX
 * bytes). ctx takes the error message (a worker's at save). */
MC_HIDDEN int mc__wobj_get(mc_writer *w, mc_ctx *ctx, uint32_t i, struct mc_wobj *o);
MC_HIDDEN int mc__wobj_hash(mc_writer *w, uint32_t i, unsigned char hash[MC_HASH_BYTES]);
MC_HIDDEN int mc__wobj_path(mc_writer *w, mc_ctx *ctx, const struct mc_wobj *o, char *buf);
/* Object i, pending, has hash now: recorded, and entered for deduplication (a later
 * save checks the content against it). */
MC_HIDDEN int mc__wobj_hashed(mc_writer *w, uint32_t i, const unsigned char hash[MC_HASH_BYTES]);
/* Takes back every artifact recorded whose byte in gone (one per artifact, in the order
 * recorded) is set; the others keep their order. Their objects stay recorded: the save
 * stores only those of the artifacts it keeps. On failure nothing changed. */
MC_HIDDEN int mc__writer_drop(mc_writer *w, const unsigned char *gone);
/* After a save found graph files whose names are not their contents' hashes (objects
 * marked MC_WOBJ_MISNAMED): each is taken back, or with keep_unknown recorded again as
 * type "extra" at its path in the cache dir, and then told to the scan's fn; *n gets
 * how many. When the new table cannot be made nothing is told and the artifacts are as
 * they were; a later failure (reading back the paths noted) fails the save. */
MC_HIDDEN int mc__writer_misnamed(mc_writer *w, size_t *n);

/* ---- spools (wspool.c) ----
 * Objects in their stored form, one after another in an unlinked temp file (beside the
 * file beside, or in $TMPDIR when it is NULL): at level > 0 each content compressed to
 * one zstd frame, kept where it is smaller than the content and within the default
 * expansion cap. One thread uses a spool at a time. */

/* version: the bundle format the spool is for, which decides the hash of the stored
 * bytes and the compressor's window. Its failures name the file beside (the output). */
MC_HIDDEN int mc__wspool_new(mc_ctx *ctx, int level, int version, const char *beside,
			     struct mc_wspool **out);
MC_HIDDEN void mc__wspool_free(struct mc_wspool *sp);
/* Frees the spool's compressor once nothing more is put in it (its file stays). */
MC_HIDDEN void mc__wspool_done(struct mc_wspool *sp);
MC_HIDDEN int mc__wspool_fd(const struct mc_wspool *sp);
/* Object o's content (o->size and o->hash, known by its end) goes into the spool's
 * compressor in pieces, the last one with last set; ctx takes the errors. Then end
 * sets o's encoding, stored size and hash: MC_ENC_NONE where the frame is not kept
 * (the spool forgets it). */
MC_HIDDEN int mc__wspool_begin(struct mc_wspool *sp, mc_ctx *ctx, struct mc_wobj *o);
MC_HIDDEN int mc__wspool_piece(struct mc_wspool *sp, const unsigned char *buf, size_t n,
			       int last);
MC_HIDDEN int mc__wspool_end(struct mc_wspool *sp, struct mc_wobj *o);
/* A whole content of n bytes, hashed and put in the spool in its stored form, zstd or
 * as it is: its record in o (flags MC_WOBJ_SPOOLED; spool left to the caller). */
MC_HIDDEN int mc__wspool_put(struct mc_wspool *sp, mc_ctx *ctx, const unsigned char *c,
			     size_t n, struct mc_wobj *o);

/* ---- where an object's content is read from (wsource.c) ---- */

/* An object's content is read through buf (grown as needed); ctx takes the error
 * message (a worker's at save). */
struct mc_wread {
	mc_ctx *ctx;
	unsigned char *buf;
	size_t cap;
	int halg; /* the content hash: MC_HALG_* */
	size_t max_piece; /* read in pieces of at most this (0: a content of up to 4 MiB
			   * whole) */
};

/* Where an object's content is read from: a range of a file, or of the data store. */
struct mc_wsource {
	int fd;                    /* or -1: the store */
	int borrowed;              /* fd is a spool's, not closed */
	uint64_t base;             /* where offset 0 is in fd */
	const struct mc_store *st;
	const char *name;          /* for messages */
};

/* Opens path, or the data store for an object o given in memory (o may be NULL). */
MC_HIDDEN int mc__wsource_open(mc_ctx *ctx, struct mc_wsource *src, const mc_writer *w,
			       const struct mc_wobj *o, const char *path);
MC_HIDDEN void mc__wsource_close(struct mc_wsource *src);
MC_HIDDEN int mc__wsource_read(mc_ctx *ctx, const struct mc_wsource *src, void *buf, size_t n,
			       uint64_t off);
/* Receives each piece of an object's content as it is read; last: the final one. */
typedef int (*mc_wpiece_fn)(void *ud, const unsigned char *buf, size_t n, int last);
/* Reads size bytes at offset of src in pieces into rd->buf (in one piece up to
 * MC_WHOLE_MAX), computing their BLAKE2b (hash) and SHA-256 (sha), either of which may
 * be NULL; each piece goes on to fn (may be NULL). */
MC_HIDDEN int mc__wsource_digest(struct mc_wread *rd, const struct mc_wsource *src,
				 uint64_t offset, uint64_t size, unsigned char *hash,
				 unsigned char *sha, mc_wpiece_fn fn, void *ud);

/* ---- the save's sorted tables (wsort.c) ---- */

#define MC_WMARK_USED UINT32_MAX      /* the object of a kept artifact */
#define MC_WMARK_HASH (UINT32_MAX - 1) /* only hashed: an overridden artifact's, for conflicts */
#define MC_WSORT_READ (16u * 1024)    /* the read buffer of a sorted table */

/* The save's tables. */
struct mc_wsave {
	mc_writer *w;
	struct mc_store uniq;  /* the kept artifacts, sorted: struct mc_wart, then its key */
	uint32_t nuniq;
	uint64_t uniq_bytes;   /* the kept artifacts' content bytes */
	struct mc_store dups;  /* the artifacts of every repeated (type, key) */
	uint32_t *oi;          /* per object: 0, MC_WMARK_USED or MC_WMARK_HASH; then its
				* place in the object table */
	uint32_t *kept;        /* NULL, or per artifact recorded: the order recorded of the
				* one its (type, key) keeps */
	uint64_t pass_total;   /* the size of the objects marked */
};

/* Sorts the artifacts by (type, key) into sv->uniq, one per (type, key): the last
 * recorded wins. Marks the objects the save reads. */
MC_HIDDEN int mc__wsort_artifacts(struct mc_wsave *sv);
/* Tells the conflict callback of every (type, key) recorded with different contents;
 * after the first pass, when every listed object has its hash. */
MC_HIDDEN int mc__wsort_conflicts(struct mc_wsave *sv);
/* After the first pass: the object table. Objects with equal contents become one, the
 * first recorded (so the choice does not depend on the workers), and the kept ones are
 * ordered by hash: *order lists them, and sv->oi gives every used object its place;
 * *total is the sum of their sizes. */
MC_HIDDEN int mc__wsort_objects(struct mc_wsave *sv, uint32_t **order, uint32_t *n,
				uint64_t *total);
/* Reads an artifact's record and its key from r; *got = 0 at the end. */
MC_HIDDEN int mc__wart_next(mc_ctx *ctx, struct mc_sreader *r, struct mc_wart *a,
			    unsigned char *key, int *got);


/* ---- format version 2's blocks at save (wblock.c) ---- */

struct mc_wblock {
	uint32_t first, n;     /* its objects, in the block order */
	uint64_t size;         /* of their contents */
	int encoding;
	uint16_t spool;        /* zstd: the worker whose spool holds the frame, where */
	uint64_t spool_off, stored_size;
	unsigned char stored_hash[MC_HASH_BYTES];
};

struct mc_wbworker;

struct mc_wblocks {
	mc_writer *w;
	const char *beside;    /* spool files are made beside it (NULL: in $TMPDIR) */
	uint32_t *order;       /* the stored objects, in the blocks' order */
	uint32_t n;
	struct mc_wblock *b;
	uint32_t nb;
	struct mc_wbworker *wk; /* per worker */
	unsigned nworkers;
	_Atomic uint64_t done;
	uint64_t total;
	_Atomic uint32_t misnamed; /* objects found MC_WOBJ_MISNAMED */
};

/* The objects the save stores (marked MC_WMARK_USED in sv->oi) ordered by (extension
 * of the source's file name, size, order recorded) and cut into blocks. */
MC_HIDDEN int mc__wblocks_plan(struct mc_wblocks *bl, struct mc_wsave *sv, const char *beside);
/* Reads each block's objects once on the worker threads: hashed (a pending one's hash
 * set, any other's checked; one MC_WOBJ_NAMED whose name is not its hash is marked
 * MC_WOBJ_MISNAMED and counted in bl->misnamed) and compressed together. */
MC_HIDDEN int mc__wblocks_pass(struct mc_wblocks *bl);
/* The spool file that holds block b's frame. */
MC_HIDDEN int mc__wblocks_fd(const struct mc_wblocks *bl, const struct mc_wblock *b);
MC_HIDDEN void mc__wblocks_free(struct mc_wblocks *bl);

#endif /* MC_WRITE_H */
