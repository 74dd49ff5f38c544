/*
 * tar.c - the one ustar header form a bundle member may have. The writer has
 * libarchive produce it, or renders it here when built --without-libarchive; the
 * reader renders it again from the name and size and compares all 512 bytes, so no
 * header field can carry unchecked bytes.
 */
#include "config.h"

#include <string.h>

#include "format/format.h"

#define TAR_SIZE_MAX 077777777777ull /* 11 octal digits */

static void
octal(unsigned char *field, size_t digits, uint64_t v)
{
	size_t i;

	for (i = digits; i > 0; i--) {
		field[i - 1] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
}

static int
name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n < 100;
}

int
mc__tar_header_render(const char *name, uint64_t size, unsigned char h[512])
{
	unsigned sum = 0;
	size_t i;

	if (!name_ok(name) || size > TAR_SIZE_MAX)
		return MC_ERR_INVALID;
	memset(h, 0, 512);
	memcpy(h, name, strlen(name));
	memcpy(h + 100, "000644 ", 7);  /* mode, then NUL */
	memcpy(h + 108, "000000 ", 7);  /* uid */
	memcpy(h + 116, "000000 ", 7);  /* gid */
	octal(h + 124, 11, size);
	h[135] = ' ';
	memcpy(h + 136, "00000000000 ", 12); /* mtime 0 */
	h[156] = '0';                   /* regular file */
	memcpy(h + 257, "ustar\0" "00", 8);
	memcpy(h + 329, "000000 ", 7);  /* devmajor */
	memcpy(h + 337, "000000 ", 7);  /* devminor */
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	octal(h + 148, 6, sum);
	h[154] = '\0';
	h[155] = ' ';
	return MC_OK;
}

int
mc__tar_header_parse(mc_ctx *ctx, const unsigned char h[512], char *name, uint64_t *size)
{
	unsigned char want[512];
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < 512 && h[i] == 0; i++)
		;
	if (i == 512)
		return 1;
	/* Name: NUL-terminated within the 100-byte field. */
	if (memchr(h, '\0', 100) == NULL)
		return mc__err(ctx, MC_ERR_MALFORMED, "member header: name not terminated");
	memcpy(name, h, 100);
	name[100] = '\0';
	for (i = 0; i < 11; i++) {
		if (h[124 + i] < '0' || h[124 + i] > '7')
			return mc__err(ctx, MC_ERR_MALFORMED, "member header of '%.100s': bad size field",
				       name);
		v = (v << 3) | (uint64_t)(h[124 + i] - '0');
	}
	if (mc__tar_header_render(name, v, want) != MC_OK || memcmp(want, h, 512) != 0)
		return mc__err(ctx, MC_ERR_MALFORMED, "member header of '%.100s' is not in canonical "
			       "form (only plain files with fixed metadata are allowed)", name);
	*size = v;
	return MC_OK;
}

void
mc__object_member(const unsigned char hash[MC_HASH_BYTES], char *name, size_t n)
{
	char hex[MC_HASH_HEX];

	mc__hex(hash, MC_HASH_BYTES, hex);
	snprintf(name, n, "%s%s", MC_MEMBER_OBJ_PREFIX, hex);
}
