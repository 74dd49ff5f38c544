/*
 * encode.c - byte encodings: hex, torch's base32 names, base64, CRC-32, UTF-8 checks,
 * and explicit big- and little-endian integer access for on-disk fields.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/core.h"

void
mc__hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Each byte's value as a lower-case hex digit, or -1 (manifests hold many hashes). */
#define H10(b) b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8, b + 9
#define N16 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
static const signed char hex_digit[256] = {
	N16, N16, N16,
	H10(0), -1, -1, -1, -1, -1, -1,                     /* 0x30: 0-9 */
	N16,                                                /* 0x40 */
	N16,                                                /* 0x50 */
	-1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, /* 0x60: a-f */
	N16, N16, N16, N16, N16, N16, N16, N16, N16};      /* 0x70-0xff */
#undef H10
#undef N16

static int
hexval(char c)
{
	return hex_digit[(unsigned char)c];
}

int
mc__unhex(const char *in, unsigned char *out, size_t n)
{
	size_t i;

	if (strlen(in) != 2 * n)
		return -1;
	for (i = 0; i < n; i++) {
		int hi = hexval(in[2 * i]), lo = hexval(in[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int
mc__is_lower_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (hexval(s[i]) < 0)
			return 0;
	return s[n] == '\0';
}

void
mc__torch_b32_51(const unsigned char sha[32], char out[52])
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned int acc = 0;
	int bits = 0;
	size_t i, o = 0;

	/* 256 bits give 52 characters (the last holds 1 bit); torch keeps the first 51. */
	for (i = 0; i < 32 && o < 51; i++) {
		acc = (acc << 8) | sha[i];
		bits += 8;
		while (bits >= 5 && o < 51) {
			out[o++] = alpha[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	out[51] = '\0';
}

int
mc__torch_named_by(const char *path, const unsigned char sha256[32])
{
	const char *base = strrchr(path, '/');
	char h[52];

	mc__torch_b32_51(sha256, h);
	return strcmp(base != NULL ? base + 1 : path, h) == 0;
}

uint32_t
mc__crc32(uint32_t crc, const void *buf, size_t n)
{
	static uint32_t table[256];
	static int ready;
	const unsigned char *p = buf;
	size_t i;

	if (!ready) {
		/* Computing the table twice from two threads writes identical values. */
		for (i = 0; i < 256; i++) {
			uint32_t c = (uint32_t)i;
			int k;
			for (k = 0; k < 8; k++)
				c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
		ready = 1;
	}
	crc = ~crc;
	for (i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* Decodes the UTF-8 sequence at s (n bytes left); returns its length, or 0 when it is
 * not a valid, shortest-form sequence of a scalar value. */
size_t
mc__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, c = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07u;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3fu);
	}
	if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
	    (len == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	*cp = c;
	return len;
}

int
mc__utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0, len;
	uint32_t cp;

	while (i < n) {
		uint64_t w;
		if (n - i >= 8 && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ull) == 0)) {
			i += 8; /* eight ASCII bytes */
			continue;
		}
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if ((len = mc__utf8_decode(s + i, n - i, &cp)) == 0)
			return 0;
		i += len;
	}
	return 1;
}

/* The bytes a JSON string's scan passes over: up to the first quote or backslash, or
 * control byte (below 0x20) when ctl is set. Manifests are mostly strings (hashes,
 * keys, paths), so sixteen bytes are tested at once where SSE2 is there. */
size_t
mc__json_plain(const unsigned char *s, size_t n, int ctl)
{
	size_t i = 0;

#if defined(__SSE2__) && defined(__GNUC__)
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i below = _mm_set1_epi8(0x1f);

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash));
		int bits;
		if (ctl) /* v <= 0x1f, unsigned: the smaller of v and 0x1f is v */
			m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(v, below), v));
		if ((bits = _mm_movemask_epi8(m)) != 0)
			return i + (size_t)__builtin_ctz((unsigned)bits);
	}
#endif
	while (i < n && s[i] != '"' && s[i] != '\\' && !(ctl && s[i] < 0x20))
		i++;
	return i;
}

size_t
mc__utoa(char *out, uint64_t v)
{
	char num[20];
	size_t k = sizeof num;

	do
		num[--k] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	memcpy(out, num + k, sizeof num - k);
	return sizeof num - k;
}

struct mc_ablock {
	struct mc_ablock *next;
	size_t used, cap;
	char data[];
};

#define ARENA_BLOCK (64u * 1024)

void *
mc__arena_dup(struct mc_arena *a, const void *s, size_t n)
{
	struct mc_ablock *b = a->head;
	char *p;

	if (b == NULL || b->cap - b->used < n) {
		size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
		if ((b = malloc(sizeof *b + cap)) == NULL)
			return NULL;
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
	}
	p = b->data + b->used;
	memcpy(p, s, n);
	b->used += n;
	return p;
}

char *
mc__arena_strdup(struct mc_arena *a, const char *s)
{
	return mc__arena_dup(a, s, strlen(s) + 1);
}

void
mc__arena_free(struct mc_arena *a)
{
	while (a->head != NULL) {
		struct mc_ablock *next = a->head->next;
		free(a->head);
		a->head = next;
	}
}

int
mc__hashpref_cmp(const void *x, const void *y)
{
	const struct mc_hashpref *a = x, *b = y;

	if (a->pref != b->pref)
		return a->pref < b->pref ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

void
mc__put_be64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

uint64_t
mc__le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void
mc__put_le64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

char *
mc__strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	if (d != NULL)
		memcpy(d, s, n);
	return d;
}

