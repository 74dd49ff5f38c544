/* cmd_run.c - run: verify and load bundles, run a command on the warm caches (signals
 * forwarded, its exit status passed on), then save what it added to the caches. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

#define MAX_BUNDLES 16
#define MAX_DIFF_LINES 50 /* of the new artifacts listed without -v */

struct run_opts {
	const char *bundles[MAX_BUNDLES];
	size_t nbundles;
	const char *save_to, *save_used, *types;
	struct record_opts rec;
	int allow_cold, sync, keep_unseen;
	FILE *json_file; /* --json-file */
	struct gpu_opts gpu;
};

/* With --json: what the object tells besides the command (doc/json-schema.json, "run");
 * and what the job used, told in text or JSON. */
struct run_json {
	cJSON *bundles; /* one object per bundle, loaded or (--allow-cold) not */
	cJSON *save;    /* NULL: no --save-to */
	cJSON *save_used; /* NULL: no --save-used */
	mc_usage *usage; /* the loads add to it; NULL once it cannot tell */
	cJSON *used, *not_seen; /* NULL: not told (the command did not start, or failed) */
};

static const struct option run_long[] = {
	{"bundle", required_argument, NULL, 'b'},
	{"save-to", required_argument, NULL, 'o'},
	{"save-used", required_argument, NULL, OPT_SAVE_USED},
	{"save-used-keep-unseen", no_argument, NULL, OPT_SAVE_USED_KEEP_UNSEEN},
	{"allow-cold", no_argument, NULL, OPT_ALLOW_COLD},
	{"types", required_argument, NULL, OPT_TYPES},
	{"sync", no_argument, NULL, OPT_SYNC},
	{"json", no_argument, NULL, OPT_JSON},
	{"json-file", required_argument, NULL, OPT_JSON_FILE},
	GPU_LONG_OPTIONS,
	RECORD_LONG_OPTIONS,
	{NULL, 0, NULL, 0}};

static int
run_opt(struct tool *t, void *opts, int c, char *arg)
{
	struct run_opts *o = opts;

	switch (c) {
	case 'b':
		if (o->nbundles == MAX_BUNDLES)
			usage_error("too many bundles (at most %d)", MAX_BUNDLES);
		o->bundles[o->nbundles++] = arg;
		return 1;
	case 'o':
		refuse_dash("--save-to", arg, "standard output is the command's");
		o->save_to = arg;
		return 1;
	case OPT_SAVE_USED:
		refuse_dash("--save-used", arg, "standard output is the command's");
		o->save_used = arg;
		return 1;
	case OPT_SAVE_USED_KEEP_UNSEEN: o->keep_unseen = 1; return 1;
	case OPT_ALLOW_COLD: o->allow_cold = 1; return 1;
	case OPT_TYPES: o->types = arg; return 1;
	case OPT_SYNC: o->sync = 1; return 1;
	case OPT_JSON: t->json = 1; return 1;
	case OPT_JSON_FILE: t->json = 1; return 1; /* opened by json_target() */
	default: return gpu_opt(&o->gpu, c, arg) || record_opt(&o->rec, c, arg);
	}
}

/* '+': options end at the command's name, so its own options stay its own. */
static const struct tool_optspec run_spec = {"+b:o:s:", run_long, run_opt};

