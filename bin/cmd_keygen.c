/* cmd_keygen.c - keygen: a new key pair in minisign's format, the secret key encrypted
 * with a password unless -W. */
#include "config.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tool.h"

struct keygen_opts {
	const char *pub, *sec;
	int unencrypted, force;
};

static const struct option keygen_long[] = {{"force", no_argument, NULL, 'f'},
					    {NULL, 0, NULL, 0}};

static int
keygen_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct keygen_opts *o = opts;

	switch (c) {
	case 'p':
		refuse_dash("-p", arg, "keygen writes each key to a file, not to standard output");
		o->pub = arg;
		return 1;
	case 's':
		refuse_dash("-s", arg, "keygen writes each key to a file, not to standard output");
		o->sec = arg;
		return 1;
	case 'W': o->unencrypted = 1; return 1;
	case 'f': o->force = 1; return 1;
	default: return 0;
	}
}

static const struct tool_optspec keygen_spec = {"p:s:Wf", keygen_long, keygen_opt};

/* keygen's help: its lines of the overview (megacache --help), and its own (megacache
 * keygen --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help keygen_help = {
	.synopsis =
		"  keygen -p PUBFILE -s SECFILE [-W] [-f] [--json]\n",
	.summary =
		"        make a key pair (minisign format); -W leaves the secret key unencrypted\n",
	.usage =
		"usage: megacache keygen -p PUBFILE -s SECFILE [-W] [-f] [--json]\n",
	.about =
		"Make a key pair in minisign's format.\n",
	.options =
		"  -p PUBFILE        where to write the public key\n"
		"  -s SECFILE        where to write the secret key (encrypted with a password); not\n"
		"                    PUBFILE, by any name\n"
		"  -W                leave the secret key unencrypted (no password)\n"
		"  -f, --force       replace keys that are already there\n"
		"  --json            the result as JSON\n"
		"  -v, --verbose     no extra output\n",
	.example = "megacache keygen -p ci.pub -s ci.key",
};

/* Whether the folder of path a and that of b are one, and the names in them the same. */
static int
same_place(const char *a, const char *b)
{
	char *ca = strdup(a), *cb = strdup(b), *na = strdup(a), *nb = strdup(b);
	struct stat sa, sb;
	int same = 0;

	if (ca != NULL && cb != NULL && na != NULL && nb != NULL &&
	    strcmp(basename(na), basename(nb)) == 0 && stat(dirname(ca), &sa) == 0 &&
	    stat(dirname(cb), &sb) == 0)
		same = sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	free(ca), free(cb), free(na), free(nb);
	return same;
}

/* Whether paths a and b name one file: the same name; the same file, when both are
 * there (a link to the other, another name of it); or the same name in one folder. */
static int
same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (strcmp(a, b) == 0)
		return 1;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	return same_place(a, b);
}

/* Reads the password into buf; one that cannot be had is one line naming the key's file
 * sec, and why (read_password() leaves that in password_why). */
static int
ask_password(struct tool *t, const char *sec, const char *prompt, char *buf, size_t len)
{
	if (read_password(t, prompt, buf, len) == MC_OK)
		return 0;
	json_error("password");
	say(stderr, "%s: %s: no password given: %s%s", PROG, sec, password_why,
	    t->npassword_files == 0 ? ", or -W for an unencrypted key" : "");
	return EXIT_USAGE;
}

/* The new key's password into pw1; asked twice on a terminal (into pw1 and pw2).
 * Returns 0 or the exit status of a failure it has reported (sec: the key's file). */
static int
new_password(struct tool *t, const char *sec, char *pw1, char *pw2, size_t len)
{
	if (ask_password(t, sec, "Password for the new secret key: ", pw1, len) != 0 ||
	    (t->password_file == NULL &&
	     ask_password(t, sec, "Password (again): ", pw2, len) != 0))
		return EXIT_USAGE;
	if (t->password_file == NULL && strcmp(pw1, pw2) != 0) {
		json_error("password");
		say(stderr, "%s: the passwords differ", PROG);
		return EXIT_USAGE;
	}
	if (pw1[0] == '\0') {
		json_error("password");
		say(stderr, "%s: empty password; use -W for an unencrypted key", PROG);
		return EXIT_USAGE;
	}
	return 0;
}

/* The line, or with --json the object, of a key pair made. */
static void
keygen_report(const struct tool *t, const struct keygen_opts *o, const mc_pubkey *pk)
{
	cJSON *j;

	if (!t->json) {
		if (!t->quiet)
			say(stdout, "key %s: public key in %s, secret key in %s", mc_pubkey_id(pk),
			    o->pub, o->sec);
		return;
	}
	j = json_object();
	cJSON_AddStringToObject(j, "key_id", mc_pubkey_id(pk));
	cJSON_AddStringToObject(j, "public_key", o->pub);
	cJSON_AddStringToObject(j, "secret_key", o->sec);
	cJSON_AddBoolToObject(j, "encrypted", !o->unencrypted);
	print_json(j);
}

int
cmd_keygen(struct tool *t, int argc, char **argv)
{
	struct keygen_opts o = {0};
	char pw1[1024], pw2[1024];
	mc_seckey *sk = NULL;
	mc_pubkey *pk = NULL;
	int rc;

	tool_parse(t, argc, argv, &keygen_spec, &o);
	if (o.pub == NULL || o.sec == NULL || optind != argc)
		usage_say("keygen needs -p PUBFILE and -s SECFILE");
	if (same_file(o.pub, o.sec))
		usage_error("-p %s and -s %s are one file: the secret key would be lost; name "
			    "two files", o.pub, o.sec);
	check_out_folder(o.pub);
	check_out_folder(o.sec);
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (!o.unencrypted && (rc = new_password(t, o.sec, pw1, pw2, sizeof pw1)) != 0) {
		explicit_bzero(pw1, sizeof pw1);
		explicit_bzero(pw2, sizeof pw2);
		return rc;
	}
	if ((rc = mc_keygen(t->ctx, &sk, &pk)) == MC_OK)
		rc = mc_keypair_save(t->ctx, sk, pk, o.pub, o.sec, o.unencrypted ? NULL : pw1,
				     o.force);
	explicit_bzero(pw1, sizeof pw1);
	explicit_bzero(pw2, sizeof pw2);
	if (rc == MC_OK)
		keygen_report(t, &o, pk);
	mc_seckey_free(sk);
	mc_pubkey_free(pk);
	if (rc == MC_ERR_EXISTS) {
		json_error(mc_status_code(rc));
		say(stderr, "%s: %s; add -f to replace the key pair", PROG, mc_ctx_error(t->ctx));
		return EXIT_USAGE;
	}
	return rc == MC_OK ? 0 : fail(t->ctx, rc);
}
