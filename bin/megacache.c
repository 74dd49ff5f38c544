/*
 * megacache.c - the command-line tool: a thin layer over libmegacache that parses
 * arguments, prints results, and maps errors to exit codes (0 ok, 1 verification
 * failure, 2 usage or system error). Here: main, the command table and the frame of the
 * overview (megacache --help); each command, with its help, is in its cmd_<name>.c.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tool.h"

/* megacache --help: the frame, around each command's block (its synopsis and summary, in
 * its cmd_<name>.c). */
static const char overview_head[] =
	"usage: megacache COMMAND [OPTIONS]\n"
	"       megacache COMMAND --help, megacache help COMMAND: that command's options\n"
	"\n"
	"Record PyTorch compile caches into one signed bundle, and warm caches from it.\n"
	"\n"
	"commands:\n";

static const char overview_tail[] =
	"\n"
	"common options:\n"
	"  --password-file F  read the secret key's password from the first line of F;\n"
	"                     several: one per encrypted -s key, in order (the rest are\n"
	"                     asked on the terminal)\n"
	"  --expires TIME     (pack, save, run --save-to, merge, pull) a Unix time, an ISO\n"
	"                     8601 UTC time (2026-12-01, 2026-12-01T12:00:00Z) or +N[wdhms]\n"
	"                     from now (+2w, +30d, +12h); one not after now is refused\n"
	"  --now TIME         (verify, load, export, sign, merge, run, push, audit) check\n"
	"                     expiry as of this time, in the forms of --expires or -N[wdhms]\n"
	"                     before now (-1d, -30m)\n"
	"  --max-manifest-bytes N, --max-artifacts N, --max-artifact-bytes N,\n"
	"  --max-total-bytes N, --max-expansion N\n"
	"                     caps on what a bundle may declare (defaults 64 MiB, 1000000,\n"
	"                     8 GiB - 1, 256 GiB, and 4096 times an object's stored size;\n"
	"                     --max-expansion 0 turns that cap off)\n"
	"  --threads N        worker threads for pack, verify, load, push and pull (default\n"
	"                     0: one per CPU, at most 8); the bundle pack writes does not\n"
	"                     depend on it\n"
	"  --json             one JSON object on standard output, the report or\n"
	"                     {\"ok\": false, \"error\": CODE, ...} (doc/json-schema.json);\n"
	"                     run's at the end of standard error, from its last line\n"
	"                     that is a lone {, or in --json-file FILE\n"
	"  -q, --quiet        print nothing but errors\n"
	"  -v, --verbose      more detail: pack and save list each file recorded or\n"
	"                     skipped, load each artifact, run each new artifact saved,\n"
	"                     push, pull and audit each entry by its Redis key; accepted\n"
	"                     by the others, with no extra output\n"
	"  --progress WHEN    tty (the default: a line redrawn on a terminal), plain\n"
	"                     (\"verify: 25%\" lines every 5%, for CI logs; a load's\n"
	"                     \"verify\", then \"install\") or none\n"
	"  -p PUBFILE         a public key file, or the key itself: its base64 line\n"
	"                     (RW...), as minisign prints it, or the file's whole text\n"
	"  -h, --help         this text (after a command: its own help)\n"
	"  --version          the version; --version --json: with the bundle formats read\n"
	"                     and written, Redis support and the commands, as JSON\n"
	"  --registry-ca FILE, --plain-http, --registry-user USER,\n"
	"  --registry-password-file F, --timeout SECONDS\n"
	"                     for a bundle in a registry, oci://HOST[:PORT]/REPO[:TAG|\n"
	"                     @sha256:DIGEST], wherever a bundle is read or written: a\n"
	"                     private CA, plain HTTP beyond localhost, the credentials\n"
	"                     (else $MEGACACHE_REGISTRY_USER and _PASSWORD, then the auth\n"
	"                     files of podman and docker), and how long a silent registry\n"
	"                     is waited for (default 30 s); doc/registries.md\n"
	"\n"
	"The folders are torch's and Triton's: $TORCHINDUCTOR_CACHE_DIR, else\n"
	"<tmp>/torchinductor_<user>, <tmp> chosen as Python's tempfile.gettempdir() does\n"
	"($TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, the working dir: the first that\n"
	"exists and is writable); Triton's kernels under torch in <that>/triton/<device>,\n"
	"Triton's own cache in $TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache\n"
	"(TRITON_HOME defaulting to the home folder); --triton-dir stands for\n"
	"$TRITON_CACHE_DIR, --cache-dir for $TORCHINDUCTOR_CACHE_DIR. vLLM's is\n"
	"$VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else ~/.cache/vllm (--vllm-dir).\n"
	"SOURCE_DATE_EPOCH, when set, is the creation time pack records (reproducible bundles).\n"
	"The Redis of push, pull and audit without --redis is torch's: $TORCHINDUCTOR_REDIS_URL,\n"
	"else, when $TORCHINDUCTOR_REDIS_HOST or $TORCHINDUCTOR_REDIS_PORT is set,\n"
	"redis://HOST:PORT/0 (localhost, 6379 for the one unset); its password\n"
	"$MEGACACHE_REDIS_PASSWORD (below --redis-password-file, above the URL's).\n"
	"\n"
	"Pipes: BUNDLE - (load, verify, list, export, diff, merge, push, audit, run -b) reads\n"
	"standard input, in order and once, with every check of a file; nothing is installed\n"
	"unless all of it verified, and a stream cut short is refused whole (exit 1): curl\n"
	"-fsSL URL | megacache load - -p KEY. -o - (pack, save, sign, merge, pull) and --torch -\n"
	"(export) write to standard output, never to a terminal; the report then goes to\n"
	"standard error. Any other option naming a file refuses - (exit 2).\n"
	"\n"
	"exit status: 0 success; 1 verification or integrity failure; 2 usage or system error;\n"
	"3 a bundle of a newer format than this megacache reads (upgrade megacache);\n"
	"129, 130, 143: stopped by SIGHUP, SIGINT, SIGTERM (it ends by that signal), what it had\n"
	"staged or begun to write removed;\n"
	"run: the command's own (126/127: it could not be started, nothing loaded; killed by a\n"
	"signal: the same signal, or 128 + its number for one that dumps core).\n";

