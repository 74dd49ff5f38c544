# exitcodes.sh - every command's exit status, as deploy pipelines act on it: 0 success,
# 1 verification or integrity failure, 2 usage or system error. Each command on its
# success path and its main error paths; diff's 1 for bundles that differ; --threshold
# above the keys given; the forms of --expires and --now and the times list and verify
# print; one --password-file per encrypted key; then random arguments for each command,
# which must end in 0, 1 or 2 (never a signal or another status) and write nothing
# outside their scratch folder.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cpu-pgo.megacache"
# No terminal to ask a password on: a command that would ask fails at once.
NOTTY=
command -v setsid >/dev/null 2>&1 && NOTTY="setsid -w"

# The fixtures: a signed bundle, a second one, one tampered with, a file that is no bundle.
"$MEGACACHE" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB" || bad "pack of a.mcache"
"$MEGACACHE" pack -q -o "$T/b.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" ||
	bad "pack of b.mcache"
cp "$T/a.mcache" "$T/tampered.mcache"
size=$(wc -c < "$T/a.mcache")
printf '\377' | dd of="$T/tampered.mcache" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
echo "not a bundle" > "$T/notabundle.mcache"
mkdir -p "$T/empty" "$T/cache"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/cache"
CACHE=$(dirname "$(find "$T/cache" -type d -name fxgraph | head -1)")
[ -d "$CACHE" ] && ok || bad "no cache dir in mlp-cuda-cachedir.tar.gz"

# 1. No command, an unknown one, --help, --version.
"$MEGACACHE" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "no command: not exit 2"
run 2 "unknown command 'frobnicate'" frobnicate
run 0 "usage: megacache" --help
run 0 "bundle format" --version

# 2. Each command: success, then its main errors.
run 0 "" keygen -q -W -p "$T/k.pub" -s "$T/k.key"
run 2 "file exists" keygen -W -p "$T/k.pub" -s "$T/k.key"
run 2 "unknown or ambiguous option" keygen --bogus
run 2 "" keygen -W

run 0 "saved" save -o "$T/s.mcache" --cache-dir "$CACHE" --triton-dir "$T/empty"
run 2 "needs -o" save --cache-dir "$CACHE"
run 2 "--level takes 1 to 19" save -o "$T/s2.mcache" --level 99 --cache-dir "$CACHE"
run 2 "nothing to save" save -o "$T/s2.mcache" --cache-dir "$T/empty" --triton-dir "$T/empty"

run 0 "" run --cache-dir "$T/r" -b "$T/a.mcache" -p "$PUB" -- true
run 1 "" run --cache-dir "$T/r" -- false
run 2 "run needs a command" run -b "$T/a.mcache" -p "$PUB"
run 1 "no signature by a trusted key" run --cache-dir "$T/r" -b "$T/a.mcache" -p "$KEYS/other.pub" -- true
run 1 "do not match their hash" run --cache-dir "$T/r" -b "$T/tampered.mcache" -p "$PUB" -- true
run 2 "not a megacache bundle" run --cache-dir "$T/r" -b "$T/notabundle.mcache" -p "$PUB" -- true

run 0 "packed" pack -o "$T/p.mcache" --from-torch "$BLOB"
run 2 "pack needs -o" pack --from-torch "$BLOB"
run 2 "--level takes 1 to 19" pack -o "$T/p2.mcache" --from-torch "$BLOB" --level x
run 2 "absent.blob" pack -o "$T/p2.mcache" --from-torch "$T/absent.blob"
run 2 "not a valid torch cache blob" pack -o "$T/p2.mcache" --from-torch "$T/notabundle.mcache"
# No artifacts: exit 2, one line; with --json also an object saying so on stdout.
run 2 "no artifacts found" pack -o "$T/p2.mcache" --from-dir "$T/empty"
[ "$(wc -l < "$T/err")" = 1 ] && ok || bad "pack with no artifacts: not one line: $(cat "$T/err")"
run 2 "no artifacts found" pack -o "$T/p2.mcache" --from-dir "$T/empty" --json
"$MC_BUILDDIR/tests/jsoncheck" < "$T/out" && grep -q '"error":[[:space:]]*"no_artifacts"' "$T/out" &&
	ok || bad "pack --json with no artifacts: $(cat "$T/out")"
