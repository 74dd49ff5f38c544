# arguments.sh - what the command line makes of its arguments: "-" as a file is standard
# output where a command can give it its bundle (sign, merge and pull -o -, as pack's),
# and a usage error everywhere else, never a file named "-"; keygen refuses one file for
# both keys, whatever its names; and every usage error under --json, a command named or
# not, is the failure object on standard output. A label given twice is refused; a public
# key that is neither a file nor a key says both; a torch blob where a bundle is wanted
# says what it is; --now and --expires take times relative to now. A torch blob that
# records a key again (torch's PGO state, written as it changes) is no conflict.
# --progress plain tells a load's install, after its verify.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cpu-pgo.megacache"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
CMDS="keygen save pack sign verify list load export merge diff push pull audit"
export SOURCE_DATE_EPOCH=1700000000
# the temp files of -o -, here rather than in the system's temp folder (exitcodes.sh
# watches that one)
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
"$MEGACACHE" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB" 2>/dev/null ||
	bad "pack of a.mcache"
mkdir -p "$T/cwd"
cd "$T/cwd" || exit 1

# no_dash WHAT: no file named "-" was made (in the working folder, where "-" would be).
no_dash() {
	[ ! -e ./- ] && ok || { bad "$1 made a file named '-'"; rm -f ./-; }
}

# ---- 1. -o -: the bundle on standard output, the report on standard error ----
mkdir -p "$T/tmp-sign"
TMPDIR="$T/tmp-sign" "$MEGACACHE" sign "$T/a.mcache" -s "$KEYS/test2.key" -p "$PUB" -o - \
	>"$T/signed-out" 2>"$T/err"
[ $? = 0 ] && ok || bad "sign -o - failed: $(cat "$T/err")"
no_dash "sign -o -"
[ -z "$(ls -A "$T/tmp-sign")" ] && ok || bad "sign -o - left files in TMPDIR: $(ls -A "$T/tmp-sign")"
grep -qF "signed standard output with key" "$T/err" && ok ||
	bad "sign -o - does not report on standard error: $(cat "$T/err")"
run 0 "" sign "$T/a.mcache" -s "$KEYS/test2.key" -p "$PUB" -o "$T/signed.mcache"
check "sign -o - writes the bytes sign -o FILE writes" cmp -s "$T/signed-out" "$T/signed.mcache"
run 0 "2 signatures verified" verify "$T/signed-out" -p "$PUB" -p "$KEYS/test2.pub" --threshold 2

"$MEGACACHE" merge -o - "$T/a.mcache" "$T/signed.mcache" -p "$PUB" -s "$SEC" >"$T/merged-out" \
	2>"$T/err"
[ $? = 0 ] && ok || bad "merge -o - failed: $(cat "$T/err")"
no_dash "merge -o -"
grep -qF "merged 2 bundles into standard output: 7 artifacts" "$T/err" && ok ||
	bad "merge -o - does not report on standard error: $(cat "$T/err")"
run 0 "" merge -o "$T/merged.mcache" "$T/a.mcache" "$T/signed.mcache" -p "$PUB" -s "$SEC"
check "merge -o - writes the bytes merge -o FILE writes" cmp -s "$T/merged-out" "$T/merged.mcache"
ls -A "$T/cwd" | grep -q . && bad "merge -o - left files in the working folder: $(ls -A)" || ok
# the inputs' contents wait in TMPDIR, there being no folder of the output's
TMPDIR="$T/no-such-folder" run 2 "$T/no-such-folder: cannot write (a temp folder)" \
	merge -o - "$T/a.mcache" -p "$PUB" -s "$SEC"

for c in "sign $T/a.mcache -s $SEC -p $PUB -o -" "merge -o - $T/a.mcache -p $PUB -s $SEC"; do
	# shellcheck disable=SC2086
	run 2 "--json cannot be used when a bundle goes to standard output" $c --json
	no_dash "$c --json"
	if command -v script >/dev/null 2>&1; then
		script -qec "'$MEGACACHE' $c" /dev/null >"$T/tty" 2>&1
		[ $? = 2 ] && grep -qF "refusing to write a bundle to a terminal" "$T/tty" && ok ||
			bad "$c on a terminal: $(cat "$T/tty")"
		no_dash "$c on a terminal"
	fi
