/*
 * megacache.h - the public interface of libmegacache: record typed compile-cache
 * artifacts into one signed, compressed bundle, and verify and install them again.
 *
 * Conventions (every function follows them):
 *  - Fallible calls return an int status: MC_OK (0) or a negative MC_ERR_* code.
 *    The error text of the last failure is on the context: mc_ctx_error().
 *  - Handles are opaque and come in _new/_free (or _open/_free) pairs; every _free
 *    accepts NULL.
 *  - Strings returned by the library are owned by the handle they came from and stay
 *    valid until that handle is freed, unless a comment says otherwise. Callers never
 *    free() library memory.
 *  - The library never prints and never exits. It reads the environment only to resolve
 *    default tier roots (documented at mc_ctx_tier_root()) and to place temp files in
 *    $TMPDIR (documented at the calls that make them).
 *  - A context and everything made from it must be used from one thread at a time.
 *    Separate contexts are independent.
 */
#ifndef MEGACACHE_H
#define MEGACACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MC_BUILDING_LIBRARY) && defined(MC_HAVE_VISIBILITY)
#define MC_API __attribute__((visibility("default")))
#else
#define MC_API
#endif

#if defined(__GNUC__)
#define MC_MUST_CHECK __attribute__((warn_unused_result))
#else
#define MC_MUST_CHECK
#endif

#define MC_VERSION_STRING "0.1.0"
/* The bundle format version this library writes and reads (format/SPEC.md). */
#define MC_FORMAT_VERSION 2

/* Status codes. Append only: values never change meaning. */
enum {
	MC_OK = 0,
	MC_ERR_NOMEM = -1,         /* out of memory */
	MC_ERR_INVALID = -2,       /* bad argument or call order */
	MC_ERR_IO = -3,            /* a system call on a file failed */
	MC_ERR_NOT_BUNDLE = -4,    /* the file is not a megacache bundle at all */
	MC_ERR_MALFORMED = -5,     /* bundle structure broken: truncated, not canonical */
	MC_ERR_MANIFEST = -6,      /* the manifest is invalid */
	MC_ERR_INTEGRITY = -7,     /* an object's hash or size does not match the manifest */
	MC_ERR_NO_SIGNATURE = -8,  /* no signature by any trusted key */
	MC_ERR_BAD_SIGNATURE = -9, /* a signature by a trusted key id does not verify */
	MC_ERR_THRESHOLD = -10,    /* fewer valid trusted signatures than required */
	MC_ERR_EXPIRED = -11,      /* the bundle's expiry time has passed */
	MC_ERR_ROLLBACK = -12,     /* bundle version below the required minimum */
	MC_ERR_LIMIT = -13,        /* a size or count cap was exceeded */
	MC_ERR_UNKNOWN_TYPE = -14, /* an artifact type no handler is registered for */
	MC_ERR_BAD_KEY = -15,      /* an artifact key its handler refuses */
	MC_ERR_CONFLICT = -16,     /* two artifacts map to one destination */
	MC_ERR_UNSAFE_DEST = -17,  /* a destination is a symlink or not a directory */
	MC_ERR_KEYFILE = -18,      /* a key or signature file is malformed */
	MC_ERR_PASSWORD = -19,     /* wrong password for an encrypted secret key */
	MC_ERR_TORCH_FORMAT = -20, /* a torch cache blob is malformed */
	MC_ERR_CRYPTO = -21,       /* the crypto library could not start */
	MC_ERR_EXISTS = -22,       /* an output file exists and overwriting was not asked */
	MC_ERR_LABEL = -23,        /* a label the caller requires is missing or differs */
	MC_ERR_REMOTE = -24,       /* a remote store (Redis) could not be reached or failed */
	MC_ERR_UNSUPPORTED = -25,  /* this build lacks what the call needs (Redis support) */
	MC_ERR_UNSUPPORTED_VERSION = -26, /* the bundle's format version is newer than this
					   * library reads: upgrade megacache */
	MC_ERR_GPU_MISMATCH = -27, /* the bundle holds kernels for a GPU the host lacks */
	MC_ERR_CANCELLED = -28,    /* mc_ctx_cancel() stopped the operation */
	MC_ERR_DIGEST_MISMATCH = -29, /* a registry's blob or manifest is not the digest or
					 size it was named by */
	MC_ERR_NOT_SEEN = -30      /* a bundle of what a job used would have to leave out
				    * files whose reads could not be seen */
};

/* The version of the library in use, MC_VERSION_STRING as it was built: a binding
 * loaded at run time compares it with the one it was written for. Static storage. */
MC_API const char *mc_version(void);

/* A fixed English description of a status code. Never NULL; static storage. */
MC_API const char *mc_strerror(int status);

/* A stable snake_case name of a status code, for programs to act on (the "error" of the
 * tool's --json; the text of mc_strerror may change): "ok", "nomem", "invalid", "io",
 * "not_bundle", "malformed" (truncated too), "manifest", "integrity",
 * "untrusted_signature" (MC_ERR_NO_SIGNATURE), "bad_signature", "threshold", "expired",
 * "rollback", "limit", "unknown_type", "bad_key", "conflict", "unsafe_destination",
 * "keyfile", "password", "torch_format", "crypto", "exists", "label", "remote",
 * "unsupported", "unsupported_version", "gpu_mismatch", "cancelled", "digest_mismatch";
 * "unknown" for a
 * code not listed. Never NULL; static storage. */
MC_API const char *mc_status_code(int status);

/* 1 when status means "this bundle must not be trusted" (signature, integrity,
 * structure, policy), 0 for usage, system and resource errors. */
MC_API int mc_status_is_verification_failure(int status);

/* ------------------------------------------------------------------------- */
/* Context: type registry, tier roots, limits, progress, error text.          */

typedef struct mc_ctx mc_ctx;

/* Writes src into dst with every character a terminal or a log could take as a
 * command or a line break made visible: C0 controls, DEL and bytes that are not valid
 * UTF-8 as \xNN; C1 controls, the bidirectional formatting controls (U+061C, U+200E,
 * U+200F, U+202A-U+202E, U+2066-U+2069) and U+2028, U+2029 as \uNNNN. A backslash is
 * left as it is, so escaping twice changes nothing. With MC_ESCAPE_JSON, src is JSON
 * text: every such character but the whitespace between tokens (tab, LF, CR) becomes
 * \uNNNN and an invalid byte \ufffd, which keeps it valid JSON. dst (dstlen bytes,
 * caller-owned) is always NUL-terminated when dstlen > 0, and cut only between whole
 * characters or escapes; returns the length the whole result needs, as snprintf does. The library's error texts are escaped already. */
#define MC_ESCAPE_JSON 1u
MC_API size_t mc_escape(char *dst, size_t dstlen, const char *src, unsigned flags);

/* Creates a context with the built-in torch handlers registered. */
MC_API MC_MUST_CHECK int mc_ctx_new(mc_ctx **out);
MC_API void mc_ctx_free(mc_ctx *ctx);

/* Text of the last error on this context ("" if none). Owned by ctx; valid until the
 * next failing call on ctx or anything made from it. */
MC_API const char *mc_ctx_error(const mc_ctx *ctx);

/* Sets the root folder of a tier ("inductor", or a tier named by a registered type).
 * The folder need not exist yet. */
