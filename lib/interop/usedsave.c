/*
 * usedsave.c - a bundle of what a job used: the files of the cache folders that it read
 * or wrote, each with the rest of its unit, recorded into a writer; the others left out.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "interop/interop.h"

/* Why a file is kept, or not. */
enum { KEEP_NO, KEEP_READ, KEEP_WRITTEN, KEEP_UNSEEN, KEEP_UNIT };

/* What a file tells of others: an FX graph entry names generated kernel code (by its
 * file name's stem); a file in a vLLM model's folder itself names the model's
 * artifacts (vllm_compile_cache.py) or tells of them. */
enum { ROLE_NONE, ROLE_FX_ENTRY, ROLE_CODE, ROLE_MODEL_FILE };

/* The reasons counted: MC_UNSEEN_*, then a file there before the job that was not
 * watched. */
#define NOT_WATCHED MC_UNSEEN_KINDS

struct ufile {
	char *path;   /* as mc__usage_join() spells it */
	char *unit;   /* the folder installed as one (a kernel's), or NULL */
	char *model;  /* the vLLM model folder it lies in, or NULL */
	uint32_t art; /* its artifact in the writer */
	uint8_t keep; /* KEEP_* */
	uint8_t role; /* ROLE_* */
};

struct urec {
	mc_usage *u;
	mc_ctx *ctx;
	mc_writer *w;
	const char *root;
	size_t first; /* the writer's artifacts before the scans */
	struct ufile *f;
	size_t n, cap;
	size_t unseen[NOT_WATCHED + 1];
	int rc;
};

static int
ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec : a->tv_nsec < b->tv_nsec;
}

/* Why the file at path is kept: by what the job did with it. */
static int
keep_of(struct urec *r, const char *path)
{
	struct stat st;
	int why, changed;

	switch (mc__usage_file(r->u, path, &why, &changed)) {
	case MC_USEDF_READ: return KEEP_READ;
	case MC_USEDF_UNREAD: return changed ? KEEP_WRITTEN : KEEP_NO;
	case MC_USEDF_UNSEEN:
		if (why == MC_UNSEEN_GONE) /* the file there now is another: the job's */
			return KEEP_WRITTEN;
		r->unseen[why]++;
		return KEEP_UNSEEN;
	default: /* not watched: new, or there from before */
		if (lstat(path, &st) == 0 && !ts_before(&st.st_ctim, mc__usage_started(r->u)))
			return KEEP_WRITTEN;
		r->unseen[NOT_WATCHED]++;
		return KEEP_UNSEEN;
	}
}

/* A copy of path up to the end of its n-th component after root (rootlen bytes). */
static char *
prefix(const char *path, size_t rootlen, size_t n)
{
	const char *c = path + rootlen;
	char *p;

	while (n > 0 && (c = strchr(c + 1, '/')) != NULL)
		n--;
	if (c == NULL)
		return NULL;
	if ((p = malloc((size_t)(c - path) + 1)) != NULL) {
		memcpy(p, path, (size_t)(c - path));
		p[c - path] = '\0';
	}
	return p;
}

