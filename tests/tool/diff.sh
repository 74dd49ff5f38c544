# diff.sh - diff tells every difference a verify or a load acts on: beside the artifacts,
# the bundle version, the labels, the expiry, the signers and the format version, in
# text and in --json, with exit status 1; bundles alike exit 0.
. "$(dirname "$0")/lib.sh"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cuda.megacache"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
export SOURCE_DATE_EPOCH=1700000000
ID1=$(key_id "$KEYS/test.pub")
ID2=$(key_id "$KEYS/test2.pub")
X1=4102444800 # 2100-01-01
X2=4102531200 # 2100-01-02

# pk NAME TEAM [pack options]: a bundle of the same artifacts, labelled team=TEAM, the
# options given over these (a label cannot be given twice)
pk() {
	name=$1 team=$2; shift 2
	"$MEGACACHE" pack -q -o "$T/$name.mcache" -s "$SEC" --from-torch "$BLOB" --bundle-version 1 \
		--label team="$team" --expires 2100-01-01 "$@" || bad "pack of $name"
}
pk base ml
pk again ml
pk version ml --bundle-version 2
pk label ai
pk expires ml --expires 2100-01-02
pk format ml --format-version 1
# signed by another key alone (pk's -s would add one)
"$MEGACACHE" pack -q -o "$T/signer.mcache" -s "$KEYS/test2.key" --from-torch "$BLOB" \
	--bundle-version 1 --label team=ml --expires 2100-01-01 || bad "pack of signer"

# differs B LINE FACTS: diff base B exits 1, says LINE (text), and its --json names
# exactly the facts FACTS (a Python expression), valid against the schema.
differs() {
	b=$1; line=$2; facts=$3
	run 1 "" diff "$T/base.mcache" "$T/$b.mcache"
	grep -qxF -- "$line" "$T/out" && grep -qx "1 bundle fact differs" "$T/out" && ok ||
		bad "diff base $b: no '$line': $(cat "$T/out")"
	"$MEGACACHE" diff "$T/base.mcache" "$T/$b.mcache" --json >"$T/json" 2>"$T/err"
	r=$?
	[ "$r" = 1 ] && /usr/bin/python3 - "$SCHEMA" "$T/json" "$facts" <<'PY' && ok || bad "diff base $b --json: exit $r: $(cat "$T/json" "$T/err")"
import json, sys
import jsonschema
schema, out, facts = sys.argv[1:]
j = json.load(open(out, encoding="utf-8"))
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
assert j["same"] is False and j["facts"] == eval(facts), j
PY
}

differs version "~ bundle version: 1 -> 2" '{"bundle_version": [1, 2]}'
differs label "~ label team: 'ml' -> 'ai'" '{"labels": [{"team": "ml"}, {"team": "ai"}]}'
differs expires "~ expires: 2100-01-01T00:00:00Z -> 2100-01-02T00:00:00Z" "{'expires': [$X1, $X2]}"
differs signer "~ signers: $ID1 -> $ID2" "{'signers': [['$ID1'], ['$ID2']]}"
# Format 1 hashes autotune's files with BLAKE2b, which compare as changed: the fact is
# told beside them.
run 1 "" diff "$T/base.mcache" "$T/format.mcache"
grep -qx "~ format version: 2 -> 1" "$T/out" && ok || bad "diff across formats: $(cat "$T/out")"
"$MEGACACHE" diff "$T/base.mcache" "$T/format.mcache" --json >"$T/json"
/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["facts"] == {"format_version": [2, 1]}' "$T/json" &&
	ok || bad "diff across formats --json: $(cat "$T/json")"
# a label only one bundle has, and no expiry against one
"$MEGACACHE" pack -q -o "$T/bare.mcache" -s "$SEC" --from-torch "$BLOB" --bundle-version 1 || bad "pack of bare"
run 1 "" diff "$T/bare.mcache" "$T/base.mcache"
grep -qx "~ label team: none -> 'ml'" "$T/out" && grep -qx "~ expires: none -> 2100-01-01T00:00:00Z" "$T/out" &&
	grep -qx "2 bundle facts differ" "$T/out" && ok || bad "diff of a bare bundle: $(cat "$T/out")"

# alike: exit 0, nothing told but the totals
run 0 "" diff "$T/base.mcache" "$T/again.mcache"
[ "$(cat "$T/out")" = "0 added, 0 removed, 0 changed" ] && ok || bad "diff of alike bundles: $(cat "$T/out")"
"$MEGACACHE" diff "$T/base.mcache" "$T/again.mcache" --json >"$T/json"
r=$?
[ "$r" = 0 ] && /usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["same"] is True and j["facts"] == {} and j["ok"] is True, j' "$T/json" &&
	ok || bad "diff --json of alike bundles: exit $r: $(cat "$T/json")"
# -q: the status alone
run 1 "" diff -q "$T/base.mcache" "$T/version.mcache"
[ ! -s "$T/out" ] && ok || bad "diff -q printed: $(cat "$T/out")"

finish