[ ! -e "$T/p2.mcache" ] && ok || bad "a failed pack wrote a bundle"

cp "$T/a.mcache" "$T/sign.mcache"
run 0 "" sign "$T/sign.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub"
run 2 "" sign "$T/sign.mcache"
run 2 "sign needs -p PUBFILE" sign "$T/sign.mcache" -s "$KEYS/test2.key"
run 2 "absent.mcache" sign "$T/absent.mcache" -s "$SEC" -p "$KEYS/test.pub"
run 2 "not a megacache bundle" sign "$T/notabundle.mcache" -s "$SEC" -p "$KEYS/test.pub" -o "$T/x.mcache"
run 1 "do not match their hash" sign "$T/tampered.mcache" -s "$SEC" -p "$KEYS/test.pub" -o "$T/x.mcache"

run 0 "OK (" verify "$T/a.mcache" -p "$PUB"
run 2 "needs at least one -p" verify "$T/a.mcache"
run 2 "unknown or ambiguous option" verify "$T/a.mcache" -p "$PUB" --bogus
run 2 "--min-version takes a whole number" verify "$T/a.mcache" -p "$PUB" --min-version x
run 2 "absent.mcache" verify "$T/absent.mcache" -p "$PUB"
run 2 "not a megacache bundle" verify "$T/notabundle.mcache" -p "$PUB"
run 1 "do not match their hash" verify "$T/tampered.mcache" -p "$PUB"
run 1 "no signature by a trusted key" verify "$T/a.mcache" -p "$KEYS/other.pub"
# Several bundles: each verified and told by name, the worst status: 2 (one could not
# be checked) over 3 (a newer format) over 1 (one did not verify) over 0.
run 0 "2 of 2 bundles verified" verify "$T/a.mcache" "$T/b.mcache" -p "$PUB"
grep -q "^$T/a.mcache: OK (" "$T/out" && grep -q "^$T/b.mcache: OK (" "$T/out" && ok ||
	bad "verify of two bundles: $(cat "$T/out")"
run 1 "$T/tampered.mcache: " verify "$T/a.mcache" "$T/tampered.mcache" "$T/b.mcache" -p "$PUB"
grep -q "^$T/b.mcache: OK (" "$T/out" && grep -qx "2 of 3 bundles verified" "$T/out" && ok ||
	bad "verify went on after a bundle that failed: $(cat "$T/out")"
FUT="$MC_SRCDIR/format/vectors/manifest-future-version.mcache"
run 3 "upgrade megacache" verify "$T/tampered.mcache" "$FUT" -p "$PUB"
run 2 "not a megacache bundle" verify "$FUT" "$T/notabundle.mcache" "$T/tampered.mcache" -p "$PUB"
grep -q "do not match their hash" "$T/err" && grep -q "upgrade megacache" "$T/err" && ok ||
	bad "verify did not tell each bundle's failure: $(cat "$T/err")"
run 0 "$T/a.mcache: OK" verify - "$T/a.mcache" -p "$PUB" <"$T/b.mcache"
grep -q "^standard input: OK (" "$T/out" && ok || bad "verify of standard input among others: $(cat "$T/out")"
run 2 "standard input (-) can be only one of the bundles" verify - "$T/a.mcache" - -p "$PUB"
# a -p key that cannot be read fails the command once, not each bundle
run 2 "notabundle.mcache: first line is not an untrusted comment" verify "$T/a.mcache" "$T/b.mcache" -p "$T/notabundle.mcache"
[ "$(wc -l <"$T/err")" = 1 ] && [ ! -s "$T/out" ] && ok || bad "verify of two with a bad key: $(cat "$T/out" "$T/err")"

run 0 "artifacts" list "$T/a.mcache"
run 2 "list needs exactly one BUNDLE" list
run 2 "absent.mcache" list "$T/absent.mcache"
run 2 "not a megacache bundle" list "$T/notabundle.mcache"

