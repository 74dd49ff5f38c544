/*
 * fuzz.h - shared by the fuzz targets: the libFuzzer entry point, and a scratch folder
 * per process for targets that need the input as a file.
 */
#ifndef MC_FUZZ_H
#define MC_FUZZ_H

#define MC_BUILDING_LIBRARY 1
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interop/interop.h"
#include "install/install.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Outcomes the fuzz targets do not judge (refusing is fine; crashing is not). */
static inline void
any_outcome(int rc)
{
	(void)rc;
}

/* A per-process folder under $TMPDIR (or /tmp), made once. */
static inline const char *
fuzz_dir(void)
{
	static char dir[512];

	if (dir[0] == '\0') {
		const char *t = getenv("TMPDIR");
		snprintf(dir, sizeof dir, "%s/mcfuzz-%ld", t && *t ? t : "/tmp", (long)getpid());
		mkdir(dir, 0700);
	}
	return dir;
}

/* Writes data to <fuzz_dir>/<name> and returns the path (static storage). */
static inline const char *
fuzz_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[600];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
	if ((f = fopen(path, "wb")) == NULL)
		abort();
	if (size > 0 && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	return path;
}

#endif
