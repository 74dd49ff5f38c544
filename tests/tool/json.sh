# json.sh - --json: every command prints one object, its report or its failure, each
# valid against doc/json-schema.json, laid out a member a line, with the same names for
# the same things and a stable error code; a usage error too. On standard output; run's,
# whose standard output is its command's, at the end of standard error (from its last
# line that is a lone "{") or in --json-file's file.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cuda.megacache"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
export SOURCE_DATE_EPOCH=1700000000
ID1=$(key_id "$PUB")
ID2=$(key_id "$KEYS/test2.pub")

# valid FILE COMMAND EXIT ASSERTION: FILE is one object valid against the schema, laid
# out as every command lays it out (a lone "{", a member a line indented by a tab, a lone
# "}"), with "command" COMMAND, "exit" EXIT and ok true exactly when that is 0, and the
# Python expression ASSERTION on it (j; "" for none) true.
valid() {
	/usr/bin/python3 - "$SCHEMA" "$@" <<'PY'
import json, sys
import jsonschema
schema, out, cmd, want, expr = sys.argv[1:]
with open(out, encoding="utf-8") as f:
    text = f.read()
j = json.loads(text)  # one object: json.loads refuses anything after it
lines = text.split("\n")
assert lines[0] == "{" and lines[-2:] == ["}", ""], text[:200]
assert all(x.startswith("\t") for x in lines[1:-2]), text[:200]
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
assert j["schema"] == 3 and j["command"] == cmd, j
assert j["exit"] == int(want) and j["ok"] is (want == "0"), j
assert eval(expr or "True"), (expr, j)
PY
}

# js EXIT COMMAND ASSERTION megacache-args...: runs megacache with --json, checks its exit
# status, and that standard output is valid (as valid says).
js() {
	want=$1; cmd=$2; expr=$3; shift 3
	"$MEGACACHE" "$@" --json >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" = "$want" ] && ok || bad "megacache $* --json exited $got, expected $want: $(head -c 400 "$T/err")"
	valid "$T/out" "$cmd" "$want" "$expr" && ok || bad "megacache $* --json: $(head -c 1500 "$T/out")"
}

mkdir -p "$T/empty"
printf 'not a bundle\n' >"$T/notabundle.mcache"

# --version --json: what this megacache reads and writes, for a pipeline to check
js 0 version "j['format_versions'] == {'read': [1, 2], 'write': [1, 2], 'default': 2} and j['version'] == j['library_version'] == '$("$MEGACACHE" --version | cut -d' ' -f2)' and 'verify' in j['commands'] and j['torch_formats'] == ['2.7', 'current'] and isinstance(j['redis'], bool)" \
	--version
"$MEGACACHE" --version --bogus >"$T/out" 2>"$T/err"
[ $? = 2 ] && grep -qF -- "--version takes no option but --json" "$T/err" && [ ! -s "$T/out" ] && ok ||
	bad "--version --bogus: $(cat "$T/out" "$T/err")"

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
# --jso is not --json: long options by their whole names only; nothing made
"$MEGACACHE" keygen -p "$T/k3.pub" -s "$T/k3.key" -W --jso >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 2 ] && grep -qF "unknown option '--jso' (options are never abbreviated: did you mean --json?)" "$T/err" &&
	[ ! -e "$T/k3.pub" ] && [ ! -e "$T/k3.key" ] && ok || bad "keygen --jso: exit $r: $(cat "$T/out" "$T/err")"

# A bundle of a newer format: its own error and exit status (upgrade), for every command
# that reads one, never "manifest" (a broken one, exit 1)
FUT="$MC_SRCDIR/format/vectors/manifest-future-version.mcache"
js 3 verify 'j["error"] == "unsupported_version" and "upgrade megacache" in j["message"]' \
	verify "$FUT" -p "$PUB"
js 3 load 'j["error"] == "unsupported_version" and "upgrade megacache" in j["message"]' \
	load "$FUT" -p "$PUB" --cache-dir "$T/fut"
js 3 list 'j["error"] == "unsupported_version"' list "$FUT"
[ ! -e "$T/fut" ] && ok || bad "a bundle of a newer format installed something"
js 3 diff 'j["error"] == "unsupported_version"' diff "$FUT" "$T/a.mcache"
js 1 verify 'j["error"] == "manifest"' verify "$MC_SRCDIR/format/vectors/manifest-duplicate.mcache" -p "$PUB"

