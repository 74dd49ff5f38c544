/* push.c - a verified bundle into torch's and Triton's Redis caches: each artifact with a
 * remote form written in it, once its object checked, pipelined; what the store had is
 * compared with what is written, so a second push says it changed nothing.
 *
 * Each entry is one transaction (MULTI, TTL, SET ... GET, EXEC): the bytes and the TTL
 * told are what the SET replaced, with no other client's write between. An entry keeps
 * its TTL (KEEPTTL) unless one is given, so that a push without one leaves alone what
 * a push with one set; a TTL set anew over the same bytes is a change, told as one.
 *
 * Only the objects to send are read (all of a bundle read in order). The context's
 * workers check them and make their commands side by side, and leave them in a slot
 * for their turn (an object's place among those sent); one worker at a time sends the
 * turns that are ready, in order, so that what is sent and told does not depend on the
 * number of workers: after an object that fails, nothing more is sent. The store works
 * on what is in flight while the workers make the next commands: once MC_PIPE_BYTES or
 * MC_PIPE_COMMANDS are awaited, replies are read until half of that is.
 *
 * The plan (every artifact's key and destination checked) may run on a thread of its
 * own while the first commands are made (early_start): nothing is sent and nothing
 * told until it passed, and should it have left an artifact out, the push starts over
 * the ordinary way, so that what is sent and told is what a push after the plan sends
 * and tells. */
#include "config.h"

#include <limits.h>
#include <pthread.h>
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
	int has_sha;
	unsigned char sha[MC_SHA256_BYTES]; /* the SHA-256 it lists */
};

struct pcmd { /* a command made, then sent and awaiting its reply */
	size_t ent;
	unsigned char *buf; /* the command's bytes */
	size_t len;
	unsigned char *val; /* a dry run's value, made to be compared (else NULL) */
	size_t voff, vlen;  /* the value: in val, else at voff in buf */
	uint64_t size;      /* the content's */
	unsigned char hash[MC_HASH_BYTES]; /* the content's (its object's, checked) */
};

struct pcmds { /* an object's commands, made, to send */
	struct pcmd *c;
	size_t n, cap;
	uint64_t bytes; /* theirs */
	uint64_t size;  /* the object's content */
	int set;        /* in a slot: waiting for its turn */
};

struct pworker {
	unsigned char *acc; /* the pieces of an object over 4 MiB */
	size_t acc_len, acc_cap, acc_obj;
	struct pcmds cmds;
};

/* The plan made beside the first commands: on a copy of the context, so that its
 * messages stay its own. */
struct early {
	pthread_t thread;
	mc_bundle *b;
	mc_ctx ctx;
	int rc;
	int joined;
};

/* How many turns past the next one may wait with their commands made. */
#define PUSH_AHEAD 64

struct push {
	mc_bundle *b;
	mc_redis *r;
	mc_ctx *ctx;
	unsigned flags;
	char ttl[24];    /* the TTL given, as the command takes it; "": none */
	long long ttl_s; /* and in seconds; 0: none */
	mc_remote_fn fn;
	void *ud;
	struct pent *e;
	size_t n, cap;
	size_t *by_obj, *obj_first; /* entries in object order; each object's first */
	unsigned char *want;        /* the objects that have entries to write */
	size_t *wobj, nwobj;        /* those objects in order: an object's turn is its place */
	struct pworker *w;
	unsigned nworkers;
	pthread_mutex_t lock; /* of the slots, next, failed and sending */
	pthread_cond_t turn;
	int sync_made;
	struct pcmds *ready; /* PUSH_AHEAD slots: turn t's in t % PUSH_AHEAD */
	uint64_t ready_bytes;
	int sending;   /* a worker is sending (the connection is its alone) */
	size_t next;   /* the turn whose commands go out next */
	size_t failed; /* the lowest turn that failed, or MC_NO_INDEX */
	struct pcmd *wait; /* MC_PIPE_COMMANDS of them, a ring */
	size_t whead, nwait;
	uint64_t inflight; /* bytes of the commands awaited */
	uint64_t done, total;
	struct early *early; /* NULL: the plan was made first */
	int gate;            /* with early: 0 until the first send, then 1 (passed) or -1 */
	size_t *held, nheld, heldcap; /* artifacts of no remote form, told at the gate */
};

