/*
 * vllm.c - the built-in artifact types of vLLM's compile cache (tier vllm): their key
 * checks and the cache root as vLLM tells it, and the table that describes them.
 *
 * Keys are paths beneath the root. vLLM keeps one folder per model and rank:
 *   torch_compile_cache/<10 hex>/rank_<n>_<m>/<prefix>/
 * holding its notes (vllm_meta), the index of its compiled graphs (vllm_handles) and
 * the graphs themselves (vllm_artifact: a file, or a folder of torch's caches); and
 *   torch_compile_cache/torch_aot_compile/<64 hex>/{rank_<n>_<m>/model, inductor_cache/}
 * for the whole model compiled ahead of time (vllm_aot); and, of vLLM's older adaptor,
 * torch's and Triton's caches of each rank (vllm_inductor):
 *   torch_compile_cache/<10 hex>/rank_<n>_<m>/{inductor_cache/, triton_cache/}
 * Any other file beneath the root is kept as vllm_extra when the caller asks.
 */
#include "config.h"

#include <ctype.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers/tiers.h"

#define JIT_DIR "torch_compile_cache/"
#define AOT_DIR "torch_compile_cache/torch_aot_compile/"
#define PREFIX_MAX 64
#define RANK_DIGITS 6
#define INT_DIGITS 19 /* the numbers in an artifact's name: a range, a size, an index */

static int
why(char *buf, size_t len, const char *text)
{
	snprintf(buf, len, "%s", text);
	return MC_ERR_BAD_KEY;
}

static int
c_hex(int c) /* [0-9a-f] */
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int
c_prefix(int c) /* [A-Za-z0-9_] */
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* Whether s begins with n characters of the class and a '/' after them: past the '/'. */
static const char *
seg_of(const char *s, size_t n, int (*is)(int))
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!is((unsigned char)s[i]))
			return NULL;
	return s[n] == '/' ? s + n + 1 : NULL;
}

/* A decimal number of 1..max digits without a leading zero at s: past it, else NULL. */
static const char *
decimal(const char *s, size_t max)
{
	size_t n = strspn(s, "0123456789");

	return n > 0 && n <= max && (s[0] != '0' || n == 1) ? s + n : NULL;
}

/* "rank_<n>_<m>/" at s: past it, else NULL. */
static const char *
rank_dir(const char *s)
{
	if (strncmp(s, "rank_", 5) != 0 || (s = decimal(s + 5, RANK_DIGITS)) == NULL ||
	    *s != '_' || (s = decimal(s + 1, RANK_DIGITS)) == NULL)
		return NULL;
	return *s == '/' ? s + 1 : NULL;
}

/* "torch_compile_cache/<10 hex>/rank_<n>_<m>/" at key: what follows, else NULL. */
static const char *
jit_rank(const char *key)
{
	const char *s;

	if (strncmp(key, JIT_DIR, sizeof JIT_DIR - 1) != 0 ||
	    (s = seg_of(key + sizeof JIT_DIR - 1, 10, c_hex)) == NULL)
		return NULL;
	return rank_dir(s);
}

/* "torch_compile_cache/<10 hex>/rank_<n>_<m>/<prefix>/" at key: what follows, else NULL. */
static const char *
jit_rest(const char *key)
{
	const char *s;
	size_t n;

	if ((s = jit_rank(key)) == NULL)
		return NULL;
	n = strcspn(s, "/");
	return n > 0 && n <= PREFIX_MAX ? seg_of(s, n, c_prefix) : NULL;
}

static int
meta_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *s = jit_rest(key);

	if (s == NULL || (strcmp(s, "cache_key_factors.json") != 0 &&
			  strcmp(s, "computation_graph.py") != 0 && strcmp(s, "transformed_code.py") != 0))
		return why(w, wl, "expected torch_compile_cache/<10 hex>/rank_<n>_<m>/<prefix>/ and "
			   "cache_key_factors.json, computation_graph.py or transformed_code.py");
	return MC_OK;
}

static int
handles_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *s = jit_rest(key);

	if (s == NULL || strcmp(s, "vllm_compile_cache.py") != 0)
		return why(w, wl, "expected torch_compile_cache/<10 hex>/rank_<n>_<m>/<prefix>/"
			   "vllm_compile_cache.py");
	return MC_OK;
}

