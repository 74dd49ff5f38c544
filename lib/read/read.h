/*
 * read.h - reading a bundle: the open bundle handle and its reader, the passes over its
 * objects, the plan of an install, the GPU targets of its kernels, and what reads whole
 * bundles (parts, re-signing, diff); not installed.
 */
#ifndef MC_READ_H
#define MC_READ_H

#include "format/format.h"
#include "oci/oci.h"
#include "sign/sign.h"
#include "tiers/tiers.h"

/* ---- the open bundle (reader.c) ---- */

struct mc_bsig {
	struct mc_sig sig;
	char *text; /* the member's bytes */
	size_t len;
};

/* What a bundle's Triton kernels are compiled for (targets.c, SPEC.md section 12.6). A
 * pass over the contents fills otarget from the kernels' metadata files; after one that
 * read them all, derived is set and sorted lists the targets found, in order. */
struct mc_gputargets {
	int walked;             /* kmeta is set (NULL: the bundle holds no metadata file) */
	unsigned char *kmeta;   /* per object: an artifact names it as a kernel's metadata */
	uint16_t *otarget;      /* per object: 1 + the index in found of its target, or 0 */
	char (*found)[MC_GPU_TARGET_LEN]; /* by the pass running or last run */
	size_t nfound;
	int derived;
	char **sorted;          /* of the first pass that read every object: kept */
	size_t nsorted;
	unsigned char *drop;    /* per artifact, from mc__gpu_check(): left out */
	size_t nskipped;        /* the kernel folders left out */
	char (*host)[MC_GPU_TARGET_LEN]; /* mc_bundle_set_host_gpus() */
	size_t nhost;
	mc_host_gpus_fn hostfn; /* mc_bundle_set_host_gpus_fn(): host is set from it */
	void *hostud;
};

struct mc_bundle {
	mc_ctx *ctx;
	char *path;
	int fd;
	mc_zin *z;
	mc_zdec *dec;
	int seq;               /* read in order (a pipe): one pass, no seeking */
	struct mc_ostream *remote; /* the registry's stream fd reads, or NULL */
	unsigned char peek[MC_TAR_BLOCK]; /* the last header read by the head's reader */
	uint64_t peek_at;      /* and where it lies */
	uint64_t declared;     /* its size, by the manifest, once a pass has started; or 0 */
	char next[101];        /* the header after the signatures: its name and size, or */
	uint64_t next_size;
	int next_end;          /* the end of the archive */
	uint64_t blocks_at;    /* format version 2: where the first block's header lies */
	/* Format version 2 read from a pipe: the index is read at the first call that needs
	 * the tables (after the signatures were checked, where they are), not at open. */
	int index_pending, index_loading, index_rc;
	int fresh;             /* stream positioned just after the signatures */
	int have_manifest;
	unsigned char mprehash[MC_SIG_PREHASH]; /* of the manifest's bytes, which are not kept */
	size_t mlen;
	struct mc_manifest m;
	struct mc_bsig *sigs;
	size_t nsigs;
	struct mc_policy policy; /* what the caller trusts and requires */
	char **types; /* selected types; none: all */
	size_t ntypes;
	int planned;
	unsigned planned_gen; /* the context's roots_gen the plan was made for */
	unsigned char *sel; /* per artifact, from the plan: 1 when it is to be installed */
	size_t ndropped;    /* selected artifacts the plan left out: another has their content
			     * and path */
	struct mc_acur cur; /* what mc_bundle_artifact() reads with */
	struct mc_acur fcur; /* what mc_bundle_find_artifact() and _executable() read with
			      * (set up on first use), so mc_bundle_artifact()'s key stays */
	size_t find_next;    /* the index after the artifact mc_bundle_find_artifact() found */
	char hex[MC_HASH_HEX]; /* what mc_bundle_artifact() last gave as hash */
	unsigned char *torch_blob; /* what mc_bundle_export_torch_memory() last gave */
	struct mc_gputargets gt;
};

/* n rounded up to whole archive blocks: a member's bytes with their padding. */
static inline uint64_t
mc__padded(uint64_t n)
{
	return (n + MC_TAR_BLOCK - 1) / MC_TAR_BLOCK * MC_TAR_BLOCK;
}

/* ---- reading the head and the tables (reader.c) ---- */

/* Format version 2 read from a pipe: reads the index now, if it is still pending;
 * MC_OK, or the error that reading it gave (kept). */
MC_HIDDEN int mc__bundle_index(mc_bundle *b);
/* Where the members after the head lie, by the sizes the tables give: offs[k] (offs may
 * be NULL) the header of object k (format version 1) or block k (2), *end where the
 * end-of-archive blocks start (they fit below 2^64 too). MC_ERR_LIMIT when the sum
 * overflows. */
