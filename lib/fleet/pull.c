/* pull.c - what torch's and Triton's Redis caches hold, into a writer: the entries of
 * their key spaces, read in pipelined batches, each taken back to the artifact it is
 * (type and key from the Redis key, content from the value, its form checked), the
 * contents held in a temp file. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet/fleet.h"

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every key matching the patterns, sorted, each once (SCAN may give one twice). */
static int
all_keys(mc_redis *r, char **pat, size_t npat, char ***keys, size_t *n)
{
	size_t cap = 0, i, j, got;
	char **part, **k;
	int rc = MC_OK;

	*keys = NULL;
	*n = 0;
	for (i = 0; i < npat && rc == MC_OK; i++) {
		unsigned long long cursor = 0;
		do {
			if ((rc = mc__redis_scan(r, &cursor, pat[i], &part, &got)) != MC_OK)
				break;
			if (*n + got + 1 > cap) {
				cap = 2 * (*n + got + 1);
				if ((k = realloc(*keys, cap * sizeof *k)) == NULL) {
					mc__redis_keys_free(part, got);
					rc = mc__err(mc__redis_ctx(r), MC_ERR_NOMEM, "out of memory");
					break;
				}
				*keys = k;
			}
			memcpy(*keys + *n, part, got * sizeof *part);
			*n += got;
			free(part);
		} while (cursor != 0);
	}
	if (*n > 1)
		qsort(*keys, *n, sizeof **keys, str_cmp);
	for (i = j = 0; i < *n; i++) {
		if (j > 0 && strcmp((*keys)[j - 1], (*keys)[i]) == 0)
			free((*keys)[i]);
		else
			(*keys)[j++] = (*keys)[i];
	}
	*n = j;
	return rc;
}

/* Reads the replies of keys[from .. to) and hands each value on; stops at the first
 * failure (the caller drops the replies left). */
static int
read_batch(mc_redis *r, char **keys, size_t from, size_t to, mc_entry_fn fn, void *ud)
{
	struct mc_rreply rep;
	size_t i;
	int rc = MC_OK;

	for (i = from; i < to && rc == MC_OK; i++) {
		rc = mc__redis_reply(r, keys[i], &rep);
		if (rc != MC_OK && rep.error != NULL && strncmp(rep.error, "WRONGTYPE", 9) == 0)
			rc = fn(ud, keys[i], NULL, 0); /* a list, a hash: no string there */
		else if (rc == MC_OK && !rep.nil && rep.str != NULL) /* nil: gone since the SCAN */
			rc = fn(ud, keys[i], rep.str, rep.len);
		mc__redis_reply_free(&rep);
	}
	return rc;
}

int
mc__store_each(mc_redis *r, const char *match, unsigned spaces, const char *phase,
	       mc_entry_fn fn, void *ud)
{
	char *pat[2] = {NULL, NULL}, **keys = NULL;
	size_t npat = 0, n = 0, i, first = 0;
	int rc;

	if (match != NULL)
		rc = (pat[npat++] = mc__strdup(match)) != NULL ? MC_OK : MC_ERR_NOMEM;
	else
		rc = mc__remote_patterns(mc__redis_triton_format(r), spaces, pat, &npat);
	if (rc == MC_ERR_NOMEM)
		rc = mc__err(mc__redis_ctx(r), rc, "out of memory");
	if (rc == MC_OK)
		rc = all_keys(r, pat, npat, &keys, &n);
	for (i = 0; i < n && rc == MC_OK; i++) {
		const char *argv[2] = {"GET", keys[i]};
		size_t lens[2] = {3, strlen(keys[i])};
		if ((rc = mc__redis_append(r, 2, argv, lens)) != MC_OK)
			break;
		if (mc__redis_full(r) || i + 1 == n) {
			rc = read_batch(r, keys, first, i + 1, fn, ud);
			first = i + 1;
			mc__progress(mc__redis_ctx(r), phase, i + 1, n);
		}
	}
	if (rc != MC_OK) /* what was asked is read, and dropped */
		mc__redis_discard(r);
	mc__redis_keys_free(keys, n);
	free(pat[0]);
	free(pat[1]);
	return rc;
}

