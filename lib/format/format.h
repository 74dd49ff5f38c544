/*
 * format.h - the bundle format: canonical tar headers, zstd frames, the manifest model,
 * its rendering and parsing, and the container writer; not installed.
 */
#ifndef MC_FORMAT_H
#define MC_FORMAT_H

#include "core/core.h"
#include "io/io.h"

/* ---- file input and per-object zstd (zstream.c) ---- */

typedef struct mc_zin mc_zin;

/* Buffered input from a bundle file or pipe, read in order; the first block must be a
 * ustar header (input that ends inside the first block of a bundle is a truncated
 * bundle, any other is not a bundle). */
MC_HIDDEN int mc__zin_new(mc_ctx *ctx, int fd, const char *path, mc_zin **out);
/* The same for bytes that a source puts in fd as they come (a registry's): at the end of
 * those read so far at_end(ud, ctx) waits, and says 1 when there are more, MC_OK when
 * they were whole, or an error, which is the read's. */
MC_HIDDEN int mc__zin_new_src(mc_ctx *ctx, int fd, const char *path,
			      int (*at_end)(void *ud, mc_ctx *ctx), void *ud, mc_zin **out);
/* Reads exactly n bytes; on truncation MC_ERR_MALFORMED with mc__truncated()'s text. */
MC_HIDDEN int mc__zin_read(mc_zin *z, void *buf, size_t n);
/* The number of bytes read so far. */
MC_HIDDEN uint64_t mc__zin_tell(const mc_zin *z);
/* What the bundle declares its size to be, for the message of a truncation: exactly
 * size when exact is set, else at least size (only what its members so far imply). */
MC_HIDDEN void mc__zin_declare(mc_zin *z, uint64_t size, int exact);
/* MC_OK when the file ends here. */
MC_HIDDEN int mc__zin_expect_end(mc_zin *z);
MC_HIDDEN void mc__zin_free(mc_zin *z);
/* The one message of a bundle cut short, whatever the cut point: got bytes of a bundle
 * that declares (at least, unless exact) size. Returns MC_ERR_MALFORMED. */
MC_HIDDEN int mc__truncated(mc_ctx *ctx, const char *path, uint64_t got, uint64_t size, int exact);

/* Object encodings. */
#define MC_ENC_NONE 0
#define MC_ENC_ZSTD 1
#define MC_ZSTD_WINDOW_LOG 23  /* the largest window a reader takes; version 1's writer's */
#define MC_BLOCK_WINDOW_LOG 22 /* format version 2's writer's: a reader holds 4 MiB a worker */

/* Streaming compressor of one object at a time (fixed parameters: deterministic). */
typedef struct mc_zenc mc_zenc;
typedef int (*mc_out_fn)(void *ud, const unsigned char *buf, size_t n);
MC_HIDDEN int mc__zenc_new(mc_ctx *ctx, int level, mc_zenc **out);
/* The same with a window of 2^wlog bytes (mc__zenc_new(): MC_ZSTD_WINDOW_LOG). */
MC_HIDDEN int mc__zenc_new_window(mc_ctx *ctx, int level, int wlog, mc_zenc **out);
/* Feeds n bytes (end: the object's last bytes) and passes output to fn. */
MC_HIDDEN int mc__zenc_run(mc_zenc *z, const void *buf, size_t n, int end, mc_out_fn fn, void *ud);
MC_HIDDEN void mc__zenc_free(mc_zenc *z);

/* Streaming decompressor of one object at a time. */
typedef struct mc_zdec mc_zdec;
MC_HIDDEN int mc__zdec_new(mc_ctx *ctx, mc_zdec **out);
MC_HIDDEN void mc__zdec_reset(mc_zdec *z);
/* Feeds stored bytes; passes decompressed bytes to fn. *done is set when the frame
 * ended (then no stored byte may follow). */