MC_API MC_MUST_CHECK int mc_ctx_set_tier_root(mc_ctx *ctx, const char *tier, const char *path);

/* The root folder of a tier: the one set, else the default, resolved as torch and
 * Triton resolve it. Tier "inductor": $TORCHINDUCTOR_CACHE_DIR, else
 * <tmp>/torchinductor_<user>. <tmp> follows Python's tempfile.gettempdir(): the first
 * of $TMPDIR, $TEMP, $TMP (where set and not empty), /tmp, /var/tmp, /usr/tmp and the
 * working folder that a file can be created in. <user> is the first non-empty of
 * $LOGNAME, $USER, $LNAME, $USERNAME, else the password database's name, with each of
 * \ / : * ? " < > | replaced by _. Tier "triton": $TRITON_CACHE_DIR (kernels directly
 * in it), else <inductor root>/triton (kernels in <inductor root>/triton/<device>, a
 * folder per device index); a triton root set with mc_ctx_set_tier_root() is taken to
 * have no device level, like $TRITON_CACHE_DIR. Tier "triton_home" (Triton's own
 * cache): $TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache, TRITON_HOME falling back
 * to $HOME (else the password database's home folder). A variable torch or Triton
 * would fail on (set but empty; for Triton's, starting with white space), or a home
 * folder that is not absolute, is an error. Tier "vllm" (vLLM's cache): $VLLM_CACHE_ROOT,
 * else $XDG_CACHE_HOME/vllm, else ~/.cache/vllm, a leading ~ expanded as Python's
 * os.path.expanduser() does; empty, starting with white space or not absolute after
 * that, an error. Other tiers have no default. *path is owned by ctx. */
MC_API MC_MUST_CHECK int mc_ctx_tier_root(mc_ctx *ctx, const char *tier, const char **path);

/* Handler callbacks of an artifact type.
 * key_check: return MC_OK if key is valid for the type, else MC_ERR_BAD_KEY and write a
 *   short reason into why (NUL-terminated, at most whylen bytes).
 * dest_path: write the destination path relative to the tier root into buf (at most
 *   buflen bytes with the NUL). sha256 is the SHA-256 of the content when the type was
 *   registered with MC_TYPE_WANTS_SHA256, else NULL. Components are separated by '/';
 *   the library refuses absolute paths, empty components, "." and "..". */
typedef int (*mc_key_check_fn)(void *ud, const char *key, char *why, size_t whylen);
typedef int (*mc_dest_path_fn)(void *ud, const char *key, const unsigned char *sha256,
			       char *buf, size_t buflen);

#define MC_TYPE_WANTS_SHA256 0x1u
/* The artifacts of the type that share a destination folder are installed together:
 * staged in a temp folder renamed into place, or, when the folder exists already,
 * completed file by file (a complete identical folder is left alone). */
#define MC_TYPE_FOLDER_UNIT 0x2u

/* Registers an artifact type. The type name is 1..32 characters of [a-z0-9_]; a name
 * may be registered once. ud is passed to the callbacks and is not owned. */
MC_API MC_MUST_CHECK int mc_ctx_register_type(mc_ctx *ctx, const char *type, const char *tier,
					      unsigned flags, mc_key_check_fn key_check,
					      mc_dest_path_fn dest_path, void *ud);

/* The tier a registered type installs into, or NULL for an unknown type. Owned by ctx. */
MC_API const char *mc_ctx_type_tier(const mc_ctx *ctx, const char *type);

/* The name of the i-th registered type (0, 1, ... in the order registered: the built-in
 * torch and Triton types first), or NULL past the last. Owned by ctx. Lists the types
 * a --types option may name. */
MC_API const char *mc_ctx_type_name(const mc_ctx *ctx, size_t i);

/* Progress of long operations: phase is a short word ("pack", "verify", "push",
 * "pull"), done and total are bytes of artifact content; a load's "verify" is followed
 * by "install", the putting in place of what it staged, whose done and total count
 * files and folders. Called from the calling thread. */
typedef void (*mc_progress_fn)(void *ud, const char *phase, uint64_t done, uint64_t total);
MC_API void mc_ctx_set_progress(mc_ctx *ctx, mc_progress_fn fn, void *ud);

/* Caps applied when reading bundles and torch blobs (defaults in format/SPEC.md). */
enum {
	MC_LIMIT_MANIFEST_BYTES = 1, /* default 64 MiB */
	MC_LIMIT_ARTIFACTS = 2,      /* default 1,000,000 */
	MC_LIMIT_ARTIFACT_BYTES = 3, /* default 8 GiB - 1 */
	MC_LIMIT_TOTAL_BYTES = 4,    /* default 256 GiB */
	MC_LIMIT_EXPANSION = 5       /* content size / stored size of a compressed object;
					default 4096; 0 turns the check off */
};
/* Sets a cap; 0 is refused except for MC_LIMIT_EXPANSION. */
MC_API MC_MUST_CHECK int mc_ctx_set_limit(mc_ctx *ctx, int which, uint64_t value);

/* Worker threads for packing, verifying and loading: 0 (the default) uses one per
 * online CPU; 1 keeps all work on the calling thread. More than 8 are taken as 8 (each
 * holds a zstd window of 4 MiB). The output of pack does not depend on it. */
MC_API MC_MUST_CHECK int mc_ctx_set_threads(mc_ctx *ctx, unsigned n);

/* The owner mc_bundle_load() gives every file and folder it creates, the folders it
 * makes on the way to a tier root included (an image built as root for another user):
 * a file is given it before it takes its final name, a folder as soon as it is made.
 * Files and folders that were there already keep theirs. uid and gid are numbers; -1
 * leaves that one as the process makes it, and (-1, -1), the default, changes
 * nothing. A load then also takes a folder beneath a root that belongs to uid (one an
 * earlier load gave it) where it takes only the caller's or root's. Refused unless
 * the process runs as root (effective uid 0), and for a number above 2^32 - 2. */
MC_API MC_MUST_CHECK int mc_ctx_set_owner(mc_ctx *ctx, long uid, long gid);

/* ---- OCI registries ----
 *
 * A bundle reference "oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]" (no tag and no digest:
 * "latest") names a bundle stored in a registry as an OCI artifact: an image manifest
 * whose one layer is the bundle's bytes (doc/registries.md). mc_bundle_open() reads one
 * in order, as from a pipe, checking the registry's digests as it streams;
 * mc_writer_save() and mc_bundle_add_signature() push to one. Registry support loads
 * libcurl when the first reference is used: MC_ERR_UNSUPPORTED when it cannot, or when
 * the library was built without it. */

/* 1 when s is a registry reference (begins with "oci://"), else 0. */
MC_API int mc_is_reference(const char *s);
/* 1 when references can be used: the library was built with registry support and
 * libcurl can be loaded; else 0. */
MC_API int mc_registry_supported(void);

/* The registry settings of mc_ctx_set_registry(). */
enum {
	MC_REGISTRY_CA = 0,         /* a PEM file of CAs to trust instead of the system's */
	MC_REGISTRY_PLAIN_HTTP = 1, /* "1": plain HTTP to any registry; "0" (the default):
				       only to localhost, 127.0.0.0/8 and ::1 */
	MC_REGISTRY_USER = 2,       /* user name, with MC_REGISTRY_PASSWORD */
	MC_REGISTRY_PASSWORD = 3,   /* password or token (wiped from memory when replaced) */
	MC_REGISTRY_TIMEOUT = 4     /* seconds without data, or to connect (default 30) */
};
/* Sets one; NULL clears it. Without a user and password, credentials come from the
 * auth files podman and docker write (doc/registries.md). */
