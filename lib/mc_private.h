/*
 * mc_private.h - declarations shared by the files of libmegacache; not installed.
 */
#ifndef MC_PRIVATE_H
#define MC_PRIVATE_H

#ifndef MC_BUILDING_LIBRARY
#error "mc_private.h is internal to libmegacache"
#endif

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "megacache.h"

#define MC_HIDDEN __attribute__((visibility("hidden")))

#define MC_HASH_BYTES 32     /* BLAKE2b-256 object hash */
#define MC_HASH_HEX 65       /* with NUL */
#define MC_KEYID_BYTES 8
#define MC_ERRBUF 1024
#define MC_PATH_MAX 4096
#define MC_KEY_MAX 1024      /* artifact key, bytes */
#define MC_TYPE_MAX 32
#define MC_IO_CHUNK (256 * 1024)
/* Contents up to this size are read, compressed and decoded in one piece. */
#define MC_WHOLE_MAX (4u << 20)
/* The default cap on content size / stored size of a zstd object; writers keep under
 * it whatever cap they were given, so that any reader with the default takes their
 * bundles. */
#define MC_DEFAULT_MAX_EXPANSION 4096ull

/* ---- context ---- */

struct mc_type {
	char name[MC_TYPE_MAX + 1];
	char *tier;
	unsigned flags;
	mc_key_check_fn key_check;
	mc_dest_path_fn dest_path;
	void *ud;
};

struct mc_tier {
	char *name;
	char *root;   /* NULL until set or resolved */
	size_t named; /* how much of root its setter named: a loader may follow links
		       * there, and walks the rest (a default's own folders) without */
};

struct mc_ctx {
	char err[MC_ERRBUF];
	struct mc_type *types;
	size_t ntypes;
	struct mc_tier *tiers;
	size_t ntiers;
	mc_progress_fn progress;
	void *progress_ud;
	uint64_t max_manifest;
	uint64_t max_artifacts;
	uint64_t max_artifact_bytes;
	uint64_t max_total_bytes;
	uint64_t max_expansion; /* 0: no cap */
	int triton_flat; /* the triton tier has no device level */
	unsigned roots_gen; /* changes with every tier root set: a bundle's plan depends on them */
	unsigned threads; /* worker threads; 0: one per online CPU, at most MC_MAX_THREADS */
};

#define MC_MAX_THREADS 8
/* The number of worker threads an operation on ctx uses (at least 1). */
MC_HIDDEN unsigned mc__threads(const mc_ctx *ctx);

/* One item of parallel work. worker: 0 is the calling thread (the only one that may
 * report progress); wctx: the context for its error message (ctx itself when there is
 * one worker, else the worker's own copy, valid during the run). */
typedef int (*mc_par_fn)(void *ud, unsigned worker, mc_ctx *wctx, size_t i);
/* Runs fn for i = 0..n-1 on up to nworkers threads, claiming items in order. After a
 * failure no further item starts; the result is that of the lowest item that failed,
 * its message on ctx. */
MC_HIDDEN int mc__parallel(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud);

/* escape.c: the characters mc_escape() makes visible, and that a label value may not
 * hold (SPEC.md section 3.1); whether text of n bytes is UTF-8 without them (0), not
 * valid UTF-8 (-1), or holds one, *cp (1); tab_ok lets TAB through. */
