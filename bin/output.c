/* output.c - how the tool prints: every line through one escaping function, JSON (the
 * object of each run with --json, success or failure: doc/json-schema.json), sizes for
 * people, usage errors, and the exit status for a library error. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

/* With --json: the command, whether its object went out, and the failure it reports
 * when none did (the error code, and the first error line said). */
static struct {
	const char *command; /* NULL: no --json */
	FILE *out;           /* where the object goes (json_to); NULL: standard output */
	int printed;
	const char *code;
	char message[1024];
	cJSON *extra; /* fields of the failure object beyond the common ones */
} js;

/* Writes s escaped (mc_escape with flags), then a line end. */
static void
put_escaped(FILE *f, const char *s, unsigned flags)
{
	size_t need = mc_escape(NULL, 0, s, flags) + 1;
	char *out = malloc(need);

	if (out != NULL) {
		mc_escape(out, need, s, flags);
		fprintf(f, "%s\n", out);
		free(out);
	}
}

/* Prints one line. Every line the tool prints goes through here, so that whatever a
 * bundle, a file name or an argument carries is escaped (mc_escape) on its way to a
 * terminal or a log: a key cannot move the cursor, set a title or forge a line. */
static void vsay(FILE *f, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void json_note(const char *line);

static void
vsay(FILE *f, const char *fmt, va_list ap)
{
	char small[1024], *line = small;
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(small, sizeof small, fmt, aq);
	va_end(aq);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof small) {
		if ((line = malloc((size_t)n + 1)) == NULL)
			return;
		vsnprintf(line, (size_t)n + 1, fmt, ap);
	}
	put_escaped(f, line, 0);
	if (f == stderr)
		json_note(line);
	if (line != small)
		free(line);
}

void
say(FILE *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(f, fmt, ap);
	va_end(ap);
}

/* An error line said on standard error, the message of a --json failure when it is the
 * first: one of the tool's own ("megacache...: "), not a warning or a conflict merged. */
static void
json_note(const char *line)
{
	if (js.command == NULL || js.message[0] != '\0' || strncmp(line, PROG, strlen(PROG)) != 0 ||
	    strstr(line, ": warning: ") != NULL || strstr(line, ": conflict: ") != NULL)
		return;
	snprintf(js.message, sizeof js.message, "%s", line);
}

/* --json is given to command: from here on the run ends with one object on standard
 * output, its report or its failure (json_finish). */
void
json_begin(const char *command)
{
	memset(&js, 0, sizeof js);
	js.command = command;
}

/* The object goes to f, not to standard output (run: its standard output is the
 * command's). It is laid out as on standard output: on standard error it comes after all
 * the command said, from the last line that is a lone "{". */
void
json_to(FILE *f)
{
	js.out = f;
}

/* The code of the failure a --json run reports, unless one is set already: a name of
 * mc_status_code() or one of the tool's (doc/json-schema.json). */
void
json_error(const char *code)
{
	if (js.code == NULL)
		js.code = code;
}

/* The line said of the failure reported (json_note), and its code ("failed": none). */
const char *
json_said(void)
{
	return js.message;
}

const char *
json_code(void)
{
	return js.code != NULL ? js.code : "failed";
}

/* Forgets the failure noted so far: one the command got past (run --allow-cold). */
void
json_forget(void)
{
	js.code = NULL;
	js.message[0] = '\0';
	cJSON_Delete(js.extra);
	js.extra = NULL;
}

/* Adds item (taken) to the failure object, should the run fail: what a pipeline needs to
 * tell about the failure beyond its code and message. */
void
json_fail_add(const char *name, cJSON *item)
{
	if (js.command == NULL || (js.extra == NULL && (js.extra = cJSON_CreateObject()) == NULL)) {
		cJSON_Delete(item);
		return;
	}
	cJSON_AddItemToObject(js.extra, name, item);
}

