/*
 * prof.c - where an operation's wall time goes, for MEGACACHE_PROFILE: each phase's
 * seconds (and, for work spread over threads, the seconds summed over them), written
 * to stderr as one line when the context is freed. Off, it costs a pointer test.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

#define PROF_SLOTS 32

/* Slots are only added (under the lock, the phase set before n counts it), so
 * threads find theirs without it. */
struct mc_prof {
	pthread_mutex_t lock;
	uint64_t t0;
	_Atomic size_t n;
	struct {
		const char *phase; /* a string literal */
		_Atomic uint64_t ns;
		_Atomic uint64_t count;
	} slot[PROF_SLOTS];
};

static size_t
find_slot(struct mc_prof *p, const char *phase, size_t n)
{
	size_t i;

	for (i = 0; i < n && strcmp(p->slot[i].phase, phase) != 0; i++)
		;
	return i;
}

uint64_t
mc__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
mc__prof_init(mc_ctx *ctx)
{
	const char *v = getenv("MEGACACHE_PROFILE");

	if (v == NULL || v[0] == '\0' || strcmp(v, "0") == 0)
		return;
	if ((ctx->prof = calloc(1, sizeof *ctx->prof)) == NULL)
		return; /* a diagnostic: nothing fails without it */
	pthread_mutex_init(&ctx->prof->lock, NULL);
	ctx->prof->t0 = mc__now_ns();
}

void
mc__prof_add(mc_ctx *ctx, const char *phase, uint64_t ns, uint64_t count)
{
	struct mc_prof *p = ctx->prof;
	size_t i, n;

	if (p == NULL)
		return;
	n = atomic_load(&p->n);
	if ((i = find_slot(p, phase, n)) == n) {
		pthread_mutex_lock(&p->lock);
		n = atomic_load(&p->n);
		if ((i = find_slot(p, phase, n)) == n && n < PROF_SLOTS) {
			p->slot[n].phase = phase;
			atomic_store(&p->n, n + 1);
		}
		pthread_mutex_unlock(&p->lock);
		if (i >= PROF_SLOTS)
			return;
	}
	atomic_fetch_add(&p->slot[i].ns, ns);
	atomic_fetch_add(&p->slot[i].count, count);
}

uint64_t
mc__prof_since(mc_ctx *ctx, const char *phase, uint64_t t, uint64_t count)
{
	uint64_t now;

	if (ctx->prof == NULL)
		return 0;
	now = mc__now_ns();
	mc__prof_add(ctx, phase, now - t, count);
	return now;
}

void
mc__prof_report(mc_ctx *ctx)
{
	struct mc_prof *p = ctx->prof;
	size_t i, n;

	if (p == NULL)
		return;
	n = atomic_load(&p->n);
	fprintf(stderr, "megacache: profile: %.3f s since start;", (double)(mc__now_ns() - p->t0) / 1e9);
	for (i = 0; i < n; i++) {
		fprintf(stderr, " %s %.3f s", p->slot[i].phase, (double)p->slot[i].ns / 1e9);
		if (p->slot[i].count > 0)
			fprintf(stderr, " (%llu)", (unsigned long long)p->slot[i].count);
		fputc(i + 1 < n ? ',' : '\n', stderr);
	}
	if (n == 0)
		fputc('\n', stderr);
	pthread_mutex_destroy(&p->lock);
	free(p);
	ctx->prof = NULL;
}