/* The unit and model folder of f, a file of type t at key rel. */
static int
place(struct urec *r, struct ufile *f, const struct mc_type *t, const char *rel)
{
	size_t depth = 0, rootlen = strlen(f->path) - strlen(rel) - 1;
	const char *c;

	for (c = rel; *c != '\0'; c++)
		depth += *c == '/';
	if (t != NULL && mc__unit_folder(t, rel) && depth > 0 &&
	    (f->unit = prefix(f->path, rootlen, depth)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	if (t != NULL && t->used_role == MC_ROLE_MODEL && depth >= MC_MODEL_DEPTH) {
		if ((f->model = prefix(f->path, rootlen, MC_MODEL_DEPTH)) == NULL)
			return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
		if (depth == MC_MODEL_DEPTH)
			f->role = ROLE_MODEL_FILE;
	}
	if (t != NULL && t->used_role == MC_ROLE_NAMES_CODE)
		f->role = ROLE_FX_ENTRY;
	else if (t != NULL && t->used_role == MC_ROLE_CODE)
		f->role = ROLE_CODE;
	return MC_OK;
}

/* The mc_scan_fn of the scans (ud: struct urec): each artifact recorded, as it is. */
static void
on_recorded(void *ud, int what, const char *rel, const char *type)
{
	struct urec *r = ud;
	char path[MC_PATH_MAX];
	struct ufile *f;

	if (what != MC_SCAN_RECORDED || r->rc != MC_OK)
		return;
	if (mc__usage_join(path, sizeof path, r->root, rel) != 0) {
		r->rc = mc__err(r->ctx, MC_ERR_INVALID, "%s/%s: path too long", r->root, rel);
		return;
	}
	if (mc__grow(&r->f, &r->cap, r->n + 1, sizeof *r->f) != MC_OK) {
		r->rc = mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
		return;
	}
	f = &r->f[r->n];
	memset(f, 0, sizeof *f);
	if ((f->path = mc__strdup(path)) == NULL) {
		r->rc = mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
		return;
	}
	r->n++;
	f->art = (uint32_t)(mc_writer_artifact_count(r->w) - 1);
	f->keep = (uint8_t)keep_of(r, path);
	r->rc = place(r, f, mc__find_type(r->ctx, type), rel);
}

/* A file by the folder it is grouped by. */
struct gkey {
	const char *dir;
	size_t file;
};

static int
gkey_cmp(const void *x, const void *y)
{
	return strcmp(((const struct gkey *)x)->dir, ((const struct gkey *)y)->dir);
}

/* Keeps every file of a group of which one is kept: the files of one unit, or with
 * model, the model folder's own files with any file in that folder. */
static int
keep_groups(struct urec *r, int model)
{
	struct gkey *g;
	size_t i, j, k, n = 0;

	if ((g = malloc((r->n + 1) * sizeof *g)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < r->n; i++)
		if ((g[n].dir = model ? r->f[i].model : r->f[i].unit) != NULL)
			g[n++].file = i;
	qsort(g, n, sizeof *g, gkey_cmp);
	for (i = 0; i < n; i = j) {
		int used = 0;
		for (j = i; j < n && strcmp(g[j].dir, g[i].dir) == 0; j++)
			used |= r->f[g[j].file].keep != KEEP_NO;
		for (k = i; used && k < j; k++) {
			struct ufile *f = &r->f[g[k].file];
			if (f->keep == KEEP_NO && (!model || f->role == ROLE_MODEL_FILE))
				f->keep = KEEP_UNIT;
		}
	}
	free(g);
	return MC_OK;
}

/* A generated kernel's name: "c" then 51 of base32's [a-z2-7] (torch's code hash). */
#define CODE_NAME 52

static int
b32(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

/* The kernel code files, by the stem of their names. */
struct stem {
	char name[CODE_NAME + 1];
	size_t file;
};

static int
stem_cmp(const void *x, const void *y)
{
	return strcmp(((const struct stem *)x)->name, ((const struct stem *)y)->name);
}

/* Keeps the kernel code files whose names buf (n bytes) holds. */
static void
keep_named(struct urec *r, const struct stem *st, size_t nst, const unsigned char *buf,
	   size_t n)
{
	struct stem key;
	size_t i, k;

	for (i = 0; i + CODE_NAME <= n; i++) {
		const struct stem *hit;
		if (buf[i] != 'c')
			continue;
		for (k = 1; k < CODE_NAME && b32(buf[i + k]); k++)
			;
		if (k < CODE_NAME)
			continue;
		memcpy(key.name, buf + i, CODE_NAME);
		key.name[CODE_NAME] = '\0';
		if ((hit = bsearch(&key, st, nst, sizeof *st, stem_cmp)) == NULL)
			continue;
		while (hit > st && strcmp(hit[-1].name, key.name) == 0)
			hit--;
		for (; hit < st + nst && strcmp(hit->name, key.name) == 0; hit++)
			if (r->f[hit->file].keep == KEEP_NO)
				r->f[hit->file].keep = KEEP_UNIT;
	}
}

/* Reads the FX graph entry at path for the kernel code it names. */
static int
scan_entry(struct urec *r, const struct stem *st, size_t nst, const char *path)
{
	unsigned char buf[65536];
	size_t have = 0;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc = MC_OK;

	if (fd < 0)
		return mc__errno(r->ctx, MC_ERR_IO, "cannot open", path);
	for (;;) {
		if ((got = read(fd, buf + have, sizeof buf - have)) < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = mc__errno(r->ctx, MC_ERR_IO, "cannot read", path);
			break;
		}
		have += (size_t)got;
		keep_named(r, st, nst, buf, have);
		if (got == 0)
			break;
		if (have > CODE_NAME) { /* a name across the end is seen in the next piece */
			memmove(buf, buf + have - (CODE_NAME - 1), CODE_NAME - 1);
			have = CODE_NAME - 1;
		}
	}
	close(fd);
	return rc;
}

/* The generated kernel code each kept FX graph entry names is kept. */
static int
keep_code(struct urec *r)
{
	struct stem *st;
	size_t i, nst = 0;
	int rc = MC_OK;

	if ((st = calloc(r->n + 1, sizeof *st)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < r->n; i++) {
		const char *base = strrchr(r->f[i].path, '/') + 1;
		if (r->f[i].role == ROLE_CODE && strspn(base, "abcdefghijklmnopqrstuvwxyz234567") ==
		    CODE_NAME && (base[CODE_NAME] == '.' || base[CODE_NAME] == '\0')) {
			memcpy(st[nst].name, base, CODE_NAME);
			st[nst++].file = i;
		}
	}
	qsort(st, nst, sizeof *st, stem_cmp);
	for (i = 0; nst > 0 && rc == MC_OK && i < r->n; i++)
		if (r->f[i].role == ROLE_FX_ENTRY && r->f[i].keep != KEEP_NO)
			rc = scan_entry(r, st, nst, r->f[i].path);
	free(st);
	return rc;
}

/* The files not seen, told by reason: "N on a noatime mount, M ...". */
static void
say_unseen(const struct urec *r, char *buf, size_t len)
{
	size_t k, at = 0;
	int n;

	buf[0] = '\0';
	for (k = 0; k <= NOT_WATCHED; k++) {
		if (r->unseen[k] == 0)
			continue;
		n = snprintf(buf + at, len - at, "%s%zu %s", at > 0 ? ", " : "", r->unseen[k],
			     k == NOT_WATCHED ? "there before the job and not watched"
					      : mc_unseen_text((int)k));
		if (n < 0 || (size_t)n >= len - at)
			break;
		at += (size_t)n;
	}
}

/* Takes back the artifacts the scans recorded that are not kept, or with all every one
 * they recorded (those after a failure too, which no file names). */
static int
leave_out(struct urec *r, int all, size_t *left)
{
	size_t total = mc_writer_artifact_count(r->w), i;
	unsigned char *gone;
	int rc;

	*left = 0;
	if ((gone = calloc(total + 1, 1)) == NULL)
		return mc__err(r->ctx, MC_ERR_NOMEM, "out of memory");
	if (all)
		memset(gone + r->first, 1, total - r->first);
	for (i = 0; !all && i < r->n; i++)
		gone[r->f[i].art] = r->f[i].keep == KEEP_NO;
	for (i = r->first; i < total; i++)
		*left += gone[i];
	rc = *left > 0 ? mc__writer_drop(r->w, gone) : MC_OK;
	free(gone);
	return rc;
}

/* The scans into w, what each file is to the job decided as it is recorded, then the
 * units, the kernel code and the model folders kept with what they belong to. */
static int
scan_used(struct urec *r)
{
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && r->rc == MC_OK && i < MC_USAGE_SCANS; i++)
		rc = mc__usage_scan(r->ctx, r->w, i, on_recorded, r, &r->root);
	if (rc == MC_OK)
		rc = r->rc;
	if (rc == MC_OK && r->n != mc_writer_artifact_count(r->w) - r->first)
		rc = mc__err(r->ctx, MC_ERR_INVALID, "mc_usage_record: %zu artifacts recorded, "
			     "%zu told", mc_writer_artifact_count(r->w) - r->first, r->n);
	if (rc == MC_OK)
		rc = keep_groups(r, 0);
	if (rc == MC_OK)
		rc = keep_code(r);
	if (rc == MC_OK)
		rc = keep_groups(r, 1);
	return rc;
}

int
mc_usage_record(mc_usage *u, mc_writer *w, unsigned flags, size_t *left, size_t *kept_unseen)
{
	struct urec r;
	size_t i, nleft = 0, unseen = 0, k;
	char why[1024];
	int rc;

	if (left != NULL)
		*left = 0;
	if (kept_unseen != NULL)
		*kept_unseen = 0;
	if (u == NULL || w == NULL || (flags & ~MC_USED_KEEP_UNSEEN) != 0)
		return MC_ERR_INVALID;
	if ((rc = mc__usage_to_record(u, 0)) != MC_OK)
		return rc;
	memset(&r, 0, sizeof r);
	r.u = u;
	r.ctx = mc__usage_ctx(u);
	r.w = w;
	r.first = mc_writer_artifact_count(w);
	rc = scan_used(&r);
	for (k = 0; k <= NOT_WATCHED; k++)
		unseen += r.unseen[k];
	if (rc == MC_OK && unseen > 0 && !(flags & MC_USED_KEEP_UNSEEN)) {
		say_unseen(&r, why, sizeof why);
		rc = mc__err(r.ctx, MC_ERR_NOT_SEEN, "the job's reads of %zu file%s in the cache "
			     "folders could not be seen (%s), so what it used of them is not known",
			     unseen, unseen == 1 ? "" : "s", why);
	}
	if (rc != MC_OK) {
		/* w as it was, and the record may be tried again (MC_USED_KEEP_UNSEEN) */
		if (leave_out(&r, 1, &nleft) != MC_OK)
			rc = MC_ERR_NOMEM; /* w keeps what the scans added: told, not saved */
	} else if ((rc = leave_out(&r, 0, &nleft)) == MC_OK &&
		   (rc = mc__usage_to_record(u, 1)) == MC_OK) {
		if (left != NULL)
			*left = nleft;
		if (kept_unseen != NULL)
			*kept_unseen = unseen;
	}
	for (i = 0; i < r.n; i++) {
		free(r.f[i].path);
		free(r.f[i].unit);
		free(r.f[i].model);
	}
	free(r.f);
	return rc;
}
