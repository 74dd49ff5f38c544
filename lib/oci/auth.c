/* auth.c - a registry's credentials, found where podman, skopeo and docker keep them,
 * and the challenges of its 401 answers. The order: the context's settings, then
 * MEGACACHE_REGISTRY_USER and MEGACACHE_REGISTRY_PASSWORD, then the first of
 * $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json and
 * ~/.docker/config.json that speaks of the host: its credHelpers entry for the host,
 * its auths entry, its credsStore. A helper is run as docker runs it: the program
 * docker-credential-NAME with the argument "get" and the host on its standard input;
 * nothing secret is ever on a command line. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "oci/oci.h"

extern char **environ;

#define MC_AUTH_FILE_MAX (1u << 20)
#define MC_HELPER_OUT_MAX (64u << 10)

void
mc__secret_free(char *s)
{
	if (s != NULL) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

/* What was found: the user and secret, new strings. */
struct found {
	char *user, *secret;
	int identity;
};

static int
set_found(mc_ctx *ctx, struct found *f, const char *user, const char *secret, int identity)
{
	if ((f->user = mc__strdup(user)) == NULL || (f->secret = mc__strdup(secret)) == NULL) {
		mc__secret_free(f->user);
		f->user = NULL;
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	}
	f->identity = identity;
	return MC_OK;
}

/* An auths key names host when it is host itself, or a URL of it ("https://host",
 * "host/v1/", as docker writes them). */
static int
key_names(const char *key, const char *host)
{
	size_t n = strlen(host);

	if (strncmp(key, "https://", 8) == 0)
		key += 8;
	else if (strncmp(key, "http://", 7) == 0)
		key += 7;
	return strncasecmp(key, host, n) == 0 && (key[n] == '\0' || key[n] == '/');
}

/* An auths entry: "identitytoken", else "auth" (base64 of user:password). */
static int
from_entry(mc_ctx *ctx, const char *file, const cJSON *e, struct found *f)
{
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "identitytoken");
	const cJSON *auth = cJSON_GetObjectItemCaseSensitive(e, "auth");
	unsigned char plain[4096];
	size_t n;
	char *colon;
	int rc;

	if (cJSON_IsString(tok) && tok->valuestring[0] != '\0')
		return set_found(ctx, f, "<token>", tok->valuestring, 1);
	if (!cJSON_IsString(auth) || auth->valuestring[0] == '\0')
		return MC_OK; /* an empty entry (a credsStore's): not an answer */
	if (mc__b64_decode(auth->valuestring, strlen(auth->valuestring), plain, sizeof plain - 1,
			   &n) != 0 || (plain[n] = '\0', colon = strchr((char *)plain, ':')) == NULL)
		return mc__err(ctx, MC_ERR_INVALID, "%s: the \"auth\" of a registry is not base64 "
			       "of user:password", file);
	*colon = '\0';
	rc = set_found(ctx, f, (char *)plain, colon + 1, 0);
	sodium_memzero(plain, sizeof plain);
	return rc;
}

/* Reads what the helper's standard output gives: up to the most kept. */
static int
read_helper(int fd, char *buf, size_t cap, size_t *len)
{
	ssize_t r;

	*len = 0;
	while ((r = read(fd, buf + *len, cap - 1 - *len)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (*len += (size_t)r) >= cap - 1)
			return -1;
	}
	buf[*len] = '\0';
	return 0;
}

/* Runs docker-credential-NAME get with host on its standard input: *out gets its
 * standard output, *status its exit status (-1: it could not be run). */
