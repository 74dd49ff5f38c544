/* fuzz_manifest.c - the manifest parser on arbitrary bytes. */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	struct mc_manifest m;

	if (ctx == NULL && mc_ctx_new(&ctx) != MC_OK)
		abort();
	if (mc__manifest_parse(ctx, data, size, &m) == MC_OK) {
		char *json;
		size_t len;
		/* What parses renders, and the rendering parses again. */
		if (mc__manifest_render(ctx, &m, &json, &len) == MC_OK) {
			struct mc_manifest again;
			if (mc__manifest_parse(ctx, (const unsigned char *)json, len, &again) != MC_OK)
				abort();
			mc__manifest_free(&again);
			free(json);
		}
		mc__manifest_free(&m);
	}
	return 0;
}
