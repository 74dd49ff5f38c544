/*
 * emit_private.h - the bundle container writer shared by pack and sign; not installed.
 */
#ifndef MC_EMIT_PRIVATE_H
#define MC_EMIT_PRIVATE_H

#include "mc_private.h"

struct archive;
struct archive_entry;

typedef struct mc_emit {
	mc_ctx *ctx;
	char *path;
	char *tmp;
	int fd;
	int failed;
	unsigned char *buf; /* output buffer */
	size_t len;
	struct archive *a;
	struct archive_entry *entry;
} mc_emit;

MC_HIDDEN int mc__emit_open(mc_ctx *ctx, const char *path, mc_emit **out);
/* Writes manifest.json and the signature members (sigids sorted ascending). */
MC_HIDDEN int mc__emit_head(mc_emit *e, const char *manifest, size_t mlen, char *const *sigs,
			    const size_t *siglens, const char (*sigids)[17], size_t nsigs);
/* Writes the signature members alone, after a manifest written in pieces. */
MC_HIDDEN int mc__emit_sigs(mc_emit *e, char *const *sigs, const size_t *siglens,
			    const char (*sigids)[17], size_t nsigs);
MC_HIDDEN int mc__emit_member(mc_emit *e, const char *name, uint64_t size);
MC_HIDDEN int mc__emit_data(mc_emit *e, const void *buf, size_t n);
/* Completes the archive and renames it into place; frees e either way. */
MC_HIDDEN int mc__emit_finish(mc_emit *e);
MC_HIDDEN void mc__emit_abort(mc_emit *e);

/* Trusted comment of a megacache manifest signature, minisign style. */
#define MC_SIG_TRUSTED_FMT "timestamp:%lld\tfile:manifest.json\thashed"

#endif
