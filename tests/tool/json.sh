# json.sh - --json: every command (but run) prints one object on standard output, its
# report or its failure, each valid against doc/json-schema.json, with the same names
# for the same things and a stable error code; a usage error too.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cuda.megacache"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
export SOURCE_DATE_EPOCH=1700000000
ID1=$(sed -n 's/^untrusted comment: minisign public key \([0-9A-F]*\).*/\1/p' "$PUB")
ID2=$(sed -n 's/^untrusted comment: minisign public key \([0-9A-F]*\).*/\1/p' "$KEYS/test2.pub")

# js EXIT COMMAND ASSERTION megacache-args...: runs megacache with --json, checks its exit
# status, that standard output is one object valid against the schema with "command"
# COMMAND, and the Python expression ASSERTION on it (j; "" for none).
js() {
	want=$1; cmd=$2; expr=$3; shift 3
	"$MEGACACHE" "$@" --json >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" = "$want" ] && ok || bad "megacache $* --json exited $got, expected $want: $(head -c 400 "$T/err")"
	/usr/bin/python3 - "$SCHEMA" "$T/out" "$cmd" "$want" "${expr:-True}" <<'PY' && ok || bad "megacache $* --json: $(head -c 1500 "$T/out")"
import json, sys
import jsonschema
schema, out, cmd, want, expr = sys.argv[1:]
with open(out, encoding="utf-8") as f:
    text = f.read()
j = json.loads(text)  # one object: json.loads refuses anything after it
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
assert j["schema"] == 1 and j["command"] == cmd, j
assert j["ok"] is (want == "0" or (cmd == "diff" and want == "1")), j
assert j["ok"] or j["exit"] == int(want), j
assert eval(expr), (expr, j)
PY
}

mkdir -p "$T/empty"
printf 'not a bundle\n' >"$T/notabundle.mcache"

# keygen
js 0 keygen 'j["encrypted"] is False and len(j["key_id"]) == 16' keygen -p "$T/k.pub" -s "$T/k.key" -W
js 2 keygen 'j["error"] == "exists" and j["exit"] == 2 and "k.key" in j["message"]' \
	keygen -p "$T/k.pub" -s "$T/k.key" -W
js 2 keygen 'j["error"] == "io" and "absent.pw" in j["message"]' \
	keygen -p "$T/k2.pub" -s "$T/k2.key" --password-file "$T/absent.pw"

# pack
js 0 pack 'j["artifact_count"] == 10 and j["signature_count"] == 1 and j["signed"] is True' \
	pack -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB"
js 2 pack 'j["error"] == "no_artifacts" and "no artifacts found" in j["message"]' \
	pack -o "$T/p.mcache" --from-dir "$T/empty"
[ "$(grep -c '^megacache: no artifacts' "$T/err")" = 1 ] && ok || bad "pack --json: the human line is not on stderr: $(cat "$T/err")"
js 2 pack 'j["error"] == "torch_format"' pack -o "$T/p.mcache" --from-torch "$T/notabundle.mcache"

# usage errors: the object too (code usage, exit 2), and the text still on stderr
js 2 pack 'j["error"] == "usage" and "pack needs -o" in j["message"]' pack --from-torch "$BLOB"
grep -qF "Try 'megacache pack --help'" "$T/err" && ok || bad "a --json usage error lost its text: $(cat "$T/err")"
js 2 verify 'j["error"] == "usage" and "--bogus" in j["message"]' verify "$T/a.mcache" --bogus
js 2 load 'j["error"] == "usage"' load "$T/a.mcache" -p "$PUB" --threshold x
# --jso is --json to getopt: the object names its command
"$MEGACACHE" keygen -p "$T/k3.pub" -s "$T/k3.key" -W --jso >"$T/out" 2>"$T/err" &&
	/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["command"] == "keygen"' "$T/out" &&
	ok || bad "keygen --jso: $(cat "$T/out" "$T/err")"

# sign
js 0 sign "j['signature_count'] == 2 and j['key_id'] == '$ID2' and j['output'].endswith('two.mcache')" \
	sign "$T/a.mcache" -s "$KEYS/test2.key" -o "$T/two.mcache"
js 2 sign 'j["error"] == "not_bundle"' sign "$T/notabundle.mcache" -s "$SEC" -o "$T/x.mcache"

# verify: names, not English, for the failures
js 0 verify "j['trusted_signers'] == ['$ID1'] and j['untrusted_signers'] == ['$ID2'] and j['signature_count'] == 2 and j['artifact_count'] == 10 and j['created'] == 1700000000" \
	verify "$T/two.mcache" -p "$PUB"
