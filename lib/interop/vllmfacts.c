/*
 * vllmfacts.c - what a vLLM cache was made for, read from its files as a scan records
 * them: the hashes of each model's cache_key_factors.json and the torch build of each
 * binary artifact, noted as the writer's labels vllm.* (format/SPEC.md section 4).
 * A file that cannot be read or does not parse tells nothing; it fails no save.
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "interop/interop.h"

#define FACTORS_MAX (256 * 1024) /* vLLM's env factors and three hashes: a few KiB */
#define FACT_MAX 128             /* a hash taken as a label's value */
#define HEAD_MAX 96              /* an artifact's bytes up to its torch key, and more */

/* The regular file at path opened to read, no link followed (a FIFO not waited on);
 * -1 when it is none. */
static int
open_file(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A string member of the factors fit to be a label's value and one of a list of them:
 * 1-128 bytes, no ','. */
static const char *
fact(const cJSON *doc, const char *name)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, name);
	size_t n;

	if (!cJSON_IsString(m))
		return NULL;
	n = strlen(m->valuestring);
	return n > 0 && n <= FACT_MAX && strchr(m->valuestring, ',') == NULL &&
	       mc__label_value_ok(m->valuestring, NULL, 0) ? m->valuestring : NULL;
}

/* cache_key_factors.json, as vLLM dumps it: {"env": {...}, "config_hash": ...,
 * "code_hash": ..., "compiler_hash": ...}; each hash, where it is a string, is noted as
 * label vllm.<its name>. */
static int
note_factors(mc_writer *w, const char *path)
{
	static const char *const names[] = {"config_hash", "code_hash", "compiler_hash"};
	char label[32], *buf = NULL;
	const char *v;
	struct stat st;
	cJSON *doc = NULL;
	size_t i;
	int fd = open_file(path, &st), rc = MC_OK;

	if (fd < 0)
		return MC_OK;
	if (st.st_size > 0 && st.st_size <= FACTORS_MAX &&
	    (buf = malloc((size_t)st.st_size)) == NULL)
		rc = mc__err(mc__writer_ctx(w), MC_ERR_NOMEM, "out of memory");
	/* cJSON would cut a string at an escaped NUL: such a file tells nothing. */
	if (buf != NULL && mc__pread_full(fd, buf, (size_t)st.st_size, 0) == 0 &&
	    memmem(buf, (size_t)st.st_size, "\\u0000", 6) == NULL)
		doc = cJSON_ParseWithLength(buf, (size_t)st.st_size);
	close(fd);
	free(buf);
	for (i = 0; rc == MC_OK && cJSON_IsObject(doc) && i < sizeof names / sizeof names[0];
	     i++)
		if ((v = fact(doc, names[i])) != NULL) {
			snprintf(label, sizeof label, "vllm.%s", names[i]);
			rc = mc__writer_note_label(w, label, v);
		}
	cJSON_Delete(doc);
	return rc;
}

/* The torch key in the first n bytes of a binary artifact (torch's CompiledArtifact
 * saved as "binary"): after a CRC-32, fields of a u64 big-endian length and the bytes;
 * the first the header "CacheCompiledArtifact" or "AOTCompiledArtifact", then the key of
 * 32 bytes. Files of torch before 2.10 have no header: the key comes first. NULL when
 * the bytes are not so. */
static const unsigned char *
torch_key_at(const unsigned char *b, size_t n)
{
	static const char *const headers[] = {"CacheCompiledArtifact", "AOTCompiledArtifact"};
	size_t at = 4, i;
	uint64_t len;

	if (n < at + 8)
		return NULL;
	len = mc__be64(b + at);
	for (i = 0; i < sizeof headers / sizeof headers[0]; i++)
		if (len == strlen(headers[i]) && n >= at + 8 + len &&
		    memcmp(b + at + 8, headers[i], len) == 0) {
			at += 8 + len;
			if (n < at + 8)
				return NULL;
			len = mc__be64(b + at);
			break;
		}
	return len == 32 && n >= at + 8 + 32 ? b + at + 8 : NULL;
}

/* A binary artifact's torch key, noted as label vllm.torch_key in lower-case hex. */
static int
note_torch_key(mc_writer *w, const char *path)
{
	unsigned char b[HEAD_MAX];
	const unsigned char *key = NULL;
	char hex[2 * 32 + 1];
	struct stat st;
	size_t n;
	int fd = open_file(path, &st);

	if (fd < 0)
		return MC_OK;
	n = st.st_size < HEAD_MAX ? (size_t)st.st_size : HEAD_MAX;
	if (mc__pread_full(fd, b, n, 0) == 0)
		key = torch_key_at(b, n);
	close(fd);
	if (key == NULL)
		return MC_OK;
	mc__hex(key, 32, hex);
	return mc__writer_note_label(w, "vllm.torch_key", hex);
}

int
mc__vllm_note(mc_writer *w, const char *type, const char *key, const char *path)
{
	const char *base = strrchr(key, '/') != NULL ? strrchr(key, '/') + 1 : key;
	size_t slashes = 0;
	const char *c;

	for (c = key; *c != '\0'; c++)
		slashes += *c == '/';
	if (strcmp(type, "vllm_meta") == 0 && strcmp(base, "cache_key_factors.json") == 0)
		return note_factors(w, path);
	/* the binary form: the artifact's own name, <J>/artifact_..., four folders deep; a
	 * file of the unpacked form lies deeper in the folder of that name */
	if (strcmp(type, "vllm_artifact") == 0 && slashes == 4 &&
	    strncmp(base, "artifact_", 9) == 0)
		return note_torch_key(w, path);
	return MC_OK;
}
