/*
 * wsort.c - the save's tables: the artifacts sorted by (type, key) in runs merged from
 * temp files, the last recorded of each (type, key) kept and conflicts among the others
 * told; and the object table, equal contents made one and ordered by hash.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "write/write.h"

/* Artifacts are sorted by (type, key, order recorded) in runs of at most RUN_ARTS
 * records and RUN_KEYS bytes of keys, which are then merged. */
#define RUN_ARTS 16384
#define RUN_KEYS (2u << 20)

/* The sort of the artifacts into sv->uniq. */
struct sorter {
	struct mc_wsave *sv;
	mc_writer *w;
	uint32_t *rank;        /* per type: its place in name order */
	struct mc_store runs;  /* sorted runs: struct mc_wart, then its key */
	uint64_t *run_off;     /* where each run starts; run_off[nruns] is the end */
	size_t nruns;
};

/* An artifact of a repeated (type, key), listed for the conflict check. */
struct wdup {
	uint64_t uniq_off;     /* the kept artifact's record */
	uint32_t obj;
	uint32_t first;        /* the first of its (type, key) */
};

static int
rank_types(struct sorter *so)
{
	mc_writer *w = so->w;
	uint32_t i, j;

	if ((so->rank = calloc(w->ntypes + 1, sizeof *so->rank)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < w->ntypes; i++)
		for (j = 0; j < w->ntypes; j++)
			so->rank[i] += strcmp(w->types[j], w->types[i]) < 0;
	return MC_OK;
}

static int
key_cmp(const unsigned char *a, uint32_t na, const unsigned char *b, uint32_t nb)
{
	int c = memcmp(a, b, na < nb ? na : nb);

	return c != 0 ? c : na < nb ? -1 : na > nb;
}

/* ---- runs ---- */

struct runent {
	const unsigned char *key;
	uint32_t key_len, rank, seq, i;
};

static int
runent_cmp(const void *x, const void *y)
{
	const struct runent *a = x, *b = y;
	int c;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if ((c = key_cmp(a->key, a->key_len, b->key, b->key_len)) != 0)
		return c;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* A run being made: its records, their keys, and the order to write them in. */
struct run {
	struct mc_wart *rec;
	struct runent *ent;
	unsigned char *keys;
	size_t keycap;
};

/* Reads the artifacts from first on, as many as a run holds (*n), and their keys. */
static int
run_read(struct sorter *so, struct run *r, uint32_t first, size_t *n_out)
{
	mc_writer *w = so->w;
	size_t n = w->narts - first < RUN_ARTS ? w->narts - first : RUN_ARTS, kb, i;
	uint64_t k0;
	int rc;

	if ((rc = mc__store_io(w->ctx, &w->arts, (uint64_t)first * sizeof *r->rec, r->rec,
			       n * sizeof *r->rec, 0)) != MC_OK)
		return rc;
	/* Keys are stored in the order recorded: a run's are one range. */
	k0 = r->rec[0].key_off;
	for (i = 1; i < n && r->rec[i].key_off + r->rec[i].key_len - k0 <= RUN_KEYS; i++)
		;
	n = i;
	kb = (size_t)(r->rec[n - 1].key_off + r->rec[n - 1].key_len - k0);
	if (kb + 1 > r->keycap) {
		unsigned char *k = realloc(r->keys, kb + 1);
		if (k == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		r->keys = k;
		r->keycap = kb + 1;
	}
	if ((rc = mc__store_io(w->ctx, &w->keys, k0, r->keys, kb, 0)) != MC_OK)
		return rc;
	for (i = 0; i < n; i++) {
		r->ent[i].key = r->keys + (r->rec[i].key_off - k0);
		r->ent[i].key_len = r->rec[i].key_len;
		r->ent[i].rank = so->rank[r->rec[i].type];
		r->ent[i].seq = r->rec[i].seq;
		r->ent[i].i = (uint32_t)i;
	}
	*n_out = n;
	return MC_OK;
}

/* Sorts the n artifacts read into r and appends them to so->runs as one run. */
static int
run_write(struct sorter *so, struct run *r, size_t n)
{
	mc_writer *w = so->w;
	size_t i;
	void *ro;
	int rc = MC_OK;

	qsort(r->ent, n, sizeof *r->ent, runent_cmp);
	if ((ro = realloc(so->run_off, (so->nruns + 2) * sizeof *so->run_off)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	so->run_off = ro;
	so->run_off[so->nruns++] = mc__store_size(&so->runs);
	for (i = 0; rc == MC_OK && i < n; i++) {
		rc = mc__store_append(w->ctx, &so->runs, &r->rec[r->ent[i].i], sizeof *r->rec, NULL);
		if (rc == MC_OK)
			rc = mc__store_append(w->ctx, &so->runs, r->ent[i].key, r->ent[i].key_len, NULL);
	}
	return rc;
}

/* Writes the artifacts to so->runs as sorted runs. */
static int
sort_runs(struct sorter *so)
{
	mc_writer *w = so->w;
	struct run r;
	size_t n = 0;
	uint32_t first;
	int rc = MC_OK;

	memset(&r, 0, sizeof r);
	if ((r.rec = malloc(RUN_ARTS * sizeof *r.rec)) == NULL ||
	    (r.ent = malloc(RUN_ARTS * sizeof *r.ent)) == NULL)
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (first = 0; rc == MC_OK && first < w->narts; first += (uint32_t)n)
		if ((rc = run_read(so, &r, first, &n)) == MC_OK)
			rc = run_write(so, &r, n);
	if (rc == MC_OK && so->run_off != NULL)
		so->run_off[so->nruns] = mc__store_size(&so->runs);
	free(r.rec);
	free(r.ent);
	free(r.keys);
	return rc;
}

/* ---- the merge ---- */

int
mc__wart_next(mc_ctx *ctx, struct mc_sreader *r, struct mc_wart *a, unsigned char *key, int *got)
{
	int rc;

	*got = 0;
	if (r->pos == r->len && r->off == r->end)
		return MC_OK;
	if ((rc = mc__sreader_get(ctx, r, a, sizeof *a)) != MC_OK)
		return rc;
	if (a->key_len > MC_KEY_MAX) {
		errno = 0;
		return mc__store_error(ctx, r->s, "read");
	}
	if ((rc = mc__sreader_get(ctx, r, key, a->key_len)) != MC_OK)
		return rc;
	*got = 1;
	return MC_OK;
}

/* A run being merged: its next artifact and key. */
struct mrun {
	struct mc_sreader r;
	struct mc_wart a;
	uint32_t rank;
	unsigned char key[MC_KEY_MAX];
};

static int
mrun_cmp(const struct mrun *a, const struct mrun *b)
{
	int c;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if ((c = key_cmp(a->key, a->a.key_len, b->key, b->a.key_len)) != 0)
		return c;
	return a->a.seq < b->a.seq ? -1 : a->a.seq > b->a.seq;
}

static void
heap_down(struct mrun **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct mrun *t;
		if (l < n && mrun_cmp(h[l], h[m]) < 0)
			m = l;
		if (l + 1 < n && mrun_cmp(h[l + 1], h[m]) < 0)
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* An artifact recorded before the last of its (type, key). */
struct wmember {
	uint32_t obj, seq, blob;
};

/* Whether member i of a (type, key)'s artifacts (ngrp before the last, a) is followed
 * by one from the same torch blob: torch records a key again as its file changes (a
 * PGO state each time it is written), and loading the blob leaves the last, so only
 * that one is compared with other sources. */
static int
restated(const struct wmember *grp, size_t ngrp, const struct mc_wart *a, size_t i)
{
	uint32_t next = i + 1 < ngrp ? grp[i + 1].blob : a->blob;

	return i < ngrp && grp[i].blob != 0 && grp[i].blob == next;
}

/* The end of a (type, key): its last recorded artifact is kept; when there were more,
 * all of them are listed in sv->dups for the conflict check. */
static int
end_group(struct mc_wsave *sv, const struct mc_wart *a, const unsigned char *key,
	  const struct wmember *grp, size_t ngrp)
{
	mc_writer *w = sv->w;
	struct wdup d;
	size_t i, n;
	int rc;

	if ((rc = mc__store_append(w->ctx, &sv->uniq, a, sizeof *a, &d.uniq_off)) != MC_OK ||
	    (rc = mc__store_append(w->ctx, &sv->uniq, key, a->key_len, NULL)) != MC_OK)
		return rc;
	sv->nuniq++;
	sv->uniq_bytes += a->size;
	if (sv->oi[a->obj] != MC_WMARK_USED) {
		sv->oi[a->obj] = MC_WMARK_USED;
		sv->pass_total += a->size;
	}
	for (i = 0; sv->kept != NULL && i <= ngrp; i++)
		sv->kept[i < ngrp ? grp[i].seq : a->seq] = a->seq;
	if (ngrp == 0 || w->conflict == NULL)
		return MC_OK;
	for (i = 0, n = 0; i < ngrp; i++)
		n += !restated(grp, ngrp, a, i);
	if (n == 0)
		return MC_OK;
	for (i = 0, n = 0; i <= ngrp; i++) {
		if (restated(grp, ngrp, a, i))
			continue;
		d.obj = i < ngrp ? grp[i].obj : a->obj;
		d.first = n++ == 0;
		if (sv->oi[d.obj] == 0)
			sv->oi[d.obj] = MC_WMARK_HASH;
		if ((rc = mc__store_append(w->ctx, &sv->dups, &d, sizeof d, NULL)) != MC_OK)
			return rc;
	}
	return MC_OK;
}

/* The merge: a heap of the runs by their next artifact; cur, the artifact taken last,
 * and the objects of those before it with the same (type, key). */
struct merge {
	struct mrun *runs;
	struct mrun **h;
	size_t nh;
	struct mc_wart cur;
	unsigned char *curkey;
	int have;
	struct wmember *grp;
	size_t ngrp, capgrp;
};

/* Reads each run's first artifact and makes the heap. */
static int
merge_start(struct sorter *so, struct merge *mg)
{
	mc_writer *w = so->w;
	size_t i;
	int rc = MC_OK, got;

	if ((mg->runs = calloc(so->nruns + 1, sizeof *mg->runs)) == NULL ||
	    (mg->curkey = malloc(MC_KEY_MAX)) == NULL ||
	    (mg->h = malloc((so->nruns + 1) * sizeof *mg->h)) == NULL)
		return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < so->nruns && rc == MC_OK; i++) {
		struct mrun *r = &mg->runs[i];
		rc = mc__sreader_init(w->ctx, &r->r, &so->runs, so->run_off[i], so->run_off[i + 1],
				      MC_WSORT_READ);
		if (rc == MC_OK)
			rc = mc__wart_next(w->ctx, &r->r, &r->a, r->key, &got);
		if (rc == MC_OK && got) {
			r->rank = so->rank[r->a.type];
			mg->h[mg->nh++] = r;
		}
	}
	for (i = mg->nh; i-- > 0;)
		heap_down(mg->h, mg->nh, i);
	return rc;
}

/* Takes run t's artifact as cur: one more of cur's (type, key), or the first of the
 * next, which ends cur's. */
static int
merge_take(struct sorter *so, struct merge *mg, const struct mrun *t)
{
	int rc;

	if (mg->have && so->rank[mg->cur.type] == t->rank &&
	    key_cmp(mg->curkey, mg->cur.key_len, t->key, t->a.key_len) == 0) {
		if (mc__grow(&mg->grp, &mg->capgrp, mg->ngrp + 1, sizeof *mg->grp) != MC_OK)
			return mc__err(so->w->ctx, MC_ERR_NOMEM, "out of memory");
		mg->grp[mg->ngrp].obj = mg->cur.obj;
		mg->grp[mg->ngrp].blob = mg->cur.blob;
		mg->grp[mg->ngrp++].seq = mg->cur.seq;
	} else {
		if (mg->have &&
		    (rc = end_group(so->sv, &mg->cur, mg->curkey, mg->grp, mg->ngrp)) != MC_OK)
			return rc;
		mg->ngrp = 0;
	}
	mg->cur = t->a;
	memcpy(mg->curkey, t->key, t->a.key_len);
	mg->have = 1;
	return MC_OK;
}

/* Merges the runs into sv->uniq, one artifact per (type, key), and marks the objects
 * the save reads. */
static int
merge_runs(struct sorter *so)
{
	struct merge mg;
	size_t i;
	int rc, got;

	memset(&mg, 0, sizeof mg);
	rc = merge_start(so, &mg);
	while (rc == MC_OK && mg.nh > 0) {
		struct mrun *t = mg.h[0];

		if ((rc = merge_take(so, &mg, t)) != MC_OK ||
		    (rc = mc__wart_next(so->w->ctx, &t->r, &t->a, t->key, &got)) != MC_OK)
			break;
		if (got)
			t->rank = so->rank[t->a.type];
		else
			mg.h[0] = mg.h[--mg.nh];
		heap_down(mg.h, mg.nh, 0);
	}
	if (rc == MC_OK && mg.have)
		rc = end_group(so->sv, &mg.cur, mg.curkey, mg.grp, mg.ngrp);
	for (i = 0; mg.runs != NULL && i < so->nruns; i++)
		free(mg.runs[i].r.buf);
	free(mg.runs);
	free(mg.h);
	free(mg.curkey);
	free(mg.grp);
	return rc;
}

int
mc__wsort_artifacts(struct mc_wsave *sv)
{
	struct sorter so;
	int rc;

	memset(&so, 0, sizeof so);
	so.sv = sv;
	so.w = sv->w;
	mc__store_init(&so.runs, "artifact sort");
	rc = rank_types(&so);
	if (rc == MC_OK)
		rc = sort_runs(&so);
	if (rc == MC_OK)
		rc = merge_runs(&so);
	mc__store_free(&so.runs);
	free(so.run_off);
	free(so.rank);
	return rc;
}

int
mc__wsort_conflicts(struct mc_wsave *sv)
{
	mc_writer *w = sv->w;
	unsigned char h0[MC_HASH_BYTES], h[MC_HASH_BYTES];
	unsigned char key[MC_KEY_MAX + 1];
	struct mc_sreader r;
	struct wdup d;
	uint64_t goff = 0;
	int rc, differ = 0, more = 1;

	if (w->conflict == NULL || mc__store_size(&sv->dups) == 0)
		return MC_OK;
	if ((rc = mc__sreader_init(w->ctx, &r, &sv->dups, 0, mc__store_size(&sv->dups),
				   MC_WSORT_READ)) != MC_OK)
		return rc;
	while (rc == MC_OK) {
		more = !(r.pos == r.len && r.off == r.end);
		if (more && (rc = mc__sreader_get(w->ctx, &r, &d, sizeof d)) != MC_OK)
			break;
		if ((!more || d.first) && differ) { /* the group before ends */
			struct mc_wart a;
			if ((rc = mc__store_io(w->ctx, &sv->uniq, goff, &a, sizeof a, 0)) != MC_OK ||
			    (rc = mc__store_io(w->ctx, &sv->uniq, goff + sizeof a, key, a.key_len,
					       0)) != MC_OK)
				break;
			key[a.key_len] = '\0';
			w->conflict(w->conflict_ud, w->types[a.type], (const char *)key);
		}
		if (!more)
			break;
		rc = mc__wobj_hash(w, d.obj, d.first ? h0 : h);
		if (d.first) {
			goff = d.uniq_off;
			differ = 0;
		} else {
			differ |= memcmp(h, h0, sizeof h) != 0;
		}
	}
	free(r.buf);
	return rc;
}

/* ---- the object table ---- */

struct fullhash {
	unsigned char hash[MC_HASH_BYTES];
	uint32_t idx;
	uint64_t size;
};

static int
fullhash_cmp(const void *x, const void *y)
{
	const struct fullhash *a = x, *b = y;
	int c = memcmp(a->hash, b->hash, MC_HASH_BYTES);

	return c != 0 ? c : a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The object table being made: the kept objects in order, and each other object with
 * equal contents paired with the kept one it becomes. */
struct otable {
	uint32_t *idx;
	uint32_t n;
	uint32_t (*alias)[2];
	size_t nalias, capalias;
	struct fullhash *f;    /* a run of equal prefixes, read whole */
	size_t nf;
};

/* The used objects' hash prefixes, in the order recorded, into hp; *total gets the
 * sum of their sizes. */
static int
used_objects(struct mc_wsave *sv, struct mc_hashpref *hp, uint64_t *total)
{
	mc_writer *w = sv->w;
	struct mc_sreader rd;
	struct mc_wobj o;
	size_t i, e;
	int rc;

	rc = mc__sreader_init(w->ctx, &rd, &w->objs, 0, mc__store_size(&w->objs), 256 * sizeof o);
	for (i = 0, e = 0; rc == MC_OK && i < w->nobjs; i++) {
		if ((rc = mc__sreader_get(w->ctx, &rd, &o, sizeof o)) != MC_OK)
			break;
		if (sv->oi[i] == MC_WMARK_USED) {
			hp[e].pref = mc__be64(o.hash);
			hp[e++].idx = (uint32_t)i;
			*total += o.size;
		}
	}
	free(rd.buf);
	return rc;
}

/* hp[0..n) share their prefix: ordered by the whole hash; equal hashes are one object,
 * the first recorded, and the others' sizes come off *total. */
static int
order_ties(struct mc_wsave *sv, const struct mc_hashpref *hp, size_t n, struct otable *ot,
	   uint64_t *total)
{
	mc_writer *w = sv->w;
	struct mc_wobj o;
	size_t r;
	int rc;

	if (n > ot->nf) {
		struct fullhash *g = realloc(ot->f, n * sizeof *g);
		if (g == NULL)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		ot->f = g;
		ot->nf = n;
	}
	for (r = 0; r < n; r++) {
		if ((rc = mc__wobj_get(w, w->ctx, hp[r].idx, &o)) != MC_OK)
			return rc;
		memcpy(ot->f[r].hash, o.hash, MC_HASH_BYTES);
		ot->f[r].idx = hp[r].idx;
		ot->f[r].size = o.size;
	}
	qsort(ot->f, n, sizeof *ot->f, fullhash_cmp);
	for (r = 0; r < n; r++) {
		if (r == 0 || memcmp(ot->f[r].hash, ot->f[r - 1].hash, MC_HASH_BYTES) != 0) {
			ot->idx[ot->n++] = ot->f[r].idx;
			continue;
		}
		if (mc__grow(&ot->alias, &ot->capalias, ot->nalias + 1, sizeof *ot->alias) != MC_OK)
			return mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		ot->alias[ot->nalias][0] = ot->f[r].idx;
		ot->alias[ot->nalias++][1] = ot->idx[ot->n - 1];
		*total -= ot->f[r].size;
	}
	return MC_OK;
}

int
mc__wsort_objects(struct mc_wsave *sv, uint32_t **order_out, uint32_t *n_out, uint64_t *total)
{
	mc_writer *w = sv->w;
	struct mc_hashpref *hp = NULL;
	struct otable ot;
	size_t nused = 0, i, e;
	int rc = MC_OK;

	memset(&ot, 0, sizeof ot);
	*total = 0;
	for (i = 0; i < w->nobjs; i++)
		nused += sv->oi[i] == MC_WMARK_USED;
	if ((hp = malloc((nused + 1) * sizeof *hp)) == NULL ||
	    (ot.idx = malloc((nused + 1) * sizeof *ot.idx)) == NULL) {
		rc = mc__err(w->ctx, MC_ERR_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = used_objects(sv, hp, total)) != MC_OK)
		goto out;
	if (nused > 1)
		qsort(hp, nused, sizeof *hp, mc__hashpref_cmp);
	for (i = 0; rc == MC_OK && i < nused; i = e) {
		for (e = i + 1; e < nused && hp[e].pref == hp[i].pref; e++)
			;
		if (e - i == 1)
			ot.idx[ot.n++] = hp[i].idx;
		else
			rc = order_ties(sv, hp + i, e - i, &ot, total);
	}
	if (rc != MC_OK)
		goto out;
	for (i = 0; i < ot.n; i++)
		sv->oi[ot.idx[i]] = (uint32_t)i;
	for (i = 0; i < ot.nalias; i++)
		sv->oi[ot.alias[i][0]] = sv->oi[ot.alias[i][1]];
	*order_out = ot.idx;
	*n_out = ot.n;
	ot.idx = NULL;
out:
	free(hp);
	free(ot.f);
	free(ot.alias);
	free(ot.idx);
	return rc;
}
