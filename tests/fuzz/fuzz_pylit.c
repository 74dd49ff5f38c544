/* fuzz_pylit.c - the reader of vLLM's handle file (Python literals) on arbitrary bytes:
 * what it reads, it rewrites to a text it reads again, with the same strings in it. */
#include "fuzz.h"

#include "tiers/tiers.h"

/* Counts the strings (in *ud) and replaces each with one that needs escapes. */
static int
replace(void *ud, const struct mc_pylit_at *at, const char *s, size_t n, char **repl,
	size_t *repln, char *why, size_t whylen)
{
	static const char r[] = "it's \"q\" \xc3\xa9\\\n\x01\xc2\x85";

	(void)at, (void)s, (void)n, (void)why, (void)whylen;
	(*(size_t *)ud)++;
	if ((*repl = malloc(sizeof r)) == NULL)
		abort();
	memcpy(*repl, r, sizeof r);
	*repln = sizeof r - 1;
	return MC_OK;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	unsigned char *out, *again;
	size_t outn, againn, seen = 0, reseen = 0;

	if (ctx == NULL && mc_ctx_new(&ctx) != MC_OK)
		abort();
	if (mc__pylit_rewrite(ctx, "fuzz", data, size, 1 << 20, NULL, NULL, NULL, NULL) != MC_OK)
		return 0;
	if (mc__pylit_rewrite(ctx, "fuzz", data, size, 1 << 20, replace, &seen, &out,
			      &outn) != MC_OK)
		abort(); /* read once, it is read again */
	if (mc__pylit_rewrite(ctx, "fuzz", out, outn, 1 << 21, replace, &reseen, &again,
			      &againn) != MC_OK)
		abort(); /* the rewritten text is a literal again */
	if (reseen != seen || againn != outn || memcmp(again, out, outn) != 0)
		abort(); /* with the same strings, each in the form written */
	free(out);
	free(again);
	return 0;
}