# sign
js 0 sign "j['signature_count'] == 2 and j['key_id'] == '$ID2' and j['output'].endswith('two.mcache') and j['signatures_checked'] is True" \
	sign "$T/a.mcache" -s "$KEYS/test2.key" -p "$PUB" -o "$T/two.mcache"
js 2 sign 'j["error"] == "not_bundle"' sign "$T/notabundle.mcache" -s "$SEC" -p "$PUB" -o "$T/x.mcache"
# sign checks before it endorses: a bundle whose signature by a trusted key does not
# verify is not signed; unchecked only by the whole --insecure-no-verify, which says so
cp "$T/a.mcache" "$T/tampered-label.mcache"
/usr/bin/python3 - "$T/tampered-label.mcache" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
i = d.index(b'"created":')  # a byte of the signed manifest, the JSON kept valid
d[i + 11] = ord("9") if d[i + 11] != ord("9") else ord("8")
open(p, "wb").write(bytes(d))
PY
js 1 sign 'j["error"] == "bad_signature"' sign "$T/tampered-label.mcache" -s "$KEYS/test2.key" -p "$PUB" -o "$T/ts.mcache"
js 1 sign 'j["error"] == "untrusted_signature"' sign "$T/tampered-label.mcache" -s "$KEYS/test2.key" -p "$KEYS/test2.pub" -o "$T/ts.mcache"
[ ! -e "$T/ts.mcache" ] && ok || bad "sign of a bundle that did not verify wrote $T/ts.mcache"
js 0 sign "j['signatures_checked'] is False" sign "$T/tampered-label.mcache" -s "$KEYS/test2.key" --insecure-no-verify -o "$T/ts.mcache"
grep -qF "warning: signing $T/tampered-label.mcache unchecked (--insecure-no-verify)" "$T/err" && ok ||
	bad "sign --insecure-no-verify did not warn: $(cat "$T/err")"
# Each signature's state, the same in verify, list and load: ts.mcache has the CI key's
# signature, broken by the changed byte, and test2's, made after it.
S_BROKEN="{'key_id': '$ID1', 'state': 'broken'}"
S_OK2="{'key_id': '$ID2', 'state': 'verified'}"
# (a bundle keeps its signatures in key id order)
js 1 verify "j['error'] == 'bad_signature' and sorted(j['signatures'], key=str) == sorted([$S_BROKEN, $S_OK2], key=str)" \
	verify "$T/ts.mcache" -p "$PUB" -p "$KEYS/test2.pub"
js 1 load "j['error'] == 'bad_signature' and sorted(j['signatures'], key=str) == sorted([$S_BROKEN, $S_OK2], key=str)" \
	load "$T/ts.mcache" -p "$PUB" -p "$KEYS/test2.pub" --cache-dir "$T/empty" --dry-run
js 0 verify "sorted(j['signatures'], key=str) == sorted([{'key_id': '$ID1', 'state': 'not_checked'}, $S_OK2], key=str) and j['trusted_signers'] == ['$ID2'] and j['untrusted_signers'] == ['$ID1']" \
	verify "$T/ts.mcache" -p "$KEYS/test2.pub"
js 0 list "sorted(j['signatures'], key=str) == sorted([$S_BROKEN, $S_OK2], key=str) and j['keys_given'] is True" \
	list "$T/ts.mcache" -p "$PUB" -p "$KEYS/test2.pub"
js 0 list "[s['state'] for s in j['signatures']] == ['not_checked'] * 2 and j['keys_given'] is False" \
	list "$T/ts.mcache"

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
# several bundles: one report, "bundles" each one's object in order (a failure naming
# its bundle), the worst status: 2 over 3 over 1 over 0
js 0 verify '"bundles" not in j and j["bundle"].endswith("a.mcache")' verify "$T/a.mcache" -p "$PUB"
js 0 verify "[b['bundle'] for b in j['bundles']] == ['$T/a.mcache', '$T/two.mcache'] and all(b['ok'] and b['command'] == 'verify' and b['artifact_count'] == 10 for b in j['bundles'])" \
	verify "$T/a.mcache" "$T/two.mcache" -p "$PUB"