MC_API MC_MUST_CHECK int mc_ctx_set_registry(mc_ctx *ctx, int which, const char *value);

/* Copies the bundle at src to dst, its bytes unchanged, between files and references
 * (not "-"). The bundle's signatures are not checked; its first bytes must be a
 * bundle's, and the registry's digests are checked. A file is written whole or not at
 * all. */
MC_API MC_MUST_CHECK int mc_copy(mc_ctx *ctx, const char *src, const char *dst);

/* The last push to, or read from, a registry through ctx: the manifest's digest
 * (which 0) or the layer's (which 1), "sha256:<hex>", or NULL when there was none;
 * valid until the next. mc_copy() between files sets the layer's (both the same). */
MC_API const char *mc_ctx_registry_digest(const mc_ctx *ctx, int which);
/* The size in bytes of that layer. */
MC_API uint64_t mc_ctx_registry_size(const mc_ctx *ctx);

/* Asks the operations on ctx (and on what was made from it) to stop: one running, or
 * started later, returns MC_ERR_CANCELLED soon, having undone what it began as after
 * any failure: a load removes what it staged, a bundle or file being written is never
 * put in place, its temp file removed. A read waiting on a pipe stops when a signal
 * interrupts it (a handler installed without SA_RESTART). It stays asked. Safe from
 * any thread and from a signal handler: it only sets a flag. The library installs no
 * signal handler; its own worker threads block the asynchronous signals, so that a
 * signal reaches the application's threads. */
MC_API void mc_ctx_cancel(mc_ctx *ctx);

/* ------------------------------------------------------------------------- */
/* Keys, in minisign's formats.                                               */

typedef struct mc_pubkey mc_pubkey;
typedef struct mc_seckey mc_seckey;

/* Asks for the password of an encrypted secret key. Write at most buflen-1 bytes and
 * a NUL into buf; return MC_OK, or an error to give up (buf is then wiped, never shown:
 * a caller that wants to say why keeps the reason itself). */
typedef int (*mc_password_fn)(void *ud, const char *prompt, char *buf, size_t buflen);

/* Makes a new key pair. */
MC_API MC_MUST_CHECK int mc_keygen(mc_ctx *ctx, mc_seckey **sk, mc_pubkey **pk);
/* Writes a key pair: the public key to pub_path, the secret key to sec_path (mode
 * 0600), encrypted with password unless password is NULL. Refuses to replace existing
 * files unless overwrite is nonzero. */
MC_API MC_MUST_CHECK int mc_keypair_save(mc_ctx *ctx, const mc_seckey *sk, const mc_pubkey *pk,
					 const char *pub_path, const char *sec_path,
					 const char *password, int overwrite);
/* Reads a public key file; or, when the argument is one and no file has that name, a
 * bare base64 public key ("RW...") or a public key file's whole text (its "untrusted
 * comment:" line, a line end, the key: what -p "$(cat ci.pub)" passes). */
MC_API MC_MUST_CHECK int mc_pubkey_load(mc_ctx *ctx, const char *path_or_base64, mc_pubkey **out);
/* Reads a secret key file; pw is called only when the key is encrypted. */
MC_API MC_MUST_CHECK int mc_seckey_load(mc_ctx *ctx, const char *path, mc_password_fn pw,
					void *pw_ud, mc_seckey **out);
/* The same from text instead of a file: the contents of a public key file, or a bare
 * base64 public key (56 characters "RW...", a line end after it allowed); the contents
 * of a secret key file. Messages name them "public key text" and "secret key text".
 * The text stays the caller's; the copies of secret bytes made from it are wiped. */
MC_API MC_MUST_CHECK int mc_pubkey_from_text(mc_ctx *ctx, const char *text, mc_pubkey **out);
MC_API MC_MUST_CHECK int mc_seckey_from_text(mc_ctx *ctx, const char *text, mc_password_fn pw,
					     void *pw_ud, mc_seckey **out);
MC_API void mc_pubkey_free(mc_pubkey *pk);
MC_API void mc_seckey_free(mc_seckey *sk);
/* The key id as minisign prints it: 16 upper-case hex digits. Owned by the key. */
MC_API const char *mc_pubkey_id(const mc_pubkey *pk);
MC_API const char *mc_seckey_id(const mc_seckey *sk);
/* 1 when a and b are the same Ed25519 public key, whatever key ids they carry: the
 * trust policy counts such keys as one signer (mc_bundle_set_threshold()). */
MC_API int mc_pubkey_equal(const mc_pubkey *a, const mc_pubkey *b);

/* ------------------------------------------------------------------------- */
/* Writing bundles.                                                           */

typedef struct mc_writer mc_writer;
typedef struct mc_bundle mc_bundle; /* an opened bundle: see below */

MC_API MC_MUST_CHECK int mc_writer_new(mc_ctx *ctx, mc_writer **out);
MC_API void mc_writer_free(mc_writer *w);

/* Records an artifact whose content is in memory; the bytes are copied. It is not
 * executable. */
MC_API MC_MUST_CHECK int mc_writer_add_memory(mc_writer *w, const char *type, const char *key,
					      const void *data, size_t len);
/* Records an artifact whose content is a file. The file is read twice (hashing now,
 * copying at save) and never held in memory; a change in between fails the save. The
 * artifact is executable when the file has the owner's execute bit (S_IXUSR) now; no
 * other bit of its mode is kept. The scans below and mc_writer_add_bundle() keep the
 * bit too; torch blobs hold none. */
MC_API MC_MUST_CHECK int mc_writer_add_file(mc_writer *w, const char *type, const char *key,
					    const char *path);
/* Records every artifact of a torch blob (torch.compiler.save_cache_artifacts()). */
MC_API MC_MUST_CHECK int mc_writer_add_torch_blob(mc_writer *w, const char *path);
/* The same for a blob of len bytes in memory (the bytes torch.compiler.
 * save_cache_artifacts() returns); the bytes are copied, data may be freed on return.
 * It records what the file would: the same artifacts, groups and labels. Messages name
 * it "torch blob in memory". */
MC_API MC_MUST_CHECK int mc_writer_add_torch_blob_memory(mc_writer *w, const void *data,
							 size_t len);

/* What a cache-dir scan did with one file: recorded as an artifact, or skipped. */
enum { MC_SCAN_RECORDED = 0, MC_SCAN_SKIPPED = 1 };
typedef void (*mc_scan_fn)(void *ud, int what, const char *relpath, const char *type_or_reason);
/* Scans a torch cache dir (an inductor root) and records the artifacts found in it:
 * types inductor, aot_autograd, autotune, pgo, precompile, kernel_code (the generated
 * code of the <2 chars>/ folders), gemm_timing (cache/) and triton (triton/<device>/).
 * Locks and temp files are skipped; other files are skipped too, or recorded as type
 * "extra" (their relative path as key) after mc_writer_set_keep_unknown(w, 1).
 * fn (may be NULL) is told about each file. An fxgraph/ or aotautograd/ file must be
 * named after its content's hash (torch names them so); in bundle format 2 its content
 * is read only once, at mc_writer_save(), which checks the name then: a file that fails
 * it is taken back (or kept as "extra"), and fn, which must stay valid until the save,
 * is told a second time (of the last cache dir scanned). A save left with no artifact
 * that way fails (MC_ERR_INVALID) and writes nothing. */