run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/l"
run 2 "" load "$T/a.mcache" --cache-dir "$T/l"
run 2 "unknown artifact type 'nosuchtype'" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/l" --types nosuchtype
run 2 "absent.mcache" load "$T/absent.mcache" -p "$PUB" --cache-dir "$T/l"
run 2 "not a megacache bundle" load "$T/notabundle.mcache" -p "$PUB" --cache-dir "$T/l"
run 1 "do not match their hash" load "$T/tampered.mcache" -p "$PUB" --cache-dir "$T/l2"
run 1 "no signature by a trusted key" load "$T/a.mcache" -p "$KEYS/other.pub" --cache-dir "$T/l2"
[ ! -e "$T/l2" ] || [ -z "$(find "$T/l2" -type f)" ] && ok || bad "a failed load installed files"

run 0 "" export "$T/a.mcache" -p "$PUB" --torch "$T/e.blob"
run 2 "" export "$T/a.mcache" -p "$PUB"
run 2 "--torch-format" export "$T/a.mcache" -p "$PUB" --torch "$T/e2.blob" --torch-format 1.0
run 2 "absent.mcache" export "$T/absent.mcache" -p "$PUB" --torch "$T/e2.blob"
run 1 "do not match their hash" export "$T/tampered.mcache" -p "$PUB" --torch "$T/e2.blob"
run 1 "no signature by a trusted key" export "$T/a.mcache" -p "$KEYS/other.pub" --torch "$T/e2.blob"

run 0 "" merge -o "$T/m.mcache" "$T/a.mcache" "$T/b.mcache" -p "$PUB" -s "$KEYS/test.key"
run 2 "" merge "$T/a.mcache" "$T/b.mcache" -p "$PUB"
run 2 "not a megacache bundle" merge -o "$T/m2.mcache" "$T/a.mcache" "$T/notabundle.mcache" -p "$PUB"
run 1 "do not match their hash" merge -o "$T/m2.mcache" "$T/a.mcache" "$T/tampered.mcache" -p "$PUB"
run 1 "no signature by a trusted key" merge -o "$T/m2.mcache" "$T/a.mcache" -p "$KEYS/other.pub"

# diff: 0 the same, 1 different (as diff(1)), 2 an error.
run 0 "0 added, 0 removed, 0 changed" diff "$T/a.mcache" "$T/a.mcache"
run 1 "" diff "$T/a.mcache" "$T/b.mcache"
grep -Eq '^[0-9]+ added, [0-9]+ removed, [0-9]+ changed$' "$T/out" && ok ||
	bad "diff of different bundles: no totals: $(cat "$T/out")"
run 1 "" diff "$T/a.mcache" "$T/b.mcache" --json
"$MC_BUILDDIR/tests/jsoncheck" < "$T/out" && ok || bad "diff --json of different bundles"
run 0 "" diff "$T/a.mcache" "$T/a.mcache" --json
run 2 "diff needs two bundles" diff "$T/a.mcache"
run 2 "absent.mcache" diff "$T/a.mcache" "$T/absent.mcache"
run 2 "not a megacache bundle" diff "$T/a.mcache" "$T/notabundle.mcache"

# 3. --threshold above the keys given is refused before any bundle is read (the bundle
# here does not exist: its error would be another).
TWO="-p $PUB --threshold 2"
for cmd in "verify $T/absent.mcache $TWO" "load $T/absent.mcache --cache-dir $T/l $TWO" \
	"export $T/absent.mcache --torch $T/e3.blob $TWO" "merge -o $T/m3.mcache $T/absent.mcache $TWO" \
	"run -b $T/absent.mcache $TWO -- true"; do
	# shellcheck disable=SC2086
	run 2 "--threshold 2 needs at least 2 trusted keys; 1 given with -p" $cmd
done
run 2 "--threshold 3 needs at least 3 trusted keys; 2 given" verify "$T/a.mcache" -p "$PUB" \
	-p "$KEYS/test2.pub" --threshold 3
# The same key twice is one key (the library counts it once): the same usage error,
# before any bundle is read, whether given as a file or as its base64 line.
TWICE="-p $PUB -p $PUB --threshold 2"
for cmd in "verify $T/absent.mcache $TWICE" "load $T/absent.mcache --cache-dir $T/l $TWICE" \
	"export $T/absent.mcache --torch $T/e3.blob $TWICE" "merge -o $T/m3.mcache $T/absent.mcache $TWICE" \
	"sign $T/absent.mcache -s $SEC -o $T/s3.mcache $TWICE" "push $T/absent.mcache --redis redis://127.0.0.1:1 $TWICE" \
	"audit --redis redis://127.0.0.1:1 $T/absent.mcache $TWICE" "run -b $T/absent.mcache $TWICE -- true"; do
	# shellcheck disable=SC2086
	run 2 "--threshold 2 needs at least 2 trusted keys; 2 given with -p, 1 distinct (a key given again, under any key id, counts once)" $cmd