js 1 verify "'error' not in j and [(b['bundle'], b['exit'], b.get('error')) for b in j['bundles']] == [('$T/a.mcache', 0, None), ('$T/tampered-label.mcache', 1, 'bad_signature'), ('$T/two.mcache', 0, None)] and j['bundles'][1]['signatures'] == [{'key_id': '$ID1', 'state': 'broken'}]" \
	verify "$T/a.mcache" "$T/tampered-label.mcache" "$T/two.mcache" -p "$PUB"
js 3 verify "[b['exit'] for b in j['bundles']] == [1, 3] and j['bundles'][1]['error'] == 'unsupported_version'" \
	verify "$T/tampered-label.mcache" "$FUT" -p "$PUB"
js 2 verify "[b['exit'] for b in j['bundles']] == [3, 2, 1, 0] and j['bundles'][1]['error'] == 'not_bundle'" \
	verify "$FUT" "$T/notabundle.mcache" "$T/tampered-label.mcache" "$T/a.mcache" -p "$PUB"
js 0 verify "[b['bundle'] for b in j['bundles']] == ['$T/a.mcache', '-']" verify "$T/a.mcache" - -p "$PUB" <"$T/two.mcache"
js 2 verify 'j["error"] == "usage" and "only one of the bundles" in j["message"]' verify - - -p "$PUB"
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
js 0 export 'j["exported"] == 10 and j["artifact_count"] == 10 and j["torch_format"] == "current" and j["left_out"] == {}' \
	export "$T/a.mcache" --torch "$T/x.blob" -p "$PUB"
js 1 export 'j["error"] == "untrusted_signature"' export "$T/a.mcache" --torch "$T/y.blob" -p "$KEYS/test2.pub"

# merge
js 0 merge 'j["artifact_count"] == 10 and j["bundles"][1].endswith("two.mcache") and j["output"].endswith("m.mcache") and j["signed"] and j["conflicts"] == 0' \
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

# One rule for every report of a bundle read: "bundle" names it and its facts are told
# alike (those of a verified bundle with the signatures' states as verified); "output"
# is the path written; a report that ends with exit 1 has ok false and no error.
js 0 verify 'j["format_version"] == 2' verify "$T/labelled.mcache" -p "$PUB"
cp "$T/out" "$T/f-verify"
js 0 load 'j["bundle"].endswith("labelled.mcache")' load "$T/labelled.mcache" -p "$PUB" --cache-dir "$T/fc" --triton-dir "$T/ft"
cp "$T/out" "$T/f-load"
js 0 export 'j["output"].endswith("f.blob")' export "$T/labelled.mcache" -p "$PUB" --torch "$T/f.blob"
cp "$T/out" "$T/f-export"
js 0 sign 'j["output"].endswith("f2.mcache") and j["signature_count"] == 2' \
	sign "$T/labelled.mcache" -p "$PUB" -s "$KEYS/test2.key" -o "$T/f2.mcache"
cp "$T/out" "$T/f-sign"
js 0 list 'j["keys_given"]' list "$T/labelled.mcache" -p "$PUB"
cp "$T/out" "$T/f-list"
"$MEGACACHE" run --json-file "$T/f-run" -b "$T/labelled.mcache" -p "$PUB" --cache-dir "$T/fc" --triton-dir "$T/ft" -- true 2>"$T/err"
/usr/bin/python3 - "$T" "$ID1" <<'PY' && ok || bad "the facts of labelled.mcache differ between reports: $(cat "$T/f-verify" "$T/f-load")"
import json, sys
t, id1 = sys.argv[1:]
facts = ("format_version", "bundle_version", "created", "expires", "labels", "signatures", "artifact_count")
want = {"format_version": 2, "bundle_version": 0, "created": 1700000000, "labels": {"team": "ml"},
        "signatures": [{"key_id": id1, "state": "verified"}], "artifact_count": 10}
for c in ("verify", "load", "export", "sign", "list", "run"):
    j = json.load(open(t + "/f-" + c))
    if c == "run":
        j = j["bundles"][0]
    assert j["bundle"].endswith("labelled.mcache"), (c, j)
    got = {k: j[k] for k in facts if k in j}
    assert got.pop("expires") > want["created"], (c, got)
    assert got == want, (c, got)
