/* tool.h - what the files of the command-line tool share: the option state of a run,
 * the set-up flags of the command table, and the helpers for options, set-up and output.
 *
 * Each file calls only files below it, never one above or beside it at its own level,
 * so that no two call each other:
 *   megacache.c                 main, the command table, the frame of the overview
 *   cmd_<name>.c                a command each, with its help (no command calls another)
 *   record.c, gpu.c, fleet.c    what several commands share: a bundle written, the host's
 *                               GPU targets, the Redis caches of push, pull and audit
 *   report.c                    what is told of a bundle read and of its artifacts
 *   setup.c                     the context, keys, passwords and signers, from the options
 *   options.c                   the parsing of the options, and a command's help printed
 *   output.c                    every line and JSON object printed, usage errors, the exit
 *                               status of a failure
 *   interrupt.c                 the signals that stop the work
 * A lower file that needs something from above takes it as a value or a callback (the
 * parser prints the help the command table gives it). The declarations below are
 * grouped by the file that defines them. */
#ifndef MC_TOOL_H
#define MC_TOOL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "megacache.h"

/* The name every message starts with. */
#define PROG "megacache"

#define EXIT_VERIFY 1
#define EXIT_USAGE 2
#define EXIT_VERSION 3 /* the bundle needs a newer megacache */

/* The set-up a command needs beyond what all share (the common options, and a context
 * with progress, threads and caps: tool_start()). */
#define TOOL_TRUST 0x1u /* takes the trust options: -p, --threshold, --min-version, ... */
#define TOOL_TIERS 0x2u /* takes --cache-dir, --triton-dir and --vllm-dir, set on its context */
#define TOOL_JSON 0x4u  /* takes --json */

/* Option codes of the long options without a short letter, for all commands. */
enum {
	OPT_FROM_TORCH = 256, OPT_FROM_DIR, OPT_LABEL, OPT_BUNDLE_VERSION, OPT_EXPIRES,
	OPT_LEVEL, OPT_NO_COMPRESS, OPT_JSON, OPT_THRESHOLD, OPT_MIN_VERSION, OPT_CACHE_DIR,
	OPT_TYPES, OPT_DRY_RUN, OPT_INSECURE, OPT_TORCH, OPT_PASSWORD_FILE, OPT_NOW,
	OPT_FROM_TRITON, OPT_KEEP_UNKNOWN, OPT_TRITON_DIR, OPT_TORCH_FORMAT, OPT_LABEL_FROM_ENV,
	OPT_LABELS_JSON, OPT_REQUIRE, OPT_EXPLAIN, OPT_THREADS, OPT_SYNC, OPT_ALLOW_COLD, OPT_OWNER,
	OPT_UNSIGNED, OPT_PROGRESS, OPT_JSON_FILE, OPT_REDIS, OPT_REDIS_PASSWORD_FILE, OPT_TRITON,
	OPT_TRITON_KEY_FORMAT, OPT_TTL, OPT_MATCH, OPT_FORMAT_VERSION, OPT_GPU_TARGET,
	OPT_SKIP_OTHER_GPUS, OPT_VLLM_DIR, OPT_FROM_VLLM, OPT_REGISTRY_CA, OPT_PLAIN_HTTP,
	OPT_REGISTRY_USER, OPT_REGISTRY_PASSWORD_FILE, OPT_TIMEOUT, OPT_SAVE_USED,
	OPT_SAVE_USED_KEEP_UNSEEN,
	OPT_CAP /* + 0..4 */
};

/* The caps a bundle may declare, one --max-* option each (options.c). */
#define TOOL_NCAPS 5
struct tool_cap {
	int which; /* MC_LIMIT_* */
	const char *name;
};
extern const struct tool_cap tool_caps[TOOL_NCAPS];

#define MAX_PUBKEYS 32
#define MAX_REQUIRE 64
#define MAX_SIGNERS 16

