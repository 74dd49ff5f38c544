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

/* Walks everything below path, reporting each file as skipped with reason. */
static int
skip_tree(struct scan *s, const char *path, const char *reason)
{
	char **names;
	size_t n, i;
	int rc;

	if (!is_dir(path)) {
		report(s, MC_SCAN_SKIPPED, path, reason);
		return MC_OK;
	}
	if ((rc = list_dir(s, path, &names, &n)) != MC_OK)
		return rc;
	for (i = 0; i < n && rc == MC_OK; i++) {
		char *p = join(path, names[i]);
		if (p == NULL) {
			rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		rc = skip_tree(s, p, reason);
		free(p);
	}
	free_list(names, n);
	return rc;
}

/* fxgraph/<2>/<key>/<H> and aotautograd/<key>/<H>: each file in a key folder. */
static int
scan_keyed(struct scan *s, const char *dir, const char *type, int levels)
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
		if (is_transient(names[i]))
			rc = skip_tree(s, p, "lock or temp file");
		else if (levels > 1 && is_dir(p))
			rc = scan_keyed(s, p, type, levels - 1);
		else if (levels == 1 && is_dir(p)) {
			/* p is the key folder; its files are the entries. */
			char **files;
			size_t nf, k;
			if ((rc = list_dir(s, p, &files, &nf)) == MC_OK) {
				for (k = 0; k < nf && rc == MC_OK; k++) {
					char *f = join(p, files[k]);
					if (f == NULL) {
						rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
						break;
					}
					if (is_transient(files[k]))
						rc = skip_tree(s, f, "lock or temp file");
					else
						rc = add_file(s, f, type, names[i]);
					free(f);
				}
				free_list(files, nf);
			}
		} else
			rc = skip_tree(s, p, "unexpected file in the cache layout");
		free(p);
	}
	free_list(names, n);
	return rc;
}

static int
scan_dynamo(struct scan *s, const char *dir)
{
	char **names;
	size_t n, i;
	int rc;

	if ((rc = list_dir(s, dir, &names, &n)) != MC_OK)
		return rc;
	for (i = 0; i < n && rc == MC_OK; i++) {
		char *p = join(dir, names[i]);
		size_t len = strlen(names[i]);
		if (p == NULL) {
			rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		if (is_transient(names[i])) {
			rc = skip_tree(s, p, "lock or temp file");
		} else if (!is_dir(p) && len > 15 && strncmp(names[i], "code_state_", 11) == 0 &&
			   ends_with(names[i], ".pkl")) {
			/* torch's file name replaced the key's special characters by '_'; the
			 * name part is itself a key that maps to the same file. */
			char key[256];
			snprintf(key, sizeof key, "%.*s", (int)(len - 15), names[i] + 11);
			rc = add_file(s, p, "pgo", key);
		} else if (is_dir(p)) {
			char *entry = join(p, "entry");
			if (entry == NULL)
				rc = mc__err(s->ctx, MC_ERR_NOMEM, "out of memory");
			else if (access(entry, F_OK) == 0)
				rc = add_file(s, entry, "precompile", names[i]);
			else
				rc = skip_tree(s, p, "not a precompile entry");
			free(entry);
		} else {
			rc = skip_tree(s, p, "unknown dynamo file");
		}
		free(p);
	}
	free_list(names, n);
	return rc;
}

static int
scan_code_dir(struct scan *s, const char *dir, const char *two)
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
		if (is_transient(names[i])) {
			rc = skip_tree(s, p, "lock or temp file");
		} else if (ends_with(names[i], ".best_config") && !is_dir(p)) {
			char key[512];
			snprintf(key, sizeof key, "%s/%s", two, names[i]);
			rc = add_file(s, p, "autotune", key);
		} else {
			rc = skip_tree(s, p, "generated kernel code (not a recorded type)");
		}
		free(p);
	}
	free_list(names, n);
	return rc;
}

int
mc_writer_add_cache_dir(mc_writer *w, const char *dir, mc_scan_fn fn, void *ud)
{
	struct scan s;
	char **names;
	size_t n, i, before;
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
	if ((rc = list_dir(&s, dir, &names, &n)) != MC_OK)
		return rc;
	for (i = 0; i < n && rc == MC_OK; i++) {
		char *p = join(dir, names[i]);
		if (p == NULL) {
			rc = mc__err(s.ctx, MC_ERR_NOMEM, "out of memory");
			break;
		}
		if (strcmp(names[i], "fxgraph") == 0 && is_dir(p))
			rc = scan_keyed(&s, p, "inductor", 2);
		else if (strcmp(names[i], "aotautograd") == 0 && is_dir(p))
			rc = scan_keyed(&s, p, "aot_autograd", 1);
		else if (strcmp(names[i], "dynamo") == 0 && is_dir(p))
			rc = scan_dynamo(&s, p);
		else if (strcmp(names[i], "locks") == 0 || is_transient(names[i]))
			rc = skip_tree(&s, p, "lock or temp file");
		else if (strlen(names[i]) == 2 && is_dir(p))
			rc = scan_code_dir(&s, p, names[i]);
		else
			rc = skip_tree(&s, p, "not a recorded type");
		free(p);
	}
	free_list(names, n);
	if (rc == MC_OK)
		mc__writer_note_source(w, mc_writer_artifact_count(w) - before);
	return rc;
}