/* An artifact's name at s, "artifact_compile_range_<a>_<b>_subgraph_<i>" or the older
 * "artifact_shape_<n|None>_subgraph_<i>": past it, else NULL. */
static const char *
artifact_name(const char *s)
{
	if (strncmp(s, "artifact_compile_range_", 23) == 0) {
		if ((s = decimal(s + 23, INT_DIGITS)) == NULL || *s != '_' ||
		    (s = decimal(s + 1, INT_DIGITS)) == NULL)
			return NULL;
	} else if (strncmp(s, "artifact_shape_", 15) == 0) {
		s += 15;
		if (strncmp(s, "None", 4) == 0)
			s += 4;
		else if ((s = decimal(s, INT_DIGITS)) == NULL)
			return NULL;
	} else {
		return NULL;
	}
	if (strncmp(s, "_subgraph_", 10) != 0)
		return NULL;
	return decimal(s + 10, INT_DIGITS);
}

/* ---- the handle file: vllm_compile_cache.py ----
 * pprint's text of a dict, read back by ast.literal_eval, from
 * ((start, end), graph index, compiler name) to a handle, or to {'graph_handle':
 * handle, 'cache_key': ...}. A handle of "inductor_standalone" is (artifact name,
 * absolute path of that artifact in the handle file's folder); one of "inductor" is
 * (graph key, absolute path of its code in the rank folder's inductor_cache/), a path
 * vLLM does not read. vLLM opens the paths as they are, so the file is recorded with
 * each path relative to the file's folder and written back naming where it lands
 * (format/SPEC.md section 4.2). */

#define HANDLES_NAME "handles"
#define INDUCTOR_REL "../inductor_cache/"

struct handles {
	struct mc_hook_env *env;
	const char *key;  /* the handle file's */
	int derive;       /* 0: recording it */
	int standalone;   /* the compiler of the entry being read: 1 standalone, 0 inductor,
			   * -1 none read since the last handle */
	char name[MC_KEY_MAX + 1]; /* the handle's first member */
	int named;        /* one was read, and no path after it yet */
};

static int __attribute__((format(printf, 4, 5)))
h_why(char *w, size_t wl, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w, wl, fmt, ap);
	va_end(ap);
	return code;
}

