# sources.sh - labels and where they come from, --require on load, list --explain,
# merge and diff.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
export SOURCE_DATE_EPOCH=1700000000

# Labels: given, from the environment, from a JSON file of facts.
printf '{"torch": "2.11.0+cu130", "gpu": "NVIDIA H100 80GB HBM3"}' > "$T/facts.json"
GPU_COUNT=8 run 0 "" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" \
	--labels-json "$T/facts.json" --label-from-env GPU_COUNT --label rank=0
run 0 "label gpu=NVIDIA H100 80GB HBM3" list "$T/a.mcache"
grep -qx "label GPU_COUNT=8" "$T/out" && ok || bad "--label-from-env not recorded"
grep -qx "label torch=2.11.0+cu130" "$T/out" && ok || bad "--labels-json not recorded"
run 2 "is not set" pack -o "$T/x.mcache" --from-torch "$DATA/mlp-cuda.megacache" --label-from-env NO_SUCH_VAR_X
printf '[1,2]' > "$T/bad.json"
run 2 "not a JSON object" pack -o "$T/x.mcache" --from-torch "$DATA/mlp-cuda.megacache" --labels-json "$T/bad.json"
# A label value holds no control character (SPEC.md section 3.1): the writer refuses
# what a reader would refuse, and writes nothing.
for v in "$(printf 'a\033b')/U+001B" "$(printf 'a\302\205b')/U+0085" "$(printf 'a\342\200\256b')/U+202E"; do
	run 2 "label k: value contains control character ${v##*/}" pack -o "$T/x.mcache" \
		--from-torch "$DATA/mlp-cuda.megacache" --label "k=${v%/*}"
	[ ! -e "$T/x.mcache" ] && ok || bad "a refused label value left a bundle"
done
printf '{"k": "a\\u2066b"}' > "$T/bidi.json"
run 2 "label k: value contains control character U+2066" pack -o "$T/x.mcache" \
	--from-torch "$DATA/mlp-cuda.megacache" --labels-json "$T/bidi.json"

# --require compares labels before anything is written.
run 1 "label torch is '2.11.0+cu130' in the bundle, '2.10.0' required" \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/r1" --require torch=2.10.0
[ ! -e "$T/r1" ] && ok || bad "a refused load wrote something"
run 1 "the bundle has no label cuda" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/r1" --require cuda=13.0
run 0 "installed" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/r1" --require torch=2.11.0+cu130 --require rank=0
run 1 "required" verify "$T/a.mcache" -p "$PUB" --require rank=1

# list --explain: type, key, size, destination, and whether it is there already.
rm "$T/r1/vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"
run 0 "1 to install, 0 to replace, 9 already there" list "$T/a.mcache" --explain --cache-dir "$T/r1"
grep -q "would install vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config" "$T/out" \
	&& ok || bad "explain does not name the missing artifact"
grep -q -- "-> $T/r1/fxgraph/ot/fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i/" "$T/out" \
	&& ok || bad "explain does not show destinations"
run 0 "" list "$T/a.mcache" --explain --cache-dir "$T/r1" --json
grep -Eq '"identical_file_present":[[:space:]]*false' "$T/out" && ok || bad "explain --json lacks the presence flag"

# merge: two ranks' bundles into one; the same content stored once; conflicts reported.
# The entries of one FX graph or AOTAutograd key are artifacts of their own (torch keeps
# one per set of guards and tries each): the two blobs' entries under one key are both
# kept, no conflict; only autotune's 4 configs differ under one key.
run 0 "" pack -q -o "$T/b.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda-precompile.megacache" --label rank=1
run 2 "needs -p" merge -o "$T/m.mcache" "$T/a.mcache" "$T/b.mcache"
# Labels are facts a policy checks: the inputs' that differ (rank 0 and 1) or that one
# of them lacks (a's torch, gpu and GPU_COUNT) are refused, each named, nothing written,
# unless --label gives the merged value.
run 2 "label rank differs between the inputs: '0' in $T/a.mcache, '1' in $T/b.mcache; set the merged bundle's value with --label rank=VALUE" \
	merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/b.mcache"
grep -qF "label torch differs between the inputs: '2.11.0+cu130' in $T/a.mcache, none in $T/b.mcache" "$T/err" &&
	[ "$(grep -c "differs between the inputs" "$T/err")" = 4 ] && [ ! -e "$T/m.mcache" ] && ok ||
	bad "merge of disagreeing labels: $(cat "$T/err")"
