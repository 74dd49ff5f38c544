/* test_pylit.c - the reader of vLLM's handle file: real pprint output read and its
 * paths rewritten (the expected texts were made by Python's pprint and checked with
 * ast.literal_eval), and every kind of text it refuses. */
#include "util.h"

#include "tiers/tiers.h"

static const char text_a[] =
	"{   ((1, 8192), 0, 'inductor_standalone'): (   'artifact_compile_range_1_8192_subgraph_0',\n"
	"                                               '/root/.cache/vllm/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0'),\n"
	"    ((1, 8192), 1, 'inductor_standalone'): (   'artifact_compile_range_1_8192_subgraph_1',\n"
	"                                               '/root/.cache/vllm/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_1')}";

static const char want_a[] =
	"{   ((1, 8192), 0, 'inductor_standalone'): (   'artifact_compile_range_1_8192_subgraph_0',\n"
	"                                               \"/srv/new root/it's/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0\"),\n"
	"    ((1, 8192), 1, 'inductor_standalone'): (   'artifact_compile_range_1_8192_subgraph_1',\n"
	"                                               \"/srv/new root/it's/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_1\")}";

static const char text_b[] =
	"{   ((8, 8), 0, 'inductor_standalone'): {   'cache_key': 'abc',\n"
	"                                            'graph_handle': (   'artifact_compile_range_1_8192_subgraph_0',\n"
	"                                                                '/root/.cache/vllm/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0')}}";

static const char want_b[] =
	"{   ((8, 8), 0, 'inductor_standalone'): {   'cache_key': 'abc',\n"
	"                                            'graph_handle': (   'artifact_compile_range_1_8192_subgraph_0',\n"
	"                                                                \"/srv/new root/it's/torch_compile_cache/0123456789/rank_0_0/backbone/artifact_compile_range_1_8192_subgraph_0\")}}";

static const char text_c[] =
	"{   ((1, 8192), 0, 'inductor_standalone'): (   'k',\n"
	"                                               \"/root/.cache/vllm/dddddddddddddddddddddddddddddddddddddddddddddddddd/it's/caf\303\251/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\")}";

static const char want_c[] =
	"{   ((1, 8192), 0, 'inductor_standalone'): (   'k',\n"
	"                                               \"/srv/new root/it's/dddddddddddddddddddddddddddddddddddddddddddddddddd/it's/caf\303\251/eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\")}";

static const char text_d[] =
	"{   'cache_key': 'word word word word word word word word word word word word '\n"
	"                 'word word word word word word word word word word word word '\n"
	"                 'word word word word word word ',\n"
	"    'n': [None, True, False, -3, ()]}";

static const char want_d[] =
	"{   'cache_key': '/root/short',\n"
	"    'n': [None, True, False, -3, ()]}";

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

/* Moves a handle's path (item 1 of a tuple in a dict's value): the prefix
 * /root/.cache/vllm/ becomes "/srv/new root/it's/"; a string "refuse" is refused, and
 * a long one of words becomes "/root/short". */
static int
move(void *ud, const struct mc_pylit_at *at, const char *s, size_t n, char **repl,
     size_t *repln, char *why, size_t whylen)
{
	static const char old[] = "/root/.cache/vllm/", new[] = "/srv/new root/it's/";
	int *seen = ud;

	(*seen)++;
	if (strcmp(s, "refuse") == 0) {
		snprintf(why, whylen, "handle path is outside the root");
		return MC_ERR_INVALID;
	}
	if (strncmp(s, "word ", 5) == 0) { /* a long string pprint split */
		*repl = strdup("/root/short");
		*repln = strlen(*repl);
		return MC_OK;
	}
	if (at->role != MC_PYLIT_VALUE || at->index != 1 || strncmp(s, old, strlen(old)) != 0)
		return MC_OK;
	*repl = malloc(n + sizeof new);
	snprintf(*repl, n + sizeof new, "%s%s", new, s + strlen(old));
	*repln = strlen(*repl);
	return MC_OK;
}

static char *
rewrite(const char *text, int want_rc)
{
	unsigned char *out = NULL;
	size_t outn = 0;
	int seen = 0, rc;

	rc = mc__pylit_rewrite(ctx, "vllm_compile_cache.py", (const unsigned char *)text,
			       strlen(text), 1 << 20, move, &seen, &out, &outn);
	ck_assert_int_eq(rc, want_rc);
	if (rc != MC_OK) {
		ck_assert_ptr_null(out);
		return NULL;
	}
	ck_assert_int_gt(seen, 0);
	ck_assert_uint_eq(strlen((char *)out), outn);
	return (char *)out;
}

START_TEST(real_pprint)
{
	static const char *const cases[][2] = {{text_a, want_a}, {text_b, want_b},
					       {text_c, want_c}, {text_d, want_d}};
	size_t i;

	for (i = 0; i < 4; i++) {
		char *out = rewrite(cases[i][0], MC_OK);

		ck_assert_str_eq(out, cases[i][1]);
		free(out);
		ck_assert_int_eq(mc__pylit_rewrite(ctx, "f", (const unsigned char *)cases[i][0],
						   strlen(cases[i][0]), 1 << 20, NULL, NULL,
						   NULL, NULL), MC_OK);
	}
}
END_TEST

