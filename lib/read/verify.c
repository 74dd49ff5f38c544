/*
 * verify.c - the checks every use of a bundle's contents starts with, above the reader,
 * the plan and the passes: signatures and policy, then the plan; and mc_bundle_verify(),
 * which reads every byte after them. Load, export and push start here too.
 */
#include "config.h"

#include "read/read.h"

int
mc__bundle_checks(mc_bundle *b, int (*plan)(mc_bundle *b, void *ud), void *ud)
{
	int rc;

	if ((rc = mc__bundle_policy(b)) != MC_OK)
		return rc;
	return plan != NULL ? plan(b, ud) : mc__bundle_plan(b);
}

int
mc_bundle_verify(mc_bundle *b)
{
	int rc;

	if (b == NULL)
		return MC_ERR_INVALID;
	if ((rc = mc__bundle_checks(b, NULL, NULL)) != MC_OK)
		return rc;
	return mc__bundle_stream_par(b, NULL, NULL, NULL);
}