/* The commands. Every one takes the common options and runs on a context with progress,
 * threads and caps (tool_start); the flags name the set-up it needs beyond that, help is
 * its help (in its cmd_<name>.c, printed for -h by the parser), and writing the word its
 * progress gives the writing of a bundle (NULL: "pack"). */
static const struct command {
	const char *name;
	tool_cmd_fn *fn;
	unsigned flags;
	const struct cmd_help *help;
	const char *writing;
} commands[] = {
	{"keygen", cmd_keygen, TOOL_JSON, &keygen_help, NULL},
	{"pack", cmd_pack, TOOL_JSON, &pack_help, NULL},
	{"sign", cmd_sign, TOOL_TRUST | TOOL_JSON, &sign_help, NULL},
	{"verify", cmd_verify, TOOL_TRUST | TOOL_JSON, &verify_help, NULL},
	{"list", cmd_list, TOOL_TIERS | TOOL_JSON, &list_help, NULL},
	{"load", cmd_load, TOOL_TRUST | TOOL_TIERS | TOOL_JSON, &load_help, NULL},
	{"export", cmd_export, TOOL_TRUST | TOOL_JSON, &export_help, NULL},
	{"merge", cmd_merge, TOOL_TRUST | TOOL_JSON, &merge_help, "merge"},
	{"diff", cmd_diff, TOOL_JSON, &diff_help, NULL},
	{"save", cmd_save, TOOL_TIERS | TOOL_JSON, &save_help, "save"},
	{"run", cmd_run, TOOL_TRUST | TOOL_TIERS, &run_help, "save"},
	{"push", cmd_push, TOOL_TRUST | TOOL_JSON, &push_help, NULL},
	{"pull", cmd_pull, TOOL_JSON, &pull_help, NULL},
	{"audit", cmd_audit, TOOL_TRUST | TOOL_JSON, &audit_help, NULL},
	{"copy", cmd_copy, TOOL_JSON, &copy_help, NULL},
};

/* Whether --json (or a prefix getopt takes for it: --j, --js, --jso; or --json=ARG) is
 * among argv[1..] (before a "--"), seen before the options are parsed so that a usage
 * error is told in JSON too, whatever it is. */
static int
json_asked(int argc, char **argv)
{
	size_t n;
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (((n = strlen(argv[i])) >= 3 && n <= 6 && strncmp(argv[i], "--json", n) == 0) ||
		    strncmp(argv[i], "--json=", 7) == 0)
			return 1;
	return 0;
}

/* The same among the options of cmd, when it takes --json. */
static int
wants_json(const struct command *cmd, int argc, char **argv)
{
	return (cmd->flags & TOOL_JSON) && json_asked(argc, argv);
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
	t.progress.writing = cmd->writing;
	t.help = cmd->help;
	/* The name getopt's complaints start with (options.c). */
	snprintf(name, sizeof name, "megacache %s", cmd->name);
	argv[0] = name;
	tool_command = cmd->name;
	if (wants_json(cmd, argc, argv))
		json_begin(cmd->name);
	rc = cmd->fn(&t, argc, argv);
	interrupt_watch(NULL);
	mc_ctx_free(t.ctx);
	return json_finish(rc);
}