MC_HIDDEN int mc__is_unsafe_cp(uint32_t cp);
MC_HIDDEN int mc__text_check(const char *text, size_t n, int tab_ok, uint32_t *cp);
MC_HIDDEN int mc__err(mc_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
MC_HIDDEN int mc__errno(mc_ctx *ctx, int code, const char *what, const char *path);
struct stat;
/* Opens path to read; refuses (without blocking) anything but a regular file. */
MC_HIDDEN int mc__open_regular(mc_ctx *ctx, const char *path, int *fd, struct stat *st);
MC_HIDDEN const struct mc_type *mc__find_type(const mc_ctx *ctx, const char *type);
/* Checks key with type t's handler (and the length every key has). */
MC_HIDDEN int mc__key_check(mc_ctx *ctx, const struct mc_type *t, const char *key);
MC_HIDDEN void mc__progress(mc_ctx *ctx, const char *phase, uint64_t done, uint64_t total);
MC_HIDDEN int mc__crypto_init(mc_ctx *ctx);
MC_HIDDEN int mc__register_torch_types(mc_ctx *ctx);
/* The default roots; *named gets the length of the part that was named by the
 * environment rather than made up here (TMPDIR, the inductor root). */
MC_HIDDEN int mc__torch_default_root(mc_ctx *ctx, char **out, size_t *named);
MC_HIDDEN int mc__triton_default_root(mc_ctx *ctx, char **out, int *flat, size_t *named);
/* A tier's root as mc_ctx_tier_root() gives it, and how much of it was named. */
MC_HIDDEN int mc__tier_root(mc_ctx *ctx, const char *tier, const char **path, size_t *named);
/* Checks key with the type's handler and computes its destination. */
MC_HIDDEN int mc__dest_for(mc_ctx *ctx, const struct mc_type *t, const char *key,
			   const unsigned char *sha256, char *buf, size_t buflen);

/* ---- encodings (encode.c) ---- */

MC_HIDDEN void mc__hex(const unsigned char *in, size_t n, char *out);
MC_HIDDEN int mc__unhex(const char *in, unsigned char *out, size_t n);
MC_HIDDEN int mc__is_lower_hex(const char *s, size_t n);
/* torch's H(): lower-case RFC 4648 base32 of in, first 51 characters. out: 52 bytes. */
MC_HIDDEN void mc__torch_b32_51(const unsigned char sha256[32], char out[52]);
MC_HIDDEN uint32_t mc__crc32(uint32_t crc, const void *buf, size_t n);
MC_HIDDEN int mc__utf8_valid(const unsigned char *s, size_t n);
/* One UTF-8 sequence at s (n bytes left): its length, or 0 when it is not a valid,
 * shortest-form encoding of a scalar value. */
MC_HIDDEN size_t mc__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
MC_HIDDEN uint64_t mc__be64(const unsigned char *p);
MC_HIDDEN void mc__put_be64(unsigned char *p, uint64_t v);
MC_HIDDEN uint64_t mc__le64(const unsigned char *p);
MC_HIDDEN void mc__put_le64(unsigned char *p, uint64_t v);
MC_HIDDEN char *mc__strdup(const char *s);
/* base64 (standard alphabet, padded); decode is strict: canonical input only. */
MC_HIDDEN char *mc__b64_encode(const unsigned char *in, size_t n);
MC_HIDDEN int mc__b64_decode(const char *in, size_t inlen, unsigned char *out, size_t outmax,
			     size_t *outlen);

/* ---- file helpers (fileio.c) ---- */

MC_HIDDEN int mc__write_all(int fd, const void *buf, size_t n);
/* Reads exactly n bytes; returns 0, or -1 with errno (EIO-like short read: errno 0). */
MC_HIDDEN int mc__read_full(int fd, void *buf, size_t n);
/* n bytes at off; -1 with errno (0 at the end of the file) when they cannot be had. */
MC_HIDDEN int mc__pread_full(int fd, void *buf, size_t n, uint64_t off);
MC_HIDDEN int mc__pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* Opens a temp file beside path (same folder). Returns fd, and the temp name. */
MC_HIDDEN int mc__open_temp_beside(mc_ctx *ctx, const char *path, char **tmp_out, int mode);
/* Makes the finished temp file tmp (open as fd) the file path, durably: its data
 * flushed, fd closed, tmp renamed over path, and the folder's entry flushed. fd is
 * closed and tmp gone either way; on a failure before the rename tmp is removed and
 * path left as it was. */
MC_HIDDEN int mc__commit_temp(mc_ctx *ctx, int fd, const char *tmp, const char *path);
/* A private file with no name in $TMPDIR (or /tmp), gone when closed; -1 with the
 * error on ctx. */
MC_HIDDEN int mc__open_temp_anon(mc_ctx *ctx);
MC_HIDDEN int mc__read_small_file(mc_ctx *ctx, const char *path, size_t max, char **buf,
				  size_t *len);

/* ---- stores (store.c): byte arrays that move to a temp file past MC_STORE_MEM ---- */

#define MC_STORE_MEM (256u * 1024)

struct mc_store {
	const char *what;   /* for messages: "the writer's <what>" */
	int fd;             /* -1 while everything is in buf */
	uint64_t flushed;   /* bytes in the file; buf holds the ones after them */
	unsigned char *buf;
	size_t len, cap;
};

MC_HIDDEN void mc__store_init(struct mc_store *s, const char *what);
MC_HIDDEN void mc__store_free(struct mc_store *s);
MC_HIDDEN uint64_t mc__store_size(const struct mc_store *s);
/* MC_ERR_IO naming the store and errno (0: an unexpected end). */
MC_HIDDEN int mc__store_error(mc_ctx *ctx, const struct mc_store *s, const char *verb);
/* Appends n bytes; *off (when not NULL) gets where they start. What an append adds
 * stays in memory until the next one when it is smaller than the buffer (4 KiB at
 * least), so mc__store_unappend() can take it back. */
MC_HIDDEN int mc__store_append(mc_ctx *ctx, struct mc_store *s, const void *p, size_t n,
			       uint64_t *off);
MC_HIDDEN int mc__store_unappend(struct mc_store *s, size_t n);
/* Copies n bytes at off into p (wr = 0), or p over them (wr = 1). Safe from several
 * threads on distinct bytes while nothing is appended. */
MC_HIDDEN int mc__store_io(mc_ctx *ctx, const struct mc_store *s, uint64_t off, void *p,
			   size_t n, int wr);
/* Reads a store forwards from off to end, through a buffer. */
struct mc_sreader {
	const struct mc_store *s;
	uint64_t off, end;  /* the next byte to fetch, and the last + 1 */
	unsigned char *buf;
	size_t cap, pos, len;
};
MC_HIDDEN int mc__sreader_init(mc_ctx *ctx, struct mc_sreader *r, const struct mc_store *s,
			      uint64_t off, uint64_t end, size_t cap);
MC_HIDDEN int mc__sreader_get(mc_ctx *ctx, struct mc_sreader *r, void *p, size_t n);

/* ---- minisign formats (minisign.c) ---- */

struct mc_pubkey {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char pk[32];
	char id[17];
};

struct mc_seckey {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char *sk; /* 64 bytes, sodium_malloc'd */
	char id[17];
};

/* A parsed minisign signature. */
struct mc_sig {
	unsigned char keynum[MC_KEYID_BYTES];
	unsigned char sig[64];
	char *trusted_comment; /* without prefix and newline */
	unsigned char global_sig[64];
	char id[17];
};

MC_HIDDEN void mc__keyid_str(const unsigned char keynum[8], char out[17]);
/* What an "ED" signature signs: the BLAKE2b-512 of the message. */
#define MC_SIG_PREHASH 64
/* Signs msg (prehashed, "ED") with a trusted comment; fills sig. */
MC_HIDDEN int mc__sig_make(mc_ctx *ctx, const mc_seckey *sk, const unsigned char *msg, size_t n,
			   const char *trusted_comment, struct mc_sig *sig);
/* The same, given the message's prehash (MC_SIG_PREHASH bytes, mc__sig_prehash). */
MC_HIDDEN int mc__sig_make_prehashed(mc_ctx *ctx, const mc_seckey *sk,
				     const unsigned char prehash[MC_SIG_PREHASH],
				     const char *trusted_comment,
				     struct mc_sig *sig);
/* Renders the canonical signature file text (malloc'd). */
MC_HIDDEN char *mc__sig_render(const struct mc_sig *sig, size_t *len);
/* Parses signature file text. strict: the bytes must be the canonical rendering. */
MC_HIDDEN int mc__sig_parse(mc_ctx *ctx, const char *text, size_t len, int strict,
			    struct mc_sig *sig);
MC_HIDDEN void mc__sig_clear(struct mc_sig *sig);
/* 0 if sig verifies msg under pk (both signature and trusted-comment signature). */
MC_HIDDEN int mc__sig_verify(const struct mc_sig *sig, const mc_pubkey *pk,
			     const unsigned char *msg, size_t n);
MC_HIDDEN void mc__sig_prehash(const unsigned char *msg, size_t n,
			       unsigned char out[MC_SIG_PREHASH]);
/* The same as mc__sig_verify, given the message's prehash. */
MC_HIDDEN int mc__sig_verify_prehashed(const struct mc_sig *sig, const mc_pubkey *pk,
				       const unsigned char prehash[MC_SIG_PREHASH]);

/* ---- file input and per-object zstd (zstream.c) ---- */

typedef struct mc_zin mc_zin;

/* Buffered input from a bundle file; the first block must be a ustar header. */
MC_HIDDEN int mc__zin_new(mc_ctx *ctx, int fd, const char *path, mc_zin **out);
/* Reads exactly n bytes; MC_ERR_MALFORMED on truncation. */
MC_HIDDEN int mc__zin_read(mc_zin *z, void *buf, size_t n);
/* MC_OK when the file ends here. */
MC_HIDDEN int mc__zin_expect_end(mc_zin *z);
MC_HIDDEN void mc__zin_free(mc_zin *z);

/* Object encodings. */
#define MC_ENC_NONE 0
#define MC_ENC_ZSTD 1
#define MC_ZSTD_WINDOW_LOG 23

/* Streaming compressor of one object at a time (fixed parameters: deterministic). */
typedef struct mc_zenc mc_zenc;
typedef int (*mc_out_fn)(void *ud, const unsigned char *buf, size_t n);
MC_HIDDEN int mc__zenc_new(mc_ctx *ctx, int level, mc_zenc **out);
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

/* ---- canonical tar headers (tarfmt.c) ---- */

#define MC_TAR_BLOCK 512
MC_HIDDEN int mc__tar_header_render(const char *name, uint64_t size, unsigned char hdr[512]);
/* Parses a header strictly: it must equal the rendering of the name and size it holds.
 * name: buffer of at least 101 bytes. Returns MC_OK, 1 for an all-zero block, or an
 * error (message set on ctx). */
MC_HIDDEN int mc__tar_header_parse(mc_ctx *ctx, const unsigned char hdr[512], char *name,
				   uint64_t *size);

/* ---- manifest (manifest.c) ---- */

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
	uint32_t pad;
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

/* Strings that live as long as their owner, packed into large blocks: one malloc per
 * block instead of one per string. */
struct mc_arena {
	struct mc_ablock *head;
};
MC_HIDDEN void *mc__arena_dup(struct mc_arena *a, const void *p, size_t n);
MC_HIDDEN char *mc__arena_strdup(struct mc_arena *a, const char *s);
MC_HIDDEN void mc__arena_free(struct mc_arena *a);

struct mc_manifest {
	struct mc_arena strings; /* of the artifacts' types and keys */
	int64_t created;
	uint64_t bundle_version;
	int64_t expires;
	struct mc_label *labels;
	size_t nlabels;
	struct mc_martifact *artifacts;
	size_t nartifacts;
	int has_torch_blob;
	struct mc_mgroup *groups;
	size_t ngroups;
	struct mc_mobject *objects; /* sorted by hash, unique; NULL when spilled */
	size_t nobjects;
	/* A manifest read from a file keeps its tables in temp files instead: the objects'
	 * records in objfd, read with mc__mobjects(), and the first 8 bytes of each hash in
	 * memory; the artifacts' records in artfd and their keys in keyfd, read through a
	 * cursor, and their types (each named once) in memory. */
	int spilled;
	int objfd, artfd, keyfd;
	uint64_t *oprefix;
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

/* Reads artifacts of a manifest, spilled or not, 64 records at a time. */
#define MC_ACUR_BATCH 64
struct mc_acur {
	mc_ctx *ctx;
	const struct mc_manifest *m;
	size_t first, n;         /* the records held: first .. first + n - 1 */
	struct mc_arec *rec;
	char *keys;              /* their keys, from rec[0].key_off on */
	size_t keycap;
	const char *htype;       /* the last type looked up, and its handler */
	const struct mc_type *handler;
	struct mc_martifact a;
};
MC_HIDDEN void mc__acur_init(struct mc_acur *c, mc_ctx *ctx, const struct mc_manifest *m);
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
/* Serialises m (artifacts sorted, objects derived) to JSON bytes (malloc'd). */
MC_HIDDEN int mc__manifest_render(mc_ctx *ctx, const struct mc_manifest *m, char **out,
				  size_t *outlen);
/* The same bytes, handed to sink in pieces; sink's error (with the context's message
 * set) ends the rendering. */
typedef int (*mc_text_sink)(void *ud, const char *p, size_t n);
MC_HIDDEN int mc__manifest_write(mc_ctx *ctx, const struct mc_manifest *m, mc_text_sink sink,
				 void *ud);
MC_HIDDEN int mc__label_key_ok(const char *k);
/* 1 when v may be a label's value (SPEC.md section 3.1); else 0, with why it may not
 * ("contains control character U+001B") written to why (which may be NULL, with 0). */
MC_HIDDEN int mc__label_value_ok(const char *v, char *why, size_t whylen);

/* ---- bundle member names ---- */

#define MC_MEMBER_MANIFEST "manifest.json"
#define MC_MEMBER_SIG_PREFIX "signatures/"
#define MC_MEMBER_SIG_SUFFIX ".minisig"
#define MC_MEMBER_OBJ_PREFIX "objects/"
/* "objects/" and the content hash in hex. */
MC_HIDDEN void mc__object_member(const unsigned char hash[MC_HASH_BYTES], char *name, size_t n);

/* ---- torch blob (torchblob.c) ---- */

struct mc_tb_item {
	char *type;
	char *key;
	uint64_t offset; /* of content within the blob file */
	uint64_t size;
	size_t group;
};

struct mc_tb {
	struct mc_tb_item *items;
	size_t nitems;
	char **gtypes; /* type of each group, in order */
	size_t ngroups;
	int format;    /* MC_TORCH_FORMAT_* it was read as */
	int layout;    /* groups are the current format's (export reproduces them) */
	char *env_torch_key; /* vLLM envelope: torch key in hex, and the aot key */
	char *env_aot_key;
};

MC_HIDDEN int mc__torch_blob_parse(mc_ctx *ctx, const char *path, struct mc_tb *tb);
MC_HIDDEN void mc__torch_blob_free(struct mc_tb *tb);
/* The order in which export emits groups when the bundle has no blob layout. */
MC_HIDDEN int mc__torch_type_rank(const char *type);

/* ---- writer internals shared with scan.c ---- */

MC_HIDDEN int mc__writer_add_range(mc_writer *w, const char *type, const char *key,
				   const char *path, uint64_t offset, uint64_t size,
				   size_t *object_out);
MC_HIDDEN mc_ctx *mc__writer_ctx(mc_writer *w);
/* Runs cleanup(arg) when the writer is freed. */
MC_HIDDEN int mc__writer_adopt(mc_writer *w, void (*cleanup)(void *), void *arg);
MC_HIDDEN int mc__writer_keep_unknown(const mc_writer *w);
/* The SHA-256 recorded for the last artifact, or NULL; and taking it back. */
MC_HIDDEN const unsigned char *mc__writer_last_sha256(const mc_writer *w);
MC_HIDDEN void mc__writer_drop_last(mc_writer *w);
/* Counts a source that added n artifacts (a bundle of one torch blob keeps its layout). */
MC_HIDDEN void mc__writer_note_source(mc_writer *w, size_t n);

#endif /* MC_PRIVATE_H */
