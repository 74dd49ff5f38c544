/*
 * jsoncheck.c - exits 0 when its standard input is one JSON text (RFC 8259): UTF-8,
 * no raw control character but the whitespace between tokens, one value and nothing
 * after it but whitespace. The tool tests check the tool's --json output with it,
 * through the JSON parser the project already uses.
 */
#define MC_BUILDING_LIBRARY 1
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "interop/interop.h"
#include "install/install.h"

static int
is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int
main(void)
{
	size_t n = 0, cap = 1 << 16, i;
	char *buf = malloc(cap), *nb;
	const char *end = NULL;
	cJSON *j;

	while (buf != NULL) {
		n += fread(buf + n, 1, cap - n, stdin);
		if (n < cap)
			break;
		if ((nb = realloc(buf, cap * 2)) == NULL)
			free(buf);
		buf = nb;
		cap *= 2;
	}
	if (buf == NULL || ferror(stdin)) {
		fprintf(stderr, "jsoncheck: cannot read the input\n");
		return 2;
	}
	/* cJSON takes raw control characters inside strings and any bytes: both are
	 * refused here, as RFC 8259 does. */
	for (i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 && !is_ws(buf[i])) {
			fprintf(stderr, "jsoncheck: raw control character 0x%02x at byte %zu\n",
				(unsigned char)buf[i], i);
			return 1;
		}
	if (!mc__utf8_valid((const unsigned char *)buf, n)) {
		fprintf(stderr, "jsoncheck: not valid UTF-8\n");
		return 1;
	}
	if ((j = cJSON_ParseWithLengthOpts(buf, n, &end, 0)) == NULL) {
		fprintf(stderr, "jsoncheck: not JSON\n");
		return 1;
	}
	cJSON_Delete(j);
	while (end < buf + n && is_ws(*end))
		end++;
	if (end != buf + n) {
		fprintf(stderr, "jsoncheck: bytes after the value, at byte %zu\n", (size_t)(end - buf));
		return 1;
	}
	free(buf);
	return 0;
}
