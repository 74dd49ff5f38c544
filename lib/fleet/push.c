/* push.c - a verified bundle into torch's and Triton's Redis caches: each artifact with a
 * remote form written in it, once its object checked, pipelined; what the store had is
 * compared with what is written, so a second push says it changed nothing. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "fleet/fleet.h"


struct pent { /* an artifact to write */
	char *rkey;
	char *key;
	const char *type; /* the manifest's */
	size_t object, artifact;
	int shadowed;
};

struct pwait { /* a command whose reply is awaited */
	size_t ent;
	size_t len;                         /* of the value written */
	unsigned char hash[MC_HASH_BYTES]; /* of its content (the object's, checked) */
};

struct push {
	mc_bundle *b;
	mc_redis *r;
	mc_ctx *ctx;
	unsigned flags;
	char ttl[24];
	mc_remote_fn fn;
	void *ud;
	struct pent *e;
	size_t n, cap;
	size_t *by_obj, *obj_first; /* entries in object order; each object's first */
	size_t cur;                 /* the object being received, or SIZE_MAX */
	unsigned char *buf;
	size_t len, bufcap;
	struct pwait *wait; /* MC_PIPE_COMMANDS of them, a ring */
	size_t whead;
	uint64_t done, total;
};

static void
tell(struct push *p, int what, const struct pent *e, uint64_t size)
{
	if (p->fn != NULL)
		p->fn(p->ud, what, e->type, e->key, e->rkey, size);
}

static int
no_mem(mc_ctx *ctx)
{
	return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
}

/* Whether the value the store had holds the content written (its hash): what torch
 * reads of it, the envelope aside. */
static int
same_content(const struct push *p, const struct pent *e, const struct mc_rreply *rep,
	     const unsigned char *hash)
{
	unsigned spaces = MC_SPACE_TORCH | MC_SPACE_TRITON;
	char key[MC_RKEY_MAX], why[128];
	unsigned char *c = NULL, h[MC_HASH_BYTES];
	const char *type;
	size_t cn = 0;
	int same = 0;

	if (mc__remote_parse(e->rkey, rep->str, rep->len, mc__redis_triton_format(p->r), spaces,
			     &type, key, sizeof key, &c, &cn, why, sizeof why) == MC_OK) {
		crypto_generichash(h, sizeof h, c, cn, NULL, 0);
		same = memcmp(h, hash, sizeof h) == 0;
	}
	free(c);
	return same;
}

/* Reads the reply of the oldest command and tells what the store had. */
static int
one_reply(struct push *p)
{
	struct pwait *w = &p->wait[p->whead];
	struct mc_rreply rep;
	const struct pent *e = &p->e[w->ent];
	int rc, what, dry = (p->flags & MC_PUSH_DRY_RUN) != 0;

	rc = mc__redis_reply(p->r, e->rkey, &rep);
	p->whead = (p->whead + 1) % MC_PIPE_COMMANDS; /* this reply is read, whatever it was */
	if (rc != MC_OK) {
		mc__redis_reply_free(&rep);
		return rc;
	}
	if (rep.nil || rep.str == NULL)
		what = dry ? MC_REMOTE_WOULD_SEND : MC_REMOTE_SENT;
	else
		what = same_content(p, e, &rep, w->hash) ? MC_REMOTE_UNCHANGED
		       : dry ? MC_REMOTE_WOULD_REPLACE : MC_REMOTE_REPLACED;
	mc__redis_reply_free(&rep);
	tell(p, what, e, w->len);
	return MC_OK;
}

static int
drain(struct push *p)
{
	int rc = MC_OK;

	while (rc == MC_OK && mc__redis_pending(p->r) > 0)
		rc = one_reply(p);
	return rc;
}

/* Queues the command for entry i, its value made from content c: SET with GET (the
 * old value comes back to be compared), or in a dry run GET alone. */