/* A command's report with --json: an object with the schema version, the command,
 * "ok": true and "exit": 0, for the command to add to and print_json(); one that ends
 * with another status says so with json_status(). */
cJSON *
json_object(void)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddNumberToObject(j, "schema", JSON_SCHEMA);
	cJSON_AddStringToObject(j, "command", js.command != NULL ? js.command : "");
	cJSON_AddBoolToObject(j, "ok", 1);
	cJSON_AddNumberToObject(j, "exit", 0);
	return j;
}

/* The exit status status into the report j: "ok" is true exactly when it is 0. */
void
json_status(cJSON *j, int status)
{
	cJSON_ReplaceItemInObject(j, "ok", cJSON_CreateBool(status == 0));
	cJSON_ReplaceItemInObject(j, "exit", cJSON_CreateNumber(status));
}

/* The failure object of the failure noted (code, line and extras), ending with status;
 * the failure is then forgotten, for a command that goes on to another bundle. */
cJSON *
json_failure(int status)
{
	cJSON *j = json_object(), *x;

	json_status(j, status);
	cJSON_AddStringToObject(j, "error", js.code != NULL ? js.code : "failed");
	cJSON_AddStringToObject(j, "message", js.message);
	while (js.extra != NULL && (x = js.extra->child) != NULL) {
		char name[64]; /* cJSON before 1.7.4 frees an item's name before copying it */
		snprintf(name, sizeof name, "%s", x->string);
		cJSON_DetachItemViaPointer(js.extra, x);
		cJSON_AddItemToObject(j, name, x);
	}
	json_forget();
	return j;
}

/* The end of a run with exit status status: with --json and no object printed, the
 * failure object. Returns status. */
int
json_finish(int status)
{
	if (js.command == NULL || js.printed || status == 0)
		return status;
	print_json(json_failure(status));
	return status;
}

/* Ends the process with status, the --json failure object first. */
void
json_exit(int status)
{
	fflush(stderr);
	exit(json_finish(status));
}

/* The command being run (megacache.c), for the help usage errors point to; or NULL. */
const char *tool_command;

/* The close of every usage error (with --json: the failure object, code "usage"). */
void
try_help(void)
{
	json_error("usage");
	if (tool_command != NULL)
		say(stderr, "Try 'megacache %s --help'.", tool_command);
	else
		say(stderr, "Try 'megacache --help'.");
	json_exit(EXIT_USAGE);
}

/* A usage error: "megacache: MSG", then try_help(). usage_say() takes the message as it
 * is, usage_error() makes it from a format and its arguments. */
void
usage_say(const char *msg)
{
	say(stderr, "%s: %s", PROG, msg);
	try_help();
}

void
usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	usage_say(msg);
}

/* Ends the program (exit 2) when the folder of path, a file the command is to write,
 * does not exist or is not a folder, or path is a folder: said before any work. "-" and NULL
 * (nothing to write) pass. */
