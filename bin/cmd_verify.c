/* cmd_verify.c - verify: a bundle's signatures, policy and every byte, with the trust
 * options. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "tool.h"

/* Whether signature i of b is by one of the trusted keys. After a verify that succeeded
 * every such signature verified: one by a trusted key id that does not fails the verify. */
static int
sig_trusted(const struct tool *t, mc_bundle *b, mc_pubkey **keys, size_t i)
{
	const char *id = mc_bundle_signature_key_id(b, i);
	size_t k;

	for (k = 0; !t->trust.insecure && k < t->trust.npubs; k++)
		if (keys[k] != NULL && strcmp(mc_pubkey_id(keys[k]), id) == 0)
			return 1;
	return 0;
}

/* The signers of b, trusted or not (want), as a JSON array of key ids. */
static cJSON *
signers_json(const struct tool *t, mc_bundle *b, mc_pubkey **keys, int want)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		if (sig_trusted(t, b, keys, i) == want)
			cJSON_AddItemToArray(a, cJSON_CreateString(mc_bundle_signature_key_id(b, i)));
	return a;
}

/* "N trusted signature(s) (ID, ...)" or "N by key(s) not trusted (ID, ...)" (want: the
 * trusted ones or the others) into buf; the key ids only when there are some. */
static void
signers_text(const struct tool *t, mc_bundle *b, mc_pubkey **keys, int want, char *buf,
	     size_t len)
{
	size_t i, n = 0, used;
	const char *sep = " (";

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		n += sig_trusted(t, b, keys, i) == want;
	if (want)
		snprintf(buf, len, "%zu trusted signature%s", n, n == 1 ? "" : "s");
	else
		snprintf(buf, len, "%zu by %s not trusted", n, n == 1 ? "a key" : "keys");
	for (i = 0; i < mc_bundle_signature_count(b); i++) {
		if (sig_trusted(t, b, keys, i) != want)
			continue;
		used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s", sep, mc_bundle_signature_key_id(b, i));
		sep = ", ";
	}
	if (n > 0)
		snprintf(buf + strlen(buf), len - strlen(buf), ")");
}

/* The line of a verify that succeeded, with the bundle's times in ISO 8601 (UTC). With
 * --insecure-no-verify no signature was checked, and it says so. */
static void
verify_ok(const struct tool *t, mc_bundle *b, mc_pubkey **keys, const char *path)
{
	char good[512], other[512], created[32], when[32], times[96];
	size_t nsigs = mc_bundle_signature_count(b);
	int none;

	signers_text(t, b, keys, 1, good, sizeof good);
	signers_text(t, b, keys, 0, other, sizeof other);
	none = strncmp(other, "0 ", 2) == 0;
	iso_time(mc_bundle_created(b), created, sizeof created);
	snprintf(times, sizeof times, ", created %s", created);
	if (mc_bundle_expires(b) != 0) {
		iso_time(mc_bundle_expires(b), when, sizeof when);
		snprintf(times + strlen(times), sizeof times - strlen(times), ", expires %s", when);
	}
	if (t->trust.insecure)
		say(stdout, "%s: OK (%zu artifacts, bundle version %" PRIu64 ", %zu signature%s "
		    "not checked: --insecure-no-verify%s)", shown_path(path),
		    mc_bundle_artifact_count(b), mc_bundle_version(b), nsigs, nsigs == 1 ? "" : "s",
		    times);
	else
		say(stdout, "%s: OK (%zu artifacts, bundle version %" PRIu64 ", %s%s%s%s)",
		    shown_path(path), mc_bundle_artifact_count(b), mc_bundle_version(b), good,
		    none ? "" : ", ", none ? "" : other, times);
}

/* verify --json: the bundle at path, verified. */
static void
verify_json(const struct tool *t, mc_bundle *b, mc_pubkey **keys, const char *path)
{
	cJSON *j = json_object(), *labels;
	const char *k, *v;
	size_t i;

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddNumberToObject(j, "artifact_count", (double)mc_bundle_artifact_count(b));
	cJSON_AddNumberToObject(j, "bundle_version", (double)mc_bundle_version(b));
	cJSON_AddNumberToObject(j, "created", (double)mc_bundle_created(b));
	if (mc_bundle_expires(b) != 0)
		cJSON_AddNumberToObject(j, "expires", (double)mc_bundle_expires(b));
	labels = cJSON_AddObjectToObject(j, "labels");
	for (i = 0; i < mc_bundle_label_count(b); i++)
		if (mc_bundle_label(b, i, &k, &v) == MC_OK)
			cJSON_AddStringToObject(labels, k, v);
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	cJSON_AddItemToObject(j, "trusted_signers", signers_json(t, b, keys, 1));
	cJSON_AddItemToObject(j, "untrusted_signers", signers_json(t, b, keys, 0));
	print_json(j);
}

int
cmd_verify(struct tool *t, int argc, char **argv)
{
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	mc_bundle *b = NULL;
	int rc;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind + 1 != argc)
		usage_error("verify needs exactly one BUNDLE%s", "");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_error("verify needs at least one -p PUBFILE (or --insecure-no-verify: integrity "
			    "only)%s", "");
	if ((rc = tool_start(t)) != 0)
		return rc;
	rc = open_trusted(t, argv[optind], &b, keys);
	if (rc == MC_OK)
		rc = mc_bundle_verify(b);
	if (rc != MC_OK) {
		rc = fail(t->ctx, rc);
	} else {
		if (t->json)
			verify_json(t, b, keys, argv[optind]);
		else if (!t->quiet)
			verify_ok(t, b, keys, argv[optind]);
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}