static int
queue(struct push *p, size_t i, const unsigned char *c, size_t n, const unsigned char *hash)
{
	const struct pent *e = &p->e[i];
	const char *argv[6];
	size_t lens[6], argc = 0, slot;
	unsigned char *v = NULL;
	size_t vn = 0;
	int rc;

	if ((rc = mc__remote_value(e->type, e->key, c, n, &v, &vn)) != MC_OK)
		return rc == MC_ERR_NOMEM ? no_mem(p->ctx) : mc__err(p->ctx, rc, "%s: %s %s: no "
			"remote form", p->b->path, e->type, e->key);
	slot = (p->whead + mc__redis_pending(p->r)) % MC_PIPE_COMMANDS;
	p->wait[slot].ent = i;
	p->wait[slot].len = vn;
	memcpy(p->wait[slot].hash, hash, MC_HASH_BYTES);
#define ARG(s, l) (argv[argc] = (const char *)(s), lens[argc++] = (l))
	ARG(p->flags & MC_PUSH_DRY_RUN ? "GET" : "SET", 3);
	ARG(e->rkey, strlen(e->rkey));
	if (!(p->flags & MC_PUSH_DRY_RUN)) {
		ARG(v, vn);
		if (p->ttl[0] != '\0') {
			ARG("EX", 2);
			ARG(p->ttl, strlen(p->ttl));
		}
		ARG("GET", 3);
	}
#undef ARG
	rc = mc__redis_append(p->r, (int)argc, argv, lens);
	free(v);
	if (rc == MC_OK && mc__redis_full(p->r))
		rc = drain(p);
	return rc;
}

/* Object obj's content checked: a command for each artifact it is the content of. */
static int
send_object(struct push *p, size_t obj, const unsigned char *c, size_t n)
{
	struct mc_mobject o;
	size_t k;
	int rc;

	if ((rc = mc__mobjects(p->ctx, &p->b->m, obj, 1, &o)) != MC_OK)
		return rc;
	for (k = p->obj_first[obj]; k < p->obj_first[obj + 1]; k++) {
		size_t i = p->by_obj[k];
		if (!p->e[i].shadowed && (rc = queue(p, i, c, n, o.hash)) != MC_OK)
			return rc;
	}
	p->done += n;
	mc__progress(p->ctx, "push", p->done, p->total);
	return MC_OK;
}

/* The stream's sink: an object's bytes are held until the stream has gone past it, its
 * hash checked, then sent. */
static int
sink(void *ud, size_t obj, const unsigned char *buf, size_t n)
{
	struct push *p = ud;
	int rc;

	if (obj != p->cur && p->cur != SIZE_MAX) {
		if ((rc = send_object(p, p->cur, p->buf, p->len)) != MC_OK)
			return rc;
		p->cur = SIZE_MAX;
		p->len = 0;
	}
	if (p->obj_first[obj] == p->obj_first[obj + 1])
		return MC_OK; /* no artifact to write has it */
	p->cur = obj;
	if (p->len + n > p->bufcap) {
		size_t cap = p->bufcap ? p->bufcap : 65536;
		unsigned char *nb;
		while (cap < p->len + n)
			cap *= 2;
		if ((nb = realloc(p->buf, cap)) == NULL)
			return no_mem(p->ctx);
		p->buf = nb;
		p->bufcap = cap;
	}
	memcpy(p->buf + p->len, buf, n);
	p->len += n;
	return MC_OK;
}

static int
rkey_cmp(const void *a, const void *b)
{
	const struct pent *x = a, *y = b;
	int c = strcmp(x->rkey, y->rkey);

	return c != 0 ? c : (x->artifact > y->artifact) - (x->artifact < y->artifact);
}

static int
add_entry(struct push *p, const struct mc_martifact *a, size_t i, const char *rkey)
{
	struct pent *e;

	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		if ((e = realloc(p->e, cap * sizeof *e)) == NULL)
			return no_mem(p->ctx);
		p->e = e;
		p->cap = cap;
	}
	e = &p->e[p->n];
	memset(e, 0, sizeof *e);
	e->type = a->type, e->object = a->object, e->artifact = i;
	if ((e->rkey = mc__strdup(rkey)) == NULL || (e->key = mc__strdup(a->key)) == NULL) {
		free(e->rkey);
		return no_mem(p->ctx);
	}
	p->n++;
	return MC_OK;
}

/* The selected artifacts with a remote form, sorted by remote key; of several with one
 * key all but the last in the bundle's order are shadowed. The others are told. */
