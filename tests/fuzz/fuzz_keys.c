/* fuzz_keys.c - the minisign signature, public key and secret key parsers. */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	struct mc_sig sig;
	mc_pubkey *pk;
	mc_seckey *sk;
	const char *path;
	int strict;

	if (ctx == NULL && mc_ctx_new(&ctx) != MC_OK)
		abort();
	for (strict = 0; strict < 2; strict++)
		if (mc__sig_parse(ctx, (const char *)data, size, strict, &sig) == MC_OK) {
			size_t len;
			char *text = mc__sig_render(&sig, &len);
			/* A strictly parsed member is exactly its rendering. */
			if (strict && (text == NULL || len != size || memcmp(text, data, size) != 0))
				abort();
			free(text);
			mc__sig_clear(&sig);
		}
	path = fuzz_file("key", data, size);
	if (mc_pubkey_load(ctx, path, &pk) == MC_OK)
		mc_pubkey_free(pk);
	/* No password callback: encrypted keys stop before the (slow) key derivation. */
	if (mc_seckey_load(ctx, path, NULL, NULL, &sk) == MC_OK)
		mc_seckey_free(sk);
	return 0;
}
