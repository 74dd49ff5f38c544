/* fuzz_manifest.c - the manifest parser on arbitrary bytes, from memory and, in pieces
 * of a size the input chooses, from a file in windows, as the reader takes large
 * manifests: both must reach the same outcome. The same bytes go to the parser of a
 * format version 2 index, both ways too. */
#include "fuzz.h"

static int
parse_from_file(mc_ctx *ctx, int fd, const uint8_t *data, size_t size, struct mc_manifest *m,
		int index)
{
	struct mc_mcheck c;
	size_t piece = size > 0 ? (size_t)data[0] % 17 + 1 : 1, at;

	if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	mc__mcheck_init(&c);
	for (at = 0; at < size; at += piece)
		mc__mcheck_feed(&c, data + at, size - at < piece ? size - at : piece);
	if (index)
		return mc__index_parse_fd(ctx, fd, size, &c, m);
	return mc__manifest_parse_fd(ctx, fd, size, &c, m);
}

/* The bytes as the index of a version 2 manifest: from memory and from a file alike. */
static void
index_both(mc_ctx *ctx, int fd, const uint8_t *data, size_t size)
{
	struct mc_manifest m, f;
	int rc;

	memset(&m, 0, sizeof m);
	m.version = 2;
	m.halg = MC_HALG_SHA256;
	f = m;
	rc = mc__index_parse(ctx, data, size, &m);
	if (parse_from_file(ctx, fd, data, size, &f, 1) != rc)
		abort();
	if (rc != MC_OK)
		return;
	if (f.nartifacts != m.nartifacts || f.nobjects != m.nobjects || f.nblocks != m.nblocks)
		abort();
	mc__manifest_free(&f);
	mc__manifest_free(&m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mc_ctx *ctx;
	static int fd = -1;
	struct mc_manifest m, f;
	int rc;

	if (ctx == NULL && mc_ctx_new(&ctx) != MC_OK)
		abort();
	if (fd < 0 && (fd = mc__open_temp_anon(ctx)) < 0)
		abort();
	rc = mc__manifest_parse(ctx, data, size, &m);
	if (parse_from_file(ctx, fd, data, size, &f, 0) != rc)
		abort();
	if (rc == MC_OK) {
		char *json;
		size_t len;
		if (f.nartifacts != m.nartifacts || f.nobjects != m.nobjects)
			abort();
		mc__manifest_free(&f);
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
	index_both(ctx, fd, data, size);
	return 0;
}
