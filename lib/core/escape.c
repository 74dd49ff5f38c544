/*
 * escape.c - makes text from a bundle safe to print: every byte or character that a
 * terminal or a log viewer could take as a command, a line break or a change of
 * direction is written as a visible escape. Every message and listing goes through it.
 */
#include "config.h"

#include <string.h>

#include "core/core.h"

/* C0, DEL, C1, the bidirectional formatting controls (which reorder what is shown),
 * and the Unicode line and paragraph separators. */
int
mc__is_unsafe_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	       cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
	       cp == 0x2028 || cp == 0x2029;
}

int
mc__text_check(const char *text, size_t n, int tab_ok, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i, len;

	for (i = 0; i < n; i += len) {
		len = 1;
		if (s[i] >= 0x20 && s[i] < 0x7f) /* printable ASCII, most of any text */
			continue;
		if ((len = mc__utf8_decode(s + i, n - i, cp)) == 0)
			return -1;
		if (mc__is_unsafe_cp(*cp) && !(tab_ok && *cp == '\t'))
			return 1;
	}
	return 0;
}

/* The output: at counts every byte the whole result needs; kept is how much of it is
 * in dst. A piece goes in whole or not at all, and nothing after one that did not,
 * so a cut result ends on a whole character or escape. */
struct esc_out {
	char *dst;
	size_t len, at, kept;
};

static void
put(struct esc_out *o, const char *p, size_t n)
{
	if (o->kept == o->at && o->len > 0 && n <= o->len - 1 - o->at) {
		memcpy(o->dst + o->at, p, n);
		o->kept += n;
	}
	o->at += n;
}

size_t
mc_escape(char *dst, size_t dstlen, const char *src, unsigned flags)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)src;
	size_t n = strlen(src), i = 0;
	struct esc_out o = {dst, dstlen, 0, 0};
	int json = (flags & MC_ESCAPE_JSON) != 0;

	while (i < n) {
		uint32_t cp;
		size_t len = mc__utf8_decode(s + i, n - i, &cp);
		char e[8];

		/* In JSON text a raw tab or line end is whitespace between tokens: inside
		 * strings cJSON has escaped them already. */
		if (len > 0 && (!mc__is_unsafe_cp(cp) ||
				(json && (cp == '\t' || cp == '\n' || cp == '\r')))) {
			put(&o, (const char *)s + i, len);
			i += len;
			continue;
		}
		if (len == 0 && json) { /* JSON text must be UTF-8: the replacement character */
			put(&o, "\\ufffd", 6);
			i++;
			continue;
		}
		if (len == 0 || (cp < 0x80 && !json)) { /* a byte: \xNN */
			unsigned char c = s[i];
			e[0] = '\\', e[1] = 'x', e[2] = hex[c >> 4], e[3] = hex[c & 15];
			put(&o, e, 4);
			i++;
			continue;
		}
		e[0] = '\\', e[1] = 'u', e[2] = hex[(cp >> 12) & 15], e[3] = hex[(cp >> 8) & 15];
		e[4] = hex[(cp >> 4) & 15], e[5] = hex[cp & 15];
		put(&o, e, 6);
		i += len;
	}
	if (dstlen > 0)
		dst[o.kept] = '\0';
	return o.at;
}
