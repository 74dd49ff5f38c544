/*
 * parallel.c - runs independent items on worker threads. Items are claimed in order, or
 * in an order the caller gives (the longest first, so that no long one starts last);
 * after a failure no item after the lowest-numbered one that failed starts, and the
 * result is that item's, so that what a caller sees depends neither on timing nor on
 * the order.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

struct par {
	mc_par_fn fn;
	void *ud;
	size_t n;
	const size_t *order;   /* the items in the order they are claimed; NULL: 0..n-1 */
	int cancellable;       /* mc_ctx_cancel() stops the items not started */
	pthread_mutex_t lock;  /* for the failure's record */
	_Atomic size_t next;   /* items are claimed without it: some are a single rename */
	_Atomic int failed;
	size_t err_item;
	int err_rc;
	char err_msg[MC_ERRBUF];
};

struct par_worker {
	struct par *p;
	unsigned id;
	mc_ctx *ctx;
	pthread_t thread;
	int started;
};

static void *
par_run(void *arg)
{
	struct par_worker *w = arg;
	struct par *p = w->p;

	for (;;) {
		size_t i;
		int rc, skip;

		if ((p->order == NULL && atomic_load(&p->failed)) ||
		    (i = atomic_fetch_add(&p->next, 1)) >= p->n)
			break;
		/* Cancelled: the items left fail, as the first of them would. */
		if (p->cancellable && mc__cancelled(w->ctx)) {
			pthread_mutex_lock(&p->lock);
			if (!p->failed) {
				p->err_item = i;
				p->err_rc = mc__cancel_err(w->ctx);
				snprintf(p->err_msg, sizeof p->err_msg, "%s", w->ctx->err);
			}
			p->failed = 1;
			pthread_mutex_unlock(&p->lock);
			break;
		}
		if (p->order != NULL) {
			/* Out of order, the items before the lowest failed one still run: the
			 * failure told is the one the items in order would have met. */
			i = p->order[i];
			if (atomic_load(&p->failed)) {
				pthread_mutex_lock(&p->lock);
				skip = i > p->err_item;
				pthread_mutex_unlock(&p->lock);
				if (skip)
					continue;
			}
		}
		if ((rc = p->fn(p->ud, w->id, w->ctx, i)) != MC_OK) {
			pthread_mutex_lock(&p->lock);
			if (!p->failed || i < p->err_item) {
				p->err_item = i;
				p->err_rc = rc;
				snprintf(p->err_msg, sizeof p->err_msg, "%s", w->ctx->err);
			}
			p->failed = 1;
			pthread_mutex_unlock(&p->lock);
			if (p->order == NULL)
				break;
		}
	}
	return NULL;
}

static int
par_go(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud, const size_t *order,
       int cancellable)
{
	struct par p;
	struct par_worker *w;
	mc_ctx *own = NULL;
	unsigned k;

	if (nworkers == 0 || n == 0)
		nworkers = 1;
	if (nworkers > n && n > 0)
		nworkers = (unsigned)n;
	memset(&p, 0, sizeof p);
	p.fn = fn;
	p.ud = ud;
	p.n = n;
	p.order = order;
	p.cancellable = cancellable;
	if ((w = calloc(nworkers, sizeof *w)) == NULL ||
	    (nworkers > 1 && (own = calloc(nworkers, sizeof *own)) == NULL)) {
		free(w);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	if (pthread_mutex_init(&p.lock, NULL) != 0) {
		free(w);
		free(own);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot create a lock");
	}
	for (k = 0; k < nworkers; k++) {
		w[k].p = &p;
		w[k].id = k;
		/* A lone worker writes its messages on ctx; several have their own copy. */
		if (own != NULL) {
			own[k] = *ctx;
			w[k].ctx = &own[k];
		} else {
			w[k].ctx = ctx;
		}
	}
	for (k = 1; k < nworkers; k++)
		w[k].started = mc__thread_create(&w[k].thread, par_run, &w[k]) == 0;
	par_run(&w[0]);
	for (k = 1; k < nworkers; k++)
		if (w[k].started)
			pthread_join(w[k].thread, NULL);
	pthread_mutex_destroy(&p.lock);
	free(w);
	free(own);
	if (!p.failed)
		return MC_OK;
	snprintf(ctx->err, sizeof ctx->err, "%s", p.err_msg);
	return p.err_rc;
}

int
mc__thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	/* The new thread inherits the mask; faults stay deliverable to it. */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int
mc__parallel_in(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud,
		const size_t *order)
{
	return par_go(ctx, n, nworkers, fn, ud, order, 1);
}

int
mc__parallel(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud)
{
	return par_go(ctx, n, nworkers, fn, ud, NULL, 1);
}

int
mc__parallel_all(mc_ctx *ctx, size_t n, unsigned nworkers, mc_par_fn fn, void *ud)
{
	return par_go(ctx, n, nworkers, fn, ud, NULL, 0);
}

/* An item's cost and place, for mc__longest_first(). */
struct icost {
	uint64_t cost;
	size_t k;
};

static int
icost_cmp(const void *x, const void *y)
{
	const struct icost *a = x, *b = y;

	if (a->cost != b->cost)
		return a->cost > b->cost ? -1 : 1;
	return (a->k > b->k) - (a->k < b->k);
}

int
mc__longest_first(mc_ctx *ctx, size_t n, uint64_t (*cost)(const void *ud, size_t k),
		  const void *ud, size_t **out)
{
	struct icost *c;
	size_t k;

	*out = NULL;
	if ((c = malloc((n + 1) * sizeof *c)) == NULL ||
	    (*out = malloc((n + 1) * sizeof **out)) == NULL) {
		free(c);
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	for (k = 0; k < n; k++) {
		c[k].cost = cost(ud, k);
		c[k].k = k;
	}
	qsort(c, n, sizeof *c, icost_cmp);
	for (k = 0; k < n; k++)
		(*out)[k] = c[k].k;
	free(c);
	return MC_OK;
}
