/*
 * util.h - helpers shared by the unit tests: scratch folders under the build tree,
 * whole-file reads, and tree checks.
 */
#ifndef MC_TEST_UTIL_H
#define MC_TEST_UTIL_H

#define MC_BUILDING_LIBRARY 1
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interop/interop.h"
#include "install/install.h"

/* A fresh folder under $MC_BUILDDIR/tests/tmp; the caller frees the string. */
static inline char *
scratch(const char *name)
{
	const char *b = getenv("MC_BUILDDIR");
	char *p = malloc(4096);

	snprintf(p, 4096, "%s/tests/tmp", b ? b : ".");
	mkdir(p, 0755);
	snprintf(p, 4096, "%s/tests/tmp/%s-XXXXXX", b ? b : ".", name);
	ck_assert_ptr_nonnull(mkdtemp(p));
	return p;
}

static inline char *
src_path(const char *rel)
{
	const char *s = getenv("MC_SRCDIR");
	char *p = malloc(4096);

	snprintf(p, 4096, "%s/%s", s ? s : "..", rel);
	return p;
}

static inline unsigned char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static inline void
spit(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_msg(f != NULL, "cannot create %s", path);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* Number of entries (files and folders) below path; -1 if path does not exist. */
static inline int
count_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char sub[4096];
		int k;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		if (e->d_type == DT_DIR && (k = count_tree(sub)) > 0)
			n += k;
	}
	closedir(d);
	return n;
}

#define RUN_SUITE(s)                                                      \
	int main(void)                                                    \
	{                                                                 \
		SRunner *sr = srunner_create(s);                          \
		int failed;                                               \
		srunner_run_all(sr, CK_NORMAL);                           \
		failed = srunner_ntests_failed(sr);                       \
		srunner_free(sr);                                         \
		return failed == 0 ? 0 : 1;                               \
	}

#endif
