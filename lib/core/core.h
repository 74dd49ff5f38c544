/*
 * core.h - the bottom layer of libmegacache: the context, errors, encodings, text checks
 * and worker threads; not installed.
 */
#ifndef MC_CORE_H
#define MC_CORE_H

#ifndef MC_BUILDING_LIBRARY
#error "core/core.h is internal to libmegacache"
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "megacache.h"

#include <sodium.h> /* crypto_generichash_state, crypto_hash_sha256_state */

#define MC_HIDDEN __attribute__((visibility("hidden")))

/* ---- sizes and caps, and sums checked against them (inline here) ---- */

#define MC_HASH_BYTES 32     /* BLAKE2b-256 object hash */
#define MC_HASH_HEX 65       /* with NUL */
#define MC_KEYID_BYTES 8
#define MC_ERRBUF 1024
#define MC_PATH_MAX 4096
#define MC_KEY_MAX 1024      /* artifact key, bytes */
#define MC_TYPE_MAX 32
/* An index (of an array's element, an object, a tier) that names none. */
#define MC_NO_INDEX SIZE_MAX
#define MC_IO_CHUNK (256 * 1024)
/* Contents up to this size are read, compressed and decoded in one piece. */
#define MC_WHOLE_MAX (4u << 20)
/* The default cap on content size / stored size of a zstd object; writers keep under
 * it whatever cap they were given, so that any reader with the default takes their
 * bundles. */
#define MC_DEFAULT_MAX_EXPANSION 4096ull

/* Whether size bytes stored in stored_size pass the expansion cap (0: none): SPEC.md
 * section 7's size / stored_size, rounded down, over cap. */
static inline int
mc__over_expansion(uint64_t size, uint64_t stored_size, uint64_t cap)
{
	return cap != 0 && (stored_size == 0 ? size > 0 : size / stored_size > cap);
}

/* *sum += v, unless the sum would pass 2^64 - 1: then 0, *sum left as it was. The
 * reader takes every sum of the sizes a bundle declares so and refuses one that
 * overflows (SPEC.md section 7): a wrapped sum is never used, nor told. */
static inline int
mc__sum_add(uint64_t *sum, uint64_t v)
{
	if (v > UINT64_MAX - *sum)
		return 0;
	*sum += v;
	return 1;
}

/* ---- the context: made and freed (context.c), its settings (settings.c) ---- */

/* The registry's records (tiers/tiers.h). */
struct mc_type;
struct mc_tier;

/* Every artifact looks its object up as the manifest is read: for a table kept in a
 * temp file, one read each (a third of the time of opening 20,000 artifacts). */
#define MC_OBJECTS_IN_MEMORY (4u << 20)

struct mc_ctx {
	char err[MC_ERRBUF];
	struct mc_type *types;  /* the registry of types and tiers (tiers/) */
	size_t ntypes;
	size_t nbuiltin;        /* the first nbuiltin types are the built-in ones */
	struct mc_tier *tiers;
	size_t ntiers;
	/* frees what the registry holds: the registry's own, set once it holds anything,
	 * for mc_ctx_free() (core/ does not call into tiers/ for it) */
	void (*free_registry)(mc_ctx *ctx);
	mc_progress_fn progress;
	void *progress_ud;
	uint64_t max_manifest;
	uint64_t max_artifacts;
	uint64_t max_artifact_bytes;
	uint64_t max_total_bytes;
	uint64_t max_expansion; /* 0: no cap */
	/* bytes of object records a manifest read through a temp file keeps in memory
	 * (MC_OBJECTS_IN_MEMORY; the tests lower it to reach the other way) */
	size_t objects_in_memory;
	/* set while a format version 2 index is parsed: the manifest's parser reads it
	 * (SPEC.md section 12.2), and its messages name the index (format/format.h) */
	int parsing_index;
	int triton_flat; /* the triton tier has no device level */
	unsigned roots_gen; /* changes with every tier root set: a bundle's plan depends on them */
	unsigned threads; /* worker threads; 0: one per online CPU; at most MC_MAX_THREADS run */
	long owner_uid, owner_gid; /* what a load gives the files it makes; -1: unchanged */
	struct mc_prof *prof; /* MEGACACHE_PROFILE: phase times (prof.c); NULL when off */
	/* mc_ctx_cancel()'s flag, and the flag checked: the context's own, which the
	 * copies the workers write their messages on point to as well */
	_Atomic int cancel_flag;
	_Atomic int *cancel;
	struct mc_regset *reg; /* registry settings and results (settings.c); NULL: none */
};

/* What mc_ctx_set_registry() set, and what the last push or read through a registry
 * resolved to (oci/ fills those in). */
