/* test_handlers.c - the torch handlers: key shapes, destinations, the default root,
 * and types registered by applications. */
#include "util.h"

static mc_ctx *ctx;

static void
setup(void)
{
	ck_assert_int_eq(mc_ctx_new(&ctx), MC_OK);
}

static void
teardown(void)
{
	mc_ctx_free(ctx);
}

static int
dest(const char *type, const char *key, const unsigned char *sha, char *buf)
{
	const struct mc_type *t = mc__find_type(ctx, type);

	ck_assert_ptr_nonnull(t);
	return mc__dest_for(ctx, t, key, sha, buf, MC_PATH_MAX);
}

START_TEST(destinations_match_torch_layout)
{
	unsigned char sha[32] = {0};
	char buf[MC_PATH_MAX];

	ck_assert_int_eq(dest("inductor", "fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i", sha, buf), MC_OK);
	ck_assert_str_eq(buf, "fxgraph/ot/fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i/"
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ck_assert_int_eq(dest("aot_autograd", "axwzp7kmjrbxcn3i4pjghhupnsqxu6k5i77rn52iovypcbamlzdg", sha, buf), MC_OK);
	ck_assert_str_eq(buf, "aotautograd/axwzp7kmjrbxcn3i4pjghhupnsqxu6k5i77rn52iovypcbamlzdg/"
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ck_assert_int_eq(dest("autotune", "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config");
	ck_assert_int_eq(dest("pgo", "megacache-probe:None:", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "dynamo/code_state_megacache-probe_None_.pkl");
	ck_assert_int_eq(dest("pgo", "a<b>c:d\"e/f\\g|h?i*j", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "dynamo/code_state_a_b_c_d_e_f_g_h_i_j.pkl");
	/* A pgo key full of path tricks stays one file name in dynamo/. */
	ck_assert_int_eq(dest("pgo", "../../../etc/passwd", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "dynamo/code_state_.._.._.._etc_passwd.pkl");
	ck_assert_int_eq(dest("precompile", "3c3bd02041fdea183ad93af9710bdeea9bb820ffeffee94f4cc608fc173740e8", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "dynamo/3c3bd02041fdea183ad93af9710bdeea9bb820ffeffee94f4cc608fc173740e8/entry");
}
END_TEST

START_TEST(bad_keys_refused)
{
	unsigned char sha[32] = {0};
	char buf[MC_PATH_MAX], longkey[300];
	static const char *const bad[][2] = {
		{"inductor", "fot"},
		{"inductor", "aotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i"},
		{"inductor", "f../../../../../../../../../../../../../../../../../.."},
		{"aot_autograd", "a1wzp7kmjrbxcn3i4pjghhupnsqxu6k5i77rn52iovypcbamlzdg"},
		{"autotune", "../3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"},
		{"autotune", "vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.json"},
		{"autotune", "/etc/passwd"},
		{"precompile", "../entry"},
		{"precompile", "3C3BD02041FDEA183AD93AF9710BDEEA9BB820FFEFFEE94F4CC608FC173740E8"},
		{"pgo", "tab\there"},
		{"pgo", ""},
	};
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(dest(bad[i][0], bad[i][1], sha, buf) == MC_ERR_BAD_KEY, "%s %s accepted",
			      bad[i][0], bad[i][1]);
	memset(longkey, 'a', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	ck_assert_int_eq(dest("pgo", longkey, NULL, buf), MC_ERR_BAD_KEY);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "refused"));
}
END_TEST

static int
any_key(void *ud, const char *key, char *why, size_t wl)
{
	(void)ud, (void)key, (void)why, (void)wl;
	return MC_OK;
}

static int
key_as_dest(void *ud, const char *key, const unsigned char *sha, char *buf, size_t len)
{
	(void)ud, (void)sha;
	snprintf(buf, len, "%s", key);
	return MC_OK;
}

/* Whatever an application's handler computes, the library refuses a destination with a
 * character a terminal would take as a control, as in labels, or invalid UTF-8. */
START_TEST(destination_characters)
{
	static const char *const refused[] = {"a/\x1b", "a/b\x7f", "a/\xc2\x9b", "a/\xe2\x80\xae",
					      "a/\xd8\x9c", "a/\xe2\x81\xa9", "a/\xe2\x80\xa8", "a/\xff",
					      "a/\xc0\xaf"};
	static const char *const fine[] = {"a/\xc2\xa0", "a/\xe2\x80\xaf", "a/\xe2\x80\x8d"};
	const struct mc_type *t;
	char buf[MC_PATH_MAX];
	size_t i;

	ck_assert_int_eq(mc_ctx_register_type(ctx, "appdest", "inductor", 0, any_key, key_as_dest,
					      NULL), MC_OK);
	t = mc__find_type(ctx, "appdest");
	for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		ck_assert_int_eq(mc__dest_for(ctx, t, refused[i], NULL, buf, sizeof buf), MC_ERR_BAD_KEY);
		ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "is not a plain relative path"));
	}
	for (i = 0; i < sizeof fine / sizeof fine[0]; i++)
		ck_assert_int_eq(mc__dest_for(ctx, t, fine[i], NULL, buf, sizeof buf), MC_OK);
}
END_TEST

START_TEST(default_root_like_torch)
{
	char tmp[] = "tmpdir.XXXXXX", cwd[2048], want[4096];
	const char *root;
	mc_ctx *c2;

	setenv("TORCHINDUCTOR_CACHE_DIR", "/some/where", 1);
	ck_assert_int_eq(mc_ctx_new(&c2), MC_OK);
	ck_assert_int_eq(mc_ctx_tier_root(c2, "inductor", &root), MC_OK);
	ck_assert_str_eq(root, "/some/where");
	mc_ctx_free(c2);

	/* $TMPDIR as tempfile takes it: a folder that takes a file, made absolute. */
	unsetenv("TORCHINDUCTOR_CACHE_DIR");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
	snprintf(want, sizeof want, "%s/%s/torchinductor_dom_ain_us_er", cwd, tmp);
	setenv("TMPDIR", tmp, 1);
	setenv("LOGNAME", "dom\\ain:us*er", 1);
	ck_assert_int_eq(mc_ctx_new(&c2), MC_OK);
	ck_assert_int_eq(mc_ctx_tier_root(c2, "inductor", &root), MC_OK);
	ck_assert_str_eq(root, want);
	ck_assert_int_eq(rmdir(tmp), 0);
	/* The caller's choice wins. */
	ck_assert_int_eq(mc_ctx_set_tier_root(c2, "inductor", "/mine"), MC_OK);
	ck_assert_int_eq(mc_ctx_tier_root(c2, "inductor", &root), MC_OK);
	ck_assert_str_eq(root, "/mine");
	mc_ctx_free(c2);
}
END_TEST

#define VJ "torch_compile_cache/a06ab0848f/rank_0_0/backbone/"
#define VA VJ "artifact_compile_range_8_8_subgraph_0/"
#define VK "ayorwflizvg4gcjetxknwea7a4akq473bveebtvpazmyg6cqoygr"
#define VE "bqbn3ffxbrvfjfbfmxbdtxy4wk6tgopvxpaswc5bqzctgasb2ch"
#define VF "fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i"
#define VH "3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb"
#define VAOT "torch_compile_cache/torch_aot_compile/" VH "/"

/* vLLM's keys are their paths beneath its root, in the shapes vLLM writes, and no other. */
START_TEST(vllm_keys)
{
	static const char *const good[][2] = {
		{"vllm_meta", VJ "cache_key_factors.json"},
		{"vllm_meta", "torch_compile_cache/0123456789/rank_10_999999/eagle_head/computation_graph.py"},
		{"vllm_meta", VJ "transformed_code.py"},
		{"vllm_handles", VJ "vllm_compile_cache.py"},
		{"vllm_artifact", VJ "artifact_compile_range_1_8192_subgraph_12"},
		{"vllm_artifact", VJ "artifact_shape_None_subgraph_0"},
		{"vllm_artifact", VJ "artifact_shape_16_subgraph_3"},
		{"vllm_artifact", VA "aotautograd/" VK "/" VE},
		{"vllm_artifact", VA "fxgraph/ot/" VF "/" VE},
		{"vllm_artifact", VA "ot/c" VE ".py"},
		{"vllm_artifact", VA "vu/" VH ".best_config"},
		{"vllm_artifact", VA "triton/0/" VK "/__grp__triton_poi_0.json"},
		{"vllm_artifact", VA "triton/0/" VK "/triton_poi_0.cubin"},
		{"vllm_aot", VAOT "rank_1_0/model"},
		{"vllm_aot", VAOT "inductor_cache/aotautograd/" VK "/" VE},
		{"vllm_aot", VAOT "inductor_cache/xy/c" VE ".py"},
		{"vllm_aot", VAOT "inductor_cache/triton/0/" VK "/__grp__k.json"},
	};
	static const char *const bad[][2] = {
		{"vllm_meta", VJ "other.json"},
		{"vllm_meta", "torch_compile_cache/a06ab0848F/rank_0_0/backbone/computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848/rank_0_0/backbone/computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_01_0/backbone/computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_0_1234567/backbone/computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_0/backbone/computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_0_0/../computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_0_0//computation_graph.py"},
		{"vllm_meta", "torch_compile_cache/a06ab0848f/rank_0_0/back.bone/computation_graph.py"},
		{"vllm_meta", "/" VJ "computation_graph.py"},
		{"vllm_handles", VJ "vllm_compile_cache.py/x"},
		{"vllm_handles", VJ "../vllm_compile_cache.py"},
		{"vllm_artifact", VJ "artifact_compile_range_08_8_subgraph_0"},
		{"vllm_artifact", VJ "artifact_compile_range_8_8_subgraph_"},
		{"vllm_artifact", VJ "artifact_shape_none_subgraph_0"},
		{"vllm_artifact", VA},
		{"vllm_artifact", VA "../x"},
		{"vllm_artifact", VA "aotautograd/" VK},
		{"vllm_artifact", VA "fxgraph/zz/" VF "/" VE},
		{"vllm_artifact", VA "ot/c" VE ".so"},
		{"vllm_artifact", VA "ot/.." "/" VH ".best_config"},
		{"vllm_artifact", VA "triton/x/" VK "/k.cubin"},
		{"vllm_artifact", VA "notes.txt"},
		{"vllm_aot", VAOT "rank_0_0/model/x"},
		{"vllm_aot", VAOT "rank_0_0/other"},
		{"vllm_aot", "torch_compile_cache/torch_aot_compile/3c94/rank_0_0/model"},
		{"vllm_aot", VAOT "inductor_cache/../../x"},
		{"vllm_aot", VAOT "inductor_cache/notes.txt"},
	};
	char buf[MC_PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert_msg(dest(good[i][0], good[i][1], NULL, buf) == MC_OK, "%s %s refused: %s",
			      good[i][0], good[i][1], mc_ctx_error(ctx));
		ck_assert_str_eq(buf, good[i][1]);
		ck_assert_str_eq(mc_ctx_type_tier(ctx, good[i][0]), "vllm");
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(dest(bad[i][0], bad[i][1], NULL, buf) == MC_ERR_BAD_KEY, "%s %s accepted",
			      bad[i][0], bad[i][1]);
}
END_TEST

#define VR "torch_compile_cache/a06ab0848f/rank_0_0/"

/* The older adaptor's caches of a rank: torch's files in inductor_cache/ and Triton's
 * kernels in triton_cache/, in their own shapes and no other. */
START_TEST(vllm_inductor_keys)
{
	static const char *const good[] = {
		VR "inductor_cache/fxgraph/ot/" VF "/" VE,
		VR "inductor_cache/aotautograd/" VK "/" VE,
		VR "inductor_cache/ot/c" VE ".py",
		VR "inductor_cache/vu/" VH ".best_config",
		VR "inductor_cache/triton/0/" VK "/triton_poi_0.cubin",
		"torch_compile_cache/0123456789/rank_10_999999/triton_cache/" VK "/__grp__k.json",
		VR "triton_cache/" VK "/triton_poi_0.ptx",
	};
	static const char *const bad[] = {
		VR "inductor_cache/fxgraph/zz/" VF "/" VE,
		VR "inductor_cache/aotautograd/" VK,
		VR "inductor_cache/notes.txt",
		VR "inductor_cache/../../x",
		VR "inductor_cache/triton/x/" VK "/k.cubin",
		VR "triton_cache/k.cubin",
		VR "triton_cache/" VK "/sub/k.cubin",
		VR "triton_cache/tmp.pid_1_2/k.cubin",
		VR "triton_cache/" VK "/.k.cubin",
		VR "backbone/inductor_cache/ot/c" VE ".py",
		"torch_compile_cache/a06ab0848F/rank_0_0/triton_cache/" VK "/k.cubin",
		"torch_compile_cache/a06ab0848f/rank_01_0/inductor_cache/ot/c" VE ".py",
		"torch_compile_cache/torch_aot_compile/" VH "/inductor_cache/ot/c" VE ".py",
		VR "other_cache/" VK "/k.cubin",
	};
	char buf[MC_PATH_MAX];
	size_t i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		ck_assert_msg(dest("vllm_inductor", good[i], NULL, buf) == MC_OK, "%s refused: %s",
			      good[i], mc_ctx_error(ctx));
		ck_assert_str_eq(buf, good[i]);
	}
	ck_assert_str_eq(mc_ctx_type_tier(ctx, "vllm_inductor"), "vllm");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(dest("vllm_inductor", bad[i], NULL, buf) == MC_ERR_BAD_KEY,
			      "%s accepted", bad[i]);
}
END_TEST

/* A context's vLLM root: mc_ctx_tier_root() of a new one, or its error. */
static int
vllm_root(char *buf, size_t len)
{
	const char *root;
	mc_ctx *c2;
	int rc;

	ck_assert_int_eq(mc_ctx_new(&c2), MC_OK);
	if ((rc = mc_ctx_tier_root(c2, "vllm", &root)) == MC_OK)
		snprintf(buf, len, "%s", root);
	mc_ctx_free(c2);
	return rc;
}

START_TEST(vllm_default_root)
{
	char root[4096];

	setenv("HOME", "/home/u/", 1);
	setenv("VLLM_CACHE_ROOT", "~/vc", 1);
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_OK);
	ck_assert_str_eq(root, "/home/u/vc");
	setenv("VLLM_CACHE_ROOT", "/v/root", 1);
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_OK);
	ck_assert_str_eq(root, "/v/root");
	setenv("VLLM_CACHE_ROOT", "", 1);
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_ERR_INVALID);
	setenv("VLLM_CACHE_ROOT", "rel", 1);
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_ERR_INVALID);
	unsetenv("VLLM_CACHE_ROOT");
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_OK);
	ck_assert_str_eq(root, "/xdg/vllm");
	setenv("XDG_CACHE_HOME", "~/xc", 1);
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_OK);
	ck_assert_str_eq(root, "/home/u/xc/vllm");
	unsetenv("XDG_CACHE_HOME");
	ck_assert_int_eq(vllm_root(root, sizeof root), MC_OK);
	ck_assert_str_eq(root, "/home/u/.cache/vllm");
}
END_TEST

