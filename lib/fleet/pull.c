/* pull.c - what torch's and Triton's Redis caches hold, into a writer: the entries of
 * their key spaces, in key order, each taken back to the artifact it is (type and key
 * from the Redis key, content from the value, its form checked).
 *
 * The GETs are pipelined. The context's workers take turns to read the next reply;
 * each then checks its value and puts the content, hashed and compressed, in its own
 * spool, which the writer is given, so that the save reads nothing again. The results
 * are recorded in key order, one worker at a time, so that what is recorded and told
 * does not depend on the number of workers. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The keys match selects (a Redis glob; NULL: the key spaces asked for), as all_keys. */
static int
store_keys(mc_redis *r, const char *match, unsigned spaces, char ***keys, size_t *n)
{
	char *pat[2] = {NULL, NULL};
	size_t npat = 0;
	int rc;

	*keys = NULL;
	*n = 0;
	if (match != NULL)
		rc = (pat[npat++] = mc__strdup(match)) != NULL ? MC_OK : MC_ERR_NOMEM;
	else
		rc = mc__remote_patterns(mc__redis_triton_format(r), spaces, pat, &npat);
	if (rc == MC_ERR_NOMEM)
		rc = mc__err(mc__redis_ctx(r), rc, "out of memory");
	if (rc == MC_OK)
		rc = all_keys(r, pat, npat, keys, n);
	free(pat[0]);
	free(pat[1]);
	return rc;
}

int
mc__store_each(mc_redis *r, const char *match, unsigned spaces, const char *phase,
	       mc_entry_fn fn, void *ud)
{
	char **keys = NULL;
	size_t n = 0, i, first = 0;
	int rc = store_keys(r, match, spaces, &keys, &n);

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
	return rc;
}

/* ---- pull ---- */

struct pres { /* an entry's result, waiting for its turn to be recorded */
	int set;
	int what;           /* MC_REMOTE_PULLED, MC_REMOTE_ODD, or 0: no cache's key */
	const char *type;
	char *key;
	size_t vn;          /* the value's length */
	struct mc_wobj o;   /* PULLED: its object, in the worker's spool */
	unsigned char sha[MC_SHA256_BYTES];
};

struct pull {
	mc_writer *w;
	mc_redis *r;
	mc_ctx *ctx;
	unsigned spaces;
	const char *tformat;
	mc_remote_fn fn;
	void *ud;
	char **keys;
	size_t n;
	unsigned nworkers;
	struct mc_wspool **sp; /* per worker, the writer's */
	uint16_t *spool;       /* their numbers in the writer */
	struct pres *res;      /* nworkers slots: entry i's in i % nworkers */
	pthread_mutex_t lock;  /* of all below */
	pthread_cond_t cv;
	size_t sent;           /* GETs sent */
	size_t read_next;      /* the entry whose reply is read next */
	size_t next;           /* the entry recorded next */
	int recording;         /* a worker is recording */
	size_t failed;         /* the lowest entry that failed, or SIZE_MAX */
	int err_rc;            /* and its failure */
	char err[MC_ERRBUF];
};

/* Entry i failed with rc, its message in ctx: kept when it is the lowest to fail (the
 * lock held). */
static void
failed_at(struct pull *p, size_t i, int rc, const mc_ctx *ctx)
{
	if (i < p->failed) {
		p->failed = i;
		p->err_rc = rc;
		snprintf(p->err, sizeof p->err, "%s", ctx->err);
	}
	pthread_cond_broadcast(&p->cv);
}

/* What read_turn found for an entry. */
#define READ_STOPPED 1 /* nothing: an entry before failed */
#define GOT_STRING 1
#define GOT_NIL 0      /* the key is gone since the SCAN */
#define GOT_OTHER (-1) /* the key holds no string (a list, a hash) */

/* Reads entry i's reply, once it is i's turn (GETs sent ahead first), into rep, *got
 * saying what it is; the connection tells wctx meanwhile. READ_STOPPED when an entry
 * before failed. */