struct mc_regset {
	char *ca;
	char *user;
	char *password;
	int plain_http;
	unsigned timeout; /* seconds; 0: the default */
	char digest[2][72]; /* manifest's, layer's; "" when none */
	uint64_t size;
};

/* Whether mc_ctx_cancel() was called on ctx (or the context it is a copy of). */
static inline int
mc__cancelled(const mc_ctx *ctx)
{
	return ctx->cancel != NULL && atomic_load_explicit(ctx->cancel, memory_order_relaxed);
}
/* ctx's registry settings, made on first use: NULL only when out of memory (said on
 * ctx). Only the context's owner thread calls it. */
MC_HIDDEN struct mc_regset *mc__regset(mc_ctx *ctx);
MC_HIDDEN void mc__regset_free(struct mc_regset *r);
/* MC_ERR_CANCELLED, said on ctx. */
MC_HIDDEN int mc__cancel_err(mc_ctx *ctx);
/* Tells the progress callback set on ctx, if any, how far phase has come. */
MC_HIDDEN void mc__progress(mc_ctx *ctx, const char *phase, uint64_t done, uint64_t total);
/* Sets libsodium up (once for the process): MC_OK, or MC_ERR_CRYPTO said on ctx. */
MC_HIDDEN int mc__crypto_init(mc_ctx *ctx);
/* The most worker threads: each holds a zstd window (4 MiB decoding a block, about
 * 5.4 MiB compressing one), and eight keep a load, a verify or a pack of any size under
 * 64 MiB. */
#define MC_MAX_THREADS 8
/* The number of worker threads an operation on ctx uses (at least 1): those set, or one
 * per online CPU, at most MC_MAX_THREADS either way. */
MC_HIDDEN unsigned mc__threads(const mc_ctx *ctx);

/* ---- the one call up: the built-in types (tiers/builtin.c) ----
 * mc_ctx_new() fills every new context with them; core/ names no other function of a
 * part above it (lib/README.md). */

/* Registers every built-in table of types on ctx, and records there how many types are
 * built in (ctx->nbuiltin). */
MC_HIDDEN int mc__register_builtin(mc_ctx *ctx);

/* ---- phase times, for MEGACACHE_PROFILE (prof.c) ---- */

MC_HIDDEN uint64_t mc__now_ns(void);
/* Turns the profile on when MEGACACHE_PROFILE is set (a non-empty value other than 0). */
MC_HIDDEN void mc__prof_init(mc_ctx *ctx);
/* Adds ns (and count things done) to phase, a string literal; any thread. */
MC_HIDDEN void mc__prof_add(mc_ctx *ctx, const char *phase, uint64_t ns, uint64_t count);
/* Adds the time since t to phase; returns now (0 when the profile is off). */
MC_HIDDEN uint64_t mc__prof_since(mc_ctx *ctx, const char *phase, uint64_t t, uint64_t count);
/* Writes the phases to stderr, one line, and ends the profile (mc_ctx_free()). */
MC_HIDDEN void mc__prof_report(mc_ctx *ctx);
/* The start of a phase for mc__prof_since(): now, or 0 when the profile is off. */
static inline uint64_t
mc__prof_start(const mc_ctx *ctx)
{
	return ctx->prof != NULL ? mc__now_ns() : 0;
}

/* ---- worker threads (parallel.c) ---- */

/* pthread_create() for the library's own threads: they block the asynchronous signals,
 * which go to the application's threads (a read those interrupt can then see
 * mc__cancelled()). */
MC_HIDDEN int mc__thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
/* One item of parallel work. worker: 0 is the calling thread (the only one that may
 * report progress); wctx: the context for its error message (ctx itself when there is
 * one worker, else the worker's own copy, valid during the run). */
typedef int (*mc_par_fn)(void *ud, unsigned worker, mc_ctx *wctx, size_t i);
/* Runs fn for i = 0..n-1 on up to nworkers threads, claiming items in order. After a
 * failure no further item starts; the result is that of the lowest item that failed,
 * its message on ctx. Once ctx is cancelled (mc_ctx_cancel()), the items not started
 * fail with MC_ERR_CANCELLED. */
MC_HIDDEN int mc__parallel(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud);
/* The same, never cancelled: work that, once begun, must end (a load's renames). */
MC_HIDDEN int mc__parallel_all(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud);
/* The same, the items claimed in the order given (a permutation of 0..n-1): after a
 * failure, the items below the lowest one that failed still run, the others do not
 * start; the result is the lowest one's, as in order. */
MC_HIDDEN int mc__parallel_in(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud,
			      const size_t *order);
/* The order of n items for mc__parallel_in(), the costliest first (ties in order):
 * *out, to free. */
