# memory.sh - contents are streamed, never held: a cache dir with a 512 MiB artifact is
# packed, verified, loaded and exported under a 100 MB address-space limit, and the
# results are byte-exact; a manifest over 1 MiB is read through temp files.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/src/dynamo"
# 1 MiB of noise 512 times: it compresses about 500 times, within the default cap.
head -c 1048576 /dev/urandom > "$T/mib"
i=0
while [ "$i" -lt 512 ]; do cat "$T/mib"; i=$((i + 1)); done > "$T/src/dynamo/code_state_big_0_.pkl"
head -c 20000000 /dev/urandom > "$T/src/dynamo/code_state_noise_0_.pkl"
run 0 "" keygen -q -W -p "$T/k.pub" -s "$T/k.key"
# Every command below runs with its address space capped at 100 MB (not under the
# sanitizers, which reserve far more address space than that for themselves).
printf '#!/bin/sh\nulimit -v 100000\nexec "%s" "$@"\n' "$MEGACACHE" > "$T/limited"
chmod +x "$T/limited"
[ -n "${MC_SANITIZED:-}" ] || MEGACACHE="$T/limited"
run 0 "" pack -q -o "$T/big.mcache" -s "$T/k.key" --from-dir "$T/src"
check "the 512 MiB artifact is stored compressed" test "$(stat -c %s "$T/big.mcache")" -lt 30000000
run 1 "more than the expansion cap of 100" verify "$T/big.mcache" -p "$T/k.pub" --max-expansion 100
run 0 "OK" verify "$T/big.mcache" -p "$T/k.pub"
run 0 "" load -q "$T/big.mcache" -p "$T/k.pub" --cache-dir "$T/warm"
run 0 "" export -q "$T/big.mcache" --torch "$T/big.blob" -p "$T/k.pub"
check "512 MiB artifact installed byte for byte" cmp -s "$T/src/dynamo/code_state_big_0_.pkl" "$T/warm/dynamo/code_state_big_0_.pkl"
check "random artifact installed byte for byte" cmp -s "$T/src/dynamo/code_state_noise_0_.pkl" "$T/warm/dynamo/code_state_noise_0_.pkl"
size=$(stat -c %s "$T/big.blob")
[ "$size" -gt 556000000 ] && ok || bad "exported blob is $size bytes"
# The cap is real: the same limit refuses a program that holds 512 MiB.
"$T/limited" --version >/dev/null 2>&1 || [ -n "${MC_SANITIZED:-}" ] && ok || bad "the limited wrapper does not run"
dd if=/dev/zero bs=600M count=1 of=/dev/null 2>/dev/null && ok || bad "dd cannot hold 600 MB even without a limit"
sh -c 'ulimit -v 100000; dd if=/dev/zero bs=600M count=1 of=/dev/null' 2>/dev/null \
	&& bad "ulimit -v did not limit memory" || ok
rm -rf "$T/warm" "$T/big.blob" "$T/src" "$T/mib"

# An index over 1 MiB (6,000 artifacts) is read through nameless temp files in
# $TMPDIR (its object table, under 4 MiB, stays in memory; test_bundle reads one from a
# file); every reading command gives what it gives for a small one, and nothing is left
# behind.
mkdir -p "$T/many/dynamo" "$T/tmp"
i=0
while [ "$i" -lt 6000 ]; do
	printf 'content of state %d\n' "$i" > "$T/many/dynamo/code_state_f${i}_0_.pkl"
	i=$((i + 1))
done
# The writer's records go there too: where it cannot write, a pack that large fails
# before it writes anything, and a small one does not need it.
TMPDIR="$T/no-such-folder" run 2 "cannot create a temporary file" \
	pack -q -o "$T/many.mcache" -s "$T/k.key" --from-dir "$T/many"
[ ! -e "$T/many.mcache" ] && ok || bad "a failed pack left a bundle"
TMPDIR="$T/no-such-folder" run 0 "" pack -q -o "$T/small.mcache" -s "$T/k.key" \
	--from-torch "$DATA/mlp-cuda.megacache"
