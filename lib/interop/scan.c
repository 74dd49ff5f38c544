/*
 * scan.c - finds torch's cache artifacts in a live inductor cache dir: the files of
 * fxgraph/, aotautograd/, dynamo/, the generated code and autotune configs of the
 * <2 chars>/ folders, the GEMM timings of cache/, and Triton's kernels in triton/; and
 * vLLM's compile cache, whose files are told apart by vLLM's types' key checks.
 * Locks and temp files are skipped; anything else is reported and skipped, or kept
 * as type "extra" when the caller asks.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interop/interop.h"

struct scan {
	int keep_unknown;
	mc_writer *w;
	mc_ctx *ctx;
	mc_scan_fn fn;
	void *ud;
	const char *root;
	size_t rootlen;
	const char *extra;    /* the type of files kept though unknown */
	const char *seen;     /* the entry being visited, and its type as the folder's */
	unsigned char seen_type; /* listing gave it (DT_UNKNOWN: not given) */
};

static void
report(struct scan *s, int what, const char *path, const char *text)
{
	if (s->fn != NULL)
		s->fn(s->ud, what, path + s->rootlen + 1, text);
}

static int
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* torch's temp files (".<pid>.<tid>.tmp", tempfile names) and locks are never packed. */
static int
is_transient(const char *name)
{
	return ends_with(name, ".lock") || ends_with(name, ".tmp") || name[0] == '.';
}

static int unknown(struct scan *s, const char *path, const char *reason);
static int unknown_visit(struct scan *s, const char *path, const char *name, const void *reason);

/* The recorded form of the file at path (buf, n bytes), from its type's hook, which is
 * told the file's folder as an absolute path. */
static int
record_hook(struct scan *s, const struct mc_type *t, const char *path, const char *key,
	    const char *buf, size_t n, unsigned char **rec, size_t *recn)
{
	char *dir = mc__abs_path(path), *slash, why[MC_ERRBUF] = "";
	struct mc_hook_env env = {s->ctx, dir, NULL, NULL, why, sizeof why};
	int rc;

	if (dir == NULL)
		return errno == ENOMEM ? mc__err(s->ctx, MC_ERR_NOMEM, "out of memory")
				       : mc__errno(s->ctx, MC_ERR_IO, "cannot tell the absolute path "
						   "of", path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	rc = t->record(key, (const unsigned char *)buf, n, &env, rec, recn);
	free(dir);
	if (rc != MC_OK && why[0] != '\0')
		return mc__err(s->ctx, rc, "%s: %s", path, why);
	if (rc != MC_OK)
		return mc__err(s->ctx, rc, "%s: %s", path, mc_strerror(rc));
	return MC_OK;
}

/* Records a file of size bytes: one whose type records it in another form (a Triton
 * group file, tiers.h) in that form, given from memory; any other from its path, a
 * graph file named after its content's hash checked for that as it is read.
 * executable: the file has the owner's execute bit, which the artifact keeps. */
static int
record_file(struct scan *s, const char *path, const char *type, const char *key, uint64_t size,
	    int executable)
{
	const struct mc_type *t = mc__find_type(s->ctx, type);
	unsigned how = (executable ? MC_WADD_EXEC : 0) |
		       (t != NULL && (t->flags & MC_TYPE_WANTS_SHA256) ? MC_WADD_NAMED : 0);
	unsigned char *rec = NULL;
	char *buf;
	size_t n, recn = 0;
	int rc;

	if (size > MC_DERIVE_MAX && mc__derives(t, key) && (t->flags & MC_TYPE_DERIVE_ALL))
		return mc__err(s->ctx, MC_ERR_LIMIT, "%s: %" PRIu64 " bytes, over the %u a file of "
			       "type %s may have", path, size, MC_DERIVE_MAX, type);
	if (size > MC_DERIVE_MAX || !mc__derives(t, key))
		return mc__writer_add_range(s->w, type, key, path, 0, size, how, NULL);
	if ((rc = mc__read_small_file(s->ctx, path, MC_DERIVE_MAX, &buf, &n)) != MC_OK)
		return rc;
	rc = record_hook(s, t, path, key, buf, n, &rec, &recn);
	free(buf);
	if (rc != MC_OK)
		return rc;
	if (rec == NULL)
		return mc__writer_add_range(s->w, type, key, path, 0, size, how, NULL);
	rc = mc__writer_add_bytes(s->w, type, key, rec, recn, executable, NULL);
	free(rec);
	return rc;
}

static int
add_file(struct scan *s, const char *path, const char *type, const char *key)
{
	struct stat st;
	char why[MC_ERRBUF];
	int rc;

	if (lstat(path, &st) != 0)
		return mc__errno(s->ctx, MC_ERR_IO, "cannot stat", path);
	if (!S_ISREG(st.st_mode)) {
		report(s, MC_SCAN_SKIPPED, path, "not a regular file");
		return MC_OK;
	}
	rc = record_file(s, path, type, key, (uint64_t)st.st_size, (st.st_mode & S_IXUSR) != 0);
	if (rc == MC_ERR_BAD_KEY) {
		snprintf(why, sizeof why, "name does not fit type %s", type);
		if (strcmp(type, s->extra) == 0) {
			report(s, MC_SCAN_SKIPPED, path, why);
			return MC_OK;
		}
		return unknown(s, path, why);
	}
	if (rc != MC_OK)
		return rc;
	/* fxgraph and aotautograd entries are named after their content's hash; a file whose
	 * name is not would be installed under another name, so it is not recorded. Where
	 * the hash is not known yet (format version 2), the save checks as it reads. */
	if (mc__writer_last_sha256(s->w) != NULL &&
	    !mc__torch_named_by(path, mc__writer_last_sha256(s->w))) {
		mc__writer_drop_last(s->w);
		return unknown(s, path, "file name is not the hash of its content");
	}
	report(s, MC_SCAN_RECORDED, path, type);
	return MC_OK;
}

/* A listed entry: its type as the listing gives it (d_type), then its name. */
static int
name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x + 1, *(char *const *)y + 1);
}