done
run 2 "1 distinct" verify "$T/a.mcache" -p "$PUB" -p "$(tail -n 1 "$PUB")" --threshold 2
[ "$(head -n 1 "$T/err")" = "megacache: --threshold 2 needs at least 2 trusted keys; 2 given with -p, 1 distinct (a key given again, under any key id, counts once)" ] &&
	[ "$(sed -n 2p "$T/err")" = "Try 'megacache verify --help'." ] && [ "$(wc -l <"$T/err")" = 2 ] && ok ||
	bad "a key given twice with --threshold 2: $(cat "$T/err")"
run 2 "1 distinct" run --cache-dir "$T/r2" -b "$T/a.mcache" -p "$PUB" -p "$PUB" --threshold 2 --allow-cold -- touch "$T/ran2"
[ ! -e "$T/ran2" ] && ok || bad "run ran its command under a policy no bundle can meet"
run 2 "--threshold 3 needs at least 3 trusted keys; 3 given with -p, 2 distinct" verify "$T/a.mcache" \
	-p "$PUB" -p "$KEYS/test2.pub" -p "$PUB" --threshold 3
# One Ed25519 key under another key id is the same key: the library counts it once.
run 2 "--threshold 2 needs at least 2 trusted keys; 2 given with -p, 1 distinct" verify "$T/a.mcache" \
	-p "$PUB" -p "$KEYS/test-alias.pub" --threshold 2
run 1 "1 valid trusted signature, 2 required" verify "$T/a.mcache" -p "$PUB" -p "$KEYS/test2.pub" \
	--threshold 2

# 4. Times: --expires in each form, printed back in ISO 8601 (UTC) by list and verify;
# JSON keeps numbers; a time not in the future is refused, naming it and now.
expires() { # expires FORM WANT_ISO: pack --expires FORM, list shows WANT_ISO
	run 0 "" pack -q -o "$T/x.mcache" --from-torch "$BLOB" -s "$SEC" --expires "$1" || return
	run 0 "expires $2" list "$T/x.mcache"
	run 0 "expires $2)" verify "$T/x.mcache" -p "$PUB"
}
expires 4102444800 2100-01-01T00:00:00Z
expires 2100-01-01 2100-01-01T00:00:00Z
expires 2100-01-01T12:30:05Z 2100-01-01T12:30:05Z
run 0 "" list "$T/x.mcache" --json
grep -q '"expires":[[:space:]]*4102489805' "$T/out" && ok || bad "list --json: expires not a number"
grep -q '"created":[[:space:]]*[0-9]' "$T/out" && ok || bad "list --json: created not a number"
SOURCE_DATE_EPOCH=1700000000 "$MEGACACHE" pack -q -o "$T/x.mcache" --from-torch "$BLOB" -s "$SEC" ||
	bad "pack with SOURCE_DATE_EPOCH"
run 0 "created 2023-11-14T22:13:20Z, bundle version 0" list "$T/x.mcache"
for d in +30d +12h +90m +3600s; do
	before=$(date +%s)
	run 0 "" pack -q -o "$T/x.mcache" --from-torch "$BLOB" --expires "$d" || continue
	run 0 "" list "$T/x.mcache" --json
	got=$(sed -n 's/.*"expires":[[:space:]]*\([0-9]*\).*/\1/p' "$T/out")
	n=${d#+}; n=${n%?}
	case $d in *d) n=$((n * 86400)) ;; *h) n=$((n * 3600)) ;; *m) n=$((n * 60)) ;; esac
	[ -n "$got" ] && [ "$got" -ge $((before + n)) ] && [ "$got" -le $(($(date +%s) + n)) ] && ok ||
		bad "--expires $d: expires $got, now $before"
done
for past in 1 2001-01-01 2001-01-01T00:00:00Z +0s; do
	run 2 "is not in the future: it is " pack -o "$T/y.mcache" --from-torch "$BLOB" --expires "$past"
	grep -Eq 'and now is [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z' "$T/err" && ok ||
		bad "--expires $past: the line does not give now: $(cat "$T/err")"