/* The command named name, or NULL. */
static const struct command *
find_command(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

/* The overview, megacache --help, to f: each command's block in the frame, in the order
 * a user meets them (keygen, save and run first), not the table's. */
static void
print_overview(FILE *f)
{
	static const struct cmd_help *const told[] = {
		&keygen_help, &save_help, &run_help, &pack_help, &sign_help, &verify_help,
		&list_help, &load_help, &export_help, &merge_help, &diff_help, &copy_help,
		&push_help, &pull_help, &audit_help};
	size_t i;

	fputs(overview_head, f);
	for (i = 0; i < sizeof told / sizeof told[0]; i++) {
		fputs(told[i]->synopsis, f);
		fputs(told[i]->summary, f);
	}
	fputs(overview_tail, f);
}

/* megacache help [CMD]: the overview, or CMD's help. */
static int
help_command(int argc, char **argv)
{
	if (argc > 2 && find_command(argv[2]) == NULL) {
		if (json_asked(argc, argv))
			json_begin("");
		say(stderr, "%s: unknown command '%s'", PROG, argv[2]);
		try_help();
	}
	if (argc > 2)
		print_help(find_command(argv[2])->help);
	else
		print_overview(stdout);
	return 0;
}

/* megacache --version [--json]: the versions of the tool, its library and the bundle
 * formats; --json: an object with what a pipeline checks before it counts on this
 * megacache (the formats it reads and writes, Redis support, the commands). */
static int
version_command(int argc, char **argv)
{
	cJSON *j, *f, *a;
	size_t i;
	int v;

	if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json") != 0)) {
		say(stderr, "%s: --version takes no option but --json", PROG);
		try_help();
	}
	if (argc == 2) {
		say(stdout, "megacache %s (bundle format %d)", MC_VERSION_STRING, MC_FORMAT_VERSION);
		return 0;
	}
	json_begin("version");
	j = json_object();
	cJSON_AddStringToObject(j, "version", MC_VERSION_STRING);
	cJSON_AddStringToObject(j, "library_version", mc_version());
	f = cJSON_AddObjectToObject(j, "format_versions");
	a = cJSON_AddArrayToObject(f, "read");
	for (v = 1; v <= MC_FORMAT_VERSION; v++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v));
	a = cJSON_AddArrayToObject(f, "write"); /* mc_writer_set_format_version(): 1 or the default */
	cJSON_AddItemToArray(a, cJSON_CreateNumber(1));
	if (MC_FORMAT_VERSION > 1)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(MC_FORMAT_VERSION));
	cJSON_AddNumberToObject(f, "default", MC_FORMAT_VERSION);
	a = cJSON_AddArrayToObject(j, "torch_formats");
	cJSON_AddItemToArray(a, cJSON_CreateString("2.7"));
	cJSON_AddItemToArray(a, cJSON_CreateString("current"));
	cJSON_AddBoolToObject(j, "redis", mc_redis_supported() != 0);
	cJSON_AddBoolToObject(j, "registry", mc_registry_supported() != 0);
	a = cJSON_AddArrayToObject(j, "commands");
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(commands[i].name));
	print_json(j);
	return 0;
}

/* What a command printed is part of its result: output that could not all be written (a
 * full disk, a pipe closed with SIGPIPE ignored) fails it, exit 2, as a failed write of a
 * bundle does. Returns rc, or 2 then. */
static int
flush_stdout(int rc)
{
	int lost = ferror(stdout);

	errno = 0;
	if (fflush(stdout) == 0 && !lost)
		return rc;
	say(stderr, "%s: cannot write standard output%s%s", PROG, errno != 0 ? ": " : "",
	    errno != 0 ? strerror(errno) : "");
	return rc == 0 ? EXIT_USAGE : rc;
}

int
main(int argc, char **argv)
{
	const struct command *cmd;

	/* A file-size limit must give a clear error (EFBIG), not kill the process. */
	signal(SIGXFSZ, SIG_IGN);
	interrupt_catch();
	if (argc < 2) {
		print_overview(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0)
		return flush_stdout(help_command(argc, argv));
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		return flush_stdout(version_command(argc, argv));
	if ((cmd = find_command(argv[1])) != NULL) {
		int rc = run_command(cmd, argc - 1, argv + 1);
		return flush_stdout(interrupt_end(rc));
	}
	/* No command: with --json, the failure object names none ("command": ""). */
	if (json_asked(argc, argv))
		json_begin("");
	if (argv[1][0] == '-')
		say(stderr, "%s: no command given: megacache COMMAND [OPTIONS], not '%s' first", PROG,
		    argv[1]);
	else
		say(stderr, "%s: unknown command '%s'", PROG, argv[1]);
	try_help();
}