static int
run_helper(mc_ctx *ctx, const char *name, const char *host, char *out, size_t cap, int *status)
{
	char prog[300], *argv[3];
	int in[2] = {-1, -1}, res[2] = {-1, -1}, st, rc = MC_OK;
	posix_spawn_file_actions_t fa;
	size_t len = 0;
	pid_t pid;

	snprintf(prog, sizeof prog, "docker-credential-%s", name);
	argv[0] = prog;
	argv[1] = (char *)"get";
	argv[2] = NULL;
	*status = -1;
	/* the host goes through a socket: a helper that exits unread raises no SIGPIPE */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0 || pipe2(res, O_CLOEXEC) != 0) {
		rc = mc__errno(ctx, MC_ERR_IO, "cannot run", prog);
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, res[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	st = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(res[1]);
	in[0] = res[1] = -1;
	if (st != 0)
		goto out; /* not found: *status -1 */
	(void)!send(in[1], host, strlen(host), MSG_NOSIGNAL); /* short: the helper's to say */
	close(in[1]);
	in[1] = -1;
	if (read_helper(res[0], out, cap, &len) != 0)
		rc = mc__err(ctx, MC_ERR_REMOTE, "%s: its answer is over %zu bytes", prog, cap - 1);
	close(res[0]); /* a helper still writing ends (SIGPIPE) rather than wait on us */
	res[0] = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
out:
	if (in[0] >= 0) close(in[0]);
	if (in[1] >= 0) close(in[1]);
	if (res[0] >= 0) close(res[0]);
	if (res[1] >= 0) close(res[1]);
	return rc;
}

/* Asks the helper NAME (named in file) for host's credentials. */
static int
from_helper(mc_ctx *ctx, const char *file, const char *name, const char *host, struct found *f)
{
	char *out = malloc(MC_HELPER_OUT_MAX);
	const cJSON *user, *secret;
	cJSON *doc = NULL;
	int rc, status;

	if (out == NULL)
		return mc__err(ctx, MC_ERR_NOMEM, "out of memory");
	if (strpbrk(name, "/\\") != NULL || name[0] == '\0' || name[0] == '.')
		rc = mc__err(ctx, MC_ERR_INVALID, "%s: credential helper '%s' is not a helper's "
			     "name", file, name);
	else if ((rc = run_helper(ctx, name, host, out, MC_HELPER_OUT_MAX, &status)) != MC_OK)
		;
	else if (status == -1)
		rc = mc__err(ctx, MC_ERR_UNSUPPORTED, "%s names the credential helper "
			     "docker-credential-%s for %s, which is not on PATH", file, name, host);
	else if (status != 0 && strstr(out, "credentials not found") != NULL)
		rc = MC_OK; /* the helper has none: as no entry */
	else if (status != 0)
		rc = mc__err(ctx, MC_ERR_REMOTE, "credential helper docker-credential-%s (named in %s) "
			     "failed for %s with status %d", name, file, host, status);
	else if ((doc = cJSON_Parse(out)) == NULL ||
		 !cJSON_IsString(user = cJSON_GetObjectItemCaseSensitive(doc, "Username")) ||
		 !cJSON_IsString(secret = cJSON_GetObjectItemCaseSensitive(doc, "Secret")))
		rc = mc__err(ctx, MC_ERR_REMOTE, "credential helper docker-credential-%s (named in %s) "
			     "answered no Username and Secret for %s", name, file, host);
	else
		rc = set_found(ctx, f, user->valuestring, secret->valuestring,
			       strcmp(user->valuestring, "<token>") == 0);
	if (doc != NULL) {
		const cJSON *sec = cJSON_GetObjectItemCaseSensitive(doc, "Secret");
		if (cJSON_IsString(sec))
			sodium_memzero(sec->valuestring, strlen(sec->valuestring));
		cJSON_Delete(doc);
	}
	sodium_memzero(out, MC_HELPER_OUT_MAX);
	free(out);
	return rc;
}

/* What one auth file says of host (nothing when it does not exist). */
static int
from_file(mc_ctx *ctx, const char *file, const char *host, struct found *f)
{
	const cJSON *helpers, *auths, *store, *e;
	char *buf = NULL;
	size_t len;
	cJSON *doc;
	int rc;

	if (access(file, F_OK) != 0)
		return MC_OK;
	if ((rc = mc__read_small_file(ctx, file, MC_AUTH_FILE_MAX, &buf, &len)) != MC_OK)
		return rc;
	doc = cJSON_ParseWithLength(buf, len);
	sodium_memzero(buf, len);
	free(buf);
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		return mc__err(ctx, MC_ERR_INVALID, "%s: not a JSON object (an auth file)", file);
	}
	helpers = cJSON_GetObjectItemCaseSensitive(doc, "credHelpers");
	e = cJSON_GetObjectItemCaseSensitive(helpers, host);
	if (cJSON_IsString(e))
		rc = from_helper(ctx, file, e->valuestring, host, f);
	auths = cJSON_GetObjectItemCaseSensitive(doc, "auths");
	if (!cJSON_IsObject(auths))
		auths = NULL;
	cJSON_ArrayForEach(e, auths) {
		if (rc != MC_OK || f->user != NULL)
			break;
		if (e->string != NULL && key_names(e->string, host))
			rc = from_entry(ctx, file, e, f);
	}
	store = cJSON_GetObjectItemCaseSensitive(doc, "credsStore");
	if (rc == MC_OK && f->user == NULL && cJSON_IsString(store))
		rc = from_helper(ctx, file, store->valuestring, host, f);
	cJSON_Delete(doc);
	return rc;
}