done
run 2 "it is 2001-01-01T00:00:00Z" save -o "$T/y.mcache" --cache-dir "$CACHE" --expires 2001-01-01
run 2 "is not in the future" run --save-to "$T/y.mcache" --expires +0m -- true
for bad in 2100-02-30 2100-1-01 2100-01-01T24:00:00Z 2100-01-01T00:00:00 +5 +5y 5d x -1 ""; do
	run 2 "--expires takes a Unix time, an ISO 8601 UTC time" pack -o "$T/y.mcache" \
		--from-torch "$BLOB" --expires "$bad"
done
[ ! -e "$T/y.mcache" ] && ok || bad "a refused --expires wrote a bundle"
# --now takes the same forms; a past --now is fine.
run 0 "" pack -q -o "$T/x.mcache" --from-torch "$BLOB" -s "$SEC" --expires 2100-01-01
run 0 "OK" verify "$T/x.mcache" -p "$PUB" --now 2001-01-01
run 0 "OK" verify "$T/x.mcache" -p "$PUB" --now 2099-12-31T23:59:59Z
run 1 "expired" verify "$T/x.mcache" -p "$PUB" --now 2100-01-01T00:00:01Z
# the times said as every other time the tool prints: ISO 8601, in UTC
[ "$(cat "$T/err")" = "megacache: $T/x.mcache: expired at 2100-01-01T00:00:00Z (now 2100-01-01T00:00:01Z)" ] &&
	ok || bad "the expiry error: $(cat "$T/err")"
run 1 "expired" verify "$T/x.mcache" -p "$PUB" --now +36500d
run 0 "OK" verify "$T/x.mcache" -p "$PUB" --now +1d
run 1 "expired" load "$T/x.mcache" -p "$PUB" --cache-dir "$T/l3" --now 4102444801
run 2 "--now takes a Unix time, an ISO 8601 UTC time" verify "$T/x.mcache" -p "$PUB" --now 2100-13-01

# 5. Two encrypted keys with different passwords: each --password-file goes with the
# encrypted -s key in its place; fewer files than keys leaves the rest to a terminal.
printf 'first secret\n' > "$T/pw1"
printf 'second secret\n' > "$T/pw2"
run 0 "" keygen -q -p "$T/e1.pub" -s "$T/e1.key" --password-file "$T/pw1"
run 0 "" keygen -q -p "$T/e2.pub" -s "$T/e2.key" --password-file "$T/pw2"
# (An unencrypted key between them takes no file.)
run 0 "3 signatures" pack -o "$T/co.mcache" --from-torch "$BLOB" -s "$T/e1.key" -s "$SEC" \
	-s "$T/e2.key" --password-file "$T/pw1" --password-file "$T/pw2"
run 0 "OK" verify "$T/co.mcache" -p "$T/e1.pub" -p "$T/e2.pub" --threshold 2
run 2 "e1.key: wrong password" pack -o "$T/co2.mcache" --from-torch "$BLOB" -s "$T/e1.key" \
	-s "$T/e2.key" --password-file "$T/pw2" --password-file "$T/pw1"
if [ -n "$NOTTY" ]; then
	# A password that cannot be had: one line, naming the key and why.
	$NOTTY "$MEGACACHE" pack -o "$T/co2.mcache" --from-torch "$BLOB" -s "$T/e1.key" -s "$T/e2.key" \
		--password-file "$T/pw1" < /dev/null > "$T/out" 2> "$T/err"
	[ $? = 2 ] && [ "$(cat "$T/err")" = "megacache: $T/e2.key: no password given: there is no terminal to ask it on; use --password-file" ] &&
		ok || bad "a second encrypted key with one file: $(cat "$T/err")"
	$NOTTY "$MEGACACHE" sign "$T/a.mcache" -s "$T/e1.key" -p "$PUB" -o "$T/co3.mcache" --json \
		< /dev/null > "$T/out" 2> "$T/err"
	[ $? = 2 ] && [ "$(cat "$T/err")" = "megacache: $T/e1.key: no password given: there is no terminal to ask it on; use --password-file" ] &&
		grep -q '"error":[[:space:]]*"password"' "$T/out" &&
		grep -qF "\"message\":	\"megacache: $T/e1.key: no password given: there is no terminal" "$T/out" &&
		ok || bad "sign with an encrypted key and no terminal: $(cat "$T/err" "$T/out")"
	$NOTTY "$MEGACACHE" keygen -p "$T/e3.pub" -s "$T/e3.key" < /dev/null > "$T/out" 2> "$T/err"
	[ $? = 2 ] && [ "$(cat "$T/err")" = "megacache: $T/e3.key: no password given: there is no terminal to ask it on; use --password-file, or -W for an unencrypted key" ] &&
		[ ! -e "$T/e3.key" ] && ok || bad "keygen with no terminal: $(cat "$T/err")"
