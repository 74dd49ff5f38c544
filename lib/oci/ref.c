/* ref.c - registry references: oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX], with the
 * distribution spec's rules for the repository's name and the tag. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "oci/oci.h"

int
mc_is_reference(const char *s)
{
	return s != NULL && strncmp(s, "oci://", 6) == 0;
}

static int
lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A path component of a repository: [a-z0-9]+ joined by '.', '_', '__' or '-'s. */
static int
component_ok(const char *s, size_t n)
{
	size_t i, run = 0;

	if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
		return 0;
	for (i = 0; i < n; i++) {
		if (lower_alnum(s[i])) {
			run = 0;
			continue;
		}
		if (s[i] != '.' && s[i] != '_' && s[i] != '-')
			return 0;
		run++;
		/* "__" and any number of '-' join; '.' and '_' alone do */
		if (run > 1 && !(s[i] == '-' && s[i - 1] == '-') && !(run == 2 && s[i] == '_' &&
								    s[i - 1] == '_'))
			return 0;
	}
	return 1;
}

static int
repo_ok(const char *s)
{
	const char *p = s, *slash;

	for (;;) {
		slash = strchr(p, '/');
		if (!component_ok(p, slash ? (size_t)(slash - p) : strlen(p)))
			return 0;
		if (slash == NULL)
			return 1;
		p = slash + 1;
	}
}

static int
tag_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!lower_alnum(s[i]) && !(s[i] >= 'A' && s[i] <= 'Z') && s[i] != '_' &&
		    s[i] != '.' && s[i] != '-')
			return 0;
	return 1;
}

/* HOST[:PORT]: a name or IPv4 address of [A-Za-z0-9.-], or [IPv6], and a port of 1 to 5
 * digits. Sets ref->loopback. */
static int
host_ok(struct mc_ref *ref)
{
	char *h = ref->host, *colon;
	size_t i, n;

	if (h[0] == '[') {
		char *end = strchr(h, ']');
		if (end == NULL || end == h + 1)
			return 0;
		for (i = 1; h + i < end; i++)
			if (strchr("0123456789abcdefABCDEF:.", h[i]) == NULL)
				return 0;
		ref->loopback = strncmp(h, "[::1]", 5) == 0;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] != '\0' && colon == NULL)
			return 0;
	} else {
		colon = strchr(h, ':');
		n = colon ? (size_t)(colon - h) : strlen(h);
		if (n == 0 || h[0] == '-' || h[0] == '.')
			return 0;
		for (i = 0; i < n; i++)
			if (!lower_alnum(h[i]) && !(h[i] >= 'A' && h[i] <= 'Z') && h[i] != '.' &&
			    h[i] != '-')
				return 0;
		ref->loopback = (n == 9 && strncasecmp(h, "localhost", 9) == 0) ||
				(strncmp(h, "127.", 4) == 0 && strspn(h, "0123456789.") >= n);
	}
	if (colon != NULL) {
		n = strlen(colon + 1);
		if (n == 0 || n > 5 || strspn(colon + 1, "0123456789") != n)
			return 0;
	}
	return 1;
}

/* Splits "REPO[:TAG][@DIGEST]" (rest, written into) into ref. */
static const char *
split_rest(char *rest, struct mc_ref *ref)
{
	char *at = strchr(rest, '@'), *colon, *slash;

	if (at != NULL) {
		*at = '\0';
		if (strncmp(at + 1, "sha256:", 7) != 0 || strlen(at + 8) != 64 ||
		    !mc__is_lower_hex(at + 8, 64))
			return "a digest is sha256: and 64 lower-case hex digits";
		snprintf(ref->digest, sizeof ref->digest, "%s", at + 1);
	}
	slash = strrchr(rest, '/');
	colon = strrchr(rest, ':');
	if (colon != NULL && (slash == NULL || colon > slash)) {
		*colon = '\0';
		if (!tag_ok(colon + 1))
			return "a tag is 1 to 128 of [A-Za-z0-9_.-], not starting with '.' or '-'";
		snprintf(ref->tag, sizeof ref->tag, "%s", colon + 1);
	} else if (at == NULL) {
		strcpy(ref->tag, "latest");
	}
	if (strlen(rest) >= sizeof ref->repo || !repo_ok(rest))
		return "a repository is lower-case [a-z0-9] words joined by '.', '_', '__' or "
		       "'-', in parts joined by '/'";
	strcpy(ref->repo, rest);
	return NULL;
}

int
mc__ref_parse(mc_ctx *ctx, const char *s, struct mc_ref *ref)
{
	char buf[sizeof ref->text];
	const char *why = "it is oci://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]", *slash;

	memset(ref, 0, sizeof *ref);
	if (!mc_is_reference(s) || strlen(s) >= sizeof buf)
		return mc__err(ctx, MC_ERR_INVALID, "'%.200s': not a registry reference: %s", s, why);
	slash = strchr(s + 6, '/');
	if (slash == NULL || (size_t)(slash - (s + 6)) >= sizeof ref->host || slash == s + 6)
		return mc__err(ctx, MC_ERR_INVALID, "'%s': not a registry reference: %s", s, why);
	memcpy(ref->host, s + 6, (size_t)(slash - (s + 6)));
	if (!host_ok(ref))
		why = "the host is a name or address and an optional :PORT";
	else {
		snprintf(buf, sizeof buf, "%s", slash + 1);
		if ((why = split_rest(buf, ref)) == NULL) {
			snprintf(ref->text, sizeof ref->text, "%s", s);
			return MC_OK;
		}
	}
	return mc__err(ctx, MC_ERR_INVALID, "'%s': not a registry reference: %s", s, why);
}

void
mc__digest_text(const unsigned char sha[MC_SHA256_BYTES], char *out)
{
	memcpy(out, "sha256:", 7);
	mc__hex(sha, MC_SHA256_BYTES, out + 7);
}
