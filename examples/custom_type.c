/*
 * custom_type.c - an application registers its own artifact type with libmegacache:
 * "ptx", PTX files kept by a kernel launcher in <root>/ptx/<sm>/<name>.ptx. It records
 * two artifacts from memory, signs the bundle with a throwaway key, and loads it into a
 * fresh tier folder.
 *
 * Build against an installed library:  cc custom_type.c $(pkg-config --cflags --libs megacache)
 * Run:  ./custom_type WORKDIR        (writes only below WORKDIR)
 */
#include <stdio.h>
#include <string.h>

#include <megacache.h>

/* Keys are "<sm>/<name>": sm is "sm_" and digits, name is [a-z0-9_]{1,64}. */
static int
ptx_key_check(void *ud, const char *key, char *why, size_t whylen)
{
	const char *slash = strchr(key, '/');
	size_t i;

	(void)ud;
	if (strncmp(key, "sm_", 3) != 0 || slash == NULL || slash == key + 3 ||
	    strlen(slash + 1) == 0 || strlen(slash + 1) > 64) {
		snprintf(why, whylen, "expected sm_<digits>/<name>");
		return MC_ERR_BAD_KEY;
	}
	for (i = 3; key + i < slash; i++)
		if (key[i] < '0' || key[i] > '9') {
			snprintf(why, whylen, "sm must be digits");
			return MC_ERR_BAD_KEY;
		}
	for (i = 1; slash[i]; i++)
		if (!((slash[i] >= 'a' && slash[i] <= 'z') || (slash[i] >= '0' && slash[i] <= '9') ||
		      slash[i] == '_')) {
			snprintf(why, whylen, "name must be [a-z0-9_]");
			return MC_ERR_BAD_KEY;
		}
	return MC_OK;
}

static int
ptx_dest(void *ud, const char *key, const unsigned char *sha256, char *buf, size_t buflen)
{
	int n;

	(void)ud;
	(void)sha256;
	n = snprintf(buf, buflen, "ptx/%s.ptx", key);
	return n > 0 && (size_t)n < buflen ? MC_OK : MC_ERR_INVALID;
}

static void
on_artifact(void *ud, int what, const char *type, const char *key, const char *dest,
	    uint64_t size)
{
	(void)ud;
	printf("%s %s %s -> %s (%llu bytes)\n", what == MC_LOAD_INSTALLED ? "installed" : "kept",
	       type, key, dest, (unsigned long long)size);
}

static int
fail(mc_ctx *ctx, const char *what, int rc)
{
	fprintf(stderr, "custom_type: %s: %s\n", what, ctx ? mc_ctx_error(ctx) : mc_strerror(rc));
	return 1;
}

int
main(int argc, char **argv)
{
	static const char k1[] = "// sm_90 gelu kernel\n.version 8.4\n";
	static const char k2[] = "// sm_90 layernorm kernel\n.version 8.4\n";
	char bundle[4096], pub[4096], sec[4096], tier[4096];
	mc_ctx *ctx = NULL;
	mc_seckey *sk = NULL;
	mc_pubkey *pk = NULL;
	mc_writer *w = NULL;
	mc_bundle *b = NULL;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: custom_type WORKDIR\n");
		return 2;
	}
	snprintf(bundle, sizeof bundle, "%s/ptx.mcache", argv[1]);
	snprintf(pub, sizeof pub, "%s/ptx.pub", argv[1]);
	snprintf(sec, sizeof sec, "%s/ptx.key", argv[1]);
	snprintf(tier, sizeof tier, "%s/ptx-tier", argv[1]);

	if ((rc = mc_ctx_new(&ctx)) != MC_OK)
		return fail(NULL, "start", rc);
	if ((rc = mc_ctx_register_type(ctx, "ptx", "kernels", 0, ptx_key_check, ptx_dest, NULL)) != MC_OK ||
	    (rc = mc_ctx_set_tier_root(ctx, "kernels", tier)) != MC_OK)
		return fail(ctx, "register", rc);
	if ((rc = mc_keygen(ctx, &sk, &pk)) != MC_OK ||
	    (rc = mc_keypair_save(ctx, sk, pk, pub, sec, NULL, 1)) != MC_OK)
		return fail(ctx, "keygen", rc);

	/* Record and save. */
	if ((rc = mc_writer_new(ctx, &w)) != MC_OK ||
	    (rc = mc_writer_add_memory(w, "ptx", "sm_90/gelu", k1, sizeof k1 - 1)) != MC_OK ||
	    (rc = mc_writer_add_memory(w, "ptx", "sm_90/layer_norm", k2, sizeof k2 - 1)) != MC_OK ||
	    (rc = mc_writer_set_label(w, "launcher", "example")) != MC_OK ||
	    (rc = mc_writer_add_signer(w, sk)) != MC_OK || (rc = mc_writer_save(w, bundle)) != MC_OK)
		return fail(ctx, "pack", rc);
	if (mc_writer_add_memory(w, "ptx", "../../etc/x", k1, 1) != MC_ERR_BAD_KEY)
		return fail(ctx, "a bad key was accepted", MC_ERR_INVALID);
	mc_writer_free(w);

	/* Open, trust the key, verify and install. */
	if ((rc = mc_bundle_open(ctx, bundle, &b)) != MC_OK || (rc = mc_bundle_trust(b, pk)) != MC_OK ||
	    (rc = mc_bundle_load(b, 0, on_artifact, NULL)) != MC_OK)
		return fail(ctx, "load", rc);
	printf("loaded %zu artifacts of %s into %s\n", mc_bundle_artifact_count(b), bundle, tier);
	mc_bundle_free(b);
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	mc_ctx_free(ctx);
	return 0;
}
