/* cmd_sign.c - sign: one more signature on a bundle, in place or into a copy (-o), once
 * the bundle verified under the trusted keys given: a co-signature is an endorsement. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	case 's':
		refuse_dash("-s", arg, "a secret key is not read from standard input");
		o->sec = arg;
		return 1;
	case 'o': o->out = arg; return 1;
	default: return 0;
	}
}

static const struct tool_optspec sign_spec = {"s:o:", sign_long, sign_opt};

/* sign's help: its lines of the overview (megacache --help), and its own (megacache
 * sign --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help sign_help = {
	.synopsis =
		"  sign BUNDLE -s SECFILE (-p PUBFILE... | --insecure-no-verify) [-o OUT] [--json]\n",
	.summary =
		"        verify a bundle as verify does, then add a signature to it (in place\n"
		"        unless -o)\n",
	.usage =
		"usage: megacache sign BUNDLE -s SECFILE (-p PUBFILE... | --insecure-no-verify) [-o OUT]\n"
		"       [--json]\n",
	.about =
		"Verify a bundle as verify does, then add a signature to it (co-signing endorses\n"
		"it): a bundle that fails is not signed, exit 1, nothing written.\n",
	.options =
		"  -s SECFILE            the key to sign with\n"
		"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME   the policy, as verify's\n"
		"  --insecure-no-verify  sign without checking the signatures (warns)\n"
		"  -o, --output OUT      write the signed bundle to OUT (default: BUNDLE, in place;\n"
		"                        - : standard output)\n"
		"  --json                the result as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache sign cache.mcache -s release.key -p ci.pub",
};

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
		say_pushed(t, path, NULL, stdout);
		return;
	}
	j = json_object();
	cJSON_AddStringToObject(j, "bundle", bundle);
	bundle_facts_json(j, src);
	cJSON_AddStringToObject(j, "output", path);
	cJSON_AddStringToObject(j, "key_id", mc_seckey_id(sk));
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	say_pushed(t, path, j, stdout);
	if (mc_bundle_open(t->ctx, path, &b) == MC_OK)
		cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	mc_bundle_free(b);
	print_json(j);
}

/* sign -o -: the signed copy of b is made in a temp file (the signature goes before the
 * objects, and the copy is checked as it is made), then sent to fd. Returns 0 or the
 * exit status of a failure it has said. */
static int
sign_to_fd(struct tool *t, mc_bundle *b, const mc_seckey *sk, int fd)
{
	char tmp[4096];
	int rc;

	if ((rc = tmpdir_file(tmp, sizeof tmp, "sign")) != 0)
		return rc;
	if ((rc = mc_bundle_add_signature(b, sk, tmp)) != MC_OK) {
		unlink(tmp);
		return fail_signed(t, b, rc);
	}
	rc = put_stdout_file(tmp, fd);
	unlink(tmp);
	return rc;
}

int
cmd_sign(struct tool *t, int argc, char **argv)
{
	struct sign_opts o = {0};
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	const char *path, *out;
	mc_seckey *sk = NULL;
	mc_bundle *b = NULL;
	int rc, out_fd = -1;

	tool_parse(t, argc, argv, &sign_spec, &o);
	if (optind + 1 != argc || o.sec == NULL)
		usage_say("sign needs BUNDLE and -s SECFILE");
	path = argv[optind];
	if (strcmp(path, "-") == 0)
		usage_say("sign reads the bundle twice: name a file, not standard input (-)");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("sign needs -p PUBFILE to verify the bundle it endorses (or "
			  "--insecure-no-verify to sign it unchecked)");
	check_out_folder(o.out);
	out = o.out != NULL ? o.out : path;
	out_fd = take_stdout(t, &out, "a bundle");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (t->trust.insecure && !t->quiet)
		say(stderr, "%s: warning: signing %s unchecked (--insecure-no-verify): the signature "
		    "endorses whatever it holds", PROG, shown_path(path));
	/* Signatures, policy and every byte, as verify checks them, before anything is
	 * written; with --insecure-no-verify, the bytes only (what the signature covers). */
	rc = mc_seckey_load(t->ctx, o.sec, read_password, t, &sk);
	if (rc == MC_OK)
		rc = open_trusted(t, path, &b, keys);
	if (rc == MC_OK)
		rc = mc_bundle_verify(b);
	if (rc == MC_OK && out_fd < 0)
		rc = mc_bundle_add_signature(b, sk, out);
	if (rc != MC_OK)
		rc = fail_signed(t, b, rc);
	else if (out_fd >= 0)
		rc = sign_to_fd(t, b, sk, out_fd);
	if (rc == 0)
		sign_report(t, b, path, out, sk);
	mc_bundle_free(b);
	mc_seckey_free(sk);
	free_keys(keys, t->trust.npubs);
	return rc;
}