MC_HIDDEN int mc__zdec_run(mc_zdec *z, const void *buf, size_t n, mc_out_fn fn, void *ud,
			   int *done);
/* Decodes src, which must be exactly one frame, into dst (room for cap + 1 bytes) in
 * one call. *overflow is set (with MC_ERR_INTEGRITY and no message) when the output
 * would pass cap. */
MC_HIDDEN int mc__zdec_whole(mc_zdec *z, const void *src, size_t n, void *dst, size_t cap,
			     size_t *produced, int *overflow);
MC_HIDDEN void mc__zdec_free(mc_zdec *z);

/* ---- canonical tar headers (tar.c) ---- */

#define MC_TAR_BLOCK 512
MC_HIDDEN int mc__tar_header_render(const char *name, uint64_t size, unsigned char hdr[512]);
/* Parses a header strictly: it must equal the rendering of the name and size it holds.
 * name: buffer of at least 101 bytes. Returns MC_OK, 1 for an all-zero block, or an
 * error (message set on ctx). */
MC_HIDDEN int mc__tar_header_parse(mc_ctx *ctx, const unsigned char hdr[512], char *name,
				   uint64_t *size);

/* The largest integer a manifest field may hold (SPEC.md section 3): 2^53 - 1, exact
 * in a double. The writer refuses larger values, the parser larger fields. */
#define MC_JSON_INT_MAX 9007199254740991ull

/* ---- manifest: the model (manifest.c), its text made (mrender.c), checked (mcheck.c),
 * walked (mjson.c) and parsed (mparse.c) ---- */

struct mc_label {
	char *key;
	char *value;
};

struct mc_martifact { /* its content hash is its object's */
	const char *type;
	const char *key;
	uint64_t size;
	const unsigned char *sha256; /* 32 bytes, or NULL when the entry has none */
	size_t object;  /* index into objects */
	int executable; /* installed executable: its member "executable" (SPEC.md 3.2) */
	const struct mc_type *handler; /* as read through a cursor: its type's, or NULL */
};

/* One artifact of a spilled table, as its temp file holds it. */
struct mc_arec {
	uint64_t size;
	uint64_t object;
	uint64_t key_off;  /* in the keys' temp file, where key_len bytes and a NUL are */
	uint32_t key_len;
	uint32_t type;     /* index into the manifest's types */
	uint32_t has_sha;
	uint32_t executable;
	unsigned char sha256[32];
};

struct mc_mentry { /* one entry of a torch blob group */
	char *key;
	size_t object;
};

struct mc_mgroup {
	char *type;
	struct mc_mentry *entries;
	size_t nentries;
};

struct mc_mobject {
	unsigned char hash[MC_HASH_BYTES];   /* of the content */
	uint64_t size;                       /* of the content */
	int encoding;                        /* MC_ENC_* */
	uint64_t stored_size;                /* bytes in the archive member */
	unsigned char stored_hash[MC_HASH_BYTES];
};

/* Format version 2 (SPEC.md section 12): the index member, which holds the tables, as
 * the manifest describes it, and the blocks, each one member holding the contents of
 * objects first .. first + n - 1 one after the other. */
struct mc_mindex {
	int encoding;         /* MC_ENC_* */
	uint64_t size;        /* of the index's JSON text */
	uint64_t stored_size; /* of the member */
	unsigned char stored_hash[MC_HASH_BYTES];
};

struct mc_mblock {
	int encoding;
	uint64_t size;        /* its objects' sizes summed */
	uint64_t stored_size;
	unsigned char stored_hash[MC_HASH_BYTES];
	size_t first, n;
};

/* The most content a block of several objects holds: writers cut blocks there, readers
 * refuse more (an object over it is a block alone). */
#define MC_BLOCK_MAX (16u << 20)

