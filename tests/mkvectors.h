/*
 * mkvectors.h - what the files of mkvectors share: the run's state, a raw bundle
 * builder, and the writers of the vectors every format version has.
 */
#ifndef MC_MKVECTORS_H
#define MC_MKVECTORS_H

#define MC_BUILDING_LIBRARY 1
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "interop/interop.h"
#include "install/install.h"

#define EPOCH 1700000000

/* torch's key of one FX graph and of one AOTAutograd graph (SPEC.md section 4). */
#define FX_KEY "fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i"
#define AOT_KEY "a6evpaswaarnhf33j2qsuxec7uuoia36amih7yie4paqkd47g7sl"

/* The metadata file of a Triton kernel for cuda:90. */
#define GPU_META_90 "{\"name\": \"k\", \"target\": {\"backend\": \"cuda\", \"arch\": 90, " \
	"\"warp_size\": 32}}"

/* A bundle or a zstd frame being built. */
struct buf {
	unsigned char *p;
	size_t n, cap;
};

/* An artifact given to signed_triples(): its type, key and content. */
struct triple {
	const char *type, *key, *data;
};

/* ---- the run: its keys, the test artifacts, expected.tsv (mkvectors_common.c) ---- */
extern const char *srcdir, *outdir;
extern mc_ctx *ctx;
extern mc_seckey *k_test, *k_test2, *k_other;
extern FILE *tsv;
extern int fmt_version;
extern unsigned char *c_vu, *c_ig, *c_pgo;
extern size_t n_vu, n_ig, n_pgo;
extern const char *key_vu, *key_ig;

void die(const char *what) __attribute__((noreturn));
int new_writer(mc_writer **w);
unsigned char *read_in(const char *dir, const char *rel, size_t *len);
unsigned char *slurp(const char *rel, size_t *len);
void spit(const char *name, const void *buf, size_t n);
void expect(const char *file, const char *cmd, int code, const char *text);
void set_up(void);

/* ---- a raw bundle builder (mkvectors_common.c) ---- */
void put(struct buf *b, const void *d, size_t n);
void put_member_hdr(struct buf *b, const unsigned char hdr[512], const void *data, size_t n);
void put_member(struct buf *b, const char *name, const void *data, size_t n);
void put_end(struct buf *b);
void put_sig(struct buf *b, const mc_seckey *sk, const char *manifest, size_t mlen,
	     const char *tc);
int bomb_out(struct buf *b, const unsigned char *d, size_t n);
void save_raw(const char *name, const struct buf *tar);
void start(struct buf *b, const char *man);
void start_signed(struct buf *b, const char *man);
void finish(struct buf *b, const char *name, const char *cmd, int code, const char *text);
void hexhash(const unsigned char *d, size_t n, char out[65]);
void zstd_object_as(const char *name, const char *key, const unsigned char *stored, size_t sn,
		    const unsigned char *content, size_t n, const char *hash, int code,
		    const char *msg);
void put_block(struct buf *f, int last, int type, uint32_t size);

/* ---- valid bundles, made by the library (mkvectors_common.c) ---- */
void valid(const char *name, int level, const mc_seckey *s1, const mc_seckey *s2);
void signed_triples(const char *name, const struct triple *t, size_t n);
void valid_trio(const char *pre);
void graph_entries(const char *pre);

/* ---- format version 2 (mkvectors_v2.c) ---- */
void version2(void);
void sha_hex(const void *d, size_t n, char out[65]);
void v2_bundle(const char *name, const char *index, const char *iname, const char *const *blk,
	       const size_t *blen, size_t n, const char *extra, const char *cmd, int code,
	       const char *text);
void rle_bytes(struct buf *f, struct buf *c, int x, size_t n, int last);

/* ---- vLLM's handle file (mkvectors_vllm.c) ---- */
void vllm_vectors(void);

#endif