static int
read_turn(struct pull *p, mc_ctx *wctx, size_t i, struct mc_rreply *rep, int *got)
{
	mc_ctx *own;
	int rc = MC_OK, stopped;

	pthread_mutex_lock(&p->lock);
	while (p->read_next != i && p->failed > i)
		pthread_cond_wait(&p->cv, &p->lock);
	stopped = p->failed < i;
	pthread_mutex_unlock(&p->lock);
	if (stopped)
		return READ_STOPPED;
	/* The connection is this worker's until read_next moves on. */
	own = mc__redis_use_ctx(p->r, wctx);
	for (; rc == MC_OK && p->sent < p->n && p->sent < i + MC_PIPE_COMMANDS; p->sent++) {
		const char *argv[2] = {"GET", p->keys[p->sent]};
		size_t lens[2] = {3, strlen(p->keys[p->sent])};
		rc = mc__redis_append(p->r, 2, argv, lens);
	}
	if (rc == MC_OK)
		rc = mc__redis_reply(p->r, p->keys[i], rep);
	*got = rc != MC_OK ? GOT_OTHER : rep->nil || rep->str == NULL ? GOT_NIL : GOT_STRING;
	if (rc != MC_OK && rep->error != NULL && strncmp(rep->error, "WRONGTYPE", 9) == 0)
		rc = MC_OK;
	mc__redis_use_ctx(p->r, own);
	pthread_mutex_lock(&p->lock);
	if (rc != MC_OK)
		failed_at(p, i, rc, wctx);
	p->read_next = i + 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Entry i's value v (NULL: no string there) taken back to its artifact, whose content
 * goes into the worker's spool. */
static int
take_back(struct pull *p, unsigned id, mc_ctx *wctx, size_t i, const unsigned char *v,
	  size_t vn, struct pres *res)
{
	char key[MC_RKEY_MAX], why[128];
	unsigned char *c = NULL;
	const struct mc_type *t;
	size_t cn = 0;
	int rc;

	res->vn = vn;
	rc = v == NULL ? 1 : mc__remote_parse(p->keys[i], v, vn, p->tformat, p->spaces,
					      &res->type, key, sizeof key, &c, &cn, why, sizeof why);
	if (rc == 2)
		return MC_OK; /* a key of no cache's (--match wider than them) */
	res->what = MC_REMOTE_ODD;
	if (rc == MC_OK && (t = mc__find_type(p->ctx, res->type)) != NULL &&
	    (t->flags & MC_TYPE_WANTS_SHA256) && mc__sha256(res->sha, c, cn) != MC_OK)
		rc = MC_ERR_NOMEM;
	if (rc == MC_OK && (res->key = mc__strdup(key)) == NULL)
		rc = MC_ERR_NOMEM;
	if (rc == MC_OK && (rc = mc__wspool_put(p->sp[id], wctx, c, cn, &res->o)) == MC_OK) {
		res->o.spool = p->spool[id];
		res->what = MC_REMOTE_PULLED;
	}
	free(c);
	if (rc == MC_ERR_NOMEM)
		return mc__err(wctx, rc, "out of memory");
	return rc < 0 ? rc : MC_OK;
}

/* Records an entry's result in the writer, and tells it; progress is told on the
 * calling thread (worker 0) only. */
static int
record(struct pull *p, unsigned id, struct pres *res, size_t i)
{
	int rc;

	if (res->what == MC_REMOTE_PULLED) {
		rc = mc__writer_add_spooled(p->w, res->type, res->key, &res->o, res->sha);
		if (rc != MC_OK && rc != MC_ERR_BAD_KEY && rc != MC_ERR_UNKNOWN_TYPE &&
		    rc != MC_ERR_LIMIT)
			return rc;
		if (rc != MC_OK)
			res->what = MC_REMOTE_ODD;
	}
	if (res->what != 0 && p->fn != NULL)
		p->fn(p->ud, res->what, res->what == MC_REMOTE_ODD ? NULL : res->type,
		      res->what == MC_REMOTE_ODD ? NULL : res->key, p->keys[i],
		      res->what == MC_REMOTE_ODD ? res->vn : res->o.size);
	if (id == 0)
		mc__progress(p->ctx, "pull", i + 1, p->n);
	return MC_OK;
}

/* Records the results that are ready, in order, until one is not (or one failed);
 * called by the worker that found the next one ready and nobody recording. The writer
 * is the recorder's alone. */
static int
record_ready(struct pull *p, unsigned id)
{
	struct pres take;
	size_t t;
	int rc = MC_OK;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		t = p->next;
		if (rc != MC_OK || !p->res[t % p->nworkers].set || p->failed <= t) {
			if (rc != MC_OK)
				failed_at(p, t, rc, p->w->ctx);
			p->recording = 0;
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->lock);
			return rc;
		}
		take = p->res[t % p->nworkers];
		memset(&p->res[t % p->nworkers], 0, sizeof take);
		pthread_mutex_unlock(&p->lock);
		rc = record(p, id, &take, t);
		free(take.key);
		if (rc == MC_OK) {
			pthread_mutex_lock(&p->lock);
			p->next = t + 1;
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/* Entry i, on worker id: its reply read in its turn, taken back, and its result left in
 * its slot; the worker that finds the next result ready with nobody recording records
 * it and what follows. */
static int
pull_item(void *ud, unsigned id, mc_ctx *wctx, size_t i)
{
	struct pull *p = ud;
	struct mc_rreply rep;
	struct pres res;
	int rc, got = 0, rec = 0;

	memset(&rep, 0, sizeof rep);
	memset(&res, 0, sizeof res);
	if ((rc = read_turn(p, wctx, i, &rep, &got)) == READ_STOPPED)
		return MC_ERR_INVALID; /* the failure before is the one told */
	if (rc == MC_OK && got != GOT_NIL)
		rc = take_back(p, id, wctx, i, got == GOT_STRING ? rep.str : NULL,
			       got == GOT_STRING ? rep.len : 0, &res);
	mc__redis_reply_free(&rep);
	pthread_mutex_lock(&p->lock);
	if (rc != MC_OK)
		failed_at(p, i, rc, wctx);
	while (rc == MC_OK && p->failed > i && i - p->next >= p->nworkers)
		pthread_cond_wait(&p->cv, &p->lock);
	if (rc == MC_OK && p->failed > i) {
		res.set = 1;
		p->res[i % p->nworkers] = res;
		res.key = NULL; /* the slot's now */
		if (!p->recording && p->res[p->next % p->nworkers].set)
			rec = p->recording = 1;
	}
	pthread_mutex_unlock(&p->lock);
	free(res.key);
	if (rc == MC_OK && rec)
		rc = record_ready(p, id);
	return rc;
}

/* A spool per worker, given to the writer. */
static int
make_spools(struct pull *p)
{
	unsigned k;
	int rc = MC_OK;

	if ((p->sp = calloc(p->nworkers, sizeof *p->sp)) == NULL ||
	    (p->spool = calloc(p->nworkers, sizeof *p->spool)) == NULL ||
	    (p->res = calloc(p->nworkers, sizeof *p->res)) == NULL)
		return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
	for (k = 0; k < p->nworkers && rc == MC_OK; k++)
		if ((rc = mc__wspool_new(p->ctx, p->w->level, NULL, &p->sp[k])) ==
		    MC_OK)
			rc = mc__writer_spool(p->w, p->sp[k], &p->spool[k]);
	return rc;
}

/* Every entry, on the workers; after a failure, the replies asked for are dropped and
 * the lowest entry's failure told. */
static int
pull_all(struct pull *p)
{
	unsigned k;
	int rc;

	if (pthread_mutex_init(&p->lock, NULL) != 0)
		return mc__err(p->ctx, MC_ERR_NOMEM, "cannot create a lock");
	if (pthread_cond_init(&p->cv, NULL) != 0) {
		pthread_mutex_destroy(&p->lock);
		return mc__err(p->ctx, MC_ERR_NOMEM, "cannot create a condition variable");
	}
	rc = mc__parallel(p->ctx, p->n, p->nworkers, pull_item, p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	for (k = 0; k < p->nworkers; k++)
		mc__wspool_done(p->sp[k]);
	if (p->failed < SIZE_MAX) {
		rc = p->err_rc;
		mc__redis_discard(p->r);
		snprintf(p->ctx->err, sizeof p->ctx->err, "%s", p->err);
	}
	if (rc == MC_OK)
		mc__progress(p->ctx, "pull", p->n, p->n);
	return rc;
}

int
mc_redis_pull(mc_redis *r, mc_writer *w, const char *match, unsigned flags, mc_remote_fn fn,
	      void *ud)
{
	struct pull p;
	size_t k;
	int rc;

	if (r == NULL || w == NULL)
		return MC_ERR_INVALID;
	memset(&p, 0, sizeof p);
	p.w = w, p.r = r, p.ctx = mc__redis_ctx(r), p.fn = fn, p.ud = ud;
	p.spaces = MC_SPACE_TORCH | (flags & MC_PULL_TRITON ? MC_SPACE_TRITON : 0);
	p.tformat = mc__redis_triton_format(r);
	p.failed = SIZE_MAX;
	rc = store_keys(r, match, p.spaces, &p.keys, &p.n);
	p.nworkers = mc__threads(p.ctx);
	if (p.n > 0 && p.nworkers > p.n)
		p.nworkers = (unsigned)p.n;
	if (rc == MC_OK && p.n > 0 && (rc = make_spools(&p)) == MC_OK)
		rc = pull_all(&p);
	for (k = 0; p.res != NULL && k < p.nworkers; k++)
		free(p.res[k].key);
	free(p.res);
	free(p.sp);
	free(p.spool);
	mc__redis_keys_free(p.keys, p.n);
	return rc;
}