struct mc_manifest {
	int version;             /* format version: 1 or 2 */
	int halg;                /* its hash: MC_HALG_BLAKE2B (1) or MC_HALG_SHA256 (2) */
	struct mc_arena strings; /* of the artifacts' types and keys */
	int64_t created;
	uint64_t bundle_version;
	int64_t expires;
	struct mc_label *labels;
	size_t nlabels;
	char **gpu_targets;      /* version 2: the kernels' GPU targets, sorted (none: NULL) */
	size_t ngpu_targets;
	struct mc_martifact *artifacts;
	size_t nartifacts;
	int has_torch_blob;
	struct mc_mgroup *groups;
	size_t ngroups;
	struct mc_mobject *objects; /* version 1: sorted by hash, unique; version 2: in the
				     * blocks' order; NULL when ospilled */
	size_t nobjects;
	struct mc_mindex index;     /* version 2 */
	struct mc_mblock *blocks;
	size_t nblocks;
	/* version 2: the objects by hash prefix (oprefix[k] is object oorder[k]'s; both
	 * only while the tables are parsed), and per object whether it repeats an earlier
	 * one's content (never delivered, only checked) */
	uint32_t *oorder;
	unsigned char *dup;
	/* A manifest read from a file keeps its tables in temp files instead: the artifacts'
	 * records in artfd and their keys in keyfd, read through a cursor, and their types
	 * (each named once) in memory. So does a large object table (ospilled): its records
	 * in objfd, read with mc__mobjects(). */
	int spilled, ospilled;
	int objfd, artfd, keyfd;
	uint64_t *oprefix; /* of a parsed manifest: each object's hash, its first 8 bytes */
	char **types;
	size_t ntypes;
	/* A writer renders its manifest from its own records: when src is set, artifact i
	 * and object i come from it instead of the two tables. */
	const struct mc_msource *src;
};

struct mc_msource {
	void *ud;
	void (*artifact)(void *ud, size_t i, struct mc_martifact *out);
	void (*object)(void *ud, size_t i, struct mc_mobject *out);
};

/* A type's handler, as the layer above the format (tiers/) finds it; NULL when the
 * type has none. */
typedef const struct mc_type *(*mc_type_lookup)(const mc_ctx *ctx, const char *type);

/* Reads artifacts of a manifest, spilled or not, 512 records at a time; gives each its
 * type's handler through lookup. */
#define MC_ACUR_BATCH 512
struct mc_acur {
	mc_ctx *ctx;
	const struct mc_manifest *m;
	size_t first, n;         /* the records held: first .. first + n - 1 */
	struct mc_arec *rec;
	char *keys;              /* their keys, from rec[0].key_off on */
	size_t keycap;
	mc_type_lookup lookup;   /* finds a type's handler, or NULL: none */
	const char *htype;       /* the last type looked up, and its handler */
	const struct mc_type *handler;
	struct mc_martifact a;
};
MC_HIDDEN void mc__acur_init(struct mc_acur *c, mc_ctx *ctx, const struct mc_manifest *m,
			      mc_type_lookup lookup);
/* Artifact i (< m->nartifacts) in *a, valid until the next call on c (its type string
 * lives as long as the manifest). MC_ERR_IO when a temp file cannot be read, or
 * MC_ERR_NOMEM (message on the cursor's context). */
MC_HIDDEN int mc__acur_get(struct mc_acur *c, size_t i, const struct mc_martifact **a);
MC_HIDDEN void mc__acur_free(struct mc_acur *c);

/* Objects first .. first + n - 1 of m's table, copied to out; MC_ERR_IO when the
 * table's temp file cannot be read (message on ctx). */
MC_HIDDEN int mc__mobjects(mc_ctx *ctx, const struct mc_manifest *m, size_t first, size_t n,
			   struct mc_mobject *out);

MC_HIDDEN void mc__manifest_free(struct mc_manifest *m);
/* Parses and validates manifest bytes (structure, types, ranges, order, objects). */
MC_HIDDEN int mc__manifest_parse(mc_ctx *ctx, const unsigned char *buf, size_t len,
				 struct mc_manifest *m);
