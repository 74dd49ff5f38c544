/* cmd_verify.c - verify: a bundle's signatures, policy and every byte, with the trust
 * options. */
#include "config.h"

#include <inttypes.h>

#include "tool.h"

/* verify --json: the outcome rc of checking the bundle at path, b where it opened. */
static void
verify_json(mc_ctx *ctx, mc_bundle *b, const char *path, int rc)
{
	cJSON *j = cJSON_CreateObject();

	cJSON_AddStringToObject(j, "bundle", path);
	cJSON_AddBoolToObject(j, "ok", rc == MC_OK);
	if (rc != MC_OK) {
		cJSON_AddStringToObject(j, "error", mc_strerror(rc));
		cJSON_AddStringToObject(j, "message", mc_ctx_error(ctx));
	} else {
		cJSON_AddNumberToObject(j, "artifacts", (double)mc_bundle_artifact_count(b));
		cJSON_AddNumberToObject(j, "bundle_version", (double)mc_bundle_version(b));
	}
	print_json(j);
}

/* The line of a bundle that verified, with its times in ISO 8601 (UTC). */
static void
verify_text(mc_bundle *b, const char *path)
{
	size_t nsigs = mc_bundle_signature_count(b);
	char created[32], when[32], exp[48] = "";

	iso_time(mc_bundle_created(b), created, sizeof created);
	if (mc_bundle_expires(b) != 0) {
		iso_time(mc_bundle_expires(b), when, sizeof when);
		snprintf(exp, sizeof exp, ", expires %s", when);
	}
	say(stdout,
	    "%s: OK (%zu artifacts, bundle version %" PRIu64 ", %zu signature%s, created %s%s)",
	    path, mc_bundle_artifact_count(b), mc_bundle_version(b), nsigs, nsigs == 1 ? "" : "s",
	    created, exp);
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
	if (t->json)
		verify_json(t->ctx, b, argv[optind], rc);
	if (rc != MC_OK) {
		rc = t->json ? exit_code(rc) : fail(t->ctx, rc);
	} else {
		if (!t->json && !t->quiet)
			verify_text(b, shown_path(argv[optind]));
		rc = 0;
	}
	mc_bundle_free(b);
	free_keys(keys, t->trust.npubs);
	return rc;
}