/* The trust options of verify, load, export and merge. */
struct trust {
	const char *pubs[MAX_PUBKEYS];
	size_t npubs;
	char *require[MAX_REQUIRE]; /* KEY=VALUE */
	size_t nrequire;
	unsigned threshold;
	uint64_t min_version;
	int insecure;
	int64_t now;
	int have_now;
};

/* --progress: tty (on a terminal: a line rewritten in place), plain (a line per step
 * of PROGRESS_STEP percent, for logs), none. */
enum { PROGRESS_TTY = 1, PROGRESS_PLAIN, PROGRESS_NONE };
#define PROGRESS_STEP 5

struct progress {
	int mode; /* PROGRESS_*, as given; 0: tty */
	int on;   /* 0: none; else the mode in effect */
	int last;
	char phase[32];
	/* The word for the library's phase "pack", the writing of a bundle: the command's
	 * (save, and run's --save-to: "save"); NULL: "pack". */
	const char *writing;
};

/* A command's help, the text as printed: the overview's block of it (its synopsis lines,
 * the first "  NAME ...", and its summary, each line indented 8), and its own help. */
struct cmd_help {
	const char *synopsis, *summary;
	const char *usage;   /* its own: the usage lines ("usage: megacache NAME ...") */
	const char *about;   /* what it does */
	const char *options; /* a line or more per option */
	const char *example; /* a command line, after "example: " */
};

/* One run of the tool: the command, the options every command shares, and its context. */
struct tool {
	const char *name; /* the command */
	const struct cmd_help *help; /* its help, for -h */
	unsigned flags;   /* its TOOL_* */
	int quiet;
	int verbose; /* -v: more detail, where a command has any */
	unsigned threads; /* --threads (0: one per CPU) */
	const char *password_file; /* the first --password-file (keygen, sign) */
	/* Every --password-file, in order: read_password() takes the next for each key
	 * that asks (the first file for the first encrypted -s key, ...), then the terminal. */
	const char *password_files[MAX_SIGNERS];
	size_t npassword_files, password_next;
	uint64_t caps[TOOL_NCAPS]; /* given with --max-* where caps_set */
	int caps_set[TOOL_NCAPS];
	const char *cache_dir, *triton_dir, *vllm_dir; /* TOOL_TIERS */
	int json;                           /* TOOL_JSON */
	struct trust trust;                 /* TOOL_TRUST */
	struct progress progress;
	/* the registry options: --registry-ca, --registry-user, --registry-password-file,
	 * --timeout (as given), --plain-http */
	const char *registry_ca, *registry_user, *registry_password_file, *timeout;
	int plain_http;
	mc_ctx *ctx; /* from tool_start(); run_command() frees it */
};

/* A command's own options: short letters and long options (the shared ones and those of
 * its flags are added), and the function that takes one into the command's option struct.
 * take returns 1, or 0 for an option that is not the command's. */
struct tool_optspec {
	const char *shortopts;
	const struct option *longopts;
	int (*take)(struct tool *t, void *opts, int c, char *arg);
};

/* A command of the table: argv[0] is "megacache NAME". Returns the exit status. */
typedef int tool_cmd_fn(struct tool *t, int argc, char **argv);

/* cmd_<name>.c: the commands, and the help of each (NAME_help): its block of the
 * overview (megacache --help: its synopsis, then its summary), and its own (megacache
 * NAME --help, print_help()): usage, what it does, its options, an example. */
int cmd_keygen(struct tool *t, int argc, char **argv);
int cmd_pack(struct tool *t, int argc, char **argv);
int cmd_sign(struct tool *t, int argc, char **argv);
int cmd_verify(struct tool *t, int argc, char **argv);
int cmd_list(struct tool *t, int argc, char **argv);
int cmd_load(struct tool *t, int argc, char **argv);
int cmd_export(struct tool *t, int argc, char **argv);
int cmd_merge(struct tool *t, int argc, char **argv);
int cmd_diff(struct tool *t, int argc, char **argv);
int cmd_save(struct tool *t, int argc, char **argv);
int cmd_run(struct tool *t, int argc, char **argv);
int cmd_push(struct tool *t, int argc, char **argv);
int cmd_pull(struct tool *t, int argc, char **argv);
int cmd_audit(struct tool *t, int argc, char **argv);
int cmd_copy(struct tool *t, int argc, char **argv);
extern const struct cmd_help keygen_help, pack_help, sign_help, verify_help, list_help,
	load_help, export_help, merge_help, diff_help, save_help, run_help, push_help, pull_help,
	audit_help, copy_help;