MC_HIDDEN int mc__bundle_layout(mc_bundle *b, uint64_t *offs, uint64_t *end);
/* A bundle from a file whose tables are read: MC_OK when the file holds every member
 * they declare, else the message of a bundle cut short (MC_ERR_MALFORMED). A pipe is
 * checked as it is read. */
MC_HIDDEN int mc__bundle_whole(mc_bundle *b);

/* The manifest's bytes, read again and checked against the prehash (malloc'd). */
MC_HIDDEN int mc__bundle_manifest(mc_bundle *b, unsigned char **out);
/* (Re)starts the stream and reads the manifest and the signatures: the
 * first time they are kept, later passes must see the same bytes. */
MC_HIDDEN int mc__bundle_open_stream(mc_bundle *b);
/* Reads n bytes at off of the bundle's file; a short file is a truncated bundle. A
 * bundle read in order gives only what comes next (or the header read last again). */
MC_HIDDEN int mc__bundle_pread(mc_ctx *ctx, const mc_bundle *b, void *buf, size_t n,
			       uint64_t off);
/* After a read of a bundle from a registry failed with rc: when the registry's layer was
 * not the one its manifest names, or its transfer failed, that is the cause, said on b's
 * context and returned (the read waits for the layer's end); else rc. */
MC_HIDDEN int mc__bundle_remote_why(mc_bundle *b, int rc);
/* The error of a second pass over a bundle read in order. */
MC_HIDDEN int mc__bundle_once(mc_ctx *ctx, const mc_bundle *b);
/* Parses header h of the bundle at path: MC_OK with name and size, 1 for an
 * end-of-archive block; errors name the bundle. */
MC_HIDDEN int mc__bundle_header(mc_ctx *ctx, const char *path, const unsigned char *h,
				char *name, uint64_t *size);
/* The n padding bytes after member must be zero. */
MC_HIDDEN int mc__bundle_padding(mc_ctx *ctx, const char *path, const unsigned char *pad,
				 size_t n, const char *member);
/* Signatures and policy, as mc_bundle_check_signatures. */
MC_HIDDEN int mc__bundle_policy(mc_bundle *b);
MC_HIDDEN int mc__type_selected(const mc_bundle *b, const char *type);

/* ---- passes over the objects (stream.c) ---- */

/* Receives each object's content while the reader streams it. */
typedef int (*mc_obj_sink)(void *ud, size_t obj, const unsigned char *buf, size_t n);

/* Streams every object, checking names, sizes, stored hashes, padding and the end of
 * the archive, in order on the calling thread. sink (may be NULL) gets each object's
 * content; raw (may be NULL) gets its stored bytes. */
MC_HIDDEN int mc__bundle_stream(mc_bundle *b, mc_obj_sink sink, mc_obj_sink raw, void *ud);
/* The same on the context's worker threads: sink (may be NULL) is called from any of
 * them, with the worker's number and a context for its error message, and gets each
 * object's content in one piece, its hash checked first, unless it is over 4 MiB; in
 * format version 2, in pieces as it is decompressed (its hash checked at its end, the
 * pass failing after), but for those of up to 1 MiB that hold (may be NULL) marks. */
typedef int (*mc_par_sink)(void *ud, unsigned worker, mc_ctx *ctx, size_t obj,
			   const unsigned char *buf, size_t n);
MC_HIDDEN int mc__bundle_stream_par(mc_bundle *b, mc_par_sink sink,
				    const unsigned char *hold, void *ud);
/* What done is told of an object: rc MC_OK once its stored and content hashes and its
 * size checked (then its content when it was read in one piece, 4 MiB or less, valid
 * during the call, else content NULL: the sink had its pieces; and its SHA-256 when an
 * artifact lists one, else sha NULL), or the failure, its message on the worker's
 * context, which done is to return. */
struct mc_objout {
	size_t obj;
	int rc;
	const unsigned char *content;
	size_t size;
	const unsigned char *sha;
};
typedef int (*mc_obj_done)(void *ud, unsigned worker, mc_ctx *ctx, const struct mc_objout *o);
/* A pass on the context's workers over the objects whose want[] is set: in a file only
 * those are read, at their places; a bundle read in order is read whole and checked,
 * the others' contents not handed on. sink (may be NULL) gets the pieces of the
 * objects over 4 MiB; done is called for each wanted object, checked or failed. Items
 * are claimed in object order (see mc__parallel). */
