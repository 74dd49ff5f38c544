/* setup.c - what the commands set up from their options: the context (progress, threads,
 * caps, tier roots), passwords, the keys and policy a bundle is checked against, and the
 * signers, creation time and labels of a bundle written. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

/* The mc_progress_fn (ud: struct progress): on a terminal, one line redrawn in place
 * and wiped at 100%; plain, a line each PROGRESS_STEP percent of each phase. */
static void
on_progress(void *ud, const char *phase, uint64_t done, uint64_t total)
{
	struct progress *p = ud;
	int pct = total ? (int)(done * 100 / total) : 100;

	if (p->writing != NULL && strcmp(phase, "pack") == 0)
		phase = p->writing;

	if (p->on == PROGRESS_PLAIN) {
		if (strcmp(p->phase, phase) != 0) {
			snprintf(p->phase, sizeof p->phase, "%s", phase);
			p->last = -PROGRESS_STEP;
		}
		pct -= pct % PROGRESS_STEP;
		if (pct <= p->last)
			return;
		p->last = pct;
		say(stderr, "%s: %d%%", phase, pct);
		return;
	}
	if (!p->on || pct == p->last)
		return;
	p->last = pct;
	fprintf(stderr, "\r%s: %3d%%", phase, pct);
	if (pct == 100)
		fprintf(stderr, "\r\033[K");
	fflush(stderr);
}

/* Makes t->ctx from the options: progress on a terminal unless -q, threads, caps, and the
 * tier roots given. Returns 0, or the exit status of a failure it has reported; a bad
 * --threads or cap value, or a context that cannot be made, ends the process (exit 2). */
/* The first line of the file at path, without its line end, into buf (len bytes): 0, or
 * -1 when it cannot be read (errno set) or is empty (errno 0). */
int
first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char *nl;

	errno = 0;
	if (f == NULL)
		return -1;
	if (fgets(buf, (int)len, f) == NULL) {
		fclose(f);
		return -1;
	}
	fclose(f);
	if ((nl = strpbrk(buf, "\r\n")) != NULL)
		*nl = '\0';
	return 0;
}

/* The registry options, set on the context; the password from its file's first line. */
static int
registry_setup(struct tool *t)
{
	char pw[4096];
	int rc = MC_OK;

	if (t->registry_ca != NULL)
		rc = mc_ctx_set_registry(t->ctx, MC_REGISTRY_CA, t->registry_ca);
	if (rc == MC_OK && t->plain_http)
		rc = mc_ctx_set_registry(t->ctx, MC_REGISTRY_PLAIN_HTTP, "1");
	if (rc == MC_OK && t->timeout != NULL)
		rc = mc_ctx_set_registry(t->ctx, MC_REGISTRY_TIMEOUT, t->timeout);
	if (rc == MC_OK && t->registry_user != NULL)
		rc = mc_ctx_set_registry(t->ctx, MC_REGISTRY_USER, t->registry_user);
	if (rc != MC_OK || t->registry_password_file == NULL)
		return rc;
	if (first_line(t->registry_password_file, pw, sizeof pw) != 0) {
		say(stderr, "%s: cannot read the registry password from %s%s%s", PROG,
		    t->registry_password_file, errno ? ": " : " (it is empty)",
		    errno ? strerror(errno) : "");
		json_error("io");
		json_exit(EXIT_USAGE);
	}
	rc = mc_ctx_set_registry(t->ctx, MC_REGISTRY_PASSWORD, pw);
	explicit_bzero(pw, sizeof pw);
	return rc;
}

int
tool_start(struct tool *t)
{
	int rc = mc_ctx_new(&t->ctx);
	size_t i;

	if (rc != MC_OK) {
		json_error(mc_status_code(rc));
		say(stderr, "%s: cannot start: %s", PROG, mc_strerror(rc));
		json_exit(EXIT_USAGE);
	}
	/* -q: none; a terminal's redrawn line only on a terminal. */
	t->progress.on = t->quiet || t->progress.mode == PROGRESS_NONE ? 0
			 : t->progress.mode == PROGRESS_PLAIN ? PROGRESS_PLAIN
			 : isatty(STDERR_FILENO) ? PROGRESS_TTY : 0;
	t->progress.last = -1;
	mc_ctx_set_progress(t->ctx, on_progress, &t->progress);
	interrupt_watch(t->ctx);
	if (mc_ctx_set_threads(t->ctx, t->threads) != MC_OK)
		usage_error("--threads: %u is not valid", t->threads);
	for (i = 0; i < TOOL_NCAPS; i++)
		if (t->caps_set[i] && mc_ctx_set_limit(t->ctx, tool_caps[i].which, t->caps[i]) != MC_OK)
			usage_error("--%s: %llu is not a valid cap", tool_caps[i].name,
				    (unsigned long long)t->caps[i]);
	if (t->cache_dir != NULL)
		rc = mc_ctx_set_tier_root(t->ctx, "inductor", t->cache_dir);
	if (rc == MC_OK && t->triton_dir != NULL)
		rc = mc_ctx_set_tier_root(t->ctx, "triton", t->triton_dir);
	if (rc == MC_OK && t->triton_dir != NULL)
		rc = mc_ctx_set_tier_root(t->ctx, "triton_home", t->triton_dir);
	if (rc == MC_OK && t->vllm_dir != NULL)
		rc = mc_ctx_set_tier_root(t->ctx, "vllm", t->vllm_dir);
	if (rc == MC_OK)
		rc = registry_setup(t);
	return rc == MC_OK ? 0 : fail(t->ctx, rc);
}

