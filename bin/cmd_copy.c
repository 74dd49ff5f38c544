/* cmd_copy.c - copy: a bundle's bytes, unchanged, between files, standard input or
 * output, and registry references; prints the digest. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

/* copy's help: its lines of the overview (megacache --help), and its own (megacache
 * copy --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help copy_help = {
	.synopsis =
		"  copy SRC DST [--json]\n",
	.summary =
		"        copy a bundle's bytes unchanged between files, - and registry references\n"
		"        (oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]); prints the digest\n",
	.usage =
		"usage: megacache copy SRC DST [--json]\n",
	.about =
		"Copies the bundle SRC to DST, its bytes unchanged. Each is a file, - (standard\n"
		"input or output, not both) or a registry reference. Signatures are not checked\n"
		"(verify and load do that); SRC must be a megacache bundle, and a registry's\n"
		"digests are checked as the bytes come. A file DST is written whole or not at all.\n"
		"Prints the manifest's digest when a registry is one side, else the bytes' SHA-256.\n",
	.options =
		"  --json                the digests and size as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache copy cache.mcache oci://registry.example.com/caches/llama:v1",
};

/* Copies fd (standard input) to out, a temp file, to the end: 0, or the exit status of a
 * failure it said. */
static int
pump(int fd, int out, const char *from)
{
	char buf[1 << 16];
	ssize_t r;
	int rc;

	while ((r = read(fd, buf, sizeof buf)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			say(stderr, "%s: cannot read %s: %s", PROG, from, strerror(errno));
			json_error("io");
			return EXIT_USAGE;
		}
		if ((rc = put_stdout(out, buf, (size_t)r)) != 0)
			return rc;
	}
	return 0;
}

static void
copy_report(const struct tool *t, const char *src, const char *dst)
{
	const char *manifest = mc_ctx_registry_digest(t->ctx, 0);
	const char *layer = mc_ctx_registry_digest(t->ctx, 1);
	const char *digest = manifest != NULL ? manifest : layer;
	cJSON *j;

	if (t->json) {
		j = json_object();
		cJSON_AddStringToObject(j, "source", src);
		cJSON_AddStringToObject(j, "destination", dst);
		cJSON_AddStringToObject(j, "digest", digest != NULL ? digest : "");
		cJSON_AddStringToObject(j, "layer_digest", layer != NULL ? layer : "");
		cJSON_AddNumberToObject(j, "size", (double)mc_ctx_registry_size(t->ctx));
		print_json(j);
	} else if (!t->quiet && digest != NULL) {
		/* with DST -, standard output is the bundle: the digest goes to standard error */
		say(strcmp(dst, "-") == 0 ? stderr : stdout, "%s", digest);
	}
}

int
cmd_copy(struct tool *t, int argc, char **argv)
{
	const char *src, *dst, *out_name;
	char tmp[4096] = "";
	int rc, out_fd, fd;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind + 2 != argc)
		usage_say("copy needs SRC and DST");
	src = argv[optind];
	dst = out_name = argv[optind + 1];
	if (strcmp(src, "-") == 0 && strcmp(dst, "-") == 0)
		usage_say("copy: standard input and output (-) cannot be both SRC and DST");
	check_out_folder(dst);
	out_fd = take_stdout(t, &out_name, "a bundle");
	if ((rc = tool_start(t)) != 0)
		return rc;
	if (strcmp(src, "-") == 0) { /* standard input, whole, then copied as a file */
		if ((rc = tmpdir_file(tmp, sizeof tmp, "copy")) == 0 &&
		    (fd = open(tmp, O_WRONLY | O_CLOEXEC)) < 0)
			rc = fail(t->ctx, MC_ERR_IO);
		else if (rc == 0) {
			rc = pump(STDIN_FILENO, fd, "standard input");
			close(fd);
		}
		if (rc == 0 && (rc = mc_copy(t->ctx, tmp, dst)) != MC_OK)
			rc = fail(t->ctx, rc);
	} else if (out_fd >= 0) { /* to a temp file, checked, then to standard output */
		if ((rc = tmpdir_file(tmp, sizeof tmp, "copy")) == 0 &&
		    (rc = mc_copy(t->ctx, src, tmp)) != MC_OK)
			rc = fail(t->ctx, rc);
		else if (rc == 0)
			rc = put_stdout_file(tmp, out_fd);
	} else if ((rc = mc_copy(t->ctx, src, dst)) != MC_OK)
		rc = fail(t->ctx, rc);
	if (tmp[0] != '\0')
		unlink(tmp);
	if (out_fd >= 0)
		close(out_fd);
	if (rc == 0)
		copy_report(t, src, dst);
	return rc;
}
