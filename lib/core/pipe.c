/*
 * pipe.c - pieces handed from the calling thread to one consumer thread, two in flight:
 * the caller makes the next piece while the consumer works on the last one. The consumer
 * sees the pieces in order, each with the bounds it was given. Where no thread can be
 * started, the caller consumes each piece itself, with the same result.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

struct mc_pipe {
	mc_ctx *ctx;
	mc_ctx wctx;           /* the consumer's messages, copied to ctx at the end */
	mc_pipe_fn fn;
	void *ud;
	pthread_t thread;
	int threaded;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned char *buf[2];
	size_t len[2], cap[2];
	int full[2];           /* handed over, not yet consumed */
	unsigned put;          /* the slot the caller fills next */
	int ending;
	int rc;                /* the consumer's first failure; later pieces are dropped */
};

static void *
consume(void *arg)
{
	struct mc_pipe *p = arg;
	unsigned k = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		int rc = MC_OK;

		while (!p->full[k] && !p->ending)
			pthread_cond_wait(&p->cond, &p->lock);
		if (!p->full[k])
			break;
		if (p->rc == MC_OK) {
			pthread_mutex_unlock(&p->lock);
			rc = p->fn(p->ud, &p->wctx, p->buf[k], p->len[k]);
			pthread_mutex_lock(&p->lock);
		}
		if (p->rc == MC_OK)
			p->rc = rc;
		p->full[k] = 0;
		pthread_cond_broadcast(&p->cond);
		k ^= 1;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int
mc__pipe_start(mc_ctx *ctx, mc_pipe_fn fn, void *ud, struct mc_pipe **out)
{
	struct mc_pipe *p;

	*out = NULL;
	if ((p = calloc(1, sizeof *p)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	p->ctx = ctx;
	p->wctx = *ctx;
	p->fn = fn;
	p->ud = ud;
	if (pthread_mutex_init(&p->lock, NULL) != 0) {
		free(p);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot create a lock");
	}
	if (pthread_cond_init(&p->cond, NULL) != 0) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return mc__err(ctx, MC_ERR_NOMEM, "cannot create a condition variable");
	}
	p->threaded = mc__thread_create(&p->thread, consume, p) == 0;
	*out = p;
	return MC_OK;
}

mc_ctx *
mc__pipe_ctx(struct mc_pipe *p)
{
	return p->threaded ? &p->wctx : p->ctx;
}

int
mc__pipe_put(struct mc_pipe *p, const void *buf, size_t n)
{
	unsigned k = p->put;
	int rc;

	if (!p->threaded)
		return p->fn(p->ud, p->ctx, buf, n);
	pthread_mutex_lock(&p->lock);
	while (p->full[k])
		pthread_cond_wait(&p->cond, &p->lock);
	rc = p->rc;
	pthread_mutex_unlock(&p->lock);
	if (rc != MC_OK)
		return MC_OK; /* told by mc__pipe_end() */
	if (n > p->cap[k]) {
		unsigned char *b = realloc(p->buf[k], n);
		if (b == NULL)
			return mc__err(p->ctx, MC_ERR_NOMEM, "out of memory");
		p->buf[k] = b;
		p->cap[k] = n;
	}
	if (n > 0)
		memcpy(p->buf[k], buf, n);
	pthread_mutex_lock(&p->lock);
	p->len[k] = n;
	p->full[k] = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	p->put = k ^ 1;
	return MC_OK;
}

int
mc__pipe_end(struct mc_pipe *p)
{
	int rc = MC_OK;

	if (p == NULL)
		return MC_OK;
	if (p->threaded) {
		pthread_mutex_lock(&p->lock);
		p->ending = 1;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
		if ((rc = p->rc) != MC_OK)
			snprintf(p->ctx->err, sizeof p->ctx->err, "%s", p->wctx.err);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->buf[0]);
	free(p->buf[1]);
	free(p);
	return rc;
}