void
check_out_folder(const char *path)
{
	char *copy;
	const char *dir;
	struct stat st;
	int err = 0;

	if (path == NULL || strcmp(path, "-") == 0 || mc_is_reference(path))
		return;
	if ((copy = strdup(path)) == NULL)
		return;
	dir = dirname(copy);
	if (stat(dir, &st) != 0)
		err = errno;
	else if (!S_ISDIR(st.st_mode))
		err = ENOTDIR;
	if (err == 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		err = EISDIR;
	if (err == ENOENT || err == ENOTDIR || err == EISDIR) {
		if (err == ENOENT)
			say(stderr, "%s: cannot write %s: folder %s does not exist", PROG, path, dir);
		else if (err == ENOTDIR)
			say(stderr, "%s: cannot write %s: %s is not a folder", PROG, path, dir);
		else
			say(stderr, "%s: cannot write %s: it is a folder; name a file in it", PROG,
			    path);
		json_error("io");
		json_exit(EXIT_USAGE);
	}
	free(copy);
}

/* After a bundle was written to out: when out is a registry reference, j's "registry"
 * object, or without j the line to f that names what was pushed, by digest (not with
 * -q). */
void
say_pushed(const struct tool *t, const char *out, cJSON *j, FILE *f)
{
	const char *manifest = mc_ctx_registry_digest(t->ctx, 0);
	const char *layer = mc_ctx_registry_digest(t->ctx, 1);
	char ref[1024];
	cJSON *r;
	size_t n;

	if (out == NULL || !mc_is_reference(out) || manifest == NULL || layer == NULL)
		return;
	n = strcspn(out, "@"); /* a digest given with the reference is the manifest's */
	snprintf(ref, sizeof ref, "%.*s@%s", (int)n, out, manifest);
	if (!t->quiet && j == NULL)
		say(f, "%spushed %s", f == stderr ? PROG ": " : "", ref);
	if (j == NULL || (r = cJSON_AddObjectToObject(j, "registry")) == NULL)
		return;
	cJSON_AddStringToObject(r, "reference", ref);
	cJSON_AddStringToObject(r, "digest", manifest);
	cJSON_AddStringToObject(r, "layer_digest", layer);
	cJSON_AddNumberToObject(r, "size", (double)mc_ctx_registry_size(t->ctx));
}

/* A bundle's path as messages show it: "-" is standard input. */
const char *
shown_path(const char *path)
{
	return strcmp(path, "-") == 0 ? "standard input" : path;
}

/* Standard output as the file a command writes, when *path is "-" (-o -, --torch -):
 * refused on a terminal and with --json. Returns a descriptor to write that file to,
 * *path then "standard output", and points standard output at standard error, so that
 * nothing else the command prints mixes into it; -1 for any other path. */
int
take_stdout(const struct tool *t, const char **path, const char *what)
{
	int fd;

	if (strcmp(*path, "-") != 0)
		return -1;
	*path = "standard output";
	if (isatty(STDOUT_FILENO))
		usage_error("refusing to write %s to a terminal; redirect standard output or name a "
			    "file", what);
	if (t->json)
		usage_error("--json cannot be used when %s goes to standard output", what);
	fflush(stdout);
	if ((fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
		say(stderr, "%s: standard output: %s", PROG, strerror(errno));
		json_exit(EXIT_USAGE);
	}
	return fd;
}

/* A new empty file in $TMPDIR (or /tmp), megacache-STEM-XXXXXX, its name into path (len
 * bytes): 0, or the exit status of a failure it has said. */
int
tmpdir_file(char *path, size_t len, const char *stem)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	snprintf(path, len, "%s/megacache-%s-XXXXXX", dir != NULL && dir[0] ? dir : "/tmp", stem);
	if ((fd = mkstemp(path)) < 0) {
		json_error("io");
		say(stderr, "%s: cannot make a temp file %s: %s", PROG, path, strerror(errno));
		return EXIT_USAGE;
	}
	close(fd);
	return 0;
}

/* Sends the file at path to fd, the file take_stdout() gave: 0, or the exit status of a
 * failure it has said. */
int
put_stdout_file(const char *path, int fd)
{
	char buf[65536];
	int in = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n = -1;

	while (rc == 0 && in >= 0 &&
	       ((n = read(in, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
		if (n > 0)
			rc = put_stdout(fd, buf, (size_t)n);
	if (in >= 0)
		close(in);
	if (rc == 0 && n != 0) {
		json_error("io");
		say(stderr, "%s: cannot read %s (a temp file): %s", PROG, path, strerror(errno));
		rc = EXIT_USAGE;
	}
	return rc;
}

/* Writes n bytes at buf to fd, the file take_stdout() gave: 0, or the exit status of a
 * failure it has said. A signal caught while the reader stalls ends the wait (128 + the
 * signal, the command's work undone by its caller). */
int
put_stdout(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	ssize_t w;

	while (n > 0 && !interrupted()) {
		if ((w = write(fd, p, n)) >= 0) {
			p += w;
			n -= (size_t)w;
		} else if (errno != EINTR) {
			json_error("io");
			say(stderr, "%s: cannot write standard output: %s", PROG, strerror(errno));
			return EXIT_USAGE;
		}
	}
	if (n == 0)
		return 0;
	json_error("cancelled");
	say(stderr, "%s: interrupted by %s; what it had begun is undone", PROG, interrupt_name());
	return 128 + interrupted();
}

int
interrupt_end(int rc)
{
	if (interrupted() == 0)
		return rc;
	if (rc != 0)
		end_by_signal(interrupted());
	/* Caught past the last point it could stop at (an output renamed into place, a
	 * load's renames begun): the work is whole, and its report said so. */
	say(stderr, "%s: %s came once the work was done: it is complete", PROG, interrupt_name());
	return rc;
}

/* The warning of a command about to write a bundle with no signature (not under -q). */
void
warn_unsigned(const struct tool *t)
{
	if (!t->quiet)
		say(stderr, "%s: warning: writing an unsigned bundle: loads will need "
		    "--insecure-no-verify (sign it with -s SECFILE)", PROG);
}

/* The exit status for a library error: 3 for a bundle of a newer format, 1 for one not
 * to be trusted, 128 + the signal for work a signal cancelled, else 2. */
int
exit_code(int rc)
{
	if (rc == MC_ERR_CANCELLED && interrupted())
		return 128 + interrupted();
	if (rc == MC_ERR_UNSUPPORTED_VERSION)
		return EXIT_VERSION;
	return mc_status_is_verification_failure(rc) ? EXIT_VERIFY : EXIT_USAGE;
}

char password_why[256];

/* Prints the library's error and returns the exit status for it; with --json, its code
 * and line are the failure reported. */
int
fail(mc_ctx *ctx, int rc)
{
	const char *msg = ctx != NULL ? mc_ctx_error(ctx) : "";

	json_error(mc_status_code(rc));
	js.message[0] = '\0';
	if (rc == MC_ERR_CANCELLED && interrupted())
		say(stderr, "%s: interrupted by %s; what it had begun is undone", PROG,
		    interrupt_name());
	else if (rc == MC_ERR_PASSWORD && password_why[0] != '\0')
		say(stderr, "%s: %s: %s", PROG, msg[0] ? msg : mc_strerror(rc), password_why);
	else
		say(stderr, "%s: %s", PROG, msg[0] ? msg : mc_strerror(rc));
	return exit_code(rc);
}

/* The n words of v into buf as a list: ", " between them, last between the last two
 * (", " or " and "); none for no word. What does not fit in len is cut. */
void
join_words(char *buf, size_t len, const char *const *v, size_t n, const char *last,
	   const char *none)
{
	size_t i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       i == 0 ? "" : i + 1 == n ? last : ", ", v[i]);
	if (n == 0)
		snprintf(buf, len, "%s", none);
}

void
human_bytes(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000000ull)
		snprintf(buf, len, "%.2f GB", n / 1e9);
	else if (n >= 1000000ull)
		snprintf(buf, len, "%.2f MB", n / 1e6);
	else if (n >= 1000ull)
		snprintf(buf, len, "%.1f kB", n / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " B", n);
}

/* Prints j, laid out a member a line, and frees it. */
void
print_json(cJSON *j)
{
	char *s = cJSON_Print(j);

	/* cJSON escapes C0 controls only; DEL, C1, bidirectional controls and invalid
	 * bytes from a bundle or a file name are escaped here, keeping the JSON valid. */
	if (s != NULL) {
		put_escaped(js.out != NULL ? js.out : stdout, s, MC_ESCAPE_JSON);
		fflush(js.out != NULL ? js.out : stdout);
		free(s);
	}
	js.printed = 1;
	cJSON_Delete(j);
}
