/*
 * mcheck.c - the checks on a manifest's whole text (UTF-8, NUL bytes, stray bytes,
 * nesting), made as the text arrives in pieces, so that a large manifest need not be
 * held to be checked.
 */
#include "config.h"

#include <string.h>

#include "format/format.h"

#define MANIFEST_DEPTH_MAX 6

#define BAD(...) mc__err(ctx, MC_ERR_MANIFEST, __VA_ARGS__)
#define DOC MC_DOC(ctx)

void
mc__mcheck_init(struct mc_mcheck *c)
{
	memset(c, 0, sizeof *c);
}

/* Where the UTF-8 sequence that starts at s[i] would end, if s[i] is a lead byte;
 * i + 1 for anything else (which the validator then judges). */
static size_t
utf8_end(const unsigned char *s, size_t i)
{
	unsigned char c = s[i];

	if ((c & 0xe0) == 0xc0)
		return i + 2;
	if ((c & 0xf0) == 0xe0)
		return i + 3;
	if ((c & 0xf8) == 0xf0)
		return i + 4;
	return i + 1;
}

/* UTF-8 across pieces: a sequence cut by the end of a piece waits in c->u8 for the
 * next one; each complete run goes through mc__utf8_valid. */
static void
check_utf8(struct mc_mcheck *c, const unsigned char *p, size_t n)
{
	size_t i = 0, cut, k;

	if (c->nu8 > 0) {
		size_t want = utf8_end(c->u8, 0) - c->nu8;
		size_t take = want < n ? want : n;
		memcpy(c->u8 + c->nu8, p, take);
		c->nu8 += take;
		i = take;
		if (take < want)
			return;
		if (!mc__utf8_valid(c->u8, c->nu8))
			c->bad_utf8 = 1;
		c->nu8 = 0;
	}
	/* A lead byte in the last three whose sequence passes the end is carried. */
	cut = n;
	for (k = n; k > i && n - k < 3; k--)
		if (p[k - 1] >= 0xc0) {
			if (utf8_end(p, k - 1) > n)
				cut = k - 1;
			break;
		}
	if (!mc__utf8_valid(p + i, cut - i))
		c->bad_utf8 = 1;
	memcpy(c->u8, p + cut, n - cut);
	c->nu8 = n - cut;
}

void
mc__mcheck_feed(struct mc_mcheck *c, const unsigned char *p, size_t n)
{
	size_t i;

	if (!c->bad_utf8)
		check_utf8(c, p, n);
	if (memchr(p, '\0', n) != NULL)
		c->has_nul = 1;
	for (i = 0; i < n; i++) {
		unsigned char b = p[i];

		/* Inside a string, past any escape: up to the next quote, backslash or
		 * control byte nothing changes. */
		if (c->in_str && !c->skip && c->nesc0 == 0) {
			i += mc__json_plain(p + i, n - i, 1);
			if (i == n)
				break;
			b = p[i];
		}
		/* cJSON skips any byte up to 0x20 between tokens, and a UTF-8 BOM before a
		 * value, and takes a string's bytes as they are; RFC 8259 allows only space,
		 * tab, LF and CR between tokens, and no byte below 0x20 in a string. */
		if ((b < 0x20 || b >= 0x80) && !c->has_stray &&
		    (c->in_str ? b < 0x20 : b != '\t' && b != '\n' && b != '\r')) {
			c->has_stray = 1;
			c->stray = b;
			c->stray_str = c->in_str;
			c->stray_at = c->fed + i;
		}
		/* An escape \u in a string followed by four zeros is a NUL; an escaped
		 * backslash followed by the text u0000 is not. */
		if (c->nesc0 > 0) {
			if (b != '0')
				c->nesc0 = 0;
			else if (++c->nesc0 == 5) {
				c->has_esc0 = 1;
				c->nesc0 = 0;
			}
		}
		/* Nesting depth, counted outside strings. */
		if (c->skip) {
			c->skip = 0;
			c->nesc0 = b == 'u';
		} else if (c->in_str) {
			if (b == '\\')
				c->skip = 1;
			else if (b == '"')
				c->in_str = 0;
		} else if (b == '"') {
			c->in_str = 1;
		} else if (b == '{' || b == '[') {
			if (++c->depth > MANIFEST_DEPTH_MAX)
				c->too_deep = 1;
		} else if (b == '}' || b == ']') {
			c->depth--;
		}
	}
	c->fed += n;
}

int
mc__mcheck_end(mc_ctx *ctx, const struct mc_mcheck *c)
{
	if (c->bad_utf8 || c->nu8 > 0)
		return BAD("%s is not valid UTF-8", DOC);
	if (c->has_nul)
		return BAD("%s contains a NUL byte", DOC);
	if (c->has_esc0)
		return BAD("%s contains an escaped NUL character", DOC);
	if (c->has_stray && c->stray_str)
		return BAD("%s is not valid JSON: a raw control byte 0x%02x inside a string "
			   "at byte %llu", DOC, c->stray, (unsigned long long)c->stray_at);
	if (c->has_stray)
		return BAD("%s is not valid JSON: byte 0x%02x between tokens at byte %llu", DOC,
			   c->stray, (unsigned long long)c->stray_at);
	if (c->too_deep)
		return BAD("%s nests deeper than %d levels", DOC, MANIFEST_DEPTH_MAX);
	return MC_OK;
}
