# roundtrip.sh - the real torch 2.11 fixtures: blobs export back byte for byte, loads
# reproduce the cache dirs' files, --from-dir packs reproduce them too, packs are
# deterministic, and a second load changes nothing.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
export SOURCE_DATE_EPOCH=1700000000

mkdir -p "$T/ref"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/ref"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$T/ref"

# The files of a real cache dir that the five torch types describe.
torch_files() {
	(cd "$1" && find fxgraph aotautograd dynamo -type f ! -name '*.lock' 2>/dev/null
	 find . -mindepth 2 -maxdepth 2 -name '*.best_config' | sed 's|^\./||') | sort
}

for blob in mlp-cuda mlp-cuda-precompile mlp-cpu-pgo; do
	run 0 "" pack -q -o "$T/$blob.mcache" -s "$SEC" --from-torch "$DATA/$blob.megacache"
	run 0 "" export "$T/$blob.mcache" --torch "$T/$blob.out" -p "$PUB"
	check "$blob: export is byte-identical to the torch blob" cmp -s "$T/$blob.out" "$DATA/$blob.megacache"
	# Deterministic: the same inputs give the same bytes.
	run 0 "" pack -q -o "$T/$blob.again" -s "$SEC" --from-torch "$DATA/$blob.megacache"
	check "$blob: two packs are identical" cmp -s "$T/$blob.mcache" "$T/$blob.again"
done

# pack counts what the bundle holds: a (type, key) recorded again (the pgo blob repeats
# its probe entry; a blob given twice repeats them all) is kept once, the last, and the
# others are said to be left out.
counts() { # counts BUNDLE: its artifacts and their bytes, as list --json gives them
	"$MEGACACHE" list "$1" --json | /usr/bin/python3 -c 'import json, sys
a = json.load(sys.stdin)["artifacts"]
print(len(a), sum(x["size"] for x in a))'
}
run 0 "" pack -o "$T/pgo.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache"
set -- $(counts "$T/pgo.mcache")
[ "$(head -n 2 "$T/out")" = "packed $1 artifacts (667.0 kB) into $T/pgo.mcache, 0 signatures
  1 artifact left out: recorded again under the same type and key, the bundle keeps the one recorded last" ] &&
	[ "$1" = 7 ] && ok || bad "pack of the pgo blob ($1 artifacts in the bundle): $(cat "$T/out")"
run 0 "" pack -o "$T/twice.mcache" --from-torch "$DATA/mlp-cuda.megacache" \
	--from-torch "$DATA/mlp-cuda.megacache" --json
/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not (j["artifact_count"] == int(sys.argv[2]) == 10 and j["bytes"] == int(sys.argv[3]) and
              j["superseded"] == 10))' "$T/out" $(counts "$T/twice.mcache") && ok ||
	bad "pack --json of a blob given twice: $(cat "$T/out")"
run 0 "" pack -o "$T/once.mcache" --from-torch "$DATA/mlp-cuda.megacache"
grep -q "left out" "$T/out" && bad "pack with nothing recorded twice: $(cat "$T/out")" || ok

# Every file of a real cache dir but its locks.
all_files() {
	(cd "$1" && find . -type f ! -name '*.lock' | sed 's|^\./||') | sort
}

compare_load() { # compare_load BUNDLE REFDIR LABEL LISTER
	dest="$T/load-$3"
	run 0 "installed" load "$1" -p "$PUB" --cache-dir "$dest" || return
	$4 "$2" > "$T/want.$3"
	(cd "$dest" && find . -type f | sed 's|^\./||' | sort) > "$T/got.$3"
	check "$3: same file list as the real cache dir" cmp -s "$T/want.$3" "$T/got.$3"
	while read -r f; do
		case $f in # a group file names the folder it was loaded into
		*/__grp__*.json) grp_form "$2/$f" "$(cd "$dest" && pwd)/${f%/*}" | cmp -s - "$dest/$f" ;;
		*) cmp -s "$dest/$f" "$2/$f" ;;
		esac || { bad "$3: $f differs"; continue; }
		ok
	done < "$T/want.$3"
	# Idempotent: a second load writes nothing and succeeds.
	before=$(tree_sum "$dest"; ls -lR --time-style=+%s.%N "$dest" | md5sum)
	run 0 "" load "$1" -p "$PUB" --cache-dir "$dest"
	grep -q '^0 files installed' "$T/out" && ok || bad "$3: second load installed files: $(cat "$T/out")"
	after=$(tree_sum "$dest"; ls -lR --time-style=+%s.%N "$dest" | md5sum)
	[ "$before" = "$after" ] && ok || bad "$3: second load changed the tree"
}