/* Whether s is a relative path of plain names ("a/b"; no ".", ".." or empty one). */
static int
plain_path(const char *s)
{
	size_t k;

	for (;;) {
		k = strcspn(s, "/");
		if (k == 0 || (k == 1 && s[0] == '.') || (k == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (s[k] == '\0')
			return 1;
		s += k + 1;
	}
}

/* *repl: the n bytes at a, then b (malloc'd). */
static int
join_repl(const char *a, size_t n, const char *b, char **repl, size_t *repln)
{
	size_t bn = strlen(b);

	if ((*repl = malloc(n + bn + 1)) == NULL)
		return MC_ERR_NOMEM;
	memcpy(*repl, a, n);
	memcpy(*repl + n, b, bn + 1);
	*repln = n + bn;
	return MC_OK;
}

/* dir with one '/' after it: its length, or 0 when it is too long for buf. */
static size_t
dir_slash(const char *dir, char *buf, size_t len)
{
	size_t n = strlen(dir);
	int k = snprintf(buf, len, "%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/");

	return k > 0 && (size_t)k < len ? (size_t)k : 0;
}

/* Whether the file or folder at path a is the one at path b (links followed). */
static int
same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return a[0] == '/' && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Recording: the path of an artifact in the file's folder becomes its name. */
static int
record_artifact(struct handles *h, const char *s, char **repl, size_t *repln, char *w,
		size_t wl)
{
	char want[2 * MC_PATH_MAX];
	size_t n = dir_slash(h->env->dir, want, sizeof want);
	struct stat st;

	if (n == 0 || n + strlen(h->name) >= sizeof want)
		return h_why(w, wl, MC_ERR_INVALID, "%s: path too long", h->env->dir);
	memcpy(want + n, h->name, strlen(h->name) + 1);
	if (strcmp(s, want) != 0 && !same_file(s, want))
		return h_why(w, wl, MC_ERR_MALFORMED, "handle path %.300s is outside the folder being "
			     "saved (vLLM opens it as it is)", s);
	if (lstat(want, &st) != 0)
		return h_why(w, wl, MC_ERR_MALFORMED, "handle to a missing artifact: %.300s", want);
	return join_repl(h->name, strlen(h->name), "", repl, repln);
}

/* Deriving: an artifact's name becomes its path where the file lands, when the load
 * puts it there. */
static int
derive_artifact(struct handles *h, const char *s, char **repl, size_t *repln, char *w,
		size_t wl)
{
	const char *slash = strrchr(h->key, '/');
	char key[MC_KEY_MAX + 1], dir[2 * MC_PATH_MAX];
	size_t n = dir_slash(h->env->dir, dir, sizeof dir);

	if (strcmp(s, h->name) != 0 || artifact_name(s) == NULL || *artifact_name(s) != '\0')
		return h_why(w, wl, MC_ERR_MALFORMED, "handle path %.300s is outside the root (a "
			     "recorded handle holds its artifact's name alone)", s);
	if (slash == NULL || snprintf(key, sizeof key, "%.*s/%s", (int)(slash - h->key), h->key,
				      s) >= (int)sizeof key)
		return h_why(w, wl, MC_ERR_INVALID, "%s: key too long", s);
	if (h->env->has != NULL && !h->env->has(h->env->ud, key))
		return h_why(w, wl, MC_ERR_MALFORMED, "handle to a missing artifact: %.300s is neither "
			     "loaded nor in place", key);
	if (n == 0)
		return h_why(w, wl, MC_ERR_INVALID, "%s: path too long", h->env->dir);
	if (!mc__utf8_valid((const unsigned char *)dir, n))
		return h_why(w, wl, MC_ERR_INVALID, "%s", "the folder's path is not UTF-8");
	return join_repl(dir, n, s, repl, repln);
}

/* Recording an "inductor" handle whose path names the rank folder (dir's first up bytes)
 * another way (through a link, with "//"): its inductor_cache/ the same folder. */
static int
same_rank(struct handles *h, const char *s, size_t up, char **repl, size_t *repln, char *w,
	  size_t wl)
{
	const char *at = strstr(s, "/inductor_cache/");
	char a[2 * MC_PATH_MAX], b[2 * MC_PATH_MAX];

	if (at != NULL && up > 0 && plain_path(at + 16) && (size_t)(at - s) < sizeof a &&
	    up + 14 < sizeof b) {
		memcpy(a, s, (size_t)(at - s));
		memcpy(a + (at - s), "/inductor_cache", 16);
		memcpy(b, h->env->dir, up);
		memcpy(b + up, "inductor_cache", 15);
		if (same_file(a, b))
			return join_repl(INDUCTOR_REL, sizeof INDUCTOR_REL - 1, at + 16, repl, repln);
	}
	return h_why(w, wl, MC_ERR_MALFORMED, "handle path %.300s is outside the rank folder's "
		     "inductor_cache/ being saved", s);
}

/* An "inductor" handle's path, in the rank folder's inductor_cache/: recorded relative
 * to the handle file's folder, and written back for where that lands. */
static int
inductor_path(struct handles *h, const char *s, char **repl, size_t *repln, char *w,
	      size_t wl)
{
	const char *dir = h->env->dir, *rest;
	size_t up = strlen(dir);

	while (up > 1 && dir[up - 1] == '/')
		up--;
	while (up > 0 && dir[up - 1] != '/')
		up--; /* dir's first up bytes: the rank folder's path and a '/' */
	if (h->derive) {
		rest = s + sizeof INDUCTOR_REL - 1;
		if (strncmp(s, INDUCTOR_REL, sizeof INDUCTOR_REL - 1) != 0 || !plain_path(rest))
			return h_why(w, wl, MC_ERR_MALFORMED, "handle path %.300s is not in the rank "
				     "folder's inductor_cache/", s);
		if (!mc__utf8_valid((const unsigned char *)dir, up))
			return h_why(w, wl, MC_ERR_INVALID, "%s", "the folder's path is not UTF-8");
		return join_repl(dir, up, s + 3, repl, repln); /* "inductor_cache/..." */
	}
	if (up > 0 && strncmp(s, dir, up) == 0 && strncmp(s + up, "inductor_cache/", 15) == 0 &&
	    plain_path(s + up + 15))
		return join_repl(INDUCTOR_REL, sizeof INDUCTOR_REL - 1, s + up + 15, repl, repln);
	return same_rank(h, s, up, repl, repln, w, wl);
}

/* A string of the key: the compiler's name, the one string vLLM puts there. */
static int
handle_compiler(struct handles *h, const char *s, char *w, size_t wl)
{
	if (strcmp(s, "inductor_standalone") == 0)
		h->standalone = 1;
	else if (strcmp(s, "inductor") == 0)
		h->standalone = 0;
	else
		return h_why(w, wl, MC_ERR_MALFORMED, "compiler %.100s is not one vLLM keeps handles "
			     "for (inductor_standalone, inductor)", s);
	h->named = 0;
	return MC_OK;
}

/* Each string of the file, where it stands: what vLLM writes there, else refused. */
static int
handle_str(void *ud, const struct mc_pylit_at *at, const char *s, size_t n, char **repl,
	   size_t *repln, char *w, size_t wl)
{
	struct handles *h = ud;
	int in_handle = (at->depth == 2 && at->dkey == NULL) ||
			(at->depth == 3 && at->dkey != NULL && strcmp(at->dkey, "graph_handle") == 0);

	if (strlen(s) != n)
		return h_why(w, wl, MC_ERR_MALFORMED, "%s", "a string holds a NUL character");
	if (at->role == MC_PYLIT_KEY && at->depth == 2 && at->index == 2)
		return handle_compiler(h, s, w, wl);
	if (at->role == MC_PYLIT_KEY && at->depth == 2 && at->index == -1 &&
	    (strcmp(s, "graph_handle") == 0 || strcmp(s, "cache_key") == 0))
		return MC_OK;
	if (at->role == MC_PYLIT_VALUE && at->depth == 2 && at->index == -1 && at->dkey != NULL &&
	    strcmp(at->dkey, "cache_key") == 0)
		return MC_OK;
	if (at->role == MC_PYLIT_VALUE && in_handle && at->index == 0) {
		if (h->standalone < 0)
			return h_why(w, wl, MC_ERR_MALFORMED, "%s", "a handle whose key names no "
				     "compiler");
		if (n == 0 || n > MC_KEY_MAX || strchr(s, '/') != NULL ||
		    (h->standalone && (artifact_name(s) == NULL || *artifact_name(s) != '\0')) ||
		    (!h->standalone && !mc__torch_shape_ok(MC_SHAPE_FXGRAPH, s)))
			return h_why(w, wl, MC_ERR_MALFORMED, "%.200s is not %s", s, h->standalone ?
				     "an artifact's name" : "an FX graph's key");
		memcpy(h->name, s, n + 1);
		h->named = 1;
		return MC_OK;
	}
	if (at->role == MC_PYLIT_VALUE && in_handle && at->index == 1 && h->named) {
		int standalone = h->standalone;

		h->named = 0;
		h->standalone = -1; /* the next entry's key names its own */
		if (!standalone)
			return inductor_path(h, s, repl, repln, w, wl);
		return h->derive ? derive_artifact(h, s, repl, repln, w, wl)
				 : record_artifact(h, s, repl, repln, w, wl);
	}
	return h_why(w, wl, MC_ERR_MALFORMED, "a string (%.100s) where vLLM's handle file has none",
		     s);
}

/* Reads the handle file in (n bytes) and writes its other form: recorded, or for
 * env->dir. */
static int
handles_form(const char *key, const unsigned char *in, size_t n, struct mc_hook_env *env,
	     int derive, unsigned char **out, size_t *outn)
{
	struct handles h = {env, key, derive, -1, "", 0};
	size_t i = 0;
	const char *msg;
	int rc;

	*out = NULL;
	*outn = 0;
	if (env == NULL || env->ctx == NULL || env->dir == NULL)
		return MC_ERR_INVALID;
	while (i < n && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r'))
		i++;
	if (i == n || in[i] != '{') {
		if (env->why != NULL)
			snprintf(env->why, env->whylen, "not a dict: vLLM's handle file is one");
		return MC_ERR_MALFORMED;
	}
	rc = mc__pylit_rewrite(env->ctx, HANDLES_NAME, in, n, MC_DERIVE_MAX, handle_str, &h, out,
			       outn);
	if (rc == MC_ERR_LIMIT) /* nested too deep, a number too long: a broken file */
		rc = MC_ERR_MALFORMED;
	if (rc != MC_OK && env->why != NULL) {
		msg = mc_ctx_error(env->ctx);
		if (strncmp(msg, HANDLES_NAME ": ", sizeof HANDLES_NAME + 1) == 0)
			msg += sizeof HANDLES_NAME + 1;
		snprintf(env->why, env->whylen, "%s", msg);
	}
	return rc;
}

static int
handles_record(const char *key, const unsigned char *in, size_t n, struct mc_hook_env *env,
	       unsigned char **out, size_t *outn)
{
	return handles_form(key, in, n, env, 0, out, outn);
}

static int
handles_derive(const char *key, const unsigned char *rec, size_t n, struct mc_hook_env *env,
	       unsigned char **out, size_t *outn)
{
	return handles_form(key, rec, n, env, 1, out, outn);
}

/* torch's guarded caches as they lie on disk: "aotautograd/<key>/<entry>" and
 * "fxgraph/<2 chars>/<key>/<entry>", the 2 chars being those after the key's letter. */
static int
graph_file_ok(const char *s)
{
	if (strncmp(s, "aotautograd/", 12) == 0)
		return strchr(s + 12, '/') != NULL && mc__torch_shape_ok(MC_SHAPE_AOTAUTOGRAD, s + 12);
	if (strncmp(s, "fxgraph/", 8) != 0)
		return 0;
	s += 8;
	return s[0] != '\0' && s[1] != '\0' && s[2] == '/' && s[3] == 'f' &&
	       memcmp(s, s + 4, 2) == 0 && strchr(s + 3, '/') != NULL &&
	       mc__torch_shape_ok(MC_SHAPE_FXGRAPH, s + 3);
}

/* Triton's kernels beneath torch's root: "triton/<device>/<kernel hash>/<file>". */
static int
triton_file_ok(const char *s)
{
	return strncmp(s, "triton/", 7) == 0 && mc__torch_shape_ok(MC_SHAPE_TRITON, s + 7);
}

/* A file of an unpacked artifact: torch's guarded caches, the output code written out
 * ("<2 chars>/<name>.py"), autotune results and the kernels a load adds. */
static int
unpacked_file_ok(const char *s)
{
	size_t n = strlen(s);

	return graph_file_ok(s) || triton_file_ok(s) || mc__torch_shape_ok(MC_SHAPE_AUTOTUNE, s) ||
	       (n > 3 + 3 && strcmp(s + n - 3, ".py") == 0 && mc__torch_shape_ok(MC_SHAPE_CODE, s));
}

static int
artifact_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *s = jit_rest(key);

	if (s == NULL || (s = artifact_name(s)) == NULL || (*s != '\0' && *s != '/') ||
	    (*s == '/' && !unpacked_file_ok(s + 1)))
		return why(w, wl, "expected torch_compile_cache/<10 hex>/rank_<n>_<m>/<prefix>/"
			   "artifact_compile_range_<a>_<b>_subgraph_<i> (or artifact_shape_<n>"
			   "_subgraph_<i>), as a file or the files of its folder");
	return MC_OK;
}

/* A file of an inductor_cache folder (an ahead-of-time compile's, or the older adaptor's
 * of a rank): a subset of what torch's inductor types take, those that such a folder is
 * seen to hold. */
static int
aot_inductor_ok(const char *s)
{
	return graph_file_ok(s) || triton_file_ok(s) || mc__torch_shape_ok(MC_SHAPE_AUTOTUNE, s) ||
	       mc__torch_shape_ok(MC_SHAPE_CODE, s);
}

static int
aot_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *s = NULL, *r;

	if (strncmp(key, AOT_DIR, sizeof AOT_DIR - 1) == 0)
		s = seg_of(key + sizeof AOT_DIR - 1, 64, c_hex);
	if (s == NULL ||
	    !((strncmp(s, "inductor_cache/", 15) == 0 && aot_inductor_ok(s + 15)) ||
	      ((r = rank_dir(s)) != NULL && strcmp(r, "model") == 0)))
		return why(w, wl, "expected torch_compile_cache/torch_aot_compile/<64 hex>/ and "
			   "rank_<n>_<m>/model or inductor_cache/<a file of torch's cache>");
	return MC_OK;
}

/* The older adaptor's (InductorAdaptor's) caches of a rank, where vLLM points
 * TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR: torch's in inductor_cache/, Triton's in
 * triton_cache/ ("<kernel hash>/<file>", no device level). */
static int
inductor_check(void *ud, const char *key, char *w, size_t wl)
{
	const char *s = jit_rank(key);

	if (s == NULL ||
	    !((strncmp(s, "inductor_cache/", 15) == 0 && aot_inductor_ok(s + 15)) ||
	      (strncmp(s, "triton_cache/", 13) == 0 &&
	       mc__torch_shape_ok(MC_SHAPE_KERNEL, s + 13))))
		return why(w, wl, "expected torch_compile_cache/<10 hex>/rank_<n>_<m>/ and "
			   "inductor_cache/<a file of torch's cache> or triton_cache/<kernel hash>/"
			   "<file name>");
	return MC_OK;
}

/* Any other file beneath the root, kept when the caller asks: its relative path. */
static int
extra_check(void *ud, const char *key, char *w, size_t wl)
{
	if (!mc__torch_shape_ok(MC_SHAPE_PATH, key))
		return why(w, wl, "expected a relative path of plain file names");
	return MC_OK;
}

static int
same_path_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t len)
{
	size_t n = strlen(key);

	if (n == 0 || n >= len)
		return MC_ERR_INVALID;
	memcpy(buf, key, n + 1);
	return MC_OK;
}

