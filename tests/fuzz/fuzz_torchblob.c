/* fuzz_torchblob.c - the torch blob parser (every format) on arbitrary bytes. */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	struct mc_tb tb;
	size_t i;

	if (ctx == NULL && mc_ctx_new(&ctx) != MC_OK)
		abort();
	if (mc__torch_blob_parse(ctx, fuzz_file("blob", data, size), &tb) == MC_OK) {
		for (i = 0; i < tb.nitems; i++)
			if (tb.items[i].offset + tb.items[i].size > size || tb.items[i].group >= tb.ngroups)
				abort(); /* every range the parser hands out lies inside the input */
		mc__torch_blob_free(&tb);
	}
	return 0;
}