/* run's help: its lines of the overview (megacache --help), and its own (megacache
 * run --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help run_help = {
	.synopsis =
		"  run [-b BUNDLE]... [-p PUBFILE]... [--save-to OUT] [--save-used OUT\n"
		"      [--save-used-keep-unseen]] [-s SECFILE]... [--label K=V]... [--cache-dir DIR]\n"
		"      [--triton-dir DIR] [--vllm-dir DIR] [--types T[,T]...] [--sync]\n"
		"      [--allow-cold] [--json | --json-file FILE] -- CMD [ARGS]...\n",
	.summary =
		"        verify and load the bundles, run CMD (--cache-dir, --triton-dir and --vllm-dir\n"
		"        are exported to it), pass on its exit status, say per type how many loaded\n"
		"        artifacts it read and how many it wrote anew, then save what it added to the\n"
		"        caches to OUT (not written when nothing is new), or with --save-used what it\n"
		"        read and wrote; a bundle that fails to verify stops the run unless --allow-cold\n",
	.usage =
		"usage: megacache run [-b BUNDLE]... [-p PUBFILE]... [--save-to OUT] [--save-used OUT\n"
		"       [--save-used-keep-unseen]] [-s SECFILE]... [--cache-dir DIR] [--triton-dir DIR]\n"
		"       [--vllm-dir DIR] [--types T[,T]...] [--sync] [--allow-cold] [--gpu-target T]...\n"
		"       [--skip-other-gpus] [--json | --json-file FILE] -- CMD [ARGS]...\n",
	.about =
		"Load the bundles, run CMD with its exit status passed on, save what it added.\n"
		"After CMD, a line tells per type how many loaded artifacts it read and how many\n"
		"files it wrote anew (told by access times, set to a mark before CMD: not on a\n"
		"noatime mount, nor of another user's files); a warning names the types it read\n"
		"none of: likely a torch, Triton or config mismatch (megacache list BUNDLE).\n",
	.options =
		"  -b, --bundle BUNDLE    a bundle to verify and load first (several: in order)\n"
		"  -p PUBFILE             a trusted public key (a file, its text or its base64 line)\n"
		"  -o, --save-to OUT      save the artifacts CMD added to OUT (not written if none)\n"
		"  --save-used OUT        save what CMD used to OUT: the cache files it read (with the\n"
		"                         rest of their units) and those it wrote\n"
		"  --save-used-keep-unseen  keep files whose reads cannot be seen (else exit 2)\n"
		"  -s SECFILE             sign the bundles written with this key\n"
		"  --types T[,T]...       load only these artifact types\n"
		"  --cache-dir, --triton-dir, --vllm-dir DIR   the cache folders (exported to CMD)\n"
		"  --sync                 flush what is loaded to disk before CMD starts\n"
		"  --allow-cold           run CMD even when a bundle fails to verify or is for another GPU\n"
		"  --gpu-target T, --skip-other-gpus   the host's GPUs, kernels for others: as load\n"
		"  --json                 the report as JSON, last on standard error (stdout is CMD's)\n"
		"  --json-file FILE       the report as JSON, written to FILE instead\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME, --insecure-no-verify:\n"
		"                         as verify\n"
		"  --label K=V, --label-from-env VAR, --labels-json FILE, --bundle-version N,\n"
		"  --expires TIME, --level N, --no-compress, --format-version N, --keep-unknown:\n"
		"                         as pack, for the bundles written\n"
		"  -v, --verbose          list every new artifact saved (else the first few)\n",
	.example = "megacache run -b cache.mcache -p ci.pub --save-to new.mcache -s ci.key -- python train.py",
};

static void
run_check(const struct tool *t, const struct run_opts *o, int argc)
{
	if (optind >= argc)
		usage_say("run needs a command: megacache run [OPTIONS] -- CMD [ARGS]");
	if (o->nbundles > 0 && t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("run needs -p PUBFILE to verify its bundles (or --insecure-no-verify)");
	if (t->trust.npubs > 0 && t->trust.insecure)
		usage_say("-p and --insecure-no-verify do not go together");
	if (o->nbundles == 0 && (t->trust.npubs > 0 || o->types != NULL || o->gpu.ngiven > 0 ||
				 o->gpu.skip))
		usage_say("-p, --types, --gpu-target and --skip-other-gpus apply to bundles given "
			  "with -b; none given");
	if (o->save_to == NULL && o->save_used == NULL &&
	    (o->rec.signers.n > 0 || o->rec.nlabels > 0))
		usage_say("-s and --label apply to the bundles of --save-to and --save-used; none "
			  "given");
	if (o->keep_unseen && o->save_used == NULL)
		usage_say("--save-used-keep-unseen applies to --save-used; none given");
	if (o->save_to != NULL && o->save_used != NULL && strcmp(o->save_to, o->save_used) == 0)
		usage_error("--save-to and --save-used name one file: %s", o->save_to);
}

/* Whether file can be run: a regular file executable by us. */
static int
runnable(const char *file)
{
	struct stat st;

	if (stat(file, &st) != 0)
		return errno;
	if (!S_ISREG(st.st_mode) || access(file, X_OK) != 0)
		return EACCES;
	return 0;
}

/* CMD found before anything is loaded, as posix_spawnp() will look for it: a name with
 * a slash as it is, else in each folder of $PATH (unset: the system's default). Returns
 * 0, or 127 (not found) or 126 (not executable), as a shell does, having said so. */
static int
command_check(const char *cmd)
{
	const char *path = getenv("PATH"), *p, *end;
	char file[PATH_MAX], dflt[256];
	int err = ENOENT, e;

	if (strchr(cmd, '/') != NULL) {
		err = runnable(cmd);
	} else {
		if (path == NULL && confstr(_CS_PATH, dflt, sizeof dflt) > 0)
			path = dflt;
		for (p = path != NULL ? path : ""; err != 0; p = end + 1) {
			end = strchr(p, ':');
			if (end == NULL)
				end = p + strlen(p);
			/* an empty entry is the working folder */
			snprintf(file, sizeof file, "%.*s%s%s", (int)(end - p), p, end > p ? "/" : "",
				 cmd);
			if ((e = runnable(file)) == 0 || (e != ENOENT && e != ENOTDIR))
				err = e == 0 ? 0 : EACCES;
			if (*end == '\0')
				break;
		}
	}
	if (err == 0)
		return 0;
	json_error("command_not_started");
	if (err == ENOENT || err == ENOTDIR)
		say(stderr, "%s: cannot run %s: %s; nothing was loaded", PROG, cmd,
		    strchr(cmd, '/') != NULL ? "no such file" : "command not found in PATH");
	else
		say(stderr, "%s: cannot run %s: %s; nothing was loaded", PROG, cmd, strerror(err));
	return err == ENOENT || err == ENOTDIR ? 127 : 126;
}