done
[ "$("$MEGACACHE" list "$T/a.mcache" --json |
	/usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["signatures"]))')" = 1 ] &&
	ok || bad "sign -o - changed its input"

# pull -o -, against a redis-server of its own on a socket
if command -v redis-server >/dev/null 2>&1 &&
	"$MEGACACHE" push "$T/none" -p "$PUB" --redis redis://127.0.0.1:1 2>&1 |
	grep -qvF "built without Redis support"; then
	redis-server --port 0 --unixsocket "$T/redis.sock" --save '' --appendonly no \
		--daemonize no >"$T/redis.log" 2>&1 &
	RPID=$!
	for _ in $(seq 50); do [ -S "$T/redis.sock" ] && break; sleep 0.2; done
	[ -S "$T/redis.sock" ] && ok || bad "redis-server made no socket: $(cat "$T/redis.log")"
	R="unix://$T/redis.sock"
	run 0 "" push "$T/a.mcache" -p "$PUB" --redis "$R"
	"$MEGACACHE" pull --redis "$R" -o - -s "$SEC" >"$T/pulled-out" 2>"$T/err"
	[ $? = 0 ] && ok || bad "pull -o - failed: $(cat "$T/err")"
	no_dash "pull -o -"
	grep -qF "into standard output, 1 signature" "$T/err" && ok ||
		bad "pull -o - does not report on standard error: $(cat "$T/err")"
	run 0 "" pull --redis "$R" -o "$T/pulled.mcache" -s "$SEC"
	check "pull -o - writes the bytes pull -o FILE writes" cmp -s "$T/pulled-out" "$T/pulled.mcache"
	run 2 "--json cannot be used when a bundle goes to standard output" \
		pull --redis "$R" -o - --json
	kill "$RPID" 2>/dev/null
	wait "$RPID" 2>/dev/null
fi

# ---- 2. "-" where standard input or output cannot be the file: a usage error ----
# refused WHY ARGS...: exit 2, WHY said, no file named "-" made, nothing written.
refused() {
	why=$1; shift
	rm -rf "$T/made"
	run 2 "$why" "$@"
	no_dash "megacache $*"
	[ ! -e "$T/made" ] && ok || bad "megacache $* wrote $T/made"
}
refused "-p -: keygen writes each key to a file, not to standard output" \
	keygen -W -p - -s "$T/made"
refused "-s -: keygen writes each key to a file, not to standard output" \
	keygen -W -p "$T/made" -s -
refused "--password-file -: a password is not read from standard input" \
	keygen -p "$T/made" -s "$T/made.key" --password-file -
refused "-p -: a public key is not read from standard input" verify "$T/a.mcache" -p -
refused "-p -: a public key is not read from standard input" list "$T/a.mcache" -p -
refused "-p -: a public key is not read from standard input" \
	sign "$T/a.mcache" -s "$SEC" -p - -o "$T/made"
refused "-s -: a secret key is not read from standard input" \
	sign "$T/a.mcache" -s - -p "$PUB" -o "$T/made"
for c in pack merge; do
	set -- pack -o "$T/made" --from-torch "$BLOB"
	[ $c = merge ] && set -- merge -o "$T/made" "$T/a.mcache" -p "$PUB"
	refused "-s -: a secret key is not read from standard input" "$@" -s -
	refused "--password-file -: a password is not read from standard input" "$@" -s "$SEC" \
		--password-file -
done
refused "--labels-json -: labels are not read from standard input" \
	pack -o "$T/made" --from-torch "$BLOB" --labels-json -
refused "--from-torch -: a torch blob is not read from standard input" \
	pack -o "$T/made" --from-torch -
refused "-s -: a secret key is not read from standard input" save -o "$T/made" -s -
refused "--save-to -: standard output is the command's" run --save-to - -- true
refused "--json-file -: standard output is the command's" run --json-file - -- true

