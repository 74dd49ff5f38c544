# tiers.sh - the whole cache dir: Triton kernel folders installed whole (or completed
# when present), the flat Triton layout of TRITON_CACHE_DIR, generated code, GEMM
# timings, and unknown files reported or kept on request.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
SRC="$T/cache_mlp_cold"
K=5R467APMN4NBYYOOQVSRYSCYJWWLZWXLOLQGVNQZHQXVOTJYWSOA

# Extra files a real cache dir may hold.
mkdir -p "$SRC/cache" "$SRC/odd/deep"
printf '{"timings": [1.5, 2.5]}' > "$SRC/cache/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
echo "not a cache file" > "$SRC/odd/deep/notes.txt"
mkdir -p "$SRC/triton/0/tmp.pid_77_123"
echo partial > "$SRC/triton/0/tmp.pid_77_123/x.cubin"
mkdir -p "$SRC/empty/folder"

run 0 "" pack -v -o "$T/b.mcache" -s "$SEC" --from-dir "$SRC"
grep -q "skipped odd/deep/notes.txt: not a known cache file" "$T/err" && ok || bad "unknown file not reported: $(cat "$T/err")"
grep -q "skipped triton/0/tmp.pid_77_123/x.cubin: lock or temp file" "$T/err" && ok || bad "Triton temp folder not skipped"
run 0 "" list "$T/b.mcache"
for t in triton kernel_code gemm_timing autotune inductor aot_autograd; do
	grep -q "^$t " "$T/out" && ok || bad "no $t artifact in the bundle"
done
grep -q "notes.txt" "$T/out" && bad "unknown file was packed" || ok

# Load: every file but the skipped ones, byte for byte; no empty folder, no temp folder.
run 0 "" load "$T/b.mcache" -p "$PUB" --cache-dir "$T/warm"
src_sum "$SRC" | grep -v -e ' \./odd/' -e ' \./triton/0/tmp\.' > "$T/want"
tree_sum "$T/warm" > "$T/got"
check "cache dir reproduced byte for byte" cmp -s "$T/want" "$T/got"
[ ! -e "$T/warm/empty" ] && ok || bad "an empty folder was created"
[ -z "$(find "$T/warm" -name '.*.tmp')" ] && ok || bad "temp folders left behind"

# A complete kernel folder is left alone; an incomplete one is completed.
touch -d 2001-01-01 "$T/warm/triton/0/$K"/*
rm "$T/warm/triton/0/4EZKWCJAMJOFUBJSA7CVHLDBLWWYSLPH5NKI6ZRGKA6Z2VZHQQCQ"/*.cubin
run 0 "" load "$T/b.mcache" -p "$PUB" --cache-dir "$T/warm" --json
[ -z "$(find "$T/warm/triton/0/$K" -type f -newermt 2002-01-01)" ] && ok || bad "a complete kernel folder was rewritten"
tree_sum "$T/warm" > "$T/got"
check "incomplete kernel folder completed" cmp -s "$T/want" "$T/got"
n=$(grep -c '"action":[[:space:]]*"installed"' "$T/out")
[ "$n" = 1 ] && ok || bad "second load installed $n files, expected the 1 missing"

# TRITON_CACHE_DIR (or --triton-dir) has no device level.
run 0 "" load "$T/b.mcache" -p "$PUB" --cache-dir "$T/w2" --triton-dir "$T/flat"
[ -f "$T/flat/$K/__grp__triton_poi_fused_gelu_1.json" ] && ok || bad "--triton-dir kernel missing"
[ ! -e "$T/w2/triton" ] && ok || bad "kernels written under the inductor root too"
TRITON_CACHE_DIR="$T/flat2" run 0 "" load "$T/b.mcache" -p "$PUB" --cache-dir "$T/w3"
[ -f "$T/flat2/$K/triton_poi_fused_gelu_1.cubin" ] && ok || bad "TRITON_CACHE_DIR not used"
# ... and a flat Triton cache packs back (as device 0).
run 0 "" pack -q -o "$T/flat.mcache" --from-triton-dir "$T/flat"
run 0 "" load "$T/flat.mcache" --insecure-no-verify --cache-dir "$T/w4"
tree_sum "$T/flat" > "$T/want-flat"
tree_sum "$T/w4/triton/0" > "$T/got-flat"
check "flat Triton cache round trip" cmp -s "$T/want-flat" "$T/got-flat"

# Export to torch's formats keeps the types each holds and says what it left out.
run 0 "left out 16 kernel_code artifacts" export "$T/b.mcache" --torch "$T/cur.blob" -p "$PUB"
grep -q "left out 128 triton artifacts" "$T/out" && ok || bad "export did not report Triton kernels left out"
run 0 "" export "$T/b.mcache" --torch "$T/27.blob" --torch-format 2.7 -p "$PUB"
run 0 "" pack -q -o "$T/from27.mcache" --from-torch "$T/27.blob"
run 0 "" pack -q -o "$T/fromcur.mcache" --from-torch "$T/cur.blob"
run 0 "" list "$T/from27.mcache" --json
grep -E '"(type|key|hash)"' "$T/out" > "$T/list27"
run 0 "" list "$T/fromcur.mcache" --json
grep -E '"(type|key|hash)"' "$T/out" > "$T/listcur"
check "2.7 and current exports carry the same artifacts" cmp -s "$T/list27" "$T/listcur"
[ "$(grep -c '"type"' "$T/list27")" = 10 ] && ok || bad "2.7 export does not hold the 10 torch artifacts"
run 2 "--torch-format takes 2.7 or current" export "$T/b.mcache" --torch "$T/x.blob" --torch-format 2.6

# --keep-unknown packs the rest too.
run 0 "" pack -q -o "$T/all.mcache" --from-dir "$SRC" --keep-unknown
run 0 "" load "$T/all.mcache" --insecure-no-verify --cache-dir "$T/w5"
check "kept unknown file installed" cmp -s "$SRC/odd/deep/notes.txt" "$T/w5/odd/deep/notes.txt"
finish