static int pass_gate(struct push *p, mc_ctx *ctx);

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

static void
pcmd_free(struct pcmd *c)
{
	free(c->buf);
	free(c->val);
	c->buf = c->val = NULL;
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
		same = mc__chash(p->b->m.halg, h, c, cn) == MC_OK &&
		       memcmp(h, hash, sizeof h) == 0;
	}
	free(c);
	return same;
}

/* Reads the reply of the oldest command awaited and tells what the store had: the
 * very bytes written, or the same content in another envelope, is unchanged. */
static int
one_reply(struct push *p, int *refused)
{
	struct pcmd *w = &p->wait[p->whead];
	struct mc_rreply rep;
	const struct pent *e = &p->e[w->ent];
	long long ttl;
	int rc, what, dry = (p->flags & MC_PUSH_DRY_RUN) != 0, same = 0;

	rc = mc__redis_reply_ttl(p->r, e->rkey, &rep, &ttl);
	*refused = rc != MC_OK && rep.error != NULL;
	p->whead = (p->whead + 1) % MC_PIPE_COMMANDS; /* this reply is read, whatever it was */
	p->nwait--;
	p->inflight -= w->len;
	if (rc == MC_OK && !rep.nil && rep.str != NULL)
		same = (rep.len == w->vlen &&
			memcmp(rep.str, w->val != NULL ? w->val : w->buf + w->voff, w->vlen) == 0) ||
		       same_content(p, e, &rep, w->hash);
	pcmd_free(w);
	if (rc != MC_OK) {
		mc__redis_reply_free(&rep);
		return rc;
	}
	if (rep.nil || rep.str == NULL)
		what = dry ? MC_REMOTE_WOULD_SEND : MC_REMOTE_SENT;
	else if (!same)
		what = dry ? MC_REMOTE_WOULD_REPLACE : MC_REMOTE_REPLACED;
	else if (p->ttl_s > 0 && ttl != p->ttl_s) /* none before, or another */
		what = dry ? MC_REMOTE_WOULD_CHANGE_TTL : MC_REMOTE_TTL_CHANGED;
	else
		what = MC_REMOTE_UNCHANGED;
	mc__redis_reply_free(&rep);
	tell(p, what, e, w->size);
	return MC_OK;
}

/* Reads replies until at most ncmds commands and nbytes bytes are awaited. */
static int
drain_to(struct push *p, size_t ncmds, uint64_t nbytes)
{
	int rc = MC_OK;

	int refused;

	while (rc == MC_OK && p->nwait > 0 && (p->nwait > ncmds || p->inflight > nbytes))
		rc = one_reply(p, &refused);
	return rc;
}

/* After a failure: the replies of what was sent, read and told, so that the counts are
 * what the store got, past any command the server refused; a failure of the connection
 * drops the rest. The failure's message stays. */
static void
drain_rest(struct push *p)
{
	char msg[MC_ERRBUF];
	int refused = 1;

	snprintf(msg, sizeof msg, "%s", p->ctx->err);
	while (p->nwait > 0 && refused)
		if (one_reply(p, &refused) == MC_OK)
			refused = 1; /* read: go on */
	if (p->nwait > 0)
		mc__redis_discard(p->r);
	snprintf(p->ctx->err, sizeof p->ctx->err, "%s", msg);
}

/* Drops the commands awaited or made and not sent (after a failure). */
static void
drop_waiting(struct push *p)
{
	for (; p->nwait > 0; p->nwait--) {
		pcmd_free(&p->wait[p->whead]);
		p->whead = (p->whead + 1) % MC_PIPE_COMMANDS;
	}
}

/* Makes in c the command for entry i, its value from content (n bytes): SET with GET
 * (the old value comes back to be compared), or in a dry run GET alone (the value made
 * beside it, to be compared); either after TTL, in one transaction. */
static int
make_command(struct push *p, mc_ctx *ctx, size_t i, const unsigned char *content, size_t n,
	     struct pcmd *c)
{
	const struct pent *e = &p->e[i];
	const char *argv[7];
	size_t lens[7], argc = 0, vn = 0;
	unsigned char *made = NULL, *at = NULL;
	int rc, dry = (p->flags & MC_PUSH_DRY_RUN) != 0;