/* ---- where vLLM keeps its cache, told as vLLM 0.11 tells it ---- */

static int
no_mem(mc_ctx *ctx)
{
	return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
}

/* A folder vLLM reads from the environment: empty, vLLM would keep its cache in the
 * working folder; starting with white space, in a folder of that name there. */
static int
vllm_env_dir(mc_ctx *ctx, const char *var, const char *v)
{
	if (v[0] == '\0')
		return mc__err(ctx, MC_ERR_INVALID, "%s is set but empty: vLLM would keep its cache "
			       "in the working folder; set it to a folder or unset it", var);
	if (isspace((unsigned char)v[0]))
		return mc__err(ctx, MC_ERR_INVALID, "%s starts with white space: vLLM would take "
			       "it as a folder in the working folder; set it to a folder or unset it",
			       var);
	return MC_OK;
}

/* The home folder os.path.expanduser() puts for "~" (user NULL) or "~user", n bytes
 * of it (trailing slashes dropped); NULL when it cannot be told. */
static const char *
user_home(const char *user, size_t ul, size_t *n)
{
	const char *home = user == NULL ? getenv("HOME") : NULL;
	struct passwd *pw = NULL;
	char name[256];

	if (user == NULL && home == NULL)
		pw = getpwuid(getuid());
	else if (user != NULL && ul < sizeof name) {
		memcpy(name, user, ul);
		name[ul] = '\0';
		pw = getpwnam(name);
	}
	if (home == NULL && pw != NULL)
		home = pw->pw_dir;
	if (home == NULL)
		return NULL;
	for (*n = strlen(home); *n > 0 && home[*n - 1] == '/'; (*n)--)
		;
	return home;
}

