/* cmd_sign.c - sign: one more signature on a bundle, in place or into a copy (-o). */
#include "config.h"

#include <string.h>

#include "tool.h"

struct sign_opts {
	const char *sec, *out;
};

static const struct option sign_long[] = {{"output", required_argument, NULL, 'o'},
					  {NULL, 0, NULL, 0}};

static int
sign_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct sign_opts *o = opts;

	switch (c) {
	case 's': o->sec = arg; return 1;
	case 'o': o->out = arg; return 1;
	default: return 0;
	}
}

static const struct tool_optspec sign_spec = {"s:o:", sign_long, sign_opt};

/* The line, or with --json the object, of a signature added: to the bundle at path
 * (given as bundle), the signatures it now has counted. */
static void
sign_report(const struct tool *t, const char *bundle, const char *path, mc_seckey *sk)
{
	mc_bundle *b = NULL;
	cJSON *j;

	if (!t->json) {
		if (!t->quiet)
			say(stdout, "signed %s with key %s", path, mc_seckey_id(sk));
		return;
	}
	j = json_object();
	cJSON_AddStringToObject(j, "bundle", bundle);
	cJSON_AddStringToObject(j, "output", path);
	cJSON_AddStringToObject(j, "key_id", mc_seckey_id(sk));
	if (mc_bundle_open(t->ctx, path, &b) == MC_OK)
		cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	mc_bundle_free(b);
	print_json(j);
}

int
cmd_sign(struct tool *t, int argc, char **argv)
{
	struct sign_opts o = {0};
	const char *path;
	mc_seckey *sk = NULL;
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, &sign_spec, &o);
	if (optind + 1 != argc || o.sec == NULL)
		usage_error("sign needs BUNDLE and -s SECFILE%s", "");
	path = argv[optind];
	if (strcmp(path, "-") == 0)
		usage_error("sign reads the bundle twice: name a file, not standard input (-)%s", "");
	check_out_folder(o.out);
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_seckey_load(t->ctx, o.sec, read_password, t, &sk)) != MC_OK ||
	    (rc = mc_bundle_open(t->ctx, path, &b)) != MC_OK ||
	    (rc = mc_bundle_add_signature(b, sk, o.out ? o.out : path)) != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		sign_report(t, path, o.out ? o.out : path, sk);
		rc = 0;
	}
	mc_bundle_free(b);
	mc_seckey_free(sk);
	return rc;
}