	rc = dry ? mc__remote_value(e->type, e->key, content, n, &made, &vn)
		 : mc__remote_prepare(e->type, e->key, content, n, &made, &vn);
	if (rc != MC_OK)
		return rc == MC_ERR_NOMEM ? no_mem(ctx) : mc__err(ctx, rc, "%s: %s %s: no remote "
			"form", p->b->path, e->type, e->key);
	if (dry) {
		c->val = made;
		c->vlen = vn;
	}
#define ARG(s, l) (argv[argc] = (const char *)(s), lens[argc++] = (l))
	ARG(dry ? "GET" : "SET", 3);
	ARG(e->rkey, strlen(e->rkey));
	if (!dry) {
		ARG(made, vn); /* NULL: written below, in place */
		if (p->ttl[0] != '\0') {
			ARG("EX", 2);
			ARG(p->ttl, strlen(p->ttl));
		} else {
			ARG("KEEPTTL", 7);
		}
		ARG("GET", 3);
	}
#undef ARG
	c->ent = i;
	c->size = n;
	c->buf = mc__redis_format_ttl((int)argc, argv, lens, dry ? -1 : 2, &at, &c->len);
	if (c->buf != NULL && !dry) {
		if (made == NULL)
			mc__remote_fill(e->type, content, n, at);
		c->voff = (size_t)(at - c->buf);
		c->vlen = vn;
	}
	if (!dry)
		free(made);
	if (c->buf == NULL) {
		pcmd_free(c);
		return no_mem(ctx);
	}
	return MC_OK;
}

/* The commands of an object checked, made by its worker: one for each entry it is the
 * content of, each entry's SHA-256 (when it lists one) checked first. */
static int
make_commands(struct push *p, struct pworker *pw, mc_ctx *ctx, const struct mc_objout *o,
	      const unsigned char *content)
{
	struct pcmds *l = &pw->cmds;
	struct mc_mobject ob;
	size_t k;
	int rc;

	if ((rc = mc__mobjects(ctx, &p->b->m, o->obj, 1, &ob)) != MC_OK)
		return rc;
	for (k = p->obj_first[o->obj]; k < p->obj_first[o->obj + 1]; k++) {
		size_t i = p->by_obj[k];
		const struct pent *e = &p->e[i];
		struct pcmd *c;
		if (e->shadowed)
			continue;
		if (e->has_sha && (o->sha == NULL || memcmp(e->sha, o->sha, MC_SHA256_BYTES) != 0))
			return mc__err(ctx, MC_ERR_INTEGRITY, "%s: %s artifact %.200s: content does "
				       "not match its sha256", p->b->path, e->type, e->key);
		if (mc__grow(&l->c, &l->cap, l->n + 1, sizeof *l->c) != MC_OK)
			return no_mem(ctx);
		c = &l->c[l->n];
		memset(c, 0, sizeof *c);
		memcpy(c->hash, ob.hash, MC_HASH_BYTES);
		if ((rc = make_command(p, ctx, i, content, o->size, c)) != MC_OK)
			return rc;
		l->n++;
		l->bytes += c->len;
	}
	l->size = o->size;
	return MC_OK;
}

/* Sends an object's commands (by the one sender): each awaited in the ring, whose
 * replies are read down to half once it is full. */
static int
send_commands(struct push *p, struct pcmds *l, unsigned id)
{
	size_t k;
	int rc = MC_OK;

	for (k = 0; k < l->n && rc == MC_OK; k++) {
		struct pcmd *c = &l->c[k];
		if ((rc = mc__redis_send_cmd(p->r, c->buf, c->len, 4)) != MC_OK)
			break;
		p->wait[(p->whead + p->nwait) % MC_PIPE_COMMANDS] = *c;
		c->buf = c->val = NULL; /* the ring's now */
		p->nwait++;
		p->inflight += c->len;
		if (p->nwait >= MC_PIPE_COMMANDS || p->inflight >= MC_PIPE_BYTES)
			rc = drain_to(p, MC_PIPE_COMMANDS / 2, MC_PIPE_BYTES / 2);
	}
	p->done += l->size;
	if (id == 0)
		mc__progress(p->ctx, "push", p->done, p->total);
	return rc;
}