PY
js 0 pack 'j["output"].endswith("o.mcache") and "bundle" not in j' pack -o "$T/o.mcache" -s "$SEC" --from-torch "$BLOB"
js 1 diff 'j["bundles"] == ["'"$T/a.mcache"'", "'"$T/labelled.mcache"'"] and "error" not in j and j["facts"] == {"labels": [{}, {"team": "ml"}], "expires": [None, j["facts"]["expires"][1]]}' \
	diff "$T/a.mcache" "$T/labelled.mcache"

# push, pull, audit: their failures before a server is reached (tests/tool/fleet.sh has
# their reports, against a real Redis)
if "$MEGACACHE" pull --redis redis://127.0.0.1:1/0 -o "$T/p.mcache" 2>&1 | grep -q "built without Redis"; then
	js 2 push 'j["error"] == "unsupported"' push "$T/a.mcache" -p "$PUB" --redis redis://127.0.0.1:1/0
else
	js 2 push 'j["error"] in ("remote", "unsupported") and "127.0.0.1:1" in j["message"]' \
		push "$T/a.mcache" -p "$PUB" --redis redis://127.0.0.1:1/0
	js 1 push 'j["error"] == "untrusted_signature"' push "$T/a.mcache" -p "$KEYS/test2.pub" --redis redis://127.0.0.1:1/0
	js 2 push 'j["error"] == "usage" and "needs -p" in j["message"]' push "$T/a.mcache" --redis redis://127.0.0.1:1/0
	js 2 pull 'j["error"] == "usage" and "-o BUNDLE" in j["message"]' pull --redis redis://127.0.0.1:1/0
	js 2 pull 'j["error"] == "invalid" and "unknown scheme" in j["message"]' pull --redis http://x -o "$T/p.mcache"
	js 1 audit 'j["error"] == "untrusted_signature"' audit --redis redis://127.0.0.1:1/0 -p "$KEYS/test2.pub" "$T/a.mcache"
fi

# run: standard output is the command's; the object ends standard error
mkdir -p "$T/rc"
# jsrun EXIT ASSERTION run-args...: runs megacache run --json; as js, for standard error
# from its last line that is a lone "{" (valid: to its end, nothing after the object),
# which ends with a line end.
jsrun() {
	want=$1; expr=$2; shift 2
	"$MEGACACHE" run --json "$@" >"$T/rout" 2>"$T/rerr"
	got=$?
	[ "$got" = "$want" ] && ok || bad "megacache run --json $* exited $got, expected $want: $(head -c 400 "$T/rerr")"
	awk '/^\{$/ { o = "" } { o = o $0 "\n" } END { printf "%s", o }' "$T/rerr" >"$T/rlast"
	[ "$(tail -c 1 "$T/rerr" | od -An -c | tr -d ' ')" = '\n' ] &&
		valid "$T/rlast" run "$want" "$expr" && ok || bad "megacache run --json $*: $(tail -c 1500 "$T/rerr")"
}
jsrun 0 'len(j["bundles"]) == 1 and {k: v for k, v in j["bundles"][0].items() if k not in ("bundle", "created", "signatures")} == {"format_version": 2, "bundle_version": 0, "labels": {}, "artifact_count": 10, "loaded": True, "installed": 10, "replaced": 0, "unchanged": 0, "gpu_targets": [], "host_gpu_targets": [], "gpu_targets_checked": False, "skipped": 0, "skipped_kernels": 0, "error": None, "message": None} and j["bundles"][0]["signatures"] == [{"key_id": "'"$ID1"'", "state": "verified"}] and j["child"] == {"argv": ["sh", "-c", "echo child-out; echo child-err >&2"], "started": True, "exit_status": 0, "signal": None} and j["save"] is None and j["error"] is None' \
	-b "$T/a.mcache" -p "$PUB" --cache-dir "$T/rc" --triton-dir "$T/rt" -- sh -c 'echo child-out; echo child-err >&2'