MC_API MC_MUST_CHECK int mc_writer_add_cache_dir(mc_writer *w, const char *dir, mc_scan_fn fn,
						 void *ud);
/* Scans a Triton cache with no device level ($TRITON_CACHE_DIR): <kernel hash>/<files>,
 * recorded as type triton for device 0. */
MC_API MC_MUST_CHECK int mc_writer_add_triton_dir(mc_writer *w, const char *dir, mc_scan_fn fn,
						  void *ud);
/* Scans Triton's own cache ($TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache: user
 * kernels and launcher helpers): <kernel hash>/<files>, recorded as type triton_home,
 * which loads back into that tier's root. */
MC_API MC_MUST_CHECK int mc_writer_add_triton_cache(mc_writer *w, const char *dir, mc_scan_fn fn,
						    void *ud);
/* Scans vLLM's cache root ($VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else
 * ~/.cache/vllm): its notes, index files, compiled artifacts and ahead-of-time
 * compiles, recorded as types vllm_meta, vllm_handles, vllm_artifact and vllm_aot, and
 * the torch and Triton caches of each rank that vLLM's older adaptor keeps
 * (inductor_cache/, triton_cache/) as vllm_inductor (their paths beneath the root as
 * keys), which load back into tier vllm's root.
 * Other files are skipped, or recorded as type "vllm_extra" after
 * mc_writer_set_keep_unknown(w, 1). It sets labels of what the cache was made for:
 * vllm.config_hash, vllm.code_hash and vllm.compiler_hash from each model's
 * cache_key_factors.json (its string members of those names), vllm.torch_key from each
 * binary artifact (the torch build's key, 64 lower-case hex). Where files differ (several
 * models or torch builds in one root, or several roots scanned), a label holds the
 * distinct values sorted and joined with ',' (as many as fit in a label). A file that
 * does not parse sets none and fails nothing. A label set by mc_writer_set_label(),
 * before or after the scan, is kept as set. */
MC_API MC_MUST_CHECK int mc_writer_add_vllm_dir(mc_writer *w, const char *dir, mc_scan_fn fn,
						void *ud);
MC_API MC_MUST_CHECK int mc_writer_set_keep_unknown(mc_writer *w, int keep);

/* Records every artifact and label of an opened bundle (merging bundles). The bundle
 * is read through once, checked by its policy (set trust or insecure on it first);
 * contents are parked in a temp folder made in spool_dir and removed by
 * mc_writer_free(). A (type, key) recorded again replaces the earlier one (see
 * mc_writer_set_conflict_fn); a label set again takes the new value. */
MC_API MC_MUST_CHECK int mc_writer_add_bundle(mc_writer *w, mc_bundle *b, const char *spool_dir);
/* Called at save for each (type, key) that was recorded more than once with different
 * contents; the one recorded last is kept. A torch blob that records a key again (torch
 * records a PGO state each time it writes it) counts as its last record: its earlier
 * ones are in conflict with nothing. */
typedef void (*mc_conflict_fn)(void *ud, const char *type, const char *key);
MC_API void mc_writer_set_conflict_fn(mc_writer *w, mc_conflict_fn fn, void *ud);

/* Bundle-level fields. Label keys are 1..64 characters of [A-Za-z0-9_.-]; values are
 * UTF-8 without control characters (C0, DEL, C1, the bidirectional controls, U+2028,
 * U+2029: SPEC.md section 3.1), at most 1024 bytes. Setting a key again replaces it; a
 * label set here is kept over what a scan finds (mc_writer_add_vllm_dir()). */
MC_API MC_MUST_CHECK int mc_writer_set_label(mc_writer *w, const char *key, const char *value);
MC_API MC_MUST_CHECK int mc_writer_set_bundle_version(mc_writer *w, uint64_t version);
/* Unix time after which readers refuse the bundle; 0 (the default) means never. */
MC_API MC_MUST_CHECK int mc_writer_set_expires(mc_writer *w, int64_t unix_time);
/* Creation time recorded in the manifest; default 0. Callers wanting reproducible
 * bundles pass SOURCE_DATE_EPOCH here. */
MC_API MC_MUST_CHECK int mc_writer_set_created(mc_writer *w, int64_t unix_time);
/* zstd level 1..19, or 0 for an uncompressed tar. Default 3. */
MC_API MC_MUST_CHECK int mc_writer_set_compression(mc_writer *w, int level);
/* The bundle format version written: MC_FORMAT_VERSION (the default) or 1, for readers
 * that read only version 1 (format/SPEC.md). Before anything is added: MC_ERR_INVALID
 * after. */
MC_API MC_MUST_CHECK int mc_writer_set_format_version(mc_writer *w, int version);
/* Signs the manifest with sk at save. May be called for several keys. sk is borrowed
 * and must outlive the save. */
MC_API MC_MUST_CHECK int mc_writer_add_signer(mc_writer *w, const mc_seckey *sk);
/* Writes the bundle: to a temp file beside path, renamed over path when complete. */
MC_API MC_MUST_CHECK int mc_writer_save(mc_writer *w, const char *path);
/* Writes the bundle in order to fd (a pipe, standard output), which stays the caller's;
 * the spool files of compressed objects are made in $TMPDIR (or /tmp). name is used in
 * messages. On failure what was written is a cut bundle, which readers refuse. */
MC_API MC_MUST_CHECK int mc_writer_save_fd(mc_writer *w, int fd, const char *name);
/* Number of artifacts recorded and their total content bytes. */
MC_API size_t mc_writer_artifact_count(const mc_writer *w);
MC_API uint64_t mc_writer_total_bytes(const mc_writer *w);
/* What the last successful save wrote (0 before one): the artifacts, one per (type,
 * key), and their content bytes. Fewer than recorded when a (type, key) was recorded
 * again (the last kept) or a graph file was taken back at the save. */
MC_API size_t mc_writer_saved_count(const mc_writer *w);
MC_API uint64_t mc_writer_saved_bytes(const mc_writer *w);

/* ------------------------------------------------------------------------- */
/* Reading, verifying and loading bundles.                                    */

/* Opens a bundle and reads its manifest and signatures (not its objects). The
 * manifest is parsed and checked; nothing is trusted until mc_bundle_verify() or
 * mc_bundle_load() succeeded. A manifest of more than 1 MiB is copied as it is read
 * to a nameless temp file in $TMPDIR (or /tmp) and parsed from there in windows; unless
 * the context has one thread, a second thread meanwhile hashes it for the signatures. */
MC_API MC_MUST_CHECK int mc_bundle_open(mc_ctx *ctx, const char *path, mc_bundle **out);
/* The same for a bundle read from fd (a pipe, a socket, a file), which stays the
 * caller's: the bundle reads a duplicate of it. path may also name a FIFO or a pipe
 * (/dev/stdin, /dev/fd/N). Such a bundle is read in order, once, on one thread: it
 * can be verified, loaded or exported once (mc_bundle_verify(), mc_bundle_load(),
 * mc_bundle_export_torch*(), mc_writer_add_bundle()); a second pass, or a call that
 * needs one (mc_bundle_add_signature()), fails with MC_ERR_INVALID. Loading from it
 * keeps every promise of loading from a file: nothing is installed unless the whole
 * stream verified, and memory does not grow with the bundle. name is used in messages.
 * A terminal is refused (MC_ERR_INVALID). A regular file read from its start is read as
 * mc_bundle_open() reads it. */
