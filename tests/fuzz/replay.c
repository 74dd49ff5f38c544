/*
 * replay.c - runs a fuzz target over files, without libFuzzer: each argument is a
 * file or a folder of files. Used by make check to replay the corpus and every crash
 * kept as a regression case, under any compiler.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	if (f == NULL) {
		perror(path);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	if ((buf = malloc((size_t)n + 1)) == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "%s: cannot read\n", path);
		fclose(f);
		free(buf);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	int i, failed = 0, count = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= run_file(argv[i]);
			count++;
			continue;
		}
		if ((d = opendir(argv[i])) == NULL) {
			perror(argv[i]);
			return 1;
		}
		while ((e = readdir(d)) != NULL) {
			char path[4096];
			if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0 ||
			    strcmp(e->d_name, "README.md") == 0 || strcmp(e->d_name, "expected.tsv") == 0 ||
			    strcmp(e->d_name, "keys") == 0)
				continue;
			snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
			failed |= run_file(path);
			count++;
		}
		closedir(d);
	}
	printf("%d inputs replayed\n", count);
	return failed || count == 0;
}
