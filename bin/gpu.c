/* gpu.c - the host's GPU targets for load, run and list --explain: given with
 * --gpu-target or detected, set on a bundle so that a load checks its kernels, and what
 * the check found, in words and in JSON. */
#include "config.h"

#include <string.h>

#include "tool.h"

int
gpu_opt(struct gpu_opts *g, int c, const char *arg)
{
	if (c == OPT_SKIP_OTHER_GPUS) {
		g->skip = 1;
		return 1;
	}
	if (c != OPT_GPU_TARGET)
		return 0;
	if (!mc_gpu_target_ok(arg))
		usage_error("--gpu-target takes BACKEND:ARCH as Triton names a kernel's target "
			    "(cuda:90 for compute capability 9.0, hip:gfx942), not '%s'", arg);
	if (g->ngiven == MAX_GPU_TARGETS)
		usage_error("too many --gpu-target (at most %d)", MAX_GPU_TARGETS);
	g->given[g->ngiven++] = arg;
	return 1;
}

/* The host's targets: those given, else those detected (none before gpu_apply() has
 * waited for the detection). */
static const char *const *
host_targets(const struct gpu_opts *g, size_t *n)
{
	if (g->ngiven > 0) {
		*n = g->ngiven;
		return g->given;
	}
	*n = g->resolved ? g->ndetected : 0;
	return g->resolved ? (const char *const *)g->detected : NULL;
}

static void *
detect(void *arg)
{
	struct gpu_opts *g = arg;

	g->drc = g->dctx != NULL ? mc_gpu_detect(g->dctx, &g->detected, &g->ndetected) : MC_OK;
	return NULL;
}

void
gpu_detect_start(struct gpu_opts *g)
{
	if (g->ngiven > 0 || g->started || g->resolved)
		return;
	/* Without a context of its own or a thread, gpu_apply() detects on its own. */
	if (mc_ctx_new(&g->dctx) != MC_OK)
		return;
	if (start_thread(&g->thread, detect, g) == 0) {
		g->started = 1;
		g->joined = 0;
	} else {
		mc_ctx_free(g->dctx);
		g->dctx = NULL;
	}
}

/* The detection's result: the thread's, once it ended, or detected now. */
static int
detected(struct tool *t, struct gpu_opts *g)
{
	int rc = MC_OK;

	if (!g->started) {
		rc = mc_gpu_detect(t->ctx, &g->detected, &g->ndetected);
		return rc != MC_OK ? fail(t->ctx, rc) : 0;
	}
	gpu_detect_wait(g);
	if (g->drc != MC_OK)
		rc = fail(g->dctx, g->drc);
	mc_ctx_free(g->dctx);
	g->dctx = NULL;
	g->started = 0;
	return rc;
}

void
gpu_detect_wait(struct gpu_opts *g)
{
	if (g->started && !g->joined)
		pthread_join(g->thread, NULL);
	g->joined = 1;
}

/* The host's targets: those named, else those detected (waited for, once). Nonzero:
 * the exit status of a failed detection, which was told. */
static int
resolve(struct tool *t, struct gpu_opts *g, const char *const **host, size_t *n)
{
	int rc;

	if (!g->resolved && g->ngiven == 0 && (rc = detected(t, g)) != 0)
		return rc;
	g->resolved = 1;
	*host = host_targets(g, n);
	return 0;
}

int
gpu_apply(struct tool *t, struct gpu_opts *g, mc_bundle *b)
{
	const char *const *host;
	size_t n;
	int rc;

	if ((rc = resolve(t, g, &host, &n)) != 0)
		return rc;
	if ((rc = mc_bundle_set_host_gpus(b, host, n)) != MC_OK)
		return fail(t->ctx, rc);
	return 0;
}

/* mc_bundle_load()'s call for the host's targets. */
static int
host_fn(void *ud, const char *const **targets, size_t *n)
{
	struct gpu_opts *g = ud;

	if ((g->status = resolve(g->tool, g, targets, n)) != 0)
		return MC_ERR_NOMEM; /* mc_gpu_detect()'s only failure */
	return MC_OK;
}

int
gpu_apply_later(struct tool *t, struct gpu_opts *g, mc_bundle *b)
{
	int rc;

	g->status = 0;
	if (g->resolved || g->ngiven > 0 || !g->started)
		return gpu_apply(t, g, b);
	g->tool = t;
	if ((rc = mc_bundle_set_host_gpus_fn(b, host_fn, g)) != MC_OK)
		return fail(t->ctx, rc);
	return 0;
}

int
gpu_told(const struct gpu_opts *g)
{
	return g->status;
}

unsigned
gpu_flags(const struct gpu_opts *g)
{
	return g->skip ? MC_LOAD_SKIP_OTHER_GPUS : 0;
}