/* output.c */
extern const char *tool_command;
void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void usage_say(const char *msg) __attribute__((noreturn));
void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void try_help(void) __attribute__((noreturn));
const char *shown_path(const char *path);
void warn_unsigned(const struct tool *t);
void check_out_folder(const char *path);
void say_pushed(const struct tool *t, const char *out, cJSON *j, FILE *f);
int take_stdout(const struct tool *t, const char **path, const char *what);
int put_stdout(int fd, const void *buf, size_t n);
int tmpdir_file(char *path, size_t len, const char *stem);
int put_stdout_file(const char *path, int fd);
/* After the command, with its status rc: ends the process by the signal caught, if any
 * and rc tells of a failure; else says the work was done first and returns rc. */
int interrupt_end(int rc);
int exit_code(int rc);
int fail(mc_ctx *ctx, int rc);
/* Why the password a key asked for could not be had, when that is so (set by
 * read_password(), added by fail() to the error it tells); "" else. */
extern char password_why[256];
void human_bytes(uint64_t n, char *buf, size_t len);
void join_words(char *buf, size_t len, const char *const *v, size_t n, const char *last,
		const char *none);
void print_json(cJSON *j);
#define JSON_SCHEMA 3 /* the version of doc/json-schema.json */
void json_begin(const char *command);
void json_error(const char *code);
cJSON *json_object(void);
void json_status(cJSON *j, int status);
cJSON *json_failure(int status);
int json_finish(int status);
void json_exit(int status) __attribute__((noreturn));
void json_to(FILE *f);
const char *json_said(void);
const char *json_code(void);
void json_forget(void);
void json_fail_add(const char *name, cJSON *item);

/* options.c */
int parse_u64(const char *s, uint64_t *v);
int parse_time(const char *s, int64_t now, int64_t *v);
void refuse_dash(const char *opt, const char *arg, const char *why);
/* -p PUBFILE into tr (at most MAX_PUBKEYS): of the trust options, and of list. */
void pubkey_opt(struct trust *tr, const char *arg);
void iso_time(int64_t t, char *buf, size_t len);
void print_help(const struct cmd_help *h);
int tool_prescan(const struct tool *t, int argc, char **argv, const struct tool_optspec *spec,
		 int c, const char **arg);
void tool_parse(struct tool *t, int argc, char **argv, const struct tool_optspec *spec,
		void *opts);

/* interrupt.c */
/* Catches SIGHUP, SIGINT and SIGTERM (main, before anything else): each cancels the
 * context watched, which then fails with MC_ERR_CANCELLED; one that was ignored stays
 * ignored. */
void interrupt_catch(void);
/* The context a signal cancels (NULL: none, before it is freed). */
void interrupt_watch(mc_ctx *ctx);
/* The signal caught, or 0. */
int interrupted(void);
/* Its name ("SIGINT"). */
const char *interrupt_name(void);
/* pthread_create() for the tool's own threads, which leave those signals to the main one
 * (where they interrupt a read). */
int start_thread(pthread_t *thread, void *(*fn)(void *), void *arg);
/* Ends the process by sig's default action, what was printed flushed first (returns
 * only for a signal whose default action does not end it). */
void end_by_signal(int sig);

/* setup.c */
int tool_start(struct tool *t);
int read_password(void *ud, const char *prompt, char *buf, size_t len);
int first_line(const char *path, char *buf, size_t len);
int open_bundle(struct tool *t, const char *path, mc_bundle **b);
int open_trusted(struct tool *t, const char *path, mc_bundle **b, mc_pubkey **keys);
/* The two steps of open_trusted(), for a command that opens several bundles under the
 * keys loaded once: the -p keys into keys (for free_keys(), whatever it returns), and a
 * bundle opened under them. */