/* The mc_password_fn of the tool (ud: struct tool): the first line of the next
 * --password-file not yet read (one file per key that asks, in order), else asked on the
 * terminal without echo. When there is none to be had, password_why says why and nothing
 * is printed: fail() adds it to the library's message, which names the key, so that one
 * line is said. buf holds nothing then (the library wipes it, and shows none of it). */
int
read_password(void *ud, const char *prompt, char *buf, size_t len)
{
	struct tool *t = ud;
	const char *file =
		t->password_next < t->npassword_files ? t->password_files[t->password_next++] : NULL;
	FILE *f;
	struct termios old, noecho;
	int tty_ok;
	size_t n;

	if (file != NULL) {
		if ((f = fopen(file, "r")) == NULL) {
			json_error("io");
			snprintf(password_why, sizeof password_why, "--password-file %s: %s", file,
				 strerror(errno));
			return MC_ERR_IO;
		}
	} else if ((f = fopen("/dev/tty", "r+")) == NULL) {
		snprintf(password_why, sizeof password_why,
			 "there is no terminal to ask it on; use --password-file");
		return MC_ERR_PASSWORD;
	}
	tty_ok = file == NULL && tcgetattr(fileno(f), &old) == 0;
	if (file == NULL) {
		fputs(prompt, f);
		fflush(f);
	}
	if (tty_ok) {
		noecho = old;
		noecho.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fileno(f), TCSAFLUSH, &noecho);
	}
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	if (tty_ok) {
		tcsetattr(fileno(f), TCSAFLUSH, &old);
		fputs("\n", f);
	}
	fclose(f);
	if (interrupted()) {
		snprintf(password_why, sizeof password_why, "interrupted");
		return MC_ERR_CANCELLED;
	}
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	return MC_OK;
}

/* Loads the -p keys into keys (for freeing, whatever this returns). A --threshold above
 * the distinct keys given is a usage error, as one above the -p given is (tool_parse):
 * the library counts a key given twice once, and would fail every bundle (exit 1) for
 * a policy none can meet. Keys are told apart as the library does, by the Ed25519 key
 * (one key under two key ids is one). */
int
load_keys(mc_ctx *ctx, const struct trust *t, mc_pubkey **keys)
{
	size_t i, j, distinct = 0;
	int rc;

	for (i = 0; i < t->npubs; i++) {
		if ((rc = mc_pubkey_load(ctx, t->pubs[i], &keys[i])) != MC_OK)
			return rc;
		for (j = 0; j < i && !mc_pubkey_equal(keys[j], keys[i]); j++)
			;
		distinct += j == i;
	}
	if (t->threshold > distinct)
		usage_error("--threshold %u needs at least %u trusted keys; %zu given with -p, "
			    "%zu distinct (a key given again, under any key id, counts once)", t->threshold,
			    t->threshold, t->npubs, distinct);
	return MC_OK;
}

/* Applies the policy, with the keys loaded, to b. */
static int
apply_trust(mc_bundle *b, const struct trust *t, mc_pubkey **keys)
{
	size_t i;
	int rc;

	for (i = 0; i < t->npubs; i++)
		if ((rc = mc_bundle_trust(b, keys[i])) != MC_OK)
			return rc;
	if (t->threshold && (rc = mc_bundle_set_threshold(b, t->threshold)) != MC_OK)
		return rc;
	for (i = 0; i < t->nrequire; i++) {
		char *eq = strchr(t->require[i], '=');
		*eq = '\0';
		rc = mc_bundle_require_label(b, t->require[i], eq + 1);
		*eq = '=';
		if (rc != MC_OK)
			return rc;
	}
	if ((rc = mc_bundle_set_min_version(b, t->min_version)) != MC_OK)
		return rc;
	if (t->have_now && (rc = mc_bundle_set_now(b, t->now)) != MC_OK)
		return rc;
	return mc_bundle_set_insecure(b, t->insecure);
}

