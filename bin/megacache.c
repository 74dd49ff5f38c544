/*
 * megacache.c - the command-line tool: a thin layer over libmegacache that parses
 * arguments, prints results, and maps errors to exit codes (0 ok, 1 verification
 * failure, 2 usage or system error). Here: main, the usage text and the command table;
 * each command is in its cmd_<name>.c.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

const char tool_usage[] =
	"usage: megacache COMMAND [OPTIONS]\n"
	"\n"
	"Record PyTorch compile caches into one signed bundle, and warm caches from it.\n"
	"\n"
	"commands:\n"
	"  keygen -p PUBFILE -s SECFILE [-W] [-f] [--json]\n"
	"        make a key pair (minisign format); -W leaves the secret key unencrypted\n"
	"  save -o BUNDLE [-s SECFILE]... [--label K=V]... [--cache-dir DIR] [--triton-dir DIR]\n"
	"       [--keep-unknown] [--dry-run] [--json] [-v] (and pack's bundle options)\n"
	"        record everything torch and Triton left in the folders they use here (those\n"
	"        load installs into), saying which folders it read\n"
	"  run [-b BUNDLE]... [-p PUBFILE]... [--save-to OUT [-s SECFILE]... [--label K=V]...]\n"
	"      [--cache-dir DIR] [--triton-dir DIR] [--types T[,T]...] [--sync] [--allow-cold]\n"
	"      -- CMD [ARGS]...\n"
	"        verify and load the bundles, run CMD (--cache-dir and --triton-dir are\n"
	"        exported to it), pass on its exit status, then save what it added to the\n"
	"        caches to OUT (not written when nothing is new); a bundle that fails to\n"
	"        verify stops the run unless --allow-cold\n"
	"  pack -o BUNDLE [-s SECFILE]... [--from-torch BLOB]... [--from-dir DIR]...\n"
	"       [--from-triton-dir DIR]... [--keep-unknown] [--label K=V]...\n"
	"       [--label-from-env VAR]... [--labels-json FILE]\n"
	"       [--bundle-version N] [--expires TIME] [--level N] [--no-compress] [--json] [-v]\n"
	"        record artifacts from torch blobs, cache dirs and Triton caches into a bundle\n"
	"        (without -s: unsigned, with a warning; --json: \"signed\")\n"
	"  sign BUNDLE -s SECFILE [-o OUT] [--json]\n"
	"        add a signature to a bundle (in place unless -o)\n"
	"  verify BUNDLE -p PUBFILE [-p PUBFILE]... [--threshold K] [--min-version N]\n"
	"       [--require K=V]... [--insecure-no-verify] [--json]\n"
	"        check signatures, policy and every byte of a bundle; tells the signatures\n"
	"        by trusted keys from the others (key ids; --json: trusted_signers,\n"
	"        untrusted_signers); a --threshold above the keys given is refused (exit 2)\n"
	"        before the bundle is read\n"
	"  list BUNDLE [--json] [--explain [--cache-dir DIR] [--triton-dir DIR]]\n"
	"        show a bundle's labels, signatures and artifacts (not verified); --explain:\n"
	"        where each artifact would land, and whether a load would install it,\n"
	"        replace a file that differs or leave an identical one unchanged\n"
	"  load BUNDLE -p PUBFILE... [--cache-dir DIR] [--triton-dir DIR] [--types T[,T]...]\n"
	"       [--owner USER[:GROUP]] [--dry-run] [--sync] [--json]\n"
	"       [--threshold K] [--min-version N] [--require K=V]... [--insecure-no-verify]\n"
	"        verify a bundle and install its artifacts into the cache dirs; --sync:\n"
	"        flush them to disk before reporting success (one syncfs per filesystem);\n"
	"        --owner (root only): every file and folder the load makes is that user's\n"
	"        (USER alone: with its primary group; names or numbers); --dry-run also\n"
	"        checks the folders are there or could be made, and files made in them\n"
	"  export BUNDLE --torch OUTFILE [--torch-format 2.7|current]\n"
	"       (-p PUBFILE... | --insecure-no-verify) [--json]\n"
	"        verify the bundle and write its torch artifacts as a torch cache blob (torch\n"
	"        unpickles it: no -p needs --insecure-no-verify)\n"
	"  merge -o OUT BUNDLE... (-p PUBFILE... | --insecure-no-verify)\n"
	"       [-s SECFILE... | --unsigned] [--label K=V]... [--bundle-version N] [--level N]\n"
	"       [--json]\n"
	"        several bundles into one, contents stored once; for a (type, key) with\n"
	"        different contents the bundle given later wins (each conflict is reported);\n"
	"        keeps the inputs' highest bundle version unless --bundle-version; signed\n"
	"        inputs without -s are refused unless --unsigned\n"
	"  diff A B [--json]\n"
	"        artifacts added, removed and changed from A to B, per type; exit status\n"
	"        0 when the same, 1 when they differ (as diff(1)), 2 on an error\n"
	"\n"
	"common options:\n"
	"  --password-file F  read the secret key's password from the first line of F;\n"
	"                     several: one per encrypted -s key, in order (the rest are\n"
	"                     asked on the terminal)\n"
	"  --expires TIME     (pack, save, run --save-to) a Unix time, an ISO 8601 UTC time\n"
	"                     (2026-12-01, 2026-12-01T12:00:00Z) or +N[dhms] from now\n"
	"                     (+30d, +12h); one not after now is refused\n"
	"  --now TIME         (verify, load, export, merge, run) check expiry as of this\n"
	"                     time, in the forms of --expires (the past too)\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N\n"
	"                     caps on what a bundle may declare (defaults 64 MiB, 1000000,\n"
	"                     8 GiB - 1, 256 GiB, and 4096 times an object's stored size;\n"
	"                     --max-expansion 0 turns that cap off)\n"
	"  --threads N        worker threads for pack, verify and load (default 0: one per\n"
	"                     CPU, at most 8); the bundle pack writes does not depend on it\n"
	"  --json             (all but run) one JSON object on standard output, the report\n"
	"                     or {\"ok\": false, \"error\": CODE, ...} (doc/json-schema.json)\n"
	"  -q, --quiet        print nothing but errors\n"
	"  -h, --help         this text;  --version  the version\n"
	"\n"
	"The folders are torch's and Triton's: $TORCHINDUCTOR_CACHE_DIR, else\n"
	"<tmp>/torchinductor_<user>, <tmp> chosen as Python's tempfile.gettempdir() does\n"
	"($TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, the working dir: the first that\n"
	"exists and is writable); Triton's kernels under torch in <that>/triton/<device>,\n"
	"Triton's own cache in $TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache\n"
	"(TRITON_HOME defaulting to the home folder); --triton-dir stands for\n"
	"$TRITON_CACHE_DIR, --cache-dir for $TORCHINDUCTOR_CACHE_DIR.\n"
	"SOURCE_DATE_EPOCH, when set, is the creation time pack records (reproducible bundles).\n"
	"\n"
	"Pipes: BUNDLE - (load, verify, list, export, diff) reads standard input, in order and\n"
	"once, with every check of a file; nothing is installed unless all of it verified,\n"
	"and a stream cut short is refused whole (exit 1): curl -fsSL URL | megacache load -\n"
	"-p KEY. -o - (pack, save) and --torch - (export) write to standard output, never to\n"
	"a terminal; the report then goes to standard error.\n"
	"\n"
	"exit status: 0 success; 1 verification or integrity failure; 2 usage or system error;\n"
	"run: the command's own (126/127: it could not be started; killed by a signal: the\n"
	"same signal, or 128 + its number for one that dumps core).\n";

/* The commands. Every one takes the common options and runs on a context with progress,
 * threads and caps (tool_start); the flags name the set-up it needs beyond that. */