fi
run 2 "" pack -o "$T/co2.mcache" --from-torch "$BLOB" -s "$T/e1.key" --password-file "$T/absent.pw"
[ "$(cat "$T/err")" = "megacache: $T/e1.key: no password given: --password-file $T/absent.pw: No such file or directory" ] &&
	ok || bad "an encrypted key with a --password-file that is not there: $(cat "$T/err")"
[ ! -e "$T/co2.mcache" ] && ok || bad "a pack with a wrong password wrote a bundle"

# 6. Random arguments for every command: a fixed seed, each run in a scratch folder
# with its own HOME, TMPDIR and caches; every status must be 0, 1 or 2.
F="$T/fuzz"
mkdir -p "$F/home" "$F/tmp" "$F/cache" "$F/triton" "$F/empty"
cp "$T/a.mcache" "$T/b.mcache" "$T/tampered.mcache" "$T/notabundle.mcache" "$PUB" "$SEC" "$F/"
cp "$KEYS/other.pub" "$BLOB" "$F/"
cp "$T/pw1" "$F/pw"
cp -R "$CACHE/." "$F/cdir"
touch "$T/mark"
sleep 1
# shellcheck disable=SC2016
# libtool runs the binary itself, not its wrapper script: 2,200 runs in seconds.
LT=
[ -x "$MC_BUILDDIR/libtool" ] && LT="$MC_BUILDDIR/libtool --mode=execute"
$NOTTY $LT /usr/bin/python3 - "$MEGACACHE" "$F" > "$T/fuzz.out" 2>&1 <<'EOF'
import os, random, subprocess, sys
meg, root = sys.argv[1], sys.argv[2]
rnd = random.Random(19)
env = dict(os.environ, HOME=root + "/home", TMPDIR=root + "/tmp",
           TORCHINDUCTOR_CACHE_DIR=root + "/cache", TRITON_CACHE_DIR=root + "/triton")
env.pop("SOURCE_DATE_EPOCH", None)
valued = ["-o", "-s", "-p", "-b", "--output", "--threshold", "--now", "--expires", "--level",
          "--label", "--require", "--types", "--cache-dir", "--triton-dir", "--from-torch",
          "--from-dir", "--from-triton-dir", "--torch", "--torch-format", "--min-version",
          "--max-artifacts", "--max-total-bytes", "--max-expansion", "--max-manifest-bytes",
          "--max-artifact-bytes", "--threads", "--bundle-version", "--label-from-env",
          "--labels-json", "--password-file", "--owner", "--save-to", "--bundle", "--redis",
          "--redis-password-file", "--ttl", "--match", "--triton-key-format"]
flags = ["-v", "-q", "-W", "-f", "-x", "--json", "--insecure-no-verify", "--dry-run", "--sync",
         "--explain", "--keep-unknown", "--no-compress", "--allow-cold", "--bogus", "--js",
         "--threads=2", "--json=1", "-pq", "--triton"]
values = ["0", "1", "2", "33", "-1", "", "x", "a=b", "=b", "k=", "+30d", "+0s", "+1h",
          "2026-02-30", "2100-01-01", "2100-01-01T00:00:00Z", "99999999999999999999",
          "a.mcache", "b.mcache", "tampered.mcache", "notabundle.mcache", "absent", "test.pub",
          "test.key", "other.pub", "pw", "mlp-cpu-pgo.megacache", "cdir", "empty", "out",
          "out.mcache", "-", "2.7", "current", "inductor", "fxgraph,nosuch", "HOME",
          "\x1b[31mred", "\u00fc", "A" * 3000, "root", "0:0", "nobody:nogroup", "%s%n"]
