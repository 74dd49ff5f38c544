/*
 * tiers.h - the registry of artifact types and the tiers they install into, and the
 * built-in torch and Triton types; not installed.
 */
#ifndef MC_TIERS_H
#define MC_TIERS_H

#include "core/core.h"

/* ---- what describes a type and a tier, and their records (registry.c keeps them) ---- */

/* A tier's root when none was set: *out (malloc'd), and in *named the length of the
 * part the environment named rather than made up here (TMPDIR, the inductor root).
 * Triton's also sets ctx->triton_flat: whether kernels sit beneath a device level. */
typedef int (*mc_root_fn)(mc_ctx *ctx, char **out, size_t *named);

/* What a hook is told beside the file itself. */
struct mc_hook_env {
	mc_ctx *ctx;     /* the calling thread's */
	const char *dir; /* the absolute folder the file was found in (record) or lands in
			  * (derive); NULL when not known */
	/* derive: whether key, of the file's tier, is in place once the load is done (an
	 * artifact it installs, or a file or folder found there); NULL: not asked. */
	int (*has)(void *ud, const char *key);
	void *ud;
	char *why;       /* on failure, why, when the hook can tell; else left as it was */
	size_t whylen;
};

/* A type whose files hold their own paths (Triton's group files, vLLM's handle files)
 * records them in a form that does not, and writes them out again for where they land:
 * - record: the recorded form of a file found on disk (in, n: its bytes, key: its
 *   key); *out (malloc'd, *outn bytes) or NULL when the file is recorded as it is;
 * - derive: the bytes to write for recorded content rec at folder env->dir;
 *   *out NULL when the recorded bytes are written as they are.
 * Both return MC_OK or an MC_ERR_* status, nothing being reported on the context but
 * why in env->why. */
typedef int (*mc_record_fn)(const char *key, const unsigned char *in, size_t n,
			    struct mc_hook_env *env, unsigned char **out, size_t *outn);
typedef int (*mc_derive_fn)(const char *key, const unsigned char *rec, size_t n,
			    struct mc_hook_env *env, unsigned char **out, size_t *outn);

/* A type whose every file goes through its hooks: one larger than MC_DERIVE_MAX is
 * refused rather than kept as it is (a flag of the library's own tables). */
#define MC_TYPE_DERIVE_ALL 0x80000000u

/* The largest file the hooks read: a larger one is recorded and written as it is (or
 * refused: MC_TYPE_DERIVE_ALL). */
#define MC_DERIVE_MAX (1024u * 1024)

/* What describes a type: the built-in ones are one const table (torch.c); a type
 * registered through mc_ctx_register_type() fills the same record, with no default
 * root, torch 2.7 id or export rank. */
struct mc_typedesc {
	const char *name;
	const char *tier;
	unsigned flags;           /* MC_TYPE_* */
	mc_key_check_fn key_check;
	mc_dest_path_fn dest_path;
	mc_root_fn default_root;  /* of its tier, or NULL */
	int torch27_id;           /* its id in torch 2.7's blob format, or -1 */
	int export_rank;          /* its group's place in an exported blob, or -1 */
	mc_record_fn record;      /* files with paths in them, or NULL */
	mc_derive_fn derive;
	/* Whether key's folder is installed as a unit, for a type not MC_TYPE_FOLDER_UNIT
	 * whose keys lie in such folders and others (vLLM's Triton kernel folders); NULL:
	 * none is. */
	int (*unit_key)(const char *key);
	int used_role;            /* MC_ROLE_* */
};

/* What a file of a type tells of others, for a bundle of what a job used
 * (interop/usedsave.c): an FX graph entry names the generated kernel code it runs
 * (MC_ROLE_CODE files) by their names' stems; a file of a vLLM model keeps the files
 * right in its model's folder (the first MC_MODEL_DEPTH components of its key), which
 * name or tell of the model's artifacts. */
enum { MC_ROLE_NONE = 0, MC_ROLE_NAMES_CODE, MC_ROLE_CODE, MC_ROLE_MODEL };
#define MC_MODEL_DEPTH 4 /* torch_compile_cache/<hash>/rank_<r>_<dp>/<prefix> */

/* A registered type. */
struct mc_type {
	char name[MC_TYPE_MAX + 1];
	char *tier;
	unsigned flags;
	mc_key_check_fn key_check;
	mc_dest_path_fn dest_path;
	void *ud;
	mc_root_fn default_root;
	int torch27_id;           /* as in its descriptor */
	int export_rank;
	mc_record_fn record;
	mc_derive_fn derive;
	int (*unit_key)(const char *key);
	int used_role;            /* as in its descriptor */
};

struct mc_tier {
	char *name;
	char *root;   /* NULL until set or resolved */
	size_t named; /* how much of root its setter named: a loader may follow links
		       * there, and walks the rest (a default's own folders) without */
};

/* ---- the registry (registry.c) ---- */

/* Adds the n types of a table of the library's own (their handlers get the context as
 * their ud): how each built-in table registers itself. */