char *
mc__b64_encode(const unsigned char *in, size_t n)
{
	size_t len = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
	char *out = malloc(len);

	if (out != NULL)
		sodium_bin2base64(out, len, in, n, sodium_base64_VARIANT_ORIGINAL);
	return out;
}

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two base64 digits for each 12 bits: one lookup where there were two. */
static char b64_pairs[4096][2];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void
b64_pairs_init(void)
{
	unsigned v;

	for (v = 0; v < 4096; v++) {
		b64_pairs[v][0] = b64_alphabet[v >> 6];
		b64_pairs[v][1] = b64_alphabet[v & 63];
	}
}

size_t
mc__b64_encode_to(const unsigned char *in, size_t n, char *out)
{
	char *o = out;
	size_t i;

	pthread_once(&b64_once, b64_pairs_init);
	for (i = 0; i + 3 <= n; i += 3, o += 4) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		memcpy(o, b64_pairs[v >> 12], 2);
		memcpy(o + 2, b64_pairs[v & 0xfff], 2);
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		o[0] = b64_alphabet[v >> 18], o[1] = b64_alphabet[(v >> 12) & 63];
		o[2] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		o[3] = '=';
		o += 4;
	}
	return (size_t)(o - out);
}

char *
mc__b64_encode_data(const unsigned char *in, size_t n, size_t *outlen)
{
	char *out = malloc(MC_B64_LEN(n) + 1);
	size_t len;

	if (out == NULL)
		return NULL;
	len = mc__b64_encode_to(in, n, out);
	out[len] = '\0';
	if (outlen != NULL)
		*outlen = len;
	return out;
}

/* A base64 digit's value, or -1. */
static int
b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* For decoding four digits at a time: each digit's bits already in their place in
 * 24, or all ones (past bit 24) for a byte that is no digit. */
static uint32_t b64_quads[4][256];
static pthread_once_t b64_dec_once = PTHREAD_ONCE_INIT;

static void
b64_quads_init(void)
{
	unsigned c, k;

	for (c = 0; c < 256; c++) {
		int v = b64_val((unsigned char)c);
		for (k = 0; k < 4; k++)
			b64_quads[k][c] = v < 0 ? 0xffffffffu : (uint32_t)v << (18 - 6 * k);
	}
}

int
mc__b64_decode_data(const char *in, size_t inlen, unsigned char *out, size_t outmax,
		    size_t *outlen)
{
	const unsigned char *u = (const unsigned char *)in;
	size_t i, pad = 0, n = 0, full;

	if (inlen % 4 != 0)
		return -1;
	if (inlen > 0 && in[inlen - 1] == '=')
		pad = inlen > 1 && in[inlen - 2] == '=' ? 2 : 1;
	if (inlen / 4 * 3 - pad > outmax)
		return -1;
	pthread_once(&b64_dec_once, b64_quads_init);
	full = pad > 0 ? inlen - 4 : inlen;
	for (i = 0; i < full; i += 4, n += 3) {
		uint32_t v = b64_quads[0][u[i]] | b64_quads[1][u[i + 1]] | b64_quads[2][u[i + 2]] |
			     b64_quads[3][u[i + 3]];
		if (v >> 24 != 0)
			return -1;
		out[n] = (unsigned char)(v >> 16);
		out[n + 1] = (unsigned char)(v >> 8);
		out[n + 2] = (unsigned char)v;
	}
	if (pad > 0) {
		int a = b64_val(u[i]), b = b64_val(u[i + 1]), c = b64_val(u[i + 2]);
		if (a < 0 || b < 0 || (pad == 1 && c < 0) || (pad == 1 && (c & 3) != 0) ||
		    (pad == 2 && (b & 15) != 0)) /* the canonical form: no stray bits */
			return -1;
		out[n++] = (unsigned char)(a << 2 | b >> 4);
		if (pad == 1)
			out[n++] = (unsigned char)(b << 4 | c >> 2);
	}
	*outlen = n;
	return 0;
}

int
mc__b64_decode(const char *in, size_t inlen, unsigned char *out, size_t outmax, size_t *outlen)
{
	const char *end = NULL;
	char *again;
	int same;

	if (sodium_base642bin(out, outmax, in, inlen, NULL, outlen, &end,
			      sodium_base64_VARIANT_ORIGINAL) != 0 || end != in + inlen)
		return -1;
	/* Only the canonical encoding is accepted (no stray padding bits). */
	if ((again = mc__b64_encode(out, *outlen)) == NULL)
		return -1;
	same = strlen(again) == inlen && memcmp(again, in, inlen) == 0;
	free(again);
	return same ? 0 : -1;
}

int
mc__gpu_target_ok(const char *t)
{
	size_t i, n;

	for (i = 0; (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') || t[i] == '_';
	     i++)
		;
	if (i == 0 || i > 32 || t[i] != ':')
		return 0;
	t += i + 1;
	for (n = 0; (t[n] >= 'a' && t[n] <= 'z') || (t[n] >= 'A' && t[n] <= 'Z') ||
		    (t[n] >= '0' && t[n] <= '9') || t[n] == '_' || t[n] == '.' || t[n] == '-';
	     n++)
		;
	return n > 0 && n <= 64 && t[n] == '\0';
}