# Each command's operands and options of a run that would succeed, in groups that the
# random runs keep or leave out whole.
base = {"keygen": [["-p", "new.pub"], ["-s", "new.key"], ["-W"]],
        "save": [["-o", "s.mcache"], ["--cache-dir", "cdir"], ["--triton-dir", "empty"]],
        "run": [["-b", "a.mcache"], ["-p", "test.pub"], ["--cache-dir", "rdir"]],
        "pack": [["-o", "p.mcache"], ["--from-torch", "mlp-cpu-pgo.megacache"]],
        "sign": [["b.mcache"], ["-s", "test.key"], ["-o", "signed.mcache"]],
        "verify": [["a.mcache"], ["-p", "test.pub"]], "list": [["a.mcache"]],
        "load": [["a.mcache"], ["-p", "test.pub"], ["--cache-dir", "ldir"]],
        "export": [["a.mcache"], ["-p", "test.pub"], ["--torch", "t.blob"]],
        "merge": [["-o", "m.mcache"], ["a.mcache"], ["b.mcache"], ["-p", "test.pub"]],
        "diff": [["a.mcache"], ["b.mcache"]],
        # no server listens on port 1: each run ends before or at the connection
        "push": [["a.mcache"], ["-p", "test.pub"], ["--redis", "redis://127.0.0.1:1/0"]],
        "pull": [["-o", "pl.mcache"], ["--redis", "redis://127.0.0.1:1/0"]],
        "audit": [["a.mcache"], ["-p", "test.pub"], ["--redis", "redis://127.0.0.1:1/0"]]}
fails = runs = 0
for cmd, b in base.items():
    for i in range(200):
        args = [a for g in b if rnd.random() < 0.8 for a in g]
        for _ in range(rnd.randint(0, 5)):
            r = rnd.random()
            if r < 0.5:
                args += [rnd.choice(valued), rnd.choice(values)]
            elif r < 0.8:
                args.append(rnd.choice(flags))
            elif cmd != "run":  # run's first operand is the command it runs
                args.append(rnd.choice(values))
        if cmd != "run" and rnd.random() < 0.3:
            rnd.shuffle(args)
        if cmd == "keygen":
            args += ["--password-file", "pw"]
        if cmd == "run":
            args = [a for a in args if a != "--"] + ["--", "true"]
            # An option's missing value would take "--" as its value: never the last one.
            if len(args) > 2 and args[-3] in valued:
                args.insert(-2, "x")
        runs += 1
        try:
            p = subprocess.run([meg, cmd] + args, cwd=root, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = "a hang"
        # run's own: 127 when what it was to run cannot be found (an abbreviated option,
        # --triton for --triton-dir, can take the next word and leave another as the command)
        started = cmd == "run" and code == 127 and b"megacache: cannot run " in p.stderr
        if code not in (0, 1, 2) and not started:
            fails += 1
            print("FAIL: megacache %s %r: exit %s: %s" % (cmd, args, code,
                  p.stderr[-300:].decode("utf-8", "replace") if code != "a hang" else ""))
print("fuzz: %d runs, %d failed" % (runs, fails))
sys.exit(1 if fails else 0)
EOF
st=$?
cat "$T/fuzz.out" | tail -n 20
[ $st = 0 ] && ok || bad "random arguments: a status other than 0, 1 and 2"
# Nothing written outside the scratch folder: in the source and build trees (but this
# test's own tmp and logs, and .git, whose objects git touches when another clone that
# shares them writes the same one), the home folder and the system's temp folder.
out=$(find "$MC_SRCDIR" "$MC_BUILDDIR" -newer "$T/mark" -type f ! -path '*/tests/tmp/*' \
	! -path '*/__pycache__/*' ! -path '*/.git/*' ! -name '*.log' ! -name '*.trs' 2>/dev/null | head -5)
[ -z "$out" ] && ok || bad "random arguments wrote outside their folder: $out"
out=$(find "${TMPDIR:-/tmp}" "$HOME" -maxdepth 1 -newer "$T/mark" -name '*megacache*' 2>/dev/null | head -5)
[ -z "$out" ] && ok || bad "random arguments wrote outside their folder: $out"
finish
