/*
 * targets.c - the GPU targets of a bundle's Triton kernels: recorded by its manifest
 * (format version 2), found in the kernels' metadata files as a pass reads them, and
 * checked against the host's before a load installs anything.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/read.h"

/* The most targets one bundle's kernels may name, as its manifest may record. */
#define MAX_TARGETS 1024

/* Marks the objects that artifacts name as kernels' metadata files (once a bundle). */
static int
walk(mc_bundle *b)
{
	const struct mc_martifact *a;
	struct mc_acur cur;
	size_t i;
	int rc = MC_OK;

	if (b->gt.walked)
		return MC_OK;
	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; i < b->m.nartifacts && rc == MC_OK; i++) {
		if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK || !mc__kernel_meta(a->handler, a->key))
			continue;
		if (b->gt.kmeta == NULL && (b->gt.kmeta = calloc(b->m.nobjects, 1)) == NULL)
			rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		else
			b->gt.kmeta[a->object] = 1;
	}
	mc__acur_free(&cur);
	if (rc != MC_OK) {
		free(b->gt.kmeta);
		b->gt.kmeta = NULL;
		return rc;
	}
	b->gt.walked = 1;
	return MC_OK;
}

static void
forget_sorted(mc_bundle *b)
{
	size_t i;

	for (i = 0; b->gt.sorted != NULL && b->gt.sorted[i] != NULL; i++)
		free(b->gt.sorted[i]);
	free(b->gt.sorted);
	b->gt.sorted = NULL;
}