/* Sorted listing of a folder (without . and ..), so scans are deterministic: each entry
 * a byte of its type (d_type), then its name. */
static int
list_dir(struct scan *s, const char *path, char ***names, size_t *n)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **v = NULL;
	size_t k = 0, cap = 0;

	*names = NULL;
	*n = 0;
	if (d == NULL)
		return mc__errno(s->ctx, MC_ERR_IO, "cannot read folder", path);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (mc__grow(&v, &cap, k + 1, sizeof *v) != MC_OK)
			goto nomem;
		if ((v[k] = malloc(strlen(de->d_name) + 2)) == NULL)
			goto nomem;
		v[k][0] = (char)de->d_type;
		strcpy(v[k] + 1, de->d_name);
		k++;
	}
	closedir(d);
	/* Triton's kernel folder of a large cache holds tens of thousands of entries. */
	if (k > 1)
		qsort(v, k, sizeof *v, name_cmp);
	*names = v;
	*n = k;
	return MC_OK;
nomem:
	closedir(d);
	mc__strv_free(v, k);
	return mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
}

static char *
join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);

	if (p != NULL)
		snprintf(p, n, "%s/%s", a, b);
	return p;
}

/* Whether path is a folder (not a link to one): the listing's word for the entry being
 * visited, where it gave one, else lstat's. */