static void
drop_commands(struct pcmds *l)
{
	size_t k;

	for (k = 0; k < l->n; k++)
		pcmd_free(&l->c[k]);
	l->n = 0;
	l->bytes = l->size = 0;
}

/* An object's turn: its place among the objects to send. */
static size_t
turn_of(const struct push *p, size_t obj)
{
	size_t lo = 0, hi = p->nwobj;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->wobj[mid] < obj)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Leaves the commands of turn t in its slot (the lock held), once there is room: turn t
 * is the next, or fewer than PUSH_AHEAD turns and MC_PIPE_BYTES wait before it. MC_OK,
 * or 1 when a turn before it failed. */
static int
deposit(struct push *p, struct pcmds *l, size_t t)
{
	struct pcmds *slot = &p->ready[t % PUSH_AHEAD], swap;

	while (p->failed > t && t != p->next &&
	       (t - p->next >= PUSH_AHEAD || p->ready_bytes >= MC_PIPE_BYTES))
		pthread_cond_wait(&p->turn, &p->lock);
	if (p->failed < t)
		return 1;
	swap = *slot; /* empty (its array went with the turn before) */
	*slot = *l;
	slot->set = 1;
	*l = swap;
	l->set = 0;
	p->ready_bytes += slot->bytes;
	return 0;
}

/* Sends the turns that are ready, in order, until one is not (or one failed); called
 * by the worker that found the next turn ready and nobody sending. The connection is
 * the sender's alone; the lock guards only the slots. */
static int
send_ready(struct push *p, unsigned id, mc_ctx *wctx)
{
	struct pcmds take;
	size_t t;
	int rc = MC_OK;

	memset(&take, 0, sizeof take);
	if (p->early != NULL && p->gate == 0)
		rc = pass_gate(p, wctx);
	for (;;) {
		pthread_mutex_lock(&p->lock);
		t = p->next;
		if (rc != MC_OK || !p->ready[t % PUSH_AHEAD].set || p->failed <= t) {
			if (rc != MC_OK && t < p->failed)
				p->failed = t;
			p->sending = 0;
			pthread_cond_broadcast(&p->turn);
			pthread_mutex_unlock(&p->lock);
			break;
		}
		take = p->ready[t % PUSH_AHEAD];
		memset(&p->ready[t % PUSH_AHEAD], 0, sizeof take);
		p->ready_bytes -= take.bytes;
		pthread_mutex_unlock(&p->lock);
		if ((rc = send_commands(p, &take, id)) != MC_OK) {
			if (wctx != mc__redis_ctx(p->r))
				snprintf(wctx->err, sizeof wctx->err, "%s", mc__redis_ctx(p->r)->err);
		}
		drop_commands(&take);
		free(take.c);
		memset(&take, 0, sizeof take);
		if (rc == MC_OK) {
			pthread_mutex_lock(&p->lock);
			p->next = t + 1;
			pthread_cond_broadcast(&p->turn);
			pthread_mutex_unlock(&p->lock);
		}
	}
	return rc;
}

/* The pass's done: an object checked (or failed) on worker id; its commands are made
 * there and left for their turn, and the worker that finds the next turn ready with
 * nobody sending sends it and what follows. A failure of the connection, told on the
 * connection's context, is copied to the worker's. */
static int
object_done(void *ud, unsigned id, mc_ctx *wctx, const struct mc_objout *o)
{
	struct push *p = ud;
	struct pworker *pw = &p->w[id];
	const unsigned char *content = o->content != NULL ? o->content : pw->acc;
	size_t t = turn_of(p, o->obj);
	int rc = o->rc, send = 0;

	if (rc == MC_OK && o->content == NULL && (pw->acc_obj != o->obj || pw->acc_len != o->size))
		rc = mc__err(wctx, MC_ERR_INVALID, "push: object %zu came in pieces lost", o->obj);
	if (rc == MC_OK)
		rc = make_commands(p, pw, wctx, o, o->size > 0 ? content : (const unsigned char *)"");
	pthread_mutex_lock(&p->lock);
	if (rc == MC_OK && deposit(p, &pw->cmds, t))
		rc = mc__err(wctx, MC_ERR_INVALID, "push: stopped by an earlier failure");
	if (rc != MC_OK && t < p->failed)
		p->failed = t;
	if (rc == MC_OK && !p->sending && p->ready[p->next % PUSH_AHEAD].set &&
	    p->next < p->failed)
		send = p->sending = 1;
	pthread_cond_broadcast(&p->turn);
	pthread_mutex_unlock(&p->lock);
	drop_commands(&pw->cmds);
	pw->acc_len = 0;
	pw->acc_obj = MC_NO_INDEX;
	if (send)
		rc = send_ready(p, id, wctx);
	return rc;
}