/* The auth files, in the order they are read. */
static size_t
auth_files(char files[3][4096])
{
	const char *v;
	size_t n = 0;

	if ((v = getenv("REGISTRY_AUTH_FILE")) != NULL && v[0] != '\0')
		snprintf(files[n++], 4096, "%s", v);
	if ((v = getenv("XDG_RUNTIME_DIR")) != NULL && v[0] != '\0')
		snprintf(files[n++], 4096, "%s/containers/auth.json", v);
	if ((v = getenv("HOME")) != NULL && v[0] != '\0')
		snprintf(files[n++], 4096, "%s/.docker/config.json", v);
	return n;
}

int
mc__creds_find(mc_ctx *ctx, const struct mc_ref *ref, char **user, char **secret, int *identity)
{
	struct mc_regset *reg = ctx->reg;
	struct found f = {0};
	char files[3][4096];
	const char *u, *p;
	size_t i, n;
	int rc = MC_OK;

	*user = *secret = NULL;
	*identity = 0;
	u = reg != NULL && reg->user != NULL ? reg->user : getenv("MEGACACHE_REGISTRY_USER");
	p = reg != NULL && reg->password != NULL ? reg->password : getenv("MEGACACHE_REGISTRY_PASSWORD");
	if (u != NULL && u[0] != '\0' && p != NULL)
		rc = set_found(ctx, &f, u, p, 0);
	else if (p != NULL && p[0] != '\0' && (u == NULL || u[0] == '\0'))
		rc = set_found(ctx, &f, "<token>", p, 1);
	for (i = 0, n = auth_files(files); rc == MC_OK && f.user == NULL && i < n; i++)
		rc = from_file(ctx, files[i], ref->host, &f);
	if (rc != MC_OK)
		return rc;
	*user = f.user;
	*secret = f.secret;
	*identity = f.identity;
	return MC_OK;
}

/* ---- challenges ---- */

/* The value of param name in a challenge's list (key=value or key="value", comma
 * separated), into out. */
static void
param(const char *list, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name), k;
	const char *p = list;

	out[0] = '\0';
	while (*p != '\0') {
		while (*p == ' ' || *p == ',')
			p++;
		if (strncasecmp(p, name, n) == 0 && p[n] == '=') {
			p += n + 1;
			if (*p == '"') {
				p++;
				k = strcspn(p, "\"");
			} else
				k = strcspn(p, ", ");
			snprintf(out, cap, "%.*s", (int)(k < cap ? k : cap - 1), p);
			return;
		}
		p += strcspn(p, "=");
		if (*p == '=')
			p++;
		if (*p == '"') {
			p++;
			p += strcspn(p, "\"");
			if (*p == '"')
				p++;
		} else
			p += strcspn(p, ",");
	}
}

int
mc__challenge_parse(mc_ctx *ctx, const char *ref, const char *value, struct mc_challenge *c)
{
	memset(c, 0, sizeof *c);
	if (strncasecmp(value, "Basic", 5) == 0 && (value[5] == ' ' || value[5] == '\0')) {
		param(value + 5, "realm", c->realm, sizeof c->realm);
		return MC_OK;
	}
	if (strncasecmp(value, "Bearer ", 7) == 0) {
		c->bearer = 1;
		param(value + 7, "realm", c->realm, sizeof c->realm);
		param(value + 7, "service", c->service, sizeof c->service);
		param(value + 7, "scope", c->scope, sizeof c->scope);
		if (c->realm[0] != '\0')
			return MC_OK;
	}
	return mc__err(ctx, MC_ERR_REMOTE, "%s: the registry asks for authentication that is "
		       "neither Basic nor Bearer with a realm ('%.60s')", ref,
		       value[0] ? value : "no WWW-Authenticate");
}