static int
is_dir(struct scan *s, const char *path)
{
	struct stat st;

	if (s->seen != NULL && s->seen_type != DT_UNKNOWN && strcmp(path, s->seen) == 0)
		return s->seen_type == DT_DIR;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Calls visit for each entry of folder dir, in name order, with its path and name;
 * arg is passed through. Lock and temp files are reported as skipped instead. */
typedef int (*visit_fn)(struct scan *s, const char *path, const char *name, const void *arg);

static int skip_tree(struct scan *s, const char *path, const char *reason);
static int skip_visit(struct scan *s, const char *path, const char *name, const void *reason);

static int
for_each_child(struct scan *s, const char *dir, visit_fn visit, const void *arg)
{
	char **names;
	size_t n, i;
	int rc;

	if ((rc = list_dir(s, dir, &names, &n)) != MC_OK)
		return rc;
	for (i = 0; i < n && rc == MC_OK; i++) {
		const char *name = names[i] + 1;
		char *p = join(dir, name);
		if (p == NULL) {
			rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		s->seen = p;
		s->seen_type = (unsigned char)names[i][0];
		if (visit != skip_visit && is_transient(name))
			rc = skip_tree(s, p, "lock or temp file");
		else
			rc = visit(s, p, name, arg);
		s->seen = NULL;
		free(p);
	}
	mc__strv_free(names, n);
	return rc;
}

static int
skip_visit(struct scan *s, const char *path, const char *name, const void *reason)
{
	return skip_tree(s, path, reason);
}

/* Walks everything below path, reporting each file as skipped with reason. */
static int
skip_tree(struct scan *s, const char *path, const char *reason)
{
	if (!is_dir(s, path)) {
		report(s, MC_SCAN_SKIPPED, path, reason);
		return MC_OK;
	}
	return for_each_child(s, path, skip_visit, reason);
}

/* A key folder of fxgraph/ or aotautograd/: each file in it is one entry of the key (one
 * per set of guards), an artifact of its own keyed "<key>/<entry>". */
struct keyed {
	const char *type;
	const char *key;
};

static int
keyed_file(struct scan *s, const char *path, const char *name, const void *arg)
{
	const struct keyed *k = arg;
	char key[MC_KEY_MAX + 1];

	if ((size_t)snprintf(key, sizeof key, "%s/%s", k->key, name) >= sizeof key)
		return unknown(s, path, "name too long");
	return add_file(s, path, k->type, key);
}

static int
key_dir(struct scan *s, const char *path, const char *name, const void *type)
{
	struct keyed k = {type, name};

	if (!is_dir(s, path))
		return unknown(s, path, "unexpected file in the cache layout");
	return for_each_child(s, path, keyed_file, &k);
}

/* fxgraph/<2 chars>/ holds key folders. */
static int
prefix_dir(struct scan *s, const char *path, const char *name, const void *type)
{
	if (!is_dir(s, path))
		return unknown(s, path, "unexpected file in the cache layout");
	return for_each_child(s, path, key_dir, type);
}

static int
dynamo_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	size_t len = strlen(name);
	char *entry;
	int rc;

	if (!is_dir(s, path) && len > 15 && strncmp(name, "code_state_", 11) == 0 &&
	    ends_with(name, ".pkl")) {
		/* torch's file name replaced the key's special characters by '_'; the name
		 * part is itself a key that maps to the same file. */
		char key[256];
		snprintf(key, sizeof key, "%.*s", (int)(len - 15), name + 11);
		return add_file(s, path, "pgo", key);
	}
	if (!is_dir(s, path))
		return unknown(s, path, "unknown dynamo file");
	if ((entry = join(path, "entry")) == NULL)
		return mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
	rc = access(entry, F_OK) == 0 ? add_file(s, entry, "precompile", name)
				       : unknown(s, path, "not a precompile entry");
	free(entry);
	return rc;
}

/* Something no type describes: kept as "extra" when asked, else reported. */
static int
unknown(struct scan *s, const char *path, const char *reason)
{
	if (!s->keep_unknown)
		return skip_tree(s, path, reason);
	if (is_dir(s, path))
		return for_each_child(s, path, unknown_visit, reason);
	return add_file(s, path, s->extra, path + s->rootlen + 1);
}

static int
unknown_visit(struct scan *s, const char *path, const char *name, const void *reason)
{
	return unknown(s, path, reason);
}

/* <2 chars>/: autotune configs beside generated kernel code. */
static int
code_entry(struct scan *s, const char *path, const char *name, const void *two)
{
	char key[512];

	if (is_dir(s, path))
		return unknown(s, path, "folder inside a kernel code folder");
	snprintf(key, sizeof key, "%s/%s", (const char *)two, name);
	return add_file(s, path, ends_with(name, ".best_config") ? "autotune" : "kernel_code", key);
}

/* triton/<device>/<kernel hash>/<files>, or a flat Triton cache (device "0"); or
 * Triton's own cache, type triton_home, with no device in its keys (dev NULL). */
struct kernel {
	const char *dev;
	const char *hash;
};

static int
triton_file(struct scan *s, const char *path, const char *name, const void *arg)
{
	const struct kernel *k = arg;
	char key[1024];

	if (is_dir(s, path))
		return unknown(s, path, "folder inside a Triton kernel folder");
	if (k->dev == NULL)
		snprintf(key, sizeof key, "%s/%s", k->hash, name);
	else
		snprintf(key, sizeof key, "%s/%s/%s", k->dev, k->hash, name);
	return add_file(s, path, k->dev == NULL ? "triton_home" : "triton", key);
}

static int
triton_kernel(struct scan *s, const char *path, const char *name, const void *dev)
{
	struct kernel k = {dev, name};

	/* Triton stages a kernel in tmp.pid_<pid>_<n>/ before renaming it into place. */
	if (strncmp(name, "tmp.", 4) == 0)
		return skip_tree(s, path, "lock or temp file");
	if (!is_dir(s, path))
		return unknown(s, path, "file outside a Triton kernel folder");
	return for_each_child(s, path, triton_file, &k);
}

static int
triton_device(struct scan *s, const char *path, const char *name, const void *arg)
{
	if (!is_dir(s, path) || strspn(name, "0123456789") != strlen(name))
		return unknown(s, path, "not a Triton device folder");
	return for_each_child(s, path, triton_kernel, name);
}

static int
gemm_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	if (is_dir(s, path))
		return unknown(s, path, "folder inside the GEMM timing cache");
	return add_file(s, path, "gemm_timing", name);
}