MC_HIDDEN int mc__register_types(mc_ctx *ctx, const struct mc_typedesc *d, size_t n);
MC_HIDDEN const struct mc_type *mc__find_type(const mc_ctx *ctx, const char *type);
/* Checks key with type t's handler (and the length every key has). */
MC_HIDDEN int mc__key_check(mc_ctx *ctx, const struct mc_type *t, const char *key);
/* A tier's root as mc_ctx_tier_root() gives it, and how much of it was named. */
MC_HIDDEN int mc__tier_root(mc_ctx *ctx, const char *tier, const char **path, size_t *named);
/* Whether the folder of key, of type t, is installed as a unit (tiers.h, unit_key). */
MC_HIDDEN int mc__unit_folder(const struct mc_type *t, const char *key);
/* Checks key with the type's handler and computes its destination. */
MC_HIDDEN int mc__dest_for(mc_ctx *ctx, const struct mc_type *t, const char *key,
			   const unsigned char *sha256, char *buf, size_t buflen);

/* ---- the entries of torch's guarded caches (torch.c) ----
 * An inductor or aot_autograd key is torch's key, "/", and the entry's file name (the
 * content's torch hash); bundles made before entries were kept have torch's key alone. */

/* How much of key is torch's own key: all of it but for an entry. */
MC_HIDDEN size_t mc__torch_key_len(const struct mc_type *t, const char *key);
/* Whether the entry a key names (if any) is the torch hash of sha256 (when given). */
MC_HIDDEN int mc__key_entry_ok(const struct mc_type *t, const char *key,
			       const unsigned char *sha256);
/* The key with its entry, in buf: a key of the older form gets the entry sha256 names
 * (returns 1); any other key is copied as it is (0). So artifacts compare across forms. */
MC_HIDDEN int mc__entry_key(const struct mc_type *t, const char *key,
			    const unsigned char *sha256, char *buf, size_t len);

/* ---- the built-in types: the set of them (builtin.c) ----
 * Its one function, mc__register_builtin(), is declared in core/core.h, for
 * mc_ctx_new(). */

/* ---- the built-in types of torch and Triton (torch.c) ---- */

/* The folder torch keeps Triton's cache in, beneath the inductor root. */
#define MC_TRITON_SUBDIR "triton"
/* Registers torch.c's table. */
MC_HIDDEN int mc__register_torch(mc_ctx *ctx);
/* The built-in type of that torch 2.7 id; NULL when there is none. */
MC_HIDDEN const struct mc_typedesc *mc__builtin_torch27(uint64_t id);
/* Whether the file of key, of type t, is one whose hooks may change it (a Triton
 * group file, any file of a MC_TYPE_DERIVE_ALL type): a writer passes it through
 * t->record, a loader through t->derive. */
MC_HIDDEN int mc__derives(const struct mc_type *t, const char *key);

/* A Triton group file (a key ending __grp__<name>.json) in Triton's remote form, from
 * any form read. *out NULL: not a group file in a form read, kept as it is. */
MC_HIDDEN int mc__group_remote(const char *key, const unsigned char *in, size_t n,
			       unsigned char **out, size_t *outn);

/* The triton type's hooks, for other types that hold Triton's kernels, and for group
 * files read from Triton's remote cache (record reads every form, the remote one too,
 * and is told nothing in env). */
MC_HIDDEN int mc__group_record(const char *key, const unsigned char *in, size_t n,
			       struct mc_hook_env *env, unsigned char **out, size_t *outn);
MC_HIDDEN int mc__group_derive(const char *key, const unsigned char *rec, size_t n,
			       struct mc_hook_env *env, unsigned char **out, size_t *outn);

/* The key shapes of torch's and Triton's types, for types of other tiers whose folders
 * hold the same files: whether key has the shape. */
enum mc_torch_shape {
	MC_SHAPE_FXGRAPH,     /* an inductor key: 'f', 51 of [a-z2-7], maybe "/<entry>" */
	MC_SHAPE_AOTAUTOGRAD, /* an aot_autograd key: the same with 'a' */
	MC_SHAPE_AUTOTUNE,    /* "<2 chars>/<64 hex>.best_config" */
	MC_SHAPE_CODE,        /* "<2 chars>/<file name>" */
	MC_SHAPE_TRITON,      /* "<device index>/<kernel hash>/<file name>" */
	MC_SHAPE_KERNEL,      /* "<kernel hash>/<file name>": a triton_home key */
	MC_SHAPE_FILE_NAME,   /* one plain file name */
	MC_SHAPE_PATH,        /* an extra key: a relative path of plain file names */
};
MC_HIDDEN int mc__torch_shape_ok(enum mc_torch_shape shape, const char *key);

/* ---- the built-in types of vLLM's compile cache (vllm.c) ---- */

/* Registers vllm.c's table. */
MC_HIDDEN int mc__register_vllm(mc_ctx *ctx);