int load_keys(mc_ctx *ctx, const struct trust *t, mc_pubkey **keys);
int open_under(struct tool *t, const char *path, mc_bundle **b, mc_pubkey **keys);
void free_keys(mc_pubkey **keys, size_t n);
int select_types(mc_ctx *ctx, mc_bundle *b, const char *types);

/* The secret keys (-s) that pack and merge sign with. */
struct signers {
	const char *secs[MAX_SIGNERS];
	size_t n;
	mc_seckey *keys[MAX_SIGNERS];
};

void signer_opt(struct signers *s, const char *path);
int add_signers(struct tool *t, mc_writer *w, struct signers *s);
void free_signers(struct signers *s);
int set_created(mc_writer *w);
void label_opt(char **labels, size_t *n, size_t max, char *arg);
int set_labels(mc_writer *w, char **labels, size_t n);

/* record.c: what pack, save and run share to write a bundle. */
#define MAX_LABELS 256
struct record_opts {
	const char *labels_json;
	struct signers signers;
	char *labels[MAX_LABELS]; /* KEY=VALUE */
	char owned[MAX_LABELS];   /* labels[i] made for --label-from-env, to free */
	size_t nlabels;
	uint64_t bver, expires, level; /* level: 3 unless given */
	uint64_t fversion;             /* the bundle format version; 0: the default */
	int keep_unknown;
	const char *aot_remote; /* the label AOT_REMOTE_LABEL's value, or NULL: none */
};

/* torch 2.11 keys AOTAutograd entries by TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE as it reads
 * it (its functorch config's enable_remote_autograd_cache: None, True or False), so save
 * and run record it as this label ("1", "0" or "unset"; pull "unknown"), merge refuses inputs
 * that disagree on it, and push warns when the entries it writes were not made with the
 * remote caches' setting, "1". */
#define AOT_REMOTE_LABEL "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"
/* The label run --save-used sets on its bundle: what the job used, nothing else. */
#define USED_LABEL "megacache.contents"
#define USED_LABEL_VALUE "used"
/* Its value as torch reads it from this environment: "1", "0" or "unset". */
const char *aot_remote_env(void);
/* The value of label key of b, or NULL. */
const char *bundle_label(const mc_bundle *b, const char *key);

/* The long options record_opt() takes (with -s SECFILE). */
#define RECORD_LONG_OPTIONS                                                      \
	{"label", required_argument, NULL, OPT_LABEL},                           \
	{"label-from-env", required_argument, NULL, OPT_LABEL_FROM_ENV},         \
	{"labels-json", required_argument, NULL, OPT_LABELS_JSON},               \
	{"bundle-version", required_argument, NULL, OPT_BUNDLE_VERSION},         \
	{"expires", required_argument, NULL, OPT_EXPIRES},                       \
	{"level", required_argument, NULL, OPT_LEVEL},                           \
	{"no-compress", no_argument, NULL, OPT_NO_COMPRESS},                     \
	{"format-version", required_argument, NULL, OPT_FORMAT_VERSION},         \
	{"keep-unknown", no_argument, NULL, OPT_KEEP_UNKNOWN}

int record_opt(struct record_opts *o, int c, char *arg);
void record_free(struct record_opts *o);
int record_setup(struct tool *t, mc_writer *w, struct record_opts *o);

/* What the scans of cache folders skipped, and why (the first 16 reasons). */
struct scan_tally {
	int verbose;
	size_t skipped;
	struct {
		char why[96];
		size_t n;
	} reasons[16];
	size_t nreasons;
};

void on_scan(void *ud, int what, const char *rel, const char *text);
void say_skipped(FILE *f, const struct scan_tally *tally);

/* A folder torch or Triton reads: the root of a tier, as resolved here. */
#define NLOCATIONS 3
struct location {
	const char *tier, *what, *path;
	int found;        /* it exists, as a folder */
	size_t artifacts; /* recorded from it */
};