/* An application type: keys of [a-z]+, stored as notes/<key>.txt in tier "notes". */
static int
note_check(void *ud, const char *key, char *why, size_t wl)
{
	size_t i;

	for (i = 0; key[i]; i++)
		if (key[i] < 'a' || key[i] > 'z') {
			snprintf(why, wl, "letters only");
			return MC_ERR_BAD_KEY;
		}
	return MC_OK;
}

static int
note_dest(void *ud, const char *key, const unsigned char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.txt", (const char *)ud, key);
	return MC_OK;
}

static int
evil_dest(void *ud, const char *key, const unsigned char *sha, char *buf, size_t len)
{
	snprintf(buf, len, "../%s", key);
	return MC_OK;
}

START_TEST(application_types)
{
	char buf[MC_PATH_MAX];

	ck_assert_int_eq(mc_ctx_register_type(ctx, "note", "notes", 0, note_check, note_dest, "n"), MC_OK);
	ck_assert_int_eq(mc_ctx_register_type(ctx, "note", "notes", 0, note_check, note_dest, "n"),
			 MC_ERR_INVALID);
	ck_assert_int_eq(mc_ctx_register_type(ctx, "Bad-Name", "notes", 0, note_check, note_dest, NULL),
			 MC_ERR_INVALID);
	ck_assert_int_eq(dest("note", "hello", NULL, buf), MC_OK);
	ck_assert_str_eq(buf, "n/hello.txt");
	ck_assert_int_eq(dest("note", "Hello", NULL, buf), MC_ERR_BAD_KEY);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "letters only"));
	/* A handler that computes an escaping path is stopped by the library. */
	ck_assert_int_eq(mc_ctx_register_type(ctx, "evil", "notes", 0, note_check, evil_dest, NULL), MC_OK);
	ck_assert_int_eq(dest("evil", "x", NULL, buf), MC_ERR_BAD_KEY);
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx), "not a plain relative path"));
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("handlers");
	TCase *tc = tcase_create("torch");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, destinations_match_torch_layout);
	tcase_add_test(tc, bad_keys_refused);
	tcase_add_test(tc, default_root_like_torch);
	tcase_add_test(tc, destination_characters);
	tcase_add_test(tc, application_types);
	tcase_add_test(tc, vllm_keys);
	tcase_add_test(tc, vllm_inductor_keys);
	tcase_add_test(tc, vllm_default_root);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