MC_API MC_MUST_CHECK int mc_bundle_open_fd(mc_ctx *ctx, int fd, const char *name,
					   mc_bundle **out);
MC_API void mc_bundle_free(mc_bundle *b);

/* Trust policy. A signature counts when its key is trusted and it verifies; each
 * trusted public key counts once, however many key ids it is given under. Threshold
 * defaults to 1. */
MC_API MC_MUST_CHECK int mc_bundle_trust(mc_bundle *b, const mc_pubkey *pk);
MC_API MC_MUST_CHECK int mc_bundle_set_threshold(mc_bundle *b, unsigned k);
MC_API MC_MUST_CHECK int mc_bundle_set_min_version(mc_bundle *b, uint64_t min_version);
/* The time used for the expiry check; default: the clock at the check. */
MC_API MC_MUST_CHECK int mc_bundle_set_now(mc_bundle *b, int64_t unix_time);
/* Requires label key to have value (checked with the policy, after the signatures).
 * Call once per label. */
MC_API MC_MUST_CHECK int mc_bundle_require_label(mc_bundle *b, const char *key, const char *value);
/* Skips signature and policy checks (integrity is always checked). */
MC_API MC_MUST_CHECK int mc_bundle_set_insecure(mc_bundle *b, int insecure);

/* Checks signatures and policy only (reads no object). */
MC_API MC_MUST_CHECK int mc_bundle_check_signatures(mc_bundle *b);
/* Checks signatures, policy, and every byte of the bundle; writes nothing. */
MC_API MC_MUST_CHECK int mc_bundle_verify(mc_bundle *b);

/* Manifest contents. Strings are owned by b. */
MC_API int64_t mc_bundle_created(const mc_bundle *b);
/* The bundle's format version (1 or 2). */
MC_API int mc_bundle_format_version(const mc_bundle *b);
/* Reads the bundle's tables (artifacts, objects) now if they are not read yet: in format
 * version 2 a bundle read from a pipe reads them at the first call that needs them,
 * after the signatures were checked (mc_bundle_check_signatures(), a load), so that an
 * untrusted stream is refused having been read only up to its signatures. Then
 * mc_bundle_artifact_count(), which cannot report an error, gives 0 if they are
 * unreadable: call this first to tell. A bundle from a file must also hold every member
 * its tables declare: one cut short fails (MC_ERR_MALFORMED, "truncated at byte N of a
 * bundle that declares M bytes"), whose contents were not read. MC_OK or the error
 * (kept). */
MC_API MC_MUST_CHECK int mc_bundle_read_tables(mc_bundle *b);
MC_API uint64_t mc_bundle_version(const mc_bundle *b);
MC_API int64_t mc_bundle_expires(const mc_bundle *b);
MC_API size_t mc_bundle_label_count(const mc_bundle *b);
MC_API MC_MUST_CHECK int mc_bundle_label(const mc_bundle *b, size_t i, const char **key,
					 const char **value);
MC_API size_t mc_bundle_signature_count(const mc_bundle *b);
/* Key id of signature i (16 hex digits). */
MC_API const char *mc_bundle_signature_key_id(const mc_bundle *b, size_t i);
/* What is known of a signature, judged against the keys given with mc_bundle_trust(). */
enum mc_sig_state {
	MC_SIG_NOT_CHECKED = 0, /* its key is not trusted here (or mc_bundle_set_insecure()):
				 * it cannot be checked, and vouches for nothing */
	MC_SIG_VERIFIED = 1,    /* by a trusted key, and it verifies */
	MC_SIG_BROKEN = 2       /* its key id is a trusted key's, and it does not verify: the
				 * manifest was changed after signing, or the key id forged */
};
/* The state of signature i (enum mc_sig_state), checked now; needs no earlier check, so a
 * bundle that fails its policy can still tell which signature is which. Reads nothing
 * beyond the manifest. MC_ERR_INVALID for no such signature. */
MC_API int mc_bundle_signature_state(const mc_bundle *b, size_t i);
/* "verified", "not_checked" or "broken" (the tool's --json); "unknown" for another
 * value. Static storage. */
MC_API const char *mc_sig_state_name(int state);
MC_API size_t mc_bundle_artifact_count(const mc_bundle *b);
/* hash is the content's hash in lower-case hex: its SHA-256 in bundle format 2, its
 * BLAKE2b-256 in format 1 (mc_bundle_format_version()). hash and key are held in b
 * until the next call of mc_bundle_artifact() on b (a large bundle's table is read
 * from a temp file, not held); type is held until mc_bundle_free(). */
MC_API MC_MUST_CHECK int mc_bundle_artifact(const mc_bundle *b, size_t i, const char **type,
					    const char **key, uint64_t *size, const char **hash);
/* Whether artifact i is installed executable (SPEC.md section 3.2): 1 when the file it
 * was recorded from had the owner's execute bit (load creates it with mode 0777 less
 * the umask), 0 when not (0666 less the umask); or a negative error, MC_ERR_INVALID
 * for an i out of range. Leaves what mc_bundle_artifact() gave valid. */
MC_API MC_MUST_CHECK int mc_bundle_artifact_executable(const mc_bundle *b, size_t i);
/* The index of the artifact of this type and key in *index; MC_ERR_INVALID when the
 * bundle has none. Quick when asked in (type, key) order, as load reports; a binary
 * search otherwise. Leaves what mc_bundle_artifact() gave valid. */
MC_API MC_MUST_CHECK int mc_bundle_find_artifact(const mc_bundle *b, const char *type,
						 const char *key, size_t *index);

/* GPU targets, written as Triton names the target a kernel is compiled for:
 * "<backend>:<arch>", e.g. "cuda:90" (compute capability 9.0), "hip:gfx942". */
#define MC_GPU_TARGET_MAX 97 /* the longest, in bytes */
/* 1 when target has that form (backend 1..32 of [a-z0-9_], arch 1..64 of [A-Za-z0-9_.-]). */
MC_API int mc_gpu_target_ok(const char *target);
/* This host's GPU targets, sorted and distinct: "cuda:<major * 10 + minor>" for each
 * NVIDIA device that the driver's NVML reports (libnvidia-ml.so.1, loaded at run time:
 * none when it is missing), "hip:<gfx name>" for each AMD GPU in the KFD topology
 * (/sys/class/kfd). *n is 0 when no GPU is seen. Free *targets with
 * mc_gpu_targets_free(). */
MC_API MC_MUST_CHECK int mc_gpu_detect(mc_ctx *ctx, char ***targets, size_t *n);
MC_API void mc_gpu_targets_free(char **targets, size_t n);
/* The targets of the bundle's Triton kernels (their metadata's "target"), sorted: the
 * ones its manifest records (format version 2: mc_bundle_gpu_targets_known() gives
 * MC_GPU_RECORDED), or else, once a verify or load has read every content, the ones
 * its kernels name (MC_GPU_DERIVED); before that none (MC_GPU_UNKNOWN). A bundle with
 * no kernel naming a target records none. The string is held until mc_bundle_free(). */