int locate(struct tool *t, struct location *loc);
int record_locations(mc_writer *w, struct location *loc, struct scan_tally *tally);
cJSON *locations_json(const struct location *loc);
void say_locations(FILE *f, const struct location *loc);
int dir_has_entries(const char *path);

struct load_report;

/* gpu.c: --gpu-target and --skip-other-gpus of load, run and list --explain: the host's
 * GPU targets, given or detected, checked against a bundle's kernels. */
#define MAX_GPU_TARGETS 16
struct gpu_opts {
	const char *given[MAX_GPU_TARGETS]; /* --gpu-target */
	size_t ngiven;
	int skip;                           /* --skip-other-gpus */
	int resolved;                       /* gpu_host() ran: host set */
	char **detected;                    /* mc_gpu_detect() */
	size_t ndetected;
	/* gpu_detect_start(): the thread that detects, its own context and result */
	pthread_t thread;
	int started, joined;
	mc_ctx *dctx;
	int drc;
	/* gpu_apply_later(): the tool its failure is told through, and the exit status
	 * told (0: none) */
	struct tool *tool;
	int status;
};
#define GPU_LONG_OPTIONS                                                         \
	{"gpu-target", required_argument, NULL, OPT_GPU_TARGET},                 \
	{"skip-other-gpus", no_argument, NULL, OPT_SKIP_OTHER_GPUS}

/* Takes --gpu-target or --skip-other-gpus: 1, or 0 for another option. */
int gpu_opt(struct gpu_opts *g, int c, const char *arg);
/* Starts detecting the host's targets on a thread of its own when no --gpu-target
 * names them: NVML takes about a tenth of a second to start on a GPU host, which then
 * passes while the bundle is opened and its signatures checked, and (gpu_apply_later())
 * while a load plans. */
void gpu_detect_start(struct gpu_opts *g);
/* Waits for that thread to end (before the environment is changed or a child runs). */
void gpu_detect_wait(struct gpu_opts *g);
/* The host's targets (given, else detected once) set on b. Returns 0 or the exit status
 * of a failure (told). */
int gpu_apply(struct tool *t, struct gpu_opts *g, mc_bundle *b);
/* The same, or, while the detection still runs, set on b to be waited for when
 * mc_bundle_load() asks for the targets (after its plan), so that NVML's start
 * overlaps the load's. A load that then fails with gpu_told(g) nonzero failed in the
 * detection, which was told: that is its exit status. */
int gpu_apply_later(struct tool *t, struct gpu_opts *g, mc_bundle *b);
int gpu_told(const struct gpu_opts *g);
/* The load flags the options ask for. */
unsigned gpu_flags(const struct gpu_opts *g);
/* After a load (dry or not) of b, r its report: a line on f on what the check of its
 * kernels found (a warning on standard error when none was made), when it has any;
 * nothing when quiet. */
void gpu_say(const struct tool *t, const struct gpu_opts *g, const mc_bundle *b,
	     const struct load_report *r, FILE *f);
/* The same as members of j: "gpu_targets" (the bundle's, or null when they are not known),
 * "host_gpu_targets", "gpu_targets_checked", "skipped" (files), "skipped_kernels". */
void gpu_json(const struct gpu_opts *g, const mc_bundle *b, const struct load_report *r,
	      cJSON *j);
/* The bundle's targets: an array, or null when they are not known (an older bundle
 * not read through). */
cJSON *gpu_targets_json(const mc_bundle *b);
/* The bundle's targets as a line's words into buf: "cuda:90, hip:gfx942", "none", or
 * "not recorded" (an older bundle not read through). */
void gpu_targets_text(const mc_bundle *b, char *buf, size_t len);
/* After a load failed with MC_ERR_GPU_MISMATCH: the ways on (standard error; with
 * --json, the targets in the failure object). */
void gpu_mismatch_hint(const struct tool *t, const struct gpu_opts *g, const mc_bundle *b,
		       int dry);
void gpu_free(struct gpu_opts *g);

/* fleet.c: what push, pull and audit share: the options naming the Redis caches,
 * the connection, and what is told of the entries. */