/* The pass's sink: the pieces of an object over 4 MiB, held by their worker until the
 * object checked. */
static int
object_piece(void *ud, unsigned id, mc_ctx *wctx, size_t obj, const unsigned char *buf,
	     size_t n)
{
	struct pworker *pw = &((struct push *)ud)->w[id];

	if (pw->acc_obj != obj) {
		pw->acc_obj = obj;
		pw->acc_len = 0;
	}
	if (mc__grow(&pw->acc, &pw->acc_cap, pw->acc_len + n, 1) != MC_OK)
		return no_mem(wctx);
	memcpy(pw->acc + pw->acc_len, buf, n);
	pw->acc_len += n;
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

	if (mc__grow(&p->e, &p->cap, p->n + 1, sizeof *p->e) != MC_OK)
		return no_mem(p->ctx);
	e = &p->e[p->n];
	memset(e, 0, sizeof *e);
	e->type = a->type, e->object = a->object, e->artifact = i;
	if ((e->has_sha = a->sha256 != NULL))
		memcpy(e->sha, a->sha256, MC_SHA256_BYTES);
	if ((e->rkey = mc__strdup(rkey)) == NULL || (e->key = mc__strdup(a->key)) == NULL) {
		free(e->rkey);
		return no_mem(p->ctx);
	}
	p->n++;
	return MC_OK;
}

/* An artifact of no remote form, told at the gate (early). */
static int
hold(struct push *p, size_t i)
{
	if (mc__grow(&p->held, &p->heldcap, p->nheld + 1, sizeof *p->held) != MC_OK)
		return no_mem(p->ctx);
	p->held[p->nheld++] = i;
	return MC_OK;
}

/* The selected artifacts with a remote form, sorted by remote key; of several with one
 * key all but the last in the bundle's order are shadowed. The others are told, or
 * with the plan not made yet (early), held to be told at the gate: every artifact of a
 * selected type counts as selected until then. */
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
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK ||
		    !(p->early != NULL ? mc__type_selected(b, a->type) : b->sel[i]))
			continue;
		if (mc__remote_key(a->type, a->key, mc__redis_triton_format(p->r), spaces, rkey,
				   sizeof rkey) != MC_OK) {
			if (p->early != NULL)
				rc = hold(p, i);
			else if (p->fn != NULL)
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
			if (p->early == NULL)
				tell(p, MC_REMOTE_SHADOWED, &p->e[i], 0);
		}
	return MC_OK;
}

/* What collect held, told as it would have told it. */
static int
tell_held(struct push *p, mc_ctx *ctx)
{
	struct mc_acur cur;
	size_t k;
	int rc = MC_OK;

	if (p->fn == NULL)
		return MC_OK;
	mc__acur_init(&cur, ctx, &p->b->m, NULL);
	for (k = 0; k < p->nheld && rc == MC_OK; k++) {
		const struct mc_martifact *a;
		if ((rc = mc__acur_get(&cur, p->held[k], &a)) == MC_OK)
			p->fn(p->ud, MC_REMOTE_NO_FORM, a->type, a->key, NULL, a->size);
	}
	mc__acur_free(&cur);
	for (k = 0; k < p->n && rc == MC_OK; k++)
		if (p->e[k].shadowed)
			tell(p, MC_REMOTE_SHADOWED, &p->e[k], 0);
	return rc;
}

/* Waits for the plan's thread, once. */
static void
early_wait(struct early *e)
{
	if (!e->joined)
		pthread_join(e->thread, NULL);
	e->joined = 1;
}

static void *
early_plan(void *arg)
{
	struct early *e = arg;

	e->rc = mc__bundle_plan_in(e->b, &e->ctx);
	return NULL;
}

/* Starts the plan on a thread of its own, where that changes nothing but the time:
 * a bundle read from a file and not read yet, more than one thread, the built-in types
 * only (whose handlers only read the context once every tier's root is resolved, here
 * and now, as the plan would). 0: the plan is to be made first. */