void
gpu_targets_text(const mc_bundle *b, char *buf, size_t len)
{
	const char *v[64] = {NULL};
	size_t i, n = mc_bundle_gpu_target_count(b);

	if (mc_bundle_gpu_targets_known(b) == MC_GPU_UNKNOWN) {
		snprintf(buf, len, "not recorded");
		return;
	}
	for (i = 0; i < n && i < 64; i++)
		v[i] = mc_bundle_gpu_target(b, i);
	join_words(buf, len, v, i, ", ", "none");
	if (n > 64 && strlen(buf) + 8 < len)
		strcat(buf, ", ...");
}

cJSON *
gpu_targets_json(const mc_bundle *b)
{
	cJSON *a;
	size_t i;

	if (mc_bundle_gpu_targets_known(b) == MC_GPU_UNKNOWN)
		return cJSON_CreateNull();
	a = cJSON_CreateArray();
	for (i = 0; i < mc_bundle_gpu_target_count(b); i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(mc_bundle_gpu_target(b, i)));
	return a;
}

/* The bundle's targets the host lacks, joined into buf ("none": none). */
static void
lacking(const mc_bundle *b, const char *const *host, size_t nhost, char *buf, size_t len)
{
	const char *v[64];
	size_t i, k, n = 0;

	for (i = 0; i < mc_bundle_gpu_target_count(b) && n < 64; i++) {
		for (k = 0; k < nhost && strcmp(host[k], mc_bundle_gpu_target(b, i)) != 0; k++)
			;
		if (k == nhost)
			v[n++] = mc_bundle_gpu_target(b, i);
	}
	join_words(buf, len, v, n, ", ", "none");
}

void
gpu_say(const struct tool *t, const struct gpu_opts *g, const mc_bundle *b,
	const struct load_report *r, FILE *f)
{
	const char *const *host;
	char bt[1024], ht[1024], lack[1024];
	size_t n;

	if (t->quiet || t->json)
		return;
	host = host_targets(g, &n);
	join_words(ht, sizeof ht, host, n, ", ", "none");
	gpu_targets_text(b, bt, sizeof bt);
	if (mc_bundle_gpu_target_count(b) == 0 && r->skipped == 0)
		return; /* no kernel names a target */
	lacking(b, host, n, lack, sizeof lack);
	if (n == 0) {
		say(stderr, "%s: warning: GPU targets not checked: no GPU seen (the bundle's kernels "
		    "are for %s; --gpu-target T names this host's)", PROG, bt);
	} else if (strcmp(lack, "none") != 0 && r->skipped == 0) {
		/* a load refuses such kernels or skips them: none selected */
		say(f, "%sGPU targets %s: no kernel selected (--types), none checked (this host: "
		    "%s)", f == stderr ? PROG ": " : "", bt, ht);
	} else if (r->skipped > 0) {
		size_t k = mc_bundle_gpu_kernels_skipped(b);
		say(f, "%sleft out %zu file%s of %zu kernel%s for %s, which this host lacks (this "
		    "host: %s%s)", f == stderr ? PROG ": " : "", r->skipped, r->skipped == 1 ? "" : "s",
		    k, k == 1 ? "" : "s", lack, ht, g->ngiven > 0 ? ", as given" : "");
	} else {
		say(f, "%sGPU targets %s: this host has them (%s%s)", f == stderr ? PROG ": " : "", bt, ht,
		    g->ngiven > 0 ? ", as given" : "");
	}
}

/* The host's targets as a JSON array. */
static cJSON *
host_json(const struct gpu_opts *g)
{
	const char *const *host;
	cJSON *h = cJSON_CreateArray();
	size_t i, n;

	host = host_targets(g, &n);
	for (i = 0; i < n; i++)
		cJSON_AddItemToArray(h, cJSON_CreateString(host[i]));
	return h;
}

void
gpu_json(const struct gpu_opts *g, const mc_bundle *b, const struct load_report *r, cJSON *j)
{
	size_t n;

	host_targets(g, &n);
	cJSON_AddItemToObject(j, "gpu_targets", gpu_targets_json(b));
	cJSON_AddItemToObject(j, "host_gpu_targets", host_json(g));
	cJSON_AddBoolToObject(j, "gpu_targets_checked", n > 0);
	cJSON_AddNumberToObject(j, "skipped", (double)r->skipped);
	cJSON_AddNumberToObject(j, "skipped_kernels", (double)mc_bundle_gpu_kernels_skipped(b));
}

void
gpu_mismatch_hint(const struct tool *t, const struct gpu_opts *g, const mc_bundle *b, int dry)
{
	if (t->json) {
		json_fail_add("gpu_targets", gpu_targets_json(b));
		json_fail_add("host_gpu_targets", host_json(g));
		return;
	}
	say(stderr, "  %s--skip-other-gpus installs the rest without those kernels%s",
	    dry ? "" : "nothing was installed; ",
	    g->ngiven > 0 ? "" : "; --gpu-target T names this host's targets");
}

void
gpu_free(struct gpu_opts *g)
{
	gpu_detect_wait(g);
	g->started = 0;
	mc_ctx_free(g->dctx);
	g->dctx = NULL;
	mc_gpu_targets_free(g->detected, g->ndetected);
	g->detected = NULL;
	g->ndetected = 0;
}