struct redis_opts {
	const char *url, *password_file, *triton_format;
	int triton;
};

#define REDIS_LONG_OPTIONS                                                         \
	{"redis", required_argument, NULL, OPT_REDIS},                             \
	{"redis-password-file", required_argument, NULL, OPT_REDIS_PASSWORD_FILE}, \
	{"triton", no_argument, NULL, OPT_TRITON},                                 \
	{"triton-key-format", required_argument, NULL, OPT_TRITON_KEY_FORMAT}

/* Takes one of REDIS_LONG_OPTIONS: 1, or 0 for another option. */
int redis_opt(struct redis_opts *o, int c, char *arg);
/* The URL (--redis, else torch's variables) and the Triton key format, or a usage error
 * of cmd; a megacache built without Redis support ends here too. */
void redis_check(struct redis_opts *o, const char *cmd);
/* Connects to o's store: 0, or the exit status of a failure it has said. */
int redis_connect(struct tool *t, const struct redis_opts *o, mc_redis **r);

struct entry_tally {
	int verbose, quiet;
	int findings; /* audit: entries not vouched for are listed without -v */
	size_t n[MC_REMOTE_WOULD_CHANGE_TTL + 1];
	size_t aot;   /* push: AOTAutograd entries written or there already */
	uint64_t bytes;
	cJSON *entries; /* with --json: the entries told (push: those written or compared) */
};

/* The mc_remote_fn of push, pull and audit (ud: struct entry_tally). */
void on_entry(void *ud, int what, const char *type, const char *key, const char *rkey,
	      uint64_t size);
/* The counts of ta of the actions which[n] (MC_REMOTE_*) as members of j, by their names. */
void add_counts(cJSON *j, const struct entry_tally *ta, const int *which, size_t n);

/* report.c: the signatures of a bundle, each verified, not checked or broken
 * (mc_bundle_signature_state()), and its facts, for every report of a bundle read. */
/* [{"key_id", "state"}, ...] */
cJSON *signatures_json(mc_bundle *b);
/* {"KEY": "VALUE", ...}: b's labels. */
cJSON *labels_json(const mc_bundle *b);
/* The facts of b every report of a bundle read carries, as members of j:
 * "format_version", "bundle_version", "created", "expires" (when it has an expiry),
 * "labels", "signatures" and "artifact_count". */
void bundle_facts_json(cJSON *j, mc_bundle *b);
/* A line per signature: "<prefix>signature by key ID: <state>". checked: keys were
 * given, so one not checked is by a key not trusted. */
void say_signatures(FILE *f, mc_bundle *b, const char *prefix, int checked);
/* fail(), and after a failure of the signatures the state of each (text: on standard
 * error; --json: "signatures" in the failure object). b may be NULL. */
int fail_signed(struct tool *t, mc_bundle *b, int rc);

/* report.c: what load, list --explain and export tell of the artifacts they handle. */
struct type_sum {
	char type[40];
	size_t count;    /* written, or to write (replaced ones among them) */
	uint64_t bytes;
	size_t replaced; /* written over a file that differed, or to be */
	size_t unchanged;
	size_t skipped;  /* left out: kernels for a GPU target the host lacks */
};

struct load_report {
	int json;
	int dry;
	int explain; /* a line per artifact with its key and size */
	int quiet;
	mc_ctx *ctx;
	mc_bundle *b; /* the bundle loaded, for what --json tells of each artifact; or NULL */
	mc_usage *usage; /* run: told of each artifact loaded, to tell what the job used; or NULL */
	const char *root;
	cJSON *arts;
	struct type_sum sums[64];
	size_t nsums;
	size_t installed, replaced, unchanged, planned, planned_replace, skipped;
	uint64_t bytes;
	/* also told of each artifact (list --explain's vLLM folders), when set */
	void (*also)(void *ud, int what, const char *type, const char *key);
	void *also_ud;
};

void on_artifact(void *ud, int what, const char *type, const char *key, const char *dest,
		 uint64_t size);
const char *action_words(int what);

#endif
