/* manifest.c - the artifact's manifest: an OCI image manifest (image-spec 1.1) whose
 * artifactType names megacache's bundle format, whose config is the empty descriptor,
 * and whose one layer is the bundle's bytes unchanged. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "oci/oci.h"

/* The tag or digest a reference's manifest is asked for by. */
static const char *
manifest_ref(const struct mc_ref *ref)
{
	return ref->digest[0] != '\0' ? ref->digest : ref->tag;
}

/* Whether t is megacache's bundle media type, of format version 1 or 2. */
static int
bundle_type(const char *t)
{
	size_t n = strlen(MC_OCI_BUNDLE_TYPE);

	return t != NULL && strncmp(t, MC_OCI_BUNDLE_TYPE, n) == 0 &&
	       (strcmp(t + n, "1") == 0 || strcmp(t + n, "2") == 0);
}

static const char *
str_item(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Checks the manifest doc (its Content-Type ctype) is a bundle's, and takes its layer. */
static int
check_manifest(struct mc_oci *o, const cJSON *doc, const char *ctype, struct mc_layer *layer)
{
	mc_ctx *ctx = mc__oci_ctx(o);
	const char *ref = mc__oci_ref(o)->text, *mt = str_item(doc, "mediaType");
	const char *at = str_item(doc, "artifactType"), *d;
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(doc, "layers"), *l, *size;

	if (mt == NULL)
		mt = ctype;
	if (mt == NULL || strcmp(mt, MC_OCI_MANIFEST_TYPE) != 0)
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle: the manifest is "
			       "of media type '%.100s', not an OCI image manifest", ref, mt ? mt : "");
	if (at == NULL)
		at = str_item(cJSON_GetObjectItemCaseSensitive(doc, "config"), "mediaType");
	if (!bundle_type(at))
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle: its artifact type "
			       "is '%.100s', not %s1 or 2", ref, at ? at : "", MC_OCI_BUNDLE_TYPE);
	if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) != 1)
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle: it has %d layers, "
			       "not 1", ref, cJSON_IsArray(layers) ? cJSON_GetArraySize(layers) : 0);
	l = cJSON_GetArrayItem(layers, 0);
	if (!bundle_type(str_item(l, "mediaType")))
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: not a megacache bundle: its layer is of "
			       "media type '%.100s'", ref, str_item(l, "mediaType") ?
			       str_item(l, "mediaType") : "");
	d = str_item(l, "digest");
	size = cJSON_GetObjectItemCaseSensitive(l, "size");
	if (d == NULL || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71 ||
	    !mc__is_lower_hex(d + 7, 64) || !cJSON_IsNumber(size) || size->valuedouble < 0 ||
	    size->valuedouble > 9007199254740991.0 ||
	    size->valuedouble != (double)(uint64_t)size->valuedouble)
		return mc__err(ctx, MC_ERR_NOT_BUNDLE, "%s: the manifest's layer has no sha256 digest "
			       "or size", ref);
	snprintf(layer->digest, sizeof layer->digest, "%s", d);
	layer->size = (uint64_t)size->valuedouble;
	return MC_OK;
}

/* Checks the manifest's bytes are those the reference (or the registry) names. */
static int
check_digest(struct mc_oci *o, const struct mc_resp *r, struct mc_layer *layer)
{
	const struct mc_ref *ref = mc__oci_ref(o);
	unsigned char sha[MC_SHA256_BYTES];
	int rc;

	if ((rc = mc__sha256(sha, r->body, r->body_len)) != MC_OK)
		return mc__err(mc__oci_ctx(o), rc, "out of memory");
	mc__digest_text(sha, layer->manifest_digest);
	if (ref->digest[0] != '\0' && strcmp(ref->digest, layer->manifest_digest) != 0)
		return mc__err(mc__oci_ctx(o), MC_ERR_DIGEST_MISMATCH, "%s: the manifest the registry "
			       "sent is %s, not the digest asked for", ref->text, layer->manifest_digest);
	if (strncmp(r->digest, "sha256:", 7) == 0 && strcmp(r->digest, layer->manifest_digest) != 0)
		return mc__err(mc__oci_ctx(o), MC_ERR_DIGEST_MISMATCH, "%s: the manifest the registry "
			       "sent is %s, not %.80s as it says", ref->text, layer->manifest_digest,
			       r->digest);
	return MC_OK;
}

int
mc__oci_resolve(struct mc_oci *o, struct mc_layer *layer)
{
	const struct mc_ref *ref = mc__oci_ref(o);
	char path[600];
	struct mc_req q = {.method = "GET", .url = path, .body_fd = -1,
			   .max_body = MC_OCI_MANIFEST_MAX,
			   .accept = MC_OCI_MANIFEST_TYPE ", application/vnd.oci.image.index.v1+json, "
				     "application/vnd.docker.distribution.manifest.v2+json"};
	struct mc_resp r = {0};
	cJSON *doc = NULL;
	int rc;

	memset(layer, 0, sizeof *layer);
	snprintf(path, sizeof path, "/v2/%s/manifests/%s", ref->repo, manifest_ref(ref));
	rc = mc__oci_request(o, &q, &r);
	if (rc == MC_ERR_LIMIT)
		rc = mc__err(mc__oci_ctx(o), MC_ERR_LIMIT, "%s: the manifest is over %u MiB, more "
			     "than a bundle's ever is", ref->text, MC_OCI_MANIFEST_MAX >> 20);
	else if (rc == MC_OK && r.status != 200)
		rc = mc__oci_status_err(o, &r, "manifest");
	else if (rc == MC_OK && (rc = check_digest(o, &r, layer)) == MC_OK) {
		if ((doc = cJSON_ParseWithLength((char *)r.body, r.body_len)) == NULL ||
		    !cJSON_IsObject(doc))
			rc = mc__err(mc__oci_ctx(o), MC_ERR_NOT_BUNDLE, "%s: the manifest is not JSON",
				     ref->text);
		else
			rc = check_manifest(o, doc, r.ctype[0] ? r.ctype : NULL, layer);
	}
	cJSON_Delete(doc);
	mc__resp_free(&r);
	return rc;
}