[ "$(cat "$T/rout")" = child-out ] && ok || bad "run --json: standard output is not the command's alone: $(cat "$T/rout")"
grep -qx child-err "$T/rerr" && ! grep -q warmed "$T/rerr" && ok || bad "run --json: standard error: $(cat "$T/rerr")"
# The command fails after adding an artifact: its status, and the save still made
jsrun 3 'j["error"] == "command_failed" and "exited with status 3" in j["message"] and j["child"]["exit_status"] == 3 and j["bundles"][0]["unchanged"] == 10 and j["save"] == {"output": j["save"]["output"], "written": True, "artifact_count": 1, "bytes": 9, "signature_count": 1, "signed": True}' \
	-b "$T/a.mcache" -p "$PUB" --cache-dir "$T/rc" --triton-dir "$T/rt" --save-to "$T/new.mcache" -s "$SEC" -- \
	sh -c 'mkdir -p "$0/zz" && echo "print(1)" > "$0/zz/cjsonnew.py" && exit 3' "$T/rc"
run 0 "" verify "$T/new.mcache" -p "$PUB"
# --json-file: the object there, standard error left to the command
"$MEGACACHE" run --json-file "$T/r.json" -b "$T/a.mcache" -b "$T/new.mcache" -p "$PUB" --cache-dir "$T/rc" --triton-dir "$T/rt" \
	--save-to "$T/none.mcache" -s "$SEC" -- sh -c 'echo e >&2' >"$T/rout" 2>"$T/rerr"
[ $? = 0 ] && [ "$(cat "$T/rerr")" = e ] && ok || bad "run --json-file: $(cat "$T/rerr")"
valid "$T/r.json" run 0 'j["save"]["written"] is False and j["save"]["artifact_count"] == 0 and [b["unchanged"] for b in j["bundles"]] == [10, 1]' &&
	ok || bad "run --json-file: $(cat "$T/r.json")"
# the failures: before the command (the common object), and of the command
jsrun 143 'j["error"] == "command_failed" and j["child"]["signal"] == 15 and j["child"]["exit_status"] is None' \
	-- sh -c 'kill -TERM $$'
jsrun 127 'j["error"] == "command_not_started" and "no-such-program" in j["message"] and not j["child"]["started"]' \
	-- "$T/no-such-program"
jsrun 1 'j["error"] == "untrusted_signature" and set(j) == {"schema", "command", "ok", "error", "message", "exit"}' \
	-b "$T/a.mcache" -p "$KEYS/test2.pub" -- touch "$T/ran"
[ ! -e "$T/ran" ] && ok || bad "run --json ran its command on an untrusted bundle"
jsrun 2 'j["error"] == "usage" and "needs -p" in j["message"]' -b "$T/a.mcache" -- true
jsrun 2 'j["error"] == "usage" and "--bogus" in j["message"]' --bogus -- true
jsrun 0 'j["bundles"][0]["loaded"] is False and j["bundles"][0]["error"] == "untrusted_signature" and j["child"]["exit_status"] == 0' \
	-b "$T/a.mcache" -p "$KEYS/test2.pub" --allow-cold -- true
# the save fails after the command: the command's work is told, and what failed
mkdir -p "$T/gone"
jsrun 2 'j["error"] == "io" and "gone" in j["message"] and j["child"]["exit_status"] == 0 and j["save"]["written"] is False and j["save"]["artifact_count"] == 1' \
	--cache-dir "$T/rc2" --triton-dir "$T/rt" --save-to "$T/gone/n.mcache" -- \
	sh -c 'mkdir -p "$0/zz" && echo "print(2)" > "$0/zz/cjsongone.py" && rm -r "$1"' "$T/rc2" "$T/gone"
# a folder is no file to save to: said before the command runs
jsrun 2 'j["error"] == "io" and "is a folder" in j["message"]' --save-to "$T/rc" -- touch "$T/ran"
[ ! -e "$T/ran" ] && ok || bad "run ran its command with a folder for --save-to"
# a --json-file that cannot be written: said, exit 2, nothing run
"$MEGACACHE" run --json-file "$T/nodir/r.json" -- touch "$T/ran" 2>"$T/rerr"
[ $? = 2 ] && [ ! -e "$T/ran" ] && grep -qF "cannot write $T/nodir/r.json" "$T/rerr" && ok || bad "run --json-file into a missing folder: $(cat "$T/rerr")"

finish