compare_load "$T/mlp-cuda.mcache" "$T/ref/cache_mlp_cold" cuda-blob torch_files
compare_load "$T/mlp-cpu-pgo.mcache" "$T/ref/cache_cpu_cold" cpu-blob torch_files
check "cpu: the pgo file is the blob's last pgo artifact" \
	cmp -s "$T/load-cpu-blob/dynamo/code_state_megacache-probe_None_.pkl" \
	"$T/ref/cache_cpu_cold/dynamo/code_state_megacache-probe_None_.pkl"

run 0 "" pack -q -o "$T/dir-cuda.mcache" -s "$SEC" --from-dir "$T/ref/cache_mlp_cold"
compare_load "$T/dir-cuda.mcache" "$T/ref/cache_mlp_cold" cuda-dir all_files
run 0 "" pack -q -o "$T/dir-cpu.mcache" -s "$SEC" --from-dir "$T/ref/cache_cpu_cold"
compare_load "$T/dir-cpu.mcache" "$T/ref/cache_cpu_cold" cpu-dir all_files
run 0 "" pack -q -o "$T/dir-cpu.again" -s "$SEC" --from-dir "$T/ref/cache_cpu_cold"
check "from-dir: two packs are identical" cmp -s "$T/dir-cpu.mcache" "$T/dir-cpu.again"
# The number of worker threads changes neither the bundle nor the loaded tree.
for n in 1 3 8; do
	run 0 "" pack -q -o "$T/dir-cpu.j$n" -s "$SEC" --from-dir "$T/ref/cache_cpu_cold" --keep-unknown --threads "$n"
	run 0 "" load -q "$T/dir-cpu.j$n" -p "$PUB" --cache-dir "$T/load-j$n" --threads "$n"
	run 0 "OK" verify "$T/dir-cpu.j$n" -p "$PUB" --threads "$n"
done
check "--threads 1 and 3 pack the same bytes" cmp -s "$T/dir-cpu.j1" "$T/dir-cpu.j3"
check "--threads 1 and 8 pack the same bytes" cmp -s "$T/dir-cpu.j1" "$T/dir-cpu.j8"
[ "$(tree_sum "$T/load-j1")" = "$(tree_sum "$T/load-j3")" ] && [ "$(tree_sum "$T/load-j1")" = "$(tree_sum "$T/load-j8")" ] &&
	[ -n "$(tree_sum "$T/load-j1")" ] && ok || bad "loads with 1, 3 and 8 threads differ"
run 2 "--threads takes 0 to 1024" verify "$T/dir-cpu.j1" -p "$PUB" --threads many
# More than 8 threads are taken as 8 (each holds a zstd window): a bundle of 12 blocks
# verified and loaded on --threads 16 starts as many threads as on 8, and more than on 4.
case "$MEGACACHE" in
*valgrind*) skip_wide="under valgrind: 192 MiB through seven runs of it take minutes" ;;
*) strace -f -qq -o /dev/null true 2>/dev/null && skip_wide= || skip_wide="strace cannot trace here" ;;
esac
if [ -z "$skip_wide" ]; then
	mkdir -p "$T/wide/ab"
	for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
		head -c 16777216 /dev/zero > "$T/wide/ab/z$i.bin"
	done
	run 0 "" pack -q -o "$T/wide.mcache" -s "$SEC" --from-dir "$T/wide" --keep-unknown
	rm -rf "$T/wide"
	for op in verify load; do
		for n in 4 8 16; do
			extra=
			[ "$op" = load ] && extra="--cache-dir $T/wide-$n"
			# LeakSanitizer cannot run under ptrace (the ASan build's check)
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
				strace -f -qq -e signal=none -e trace=clone,clone3 -o "$T/clones.$n" \
				"$MEGACACHE" "$op" -q "$T/wide.mcache" -p "$PUB" --threads "$n" $extra \
				>/dev/null 2>"$T/err" || bad "$op --threads $n of 12 blocks: $(cat "$T/err")"
			# each call once: an interrupted one's "resumed" line holds its result
			eval "c$n=\$(grep -cE 'clone.* = [0-9]+\$' \"\$T/clones.\$n\")"
			rm -rf "$T/wide-$n"
		done
		[ "$c16" = "$c8" ] && [ "$c8" -gt "$c4" ] && ok ||
			bad "$op: --threads 4, 8 and 16 made $c4, $c8 and $c16 clone calls (16 is to be taken as 8)"
	done
	rm -f "$T/wide.mcache"
