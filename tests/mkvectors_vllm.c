/*
 * mkvectors_vllm.c - the vectors of vLLM's handle file, vllm_compile_cache.py (SPEC.md
 * section 4.2): bundles of format version 2 whose handle file, in its recorded form,
 * loads, or is refused for what a hostile signer can put in it.
 */
#include "mkvectors.h"

#define VLLM_DIR "torch_compile_cache/a06ab0848f/rank_0_0/backbone/"
#define VLLM_HANDLES VLLM_DIR "vllm_compile_cache.py"
#define VLLM_ART0 "artifact_compile_range_8_8_subgraph_0"
#define VLLM_ART1 "artifact_compile_range_8_8_subgraph_1"
/* The binary artifact's bytes stand for torch's: megacache keeps them as they are. */
#define VLLM_ART_DATA "CacheCompiledArtifact of subgraph 0"

/* A signed bundle of the handle file text (recorded form) and the artifact of subgraph 0. */
static void
vllm_pair(const char *name, const char *text, int code, const char *msg)
{
	const struct triple t[] = {
		{"vllm_handles", VLLM_HANDLES, text},
		{"vllm_artifact", VLLM_DIR VLLM_ART0, VLLM_ART_DATA}};

	signed_triples(name, t, 2);
	expect(name, "load-vllm", code, msg);
}

/* Valid: handle files of two ranks, as pprint writes them, in the recorded form: one
 * of two inductor_standalone handles, each to its artifact; one of newer vLLM's dicts,
 * holding an inductor handle whose path lies in the rank folder's inductor_cache/. */
static void
vllm_valid(void)
{
	static const struct triple t[] = {
		{"vllm_handles", VLLM_HANDLES,
		 "{   ((8, 8), 0, 'inductor_standalone'): (   '" VLLM_ART0 "',\n"
		 "                                            '" VLLM_ART0 "'),\n"
		 "    ((8, 8), 1, 'inductor_standalone'): (   '" VLLM_ART1 "',\n"
		 "                                            '" VLLM_ART1 "')}"},
		{"vllm_artifact", VLLM_DIR VLLM_ART0, VLLM_ART_DATA},
		{"vllm_artifact", VLLM_DIR VLLM_ART1, "CacheCompiledArtifact of subgraph 1"},
		{"vllm_handles", "torch_compile_cache/a06ab0848f/rank_1_0/backbone/"
		 "vllm_compile_cache.py",
		 "{   ((8, 8), 0, 'inductor'): {   'cache_key': 'k1',\n"
		 "                                 'graph_handle': (   '" FX_KEY "',\n"
		 "                                                     '../inductor_cache/ot/"
		 "cotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i.py')}}"}};

	signed_triples("v2-vllm-handles-valid.mcache", t, 4);
	expect("v2-vllm-handles-valid.mcache", "load-vllm", 0, "");
}

/* What a signer can put in a handle file that vLLM would run, open or misread: each
 * refused with nothing installed, naming the file, the line and column and the reason. */
static void
vllm_hostile(void)
{
	static const struct {
		const char *name, *text, *msg;
	} v[] = {
		{"v2-vllm-handles-code.mcache",
		 "{((8, 8), 0, 'inductor_standalone'): "
		 "__import__('os').system('touch /tmp/megacache-evil')}",
		 "line 1, column 38: found the name '__import__' (names and calls are not read)"},
		{"v2-vllm-handles-absolute.mcache",
		 "{((8, 8), 0, 'inductor_standalone'): ('" VLLM_ART0 "', '/etc/passwd')}",
		 "line 1, column 80: handle path /etc/passwd is outside the root"},
		{"v2-vllm-handles-dotdot.mcache",
		 "{((8, 8), 0, 'inductor_standalone'): ('" VLLM_ART0 "', '../../x')}",
		 "line 1, column 80: handle path ../../x is outside the root"},
		{"v2-vllm-handles-inductor-dotdot.mcache",
		 "{((8, 8), 0, 'inductor'): ('" FX_KEY "', '../inductor_cache/../../x')}",
		 "line 1, column 84: handle path ../inductor_cache/../../x is not in the rank "
		 "folder's inductor_cache/"},
		{"v2-vllm-handles-missing.mcache",
		 "{((8, 8), 1, 'inductor_standalone'): ('" VLLM_ART1 "', '" VLLM_ART1 "')}",
		 "line 1, column 80: handle to a missing artifact: " VLLM_DIR VLLM_ART1
		 " is neither loaded nor in place"},
		{"v2-vllm-handles-string.mcache",
		 "{((8, 8), '0', 'inductor_standalone'): ('" VLLM_ART0 "', '" VLLM_ART0 "')}",
		 "line 1, column 11: a string (0) where vLLM's handle file has none"},
		{"v2-vllm-handles-compiler.mcache",
		 "{((8, 8), 0, 'gcc'): ('" VLLM_ART0 "', '" VLLM_ART0 "')}",
		 "line 1, column 14: compiler gcc is not one vLLM keeps handles for "
		 "(inductor_standalone, inductor)"},
	};
	char msg[512];
	size_t i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		snprintf(msg, sizeof msg, "cannot write vllm_handles " VLLM_HANDLES " there: %s",
			 v[i].msg);
		vllm_pair(v[i].name, v[i].text, 1, msg);
	}
}