/* --json and --json-file, found before the options are parsed so that a usage error is
 * told in JSON too: the object goes to standard error (standard output is the
 * command's), after all else, or to the file, which is written over. */
static void
json_target(struct tool *t, struct run_opts *o, int argc, char **argv)
{
	const char *path = NULL;

	if (tool_prescan(t, argc, argv, &run_spec, OPT_JSON_FILE, &path)) {
		refuse_dash("--json-file", path, "standard output is the command's (--json puts "
			    "the object at the end of standard error)");
		if ((o->json_file = fopen(path, "we")) == NULL) {
			say(stderr, "%s: cannot write %s: %s", PROG, path, strerror(errno));
			exit(EXIT_USAGE);
		}
		json_begin(t->name);
		json_to(o->json_file);
	} else if (tool_prescan(t, argc, argv, &run_spec, OPT_JSON, &path)) {
		json_begin(t->name);
		json_to(stderr);
	}
}

/* A bundle's entry in the --json object: r its counts once loaded, else (--allow-cold)
 * NULL and the failure's code and line. */
static cJSON *
bundle_json(const struct run_opts *o, mc_bundle *b, const char *path, const struct load_report *r,
	    int rc, const char *line)
{
	cJSON *j = cJSON_CreateObject();
	struct load_report none;

	cJSON_AddStringToObject(j, "bundle", path);
	if (r != NULL)
		bundle_facts_json(j, b);
	cJSON_AddBoolToObject(j, "loaded", r != NULL);
	cJSON_AddNumberToObject(j, "installed", r != NULL ? (double)r->installed : 0);
	cJSON_AddNumberToObject(j, "replaced", r != NULL ? (double)r->replaced : 0);
	cJSON_AddNumberToObject(j, "unchanged", r != NULL ? (double)r->unchanged : 0);
	memset(&none, 0, sizeof none);
	gpu_json(&o->gpu, b, r != NULL ? r : &none, j);
	if (r != NULL) {
		cJSON_AddNullToObject(j, "error");
		cJSON_AddNullToObject(j, "message");
	} else {
		cJSON_AddStringToObject(j, "error", mc_status_code(rc));
		cJSON_AddStringToObject(j, "message", line);
	}
	return j;
}

/* Verifies and loads each bundle in turn; the ones loaded stay open in bases[] (the
 * save compares with them). A bundle that fails ends the run unless --allow-cold. */
static int
load_bundles(struct tool *t, struct run_opts *o, mc_bundle **bases, size_t *nbases,
	     mc_pubkey **keys, struct run_json *rj)
{
	size_t i;
	int rc;

	for (i = 0; i < o->nbundles; i++) {
		struct load_report r;
		mc_bundle *b = NULL;

		memset(&r, 0, sizeof r);
		r.usage = rj->usage;
		o->gpu.status = 0; /* an earlier bundle's detection told its failure */
		rc = open_trusted(t, o->bundles[i], &b, keys + i * MAX_PUBKEYS);
		if (rc == MC_OK && o->types != NULL)
			rc = select_types(t->ctx, b, o->types);
		if (rc == MC_OK && (rc = gpu_apply_later(t, &o->gpu, b)) != 0) {
			mc_bundle_free(b);
			return rc;
		}
		if (rc == MC_OK)
			rc = mc_bundle_load(b, (o->sync ? MC_LOAD_SYNC : 0) | gpu_flags(&o->gpu),
					    on_artifact, &r);
		if (rc != MC_OK) {
			int status = gpu_told(&o->gpu) != 0 ? gpu_told(&o->gpu) : fail(t->ctx, rc);
			if (rc == MC_ERR_GPU_MISMATCH)
				gpu_mismatch_hint(t, &o->gpu, b, 0);
			/* Stopped by a signal: the command is not run, cold or not. */
			if (!o->allow_cold || rc == MC_ERR_CANCELLED) {
				mc_bundle_free(b);
				return status;
			}
			if (rj->bundles != NULL)
				cJSON_AddItemToArray(rj->bundles, bundle_json(o, b, o->bundles[i], NULL,
									      rc, json_said()));
			mc_bundle_free(b);
			json_forget(); /* got past: not the failure the run reports */
			say(stderr, "%s: --allow-cold: running without %s", PROG, o->bundles[i]);
			continue;
		}
		if (rj->bundles != NULL) {
			cJSON_AddItemToArray(rj->bundles, bundle_json(o, b, o->bundles[i], &r, 0, NULL));
		} else if (!t->quiet) {
			say(stderr, "%s: warmed %s: %zu file%s installed, %zu replaced, %zu already there",
			    PROG, o->bundles[i], r.installed, r.installed == 1 ? "" : "s", r.replaced,
			    r.unchanged);
			gpu_say(t, &o->gpu, b, &r, stderr);
		}
		bases[(*nbases)++] = b;
	}
	return 0;
}