static int
collect(struct push *p)
{
	const mc_bundle *b = p->b;
	unsigned spaces = MC_SPACE_TORCH | (p->flags & MC_PUSH_TRITON ? MC_SPACE_TRITON : 0);
	char rkey[MC_RKEY_MAX];
	struct mc_acur cur;
	size_t i;
	int rc = MC_OK;

	mc__acur_init(&cur, p->ctx, &b->m, NULL);
	for (i = 0; i < b->m.nartifacts && rc == MC_OK; i++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK || !b->sel[i])
			continue;
		if (mc__remote_key(a->type, a->key, mc__redis_triton_format(p->r), spaces, rkey,
				   sizeof rkey) != MC_OK) {
			if (p->fn != NULL)
				p->fn(p->ud, MC_REMOTE_NO_FORM, a->type, a->key, NULL, a->size);
			continue;
		}
		rc = add_entry(p, a, i, rkey);
	}
	mc__acur_free(&cur);
	if (rc != MC_OK || p->n == 0)
		return rc;
	qsort(p->e, p->n, sizeof *p->e, rkey_cmp);
	for (i = 0; i + 1 < p->n; i++)
		if (strcmp(p->e[i].rkey, p->e[i + 1].rkey) == 0) {
			p->e[i].shadowed = 1;
			tell(p, MC_REMOTE_SHADOWED, &p->e[i], 0);
		}
	return MC_OK;
}

/* by_obj and obj_first: the entries of each object; total: the bytes to send. */
static int
index_objects(struct push *p)
{
	size_t nobj = p->b->m.nobjects, i, *fill;
	struct mc_mobject o;
	int rc;

	if ((p->by_obj = malloc((p->n + 1) * sizeof *p->by_obj)) == NULL ||
	    (p->obj_first = calloc(nobj + 2, sizeof *p->obj_first)) == NULL ||
	    (fill = calloc(nobj + 1, sizeof *fill)) == NULL)
		return no_mem(p->ctx);
	for (i = 0; i < p->n; i++)
		p->obj_first[p->e[i].object + 1]++;
	for (i = 0; i < nobj; i++)
		p->obj_first[i + 1] += p->obj_first[i];
	for (i = 0; i < p->n; i++) {
		size_t ob = p->e[i].object;
		p->by_obj[p->obj_first[ob] + fill[ob]++] = i;
	}
	for (i = 0, rc = MC_OK; i < nobj && rc == MC_OK; i++)
		if (p->obj_first[i] < p->obj_first[i + 1] &&
		    (rc = mc__mobjects(p->ctx, &p->b->m, i, 1, &o)) == MC_OK)
			p->total += o.size;
	free(fill);
	return rc;
}

/* Objects of no bytes stream none: sent once the stream checked the rest. */
static int
send_empty(struct push *p)
{
	struct mc_mobject o;
	size_t i;
	int rc = MC_OK;

	for (i = 0; i < p->b->m.nobjects && rc == MC_OK; i++)
		if (p->obj_first[i] < p->obj_first[i + 1] &&
		    (rc = mc__mobjects(p->ctx, &p->b->m, i, 1, &o)) == MC_OK && o.size == 0)
			rc = send_object(p, i, (const unsigned char *)"", 0);
	return rc;
}

static void
push_free(struct push *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->e[i].rkey);
		free(p->e[i].key);
	}
	free(p->e);
	free(p->by_obj);
	free(p->obj_first);
	free(p->buf);
	free(p->wait);
}

int
mc_bundle_push(mc_bundle *b, mc_redis *r, unsigned flags, uint64_t ttl_seconds,
	       mc_remote_fn fn, void *ud)
{
	struct push p;
	int rc, rc2 = MC_OK;

	if (b == NULL || r == NULL)
		return MC_ERR_INVALID;
	memset(&p, 0, sizeof p);
	p.b = b, p.r = r, p.ctx = b->ctx, p.flags = flags, p.fn = fn, p.ud = ud;
	p.cur = SIZE_MAX;
	if (ttl_seconds > 0)
		snprintf(p.ttl, sizeof p.ttl, "%llu", (unsigned long long)ttl_seconds);
	if ((p.wait = calloc(MC_PIPE_COMMANDS, sizeof *p.wait)) == NULL)
		rc = no_mem(p.ctx);
	else if ((rc = mc__bundle_policy(b)) == MC_OK && (rc = mc__bundle_plan(b)) == MC_OK &&
		 (rc = collect(&p)) == MC_OK && (rc = index_objects(&p)) == MC_OK && p.n > 0)
		rc = mc__bundle_stream(b, sink, NULL, &p);
	if (rc == MC_OK && p.cur != SIZE_MAX)
		rc = send_object(&p, p.cur, p.buf, p.len);
	if (rc == MC_OK && p.n > 0)
		rc = send_empty(&p);
	/* What was queued was checked: its replies are read whatever came after (after a
	 * failure, dropped: the failure's message stays). */
	if (p.wait != NULL && rc == MC_OK)
		rc = drain(&p);
	else if (p.wait != NULL && rc2 == MC_OK)
		mc__redis_discard(r);
	push_free(&p);
	return rc;
}