static int
code_dir(struct scan *s, const char *path, const char *name, const void *arg)
{
	return for_each_child(s, path, code_entry, name);
}

static int
top_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	if (strcmp(name, "fxgraph") == 0 && is_dir(s, path))
		return for_each_child(s, path, prefix_dir, "inductor");
	if (strcmp(name, "aotautograd") == 0 && is_dir(s, path))
		return for_each_child(s, path, key_dir, "aot_autograd");
	if (strcmp(name, "dynamo") == 0 && is_dir(s, path))
		return for_each_child(s, path, dynamo_entry, NULL);
	if (strcmp(name, MC_TRITON_SUBDIR) == 0 && is_dir(s, path))
		return for_each_child(s, path, triton_device, NULL);
	if (strcmp(name, "cache") == 0 && is_dir(s, path))
		return for_each_child(s, path, gemm_entry, NULL);
	if (strcmp(name, "locks") == 0)
		return skip_tree(s, path, "lock or temp file");
	if (strlen(name) == 2 && is_dir(s, path))
		return code_dir(s, path, name, NULL);
	return unknown(s, path, "not a known cache file");
}

/* vLLM's root: each file is recorded as the first of vLLM's types whose key check takes
 * its path beneath the root, and what it tells of the cache noted as labels. */
static int
vllm_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	static const char *const types[] = {"vllm_meta", "vllm_handles", "vllm_artifact",
					    "vllm_aot", "vllm_inductor"};
	const char *key = path + s->rootlen + 1;
	char why[MC_ERRBUF];
	size_t i;

	if (is_dir(s, path))
		return for_each_child(s, path, vllm_entry, NULL);
	for (i = 0; i < sizeof types / sizeof types[0]; i++) {
		const struct mc_type *t = mc__find_type(s->ctx, types[i]);
		if (t != NULL && t->key_check(t->ud, key, why, sizeof why) == MC_OK) {
			int rc = add_file(s, path, types[i], key);
			return rc != MC_OK ? rc : mc__vllm_note(s->w, types[i], key, path);
		}
	}
	return unknown(s, path, "not a known vLLM cache file");
}

/* What a scanned folder is. */
enum { SCAN_CACHE_DIR, SCAN_TRITON_FLAT, SCAN_TRITON_HOME, SCAN_VLLM };

static int
scan_dir(mc_writer *w, const char *dir, int what, mc_scan_fn fn, void *ud)
{
	struct scan s;
	size_t before;
	uint64_t t;
	int rc;

	if (w == NULL || dir == NULL)
		return MC_ERR_INVALID;
	memset(&s, 0, sizeof s);
	s.w = w;
	s.ctx = mc__writer_ctx(w);
	s.fn = fn;
	s.ud = ud;
	s.root = dir;
	s.rootlen = strlen(dir);
	s.keep_unknown = mc__writer_keep_unknown(w);
	s.extra = what == SCAN_VLLM ? "vllm_extra" : "extra";
	while (s.rootlen > 1 && dir[s.rootlen - 1] == '/')
		s.rootlen--;
	if (!is_dir(&s, dir))
		return mc__err(s.ctx, MC_ERR_IO, "%s: not a folder", dir);
	if (what == SCAN_CACHE_DIR)
		mc__writer_set_scan(w, fn, ud);
	before = mc_writer_artifact_count(w);
	t = mc__prof_start(s.ctx);
	if (what == SCAN_CACHE_DIR)
		rc = for_each_child(&s, dir, top_entry, NULL);
	else if (what == SCAN_VLLM)
		rc = for_each_child(&s, dir, vllm_entry, NULL);
	else
		rc = for_each_child(&s, dir, triton_kernel, what == SCAN_TRITON_FLAT ? "0" : NULL);
	if (rc == MC_OK)
		mc__writer_note_source(w, mc_writer_artifact_count(w) - before);
	mc__prof_since(s.ctx, "scan", t, 0);
	return rc;
}

int
mc_writer_add_cache_dir(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	return scan_dir(w, dir, SCAN_CACHE_DIR, fn, ud);
}

int
mc_writer_add_triton_dir(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	return scan_dir(w, dir, SCAN_TRITON_FLAT, fn, ud);
}

int
mc_writer_add_triton_cache(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	return scan_dir(w, dir, SCAN_TRITON_HOME, fn, ud);
}

int
mc_writer_add_vllm_dir(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	return scan_dir(w, dir, SCAN_VLLM, fn, ud);
}