START_TEST(accepted)
{
	static const char *const ok[] = {
		"{}", "()", "[]", "(1,)", "[1, 2,]", "{1: 2,}", "((1))", "-5", "- 5", "0",
		"None", "True", "False", "  {'a': 1}  \n\n", "{'a': 1} # end\n",
		"{ # c\n 'a': [1, # d\n 2]}", "('a'  \"b\")", "'\\x41\\u00e9\\U0001F600\\0\\n'",
		"'a\\\nb'", "\"it's\"", "{(1, (2, 'x')): None}",
	};
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
		ck_assert_msg(mc__pylit_rewrite(ctx, "f", (const unsigned char *)ok[i],
						strlen(ok[i]), 1 << 20, NULL, NULL, NULL, NULL) == MC_OK,
			      "refused: %s (%s)", ok[i], mc_ctx_error(ctx));
}
END_TEST

/* Each text is refused with its code and a message holding the words given. */
static void
refused(const char *text, size_t n, size_t max, int code, const char *words)
{
	int rc = mc__pylit_rewrite(ctx, "cache.py", (const unsigned char *)text, n, max, NULL,
				   NULL, NULL, NULL);

	ck_assert_msg(rc == code, "%s: %d, not %d", text, rc, code);
	ck_assert_msg(strstr(mc_ctx_error(ctx), words) != NULL, "%s: '%s' lacks '%s'",
		      text, mc_ctx_error(ctx), words);
}

START_TEST(refusals)
{
	static const struct {
		const char *text, *words;
	} bad[] = {
		{"{(1, 2): Range(start=1, end=2)}", "line 1, column 10: found the name 'Range'"},
		{"[\n  os.system('x')]", "line 2, column 3: found the name 'os'"},
		{"(1 + 2)", "found '+' where ',' or ')'"},
		{"[1, -x]", "'-' not before a number"},
		{"1.5", "a float"},
		{"(1, 2e3)", "a float"},
		{"{'a': b'x'}", "a bytes literal"},
		{"r'x'", "a string prefix"},
		{"'''x'''", "triple-quoted"},
		{"{'a': (1, 2", "found the end of the text where ',' or ')'"},
		{"{'a': 'xyz", "line 1, column 7: an unterminated string"},
		{"['a\nb']", "unterminated string"},
		{"'\\q'", "a bad escape '\\q'"},
		{"'\\x4'", "a bad escape '\\x'"},
		{"'\\ud800'", "a bad escape '\\u'"},
		{"{1, 2}", "sets are not read"},
		{"{[1]: 2}", "a dict key that is a list or dict"},
		{"1, 2", "the text should end"},
		{"'a'\n'b'", "line 2, column 1: found a string where the text should end"},
		{"012", "leading zero"},
		{"0x1f", "a form not read"},
		{"# c\n1", "found '#'"},
		{"", "found the end of the text where a value should be"},
		{"'\xff'", "not UTF-8"},
	};
	char deep[200];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		refused(bad[i].text, strlen(bad[i].text), 1 << 20, MC_ERR_MALFORMED,
			bad[i].words);
	refused("'a\0b'", 5, 100, MC_ERR_MALFORMED, "column 3: a NUL byte");
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	deep[130] = '\0';
	refused(deep, 130, 1 << 20, MC_ERR_LIMIT, "nested over 64 deep");
	ck_assert_int_eq(mc__pylit_rewrite(ctx, "f", (const unsigned char *)deep + 1, 128,
					   1 << 20, NULL, NULL, NULL, NULL), MC_OK);
	refused(text_a, strlen(text_a), 100, MC_ERR_LIMIT, "over the 100 read");
}
END_TEST

START_TEST(callback_refuses)
{
	ck_assert_ptr_null(rewrite("{(1, 2): ('k', 'refuse')}", MC_ERR_INVALID));
	ck_assert_ptr_nonnull(strstr(mc_ctx_error(ctx),
				     "vllm_compile_cache.py: line 1, column 16: handle path is "
				     "outside the root"));
}
END_TEST

/* Writes where each string stands to the text in ud: role, index, depth, dict key. */
static int
note(void *ud, const struct mc_pylit_at *at, const char *s, size_t n, char **repl,
     size_t *repln, char *why, size_t whylen)
{
	char *log = ud;

	(void)n, (void)repl, (void)repln, (void)why, (void)whylen;
	snprintf(log + strlen(log), 1024 - strlen(log), "%.8s:%d,%ld,%u,%s;", s, at->role,
		 at->index, at->depth, at->dkey ? at->dkey : "-");
	return MC_OK;
}

START_TEST(positions)
{
	char log[1024] = "";
	unsigned char *out;
	size_t outn;

	ck_assert_int_eq(mc__pylit_rewrite(ctx, "f", (const unsigned char *)text_b,
					   strlen(text_b), 1 << 20, note, log, &out, &outn),
			 MC_OK);
	ck_assert_str_eq((char *)out, text_b);
	free(out);
	ck_assert_str_eq(log, "inductor:1,2,2,-;cache_ke:1,-1,2,-;abc:2,-1,2,cache_key;"
			      "graph_ha:1,-1,2,-;artifact:2,0,3,graph_handle;"
			      "/root/.c:2,1,3,graph_handle;");
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("pylit");
	TCase *tc = tcase_create("read");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, real_pprint);
	tcase_add_test(tc, accepted);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, callback_refuses);
	tcase_add_test(tc, positions);
	suite_add_tcase(s, tc);
	return s;
}

RUN_SUITE(suite())