/* MC_GPU_RECORDED also for a bundle that holds no kernel metadata file (none to record). */
enum { MC_GPU_UNKNOWN = 0, MC_GPU_RECORDED = 1, MC_GPU_DERIVED = 2 };
MC_API int mc_bundle_gpu_targets_known(const mc_bundle *b);
MC_API size_t mc_bundle_gpu_target_count(const mc_bundle *b);
MC_API const char *mc_bundle_gpu_target(const mc_bundle *b, size_t i);
/* The GPU targets mc_bundle_load() takes the host to have (replacing any set before;
 * mc_gpu_detect() finds them). A load then refuses, with MC_ERR_GPU_MISMATCH and
 * nothing installed, a bundle holding a kernel for a target not among them, or with
 * MC_LOAD_SKIP_OTHER_GPUS leaves out each such kernel's folder. n = 0 or no call:
 * kernels are not checked. */
MC_API MC_MUST_CHECK int mc_bundle_set_host_gpus(mc_bundle *b, const char *const *targets,
						 size_t n);
/* The same targets from fn, which mc_bundle_load() calls on the calling thread when it
 * needs them: for a bundle read from a file, once its pass is over (a load's has staged
 * every file, none renamed into place yet; a dry run's has verified); from a pipe,
 * after the plan and before anything is staged. A detection still running
 * (mc_gpu_detect() takes about 0.1 s on a GPU host, NVML's start) then goes on beside
 * the load's work, fn waiting for its end. The targets the manifest records are
 * checked then: a bundle refused is refused with nothing installed, its staged files
 * removed. fn sets *targets and *n, an array and strings that stay valid after it
 * returns, until mc_bundle_load() does (the load copies them), and returns MC_OK; or an
 * error code, with its message on the bundle's context or not, which the load returns
 * with nothing installed. Once it gave targets they replace fn; a load that failed
 * before asking, or whose fn failed, leaves fn to ask the next load. Replaces
 * mc_bundle_set_host_gpus() and is replaced by it; fn = NULL: kernels are not
 * checked. */
typedef int (*mc_host_gpus_fn)(void *ud, const char *const **targets, size_t *n);
MC_API MC_MUST_CHECK int mc_bundle_set_host_gpus_fn(mc_bundle *b, mc_host_gpus_fn fn,
						    void *ud);
/* After a load (dry or not) with MC_LOAD_SKIP_OTHER_GPUS: how many kernels (folders) it
 * left out. */
MC_API size_t mc_bundle_gpu_kernels_skipped(const mc_bundle *b);

/* Restricts mc_bundle_load() to a type; call once per type. No call: every type. */
MC_API MC_MUST_CHECK int mc_bundle_select_type(mc_bundle *b, const char *type);

/* What load did (or, in a dry run, would do) for one artifact. A file is identical
 * when its bytes and its owner's execute bit are the artifact's. */
enum {
	MC_LOAD_INSTALLED = 0,    /* written where no file was */
	MC_LOAD_UNCHANGED = 1,    /* an identical file was already there */
	MC_LOAD_PLANNED = 2,      /* dry run: would be written where no file is */
	MC_LOAD_REPLACED = 3,     /* written over a file that differed */
	MC_LOAD_WOULD_REPLACE = 4, /* dry run: would be written over a file that differs */
	MC_LOAD_SKIPPED = 5        /* left out: its kernel is for a GPU target the host
				    * lacks (MC_LOAD_SKIP_OTHER_GPUS), in a dry run too */
};
typedef void (*mc_artifact_fn)(void *ud, int what, const char *type, const char *key,
			       const char *dest, uint64_t size);
/* Load flags. MC_LOAD_DRY_RUN: verify and report, write nothing; the folders the
 * files would go to are checked as the load would find them (each a folder, not a link
 * beneath its root, the deepest that exists on the way writable and searchable by the
 * process), and the error the load would give is returned. MC_LOAD_SYNC: before
 * returning, flush the filesystems of the tiers the selected artifacts live in (one
 * syncfs(2) each), so that the installed files survive a power cut; without it they
 * reach the disk when the kernel writes them back. */
#define MC_LOAD_DRY_RUN 0x1u
#define MC_LOAD_SYNC 0x2u
/* With MC_LOAD_DRY_RUN: the folders still to be made or written in are not checked,
 * only those on the way to the files that are there (a listing of where the files
 * would go, for any process that can read the cache dirs). */
#define MC_LOAD_NO_WRITE_CHECK 0x4u
/* With host GPU targets set (mc_bundle_set_host_gpus() or _fn()): the files of each
 * kernel for another target (the kernel's folder, its group file too) are left out,
 * each reported as MC_LOAD_SKIPPED, and the rest is installed. */
#define MC_LOAD_SKIP_OTHER_GPUS 0x8u

/* Verifies the bundle and installs the selected artifacts into their tiers. All or
 * nothing: files are staged beside their destinations and renamed into place only
 * after the whole bundle verified; on failure the staged files and the folders this
 * call created are removed. fn (may be NULL) is told about each artifact. */
MC_API MC_MUST_CHECK int mc_bundle_load(mc_bundle *b, unsigned flags, mc_artifact_fn fn, void *ud);

/* torch blob formats. */
enum {
	MC_TORCH_FORMAT_CURRENT = 1, /* torch 2.8 and later */
	MC_TORCH_FORMAT_2_7 = 2,     /* torch 2.7: enum type ids (written with crc32 and base64) */
	MC_TORCH_FORMAT_VLLM = 3     /* read only: vLLM's standalone_compile envelope */
};

/* Writes the bundle's artifacts as a torch blob (the format torch's
 * load_cache_artifacts() reads). A bundle made from one current-format torch blob
 * gives that blob back byte for byte. Checks integrity; checks signatures unless set
 * insecure. */
MC_API MC_MUST_CHECK int mc_bundle_export_torch(mc_bundle *b, const char *out_path);
/* The same in a chosen format; artifacts of types the format cannot hold are left out
 * and reported to left_out (may be NULL) with what = MC_LOAD_PLANNED and dest NULL. */
MC_API MC_MUST_CHECK int mc_bundle_export_torch_as(mc_bundle *b, const char *out_path, int format,
						   mc_artifact_fn left_out, void *ud);
/* The same with the blob in memory: *data (*len bytes) is owned by b and valid until
 * the next mc_bundle_export_torch_memory() on b or mc_bundle_free(b); on failure *data
 * is NULL and *len 0. The contents are parked in a temp folder made in $TMPDIR (or
 * /tmp), removed before return, and the blob is held once, at its size. */
MC_API MC_MUST_CHECK int mc_bundle_export_torch_memory(mc_bundle *b, int format,
						       const void **data, size_t *len,
						       mc_artifact_fn left_out, void *ud);

/* Differences between two bundles' artifacts, by (type, key), in (type, key) order:
 * what is MC_DIFF_ADDED (only in b), MC_DIFF_REMOVED (only in a) or MC_DIFF_CHANGED
 * (different content, or executable in one only). Reads the manifests only; checks no
 * signature. */
enum { MC_DIFF_ADDED = 0, MC_DIFF_REMOVED = 1, MC_DIFF_CHANGED = 2 };
typedef void (*mc_diff_fn)(void *ud, int what, const char *type, const char *key,
			   uint64_t size_a, uint64_t size_b);
MC_API MC_MUST_CHECK int mc_bundle_diff(const mc_bundle *a, const mc_bundle *b, mc_diff_fn fn,
					void *ud);