export TMPDIR="$T/tmp"
run 0 "" pack -q -o "$T/many.mcache" -s "$T/k.key" --from-dir "$T/many"
check "pack left nothing in TMPDIR" test -z "$(ls -A "$T/tmp")"
run 0 "OK (6000 artifacts" verify "$T/many.mcache" -p "$T/k.pub"
# The signatures are checked against the bytes read, on one thread or beside the parse:
# a manifest whose time of creation changed by one digit is refused alike.
for n in 1 2; do
	run 0 "OK (6000 artifacts" verify "$T/many.mcache" -p "$T/k.pub" --threads $n
done
/usr/bin/python3 - "$T/many.mcache" "$T/flip.mcache" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.index(b'"created":') + 10
b[at] = ord("2") if b[at] != ord("2") else ord("3")
open(sys.argv[2], "wb").write(b)
EOF
for n in 1 2; do
	run 1 "signature" verify "$T/flip.mcache" -p "$T/k.pub" --threads $n
done
run 0 "" load -q "$T/many.mcache" -p "$T/k.pub" --cache-dir "$T/many-out"
check "6,000 artifacts installed byte for byte" diff -r "$T/many" "$T/many-out"
run 0 "f5999_0_" list "$T/many.mcache"
run 0 "" keygen -q -W -p "$T/k2.pub" -s "$T/k2.key"
run 0 "" sign "$T/many.mcache" -s "$T/k2.key" -p "$T/k.pub" -o "$T/many2.mcache"
run 0 "2 signatures verified" verify "$T/many2.mcache" -p "$T/k.pub" -p "$T/k2.pub" --threshold 2
run 0 "" export -q "$T/many.mcache" --torch "$T/many.blob" -p "$T/k.pub"
# The same with a real cache dir around them (graph entries with a SHA-256, kernel
# folders installed whole): the tree comes back; a second load finds every file in
# place; into a root that lacks one kernel folder and half of another, both come back.
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
cp -r "$T/many/dynamo" "$T/cache_mlp_cold/dynamo"
run 0 "" pack -q -o "$T/mix.mcache" -s "$T/k.key" --from-dir "$T/cache_mlp_cold" --keep-unknown
run 0 "" load -q "$T/mix.mcache" -p "$T/k.pub" --cache-dir "$T/mix-out"
src_sum "$T/cache_mlp_cold" > "$T/mix.want"
tree_sum "$T/mix-out" > "$T/mix.got"
check "a real cache dir and 6,000 artifacts installed byte for byte" cmp -s "$T/mix.want" "$T/mix.got"
n=$(find "$T/cache_mlp_cold" -type f | wc -l)
run 0 "0 files installed, 0 replaced, $n already there (0 B written)" load "$T/mix.mcache" -p "$T/k.pub" \
	--cache-dir "$T/mix-out"
set -- "$T"/mix-out/triton/0/*/
gone=$(($(find "$1" -type f | wc -l) + $(ls "$2"/*.json | wc -l)))
rm -r "$1"
rm "$2"/*.json
run 0 "$gone files installed" load "$T/mix.mcache" -p "$T/k.pub" --cache-dir "$T/mix-out"
tree_sum "$T/mix-out" > "$T/mix.got"
check "a missing kernel folder and the missing files of another installed" \
	cmp -s "$T/mix.want" "$T/mix.got"
check "nothing left in TMPDIR" test -z "$(ls -A "$T/tmp")"
check "no temp file left in the cache dir" test -z "$(find "$T/mix-out" -name '*.tmp')"
TMPDIR="$T/no-such-folder" run 2 "is read through a temporary file" verify "$T/many.mcache" -p "$T/k.pub"
unset TMPDIR
rm -rf "$T/many" "$T/many-out" "$T/many.blob" "$T/cache_mlp_cold" "$T/mix-out"
finish