int
mc__gpu_prepare(mc_bundle *b)
{
	int rc;

	if ((rc = walk(b)) != MC_OK)
		return rc;
	/* What an earlier pass found stays: the contents, checked, are the same. */
	b->gt.nfound = 0;
	free(b->gt.otarget);
	b->gt.otarget = NULL;
	if (b->gt.kmeta != NULL &&
	    (b->gt.otarget = calloc(b->m.nobjects, sizeof *b->gt.otarget)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	return MC_OK;
}

int
mc__gpu_note(mc_bundle *b, mc_ctx *ctx, void *lock, size_t obj, const unsigned char *buf,
	     size_t n)
{
	struct mc_gputargets *g = &b->gt;
	char t[MC_GPU_TARGET_LEN];
	size_t i;
	int rc = MC_OK;

	if (g->otarget == NULL || !g->kmeta[obj] || !mc__kernel_target(buf, n, t))
		return MC_OK;
	pthread_mutex_lock(lock);
	for (i = 0; i < g->nfound && strcmp(g->found[i], t) != 0; i++)
		;
	if (i == g->nfound) {
		void *p = NULL;
		if (g->nfound == MAX_TARGETS)
			rc = mc__err(ctx, MC_ERR_LIMIT, "%s: kernels for more than %d GPU targets",
				     b->path, MAX_TARGETS);
		else if ((p = realloc(g->found, (g->nfound + 1) * sizeof *g->found)) == NULL)
			rc = mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		if (rc == MC_OK) {
			g->found = p;
			memcpy(g->found[g->nfound++], t, sizeof t);
		}
	}
	if (rc == MC_OK)
		g->otarget[obj] = (uint16_t)(i + 1);
	pthread_mutex_unlock(lock);
	return rc;
}

static int
str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* A list of targets, comma-separated, into buf. */
static void
join(char *const *t, size_t n, char *buf, size_t len)
{
	size_t i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i > 0 ? ", " : "", t[i]);
	if (n == 0)
		snprintf(buf, len, "none");
}

int
mc__gpu_derived(mc_bundle *b)
{
	struct mc_gputargets *g = &b->gt;
	const struct mc_manifest *m = &b->m;
	size_t i;

	if (g->derived) /* an earlier pass: the same contents, the same targets */
		return MC_OK;
	if ((g->sorted = calloc(g->nfound + 1, sizeof *g->sorted)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < g->nfound; i++)
		if ((g->sorted[i] = mc__strdup(g->found[i])) == NULL)
			return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	qsort(g->sorted, g->nfound, sizeof *g->sorted, str_cmp);
	g->nsorted = g->nfound;
	g->derived = 1;
	if (m->ngpu_targets == 0)
		return MC_OK; /* none recorded: a bundle from before gpu_targets, or no kernel */
	for (i = 0; i < m->ngpu_targets && i < g->nsorted; i++)
		if (strcmp(m->gpu_targets[i], g->sorted[i]) != 0)
			break;
	if (i < m->ngpu_targets || i < g->nsorted) {
		char rec[1024], got[1024];
		join(m->gpu_targets, m->ngpu_targets, rec, sizeof rec);
		join(g->sorted, g->nsorted, got, sizeof got);
		return mc__err(b->ctx, MC_ERR_INTEGRITY, "%s: the manifest's gpu_targets (%s) are "
			       "not the targets its kernels name (%s)", b->path, rec, got);
	}
	return MC_OK;
}

static int
host_has(const mc_bundle *b, const char *t)
{
	size_t i;

	for (i = 0; i < b->gt.nhost; i++)
		if (strcmp(b->gt.host[i], t) == 0)
			return 1;
	return 0;
}

/* The refusal: the targets the host lacks (with how many kernels each, when counts is
 * not NULL), and the host's. */
static int
mismatch(mc_bundle *b, char *const *other, const size_t *counts, size_t n)
{
	char lack[2048], host[1024], *hv[MC_GPU_HOST_MAX] = {NULL};
	size_t i, at = 0, kernels = 0;

	lack[0] = '\0';
	for (i = 0; i < n; i++) {
		kernels += counts != NULL ? counts[i] : 0;
		if (at >= sizeof lack) /* the text is cut; the sum goes on */
			continue;
		at += (size_t)snprintf(lack + at, sizeof lack - at, "%s%s", i == 0 ? ""
				       : i + 1 == n ? " and " : ", ", other[i]);
		if (counts != NULL && n > 1 && at < sizeof lack)
			at += (size_t)snprintf(lack + at, sizeof lack - at, " (%zu)", counts[i]);
	}
	for (i = 0; i < b->gt.nhost; i++)
		hv[i] = b->gt.host[i];
	join(hv, b->gt.nhost, host, sizeof host);
	if (counts != NULL)
		return mc__err(b->ctx, MC_ERR_GPU_MISMATCH, "%s: holds %zu Triton kernel%s for %s, "
			       "%s this host lacks (this host: %s)", b->path, kernels,
			       kernels == 1 ? "" : "s", lack, n == 1 ? "a GPU target" : "GPU targets",
			       host);
	return mc__err(b->ctx, MC_ERR_GPU_MISMATCH, "%s: holds Triton kernels for %s, %s this "
		       "host lacks (this host: %s)", b->path, lack,
		       n == 1 ? "a GPU target" : "GPU targets", host);
}

/* Before the pass: the bundle's targets as known now (its manifest's, or those an
 * earlier pass found). Only a load of every type: which targets the kernels of the
 * types selected are for is known once they were read. */
static int
check_known(mc_bundle *b)
{
	size_t i, n = 0, nt = mc_bundle_gpu_target_count(b);
	char **other;
	int rc;

	if (b->ntypes > 0 || nt == 0)
		return MC_OK;
	if ((other = calloc(nt + 1, sizeof *other)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < nt; i++)
		if (!host_has(b, mc_bundle_gpu_target(b, i)))
			other[n++] = (char *)mc_bundle_gpu_target(b, i);
	rc = n > 0 ? mismatch(b, other, NULL, n) : MC_OK;
	free(other);
	return rc;
}

/* The folder of a kernel's file: its key up to the last '/' (length). */
static size_t
folder_len(const char *key)
{
	const char *s = strrchr(key, '/');

	return s != NULL ? (size_t)(s - key) : 0;
}

/* After the pass: each kernel folder whose metadata names a target the host lacks
 * (artifacts are sorted by type and key, so a folder's files are neighbours). */
static int
check_kernels(mc_bundle *b, int skip)
{
	struct mc_gputargets *g = &b->gt;
	const struct mc_martifact *a;
	struct mc_acur cur;
	size_t *counts, i, run = 0, nother = 0;
	char type[MC_TYPE_MAX + 1] = "", dir[MC_KEY_MAX + 1] = "";
	int rc = MC_OK, other = 0;

	if (g->otarget == NULL)
		return MC_OK;
	if ((counts = calloc(g->nfound + 1, sizeof *counts)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	if (skip && (g->drop = calloc(b->m.nartifacts + 1, 1)) == NULL) {
		free(counts);
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	}
	mc__acur_init(&cur, b->ctx, &b->m, mc__find_type);
	for (i = 0; i <= b->m.nartifacts && rc == MC_OK; i++) {
		size_t fl = 0;
		int same = 0;
		if (i < b->m.nartifacts) {
			if ((rc = mc__acur_get(&cur, i, &a)) != MC_OK)
				break;
			fl = folder_len(a->key);
			same = a->handler != NULL && a->handler->derive != NULL && fl > 0 &&
			       strcmp(a->type, type) == 0 && strlen(dir) == fl &&
			       strncmp(a->key, dir, fl) == 0;
		}
		if (!same) { /* the run of the last folder ends */
			if (other && skip) {
				memset(g->drop + run, 1, i - run);
				g->nskipped++;
			}
			run = i;
			other = 0;
			type[0] = dir[0] = '\0';
			if (i < b->m.nartifacts && a->handler != NULL && a->handler->derive != NULL &&
			    fl > 0) {
				snprintf(type, sizeof type, "%s", a->type);
				snprintf(dir, sizeof dir, "%.*s", (int)fl, a->key);
			}
		}
		if (i < b->m.nartifacts && type[0] != '\0' && g->otarget[a->object] > 0 &&
		    (b->sel == NULL || b->sel[i]) && mc__kernel_meta(a->handler, a->key) &&
		    !host_has(b, g->found[g->otarget[a->object] - 1])) {
			other = 1;
			counts[g->otarget[a->object] - 1]++;
		}
	}
	mc__acur_free(&cur);
	if (rc == MC_OK && !skip) {
		char **names = calloc(g->nfound + 1, sizeof *names);
		size_t *ncount = calloc(g->nfound + 1, sizeof *ncount), k;
		if (names == NULL || ncount == NULL)
			rc = mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
		/* In the sorted order, for the message. */
		for (k = 0; rc == MC_OK && k < g->nsorted; k++)
			for (i = 0; i < g->nfound; i++)
				if (strcmp(g->sorted[k], g->found[i]) == 0 && counts[i] > 0) {
					names[nother] = g->found[i];
					ncount[nother++] = counts[i];
				}
		if (rc == MC_OK && nother > 0)
			rc = mismatch(b, names, ncount, nother);
		free(names);
		free(ncount);
	}
	free(counts);
	return rc;
}

int
mc__gpu_check(mc_bundle *b, int skip, int after_pass)
{
	free(b->gt.drop);
	b->gt.drop = NULL;
	b->gt.nskipped = 0;
	if (b->gt.nhost == 0)
		return MC_OK;
	if (!after_pass)
		return skip ? MC_OK : check_known(b);
	return check_kernels(b, skip);
}

/* ---- the public calls ---- */

int
mc_bundle_set_host_gpus(mc_bundle *b, const char *const *targets, size_t n)
{
	char(*h)[MC_GPU_TARGET_LEN] = NULL;
	size_t i, j, k = 0;

	if (b == NULL || (n > 0 && targets == NULL) || n > MC_GPU_HOST_MAX)
		return MC_ERR_INVALID;
	for (i = 0; i < n; i++)
		if (targets[i] == NULL || !mc__gpu_target_ok(targets[i]))
			return mc__err(b->ctx, MC_ERR_INVALID, "'%.100s' is not a GPU target "
				       "(<backend>:<arch>, such as cuda:90 or hip:gfx942)",
				       targets[i] != NULL ? targets[i] : "(null)");
	if (n > 0 && (h = calloc(n, sizeof *h)) == NULL)
		return mc__err(b->ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < n; i++) { /* sorted, distinct */
		int c = 1;
		for (j = 0; j < k && (c = strcmp(h[j], targets[i])) < 0; j++)
			;
		if (c == 0)
			continue;
		memmove(h + j + 1, h + j, (k - j) * sizeof *h);
		snprintf(h[j], MC_GPU_TARGET_LEN, "%s", targets[i]);
		k++;
	}
	free(b->gt.host);
	b->gt.host = h;
	b->gt.nhost = k;
	b->gt.hostfn = NULL;
	b->gt.hostud = NULL;
	return MC_OK;
}

int
mc_bundle_set_host_gpus_fn(mc_bundle *b, mc_host_gpus_fn fn, void *ud)
{
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc_bundle_set_host_gpus(b, NULL, 0)) != MC_OK)
		return rc;
	b->gt.hostfn = fn;
	b->gt.hostud = ud;
	return MC_OK;
}

int
mc__gpu_host(mc_bundle *b)
{
	mc_host_gpus_fn fn = b->gt.hostfn;
	const char *const *targets = NULL;
	size_t n = 0;
	int rc;

	if (fn == NULL)
		return MC_OK;
	b->ctx->err[0] = '\0';
	if ((rc = fn(b->gt.hostud, &targets, &n)) != MC_OK) {
		/* Asked again by the next load: a load never goes on unchecked. */
		if (b->ctx->err[0] == '\0')
			mc__err(b->ctx, rc, "the host's GPU targets could not be found");
		return rc;
	}
	/* Once they are set (which replaces fn): a failure keeps fn for the next load. */
	return mc_bundle_set_host_gpus(b, targets, n);
}

int
mc_bundle_gpu_targets_known(const mc_bundle *b)
{
	mc_bundle *w = (mc_bundle *)b; /* the walk is kept: a cache, as the cursors are */

	if (b == NULL)
		return MC_GPU_UNKNOWN;
	if (b->m.ngpu_targets > 0)
		return MC_GPU_RECORDED;
	/* No metadata file: no kernel to name a target, which is known without a pass. */
	if (b->have_manifest && !b->index_pending && walk(w) == MC_OK && b->gt.kmeta == NULL)
		return MC_GPU_RECORDED;
	return b->gt.derived ? MC_GPU_DERIVED : MC_GPU_UNKNOWN;
}

size_t
mc_bundle_gpu_target_count(const mc_bundle *b)
{
	if (b == NULL)
		return 0;
	if (b->m.ngpu_targets > 0)
		return b->m.ngpu_targets;
	return b->gt.derived ? b->gt.nsorted : 0;
}

size_t
mc_bundle_gpu_kernels_skipped(const mc_bundle *b)
{
	return b != NULL ? b->gt.nskipped : 0;
}

const char *
mc_bundle_gpu_target(const mc_bundle *b, size_t i)
{
	if (i >= mc_bundle_gpu_target_count(b))
		return NULL;
	return b->m.ngpu_targets > 0 ? b->m.gpu_targets[i] : b->gt.sorted[i];
}

void
mc__gpu_free(mc_bundle *b)
{
	forget_sorted(b);
	free(b->gt.kmeta);
	free(b->gt.otarget);
	free(b->gt.found);
	free(b->gt.drop);
	free(b->gt.host);
}