"$MEGACACHE" merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/b.mcache" --json >"$T/out" 2>/dev/null
grep -q '"error":[[:space:]]*"label_conflict"' "$T/out" && ok || bad "merge --json of disagreeing labels: $(cat "$T/out")"
MERGED="--label rank=0,1 --label torch=2.11.0+cu130 --label gpu=H100 --label GPU_COUNT=8"
# shellcheck disable=SC2086
run 0 "merged 2 bundles" merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/b.mcache" $MERGED
run 0 "label rank=0,1" list "$T/m.mcache"
grep -qx "label torch=2.11.0+cu130" "$T/out" && ok || bad "merged labels: $(cat "$T/out")"
run 0 "merged 2 bundles" merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/b.mcache" $MERGED
grep -q "17 artifacts, 4 conflicts" "$T/out" && ok || bad "merge counts: $(cat "$T/out")"
grep -c "conflict: autotune " "$T/err" | grep -qx 4 && ok || bad "conflicts not reported one per line"
run 0 "OK" verify "$T/m.mcache" -p "$PUB"
# The merged bundle expires with the earliest of its inputs, or at --expires.
run 0 "" pack -q -o "$T/e30.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" --expires 2099-01-01
run 0 "" pack -q -o "$T/e10.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" --expires 2098-01-01
run 0 "" merge -o "$T/me.mcache" -p "$PUB" -s "$SEC" "$T/e30.mcache" "$T/e10.mcache" "$T/a.mcache" $MERGED
run 0 "expires 2098-01-01T00:00:00Z" list "$T/me.mcache"
run 0 "" merge -o "$T/me.mcache" -p "$PUB" -s "$SEC" "$T/e30.mcache" "$T/e10.mcache" --expires 2097-06-01
run 0 "expires 2097-06-01T00:00:00Z" list "$T/me.mcache"
run 0 "" merge -o "$T/me.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/a.mcache"
grep -q "expires" "$T/out" && bad "a merge of inputs that never expire expires" || ok
# The same bundle twice: every artifact repeated with the same content, no conflict.
run 0 "10 artifacts, 0 conflicts" merge -o "$T/aa.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache" "$T/a.mcache"
grep -q "conflict: " "$T/err" && bad "same content reported as a conflict" || ok
# The later bundle wins: the merged bundle loads what b alone loads, plus a's extra entries.
run 0 "" load "$T/m.mcache" -p "$PUB" --cache-dir "$T/mm"
k=fxgraph/ot/fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i
[ "$(ls "$T/mm/$k" | tr '\n' ' ')" = "2a6kayfxndm3qwyrmybvy2ccur7nryl5g3ybnuzsbe5ihr6rwip p65ihljl47iqfc6t456wtlkwfvbjfcjb43jnhevbqa7e45pb7cd " ] &&
	ok || bad "merged FX key lacks an entry of each bundle: $(ls "$T/mm/$k")"
run 0 "" load "$T/b.mcache" -p "$PUB" --cache-dir "$T/mb"
for f in $(cd "$T/mb" && find . -type f); do
	cmp -s "$T/mb/$f" "$T/mm/$f" || { bad "merged $f is not the later bundle's"; continue; }
	ok
done
[ -z "$(find "$T" -maxdepth 1 -name '.megacache-merge-*')" ] && ok || bad "merge left temp folders"
run 1 "" merge -o "$T/m2.mcache" -p "$KEYS/other.pub" "$T/a.mcache"
[ ! -e "$T/m2.mcache" ] && ok || bad "merge of unverified input wrote a bundle"

# diff: added, removed, changed, per type; exit status 1 when they differ (as diff(1)).
run 1 "" diff "$T/a.mcache" "$T/b.mcache"
grep -qx "7 added, 6 removed, 4 changed" "$T/out" && ok || bad "diff total line missing"
grep -qx "inductor     4 added, 4 removed, 0 changed" "$T/out" && ok || bad "entries of one key diffed as changed"
grep -qx "precompile   1 added, 0 removed, 0 changed" "$T/out" && ok || bad "per-type diff line missing"
grep -q "^+ precompile" "$T/out" && ok || bad "added artifact not listed"
run 0 "0 added, 0 removed, 0 changed" diff "$T/a.mcache" "$T/a.mcache"
run 1 "" diff "$T/a.mcache" "$T/m.mcache" --json
grep -Eq '"added":[[:space:]]*\[' "$T/out" && ok || bad "diff --json lacks lists"
run 0 "" diff "$T/a.mcache" "$T/a.mcache" --json
grep -Eq '"added":[[:space:]]*\[\]' "$T/out" && ok || bad "diff --json of a bundle with itself lists something"

# A FIFO with no writer given as a key or a torch blob: refused at once (exit 2, "not
# a regular file"), never a hang. timeout's 124 would show a hang.
mkfifo "$T/fifo"
for cmd in "pack -o $T/fifo-p.mcache --from-torch $T/fifo" "verify $T/a.mcache -p $T/fifo"; do
	# shellcheck disable=SC2086
	timeout 20 "$MEGACACHE" $cmd >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 2 ] && grep -q "$T/fifo: not a regular file" "$T/err" && ok \
		|| bad "FIFO: megacache $cmd: exit $rc: $(cat "$T/err")"
done
[ ! -e "$T/fifo-p.mcache" ] && ok || bad "FIFO: a refused command wrote something"
# A bundle is read from a FIFO as from a pipe, once its writer comes; what needs to
# read it twice (sign) says so.
for cmd in "list $T/fifo" "verify $T/fifo -p $PUB" "diff $T/fifo $T/a.mcache" \
	"merge -o $T/fifo-m.mcache $T/fifo --insecure-no-verify --unsigned"; do
	cat "$T/a.mcache" >"$T/fifo" &
	# shellcheck disable=SC2086
	timeout 20 "$MEGACACHE" $cmd >"$T/out" 2>"$T/err"
	rc=$?
	wait
	[ "$rc" = 0 ] && ok || bad "FIFO: megacache $cmd: exit $rc: $(cat "$T/err")"
done
cat "$T/a.mcache" >"$T/fifo" &
timeout 20 "$MEGACACHE" sign "$T/fifo" -s "$KEYS/test.key" -p "$KEYS/test.pub" -o "$T/fifo-s.mcache" >"$T/out" 2>"$T/err"
rc=$?
wait
[ "$rc" = 2 ] && grep -qF "$T/fifo: read from a pipe, which can be read only once" "$T/err" &&
	[ ! -e "$T/fifo-s.mcache" ] && ok || bad "FIFO: sign: exit $rc: $(cat "$T/err")"
finish
