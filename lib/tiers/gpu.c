/*
 * gpu.c - GPU targets: the one a Triton kernel was compiled for, read from its metadata
 * file, and the ones this host's GPUs are, asked of NVML (loaded at run time, so the
 * library links nothing of it) and of AMD's KFD topology in sysfs.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tiers/tiers.h"

int
mc__kernel_meta(const struct mc_type *t, const char *key)
{
	const char *base = strrchr(key, '/') != NULL ? strrchr(key, '/') + 1 : key;
	size_t n = strlen(base);

	/* The types with hooks for group files are Triton's kernel folders. */
	return t != NULL && t->derive != NULL && n > 5 && strcmp(base + n - 5, ".json") == 0 &&
	       strncmp(base, "__grp__", 7) != 0;
}

/* Whether object o has one member named name (JSON readers differ on a repeated one:
 * such a file names no target). */
static int
once(const cJSON *o, const char *name)
{
	const cJSON *c;
	int n = 0;

	for (c = o->child; c != NULL; c = c->next)
		n += c->string != NULL && strcmp(c->string, name) == 0;
	return n == 1;
}

int
mc__kernel_target(const unsigned char *buf, size_t n, char out[MC_GPU_TARGET_LEN])
{
	const cJSON *t, *backend, *arch;
	const char *end = NULL;
	cJSON *doc;
	size_t i;
	int found = 0;

	out[0] = '\0';
	/* cJSON would cut a string at an escaped NUL: such a file names no target. */
	if (n == 0 || n > MC_DERIVE_MAX || memmem(buf, n, "\\u0000", 6) != NULL)
		return 0;
	for (i = 0; i < n && strchr(" \t\n\r", buf[i]) != NULL; i++)
		;
	if (i == n || buf[i] != '{' ||
	    (doc = cJSON_ParseWithLengthOpts((const char *)buf, n, &end, 0)) == NULL)
		return 0;
	/* One JSON text: after it only whitespace. */
	for (i = (size_t)(end - (const char *)buf); i < n; i++)
		if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\r') {
			cJSON_Delete(doc);
			return 0;
		}
	t = cJSON_GetObjectItemCaseSensitive(doc, "target");
	backend = cJSON_GetObjectItemCaseSensitive(t, "backend");
	arch = cJSON_GetObjectItemCaseSensitive(t, "arch");
	if (cJSON_IsObject(t) && cJSON_IsString(backend) && strlen(backend->valuestring) <= 32 &&
	    once(doc, "target") && once(t, "backend") && once(t, "arch")) {
		double d = cJSON_IsNumber(arch) ? arch->valuedouble : -1;
		if (d >= 0 && d <= 1e9 && floor(d) == d) /* -0 is 0 */
			snprintf(out, MC_GPU_TARGET_LEN, "%s:%lld", backend->valuestring,
				 (long long)d);
		else if (cJSON_IsString(arch) && strlen(arch->valuestring) <= 64)
			snprintf(out, MC_GPU_TARGET_LEN, "%s:%s", backend->valuestring,
				 arch->valuestring);
		found = out[0] != '\0' && mc__gpu_target_ok(out);
	}
	cJSON_Delete(doc);
	if (!found)
		out[0] = '\0';
	return found;
}

/* ---- the host's GPUs ---- */

/* Adds target t to the sorted, unique list l of *n (room for MC_GPU_HOST_MAX). */
static void
add_target(char (*l)[MC_GPU_TARGET_LEN], size_t *n, const char *t)
{
	size_t i, j;
	int c = 1;

	for (i = 0; i < *n && (c = strcmp(l[i], t)) < 0; i++)
		;
	if ((i < *n && c == 0) || *n == MC_GPU_HOST_MAX || !mc__gpu_target_ok(t))
		return;
	for (j = *n; j > i; j--)
		memcpy(l[j], l[j - 1], MC_GPU_TARGET_LEN);
	snprintf(l[i], MC_GPU_TARGET_LEN, "%s", t);
	(*n)++;
}

/* NVML's calls used here (nvml.h of the CUDA toolkit); a device handle is a pointer. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_handle_fn)(unsigned, void **);
typedef int (*nvml_cc_fn)(void *, int *, int *);

/* NVIDIA's devices: "cuda:<major * 10 + minor>", as Triton's CUDA backend names its
 * target (sm_90: 90, sm_121: 121). Nothing when the driver's NVML is not there. */
static void
nvidia_targets(char (*l)[MC_GPU_TARGET_LEN], size_t *n)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_init_fn init, shutdown;
	nvml_count_fn count;
	nvml_handle_fn handle;
	nvml_cc_fn cc;
	unsigned i, ndev = 0;

	if (h == NULL)
		return;
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&cc = dlsym(h, "nvmlDeviceGetCudaComputeCapability");
	if (init != NULL && shutdown != NULL && count != NULL && handle != NULL && cc != NULL &&
	    init() == 0) {
		if (count(&ndev) != 0)
			ndev = 0;
		for (i = 0; i < ndev; i++) {
			char t[MC_GPU_TARGET_LEN];
			void *dev = NULL;
			int major = 0, minor = 0;
			if (handle(i, &dev) != 0 || cc(dev, &major, &minor) != 0 || major <= 0 ||
			    minor < 0 || major > 1000 || minor > 9)
				continue;
			snprintf(t, sizeof t, "cuda:%d", major * 10 + minor);
			add_target(l, n, t);
		}
		shutdown();
	}
	dlclose(h);
}

/* AMD's GPUs, as the KFD driver lists them: a node whose gfx_target_version is not 0
 * (0 is a CPU), e.g. 90010, named as LLVM names the processor and Triton's HIP backend
 * its target ("gfx" major, then minor and stepping in hex: gfx90a). */
static void
amd_targets(const char *topology, char (*l)[MC_GPU_TARGET_LEN], size_t *n)
{
	DIR *d = opendir(topology);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[MC_PATH_MAX], line[256], t[MC_GPU_TARGET_LEN];
		unsigned long v = 0;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s/properties", topology, e->d_name);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		while (fgets(line, sizeof line, f) != NULL)
			if (sscanf(line, "gfx_target_version %lu", &v) == 1)
				break;
		fclose(f);
		if (v == 0 || v >= 10000000)
			continue;
		snprintf(t, sizeof t, "hip:gfx%lu%lx%lx", v / 10000, (v / 100) % 100, v % 100);
		add_target(l, n, t);
	}
	closedir(d);
}

int
mc_gpu_detect(mc_ctx *ctx, char ***out, size_t *n)
{
	char l[MC_GPU_HOST_MAX][MC_GPU_TARGET_LEN];
	size_t i, k = 0;
	uint64_t t;
	char **v;

	if (ctx == NULL || out == NULL || n == NULL)
		return MC_ERR_INVALID;
	*out = NULL;
	*n = 0;
	t = mc__prof_start(ctx);
	nvidia_targets(l, &k);
	amd_targets("/sys/class/kfd/kfd/topology/nodes", l, &k);
	mc__prof_since(ctx, "gpu detect", t, 0);
	if ((v = calloc(k + 1, sizeof *v)) == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	for (i = 0; i < k; i++)
		if ((v[i] = strdup(l[i])) == NULL) {
			mc_gpu_targets_free(v, i);
			return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
		}
	*out = v;
	*n = k;
	return MC_OK;
}

void
mc_gpu_targets_free(char **targets, size_t n)
{
	mc__strv_free(targets, n);
}

int
mc_gpu_target_ok(const char *target)
{
	return target != NULL && mc__gpu_target_ok(target);
}