MC_HIDDEN int mc__longest_first(mc_ctx *ctx, size_t n, uint64_t (*cost)(const void *ud, size_t k),
				const void *ud, size_t **out);

/* ---- pipes (pipe.c) ---- */

/* Pieces handed from the calling thread to one consumer thread, which calls fn
 * with each in order (wctx: the context for its error message), while the caller makes
 * the next; at most two are in flight. Where no thread starts, mc__pipe_put() calls fn
 * itself. */
struct mc_pipe;
typedef int (*mc_pipe_fn)(void *ud, mc_ctx *wctx, const void *buf, size_t n);
MC_HIDDEN int mc__pipe_start(mc_ctx *ctx, mc_pipe_fn fn, void *ud, struct mc_pipe **out);
/* The context fn's messages go to: for what fn uses that keeps one. */
MC_HIDDEN mc_ctx *mc__pipe_ctx(struct mc_pipe *p);
/* Hands over a copy of n bytes (a piece of none is handed over as one). After fn failed,
 * pieces are dropped: mc__pipe_end() tells. */
MC_HIDDEN int mc__pipe_put(struct mc_pipe *p, const void *buf, size_t n);
/* Waits for the pieces handed over, ends the thread and frees p; fn's first failure,
 * its message on the context given to mc__pipe_start(). */
MC_HIDDEN int mc__pipe_end(struct mc_pipe *p);

/* ---- text checks (escape.c) ---- */

/* The characters mc_escape() makes visible, and that a label value may not
 * hold (SPEC.md section 3.1); whether text of n bytes is UTF-8 without them (0), not
 * valid UTF-8 (-1), or holds one, *cp (1); tab_ok lets TAB through. */
MC_HIDDEN int mc__is_unsafe_cp(uint32_t cp);
MC_HIDDEN int mc__text_check(const char *text, size_t n, int tab_ok, uint32_t *cp);

/* ---- errors (error.c) ---- */