/* os.path.expanduser(v), then tail; *out malloc'd, *named: the length of the first. */
static int
expand(mc_ctx *ctx, const char *var, const char *v, const char *tail, char **out,
       size_t *named)
{
	const char *home = NULL, *rest = v;
	size_t hl = 0, n;

	if (v[0] == '~') {
		size_t ul = strcspn(v + 1, "/");
		home = user_home(ul == 0 ? NULL : v + 1, ul, &hl);
		if (home == NULL && ul == 0)
			return mc__err(ctx, MC_ERR_INVALID, "HOME is not set and the password database "
				       "has no entry for this user, so vLLM's cache cannot be told; "
				       "set VLLM_CACHE_ROOT");
		if (home != NULL)
			rest = v + 1 + ul;
	}
	n = hl + strlen(rest);
	if ((home != NULL ? home[0] : rest[0]) != '/')
		return mc__err(ctx, MC_ERR_INVALID, "%s (%s) is not an absolute path: vLLM would keep "
			       "its cache in the working folder; set VLLM_CACHE_ROOT", var, v);
	if ((*out = malloc(n + strlen(tail) + 1)) == NULL)
		return no_mem(ctx);
	memcpy(*out, home != NULL ? home : "", hl);
	memcpy(*out + hl, rest, strlen(rest));
	memcpy(*out + n, tail, strlen(tail) + 1);
	*named = n;
	return MC_OK;
}