run 0 "" pack -q -o "$T/labelled.mcache" -s "$SEC" --from-torch "$BLOB" --label team=ml --expires +30d
js 0 verify 'j["labels"] == {"team": "ml"} and j["expires"] > j["created"]' \
	verify "$T/labelled.mcache" -p "$PUB"
js 1 verify 'j["error"] == "untrusted_signature" and j["exit"] == 1' verify "$T/a.mcache" -p "$KEYS/test2.pub"
js 1 verify 'j["error"] == "rollback"' verify "$T/a.mcache" -p "$PUB" --min-version 5
js 1 verify 'j["error"] == "threshold"' verify "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub" -p "$T/k.pub" --threshold 3
js 2 verify 'j["error"] == "not_bundle"' verify "$T/notabundle.mcache" -p "$PUB"
head -c 3000 "$T/a.mcache" >"$T/cut.mcache"
js 1 verify 'j["error"] == "malformed"' verify "$T/cut.mcache" -p "$PUB"

# list and list --explain: the same names as load's
js 0 list "sorted(j['signers']) == sorted(['$ID1', '$ID2']) and j['signature_count'] == 2 and j['artifact_count'] == len(j['artifacts']) == 10" \
	list "$T/two.mcache"
js 0 list 'j["explain"] and j["would_install"] == 10 and j["unchanged"] == 0' \
	list "$T/a.mcache" --explain --cache-dir "$T/c" --triton-dir "$T/t"
js 2 list 'j["error"] == "io"' list "$T/absent.mcache"

# load, then again: unchanged, as list --explain says it
js 0 load 'j["installed"] == 10 and j["signatures_checked"] and {a["action"] for a in j["artifacts"]} == {"installed"}' \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --triton-dir "$T/t"
js 0 load 'j["dry_run"] and j["unchanged"] == 10 and j["would_install"] == 0' \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --triton-dir "$T/t" --dry-run
js 0 list 'j["unchanged"] == 10 and {a["action"] for a in j["artifacts"]} == {"unchanged"}' \
	list "$T/a.mcache" --explain --cache-dir "$T/c" --triton-dir "$T/t"
js 1 load 'j["error"] == "untrusted_signature" and "trusted key" in j["message"]' \
	load "$T/a.mcache" -p "$KEYS/test2.pub" --cache-dir "$T/c2"
[ ! -e "$T/c2" ] && ok || bad "a refused load made its folder"
js 2 load 'j["error"] == "invalid" and "nosuchuser-json" in j["message"]' \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c3" --owner nosuchuser-json
# -q quiets the text, not the object
js 0 load 'j["unchanged"] == 10' load -q "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --triton-dir "$T/t"

# export
js 0 export 'j["artifact_count"] == 10 and j["torch_format"] == "current" and j["left_out"] == {}' \
	export "$T/a.mcache" --torch "$T/x.blob" -p "$PUB"
js 1 export 'j["error"] == "untrusted_signature"' export "$T/a.mcache" --torch "$T/y.blob" -p "$KEYS/test2.pub"

# merge
js 0 merge 'j["artifact_count"] == 10 and j["inputs"][1].endswith("two.mcache") and j["signed"] and j["conflicts"] == 0' \
	merge -o "$T/m.mcache" "$T/a.mcache" "$T/two.mcache" -p "$PUB" -s "$SEC"
js 2 merge 'j["error"] == "unsigned_output"' merge -o "$T/u.mcache" "$T/a.mcache" -p "$PUB"

# diff: exit 1 when they differ, yet a report
js 0 diff 'j["same"] and j["added"] == []' diff "$T/a.mcache" "$T/m.mcache"
run 0 "" pack -q -o "$T/cpu.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache"
js 1 diff 'not j["same"] and len(j["added"]) > 0 and len(j["removed"]) == 10' diff "$T/a.mcache" "$T/cpu.mcache"
js 2 diff 'j["error"] == "not_bundle"' diff "$T/a.mcache" "$T/notabundle.mcache"

# save
mkdir -p "$T/ic"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/ic"
IND=$(find "$T/ic" -mindepth 1 -maxdepth 1 -type d | head -n 1)
js 0 save 'j["dry_run"] and j["artifact_count"] > 0 and j["folders"][0]["artifact_count"] == j["artifact_count"]' \
	save -o "$T/s.mcache" --dry-run --cache-dir "$IND" --triton-dir "$T/none"
js 2 save 'j["error"] == "no_artifacts"' save -o "$T/s.mcache" --cache-dir "$T/empty" --triton-dir "$T/none"

finish