static const struct command {
	const char *name;
	tool_cmd_fn *fn;
	unsigned flags;
} commands[] = {
	{"keygen", cmd_keygen, TOOL_JSON},
	{"pack", cmd_pack, TOOL_JSON},
	{"sign", cmd_sign, TOOL_JSON},
	{"verify", cmd_verify, TOOL_TRUST | TOOL_JSON},
	{"list", cmd_list, TOOL_TIERS | TOOL_JSON},
	{"load", cmd_load, TOOL_TRUST | TOOL_TIERS | TOOL_JSON},
	{"export", cmd_export, TOOL_TRUST | TOOL_JSON},
	{"merge", cmd_merge, TOOL_TRUST | TOOL_JSON},
	{"diff", cmd_diff, TOOL_JSON},
	{"save", cmd_save, TOOL_TIERS | TOOL_JSON},
	{"run", cmd_run, TOOL_TRUST | TOOL_TIERS},
};

/* Whether --json (or a prefix getopt takes for it: --j, --js, --jso) is among the
 * options of cmd (before a "--"), seen before they are parsed so that a usage error is
 * told in JSON too. */
static int
wants_json(const struct command *cmd, int argc, char **argv)
{
	size_t n;
	int i;

	for (i = 1; (cmd->flags & TOOL_JSON) && i < argc && strcmp(argv[i], "--") != 0; i++)
		if ((n = strlen(argv[i])) >= 3 && n <= 6 && strncmp(argv[i], "--json", n) == 0)
			return 1;
	return 0;
}

/* Runs cmd on argv (argv[0] its name), with its own option state, and frees what it set up. */
static int
run_command(const struct command *cmd, int argc, char **argv)
{
	struct tool t;
	char name[64];
	int rc;

	memset(&t, 0, sizeof t);
	t.name = cmd->name;
	t.flags = cmd->flags;
	/* The name getopt's complaints start with (options.c). */
	snprintf(name, sizeof name, "megacache %s", cmd->name);
	argv[0] = name;
	if (wants_json(cmd, argc, argv))
		json_begin(cmd->name);
	rc = cmd->fn(&t, argc, argv);
	mc_ctx_free(t.ctx);
	return json_finish(rc);
}

int
main(int argc, char **argv)
{
	size_t i;

	/* A file-size limit must give a clear error (EFBIG), not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		fputs(tool_usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(tool_usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		say(stdout, "megacache %s (bundle format %d)", MC_VERSION_STRING, MC_FORMAT_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return run_command(&commands[i], argc - 1, argv + 1);
	say(stderr, "%s: unknown command '%s'", PROG, argv[1]);
	try_help();
}