# ---- 3. keygen: one file for both keys is refused, whatever its names ----
run 2 "are one file: the secret key would be lost" keygen -W -f -p "$T/same.k" -s "$T/same.k"
[ ! -e "$T/same.k" ] && ok || bad "keygen -p F -s F wrote F"
run 2 "are one file" keygen -W -p "$T/new.k" -s "$T/cwd/../new.k"
[ ! -e "$T/new.k" ] && ok || bad "keygen -p F -s DIR/../F wrote F"
run 0 "" keygen -W -p "$T/k.pub" -s "$T/k.key"
cp "$T/k.key" "$T/k.key.was"
ln -s "$T/k.key" "$T/link.pub"
ln "$T/k.key" "$T/hard.pub"
for other in "$T/link.pub" "$T/hard.pub"; do
	run 2 "are one file" keygen -W -f -p "$other" -s "$T/k.key"
	check "keygen -f -p $other -s its target left the secret key" cmp -s "$T/k.key" "$T/k.key.was"
done

# ---- 4. a usage error under --json, whatever it is: the failure object on stdout ----
# fails CMD ARGS...: megacache ARGS exits 2, standard output is a failure object valid
# against the schema, its command CMD, its error "usage".
fails() {
	want=$1; shift
	"$MEGACACHE" "$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" = 2 ] && ok || bad "megacache $* exited $got, expected 2"
	if /usr/bin/python3 -c '
import json, sys
import jsonschema
schema, out, cmd = sys.argv[1:]
j = json.load(open(out, encoding="utf-8"))
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
assert j["command"] == cmd and j["ok"] is False and j["error"] == "usage", j
assert j["exit"] == 2 and j["message"].startswith("megacache"), j
' "$SCHEMA" "$T/out" "$want" 2>"$T/perr"; then
		ok
	else
		bad "megacache $*: $(tail -n 1 "$T/perr"): $(head -c 600 "$T/out")"
	fi
}
fails "" --json
fails "" bogus --json
fails "" --json bogus
fails "" help bogus --json
for c in $CMDS; do
	fails "$c" "$c" --json --no-such-option
	fails "$c" "$c" --no-such-option --json
	fails "$c" "$c" --json --threads
	fails "$c" "$c" --json=1
done
fails verify verify "$T/a.mcache" --json

# ---- 5. a label given twice: refused, naming it, whatever the command ----
twice="label a given twice ('a=1', then 'a=2')"
refused "$twice" pack -o "$T/made" --from-torch "$BLOB" --label a=1 --label a=2
a=2 refused "label a given twice ('a=1', then 'a=2')" \
	pack -o "$T/made" --from-torch "$BLOB" --label a=1 --label-from-env a
refused "$twice" save -o "$T/made" --label a=1 --label a=2
refused "$twice" merge -o "$T/made" "$T/a.mcache" -p "$PUB" --label a=1 --label a=2
refused "$twice" run --save-to "$T/made" --label a=1 --label a=2 -- true
refused "$twice" pull --redis redis://127.0.0.1:1 -o "$T/made" --label a=1 --label a=2

# ---- 6. -p that is neither a file nor a key: both said ----
run 2 "RWQbogus: neither a readable file (No such file or directory) nor a public key (its base64 line" \
	verify "$T/a.mcache" -p RWQbogus
run 2 "$T/none.pub: neither a readable file" load "$T/a.mcache" -p "$T/none.pub" --dry-run

# ---- 7. a torch blob where a bundle is wanted: said, with what to do ----
blob="not a megacache bundle but a torch cache blob (of torch.compiler.save_cache_artifacts()); record it into one with megacache pack --from-torch"
run 2 "$BLOB: $blob" list "$BLOB"
run 2 "$DATA/mlp-cuda.megacache: $blob" verify "$DATA/mlp-cuda.megacache" -p "$PUB"
run 2 "$blob" load "$DATA/mlp-cuda-precompile.megacache" -p "$PUB" --cache-dir "$T/made"
[ ! -e "$T/made" ] && ok || bad "load of a torch blob made $T/made"
run 2 "standard input: $blob" load - -p "$PUB" --cache-dir "$T/made" <"$BLOB"
printf 'x%.0s' $(seq 1 600) >"$T/noise"
run 2 "not a megacache bundle (no tar header)" list "$T/noise"

# ---- 8. --now and --expires: times relative to now ----
run 0 "" pack -q -o "$T/e.mcache" -s "$SEC" --from-torch "$BLOB" --expires +2w
for now in -1d -30m +45s +12h +7d +13d; do
	run 0 "OK" verify "$T/e.mcache" -p "$PUB" --now "$now"
