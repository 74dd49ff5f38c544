/*
 * write.c - writes streamed object contents into the staged files, on the worker threads.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "install/install.h"

/* Creates s's temp file, given the owner; a name another loader took is tried again
 * with the next. *derive is set when the file's content is derived (tiers.h). */
static int
stage_open(struct loader *L, mc_ctx *ctx, struct lworker *lw, struct staged *s, int *derive)
{
	struct mc_acur *c = &lw->cur;
	const struct mc_martifact *a;
	struct snames n;
	int rc, err = 0;

	if ((rc = mc__stage_job(L, ctx, lw, s->job)) != MC_OK)
		return rc;
	for (;;) {
		if ((rc = mc__staged_names(L, ctx, c, s, &n, &a)) != MC_OK)
			return rc;
		*derive |= mc__derives(a->handler, a->key);
		uint64_t t = mc__prof_start(ctx);
		rc = mc__create_in(L, ctx, &lw->dc, s->tier, n.stage, n.tmp, a->executable, &s->fd);
		mc__prof_since(ctx, "create", t, 1);
		if (rc != MC_OK)
			return rc;
		err = errno;
		if (s->fd >= 0 || err != EEXIST || s->unit != NO_UNIT || s->tries == 15)
			break;
		s->tries++; /* taken by another loader: another name */
	}
	if (s->fd < 0)
		return mc__cannot_create(ctx, L, s->tier, n.stage, err);
	s->made = 1;
	/* Before it takes its final name: no moment exists where that is not the owner's. */
	return mc__give_owner(ctx, s->fd, -1, NULL, "%s/%s/%s", L->tiers[s->tier].root, n.stage,
			      n.tmp);
}

/* The message for a failed write or close of s, naming its folder. */
static int
write_error(struct loader *L, mc_ctx *ctx, struct mc_acur *c, const struct staged *s, int err)
{
	struct snames n;

	if (mc__staged_names(L, ctx, c, s, &n, NULL) != MC_OK)
		snprintf(n.stage, sizeof n.stage, "?");
	return mc__err(ctx, MC_ERR_IO, "%s/%s: cannot write: %s", L->tiers[s->tier].root, n.stage,
		       strerror(err));
}

static int
stage_close(struct loader *L, mc_ctx *ctx, struct mc_acur *c, struct staged *s)
{
	uint64_t t = mc__prof_start(ctx);
	int rc = MC_OK;

	if (s->fd >= 0 && close(s->fd) != 0)
		rc = write_error(L, ctx, c, s, errno);
	mc__prof_since(ctx, "close", t, 1);
	s->fd = -1;
	return rc;
}

/* The files of the object a worker is writing. */
int
mc__close_object(struct loader *L, mc_ctx *ctx, struct lworker *lw)
{
	size_t k;
	int rc = MC_OK, r;

	if (!lw->open)
		return MC_OK;
	for (k = L->obj_first[lw->obj]; k < L->obj_first[lw->obj + 1]; k++)
		if ((r = stage_close(L, ctx, &lw->cur, &L->st[L->by_obj[k]])) != MC_OK && rc == MC_OK)
			rc = r;
	lw->open = 0;
	return rc;
}

static int
open_object(struct loader *L, mc_ctx *ctx, struct lworker *lw, size_t obj)
{
	const struct mc_martifact *a;
	size_t k;
	int rc;

	if ((rc = mc__close_object(L, ctx, lw)) != MC_OK)
		return rc;
	lw->cur.ctx = ctx;
	/* The content's size is its artifacts' size. */
	if ((rc = mc__acur_get(&lw->cur, L->st[L->by_obj[L->obj_first[obj]]].art, &a)) != MC_OK)
		return rc;
	lw->obj = obj;
	lw->open = 1;
	lw->size = a->size;
	lw->written = 0;
	lw->derive = 0;
	for (k = L->obj_first[obj]; k < L->obj_first[obj + 1]; k++)
		if ((rc = stage_open(L, ctx, lw, &L->st[L->by_obj[k]], &lw->derive)) != MC_OK)
			return rc;
	/* Derived files are small; a larger content is written as it is. */
	if (lw->size > MC_DERIVE_MAX)
		lw->derive = 0;
	if (lw->derive && lw->bufcap < lw->size) {
		unsigned char *p = realloc(lw->buf, (size_t)lw->size);
		if (p == NULL)
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		lw->buf = p;
		lw->bufcap = (size_t)lw->size;
	}
	return MC_OK;
}

/* Writes the content kept for a derived object: each file the bytes derived for its
 * folder, or the content as it is. */
