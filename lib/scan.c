/*
 * scan.c - finds torch's cache artifacts in a live inductor cache dir: the files of
 * fxgraph/, aotautograd/, <2 chars>/<hash>.best_config and dynamo/. Locks and temp
 * files are skipped, as is everything no recorded type describes (each reported).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mc_private.h"

struct scan {
	mc_writer *w;
	mc_ctx *ctx;
	mc_scan_fn fn;
	void *ud;
	const char *root;
	size_t rootlen;
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
	rc = mc__writer_add_range(s->w, type, key, path, 0, (uint64_t)st.st_size, NULL);
	if (rc == MC_ERR_BAD_KEY) {
		snprintf(why, sizeof why, "name does not fit type %s", type);
		report(s, MC_SCAN_SKIPPED, path, why);
		return MC_OK;
	}
	if (rc != MC_OK)
		return rc;
	/* fxgraph and aotautograd entries are named after their content's hash; a file whose
	 * name is not would be installed under another name, so it is not recorded. */
	if (mc__writer_last_sha256(s->w) != NULL) {
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		char h[52];
		mc__torch_b32_51(mc__writer_last_sha256(s->w), h);
		if (strcmp(h, base) != 0) {
			mc__writer_drop_last(s->w);
			report(s, MC_SCAN_SKIPPED, path, "file name is not the hash of its content");
			return MC_OK;
		}
	}
	report(s, MC_SCAN_RECORDED, path, type);
	return MC_OK;
}

/* Sorted listing of a folder (without . and ..), so scans are deterministic. */
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
		if (k == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 32) * sizeof *nv);
			if (nv == NULL)
				goto nomem;
			v = nv;
		}
		if ((v[k] = mc__strdup(de->d_name)) == NULL)
			goto nomem;
		k++;
	}
	closedir(d);
	if (k > 1) {
		size_t i, j;
		for (i = 1; i < k; i++) /* insertion sort: folders are small */
			for (j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
				char *t = v[j];
				v[j] = v[j - 1];
				v[j - 1] = t;
			}
	}
	*names = v;
	*n = k;
	return MC_OK;
nomem:
	closedir(d);
	while (k > 0)
		free(v[--k]);
	free(v);
	return mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
}

static void
free_list(char **v, size_t n)
{
	while (n > 0)
		free(v[--n]);
	free(v);
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

static int
is_dir(const char *path)
{
	struct stat st;

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
		char *p = join(dir, names[i]);
		if (p == NULL) {
			rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		if (visit != skip_visit && is_transient(names[i]))
			rc = skip_tree(s, p, "lock or temp file");
		else
			rc = visit(s, p, names[i], arg);
		free(p);
	}
	free_list(names, n);
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
	if (!is_dir(path)) {
		report(s, MC_SCAN_SKIPPED, path, reason);
		return MC_OK;
	}
	return for_each_child(s, path, skip_visit, reason);
}

/* A key folder of fxgraph/ or aotautograd/: each file in it is one entry of the key. */
struct keyed {
	const char *type;
	const char *key;
};

static int
keyed_file(struct scan *s, const char *path, const char *name, const void *arg)
{
	const struct keyed *k = arg;

	return add_file(s, path, k->type, k->key);
}

static int
key_dir(struct scan *s, const char *path, const char *name, const void *type)
{
	struct keyed k = {type, name};

	if (!is_dir(path))
		return skip_tree(s, path, "unexpected file in the cache layout");
	return for_each_child(s, path, keyed_file, &k);
}

/* fxgraph/<2 chars>/ holds key folders. */
static int
prefix_dir(struct scan *s, const char *path, const char *name, const void *type)
{
	if (!is_dir(path))
		return skip_tree(s, path, "unexpected file in the cache layout");
	return for_each_child(s, path, key_dir, type);
}

static int
dynamo_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	size_t len = strlen(name);
	char *entry;
	int rc;

	if (!is_dir(path) && len > 15 && strncmp(name, "code_state_", 11) == 0 &&
	    ends_with(name, ".pkl")) {
		/* torch's file name replaced the key's special characters by '_'; the name
		 * part is itself a key that maps to the same file. */
		char key[256];
		snprintf(key, sizeof key, "%.*s", (int)(len - 15), name + 11);
		return add_file(s, path, "pgo", key);
	}
	if (!is_dir(path))
		return skip_tree(s, path, "unknown dynamo file");
	if ((entry = join(path, "entry")) == NULL)
		return mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
	rc = access(entry, F_OK) == 0 ? add_file(s, entry, "precompile", name)
				       : skip_tree(s, path, "not a precompile entry");
	free(entry);
	return rc;
}

/* <2 chars>/: autotune configs beside generated kernel code. */
static int
code_entry(struct scan *s, const char *path, const char *name, const void *two)
{
	char key[512];

	if (!ends_with(name, ".best_config") || is_dir(path))
		return skip_tree(s, path, "generated kernel code (not a recorded type)");
	snprintf(key, sizeof key, "%s/%s", (const char *)two, name);
	return add_file(s, path, "autotune", key);
}

static int
code_dir(struct scan *s, const char *path, const char *name, const void *arg)
{
	return for_each_child(s, path, code_entry, name);
}

static int
top_entry(struct scan *s, const char *path, const char *name, const void *arg)
{
	if (strcmp(name, "fxgraph") == 0 && is_dir(path))
		return for_each_child(s, path, prefix_dir, "inductor");
	if (strcmp(name, "aotautograd") == 0 && is_dir(path))
		return for_each_child(s, path, key_dir, "aot_autograd");
	if (strcmp(name, "dynamo") == 0 && is_dir(path))
		return for_each_child(s, path, dynamo_entry, NULL);
	if (strcmp(name, "locks") == 0)
		return skip_tree(s, path, "lock or temp file");
	if (strlen(name) == 2 && is_dir(path))
		return code_dir(s, path, name, NULL);
	return skip_tree(s, path, "not a recorded type");
}

int
mc_writer_add_cache_dir(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	struct scan s;
	size_t before;
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
	while (s.rootlen > 1 && dir[s.rootlen - 1] == '/')
		s.rootlen--;
	if (!is_dir(dir))
		return mc__err(s.ctx, MC_ERR_IO, "%s: not a folder", dir);
	before = mc_writer_artifact_count(w);
	rc = for_each_child(&s, dir, top_entry, NULL);
	if (rc == MC_OK)
		mc__writer_note_source(w, mc_writer_artifact_count(w) - before);
	return rc;
}