/* The signals passed on to the command when they are sent to this process. */
static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

/* Exports --cache-dir, --triton-dir and --vllm-dir (made absolute) to the command. */
static int
child_env(const struct tool *t)
{
	const char *vars[3] = {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT"};
	const char *dirs[3] = {t->cache_dir, t->triton_dir, t->vllm_dir};
	char cwd[PATH_MAX], abs[2 * PATH_MAX + 2];
	size_t i;

	for (i = 0; i < 3; i++) {
		if (dirs[i] == NULL)
			continue;
		if (dirs[i][0] == '/')
			snprintf(abs, sizeof abs, "%s", dirs[i]);
		else if (getcwd(cwd, sizeof cwd) != NULL)
			snprintf(abs, sizeof abs, "%s/%s", cwd, dirs[i]);
		else
			return errno;
		if (setenv(vars[i], abs, 1) != 0)
			return errno;
	}
	return 0;
}

/* Waits for the command, passing on each forwarded signal another process sent to this
 * one: one a terminal sent (si_code SI_KERNEL) went to the command's process group,
 * which is ours, already. Returns its wait status. */
static int
supervise(pid_t pid, const sigset_t *set)
{
	siginfo_t si;
	int status;

	for (;;) {
		if (sigwaitinfo(set, &si) < 0)
			continue; /* EINTR: a signal outside the set, e.g. SIGCONT */
		if (si.si_signo == SIGCHLD) {
			pid_t r = waitpid(pid, &status, WNOHANG);
			if (r == pid && (WIFEXITED(status) || WIFSIGNALED(status)))
				return status;
		} else if (si.si_code != SI_KERNEL) {
			kill(pid, si.si_signo);
		}
	}
}

/* Runs argv with the caller's signal mask; its wait status in *status. Exit status 127
 * (126: not executable) when it cannot be started, as a shell does. */
static int
run_child(char **argv, int *status)
{
	extern char **environ;
	posix_spawnattr_t attr;
	sigset_t set, old;
	pid_t pid;
	size_t i;
	int err;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(&set, forwarded[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &old);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	err = posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (err == 0)
		*status = supervise(pid, &set);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (err != 0) {
		say(stderr, "%s: cannot run %s: %s", PROG, argv[0], strerror(err));
		return err == ENOENT ? 127 : 126;
	}
	return 0;
}

/* The exit status that passes on the command's wait status: its own, or for a signal
 * that ended it, the same signal (128 + its number for those that dump core). */
static int
pass_status(int status)
{
	int sig;

	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	sig = WTERMSIG(status);
	if (sig != SIGQUIT && sig != SIGILL && sig != SIGABRT && sig != SIGFPE && sig != SIGSEGV &&
	    sig != SIGBUS && sig != SIGSYS && sig != SIGTRAP && sig != SIGXCPU && sig != SIGXFSZ)
		end_by_signal(sig);
	return 128 + sig;
}

/* What the save tells of each new or changed artifact (ud: struct news). */
struct news {
	int verbose, quiet;
	size_t n;
};

static void
on_new(void *ud, int what, const char *type, const char *key, uint64_t size_a, uint64_t size_b)
{
	struct news *nw = ud;

	if (!nw->quiet && (nw->verbose || nw->n < MAX_DIFF_LINES))
		say(stderr, "%c %-12s %s", what == MC_DIFF_ADDED ? '+' : '~', type, key);
	nw->n++;
}

/* The --json entry of a save to out: nothing written when there was nothing to save
 * or it failed. */
static cJSON *
save_json(const struct tool *t, const struct run_opts *o, const char *out, mc_writer *w,
	  int written)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddStringToObject(j, "output", out);
	cJSON_AddBoolToObject(j, "written", written);
	cJSON_AddNumberToObject(j, "artifact_count", (double)mc_writer_artifact_count(w));
	cJSON_AddNumberToObject(j, "bytes", (double)mc_writer_total_bytes(w));
	cJSON_AddNumberToObject(j, "signature_count", written ? (double)o->rec.signers.n : 0);
	cJSON_AddBoolToObject(j, "signed", written && o->rec.signers.n > 0);
	if (written)
		say_pushed(t, out, j, stdout);
	return j;
}

/* After the command: records the caches, keeps what the loaded bundles do not hold,
 * and writes it to --save-to unless that is nothing. */
static int
save_new(struct tool *t, const struct run_opts *o, mc_writer *w, mc_bundle **bases,
	 size_t nbases, struct run_json *rj)
{
	struct location loc[NLOCATIONS];
	struct scan_tally tally;
	struct news nw = {t->verbose, t->quiet || t->json, 0};
	int quiet = t->quiet || t->json, rc, written = 0;
	char hb[32];

	memset(&tally, 0, sizeof tally);
	tally.verbose = t->verbose;
	rc = locate(t, loc);
	if (rc == MC_OK)
		rc = record_locations(w, loc, &tally);
	if (rc == MC_OK)
		rc = mc_writer_drop_known(w, bases, nbases, on_new, &nw);
	if (rc != MC_OK)
		goto done;
	if (nw.n > MAX_DIFF_LINES && !nw.verbose && !quiet)
		say(stderr, "  ... and %zu more (-v lists them)", nw.n - MAX_DIFF_LINES);
	if (mc_writer_artifact_count(w) == 0) {
		if (!quiet)
			say(stderr, "%s: nothing new in the caches; %s not written", PROG, o->save_to);
		goto done;
	}
	if ((rc = mc_writer_save(w, o->save_to)) != MC_OK)
		goto done;
	written = 1;
	human_bytes(mc_writer_total_bytes(w), hb, sizeof hb);
	if (!quiet)
		say(stderr, "%s: saved %zu new artifact%s (%s) into %s", PROG,
		    mc_writer_artifact_count(w), mc_writer_artifact_count(w) == 1 ? "" : "s", hb,
		    o->save_to);
	if (!quiet)
		say_pushed(t, o->save_to, NULL, stderr);
done:
	if (t->json)
		rj->save = save_json(t, o, o->save_to, w, written);
	return rc == MC_OK ? 0 : fail(t->ctx, rc);
}


/* After the command: records what it used of the caches (what it read of the files
 * there, what it wrote) and writes it to --save-used unless that is nothing, or the
 * command failed (wait status status): a job that did not finish used part of what it
 * needs. */
static int
save_used(struct tool *t, const struct run_opts *o, mc_writer *w, int status,
	  struct run_json *rj)
{
	int quiet = t->quiet || t->json, rc = 0, written = 0;
	size_t left = 0, unseen = 0;
	char hb[32];

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (!quiet)
			say(stderr, "%s: %s not written: the job did not succeed, and what it used "
			    "is not what the whole job uses", PROG, o->save_used);
		goto done;
	}
	if (rj->usage == NULL) {
		json_error(mc_status_code(MC_ERR_NOT_SEEN));
		say(stderr, "%s: %s not written: what the job used could not be told", PROG,
		    o->save_used);
		rc = EXIT_USAGE;
		goto done;
	}
	if ((rc = mc_writer_set_label(w, USED_LABEL, USED_LABEL_VALUE)) == MC_OK)
		rc = mc_usage_record(rj->usage, w, o->keep_unseen ? MC_USED_KEEP_UNSEEN : 0, &left,
				     &unseen);
	if (rc != MC_OK) {
		if (rc != MC_ERR_NOT_SEEN) {
			rc = fail(t->ctx, rc);
			goto done;
		}
		json_error(mc_status_code(rc));
		say(stderr, "%s: %s not written: %s; --save-used-keep-unseen keeps them", PROG,
		    o->save_used, mc_ctx_error(t->ctx));
		rc = EXIT_USAGE;
		goto done;
	}
	if (mc_writer_artifact_count(w) == 0) {
		if (!quiet)
			say(stderr, "%s: the job used nothing of the caches; %s not written", PROG,
			    o->save_used);
		goto done;
	}
	if ((rc = mc_writer_save(w, o->save_used)) != MC_OK) {
		rc = fail(t->ctx, rc);
		goto done;
	}
	written = 1;
	human_bytes(mc_writer_total_bytes(w), hb, sizeof hb);
	if (!quiet) {
		say(stderr, "%s: saved %zu used artifact%s (%s) into %s; %zu in the caches left out",
		    PROG, mc_writer_artifact_count(w), mc_writer_artifact_count(w) == 1 ? "" : "s",
		    hb, o->save_used, left);
		if (unseen > 0)
			say(stderr, "%s: warning: %s keeps %zu file%s whose reads could not be seen",
			    PROG, o->save_used, unseen, unseen == 1 ? "" : "s");
		say_pushed(t, o->save_used, NULL, stderr);
	}
done:
	if (t->json) {
		rj->save_used = save_json(t, o, o->save_used, w, written);
		cJSON_AddNumberToObject(rj->save_used, "left_out", (double)left);
		cJSON_AddNumberToObject(rj->save_used, "kept_unseen", (double)unseen);
	}
	return rc;
}

