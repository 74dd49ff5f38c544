/*
 * alloc.c - memory that grows or goes as a whole: arrays grown by doubling and arrays
 * of strings freed with their strings.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* The capacity an empty array starts at. */
#define GROW_FIRST 16

int
mc__grow(void *pv, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap != 0 ? *cap : GROW_FIRST;
	void *p;

	if (need <= *cap)
		return MC_OK;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return MC_ERR_NOMEM;
		n *= 2;
	}
	if (size != 0 && n > SIZE_MAX / size)
		return MC_ERR_NOMEM;
	/* through memcpy: *pv is a pointer to the element type, not a void * */
	memcpy(&p, pv, sizeof p);
	if ((p = realloc(p, n * size)) == NULL)
		return MC_ERR_NOMEM;
	memcpy(pv, &p, sizeof p);
	*cap = n;
	return MC_OK;
}

void
mc__strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}