/* envs.VLLM_CACHE_ROOT: os.path.expanduser($VLLM_CACHE_ROOT), else of
 * $XDG_CACHE_HOME/vllm, else of ~/.cache/vllm; named as far as the variable (or the
 * home folder) goes. */
static int
vllm_default_root(mc_ctx *ctx, char **out, size_t *named)
{
	const char *env = getenv("VLLM_CACHE_ROOT"), *xdg = getenv("XDG_CACHE_HOME");
	int rc;

	*out = NULL;
	if (env != NULL) {
		if ((rc = vllm_env_dir(ctx, "VLLM_CACHE_ROOT", env)) != MC_OK)
			return rc;
		return expand(ctx, "VLLM_CACHE_ROOT", env, "", out, named);
	}
	if (xdg != NULL) {
		if ((rc = vllm_env_dir(ctx, "XDG_CACHE_HOME", xdg)) != MC_OK)
			return rc;
		return expand(ctx, "XDG_CACHE_HOME", xdg, xdg[strlen(xdg) - 1] == '/' ? "vllm" :
			      "/vllm", out, named);
	}
	return expand(ctx, "the home folder", "~", "/.cache/vllm", out, named);
}

/* Whether key lies in a folder of one Triton kernel: "triton/<device>/<hash>/<file>"
 * (torch's) or "triton_cache/<hash>/<file>" (the older adaptor's), whose files are all
 * of the key's type. */
