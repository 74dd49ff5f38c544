/*
 * bundle.h - bundles: the writer, the open bundle handle and its reader, the plan of an
 * install, merge and diff; not installed.
 */
#ifndef MC_BUNDLE_H
#define MC_BUNDLE_H

#include "format/format.h"
#include "sign/sign.h"
#include "tiers/tiers.h"


struct mc_bsig {
	struct mc_sig sig;
	char *text; /* the member's bytes */
	size_t len;
};

struct mc_bundle {
	mc_ctx *ctx;
	char *path;
	int fd;
	mc_zin *z;
	mc_zdec *dec;
	int fresh;             /* stream positioned just after the signatures */
	int have_manifest;
	unsigned char mprehash[MC_SIG_PREHASH]; /* of the manifest's bytes, which are not kept */
	size_t mlen;
	struct mc_manifest m;
	struct mc_bsig *sigs;
	size_t nsigs;
	const mc_pubkey **trusted;
	size_t ntrusted;
	unsigned threshold;
	uint64_t min_version;
	int have_now;
	int64_t now;
	int insecure;
	struct mc_label *required; /* labels the caller requires */
	size_t nrequired;
	char **types; /* selected types; none: all */
	size_t ntypes;
	int planned;
	unsigned planned_gen; /* the context's roots_gen the plan was made for */
	unsigned char *sel; /* per artifact, from the plan: 1 when it is to be installed */
	struct mc_acur cur; /* what mc_bundle_artifact() reads with */
	char hex[MC_HASH_HEX]; /* what mc_bundle_artifact() last gave as hash */
};

/* Receives each object's content while the reader streams it. */
typedef int (*mc_obj_sink)(void *ud, size_t obj, const unsigned char *buf, size_t n);

/* Streams every object, checking names, sizes, stored hashes, padding and the end of
 * the archive, in order on the calling thread. sink (may be NULL) gets each object's
 * content; raw (may be NULL) gets its stored bytes. */
MC_HIDDEN int mc__bundle_stream(mc_bundle *b, mc_obj_sink sink, mc_obj_sink raw, void *ud);
/* The same on the context's worker threads: sink (may be NULL) is called from any of
 * them, with the worker's number and a context for its error message, and gets each
 * object's content in one piece unless it is over 4 MiB. */
typedef int (*mc_par_sink)(void *ud, unsigned worker, mc_ctx *ctx, size_t obj,
			   const unsigned char *buf, size_t n);
MC_HIDDEN int mc__bundle_stream_par(mc_bundle *b, mc_par_sink sink, void *ud);
/* The manifest's bytes, read again and checked against the prehash (malloc'd). */
MC_HIDDEN int mc__bundle_manifest(mc_bundle *b, unsigned char **out);
/* Signatures and policy, as mc_bundle_check_signatures. */
MC_HIDDEN int mc__bundle_policy(mc_bundle *b);
/* Finds each selected artifact's handler and checks destinations for conflicts. */
MC_HIDDEN int mc__bundle_plan(mc_bundle *b);
/* Artifact a's destination relative to its tier root (a planned, selected artifact);
 * errors name the bundle. */
MC_HIDDEN int mc__artifact_dest(mc_bundle *b, const struct mc_martifact *a, char *buf,
				size_t len);
MC_HIDDEN int mc__type_selected(const mc_bundle *b, const char *type);

/* Object contents parked in a temp folder (parts.c). */
struct mc_parts {
	mc_ctx *ctx;
	int dfd;
	char *dirpath;
	char *need; /* per object, or NULL: all */
	int fd;
	size_t cur;
	size_t nobjects;
};

/* Streams b (checking it) and writes each needed object to <prefix>XXXXXX/<index>. */
MC_HIDDEN int mc__parts_extract(mc_bundle *b, const char *prefix, char *need, struct mc_parts *p);
MC_HIDDEN void mc__parts_path(const struct mc_parts *p, size_t obj, char *buf, size_t len);
/* Opens object obj's part for reading. */
MC_HIDDEN int mc__parts_open(const struct mc_parts *p, size_t obj, int *fd);
/* Removes the files and the folder; p->need is not freed. */
MC_HIDDEN void mc__parts_remove(struct mc_parts *p);

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
/* A torch blob's groups, by type (replacing any before), an entry of group g, and
 * the end of the blob: layout says whether its groups are the current format's, which
 * an export can give back. */
MC_HIDDEN int mc__writer_blob_groups(mc_writer *w, char *const *gtypes, size_t n);
MC_HIDDEN int mc__writer_blob_entry(mc_writer *w, size_t g, const char *key, size_t obj);
MC_HIDDEN void mc__writer_blob_done(mc_writer *w, int layout);
/* Counts a source that added n artifacts (a bundle of one torch blob keeps its layout). */
MC_HIDDEN void mc__writer_note_source(mc_writer *w, size_t n);

#endif /* MC_BUNDLE_H */
