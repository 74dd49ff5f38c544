/*
 * interop.h - torch's own formats: the cache blob, read and written, and cache folders,
 * and what a job used of those folders (usage.c); not installed.
 */
#ifndef MC_INTEROP_H
#define MC_INTEROP_H

#include "write/write.h"

/* ---- torch blob (torchblob.c) ---- */

struct mc_tb_item {
	char *type;
	char *key;
	uint64_t offset; /* of content within the blob (file or memory) */
	uint64_t size;
	size_t group;
};

struct mc_tb {
	struct mc_tb_item *items;
	size_t nitems, capitems;
	char **gtypes; /* type of each group, in order */
	size_t ngroups;
	int format;    /* MC_TORCH_FORMAT_* it was read as */
	int layout;    /* groups are the current format's (export reproduces them) */
	char *env_torch_key; /* vLLM envelope: torch key in hex, and the aot key */
	char *env_aot_key;
};

/* The name of a blob given in memory, in messages. */
#define MC_TB_IN_MEMORY "torch blob in memory"

MC_HIDDEN int mc__torch_blob_parse(mc_ctx *ctx, const char *path, struct mc_tb *tb);
/* The same for a blob of len bytes at data; items' offsets are into data. */
MC_HIDDEN int mc__torch_blob_parse_mem(mc_ctx *ctx, const void *data, size_t len,
				       struct mc_tb *tb);
MC_HIDDEN void mc__torch_blob_free(struct mc_tb *tb);

/* ---- what a vLLM cache was made for (vllmfacts.c) ---- */

/* Notes as the writer's labels vllm.* what the file at path, which a scan of vLLM's root
 * recorded as type with key, tells of the cache: the hashes of a cache_key_factors.json
 * (vllm.config_hash, vllm.code_hash, vllm.compiler_hash) and a binary artifact's torch
 * key (vllm.torch_key); a file that tells nothing is passed over. */
MC_HIDDEN int mc__vllm_note(mc_writer *w, const char *type, const char *key, const char *path);


#endif /* MC_INTEROP_H */