/* ---- pull ---- */

struct pull {
	mc_writer *w;
	mc_ctx *ctx;
	unsigned spaces;
	const char *tformat;
	mc_remote_fn fn;
	void *ud;
	int fd;
	char *path;
	uint64_t off;
};

static void
remove_file(void *arg)
{
	unlink(arg);
	free(arg);
}

/* A temp file for the contents, removed when the writer is freed. */
static int
open_contents(struct pull *p)
{
	const char *dir = mc__tmpdir();
	size_t n = strlen(dir) + 32;
	int rc;

	if ((p->path = malloc(n)) == NULL)
		return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
	snprintf(p->path, n, "%s/megacache-pull-XXXXXX", dir);
	if ((p->fd = mkstemp(p->path)) < 0) {
		rc = mc__errno(p->ctx, MC_ERR_IO, "cannot create a temp file", p->path);
		free(p->path);
		p->path = NULL;
		return rc;
	}
	if ((rc = mc__writer_adopt(p->w, remove_file, p->path)) != MC_OK) {
		remove_file(p->path);
		p->path = NULL;
	}
	return rc;
}

static int
pull_entry(void *ud, const char *rkey, const unsigned char *v, size_t vn)
{
	struct pull *p = ud;
	char key[MC_RKEY_MAX], why[128];
	unsigned char *c = NULL, sha[MC_SHA256_BYTES] = {0};
	const struct mc_type *t;
	const char *type = NULL;
	size_t cn = 0;
	int rc;

	rc = v == NULL ? 1 : mc__remote_parse(rkey, v, vn, p->tformat, p->spaces, &type, key,
					      sizeof key, &c, &cn, why, sizeof why);
	if (rc == 2)
		return MC_OK; /* a key of no cache's (--match wider than them) */
	if (rc == MC_OK && (t = mc__find_type(p->ctx, type)) != NULL &&
	    (t->flags & MC_TYPE_WANTS_SHA256) && mc__sha256(sha, c, cn) != MC_OK)
		rc = MC_ERR_NOMEM;
	if (rc == MC_OK && cn > 0 && mc__write_all(p->fd, c, cn) != 0)
		rc = mc__errno(p->ctx, MC_ERR_IO, "cannot write", p->path);
	free(c);
	if (rc < 0)
		return rc == MC_ERR_NOMEM ? mc__err(p->ctx, rc, "out of memory") : rc;
	if (rc == MC_OK) {
		/* the SHA-256 of the bytes written, where the type wants one: the temp file
		 * is pull's own and not read back until the save */
		rc = mc__writer_add_written(p->w, type, key, p->path, p->off, cn, sha);
		p->off += cn;
		if (rc == MC_OK) {
			if (p->fn != NULL)
				p->fn(p->ud, MC_REMOTE_PULLED, type, key, rkey, cn);
			return MC_OK;
		}
		if (rc != MC_ERR_BAD_KEY && rc != MC_ERR_UNKNOWN_TYPE && rc != MC_ERR_LIMIT)
			return rc;
	}
	if (p->fn != NULL)
		p->fn(p->ud, MC_REMOTE_ODD, NULL, NULL, rkey, vn);
	return MC_OK;
}

int
mc_redis_pull(mc_redis *r, mc_writer *w, const char *match, unsigned flags, mc_remote_fn fn,
	      void *ud)
{
	struct pull p;
	int rc;

	if (r == NULL || w == NULL)
		return MC_ERR_INVALID;
	memset(&p, 0, sizeof p);
	p.w = w, p.ctx = mc__redis_ctx(r), p.fn = fn, p.ud = ud, p.fd = -1;
	p.spaces = MC_SPACE_TORCH | (flags & MC_PULL_TRITON ? MC_SPACE_TRITON : 0);
	p.tformat = mc__redis_triton_format(r);
	if ((rc = open_contents(&p)) == MC_OK)
		rc = mc__store_each(r, match, p.spaces, "pull", pull_entry, &p);
	if (p.fd >= 0)
		close(p.fd);
	return rc;
}
