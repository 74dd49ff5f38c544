/* cmd_audit.c - audit: what in torch's (and Triton's) Redis remote caches no trusted
 * bundle vouches for. */
#include "config.h"

#include <string.h>

#include "tool.h"

#define MAX_AUDIT 16

static const struct option audit_long[] = {REDIS_LONG_OPTIONS, {NULL, 0, NULL, 0}};

static int
audit_opt(struct tool *t, void *opts, int c, char *arg)
{
	return redis_opt(opts, c, arg);
}

static const struct tool_optspec audit_spec = {"", audit_long, audit_opt};

/* audit's help: its lines of the overview (megacache --help), and its own (megacache
 * audit --help): usage, what it does, a line or more per option, an example. */
const struct cmd_help audit_help = {
	.synopsis =
		"  audit [--redis URL] -p PUBFILE... BUNDLE... [--triton] [--json]\n",
	.summary =
		"        every entry of those caches no trusted bundle vouches for; exit 1 if any\n",
	.usage =
		"usage: megacache audit [--redis URL] -p PUBFILE... BUNDLE... [--triton] [--json] [-v]\n",
	.about =
		"List every entry of torch's Redis remote cache (and with --triton Triton's) that no\n"
		"given trusted bundle vouches for: its key in none of them, other bytes than the\n"
		"signed manifest lists, or unreadable by torch (odd form: a value or key not in the\n"
		"form torch reads, the check pull skips them by). Exit status 1 when there is any.\n",
	.options =
		"  --redis URL, --redis-password-file F, --triton, --triton-key-format F: as push\n"
		"  -p PUBFILE             a trusted public key; each BUNDLE must verify with them\n"
		"  --threshold K, --min-version N, --require K=V, --now TIME: as verify, for each\n"
		"                         BUNDLE (an unverified one vouches for nothing)\n"
		"  --json                 the findings as JSON\n"
		"  -v, --verbose          a line per entry checked: those vouched for too (without\n"
		"                         -v, a line per entry not vouched for)\n",
	.example = "megacache audit --redis redis://cache-host:6379/0 -p ci.pub cache.mcache",
};

static void
audit_report(const struct tool *t, char **paths, size_t n, const mc_redis *r,
	     struct entry_tally *ta, size_t bad)
{
	static const int counts[] = {MC_REMOTE_VOUCHED, MC_REMOTE_DIFFERS, MC_REMOTE_UNVOUCHED,
				     MC_REMOTE_ODD};
	size_t i, total = ta->n[MC_REMOTE_VOUCHED] + bad;

	if (t->json) {
		cJSON *j = json_object(), *bs = cJSON_CreateArray();
		json_status(j, bad > 0 ? EXIT_VERIFY : 0);
		cJSON_AddStringToObject(j, "redis", mc_redis_where(r));
		for (i = 0; i < n; i++)
			cJSON_AddItemToArray(bs, cJSON_CreateString(paths[i]));
		cJSON_AddItemToObject(j, "bundles", bs);
		cJSON_AddNumberToObject(j, "entry_count", (double)total);
		add_counts(j, ta, counts, sizeof counts / sizeof counts[0]);
		cJSON_AddBoolToObject(j, "clean", bad == 0);
		cJSON_AddItemToObject(j, "findings", ta->entries);
		ta->entries = NULL;
		print_json(j);
		return;
	}
	if (t->quiet)
		return;
	say(stdout, "audit of %s: %zu entr%s, %zu vouched for by a trusted bundle, %zu not (%zu "
	    "differ, %zu in no bundle, %zu unreadable by torch: not in their key's form)",
	    mc_redis_where(r), total,
	    total == 1 ? "y" : "ies", ta->n[MC_REMOTE_VOUCHED], bad, ta->n[MC_REMOTE_DIFFERS],
	    ta->n[MC_REMOTE_UNVOUCHED], ta->n[MC_REMOTE_ODD]);
}

int
cmd_audit(struct tool *t, int argc, char **argv)
{
	struct redis_opts o;
	struct entry_tally ta;
	mc_pubkey *keys[MAX_AUDIT * MAX_PUBKEYS] = {NULL};
	mc_bundle *b[MAX_AUDIT] = {NULL};
	mc_redis *r = NULL;
	size_t n = 0, i, bad = 0;
	int rc = 0;

	memset(&o, 0, sizeof o);
	memset(&ta, 0, sizeof ta);
	tool_parse(t, argc, argv, &audit_spec, &o);
	if (optind >= argc || argc - optind > MAX_AUDIT)
		usage_error("audit needs 1 to %d trusted bundles to check the store against", MAX_AUDIT);
	redis_check(&o, "audit");
	if (t->trust.npubs == 0)
		usage_say("audit needs -p PUBFILE: only trusted bundles vouch for entries");
	if (t->trust.insecure)
		usage_say("audit takes no --insecure-no-verify: only bundles whose signatures "
			  "verify vouch for entries");
	if ((rc = tool_start(t)) != 0)
		return rc;
	ta.verbose = t->verbose, ta.quiet = t->quiet, ta.findings = 1;
	if (t->json)
		ta.entries = cJSON_CreateArray();
	for (i = 0; optind + (int)i < argc && rc == 0; i++, n++) {
		/* each bundle trusted before the server is reached */
		rc = open_trusted(t, argv[optind + i], &b[i], keys + i * MAX_PUBKEYS);
		if (rc == MC_OK)
			rc = mc_bundle_check_signatures(b[i]);
		if (rc != MC_OK)
			rc = fail(t->ctx, rc);
	}
	if (rc == 0 && (rc = redis_connect(t, &o, &r)) == 0) {
		if ((rc = mc_redis_audit(r, b, n, o.triton ? MC_PULL_TRITON : 0, on_entry, &ta,
					 &bad)) != MC_OK)
			rc = fail(t->ctx, rc);
		else {
			audit_report(t, argv + optind, n, r, &ta, bad);
			rc = bad > 0 ? EXIT_VERIFY : 0;
		}
	}
	cJSON_Delete(ta.entries);
	mc_redis_free(r);
	for (i = 0; i < n; i++)
		mc_bundle_free(b[i]);
	free_keys(keys, MAX_AUDIT * MAX_PUBKEYS);
	return rc;
}