done
for now in +15d +3w; do
	run 1 "expired at" verify "$T/e.mcache" -p "$PUB" --now "$now"
done
run 2 "--now takes a Unix time" verify "$T/e.mcache" -p "$PUB" --now +2w1
run 2 "--expires -1d is not in the future" pack -o "$T/made" --from-torch "$BLOB" --expires -1d
run 2 "--now takes a Unix time" verify "$T/e.mcache" -p "$PUB" --now -1y

# ---- 9. a key a torch blob records again is its last state, not a conflict ----
# The pgo blob records its probe's PGO state twice: as first written, then with a
# dimension marked dynamic. Loading the blob leaves the last; so does the bundle, and
# nothing is said of it. Another source with other contents for that key is a conflict.
run 0 "" pack -o "$T/pgo.mcache" --from-torch "$BLOB"
grep -q "recorded twice" "$T/err" && bad "pack of the pgo blob warned: $(cat "$T/err")" || ok
pgo_hash() { # pgo_hash BUNDLE: the hash of its pgo artifact
	"$MEGACACHE" list "$1" --json | /usr/bin/python3 -c 'import json, sys
print(*[a["hash"] for a in json.load(sys.stdin)["artifacts"] if a["type"] == "pgo"])'
}
# blob_pgo OUT WHICH: a torch blob of the pgo blob's WHICH-th (0, 1) pgo record alone,
# or with WHICH "other", of other bytes
/usr/bin/python3 - "$BLOB" "$T" <<'PY'
import base64, struct, sys, zlib
d = open(sys.argv[1], "rb").read()
p = 12
def u64():
    global p
    p += 8
    return struct.unpack(">Q", d[p - 8:p])[0]
def s():
    n = u64()
    global p
    p += n
    return d[p - n:p]
pgo = []
while p < len(d):
    t, n = base64.b64decode(s()), u64()
    for _ in range(n):
        k, b = base64.b64decode(s()), s()
        if t == b"pgo":
            pgo.append((k, b))
def blob(name, k, b):
    def st(x):
        x = base64.b64encode(x)
        return struct.pack(">Q", len(x)) + x
    rest = struct.pack(">Q", 1) + st(b"pgo") + struct.pack(">Q", 1) + st(k) + struct.pack(">Q", len(b)) + b
    open(sys.argv[2] + "/" + name, "wb").write(struct.pack(">I", zlib.crc32(rest)) + rest)
blob("pgo-last.blob", *pgo[1])
blob("pgo-other.blob", pgo[1][0], pgo[1][1].replace(b"forward", b"backward"))
PY
run 0 "" pack -q -o "$T/pgo-last.mcache" --from-torch "$T/pgo-last.blob"
[ -n "$(pgo_hash "$T/pgo.mcache")" ] &&
	[ "$(pgo_hash "$T/pgo.mcache")" = "$(pgo_hash "$T/pgo-last.mcache")" ] && ok ||
	bad "the bundle of the pgo blob does not keep its last PGO state"
run 0 "" pack -o "$T/pgo2.mcache" --from-torch "$BLOB" --from-torch "$BLOB"
grep -q "recorded twice" "$T/err" && bad "pack of the pgo blob twice warned: $(cat "$T/err")" || ok
run 0 "" pack -o "$T/pgo3.mcache" --from-torch "$BLOB" --from-torch "$T/pgo-other.blob"
grep -qF "warning: pgo megacache-probe:None:: recorded twice with different contents" "$T/err" &&
	ok || bad "pack of two blobs with other PGO states did not warn: $(cat "$T/err")"

# ---- 10. --progress plain: a load's install is told too, after its verify ----
run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/progress" --progress plain
[ "$(sed -n 's/^\([a-z]*\): [0-9]*%$/\1/p' "$T/err" | uniq | tr '\n' ' ')" = "verify install " ] &&
	grep -qx "install: 100%" "$T/err" && ok || bad "load --progress plain: $(cat "$T/err")"

[ -z "$(ls -A "$TMPDIR")" ] && ok || bad "temp files left in TMPDIR: $(ls -A "$TMPDIR")"
finish