/* The checks on the whole text (UTF-8, no NUL, no escaped NUL, no raw control byte in a
 * string and nothing but JSON's four whitespace bytes between tokens, nesting), made on
 * the text in pieces, so that a large manifest need not be held to be checked. */
struct mc_mcheck {
	unsigned char u8[4]; /* a UTF-8 sequence cut by the end of a piece */
	size_t nu8;
	int depth, in_str, skip;
	int nesc0; /* 1 after the escape \u, up to 4 more for each 0 after it */
	int bad_utf8, has_nul, has_esc0, too_deep;
	uint64_t fed;            /* bytes fed before this piece */
	int has_stray, stray_str; /* a byte RFC 8259 does not allow there; in a string */
	unsigned char stray;      /* the first such byte, and where it is */
	uint64_t stray_at;
};
MC_HIDDEN void mc__mcheck_init(struct mc_mcheck *c);
MC_HIDDEN void mc__mcheck_feed(struct mc_mcheck *c, const unsigned char *p, size_t n);
/* MC_OK, or the error of the first check that failed, in the order listed above. */
MC_HIDDEN int mc__mcheck_end(mc_ctx *ctx, const struct mc_mcheck *c);
/* The same parse of a text of len bytes (at most the manifest cap) that was fed
 * through c and written to fd, read back in windows: the text is never held whole. */
MC_HIDDEN int mc__manifest_parse_fd(mc_ctx *ctx, int fd, uint64_t len,
				    const struct mc_mcheck *c, struct mc_manifest *m);
/* Format version 2: the index's text (m->index describes it) parsed into m, a manifest
 * parsed before, which is freed on failure. */
MC_HIDDEN int mc__index_parse(mc_ctx *ctx, const unsigned char *buf, size_t len,
			      struct mc_manifest *m);
MC_HIDDEN int mc__index_parse_fd(mc_ctx *ctx, int fd, uint64_t len, const struct mc_mcheck *c,
				 struct mc_manifest *m);
/* Serialises m (artifacts sorted, objects derived) to JSON bytes (malloc'd). */
MC_HIDDEN int mc__manifest_render(mc_ctx *ctx, const struct mc_manifest *m, char **out,
				  size_t *outlen);
/* The same bytes, handed to sink in pieces; sink's error (with the context's message
 * set) ends the rendering. */
typedef int (*mc_text_sink)(void *ud, const char *p, size_t n);
MC_HIDDEN int mc__manifest_write(mc_ctx *ctx, const struct mc_manifest *m, mc_text_sink sink,
				 void *ud);
/* Format version 2: the index's text (m->version 2), handed to sink in pieces. */
MC_HIDDEN int mc__index_write(mc_ctx *ctx, const struct mc_manifest *m, mc_text_sink sink,
			      void *ud);
MC_HIDDEN int mc__label_key_ok(const char *k);
/* 1 when v may be a label's value (SPEC.md section 3.1); else 0, with why it may not
 * ("contains control character U+001B") written to why (which may be NULL, with 0). */
MC_HIDDEN int mc__label_value_ok(const char *v, char *why, size_t whylen);

/* A manifest's text as mparse.c walks it with mjson.c: a member or an array element at
 * a time, from memory or read from a file in windows. */
struct cJSON;
/* What the parser's messages (mparse.c, mjson.c, mcheck.c) name: the manifest, or the
 * index while a version 2 index is parsed by the same rules. */
#define MC_DOC(ctx) ((ctx)->parsing_index ? "index" : "manifest")

struct mc_jdoc {
	const unsigned char *s; /* the window: bytes [w0, w0 + wn) of the text */
	uint64_t w0;
	size_t wn;
	uint64_t n, i;          /* the text's length; the cursor */
	int fd;                 /* where the text is read from; -1: s holds all of it */
	unsigned char *buf;     /* the window's storage when read from fd */
	size_t cap;
	int ioerr;              /* errno of a failed read */
};
/* Where a table's '[' is (0: nowhere) and how many elements it has. */
struct mc_jtable {
	size_t at, n;
};
/* The top level: every member goes into *root, each as its own tree, except an
 * "artifacts", "objects" or "blocks" array, which is only walked over: *root gets an
 * empty array in its place, and *arts, *objs or *blks where it is. No byte may follow
 * the value. */
