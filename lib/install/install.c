/*
 * install.c - installs a verified bundle's artifacts into their tier folders. Every
 * file is staged under a temp name beside its destination (O_EXCL, O_NOFOLLOW, folders
 * walked without following links) and renamed into place only after the whole bundle
 * verified; on failure the staged files and the folders made are removed again.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "install/install.h"

static void
loader_free(struct loader *L)
{
	size_t i;

	for (i = 0; i < L->ntiers; i++) {
		if (L->tiers[i].fd >= 0)
			close(L->tiers[i].fd);
		if (L->tiers[i].pfd >= 0)
			close(L->tiers[i].pfd);
		free(L->tiers[i].sname);
		free(L->tiers[i].abs);
		mc__strv_free(L->tiers[i].keys, L->tiers[i].nkeys);
	}
	free(L->tiers);
	for (i = 0; i < L->nmade; i++)
		free(L->made[i].path);
	free(L->made);
	free(L->st);
	free(L->units);
	free(L->unit_tab);
	mc__acur_free(&L->cur);
	mc__acur_free(&L->ucur);
	for (i = 0; L->wk != NULL && i < L->nwk; i++) {
		mc__acur_free(&L->wk[i].cur);
		mc__dcur_close(&L->wk[i].dc);
		free(L->wk[i].buf);
	}
	free(L->wk);
	free(L->jobs);
	free(L->by_obj);
	free(L->obj_first);
	free(L->found);
	free(L->hold);
	pthread_mutex_destroy(&L->lock);
}

/* What a dry run reports of artifact i. */
static int
planned_action(const struct loader *L, size_t i)
{
	return mc__gpu_dropped(L->b, i) ? MC_LOAD_SKIPPED
	       : L->found[i] == MC_FOUND_SAME ? MC_LOAD_UNCHANGED
	       : L->found[i] == MC_FOUND_DIFFERS ? MC_LOAD_WOULD_REPLACE : MC_LOAD_PLANNED;
}

/* Tells fn of the selected artifacts already in place (MC_LOAD_UNCHANGED, or
 * MC_LOAD_SKIPPED for a kernel left out) and, unless only_unchanged, of the others as
 * MC_LOAD_PLANNED, MC_LOAD_WOULD_REPLACE or MC_LOAD_SKIPPED. */
static int
report_selected(struct loader *L, mc_artifact_fn fn, void *ud, int only_unchanged)
{
	const struct mc_martifact *a;
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && fn != NULL && i < L->b->m.nartifacts; i++) {
		if (!L->b->sel[i] || (only_unchanged && L->found[i] != MC_FOUND_SAME))
			continue;
		if ((rc = mc__acur_get(&L->cur, i, &a)) == MC_OK)
			mc__load_report(L->b, fn, ud, planned_action(L, i), a, NULL);
	}
	return rc;
}

/* The host's targets (asked for, when a function gives them) and the check of those
 * the manifest records: before the pass, or after it (after_pass) when they were left
 * to ask for then, where a bundle that records none is left to the check of each
 * kernel, as it is with the targets named. */
static int
host_check(mc_bundle *b, int skip, int after_pass)
{
	uint64_t t = mc__prof_start(b->ctx);
	int rc;

	if ((rc = mc__gpu_host(b)) == MC_OK && (!after_pass || b->m.ngpu_targets > 0))
		rc = mc__gpu_check(b, skip, 0);
	mc__prof_since(b->ctx, "host targets", t, 0);
	return rc;
}

/* The bundle's checks, its tiers, and the plan of what is staged where. */
static int
load_plan(struct loader *L)
{
	int rc;

	if ((rc = mc__bundle_checks(L->b, NULL, NULL)) != MC_OK)
		return rc;
	if ((rc = mc__setup_tiers(L)) != MC_OK)
		return rc;
	return mc__plan_staging(L);
}

/* The checks once the pass has read every kernel: the host's targets, where they were
 * left to find late, then the kernels' targets. */
static int
pass_checks(mc_bundle *b, int skip, int late)
{
	int rc;

	if (late && (rc = host_check(b, skip, 1)) != MC_OK)
		return rc;
	return mc__gpu_check(b, skip, 1);
}