/* ---- pushing ---- */

/* A descriptor object: mediaType, digest, size. */
static cJSON *
descriptor(const char *type, const char *digest, uint64_t size)
{
	cJSON *d = cJSON_CreateObject();

	if (d == NULL || cJSON_AddStringToObject(d, "mediaType", type) == NULL ||
	    cJSON_AddStringToObject(d, "digest", digest) == NULL ||
	    cJSON_AddNumberToObject(d, "size", (double)size) == NULL) {
		cJSON_Delete(d);
		return NULL;
	}
	return d;
}

/* The manifest of a bundle of format version format, layer and annotations. */
static char *
render(int format, const struct mc_layer *layer, const struct mc_annot *a, size_t n)
{
	char type[64];
	cJSON *m = cJSON_CreateObject(), *cfg, *l, *layers, *ann, *lann;
	char *text = NULL;
	size_t i;

	snprintf(type, sizeof type, "%s%d", MC_OCI_BUNDLE_TYPE, format);
	if (m == NULL || cJSON_AddNumberToObject(m, "schemaVersion", 2) == NULL ||
	    cJSON_AddStringToObject(m, "mediaType", MC_OCI_MANIFEST_TYPE) == NULL ||
	    cJSON_AddStringToObject(m, "artifactType", type) == NULL ||
	    (cfg = descriptor(MC_OCI_EMPTY_TYPE, MC_OCI_EMPTY_DIGEST, 2)) == NULL)
		goto out;
	cJSON_AddItemToObject(m, "config", cfg);
	if (cJSON_AddStringToObject(cfg, "data", "e30=") == NULL ||
	    (layers = cJSON_AddArrayToObject(m, "layers")) == NULL ||
	    (l = descriptor(type, layer->digest, layer->size)) == NULL)
		goto out;
	cJSON_AddItemToArray(layers, l);
	if ((lann = cJSON_AddObjectToObject(l, "annotations")) == NULL ||
	    cJSON_AddStringToObject(lann, "org.opencontainers.image.title", "bundle.mcache") == NULL ||
	    (ann = cJSON_AddObjectToObject(m, "annotations")) == NULL)
		goto out;
	for (i = 0; i < n; i++)
		if (cJSON_AddStringToObject(ann, a[i].key, a[i].value) == NULL)
			goto out;
	text = cJSON_PrintUnformatted(m);
out:
	cJSON_Delete(m);
	return text;
}

/* PUTs the manifest text to the reference's tag, or its digest. */
static int
put_manifest(struct mc_oci *o, const char *text, struct mc_layer *layer)
{
	const struct mc_ref *ref = mc__oci_ref(o);
	unsigned char sha[MC_SHA256_BYTES];
	char path[600];
	struct mc_req q = {.method = "PUT", .url = path, .body = text, .body_len = strlen(text),
			   .body_fd = -1, .ctype = MC_OCI_MANIFEST_TYPE};
	struct mc_resp r = {0};
	int rc;

	if ((rc = mc__sha256(sha, text, q.body_len)) != MC_OK)
		return mc__err(mc__oci_ctx(o), rc, "out of memory");
	mc__digest_text(sha, layer->manifest_digest);
	if (ref->digest[0] != '\0' && strcmp(ref->digest, layer->manifest_digest) != 0)
		return mc__err(mc__oci_ctx(o), MC_ERR_INVALID, "%s: the manifest of this bundle is %s: "
			       "a digest in a reference written to must be the manifest's (give a "
			       "tag instead)", ref->text, layer->manifest_digest);
	snprintf(path, sizeof path, "/v2/%s/manifests/%s", ref->repo,
		 ref->tag[0] != '\0' ? ref->tag : ref->digest);
	if ((rc = mc__oci_request(o, &q, &r)) == MC_OK && r.status != 201 && r.status != 200)
		rc = mc__oci_status_err(o, &r, "the manifest's upload");
	mc__resp_free(&r);
	return rc;
}

int
mc__oci_push(struct mc_oci *o, int fd, const struct mc_layer *bytes, int format,
	     const struct mc_annot *a, size_t n, struct mc_layer *layer)
{
	char *text;
	int rc;

	*layer = *bytes;
	if ((rc = mc__oci_put_blob(o, -1, "{}", 2, MC_OCI_EMPTY_DIGEST)) != MC_OK ||
	    (rc = mc__oci_put_blob(o, fd, NULL, layer->size, layer->digest)) != MC_OK)
		return rc;
	if ((text = render(format, layer, a, n)) == NULL)
		return mc__err(mc__oci_ctx(o), MC_ERR_NOMEM, "out of memory");
	rc = put_manifest(o, text, layer);
	free(text);
	return rc;
}