MC_HIDDEN int mc__err(mc_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
MC_HIDDEN int mc__errno(mc_ctx *ctx, int code, const char *what, const char *path);
/* Puts the text fmt makes and ": " before the message on ctx: code. */
MC_HIDDEN int mc__err_prefix(mc_ctx *ctx, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- memory (alloc.c) ---- */

/* Makes room in the array *pv (of *cap elements of size bytes) for need elements,
 * doubling *cap: MC_OK, or MC_ERR_NOMEM with the array as it was. */
MC_HIDDEN int mc__grow(void *pv, size_t *cap, size_t need, size_t size);
/* Frees the n strings of v, then v (NULL: nothing). */
MC_HIDDEN void mc__strv_free(char **v, size_t n);

/* ---- encodings (encode.c) ---- */

MC_HIDDEN void mc__hex(const unsigned char *in, size_t n, char *out);
/* out gets the n bytes that in spells: exactly 2n lower-case hex digits, else -1. */
MC_HIDDEN int mc__unhex(const char *in, unsigned char *out, size_t n);
MC_HIDDEN int mc__is_lower_hex(const char *s, size_t n);
/* torch's H(): lower-case RFC 4648 base32 of in, first 51 characters. out: 52 bytes. */
MC_HIDDEN void mc__torch_b32_51(const unsigned char sha256[32], char out[52]);
/* Whether the last component of path is mc__torch_b32_51 of sha256, as torch names an
 * FX graph or AOTAutograd entry. */
MC_HIDDEN int mc__torch_named_by(const char *path, const unsigned char sha256[32]);
MC_HIDDEN uint32_t mc__crc32(uint32_t crc, const void *buf, size_t n);
/* A GPU target as a bundle names one (SPEC.md section 12.6): "<backend>:<arch>", the
 * backend 1..32 of [a-z0-9_], the arch 1..64 of [A-Za-z0-9_.-] ("cuda:90", "hip:gfx942"). */
#define MC_GPU_TARGET_LEN 98 /* the longest, with its NUL */
MC_HIDDEN int mc__gpu_target_ok(const char *t);
MC_HIDDEN int mc__utf8_valid(const unsigned char *s, size_t n);
/* How many bytes from s a JSON string's scan passes: none is a quote or a backslash, or
 * below 0x20 when ctl is set. */
MC_HIDDEN size_t mc__json_plain(const unsigned char *s, size_t n, int ctl);
/* One UTF-8 sequence at s (n bytes left): its length, or 0 when it is not a valid,
 * shortest-form encoding of a scalar value. */
MC_HIDDEN size_t mc__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Inline: the object table's lookups compare hashes by their first eight bytes. */
static inline uint64_t
mc__be64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}
MC_HIDDEN void mc__put_be64(unsigned char *p, uint64_t v);
/* An object to sort by hash: its hash's first 8 bytes, big-endian (mc__be64), which decide
 * nearly always, and its place, which decides ties; mc__hashpref_cmp() orders them so
 * for qsort. */
struct mc_hashpref {
	uint64_t pref;
	uint32_t idx;
};
MC_HIDDEN int mc__hashpref_cmp(const void *x, const void *y);
MC_HIDDEN uint64_t mc__le64(const unsigned char *p);
MC_HIDDEN void mc__put_le64(unsigned char *p, uint64_t v);
MC_HIDDEN char *mc__strdup(const char *s);
/* v in decimal at out (at most 20 bytes, no NUL): how many bytes. */
MC_HIDDEN size_t mc__utoa(char *out, uint64_t v);
/* base64 (standard alphabet, padded); decode is strict: canonical input only. */
MC_HIDDEN char *mc__b64_encode(const unsigned char *in, size_t n);
MC_HIDDEN int mc__b64_decode(const char *in, size_t inlen, unsigned char *out, size_t outmax,
			     size_t *outlen);
/* The same for bulk data (cache contents): table lookups, fast, not constant time (never
 * for keys); the decoder takes the canonical padded form only. */
MC_HIDDEN char *mc__b64_encode_data(const unsigned char *in, size_t n, size_t *outlen);
/* The same into out, MC_B64_LEN(n) bytes (no NUL): that length. */
#define MC_B64_LEN(n) (((n) + 2) / 3 * 4)
MC_HIDDEN size_t mc__b64_encode_to(const unsigned char *in, size_t n, char *out);
MC_HIDDEN int mc__b64_decode_data(const char *in, size_t inlen, unsigned char *out,
				  size_t outmax, size_t *outlen);

/* ---- SHA-256 (sha256.c) ---- */

#define MC_SHA256_BYTES 32
/* A running SHA-256. Zero it before the first init; init may be called again to start
 * over (it keeps what it allocated), drop releases it. */
struct mc_sha256 {
#ifdef MC_WITH_OPENSSL
	struct evp_md_ctx_st *md;
#else
	crypto_hash_sha256_state st;
#endif
};
/* MC_OK, or MC_ERR_NOMEM (nothing to drop then). */
MC_HIDDEN int mc__sha256_init(struct mc_sha256 *s);
MC_HIDDEN void mc__sha256_update(struct mc_sha256 *s, const void *p, size_t n);
MC_HIDDEN void mc__sha256_final(struct mc_sha256 *s, unsigned char out[MC_SHA256_BYTES]);
MC_HIDDEN void mc__sha256_drop(struct mc_sha256 *s);
/* One buffer's: MC_OK or MC_ERR_NOMEM. */
MC_HIDDEN int mc__sha256(unsigned char out[MC_SHA256_BYTES], const void *p, size_t n);
/* "libcrypto" or "libsodium". */
MC_HIDDEN const char *mc__sha256_impl(void);

/* ---- content hashes (sha256.c) ---- */

/* The hash that names contents and authenticates stored bytes: BLAKE2b-256 in format
 * version 1, SHA-256 in version 2 (SPEC.md). Both are MC_HASH_BYTES long. */
#define MC_HALG_BLAKE2B 1
#define MC_HALG_SHA256 2
struct mc_chash {
	int alg;
	crypto_generichash_state b2;
	struct mc_sha256 sha;
};
/* Zero it before the first init, as struct mc_sha256. MC_OK or MC_ERR_NOMEM. */
MC_HIDDEN int mc__chash_init(struct mc_chash *h, int alg);
MC_HIDDEN void mc__chash_update(struct mc_chash *h, const void *p, size_t n);
MC_HIDDEN void mc__chash_final(struct mc_chash *h, unsigned char out[MC_HASH_BYTES]);
MC_HIDDEN void mc__chash_drop(struct mc_chash *h);
/* One buffer's: MC_OK or MC_ERR_NOMEM. */
MC_HIDDEN int mc__chash(int alg, unsigned char out[MC_HASH_BYTES], const void *p, size_t n);

/* ---- arenas (encode.c) ---- */

/* Strings that live as long as their owner, packed into large blocks: one malloc per
 * block instead of one per string. */
struct mc_arena {
	struct mc_ablock *head;
};
MC_HIDDEN void *mc__arena_dup(struct mc_arena *a, const void *p, size_t n);
MC_HIDDEN char *mc__arena_strdup(struct mc_arena *a, const char *s);
MC_HIDDEN void mc__arena_free(struct mc_arena *a);

#endif /* MC_CORE_H */