MC_HIDDEN int mc__bundle_stream_some(mc_bundle *b, const unsigned char *want, mc_par_sink sink,
				     mc_obj_done done, void *ud);

/* ---- the plan of an install (plan.c) ---- */

/* Finds each selected artifact's handler and checks destinations for conflicts. */
MC_HIDDEN int mc__bundle_plan(mc_bundle *b);
/* The same with its messages on ctx: b's context, or a copy of it for a plan made on
 * another thread while b is read (every tier's root resolved before the copy, so that
 * the plan only reads what the copy shares; only built-in types). */
MC_HIDDEN int mc__bundle_plan_in(mc_bundle *b, mc_ctx *ctx);
/* Artifact a's destination relative to its tier root (a planned, selected artifact);
 * errors name the bundle. */
MC_HIDDEN int mc__artifact_dest(mc_bundle *b, const struct mc_martifact *a, char *buf,
				size_t len);

/* ---- the checks every use of the contents starts with (verify.c) ---- */

/* Signatures and policy (mc__bundle_policy()), then the plan: made by plan(b, ud) when
 * it is given (a caller that makes it its own way), else by mc__bundle_plan(). */
MC_HIDDEN int mc__bundle_checks(mc_bundle *b, int (*plan)(mc_bundle *b, void *ud), void *ud);

/* ---- GPU targets (targets.c) ---- */

/* Before a pass: which objects are kernels' metadata files, the targets found so far
 * forgotten. */
MC_HIDDEN int mc__gpu_prepare(mc_bundle *b);
/* Object obj's content (n bytes, checked), during a pass on any worker: the target it
 * names, noted under lock when it is a kernel's metadata file. */
MC_HIDDEN int mc__gpu_note(mc_bundle *b, mc_ctx *ctx, void *lock, size_t obj,
			   const unsigned char *buf, size_t n);
/* Whether mc__gpu_note() reads object obj's content in this pass: it is a kernel's
 * metadata file. */
static inline int
mc__gpu_reads(const mc_bundle *b, size_t obj)
{
	return b->gt.otarget != NULL && b->gt.kmeta[obj];
}
/* After a pass that read every object: the targets found, sorted; a manifest that
 * records others is refused (MC_ERR_INTEGRITY). */
MC_HIDDEN int mc__gpu_derived(mc_bundle *b);
/* A load's check of the kernels against the host's targets (set: mc_bundle_set_host_gpus()):
 * before the pass, of the bundle's targets as known then (only for a load of every
 * type, and not with skip); after it (after_pass), of each selected kernel. A target
 * the host lacks fails the load (MC_ERR_GPU_MISMATCH), or with skip set marks the
 * kernel's folder's artifacts in gt.drop. */
MC_HIDDEN int mc__gpu_check(mc_bundle *b, int skip, int after_pass);
/* The host's targets from the function set (mc_bundle_set_host_gpus_fn()), once. */
MC_HIDDEN int mc__gpu_host(mc_bundle *b);
MC_HIDDEN void mc__gpu_free(mc_bundle *b);
/* Whether artifact i is left out (mc__gpu_check() with skip). */
static inline int
mc__gpu_dropped(const mc_bundle *b, size_t i)
{
	return b->gt.drop != NULL && b->gt.drop[i];
}

/* ---- bundles to and from registries, whole (publish.c) ---- */

/* Pushes the bundle in fd (a whole file) to the registry reference ref, its manifest's
 * facts as the artifact's annotations; mc_ctx_registry_digest() tells the digests. */
MC_HIDDEN int mc__push_bundle(mc_ctx *ctx, int fd, const char *ref);

/* ---- object contents parked in a temp folder (parts.c) ---- */

struct mc_parts {
	mc_ctx *ctx;
	const char *name; /* what a failure to write names: the output they are for */
	int dfd;
	char *dirpath;
	char *need; /* per object, or NULL: all */
	int fd;
	size_t cur;
	size_t nobjects;
};

/* Streams b (checking it) and writes each needed object to <prefix>XXXXXX/<index>; a
 * failure to write names name (not owned; the output the parts are for, or their folder). */
MC_HIDDEN int mc__parts_extract(mc_bundle *b, const char *prefix, const char *name, char *need,
				struct mc_parts *p);
MC_HIDDEN void mc__parts_path(const struct mc_parts *p, size_t obj, char *buf, size_t len);
/* Opens object obj's part for reading. */
MC_HIDDEN int mc__parts_open(const struct mc_parts *p, size_t obj, int *fd);
/* Removes the files and the folder; p->need is not freed. */
MC_HIDDEN void mc__parts_remove(struct mc_parts *p);

#endif /* MC_READ_H */