/* Drops from w every artifact recorded so far whose type, key, content and executable bit
 * are those of an artifact of one of the n bundles (their manifests are read; no signature
 * is checked, the caller has verified them). fn (may be NULL) is told of each artifact
 * kept, in (type, key) order: MC_DIFF_ADDED when no bundle has its type and key,
 * MC_DIFF_CHANGED when one has it with other content or executable bit (size_a: that
 * one's size, the last such bundle's; size_b: the new size). A (type, key) recorded more
 * than once is judged by the one recorded last, which the save would keep, and goes with
 * all its records (no conflict is told of it then). A file is read only when a bundle
 * has an artifact of its type, key and size. On failure w keeps every artifact. */
MC_API MC_MUST_CHECK int mc_writer_drop_known(mc_writer *w, mc_bundle *const *bases, size_t n,
					      mc_diff_fn fn, void *ud);

/* Writes a copy of the bundle with one more signature, by sk, to out_path (which may
 * be the bundle's own path). The bundle's integrity is checked while copying. */
MC_API MC_MUST_CHECK int mc_bundle_add_signature(mc_bundle *b, const mc_seckey *sk,
						 const char *out_path);

/* ---- What a job used of the loaded artifacts ----
 *
 * Which loaded files a job read, and which files it wrote anew, per type, told from the
 * files' times: it needs no privilege and no hook in the job. mc_usage_start() sets the
 * access time of each loaded file to a mark a little in the past, which moves its change
 * time to now: under Linux's default relatime (and strictatime) the next read or mmap of
 * the file by any process then updates its access time. mc_usage_finish() takes a file
 * whose access time is no longer the mark as read, and counts as new each file that the
 * scans of save (mc_writer_add_cache_dir() of the inductor root,
 * mc_writer_add_triton_cache() of the triton_home root, mc_writer_add_vllm_dir() of the
 * vllm root) record and that changed at or
 * after the start, the loaded files left out. Nothing is opened for writing and no link
 * is followed. A loaded file whose reads cannot be seen is counted as not seen, with the
 * reason (MC_UNSEEN_*), never as read or unread. */
typedef struct mc_usage mc_usage;

/* Why a loaded file's reads could not be seen. Append only. */
enum {
	MC_UNSEEN_NOATIME = 0,   /* on a mount with noatime: reads leave its access time */
	MC_UNSEEN_NOT_OWNER = 1, /* another user's: only its owner (or root) may set its times */
	MC_UNSEEN_READ_ONLY = 2, /* on a read-only mount */
	MC_UNSEEN_OVERLAYFS = 3, /* found in place (not written by the load) on overlayfs: it
				  * may be in a lower layer, whose files never take a read's
				  * access time, and setting a time would copy it up */
	MC_UNSEEN_GONE = 4,      /* removed, or replaced by another file, before its access
				  * time was read again */
	MC_UNSEEN_OTHER = 5      /* not a regular file, or another error on it */
};
#define MC_UNSEEN_KINDS 6

/* The counts of a type (mc_usage_count()). */
enum {
	MC_USED_INSTALLED = 0, /* loaded files: installed, replaced or found identical in
				* place; one per destination, however many bundles hold it */
	MC_USED_READ = 1,      /* of those, the files read during the job */
	MC_USED_NEW = 2,       /* files the job wrote that were not loaded */
	MC_USED_NOT_SEEN = 3   /* loaded files whose reads could not be seen */
};

MC_API MC_MUST_CHECK int mc_usage_new(mc_ctx *ctx, mc_usage **out);
MC_API void mc_usage_free(mc_usage *u);

/* Adds a loaded artifact, as an mc_artifact_fn of mc_bundle_load() is told of it: what
 * (MC_LOAD_INSTALLED, MC_LOAD_REPLACED or MC_LOAD_UNCHANGED), its type, and dest, its
 * path relative to its type's tier root (mc_ctx_type_tier(), mc_ctx_tier_root()), which
 * is resolved now. Meant to be called from that callback, which returns nothing: a
 * failure (another what, an unknown type, out of memory) is kept, and returned by
 * mc_usage_start(), as well as here. Before mc_usage_start() only. */
MC_API int mc_usage_add(mc_usage *u, int what, const char *type, const char *dest);

/* Just before the job starts: sets the mark on each loaded file that can take it, and
 * notes the time. The mark is 2 seconds before now, so that a read's access time differs
 * from it even where a filesystem keeps times to 2 seconds. Once only. */
MC_API MC_MUST_CHECK int mc_usage_start(mc_usage *u);

/* After the job: reads the loaded files' access times, then scans the cache folders for
 * new files (their roots resolved as mc_ctx_tier_root() resolves them; a folder that
 * does not exist has none). Once only, after mc_usage_start(). On failure (a folder
 * that cannot be read) what was read stays counted and nothing is counted new. */
MC_API MC_MUST_CHECK int mc_usage_finish(mc_usage *u);

/* The i-th type counted (0, 1, ...: those of the loaded files and of the new ones, in
 * byte order of their names), or NULL past the last. Owned by u. */
MC_API const char *mc_usage_type(const mc_usage *u, size_t i);
/* A count of the i-th type (MC_USED_*); 0 for an i or a which out of range. The loaded
 * files and those not seen are counted from mc_usage_start(), the rest by
 * mc_usage_finish(). */
MC_API size_t mc_usage_count(const mc_usage *u, size_t i, int which);
/* How many loaded files, of all types, were not seen for that reason (MC_UNSEEN_*). */
MC_API size_t mc_usage_not_seen(const mc_usage *u, int why);
/* A stable snake_case name of a reason: "noatime", "not_owner", "read_only",
 * "overlayfs", "gone", "other"; "unknown" for another value. Static storage. */
MC_API const char *mc_unseen_name(int why);
/* The reason in words, as "on a noatime mount"; "unknown" for another value. Static
 * storage. */
MC_API const char *mc_unseen_text(int why);

/* ---- A bundle of what a job used ----
 *
 * mc_usage_watch_all(), before mc_usage_start(): the files the cache folders hold
 * already, besides those loaded, are watched too. mc_usage_start() first scans the
 * folders mc_usage_finish() scans and marks each file no load added; such files are
 * counted nowhere (mc_usage_count() and mc_usage_not_seen() tell of loaded files only),
 * but mc_usage_record() knows whether the job read them. */
MC_API MC_MUST_CHECK int mc_usage_watch_all(mc_usage *u);

/* mc_usage_record() flags. */
#define MC_USED_KEEP_UNSEEN 1u /* keep the files whose reads could not be seen */

/* After mc_usage_finish(): records into w what the job used of the cache folders, from
 * the same scans: each watched file it read, each file it wrote or replaced, and with
 * any of them the rest of its unit: a Triton kernel's folder (its group file, metadata
 * and binaries), the files of a vLLM model's folder that name its artifacts, and the
 * generated kernel code an FX graph entry names. The other files are left out, and
 * *left (may be NULL) gets how many. A watched file whose reads could not be seen (a
 * noatime or read-only mount, another user's file, a file found in place on overlayfs)
 * or a file that was there before the job and not watched fails the call with
 * MC_ERR_NOT_SEEN, whose message counts them by reason, and w records nothing more
 * (as after any failure); with MC_USED_KEEP_UNSEEN they are recorded, and *kept_unseen
 * (may be NULL) gets how many. After a failure it may be called again (with
 * MC_USED_KEEP_UNSEEN, say); once it succeeded, not again. Only a file's modification
 * time or inode tells it was written: the marks of another run on the same folders
 * move change times, never those. */