static int
early_start(struct push *p)
{
	mc_ctx *ctx = p->ctx;
	char saved[MC_ERRBUF];
	const char *root;
	size_t i, named;
	struct early *e;
	int ok = 1;

	if (p->b->planned || !p->b->fresh || p->b->seq || mc__threads(ctx) < 2 ||
	    ctx->ntypes != ctx->nbuiltin)
		return 0;
	snprintf(saved, sizeof saved, "%s", ctx->err);
	for (i = 0; i < ctx->ntypes && ok; i++)
		ok = mc__tier_root(ctx, ctx->types[i].tier, &root, &named) == MC_OK;
	snprintf(ctx->err, sizeof ctx->err, "%s", saved);
	if (!ok || (e = calloc(1, sizeof *e)) == NULL)
		return 0;
	e->b = p->b;
	e->ctx = *ctx;
	if (mc__thread_create(&e->thread, early_plan, e) != 0) {
		free(e);
		return 0;
	}
	p->early = e;
	return 1;
}

/* The plan of the push's checks: on a thread of its own where it can be, else now. */
static int
plan_early(mc_bundle *b, void *ud)
{
	return early_start(ud) ? MC_OK : mc__bundle_plan(b);
}

/* The gate, before anything is sent or told (by the one sender, or by the caller when
 * there is nothing to send): the plan is waited for; it must have passed and left
 * nothing out, else the gate closes (-1) and this pass stops. */
static int
pass_gate(struct push *p, mc_ctx *ctx)
{
	struct early *e = p->early;

	early_wait(e);
	if (e->rc != MC_OK || p->b->ndropped > 0) {
		p->gate = -1;
		return mc__err(ctx, MC_ERR_INVALID, "push: to be planned again");
	}
	p->gate = 1;
	return tell_held(p, ctx);
}

/* After a pass with the plan beside it: the plan waited for, if no one did; its
 * failure is the push's (nothing was sent). *again: it left an artifact out, so the
 * push starts over in order. Where nothing passed the gate (nothing to send, or a
 * failure first), what collect held is told now. */
static int
early_end(struct push *p, int rc, int *again)
{
	struct early *e = p->early;
	char msg[MC_ERRBUF];
	int trc;

	*again = 0;
	early_wait(e);
	if (e->rc != MC_OK) {
		snprintf(p->ctx->err, sizeof p->ctx->err, "%s", e->ctx.err);
		return e->rc;
	}
	if (p->b->ndropped > 0) {
		*again = 1;
		return MC_OK;
	}
	if (p->gate == 0) {
		snprintf(msg, sizeof msg, "%s", p->ctx->err);
		p->gate = 1;
		if ((trc = tell_held(p, p->ctx)) != MC_OK && rc == MC_OK)
			return trc;
		snprintf(p->ctx->err, sizeof p->ctx->err, "%s", msg);
	}
	return rc;
}

/* by_obj and obj_first: the entries of each object; want and wobj: the objects with
 * some; total: their bytes. */