else
	echo "roundtrip: the thread cap is not checked: $skip_wide"
fi
# Locks are never packed.
run 0 "" list "$T/dir-cpu.mcache"
grep -q '\.lock' "$T/out" && bad "a lock file was packed" || ok

# A graph file whose name is not its content's hash is not packed (it would land
# under another name).
cp -r "$T/ref/cache_mlp_cold" "$T/renamed"
g=$(find "$T/renamed/fxgraph" -type f | head -n 1)
mv "$g" "$(dirname "$g")/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
run 0 "" pack -v -o "$T/renamed.mcache" --from-dir "$T/renamed"
grep -q "file name is not the hash of its content" "$T/err" && ok || bad "misnamed graph file not reported"
run 0 "" list "$T/renamed.mcache"
[ "$(grep -c '^inductor' "$T/out")" = 3 ] && ok || bad "misnamed graph file was packed"
# Format 2 finds it as the bundle is written, reading each file once: the count of
# skipped files includes it. Format 1 finds it at the scan.
run 0 "" pack --json -o "$T/renamed-j.mcache" --from-dir "$T/renamed"
grep -q '"skipped_files":[[:space:]]*1,*$' "$T/out" && ok || bad "misnamed file not counted: $(cat "$T/out")"
grep -q '"artifact_count":[[:space:]]*153,*$' "$T/out" && ok || bad "misnamed file counted as packed: $(cat "$T/out")"
# A folder of nothing but such a file is a pack that found nothing to write.
mkdir -p "$T/only/$(dirname "${g#$T/renamed/}")"
cp "$(dirname "$g")/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "$T/only/$(dirname "${g#$T/renamed/}")/"
run 2 "nothing written: every file recorded was a graph file whose name is not the hash" \
	pack -o "$T/only.mcache" --from-dir "$T/only"
[ ! -e "$T/only.mcache" ] && ok || bad "a pack of nothing but a misnamed graph file left a bundle"
run 0 "" pack -v --format-version 1 -o "$T/renamed-v1.mcache" --from-dir "$T/renamed"
grep -q "file name is not the hash of its content" "$T/err" && ok || bad "format 1: misnamed graph file not reported"
run 0 "" list "$T/renamed-v1.mcache"
[ "$(grep -c '^inductor' "$T/out")" = 3 ] && ok || bad "format 1: misnamed graph file was packed"
# ... unless every file is to be kept: then it is kept as it is, at its path.
run 0 "" pack -q -o "$T/renamed-all.mcache" --from-dir "$T/renamed" --keep-unknown
run 0 "" load -q "$T/renamed-all.mcache" --insecure-no-verify --cache-dir "$T/renamed-out"
check "misnamed graph file kept with --keep-unknown" cmp -s "$(dirname "$g")/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	"$T/renamed-out/$(dirname "${g#$T/renamed/}")/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

# Type selection and the dry run.
run 0 "" load "$T/mlp-cuda.mcache" -p "$PUB" --cache-dir "$T/only-autotune" --types autotune
n=$(find "$T/only-autotune" -type f | wc -l)
[ "$n" = 4 ] && ok || bad "--types autotune installed $n files, expected 4"
run 0 "" load "$T/mlp-cuda.mcache" -p "$PUB" --cache-dir "$T/dry" --dry-run
[ ! -e "$T/dry" ] && ok || bad "--dry-run wrote something"
grep -qx "10 files to install, 0 to replace, 0 already there (2.21 MB to write)" "$T/out" && ok ||
	bad "--dry-run did not count 10 artifacts: $(cat "$T/out")"
run 0 "" load "$T/mlp-cuda.mcache" -p "$PUB" --cache-dir "$T/json" --json
grep -Eq '"installed":[[:space:]]*10,' "$T/out" && ok || bad "--json lacks the installed count"
run 2 "unknown artifact type" load "$T/mlp-cuda.mcache" -p "$PUB" --cache-dir "$T/x" --types nosuch
run 2 "needs -p" load "$T/mlp-cuda.mcache" --cache-dir "$T/x"
[ ! -e "$T/x" ] && ok || bad "a refused load wrote something"

# The default cache dir is torch's.
TORCHINDUCTOR_CACHE_DIR="$T/envroot" run 0 "" load "$T/mlp-cuda.mcache" -p "$PUB"
[ -d "$T/envroot/fxgraph" ] && ok || bad "TORCHINDUCTOR_CACHE_DIR was not used"
mkdir -p "$T/tmpdir"
(unset TORCHINDUCTOR_CACHE_DIR; TMPDIR="$T/tmpdir" USER='a/b:c' LOGNAME='a/b:c' \
	"$MEGACACHE" load "$T/mlp-cuda.mcache" -p "$PUB" -q)
[ -d "$T/tmpdir/torchinductor_a_b_c/fxgraph" ] && ok || bad "default root is not \$TMPDIR/torchinductor_<user>"

# sign adds a signature; verify with a threshold of two keys.
run 0 "" pack -q -o "$T/two.mcache" -s "$SEC" --from-torch "$DATA/mlp-cpu-pgo.megacache"
run 1 "1 valid trusted signature, 2 required" verify "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub" --threshold 2
run 0 "" sign "$T/two.mcache" -s "$KEYS/test2.key" -p "$PUB"
run 0 "OK" verify "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub" --threshold 2
run 0 "" sign "$T/mlp-cpu-pgo.mcache" -s "$KEYS/test2.key" -p "$PUB" -o "$T/signed-copy.mcache"
check "sign -o then pack with both keys give the same bytes" cmp -s "$T/signed-copy.mcache" "$T/two.mcache"

# Labels are recorded and listed.
run 0 "" pack -q -o "$T/labels.mcache" --from-torch "$DATA/mlp-cuda.megacache" --label torch=2.11.0 --label gpu=H100
run 0 "" list "$T/labels.mcache" --json
grep -Eq '"gpu":[[:space:]]*"H100"' "$T/out" && ok || bad "label missing from list --json"
run 2 "KEY=VALUE" pack -o "$T/l2.mcache" --from-torch "$DATA/mlp-cuda.megacache" --label novalue
# A label whose text is a backslash and u0000 is text, not an escaped NUL: it reads back.
run 0 "" pack -q -o "$T/l3.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" --label 'odd=\u0000'
run 0 "OK" verify "$T/l3.mcache" -p "$PUB"
run 0 "label odd=\u0000" list "$T/l3.mcache"
# A block that compresses past the 4,096x expansion cap is stored as is, so that the
# bundle loads with the default caps; one within the cap is stored as zstd.
mkdir -p "$T/expand/ab"
head -c 2000000 /dev/zero > "$T/expand/ab/zeros.bin"
seq 1 300000 | head -c 2000000 > "$T/expand/ab/count.txt"
run 0 "" pack -q -o "$T/expand.mcache" -s "$SEC" --from-dir "$T/expand"
run 0 "" verify "$T/expand.mcache" -p "$PUB"
run 0 "2 files installed" load "$T/expand.mcache" -p "$PUB" --cache-dir "$T/expand-out"
check "expand: the zeros load byte for byte" cmp -s "$T/expand/ab/zeros.bin" "$T/expand-out/ab/zeros.bin"
check "expand: the text loads byte for byte" cmp -s "$T/expand/ab/count.txt" "$T/expand-out/ab/count.txt"
# list --json shows no encodings: they are read from the index member itself. The zeros
# and the text share one block, which compresses within the cap; the zeros alone do not.
tar -xOf "$T/expand.mcache" index.json.zst | zstd -dcq > "$T/expand.json"
zh=$(sha256sum "$T/expand/ab/zeros.bin" | cut -c1-64)
ch=$(sha256sum "$T/expand/ab/count.txt" | cut -c1-64)
check "expand: the zeros and the text are objects of the index" \
	grep -q "\"objects\":\[{\"hash\":\"$zh\",\"size\":2000000},{\"hash\":\"$ch\"," "$T/expand.json"
check "expand: the zeros and the text are stored as one zstd block" \
	grep -q '"blocks":\[{"encoding":"zstd","objects":2,' "$T/expand.json"
mkdir -p "$T/zeros/ab"
cp "$T/expand/ab/zeros.bin" "$T/zeros/ab/"
run 0 "" pack -q -o "$T/zeros.mcache" -s "$SEC" --from-dir "$T/zeros"
tar -xOf "$T/zeros.mcache" index.json.zst | zstd -dcq > "$T/zeros.json"
check "expand: the zeros alone are stored as is" \
	grep -q '"blocks":\[{"encoding":"none","objects":1,"stored_size":2000000}\]' "$T/zeros.json"
run 0 "1 file installed" load "$T/zeros.mcache" -p "$PUB" --cache-dir "$T/zeros-out"
check "expand: the zeros alone load byte for byte" \
	cmp -s "$T/expand/ab/zeros.bin" "$T/zeros-out/ab/zeros.bin"

# Folders deeper than a worker keeps open (8), and folders below them, in turn: every file
# in its place, on one thread and on several.
d="$T/deep/a/b/c/d/e/f/g/h"
for sub in "" /i /i/j /i/j/k /i2 /i/j2; do
	mkdir -p "$d$sub"
	for f in 1 2 3; do printf 'deep%s %s\n' "$sub" "$f" > "$d$sub/f$f.txt"; done
done
run 0 "" pack -q -o "$T/deep.mcache" -s "$SEC" --from-dir "$T/deep" --keep-unknown
for n in 1 2 8; do
	run 0 "18 files installed" load "$T/deep.mcache" -p "$PUB" --cache-dir "$T/deep-out$n" --threads "$n"
	check "deep folders, $n threads: the tree as packed" diff -r "$T/deep" "$T/deep-out$n"
done
# Blocks are taken the longest first (the last one, of 1,744 small files, before the
# first, of one large file), but a bundle damaged in several blocks names the first in
# the bundle, on one thread or several, as a verify and as a load (which leaves nothing
# behind).
/usr/bin/python3 - "$T/order" <<'EOF'
import os, sys
top = sys.argv[1]
os.makedirs(os.path.join(top, "ab"))
for name in ("a1.bin", "a2.bin"):
    with open(os.path.join(top, "ab", name), "wb") as f:
        f.write(os.urandom(15 << 20))
for i in range(2000):
    with open(os.path.join(top, "ab", "s%04d.zz" % i), "wb") as f:
        f.write(os.urandom(4096))
EOF
run 0 "" pack -q -o "$T/order.mcache" -s "$SEC" --from-dir "$T/order" --keep-unknown
tar -xOf "$T/order.mcache" index.json.zst | zstd -dcq > "$T/order.json"
/usr/bin/python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))["blocks"]
sys.exit([x["objects"] for x in b] != [1, 257, 1744])' "$T/order.json" && ok ||
	bad "order: the blocks are not a large file, one with small files, then small files: $(head -c 300 "$T/order.json")"
flip_member "$T/order.mcache" "$T/order1.mcache" blocks/0 0x40
flip_member "$T/order1.mcache" "$T/order12.mcache" blocks/2 0x40
run 1 "" verify "$T/order1.mcache" -p "$PUB" --threads 1
sed -n 1p "$T/err" > "$T/order.want"
[ -s "$T/order.want" ] && ok || bad "order: no error for a damaged block"
for n in 1 2 4; do
	run 1 "" verify "$T/order12.mcache" -p "$PUB" --threads "$n"
	sed -n 1p "$T/err" | sed 's/order12/order1/' > "$T/order.got"
	check "order: two damaged blocks, $n threads: verify names the first" cmp -s "$T/order.want" "$T/order.got"
	run 1 "" load "$T/order12.mcache" -p "$PUB" --threads "$n" --cache-dir "$T/order-out$n"
	sed -n 1p "$T/err" | sed 's/order12/order1/' > "$T/order.got"
	check "order: two damaged blocks, $n threads: load names the first" cmp -s "$T/order.want" "$T/order.got"
	check "order: two damaged blocks, $n threads: nothing left" test ! -e "$T/order-out$n"
done
finish
