/* pull.c - what torch's and Triton's Redis caches hold, into a writer: the entries of
 * their key spaces, in key order, each taken back to the artifact it is (type and key
 * from the Redis key, content from the value, its form checked).
 *
 * The context's workers take batches of consecutive keys, each reading their values on a
 * connection of its own, pipelined. A worker checks each value and puts the content,
 * hashed and compressed, in its own spool, which the writer is given, so that the save
 * reads nothing again. The results are recorded in key order, one batch at a time, so
 * that what is recorded and told does not depend on the number of workers. */
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
	char **part;
	int rc = MC_OK;

	*keys = NULL;
	*n = 0;
	for (i = 0; i < npat && rc == MC_OK; i++) {
		unsigned long long cursor = 0;
		do {
			if ((rc = mc__redis_scan(r, &cursor, pat[i], &part, &got)) != MC_OK)
				break;
			if (mc__grow(keys, &cap, *n + got + 1, sizeof **keys) != MC_OK) {
				mc__strv_free(part, got);
				rc = mc__err(mc__redis_ctx(r), MC_ERR_NOMEM, "out of memory");
				break;
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
	mc__strv_free(keys, n);
	return rc;
}

int
mc__entry_read(const mc_ctx *ctx, const char *rkey, const unsigned char *v, size_t vn,
	       const char *triton_fmt, unsigned spaces, const char **type, char *kbuf,
	       size_t klen, unsigned char **content, size_t *cn, char *why, size_t whylen)
{
	const struct mc_type *t;
	int rc;

	/* no string there: in a key space or not, as an empty value's key is */
	rc = mc__remote_parse(rkey, v != NULL ? v : (const unsigned char *)"", v != NULL ? vn : 0,
			      triton_fmt, spaces, type, kbuf, klen, content, cn, why, whylen);
	if (rc == MC_OK && v == NULL) {
		snprintf(why, whylen, "the key holds no string");
		rc = 1;
	} else if (rc == MC_OK && ((t = mc__find_type(ctx, *type)) == NULL ||
				   t->key_check(t->ud, kbuf, why, whylen) != MC_OK)) {
		rc = 1; /* a key torch or Triton never makes: nothing looks it up */
	}
	if (rc == 1 || v == NULL) {
		free(*content);
		*content = NULL;
		*cn = 0;
	}
	return rc;
}

/* ---- pull ---- */

/* The entries go to the workers in batches of consecutive keys (at most PULL_BATCH),
 * each worker reading on a connection of its own with at most PULL_WINDOW GETs awaited,
 * so that what the server holds for the connections stays small. */
#define PULL_BATCH 64
#define PULL_WINDOW 8

struct pres { /* an entry's result, waiting for its turn to be recorded */
	int what;           /* MC_REMOTE_PULLED, MC_REMOTE_ODD, or 0: no cache's key */
	const char *type;
	char *key;
	size_t vn;          /* the value's length */
	struct mc_wobj o;   /* PULLED: its object, in the worker's spool */
	unsigned char sha[MC_SHA256_BYTES];
};

struct pslot { /* a batch's results, waiting for their turn */
	int set;
	size_t n;
	struct pres *res; /* bsz of them */
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
	size_t bsz, nbatch;    /* batch b: keys[b * bsz ...], bsz of them (the last fewer) */
	unsigned nworkers, nslots;
	unsigned nmade;        /* the workers' records made (nworkers may then be fewer) */
	mc_redis **conn;       /* per worker: conn[0] is r, the others made for the pull */
	struct mc_wspool **sp; /* per worker, the writer's */
	uint16_t *spool;       /* their numbers in the writer */
	struct pres **mine;    /* per worker, the results of the batch it reads */
	struct pslot *slot;    /* nslots: batch b's in b % nslots */
	pthread_mutex_t lock;  /* of all below */
	pthread_cond_t cv;
	size_t next;           /* the batch recorded next */
	int recording;         /* a worker is recording */
	size_t failed;         /* the lowest entry that failed, or MC_NO_INDEX */
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

static void
res_clear(struct pres *res, size_t n)
{
	size_t j;

	for (j = 0; j < n; j++)
		free(res[j].key);
	memset(res, 0, n * sizeof *res);
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
	rc = mc__entry_read(p->ctx, p->keys[i], v, vn, p->tformat, p->spaces, &res->type, key,
			    sizeof key, &c, &cn, why, sizeof why);
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

/* The values of keys[first .. first + cnt) read on worker id's connection, the GETs sent
 * PULL_WINDOW ahead, each taken back into res[]; *at: the entry that failed. A key gone
 * since the SCAN is passed over; one holding no string (a list, a hash) is odd. */
static int
read_values(struct pull *p, unsigned id, mc_ctx *wctx, size_t first, size_t cnt,
	    struct pres *res, size_t *at)
{
	mc_redis *c = p->conn[id];
	mc_ctx *own = mc__redis_use_ctx(c, wctx);
	struct mc_rreply rep;
	size_t sent = 0, j;
	int rc = MC_OK;

	for (j = 0; j < cnt && rc == MC_OK; j++) {
		*at = first + j;
		memset(&rep, 0, sizeof rep);
		for (; rc == MC_OK && sent < cnt && sent < j + PULL_WINDOW; sent++) {
			const char *argv[2] = {"GET", p->keys[first + sent]};
			size_t lens[2] = {3, strlen(p->keys[first + sent])};
			rc = mc__redis_append(c, 2, argv, lens);
		}
		if (rc == MC_OK)
			rc = mc__redis_reply(c, p->keys[first + j], &rep);
		if (rc != MC_OK && rep.error != NULL && strncmp(rep.error, "WRONGTYPE", 9) == 0)
			rc = take_back(p, id, wctx, first + j, NULL, 0, &res[j]);
		else if (rc == MC_OK && !rep.nil && rep.str != NULL)
			rc = take_back(p, id, wctx, first + j, rep.str, rep.len, &res[j]);
		mc__redis_reply_free(&rep);
	}
	if (rc != MC_OK) /* what was asked is read, and dropped */
		mc__redis_discard(c);
	mc__redis_use_ctx(c, own);
	return rc;
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

/* Records the batches that are ready, in order, until one is not (or one failed);
 * called by the worker that found the next one ready and nobody recording. The writer
 * is the recorder's alone, and so is the next batch's slot until it moves on. */
static int
record_ready(struct pull *p, unsigned id)
{
	struct pslot *s;
	size_t t, j = 0;
	int rc = MC_OK;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		t = p->next;
		s = &p->slot[t % p->nslots];
		if (rc != MC_OK || t >= p->nbatch || !s->set || p->failed < t * p->bsz) {
			if (rc != MC_OK)
				failed_at(p, t * p->bsz + j, rc, p->w->ctx);
			p->recording = 0;
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->lock);
			return rc;
		}
		pthread_mutex_unlock(&p->lock);
		for (j = 0; j < s->n && rc == MC_OK; j++)
			rc = record(p, id, &s->res[j], t * p->bsz + j);
		j -= rc != MC_OK; /* the one that failed */
		res_clear(s->res, s->n);
		if (rc == MC_OK) {
			pthread_mutex_lock(&p->lock);
			s->set = 0;
			p->next = t + 1;
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/* Batch b, on worker id: its values read and taken back, and its results left in its
 * slot (after a failure, those of the entries before it); the worker that finds the
 * next batch ready with nobody recording records it and what follows. */
static int
pull_batch(void *ud, unsigned id, mc_ctx *wctx, size_t b)
{
	struct pull *p = ud;
	size_t first = b * p->bsz, cnt = p->n - first < p->bsz ? p->n - first : p->bsz, at = first;
	struct pres *res = p->mine[id];
	struct pslot *s = &p->slot[b % p->nslots];
	int rc = MC_OK, rc2 = MC_OK, rec = 0, stopped;

	pthread_mutex_lock(&p->lock);
	stopped = p->failed < first;
	pthread_mutex_unlock(&p->lock);
	if (stopped)
		return MC_ERR_INVALID; /* the failure before is the one told */
	if ((rc = read_values(p, id, wctx, first, cnt, res, &at)) != MC_OK) {
		cnt = at - first; /* the entries before the one that failed are recorded */
		res_clear(res + cnt, p->bsz - cnt); /* and its own half-made result dropped */
	}
	pthread_mutex_lock(&p->lock);
	if (rc != MC_OK)
		failed_at(p, at, rc, wctx);
	while (cnt > 0 && p->failed > first && b - p->next >= p->nslots)
		pthread_cond_wait(&p->cv, &p->lock);
	if (cnt > 0 && p->failed > first) {
		p->mine[id] = s->res; /* cleared when it was recorded */
		s->res = res;
		s->n = cnt;
		s->set = 1;
		res = NULL;
		if (!p->recording && p->slot[p->next % p->nslots].set)
			rec = p->recording = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (res != NULL)
		res_clear(res, p->bsz);
	if (rec)
		rc2 = record_ready(p, id);
	return rc != MC_OK ? rc : rc2;
}

/* Per worker: a connection (conn[0] is r), a spool given to the writer, a batch's
 * results; and the slots. A server that takes fewer connections leaves fewer workers. */
static int
pull_setup(struct pull *p)
{
	char saved[MC_ERRBUF];
	unsigned k;
	int rc = MC_OK;

	p->nslots = 2 * p->nworkers;
	p->nmade = p->nworkers;
	if ((p->conn = calloc(p->nworkers, sizeof *p->conn)) == NULL ||
	    (p->sp = calloc(p->nworkers, sizeof *p->sp)) == NULL ||
	    (p->spool = calloc(p->nworkers, sizeof *p->spool)) == NULL ||
	    (p->mine = calloc(p->nworkers, sizeof *p->mine)) == NULL ||
	    (p->slot = calloc(p->nslots, sizeof *p->slot)) == NULL)
		return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
	for (k = 0; k < p->nslots; k++)
		if ((p->slot[k].res = calloc(p->bsz, sizeof *p->slot[k].res)) == NULL)
			return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
	for (k = 0; k < p->nworkers && rc == MC_OK; k++) {
		if ((p->mine[k] = calloc(p->bsz, sizeof *p->mine[k])) == NULL)
			return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
		/* format 2 compresses at save: its spools keep contents as they are */
		if ((rc = mc__wspool_new(p->ctx, p->w->version == 1 ? p->w->level : 0,
					  p->w->version, NULL, &p->sp[k])) == MC_OK)
			rc = mc__writer_spool(p->w, p->sp[k], &p->spool[k]);
	}
	/* The spools first: connections that run out of descriptors leave fewer workers. */
	p->conn[0] = p->r;
	snprintf(saved, sizeof saved, "%s", p->ctx->err);
	for (k = 1; k < p->nworkers && rc == MC_OK; k++)
		if (mc__redis_again(p->r, p->ctx, &p->conn[k]) != MC_OK)
			break;
	if (rc == MC_OK && k < p->nworkers) {
		snprintf(p->ctx->err, sizeof p->ctx->err, "%s", saved);
		p->nworkers = k;
	}
	return rc;
}

/* Every batch, on the workers; after a failure, the lowest entry's failure is told. */
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
	rc = mc__parallel(p->ctx, p->nbatch, p->nworkers, pull_batch, p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->lock);
	for (k = 0; k < p->nworkers; k++)
		mc__wspool_done(p->sp[k]);
	if (p->failed != MC_NO_INDEX) {
		rc = p->err_rc;
		snprintf(p->ctx->err, sizeof p->ctx->err, "%s", p->err);
	}
	if (rc == MC_OK)
		mc__progress(p->ctx, "pull", p->n, p->n);
	return rc;
}

static void
pull_free(struct pull *p)
{
	unsigned k;

	for (k = 0; p->slot != NULL && k < p->nslots; k++)
		if (p->slot[k].res != NULL) {
			res_clear(p->slot[k].res, p->bsz);
			free(p->slot[k].res);
		}
	for (k = 0; p->mine != NULL && k < p->nmade; k++)
		free(p->mine[k]); /* cleared */
	for (k = 1; p->conn != NULL && k < p->nmade; k++)
		mc_redis_free(p->conn[k]);
	free(p->slot);
	free(p->mine);
	free(p->conn);
	free(p->sp);
	free(p->spool);
	mc__strv_free(p->keys, p->n);
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
	p.w = w, p.r = r, p.ctx = mc__redis_ctx(r), p.fn = fn, p.ud = ud;
	p.spaces = MC_SPACE_TORCH | (flags & MC_PULL_TRITON ? MC_SPACE_TRITON : 0);
	p.tformat = mc__redis_triton_format(r);
	p.failed = MC_NO_INDEX;
	rc = store_keys(r, match, p.spaces, &p.keys, &p.n);
	/* Batches small enough that each worker has several. */
	p.nworkers = mc__threads(p.ctx);
	p.bsz = p.n / ((size_t)p.nworkers * 8);
	p.bsz = p.bsz < 1 ? 1 : p.bsz > PULL_BATCH ? PULL_BATCH : p.bsz;
	p.nbatch = (p.n + p.bsz - 1) / p.bsz;
	if (p.nbatch > 0 && p.nworkers > p.nbatch)
		p.nworkers = (unsigned)p.nbatch;
	if (rc == MC_OK && p.n > 0 && (rc = pull_setup(&p)) == MC_OK)
		rc = pull_all(&p);
	pull_free(&p);
	return rc;
}