/* ---- Python literals: vLLM's handle file (pylit.c) ---- */

/* Where a string stands: role is MC_PYLIT_KEY or MC_PYLIT_VALUE when the string, or
 * the tuple or list it lies in, is a dict's key or value (MC_PYLIT_TOP: in no dict);
 * index its place in the innermost tuple or list (-1: none between it and the dict);
 * dkey (dkeyn bytes) the dict's key when that is a string and this is in its value,
 * else NULL; depth the brackets around it. */
enum { MC_PYLIT_TOP, MC_PYLIT_KEY, MC_PYLIT_VALUE };
struct mc_pylit_at {
	unsigned depth;
	int role;
	long index;
	const char *dkey;
	size_t dkeyn;
};
/* Shown each string (s: n bytes of UTF-8, NUL after them): MC_OK keeping it (*repl
 * NULL) or with a replacement (*repl malloc'd, *repln bytes of UTF-8, freed by the
 * reader); else an MC_ERR_* code that fails the call, with why in why. */
typedef int (*mc_pylit_fn)(void *ud, const struct mc_pylit_at *at, const char *s, size_t n,
			   char **repl, size_t *repln, char *why, size_t whylen);
/* Reads in (n bytes, at most max) as one Python literal that ast.literal_eval reads
 * to the same structure: dicts, tuples, lists, str literals (adjacent ones joined),
 * decimal ints, None, True, False, and # comments; anything else fails, said on ctx
 * with name, line and column. fn NULL: only that. Else *out (malloc'd, *outn bytes)
 * is in with each string fn replaces written as one literal (format/SPEC.md 4.2). */
MC_HIDDEN int mc__pylit_rewrite(mc_ctx *ctx, const char *name, const unsigned char *in,
				size_t n, size_t max, mc_pylit_fn fn, void *ud,
				unsigned char **out, size_t *outn);

/* ---- GPU targets (gpu.c) ---- */

#define MC_GPU_HOST_MAX 64 /* distinct targets a host is taken to have */
/* Whether the file of key, of type t, is a Triton kernel's metadata: a ".json" file of a
 * kernel folder that is not a group file (SPEC.md section 12.6). */
MC_HIDDEN int mc__kernel_meta(const struct mc_type *t, const char *key);
/* The target a kernel's metadata file of n bytes names ("target": {"backend", "arch"}),
 * in out as "<backend>:<arch>": 1; 0 (out empty) when it names none in that form. */
MC_HIDDEN int mc__kernel_target(const unsigned char *buf, size_t n,
				char out[MC_GPU_TARGET_LEN]);

/* ---- the forms artifacts take in torch's and Triton's Redis caches (remote.c) ---- */

#define MC_RKEY_MAX 1024 /* the longest remote key made or read */
#define MC_SPACE_TORCH 0x1u  /* "pt2:<cache id>::<key>:c1" */
#define MC_SPACE_TRITON 0x2u /* Triton's key format */

/* An artifact's remote key, in the key spaces asked for, in buf: MC_OK; 1 when its type
 * has none there (or its key does not split into Triton's). triton_fmt: as
 * mc_redis_set_triton_format() checked it. */
MC_HIDDEN int mc__remote_key(const char *type, const char *key, const char *triton_fmt,
			     unsigned spaces, char *buf, size_t len);
/* Content c (n bytes) of an artifact as its remote value (malloc'd, *outn bytes). */
MC_HIDDEN int mc__remote_value(const char *type, const char *key, const unsigned char *c,
			       size_t n, unsigned char **out, size_t *outn);
/* The same in two steps, for a caller that places the value: *vn, its size; *made NULL
 * when mc__remote_fill() is to write it (content c in a frame), else the value made
 * (malloc'd: a Triton group file's remote form). */
MC_HIDDEN int mc__remote_prepare(const char *type, const char *key, const unsigned char *c,
				 size_t n, unsigned char **made, size_t *vn);
MC_HIDDEN void mc__remote_fill(const char *type, const unsigned char *c, size_t n,
			       unsigned char *out);
/* The artifact a remote key and value hold: *type (static), key in kbuf, content
 * (malloc'd, *cn bytes). 1 with why when rkey is in a key space but the value is not in
 * its form; 2 when rkey is in none of them. */
MC_HIDDEN int mc__remote_parse(const char *rkey, const unsigned char *v, size_t vn,
			       const char *triton_fmt, unsigned spaces, const char **type,
			       char *kbuf, size_t klen, unsigned char **content, size_t *cn,
			       char *why, size_t whylen);
/* The SCAN MATCH patterns of the key spaces asked for (at most 2), each malloc'd. */
MC_HIDDEN int mc__remote_patterns(const char *triton_fmt, unsigned spaces, char **pat,
				  size_t *n);
/* Whether fmt is a Triton key format this reads back: "{key}" then "{filename}", once each. */
MC_HIDDEN int mc__triton_format_ok(const char *fmt);

#endif /* MC_TIERS_H */