static int
write_derived(struct loader *L, mc_ctx *ctx, struct lworker *lw)
{
	const struct mc_martifact *a;
	struct snames n;
	size_t k, outn;
	int rc, err;

	for (k = L->obj_first[lw->obj]; k < L->obj_first[lw->obj + 1]; k++) {
		struct staged *s = &L->st[L->by_obj[k]];
		unsigned char *out = NULL;

		if ((rc = mc__staged_names(L, ctx, &lw->cur, s, &n, &a)) != MC_OK ||
		    (mc__derives(a->handler, a->key) &&
		     (rc = mc__derive_for(L, ctx, s->tier, a, n.dir, lw->buf, (size_t)lw->size, &out,
					  &outn)) != MC_OK))
			return rc;
		rc = out != NULL ? mc__write_all(s->fd, out, outn)
				 : mc__write_all(s->fd, lw->buf, (size_t)lw->size);
		err = errno;
		free(out);
		if (rc != 0)
			return write_error(L, ctx, &lw->cur, s, err);
	}
	return MC_OK;
}

/* The whole content is there: derived files written, the files closed. */
static int
finish_object(struct loader *L, mc_ctx *ctx, struct lworker *lw)
{
	int rc;

	if (lw->derive && (rc = write_derived(L, ctx, lw)) != MC_OK)
		return rc;
	return mc__close_object(L, ctx, lw);
}

static int
sink(void *ud, unsigned worker, mc_ctx *ctx, size_t obj, const unsigned char *buf, size_t n)
{
	struct loader *L = ud;
	struct lworker *lw = &L->wk[worker];
	uint64_t t;
	size_t k;
	int rc;

	if (L->obj_first[obj] == L->obj_first[obj + 1])
		return MC_OK;
	if ((!lw->open || lw->obj != obj) && (rc = open_object(L, ctx, lw, obj)) != MC_OK)
		return rc;
	if (lw->derive) {
		if (n > lw->size - lw->written) /* not reached: the stream stops at the size */
			return mc__err(ctx, MC_ERR_INTEGRITY, "object %zu is over its size", obj);
		memcpy(lw->buf + lw->written, buf, n);
	}
	t = mc__prof_start(ctx);
	for (k = L->obj_first[obj]; !lw->derive && k < L->obj_first[obj + 1]; k++) {
		struct staged *s = &L->st[L->by_obj[k]];
		if (mc__write_all(s->fd, buf, n) != 0)
			return write_error(L, ctx, &lw->cur, s, errno);
	}
	mc__prof_since(ctx, "write", t, 0);
	lw->written += n;
	if (lw->written == lw->size)
		return finish_object(L, ctx, lw);
	return MC_OK;
}

/* Stages every file: the folders made and cleaned, the bundle streamed to the files
 * on the worker threads. */
int
mc__stage_all(struct loader *L)
{
	unsigned nwk = mc__threads(L->ctx);
	uint64_t t;
	size_t i;
	int rc, r;

	/* Counted only once there: the rollback walks them. */
	if ((L->wk = calloc(nwk, sizeof *L->wk)) == NULL)
		return mc__err(L->ctx, MC_ERR_NOMEM, "out of memory");
	L->nwk = nwk;
	for (i = 0; i < L->nwk; i++) {
		mc__acur_init(&L->wk[i].cur, L->ctx, &L->b->m, mc__find_type);
		mc__dcur_init(&L->wk[i].dc);
	}
	t = mc__prof_start(L->ctx);
	if ((rc = mc__stage_prepare(L, 0)) != MC_OK)
		return rc; /* it told the first folder that cannot be made */
	t = mc__prof_since(L->ctx, "folders", t, 0);
	/* Empty content produces no data to stream: staged now. */
	if (L->empty_obj != MC_NO_INDEX &&
	    (rc = open_object(L, L->ctx, &L->wk[0], L->empty_obj)) == MC_OK)
		rc = finish_object(L, L->ctx, &L->wk[0]);
	/* The folders are made as their first files arrive, beside the other threads'
	 * decompression. */
	if (rc == MC_OK)
		rc = mc__bundle_stream_par(L->b, sink, L->hold, L);
	mc__prof_since(L->ctx, "stream", t, 0);
	for (i = 0; i < L->nwk; i++) {
		r = mc__close_object(L, L->ctx, &L->wk[i]);
		if (rc == MC_OK)
			rc = r;
	}
	/* A folder that cannot be made is told before what else failed, as the dry run
	 * would tell it; on success there is none left. */
	if ((r = mc__stage_rest(L)) != MC_OK)
		rc = r;
	return rc;
}