/* Opens the bundle at path into *b; "-" is standard input, read once, in order. */
int
open_bundle(struct tool *t, const char *path, mc_bundle **b)
{
	if (strcmp(path, "-") == 0)
		return mc_bundle_open_fd(t->ctx, STDIN_FILENO, "standard input", b);
	return mc_bundle_open(t->ctx, path, b);
}

/* Opens the bundle at path into *b under the trust options. keys (MAX_PUBKEYS, NULL
 * each) gets the public keys loaded, for free_keys(); *b is for the caller to free,
 * whatever this returns. The keys come first: a policy that cannot be met is said
 * before the bundle is read. */
int
open_trusted(struct tool *t, const char *path, mc_bundle **b, mc_pubkey **keys)
{
	int rc = load_keys(t->ctx, &t->trust, keys);

	if (rc == MC_OK)
		rc = open_under(t, path, b, keys);
	return rc;
}

int
open_under(struct tool *t, const char *path, mc_bundle **b, mc_pubkey **keys)
{
	int rc = open_bundle(t, path, b);

	if (rc == MC_OK)
		rc = apply_trust(*b, &t->trust, keys);
	return rc;
}

void
free_keys(mc_pubkey **keys, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		mc_pubkey_free(keys[i]);
}

/* Ends the program with a usage error: --types named type, which is not a known one;
 * the message lists those that are. */
static void
unknown_type(const char *type, const mc_ctx *ctx)
{
	char names[1024] = "";
	const char *name;
	size_t i, len = 0;

	for (i = 0; (name = mc_ctx_type_name(ctx, i)) != NULL && len < sizeof names; i++)
		len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", name);
	usage_error("--types: unknown artifact type '%s'; the types are: %s", type, names);
}

/* --types T[,T]...: restricts the load to those types. */
int
select_types(mc_ctx *ctx, mc_bundle *b, const char *types)
{
	char *copy = strdup(types), *tok, *save = NULL;
	int rc = MC_OK;

	if (copy == NULL)
		rc = MC_ERR_NOMEM;
	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; rc == MC_OK && tok != NULL;
	     tok = strtok_r(NULL, ",", &save))
		if (mc_ctx_type_tier(ctx, tok) == NULL)
			unknown_type(tok, ctx);
		else if ((rc = mc_bundle_select_type(b, tok)) != MC_OK)
			rc = MC_ERR_INVALID;
	free(copy);
	return rc;
}

/* Takes one -s SECFILE. */
void
signer_opt(struct signers *s, const char *path)
{
	refuse_dash("-s", path, "a secret key is not read from standard input");
	if (s->n == MAX_SIGNERS)
		usage_error("too many signing keys (at most %d)", MAX_SIGNERS);
	s->secs[s->n++] = path;
}

/* Loads the secret keys (asking for their passwords) and makes w sign with them. */
int
add_signers(struct tool *t, mc_writer *w, struct signers *s)
{
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < s->n; i++)
		rc = mc_seckey_load(t->ctx, s->secs[i], read_password, t, &s->keys[i]);
	for (i = 0; rc == MC_OK && i < s->n; i++)
		rc = mc_writer_add_signer(w, s->keys[i]);
	return rc;
}

void
free_signers(struct signers *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		mc_seckey_free(s->keys[i]);
}

/* The creation time: SOURCE_DATE_EPOCH when set (reproducible bundles), else now. */
int
set_created(mc_writer *w)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	uint64_t t = (uint64_t)time(NULL);

	if (sde != NULL && sde[0] != '\0' && parse_u64(sde, &t) != 0)
		usage_error("SOURCE_DATE_EPOCH is not a Unix time: '%s'", sde);
	return mc_writer_set_created(w, (int64_t)t);
}

/* --label KEY=VALUE into labels[n] (at most max): one given before with the same KEY is
 * a usage error naming it (which of two values to keep is the user's to say). */
void
label_opt(char **labels, size_t *n, size_t max, char *arg)
{
	size_t i, klen = strcspn(arg, "=");

	if (arg[klen] != '=' || klen == 0)
		usage_error("--label takes KEY=VALUE, not '%s'", arg);
	for (i = 0; i < *n; i++)
		if (strncmp(labels[i], arg, klen) == 0 && labels[i][klen] == '=')
			usage_error("label %.*s given twice ('%s', then '%s'); give it once",
				    (int)klen, arg, labels[i], arg);
	if (*n == max)
		usage_error("too many labels (at most %zu)", max);
	labels[(*n)++] = arg;
}

/* Sets the labels given as KEY=VALUE (each has an '='). */
int
set_labels(mc_writer *w, char **labels, size_t n)
{
	size_t i;
	int rc = MC_OK;

	for (i = 0; rc == MC_OK && i < n; i++) {
		char *eq = strchr(labels[i], '=');
		*eq = '\0';
		rc = mc_writer_set_label(w, labels[i], eq + 1);
		*eq = '=';
	}
	return rc;
}