MC_API MC_MUST_CHECK int mc_usage_record(mc_usage *u, mc_writer *w, unsigned flags,
					 size_t *left, size_t *kept_unseen);

/* ---- The fleet tier: torch's and Triton's Redis remote caches ----
 *
 * torch 2.11 keeps an FX graph, an AOTAutograd entry and a dynamo PGO state under
 * "pt2:<cache id>::<key>:c1" as ASCII JSON {"data": base64 of the file's bytes, ...}
 * (cache ids fx-graph-v1, autograd-experimental, dynamo-pgo); Triton 3.6 keeps a
 * kernel's files under "triton:<kernel hash>:<file name>" (TRITON_REDIS_KEY_FORMAT), raw,
 * a group file as {"child_paths": [its files' names]}. Types with no such form
 * (autotune, precompile, kernel_code, ...) have no place there. Without Redis support
 * (configure --without-hiredis) every call fails with MC_ERR_UNSUPPORTED. */
typedef struct mc_redis mc_redis;

/* 1 when this build has Redis support, else 0. */
MC_API int mc_redis_supported(void);

/* Connects to url: redis://[[user]:password@]host[:port][/db] (port 6379, db 0) or
 * unix:///path/to/socket[?db=N]. password, when not NULL, is used instead of the URL's
 * (an AUTH with user when the URL names one). The server must answer PING. Errors
 * (MC_ERR_REMOTE, MC_ERR_INVALID for a bad URL) name the server, never the password.
 * r keeps the password (for mc_redis_pull()'s other connections) until
 * mc_redis_free(), which wipes it. */
MC_API MC_MUST_CHECK int mc_redis_open(mc_ctx *ctx, const char *url, const char *password,
				       mc_redis **out);
MC_API void mc_redis_free(mc_redis *r);
/* Where r is, as messages name it: the URL without its password. */
MC_API const char *mc_redis_where(const mc_redis *r);
/* Triton's key format ("{key}" and "{filename}", in that order, each once; default
 * "triton:{key}:{filename}"), as TRITON_REDIS_KEY_FORMAT gives it. */
MC_API MC_MUST_CHECK int mc_redis_set_triton_format(mc_redis *r, const char *format);

/* What push, pull and audit tell of each entry (mc_remote_fn's what). */
enum {
	MC_REMOTE_SENT = 0,      /* push: written where there was none */
	MC_REMOTE_REPLACED,      /* push: written over other bytes */
	MC_REMOTE_UNCHANGED,     /* push: the store had these bytes already */
	MC_REMOTE_WOULD_SEND,    /* push dry run: would be written (none there) */
	MC_REMOTE_WOULD_REPLACE, /* push dry run: would be written over other bytes */
	MC_REMOTE_NO_FORM,       /* push: its type has no remote form; not sent */
	MC_REMOTE_SHADOWED,      /* push: another artifact of the bundle has its remote key */
	MC_REMOTE_PULLED,        /* pull: recorded */
	MC_REMOTE_ODD,           /* pull, audit: a value not in its key's form (skipped) */
	MC_REMOTE_VOUCHED,       /* audit: a bundle has it, with these bytes */
	MC_REMOTE_DIFFERS,       /* audit: a bundle has its key with other bytes */
	MC_REMOTE_UNVOUCHED,     /* audit: no bundle has its key */
	MC_REMOTE_TTL_CHANGED,   /* push: the store had these bytes, with another TTL (or none) */
	MC_REMOTE_WOULD_CHANGE_TTL /* push dry run: the same, not written */
};
/* type and key: the artifact's (NULL for an entry of no type); rkey: its Redis key;
 * size: its content's bytes. */
typedef void (*mc_remote_fn)(void *ud, int what, const char *type, const char *key,
			     const char *rkey, uint64_t size);

#define MC_PUSH_DRY_RUN 0x1u /* compare, write nothing */
#define MC_PUSH_TRITON 0x2u  /* Triton's kernels too (types triton and triton_home) */

/* Verifies b as mc_bundle_load() does (signatures, policy, every key by its handler;
 * mc_bundle_select_type() restricts it) and writes each selected artifact that has a
 * remote form into r, in that form, pipelined, once its object's bytes checked against
 * their hashes. Only the objects to send are read (all of a bundle read in order), on
 * the context's worker threads; commands go out in the bundle's order of objects, so an
 * object that fails stops the push with the entries of the objects before it written
 * and none after, whatever the number of threads. fn is called for one entry at a time,
 * in that order, from the calling thread or a worker. ttl_seconds > 0: each entry
 * expires then, and one whose bytes the store had with another TTL (or none) is told
 * MC_REMOTE_TTL_CHANGED; 0: each keeps the TTL it had (a new entry: none). Each
 * entry's TTL is read and its value written in one transaction. Two
 * artifacts with one remote key (an FX graph key with two entries): the last in the
 * bundle's order is written, the other told as MC_REMOTE_SHADOWED. A second push of
 * the same bundle writes the same bytes: each told MC_REMOTE_UNCHANGED. Progress
 * phase "push". */
MC_API MC_MUST_CHECK int mc_bundle_push(mc_bundle *b, mc_redis *r, unsigned flags,
					uint64_t ttl_seconds, mc_remote_fn fn, void *ud);

#define MC_PULL_TRITON 0x2u /* Triton's keys too (as type triton_home) */

/* Records into w every entry of r in torch's key space (and with MC_PULL_TRITON,
 * Triton's) that match (a Redis glob, NULL: all) selects: its type and key from the
 * Redis key, its content from the value, checked for its form; an entry that is not
 * in it is skipped and told as MC_REMOTE_ODD. The values are read on the context's
 * threads, each taking batches of consecutive keys and reading them on a connection of
 * its own to the same server (its address as r found it, r's credentials and
 * database: r keeps its password for them; a server that takes fewer connections
 * leaves fewer threads); one value and its content are in memory on each thread, at
 * most 8 values wait in the server for each connection. Each content is hashed and
 * compressed as it arrives, at the compression level w has then (a later
 * mc_writer_set_compression() leaves it as it was), into temp files that
 * mc_writer_save() copies from. fn is called once per entry, one call at a time, in key
 * order, possibly from a worker thread; after a failure, for every entry before the
 * one that failed. Progress phase "pull" (done: entries read). */
MC_API MC_MUST_CHECK int mc_redis_pull(mc_redis *r, mc_writer *w, const char *match,
				       unsigned flags, mc_remote_fn fn, void *ud);

/* Checks every entry of r in torch's key space (and Triton's with MC_PULL_TRITON)
 * against the n bundles, whose signatures and policy are checked first (no object is
 * read: the signed manifests vouch for the hashes). Tells each entry VOUCHED, DIFFERS,
 * UNVOUCHED or ODD; *unvouched (may be NULL) gets the number of the last three. */
MC_API MC_MUST_CHECK int mc_redis_audit(mc_redis *r, mc_bundle *const *b, size_t n,
					unsigned flags, mc_remote_fn fn, void *ud,
					size_t *unvouched);

#ifdef __cplusplus
}
#endif
#endif /* MEGACACHE_H */
