/* fuzz_bundle.c - the whole load path on arbitrary bytes: open, verify with a trusted
 * key, and install into a scratch root without signature checks (so that the fuzzer
 * reaches the manifest-driven code), then check that nothing escaped the root. */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

/* The public half of format/vectors/keys/test.key. */
static const char TEST_PUB[] = "RWTs2lgnjio2+o19G2TF18/qHlJF0FL2NC7IH+oYBaS+iB75Es2Hu8Ds";

static void
rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char sub[1200];

	if (d == NULL) {
		unlink(path);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		rm_tree(sub);
	}
	closedir(d);
	rmdir(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	static mc_pubkey *pk;
	char root[600], outside[600];
	const char *path;
	mc_bundle *b;
	struct stat st;

	if (ctx == NULL) {
		if (mc_ctx_new(&ctx) != MC_OK || mc_pubkey_load(ctx, TEST_PUB, &pk) != MC_OK)
			abort();
		/* Small caps keep each run fast. */
		any_outcome(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACT_BYTES, 1 << 20));
		any_outcome(mc_ctx_set_limit(ctx, MC_LIMIT_TOTAL_BYTES, 8 << 20));
		any_outcome(mc_ctx_set_limit(ctx, MC_LIMIT_ARTIFACTS, 4096));
	}
	path = fuzz_file("in.mcache", data, size);
	snprintf(root, sizeof root, "%s/root", fuzz_dir());
	snprintf(outside, sizeof outside, "%s/outside", fuzz_dir());
	if (mc_ctx_set_tier_root(ctx, "inductor", root) != MC_OK ||
	    mc_ctx_set_tier_root(ctx, "triton", root) != MC_OK ||
	    mc_ctx_set_tier_root(ctx, "triton_home", root) != MC_OK ||
	    mc_ctx_set_tier_root(ctx, "vllm", root) != MC_OK)
		abort();
	if (mc_bundle_open(ctx, path, &b) == MC_OK) {
		if (mc_bundle_trust(b, pk) == MC_OK)
			any_outcome(mc_bundle_verify(b));
		any_outcome(mc_bundle_set_insecure(b, 1));
		any_outcome(mc_bundle_load(b, MC_LOAD_DRY_RUN, NULL, NULL));
		any_outcome(mc_bundle_load(b, 0, NULL, NULL));
		mc_bundle_free(b);
	}
	/* Nothing lands beside the root. */
	if (stat(outside, &st) == 0)
		abort();
	rm_tree(root);
	return 0;
}