static int
kernel_folder(const char *key)
{
	const char *c[4] = {NULL, NULL, NULL, NULL}, *p;
	size_t k = 0, n;

	for (p = key + strlen(key); p > key && k < 4; p--)
		if (p[-1] == '/')
			c[k++] = p; /* c[0] the file's name, c[1] the folder's, ... */
	if (k < 3)
		return 0;
	if (strncmp(c[2], "triton_cache/", 13) == 0)
		return 1;
	n = (size_t)(c[1] - c[2]) - 1; /* the device's digits */
	return k == 4 && n > 0 && strspn(c[2], "0123456789") == n &&
	       strncmp(c[3], "triton/", 7) == 0;
}

/* The types. Handlers get the context as their ud, and need none of it. None is a
 * folder unit as a whole (a binary artifact is a file in the folder of its model's other
 * files, which would make that whole folder one); Triton's kernel folders are. */
static const struct mc_typedesc vllm[] = {
	{.name = "vllm_meta", .tier = "vllm",
	 .key_check = meta_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .used_role = MC_ROLE_MODEL},
	{.name = "vllm_handles", .tier = "vllm", .flags = MC_TYPE_DERIVE_ALL,
	 .key_check = handles_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .record = handles_record, .derive = handles_derive, .used_role = MC_ROLE_MODEL},
	{.name = "vllm_artifact", .tier = "vllm",
	 .key_check = artifact_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .record = mc__group_record, .derive = mc__group_derive, .unit_key = kernel_folder,
	 .used_role = MC_ROLE_MODEL},
	{.name = "vllm_aot", .tier = "vllm",
	 .key_check = aot_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .record = mc__group_record, .derive = mc__group_derive, .unit_key = kernel_folder,
	 .used_role = MC_ROLE_MODEL},
	{.name = "vllm_inductor", .tier = "vllm",
	 .key_check = inductor_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .record = mc__group_record, .derive = mc__group_derive, .unit_key = kernel_folder,
	 .used_role = MC_ROLE_MODEL},
	{.name = "vllm_extra", .tier = "vllm",
	 .key_check = extra_check, .dest_path = same_path_dest,
	 .default_root = vllm_default_root, .torch27_id = -1, .export_rank = -1,
	 .used_role = MC_ROLE_MODEL},
};

int
mc__register_vllm(mc_ctx *ctx)
{
	return mc__register_types(ctx, vllm, sizeof vllm / sizeof vllm[0]);
}