/* Brackets nested 64 deep, the most the reader takes (the top dict and 63 lists: no
 * string stands out of place), and 65 deep. */
static void
vllm_deep(void)
{
	char text[256], msg[256];
	int depth;

	for (depth = 64; depth <= 65; depth++) {
		snprintf(text, sizeof text, "{0: %.*s%.*s}", depth - 1,
			 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
			 depth - 1,
			 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
		snprintf(msg, sizeof msg, "cannot write vllm_handles " VLLM_HANDLES " there: "
			 "line 1, column %d: brackets nested over 64 deep", depth + 3);
		vllm_pair(depth == 64 ? "v2-vllm-handles-deep-64.mcache"
				      : "v2-vllm-handles-deep-65.mcache",
			  text, depth == 64 ? 0 : 1, depth == 64 ? "" : msg);
	}
}

/* A bundle of a handle file of size bytes, a handle then spaces, and its artifact: the
 * artifact stored as is in block 0, the handle file alone in block 1, one zstd frame (a
 * raw block of a 4,096th of it, RLE blocks of spaces, a raw "}") that keeps within the
 * expansion cap however large the file, so that only the file's size decides. */
static void
vllm_sized(const char *name, size_t size, int code, const char *msg)
{
	static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3};
	static const char text[] = "{((8, 8), 0, 'inductor_standalone'): ('" VLLM_ART0 "', '"
				   VLLM_ART0 "')";
	const char *blk[2] = {VLLM_ART_DATA, NULL};
	size_t blen[2] = {strlen(VLLM_ART_DATA), 0}, raw = size / 4096 + 1;
	struct buf f = {0}, c = {0};
	char ha[65], hc[65], hf[65], index[2048];

	put(&c, text, sizeof text - 1);
	while (c.n < raw)
		put(&c, " ", 1);
	put(&f, head, sizeof head);
	put_block(&f, 0, 0, (uint32_t)c.n);
	put(&f, c.p, c.n);
	rle_bytes(&f, &c, ' ', size - c.n - 1, 0);
	put_block(&f, 1, 0, 1);
	put(&f, "}", 1);
	put(&c, "}", 1);
	sha_hex(VLLM_ART_DATA, blen[0], ha);
	sha_hex(c.p, c.n, hc);
	sha_hex(f.p, f.n, hf);
	snprintf(index, sizeof index, "{\"artifacts\":[{\"type\":\"vllm_artifact\","
		 "\"key\":\"%s\",\"size\":%zu,\"hash\":\"%s\"},{\"type\":\"vllm_handles\","
		 "\"key\":\"%s\",\"size\":%zu,\"hash\":\"%s\"}],\"objects\":[{\"hash\":\"%s\","
		 "\"size\":%zu},{\"hash\":\"%s\",\"size\":%zu}],\"blocks\":[{\"encoding\":"
		 "\"none\",\"objects\":1,\"stored_size\":%zu},{\"encoding\":\"zstd\",\"objects\":1,"
		 "\"stored_size\":%zu,\"stored_hash\":\"%s\"}]}",
		 VLLM_DIR VLLM_ART0, blen[0], ha, VLLM_HANDLES, c.n, hc, ha, blen[0], hc, c.n,
		 blen[0], f.n, hf);
	blk[1] = (const char *)f.p;
	blen[1] = f.n;
	v2_bundle(name, index, NULL, blk, blen, 2, NULL, "load-vllm", code, msg);
	free(f.p);
	free(c.p);
}

/* The most a handle file may hold, 1 MiB (MC_DERIVE_MAX): at it, one byte over it, and
 * 100 MiB, refused from the size the index gives before any block is read. */
static void
vllm_sizes(void)
{
	static const struct {
		const char *name;
		size_t size;
	} v[] = {
		{"v2-vllm-handles-1mib.mcache", 1u << 20},
		{"v2-vllm-handles-1mib-over.mcache", (1u << 20) + 1},
		{"v2-vllm-handles-100mib.mcache", 100u << 20},
	};
	char msg[256];
	size_t i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		snprintf(msg, sizeof msg, "vllm_handles " VLLM_HANDLES ": %zu bytes, over the "
			 "1048576 a file of its type may have", v[i].size);
		vllm_sized(v[i].name, v[i].size, i == 0 ? 0 : 1, i == 0 ? "" : msg);
	}
}

void
vllm_vectors(void)
{
	fmt_version = 2;
	vllm_valid();
	vllm_hostile();
	vllm_deep();
	vllm_sizes();
}