MC_HIDDEN int mc__jdoc_top(mc_ctx *ctx, struct mc_jdoc *d, struct cJSON **root,
			   struct mc_jtable *arts, struct mc_jtable *objs,
			   struct mc_jtable *blks);
typedef int (*mc_jelem_fn)(mc_ctx *ctx, const struct cJSON *e, size_t idx, void *ud);
/* Reads an element at p (the next n bytes of the text, at most 4 KiB) when it is in
 * the form the writer makes, which needs no tree: the number of bytes it took, its
 * verdict in *rc; 0 when it is not in that form, for fn to judge. */
typedef size_t (*mc_jfast_fn)(mc_ctx *ctx, const char *p, size_t n, size_t idx, void *ud,
			      int *rc);
/* Walks the array whose '[' is at d->i, calling fn (when not NULL) with each element
 * as its own tree, unless fast (may be NULL) takes it; *count gets the number of
 * elements. */
MC_HIDDEN int mc__jdoc_array(mc_ctx *ctx, struct mc_jdoc *d, mc_jfast_fn fast, mc_jelem_fn fn,
			     void *ud, size_t *count);

/* ---- bundle member names (tar.c) ---- */

#define MC_MEMBER_MANIFEST "manifest.json"
#define MC_MEMBER_SIG_PREFIX "signatures/"
#define MC_MEMBER_SIG_SUFFIX ".minisig"
#define MC_MEMBER_OBJ_PREFIX "objects/"
/* Format version 2: the index, as it is or compressed, and the blocks, "blocks/<n>". */
#define MC_MEMBER_INDEX "index.json"
#define MC_MEMBER_INDEX_ZST "index.json.zst"
#define MC_MEMBER_BLOCK_PREFIX "blocks/"
/* "objects/" and the content hash in hex. */
MC_HIDDEN void mc__object_member(const unsigned char hash[MC_HASH_BYTES], char *name, size_t n);

/* ---- the container writer (emit.c) ---- */

typedef struct mc_emit mc_emit;
/* Whether bundles can be written: libarchive loaded, in a build that writes through it
 * (else an error naming why, MC_ERR_IO). Any thread; loaded once. */
MC_HIDDEN int mc__emit_ready(mc_ctx *ctx);

MC_HIDDEN int mc__emit_open(mc_ctx *ctx, const char *path, mc_emit **out);
/* The same into fd (a pipe, standard output), written in order; name is for messages. */
MC_HIDDEN int mc__emit_open_fd(mc_ctx *ctx, int fd, const char *name, mc_emit **out);
/* Writes manifest.json and the signature members (sigids sorted ascending). */
MC_HIDDEN int mc__emit_head(mc_emit *e, const char *manifest, size_t mlen, char *const *sigs,
			    const size_t *siglens, const char (*sigids)[17], size_t nsigs);
/* Writes the signature members alone, after a manifest written in pieces. */
MC_HIDDEN int mc__emit_sigs(mc_emit *e, char *const *sigs, const size_t *siglens,
			    const char (*sigids)[17], size_t nsigs);
MC_HIDDEN int mc__emit_member(mc_emit *e, const char *name, uint64_t size);
MC_HIDDEN int mc__emit_data(mc_emit *e, const void *buf, size_t n);
/* Completes the archive and renames it into place (into fd: flushes it); frees e
 * either way. */
MC_HIDDEN int mc__emit_finish(mc_emit *e);
MC_HIDDEN void mc__emit_abort(mc_emit *e);

#endif /* MC_FORMAT_H */