/* Just before the command starts: the marks on the loaded files. A failure is said and
 * the run goes on without telling what the job used. */
static void
used_start(struct tool *t, const struct run_opts *o, struct run_json *rj)
{
	int rc = o->save_used != NULL ? mc_usage_watch_all(rj->usage) : MC_OK;

	if (rc == MC_OK && (rc = mc_usage_start(rj->usage)) == MC_OK)
		return;
	if (!t->quiet)
		say(stderr, "%s: warning: what the job uses cannot be told: %s", PROG,
		    mc_ctx_error(t->ctx));
	mc_usage_free(rj->usage);
	rj->usage = NULL;
}

/* printf into buf (len bytes) at *at, which never passes len - 1. */
static void __attribute__((format(printf, 4, 5)))
append(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

/* "megacache: the job read R of N loaded artifacts (TYPE r of n, ...); K new", and the
 * files not seen by reason; nothing when nothing was loaded or new. */
static void
say_used(const mc_usage *u)
{
	size_t sum[4] = {0, 0, 0, 0}, i, k, at = 0, types = 0;
	const char *type;
	char line[4096];

	for (i = 0; mc_usage_type(u, i) != NULL; i++)
		for (k = 0; k < 4; k++)
			sum[k] += mc_usage_count(u, i, (int)k);
	if (sum[MC_USED_INSTALLED] == 0 && sum[MC_USED_NEW] == 0)
		return;
	append(line, sizeof line, &at, "the job read %zu of %zu loaded artifact%s", sum[MC_USED_READ],
	       sum[MC_USED_INSTALLED], sum[MC_USED_INSTALLED] == 1 ? "" : "s");
	for (i = 0; (type = mc_usage_type(u, i)) != NULL; i++)
		if (mc_usage_count(u, i, MC_USED_INSTALLED) > 0)
			append(line, sizeof line, &at, "%s%s %zu of %zu", types++ ? ", " : " (", type,
			       mc_usage_count(u, i, MC_USED_READ),
			       mc_usage_count(u, i, MC_USED_INSTALLED));
	append(line, sizeof line, &at, "%s; %zu new", types ? ")" : "", sum[MC_USED_NEW]);
	if (sum[MC_USED_NOT_SEEN] > 0) {
		append(line, sizeof line, &at, "; %zu not seen (", sum[MC_USED_NOT_SEEN]);
		for (k = 0, types = 0; k < MC_UNSEEN_KINDS; k++)
			if (mc_usage_not_seen(u, (int)k) > 0)
				append(line, sizeof line, &at, "%s%zu %s", types++ ? ", " : "",
				       mc_usage_not_seen(u, (int)k), mc_unseen_text((int)k));
		append(line, sizeof line, &at, ")");
	}
	say(stderr, "%s: %s", PROG, line);
}

/* Types torch reads only to compile: the autotuning results, the generated code and
 * the kernels behind an FX graph that its entry does not carry. A job that read its FX
 * graph entries from the cache has no need of them. */
static int
read_on_miss(const char *type)
{
	return strcmp(type, "autotune") == 0 || strcmp(type, "gemm_timing") == 0 ||
	       strcmp(type, "kernel_code") == 0 || strcmp(type, "triton") == 0;
}

/* Types no job reads: vLLM's notes (cache_key_factors.json, computation_graph.py,
 * transformed_code.py), which vLLM writes for people. */
static int
never_read(const char *type)
{
	return strcmp(type, "vllm_meta") == 0;
}

/* Types a job that hit dynamo's precompile cache does not read: the compiled graphs'
 * entries, which dynamo's entries carry. */
static int
read_without_precompile(const char *type)
{
	return strcmp(type, "inductor") == 0 || strcmp(type, "aot_autograd") == 0;
}

/* The types of which the job read no loaded file it could be seen reading: a torch,
 * Triton or config that differs from the one the bundle was made with. One of the
 * types read only to compile counts once the job read no FX graph entry (nor
 * precompile entry) either; the FX and AOTAutograd entries count once it read no
 * precompile entry. */
static void
warn_unread(const mc_usage *u, const char *bundle)
{
	size_t i, at = 0, n = 0, fx_read = 0, pre_read = 0;
	const char *type;
	char list[2048];

	for (i = 0; (type = mc_usage_type(u, i)) != NULL; i++)
		if (strcmp(type, "inductor") == 0)
			fx_read = mc_usage_count(u, i, MC_USED_READ);
		else if (strcmp(type, "precompile") == 0)
			pre_read = mc_usage_count(u, i, MC_USED_READ);
	for (i = 0; (type = mc_usage_type(u, i)) != NULL; i++) {
		size_t seen = mc_usage_count(u, i, MC_USED_INSTALLED) -
			      mc_usage_count(u, i, MC_USED_NOT_SEEN);
		if (seen > 0 && mc_usage_count(u, i, MC_USED_READ) == 0 && !never_read(type) &&
		    !((fx_read > 0 || pre_read > 0) && read_on_miss(type)) &&
		    !(pre_read > 0 && read_without_precompile(type)))
			append(list, sizeof list, &at, "%s%s (%zu)", n++ ? ", " : "", type, seen);
	}
	if (n > 0)
		say(stderr, "%s: warning: the job read none of the loaded %s artifacts; the likely "
		    "cause is a torch, Triton or config mismatch: compare the bundle's labels "
		    "(megacache list %s) with this host's", PROG, list, bundle);
}

/* The --json members "used" (per type) and "used_not_seen" (per reason). */
static void
used_json(const mc_usage *u, struct run_json *rj)
{
	static const char *const counts[4] = {"installed", "read", "new", "not_seen"};
	const char *type;
	size_t i;
	int k;

	rj->used = cJSON_CreateObject();
	for (i = 0; (type = mc_usage_type(u, i)) != NULL; i++) {
		cJSON *o = cJSON_CreateObject();
		for (k = 0; k < 4; k++)
			cJSON_AddNumberToObject(o, counts[k], (double)mc_usage_count(u, i, k));
		cJSON_AddItemToObject(rj->used, type, o);
	}
	rj->not_seen = cJSON_CreateObject();
	for (k = 0; k < MC_UNSEEN_KINDS; k++)
		if (mc_usage_not_seen(u, k) > 0)
			cJSON_AddNumberToObject(rj->not_seen, mc_unseen_name(k),
						(double)mc_usage_not_seen(u, k));
}

/* After the command: what it read of the loaded files and wrote anew, in a line and a
 * warning (unless -q or --json), or in the JSON. */
static void
used_finish(struct tool *t, const struct run_opts *o, struct run_json *rj)
{
	/* the bundle whose labels to look at, when there is one to name */
	const char *bundle = o->nbundles == 1 && strcmp(o->bundles[0], "-") != 0 ? o->bundles[0]
										 : "BUNDLE";
	int rc;

	if (rj->usage == NULL)
		return;
	if ((rc = mc_usage_finish(rj->usage)) != MC_OK) {
		if (!t->quiet)
			say(stderr, "%s: warning: what the job used cannot be told: %s", PROG,
			    mc_ctx_error(t->ctx));
		return;
	}
	if (t->json) {
		used_json(rj->usage, rj);
	} else if (!t->quiet) {
		say_used(rj->usage);
		warn_unread(rj->usage, bundle);
	}
}

/* Before the command: the writers of --save-to and --save-used (w[0], w[1]) set up
 * (the keys' passwords asked for now, not after the command), the bundles loaded, and
 * the command's environment.
 * Returns 0, or the exit status of a failure it has said. */
static int
run_prepare(struct tool *t, struct run_opts *o, mc_writer **w, mc_bundle **bases,
	    size_t *nbases, mc_pubkey **keys, struct run_json *rj)
{
	const char *outs[2] = {o->save_to, o->save_used};
	size_t i;
	int rc;

	for (i = 0; i < 2; i++)
		if (outs[i] != NULL) {
			if ((rc = mc_writer_new(t->ctx, &w[i])) == MC_OK)
				rc = record_setup(t, w[i], &o->rec);
			if (rc != MC_OK)
				return fail(t->ctx, rc);
		}
	if ((rc = load_bundles(t, o, bases, nbases, keys, rj)) != 0)
		return rc;
	gpu_detect_wait(&o->gpu);
	if ((rc = child_env(t)) != 0) {
		say(stderr, "%s: cannot set the command's environment: %s", PROG, strerror(rc));
		return EXIT_USAGE;
	}
	return 0;
}

/* The --json object of a run that got to its command: cmd started unless spawn_rc
 * (126/127), with wait status status; its save (when asked for) ended with saved. Its
 * "exit" is the status this process ends with, as a shell shows it. */
static void
print_run(struct run_json *rj, char **cmd, int spawn_rc, int status, int saved, int exit)
{
	cJSON *j = json_object(), *c = cJSON_CreateObject(), *args = cJSON_CreateArray();
	int exited = spawn_rc == 0 && WIFEXITED(status), failed = 1;
	char line[1024];
	size_t i;

	if (spawn_rc != 0) {
		json_error("command_not_started");
		snprintf(line, sizeof line, "%s", json_said());
	} else if (!exited) {
		json_error("command_failed");
		snprintf(line, sizeof line, "%s: %s was killed by signal %d (%s)", PROG, cmd[0],
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	} else if (WEXITSTATUS(status) != 0) {
		json_error("command_failed");
		snprintf(line, sizeof line, "%s: %s exited with status %d", PROG, cmd[0],
			 WEXITSTATUS(status));
	} else if (saved != 0) {
		snprintf(line, sizeof line, "%s", json_said());
	} else {
		failed = 0;
	}
	json_status(j, exit);
	if (failed) {
		cJSON_AddStringToObject(j, "error", json_code());
		cJSON_AddStringToObject(j, "message", line);
	} else {
		cJSON_AddNullToObject(j, "error");
		cJSON_AddNullToObject(j, "message");
	}
	cJSON_AddItemToObject(j, "bundles", rj->bundles);
	for (i = 0; cmd[i] != NULL; i++)
		cJSON_AddItemToArray(args, cJSON_CreateString(cmd[i]));
	cJSON_AddItemToObject(c, "argv", args);
	cJSON_AddBoolToObject(c, "started", spawn_rc == 0);
	if (exited)
		cJSON_AddNumberToObject(c, "exit_status", WEXITSTATUS(status));
	else
		cJSON_AddNullToObject(c, "exit_status");
	if (spawn_rc == 0 && !exited)
		cJSON_AddNumberToObject(c, "signal", WTERMSIG(status));
	else
		cJSON_AddNullToObject(c, "signal");
	cJSON_AddItemToObject(j, "child", c);
	cJSON_AddItemToObject(j, "save", rj->save != NULL ? rj->save : cJSON_CreateNull());
	cJSON_AddItemToObject(j, "save_used",
			      rj->save_used != NULL ? rj->save_used : cJSON_CreateNull());
	cJSON_AddItemToObject(j, "used", rj->used != NULL ? rj->used : cJSON_CreateNull());
	cJSON_AddItemToObject(j, "used_not_seen",
			      rj->not_seen != NULL ? rj->not_seen : cJSON_CreateNull());
	rj->bundles = rj->save = rj->save_used = rj->used = rj->not_seen = NULL;
	print_json(j);
}

int
cmd_run(struct tool *t, int argc, char **argv)
{
	struct run_opts o = {.rec.level = 3};
	struct run_json rj = {NULL, NULL, NULL, NULL, NULL, NULL};
	mc_pubkey *keys[MAX_BUNDLES * MAX_PUBKEYS] = {NULL};
	mc_bundle *bases[MAX_BUNDLES];
	mc_writer *w[2] = {NULL, NULL}; /* of --save-to, of --save-used */
	size_t nbases = 0, i;
	int rc, status = 0, saved = 0, used, spawn_rc;

	json_target(t, &o, argc, argv);
	tool_parse(t, argc, argv, &run_spec, &o);
	o.rec.aot_remote = aot_remote_env();
	run_check(t, &o, argc);
	check_out_folder(o.save_to);
	check_out_folder(o.save_used);
	if ((rc = tool_start(t)) != 0)
		return rc;
	if ((rc = mc_usage_new(t->ctx, &rj.usage)) != MC_OK)
		return fail(t->ctx, rc);
	/* Waited for before the job's environment is set; every way out frees o.gpu. */
	if (o.nbundles > 0)
		gpu_detect_start(&o.gpu);
	if (t->json)
		rj.bundles = cJSON_CreateArray();
	for (i = 0; i < 2; i++) {
		const char *out = i == 0 ? o.save_to : o.save_used;
		if (out != NULL && o.rec.signers.n == 0 && !t->quiet)
			say(stderr, "%s: warning: %s will be unsigned: loads will need "
			    "--insecure-no-verify (sign it with -s SECFILE)", PROG, out);
	}
	/* CMD is looked for before anything is loaded; the signing keys' passwords are asked
	 * for now, not after the command. */
	if ((spawn_rc = command_check(argv[optind])) != 0) {
		rc = spawn_rc;
		if (t->json)
			print_run(&rj, argv + optind, spawn_rc, 0, 0, rc);
	} else {
		rc = run_prepare(t, &o, w, bases, &nbases, keys, &rj);
	}
	if (rc == 0 && interrupted()) /* a signal between the load and the command */
		rc = 128 + interrupted();
	if (rc == 0) {
		used_start(t, &o, &rj);
		if ((spawn_rc = run_child(argv + optind, &status)) == 0)
			used_finish(t, &o, &rj);
		if (spawn_rc == 0 && o.save_to != NULL)
			saved = save_new(t, &o, w[0], bases, nbases, &rj);
		if (spawn_rc == 0 && o.save_used != NULL &&
		    (used = save_used(t, &o, w[1], status, &rj)) != 0 && saved == 0)
			saved = used;
		rc = spawn_rc != 0 ? spawn_rc
		     : !WIFEXITED(status) ? 128 + WTERMSIG(status)
		     : WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : saved;
		if (t->json)
			print_run(&rj, argv + optind, spawn_rc, status, saved, rc);
		if (spawn_rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
			rc = pass_status(status);
	}
	for (i = 0; i < nbases; i++)
		mc_bundle_free(bases[i]);
	for (i = 0; i < MAX_BUNDLES * MAX_PUBKEYS; i++)
		mc_pubkey_free(keys[i]);
	cJSON_Delete(rj.bundles);
	cJSON_Delete(rj.save);
	cJSON_Delete(rj.save_used);
	cJSON_Delete(rj.used);
	cJSON_Delete(rj.not_seen);
	mc_usage_free(rj.usage);
	record_free(&o.rec);
	gpu_free(&o.gpu);
	mc_writer_free(w[0]);
	mc_writer_free(w[1]);
	return rc;
}