static int
index_objects(struct push *p)
{
	size_t nobj = p->b->m.nobjects, i, *fill;
	struct mc_mobject o;
	int rc;

	if ((p->by_obj = malloc((p->n + 1) * sizeof *p->by_obj)) == NULL ||
	    (p->obj_first = calloc(nobj + 2, sizeof *p->obj_first)) == NULL ||
	    (p->want = calloc(nobj + 1, 1)) == NULL ||
	    (p->wobj = malloc((p->n + 1) * sizeof *p->wobj)) == NULL ||
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
		if (p->obj_first[i] < p->obj_first[i + 1]) {
			p->want[i] = 1;
			p->wobj[p->nwobj++] = i;
			if ((rc = mc__mobjects(p->ctx, &p->b->m, i, 1, &o)) == MC_OK)
				p->total += o.size;
		}
	free(fill);
	return rc;
}

/* The workers' records and the lock of their turns. */
static int
workers_init(struct push *p)
{
	unsigned k;

	/* as many as the pass may run: mc__threads() gives at most MC_MAX_THREADS */
	p->nworkers = MC_MAX_THREADS;
	if ((p->w = calloc(p->nworkers, sizeof *p->w)) == NULL ||
	    (p->wait = calloc(MC_PIPE_COMMANDS, sizeof *p->wait)) == NULL ||
	    (p->ready = calloc(PUSH_AHEAD, sizeof *p->ready)) == NULL)
		return no_mem(p->ctx);
	for (k = 0; k < p->nworkers; k++)
		p->w[k].acc_obj = MC_NO_INDEX;
	if (pthread_mutex_init(&p->lock, NULL) != 0)
		return mc__err(p->ctx, MC_ERR_NOMEM, "cannot create a lock");
	if (pthread_cond_init(&p->turn, NULL) != 0) {
		pthread_mutex_destroy(&p->lock);
		return mc__err(p->ctx, MC_ERR_NOMEM, "cannot create a condition variable");
	}
	p->sync_made = 1;
	return MC_OK;
}

static void
push_free(struct push *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free(p->e[i].rkey);
		free(p->e[i].key);
	}
	for (i = 0; p->w != NULL && i < p->nworkers; i++) {
		drop_commands(&p->w[i].cmds);
		free(p->w[i].cmds.c);
		free(p->w[i].acc);
	}
	for (i = 0; p->ready != NULL && i < PUSH_AHEAD; i++) { /* turns after a failure */
		drop_commands(&p->ready[i]);
		free(p->ready[i].c);
	}
	free(p->ready);
	if (p->wait != NULL)
		drop_waiting(p);
	if (p->sync_made) {
		pthread_cond_destroy(&p->turn);
		pthread_mutex_destroy(&p->lock);
	}
	free(p->e);
	free(p->by_obj);
	free(p->obj_first);
	free(p->want);
	free(p->wobj);
	free(p->w);
	free(p->wait);
	free(p->held);
	if (p->early != NULL)
		early_wait(p->early);
	free(p->early);
}

/* The artifacts collected, indexed by object, and the objects with some read and
 * sent. */
static int
push_objects(struct push *p)
{
	int rc;

	if ((rc = collect(p)) != MC_OK)
		return rc;
	if ((rc = index_objects(p)) != MC_OK || p->n == 0)
		return rc;
	return mc__bundle_stream_some(p->b, p->want, object_piece, object_done, p);
}

int
mc_bundle_push(mc_bundle *b, mc_redis *r, unsigned flags, uint64_t ttl_seconds,
	       mc_remote_fn fn, void *ud)
{
	struct push p;
	char before[MC_ERRBUF];
	int rc, again = 0;

	if (b == NULL || r == NULL)
		return MC_ERR_INVALID;
	if (ttl_seconds > LLONG_MAX / 1000) /* Redis keeps expiries in milliseconds */
		return mc__err(b->ctx, MC_ERR_INVALID, "push: a TTL of %llu seconds is more than "
			       "Redis takes", (unsigned long long)ttl_seconds);
	snprintf(before, sizeof before, "%s", b->ctx->err);
	do {
		memset(&p, 0, sizeof p);
		p.b = b, p.r = r, p.ctx = b->ctx, p.flags = flags, p.fn = fn, p.ud = ud;
		p.failed = MC_NO_INDEX;
		if (ttl_seconds > 0) {
			snprintf(p.ttl, sizeof p.ttl, "%llu", (unsigned long long)ttl_seconds);
			p.ttl_s = (long long)ttl_seconds;
		}
		if ((rc = workers_init(&p)) == MC_OK) /* the plan is made already when starting over */
			rc = again ? mc__bundle_plan(b) : mc__bundle_checks(b, plan_early, &p);
		if (rc == MC_OK)
			rc = push_objects(&p);
		if (p.early != NULL && (rc = early_end(&p, rc, &again)) == MC_OK && again) {
			push_free(&p);
			snprintf(b->ctx->err, sizeof b->ctx->err, "%s", before); /* the gate's */
		}
	} while (p.early != NULL && again);
	/* What was sent was checked: its replies are read and told whatever came after. */
	if (rc == MC_OK && (rc = drain_to(&p, 0, 0)) != MC_OK && p.ctx != mc__redis_ctx(r))
		snprintf(p.ctx->err, sizeof p.ctx->err, "%s", mc__redis_ctx(r)->err);
	if (rc != MC_OK && p.nwait > 0)
		drain_rest(&p);
	push_free(&p);
	return rc;
}
