/*
 * interop.h - torch's own formats: the cache blob, read and written, and cache folders,
 * what a job used of those folders (usage.c) and a bundle of it (usedsave.c); not
 * installed.
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

/* ---- what a job used of the cache folders (usage.c) ---- */

/* The scans of the folders save records: MC_USAGE_SCANS of them, in order, the inductor
 * root (with its triton/), the triton_home root and the vllm root. */
#define MC_USAGE_SCANS 3
/* Scan i of them into w, its root resolved into *root before the scan starts (fn may
 * read it through ud); a root that is not a folder is passed over. */
MC_HIDDEN int mc__usage_scan(mc_ctx *ctx, mc_writer *w, size_t i, mc_scan_fn fn, void *ud,
			     const char **root);
/* root "/" rel into buf (len bytes), each run of slashes made one and a trailing slash
 * dropped: two spellings of one root meet. 0, or -1 when it does not fit. */
MC_HIDDEN int mc__usage_join(char *buf, size_t len, const char *root, const char *rel);
/* What the job did with the watched file at path (as mc__usage_join() spells it), once
 * finished: MC_USEDF_*; *why the reason (MC_UNSEEN_*) of one not seen, *changed whether
 * its change time moved. */
enum { MC_USEDF_NONE, MC_USEDF_READ, MC_USEDF_UNREAD, MC_USEDF_UNSEEN };
MC_HIDDEN int mc__usage_file(const mc_usage *u, const char *path, int *why, int *changed);
/* The time the job started, as files' change times are stamped. */
MC_HIDDEN const struct timespec *mc__usage_started(const mc_usage *u);
MC_HIDDEN mc_ctx *mc__usage_ctx(const mc_usage *u);
/* MC_OK after mc_usage_finish() until a record succeeded, which done says (then once
 * only), for mc_usage_record(). */
MC_HIDDEN int mc__usage_to_record(mc_usage *u, int done);

#endif /* MC_INTEROP_H */
