/* cmd_sign.c - sign: one more signature on a bundle, in place or into a copy (-o), once
 * the bundle verified under the trusted keys given: a co-signature is an endorsement. */
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

/* The line, or with --json the object, of a signature added to src, the bundle given
 * as bundle, into the one at path: src's facts, and the signatures path now has counted. */
static void
sign_report(const struct tool *t, mc_bundle *src, const char *bundle, const char *path,
	    mc_seckey *sk)
{
	mc_bundle *b = NULL;
	cJSON *j;

	if (!t->json) {
		if (!t->quiet)
			say(stdout, "signed %s with key %s%s", path, mc_seckey_id(sk),
			    t->trust.insecure ? " (not verified: --insecure-no-verify)"
					      : ", after it verified");
		return;
	}
	j = json_object();
	cJSON_AddStringToObject(j, "bundle", bundle);
	bundle_facts_json(j, src);
	cJSON_AddStringToObject(j, "output", path);
	cJSON_AddStringToObject(j, "key_id", mc_seckey_id(sk));
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	if (mc_bundle_open(t->ctx, path, &b) == MC_OK)
		cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	mc_bundle_free(b);
	print_json(j);
}

int
cmd_sign(struct tool *t, int argc, char **argv)
{
	struct sign_opts o = {0};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
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
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("sign needs -p PUBFILE to verify the bundle it endorses (or "
			    "--insecure-no-verify to sign it unchecked)%s", "");
	check_out_folder(o.out);
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (t->trust.insecure && !t->quiet)
		say(stderr, "%s: warning: signing %s unchecked (--insecure-no-verify): the signature "
		    "endorses whatever it holds", PROG, shown_path(path));
	/* Signatures, policy and every byte, as verify checks them, before anything is
	 * written; with --insecure-no-verify, the bytes only (what the signature covers). */
	if ((rc = mc_seckey_load(t->ctx, o.sec, read_password, t, &sk)) != MC_OK ||
	    (rc = open_trusted(t, path, &b, keys)) != MC_OK ||
	    (rc = mc_bundle_verify(b)) != MC_OK ||
	    (rc = mc_bundle_add_signature(b, sk, o.out ? o.out : path)) != MC_OK) {
		rc = fail_signed(t, b, rc);
	} else {
		sign_report(t, b, path, o.out ? o.out : path, sk);
		rc = 0;
	}
	mc_bundle_free(b);
	mc_seckey_free(sk);
	free_keys(keys, t->trust.npubs);
	return rc;
}
