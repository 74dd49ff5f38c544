/* cmd_verify.c - verify: a bundle's signatures, policy and every byte, with the trust
 * options. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "tool.h"

/* The key ids of b's signatures in state (of enum mc_sig_state), as a JSON array. */
static cJSON *
signers_json(mc_bundle *b, int state)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		if (mc_bundle_signature_state(b, i) == state)
			cJSON_AddItemToArray(a, cJSON_CreateString(mc_bundle_signature_key_id(b, i)));
	return a;
}

/* "N signature(s) verified (ID, ...)" or "N not checked: key(s) not trusted (ID, ...)"
 * (state: MC_SIG_VERIFIED or MC_SIG_NOT_CHECKED) into buf; the key ids only when there
 * are some. After a verify that succeeded no signature is broken. */
static void
signers_text(mc_bundle *b, int state, char *buf, size_t len)
{
	size_t i, n = 0, used;
	const char *sep = " (";

	for (i = 0; i < mc_bundle_signature_count(b); i++)
		n += mc_bundle_signature_state(b, i) == state;
	if (state == MC_SIG_VERIFIED)
		snprintf(buf, len, "%zu signature%s verified", n, n == 1 ? "" : "s");
	else
		snprintf(buf, len, "%zu not checked: %s not trusted", n, n == 1 ? "key" : "keys");
	for (i = 0; i < mc_bundle_signature_count(b); i++) {
		if (mc_bundle_signature_state(b, i) != state)
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
verify_ok(const struct tool *t, mc_bundle *b, const char *path)
{
	char good[512], other[512], created[32], when[32], times[96];
	size_t nsigs = mc_bundle_signature_count(b);
	int none;

	signers_text(b, MC_SIG_VERIFIED, good, sizeof good);
	signers_text(b, MC_SIG_NOT_CHECKED, other, sizeof other);
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
	if (mc_bundle_gpu_target_count(b) > 0) {
		char gt[1024];
		gpu_targets_text(b, gt, sizeof gt);
		say(stdout, "GPU targets %s (%s)", gt,
		    mc_bundle_gpu_targets_known(b) == MC_GPU_RECORDED ? "recorded, matching its kernels"
		    : "read from its kernels: format 1, or an older bundle, records none");
	}
}

/* verify --json: the report of the bundle at path, verified. */
static cJSON *
verify_json(const struct tool *t, mc_bundle *b, const char *path)
{
	cJSON *j = json_object();

	cJSON_AddStringToObject(j, "bundle", path);
	bundle_facts_json(j, b);
	cJSON_AddBoolToObject(j, "signatures_checked", !t->trust.insecure);
	cJSON_AddNumberToObject(j, "signature_count", (double)mc_bundle_signature_count(b));
	cJSON_AddItemToObject(j, "trusted_signers", signers_json(b, MC_SIG_VERIFIED));
	cJSON_AddItemToObject(j, "untrusted_signers", signers_json(b, MC_SIG_NOT_CHECKED));
	cJSON_AddItemToObject(j, "gpu_targets", gpu_targets_json(b));
	cJSON_AddBoolToObject(j, "gpu_targets_recorded",
			      mc_bundle_gpu_targets_known(b) == MC_GPU_RECORDED);
	return j;
}

/* Verifies the bundle at path under keys and tells it: its lines (text), or with --json
 * into *j its report, or when several are verified its failure object too (one bundle's
 * failure is the run's: json_finish()). Returns the exit status. */
static int
verify_one(struct tool *t, const char *path, mc_pubkey **keys, int several, cJSON **j)
{
	mc_bundle *b = NULL;
	int rc;

	rc = open_under(t, path, &b, keys);
	if (rc == MC_OK)
		rc = mc_bundle_verify(b);
	if (rc != MC_OK) {
		rc = fail_signed(t, b, rc);
		if (t->json && several) {
			*j = json_failure(rc);
			cJSON_AddStringToObject(*j, "bundle", path);
		}
	} else {
		if (t->json)
			*j = verify_json(t, b, path);
		else if (!t->quiet)
			verify_ok(t, b, path);
		rc = 0;
	}
	mc_bundle_free(b);
	return rc;
}

/* The exit status of several bundles verified, of a and b the worse: 2 (one could not be
 * checked: an I/O or other error) over 3 (one needs a newer megacache) over 1 (one did
 * not verify) over 0. */
static int
worse(int a, int b)
{
	static const int rank[] = {0, 1, 3, 2}; /* of the statuses 0, 1, 2, 3 */

	return rank[b] > rank[a] ? b : a;
}

/* verify's help: its lines of the overview (megacache --help), and its own (megacache
 * verify --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help verify_help = {
	.synopsis =
		"  verify BUNDLE... (-p PUBFILE... | --insecure-no-verify) [--threshold K]\n"
		"       [--min-version N] [--require K=V]... [--now TIME] [--json]\n",
	.summary =
		"        check signatures, policy and every byte of bundles, each told by name, the\n"
		"        worst status the exit status (2, then 3, then 1); tells each signature's\n"
		"        state: verified (by a trusted key), not checked (key not trusted) or broken\n"
		"        (a trusted key's, and it does not verify; --json: signatures); a\n"
		"        --threshold above the distinct keys given is refused (exit 2) before the\n"
		"        bundle is read\n",
	.usage =
		"usage: megacache verify BUNDLE... (-p PUBFILE... | --insecure-no-verify) [--threshold K]\n"
		"       [--min-version N] [--require K=V]... [--now TIME] [--json]\n",
	.about =
		"Check a bundle's signatures, policy and every byte. Each signature is verified (by\n"
		"a trusted key), not checked (its key is not trusted: it vouches for nothing) or\n"
		"broken (by a trusted key id, and it does not verify: the verify fails). Several\n"
		"bundles (- once: standard input) are each checked and told; the exit status is the\n"
		"worst: 2 (one could not be checked), then 3 (a newer format), then 1, then 0.\n",
	.options =
		"  -p PUBFILE            a trusted public key (a file, its text or its base64 line)\n"
		"  --threshold K         need K signatures by trusted keys (default 1)\n"
		"  --min-version N       refuse a bundle version below N\n"
		"  --require K=V         refuse a bundle without this label\n"
		"  --now TIME            check expiry as of TIME\n"
		"  --insecure-no-verify  check integrity only, no signatures\n"
		"  --json                the result as JSON\n"
		"  -v, --verbose         no extra output\n",
	.example = "megacache verify cache.mcache -p ci.pub",
};

int
cmd_verify(struct tool *t, int argc, char **argv)
{
	mc_pubkey *keys[MAX_PUBKEYS] = {NULL};
	cJSON *each = NULL, *j;
	int rc = 0, i, n, stdin_seen = 0, several, ok = 0;

	tool_parse(t, argc, argv, NULL, NULL);
	if (optind == argc)
		usage_say("verify needs a BUNDLE");
	for (i = optind; i < argc; i++)
		if (strcmp(argv[i], "-") == 0 && stdin_seen++)
			usage_say("verify: standard input (-) can be only one of the bundles");
	if (t->trust.npubs == 0 && !t->trust.insecure)
		usage_say("verify needs at least one -p PUBFILE (or --insecure-no-verify: integrity "
			  "only)");
	if ((rc = tool_start(t)) != 0)
		return rc;
	/* the keys once: one that cannot be read fails the command, not each bundle */
	if ((rc = load_keys(t->ctx, &t->trust, keys)) != MC_OK) {
		free_keys(keys, t->trust.npubs);
		return fail(t->ctx, rc);
	}
	n = argc - optind;
	several = n > 1;
	if (t->json && several)
		each = cJSON_CreateArray();
	for (i = optind; i < argc; i++) {
		int status;

		j = NULL;
		status = verify_one(t, argv[i], keys, several, &j);
		ok += status == 0;
		rc = worse(rc, status);
		if (j != NULL && several)
			cJSON_AddItemToArray(each, j);
		else if (j != NULL)
			print_json(j);
		fflush(stdout); /* each bundle's line before the next one's errors */
	}
	if (each != NULL) {
		j = json_object();
		json_status(j, rc);
		cJSON_AddItemToObject(j, "bundles", each);
		print_json(j);
	} else if (several && !t->quiet) {
		say(stdout, "%d of %d bundles verified", ok, n);
	}
	free_keys(keys, t->trust.npubs);
	return rc;
}