/* A dry run after the plan: the folders checked, the pass read and checked, and what
 * a load would do told; nothing written. */
static int
load_dry(struct loader *L, unsigned flags, int skip, int late, mc_artifact_fn fn, void *ud)
{
	int rc;

	/* The folders first, as the load meets them before any content. */
	if (!(flags & MC_LOAD_NO_WRITE_CHECK) && (rc = mc__stage_prepare(L, 1)) != MC_OK)
		return rc;
	if ((rc = mc__bundle_stream_par(L->b, NULL, NULL, NULL)) != MC_OK)
		return rc;
	if ((rc = pass_checks(L->b, skip, late)) != MC_OK)
		return rc;
	return report_selected(L, fn, ud, 0);
}

/* A load after the plan: staged, checked, committed, synced when asked, told. Cancelled
 * before the renames, it undoes the staging; after, it ends them. */
static int
load_all(struct loader *L, unsigned flags, int skip, int late, mc_artifact_fn fn, void *ud)
{
	uint64_t t;
	int rc;

	if ((rc = mc__stage_all(L)) != MC_OK)
		return rc;
	if ((rc = pass_checks(L->b, skip, late)) != MC_OK)
		return rc;
	if (mc__cancelled(L->ctx))
		return mc__cancel_err(L->ctx);
	t = mc__prof_start(L->b->ctx);
	rc = mc__load_commit(L, fn, ud);
	mc__prof_since(L->b->ctx, "commit", t, L->nst);
	if (rc == MC_OK && (flags & MC_LOAD_SYNC))
		rc = mc__sync_tiers(L);
	if (rc == MC_OK)
		rc = report_selected(L, fn, ud, 1);
	return rc;
}

int
mc_bundle_load(mc_bundle *b, unsigned flags, mc_artifact_fn fn, void *ud)
{
	struct loader L;
	uint64_t t;
	int rc, dry = (flags & MC_LOAD_DRY_RUN) != 0, skip = (flags & MC_LOAD_SKIP_OTHER_GPUS) != 0;
	/* the host's targets still being found, for a bundle read from a file */
	int late = b != NULL && b->gt.hostfn != NULL && !b->seq;

	if (b == NULL || (flags & ~(MC_LOAD_DRY_RUN | MC_LOAD_SYNC | MC_LOAD_NO_WRITE_CHECK |
				    MC_LOAD_SKIP_OTHER_GPUS)) != 0)
		return MC_ERR_INVALID;
	memset(&L, 0, sizeof L);
	L.b = b;
	L.ctx = b->ctx;
	L.token = randombytes_random();
	L.pid = (long)getpid();
	L.nskey = mc__pid_ns_key();
	L.empty_obj = MC_NO_INDEX;
	L.last_tier = MC_NO_INDEX;
	pthread_mutex_init(&L.lock, NULL);
	mc__acur_init(&L.cur, b->ctx, &b->m, mc__find_type);
	mc__acur_init(&L.ucur, b->ctx, &b->m, mc__find_type);
	/* The GPU targets a manifest records are checked before anything is staged; every
	 * kernel's, once the pass has read them (SPEC.md section 12.6). Host targets still
	 * being found (mc_bundle_set_host_gpus_fn()) are asked for once the pass is over, a
	 * bundle's from a pipe after the plan: the detection overlaps the load's work, and
	 * the recorded targets are checked then, before anything is committed. */
	t = mc__prof_start(b->ctx);
	rc = load_plan(&L);
	t = mc__prof_since(b->ctx, "plan", t, 0);
	if (rc == MC_OK && !late)
		rc = host_check(b, skip, 0);
	if (rc == MC_OK)
		rc = dry ? load_dry(&L, flags, skip, late, fn, ud)
			 : load_all(&L, flags, skip, late, fn, ud);
	t = mc__prof_start(b->ctx);
	if (rc != MC_OK && !dry)
		mc__load_rollback(&L);
	loader_free(&L);
	mc__prof_since(b->ctx, "free", t, 0);
	return rc;
}
