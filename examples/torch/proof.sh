#!/bin/sh
# proof.sh - proves on a GPU machine that a megacache bundle turns a cold torch.compile
# into a warm one. Run from the top of a tree where megacache was built, with the
# shared libraries it needs in .gpu-libs/ (see doc/gpu.md, "Running the proofs").
# Works in $WORK (default /tmp/megacache-proof); copies the JSON of each run and
# table.md to $OUT (default ./run/proof).
set -eu
top=$(pwd)
W=${WORK:-/tmp/megacache-proof}
R=${OUT:-$top/run/proof}
mkdir -p "$W" "$R"
export LD_LIBRARY_PATH="$top/.gpu-libs:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
PY=${PYTHON:-python3}
MODEL="$top/examples/torch/model.py"
unset TRITON_CACHE_DIR || true
now() { date +%s.%N; }

echo "== 1. cold compile, torch's blob saved"
rm -rf "$W/cold" "$W"/warm-*
TORCHINDUCTOR_CACHE_DIR="$W/cold" "$PY" "$MODEL" cold --blob "$W/blob.bin" --out "$W/cold.json"

echo "== 2. two signed bundles: from torch's blob, and from the cache dir"
"$M" keygen -q -W -f -p "$W/proof.pub" -s "$W/proof.key"
facts="$W/blob.bin.labels.json"
"$M" pack -o "$W/from-torch.mcache" -s "$W/proof.key" --from-torch "$W/blob.bin" --labels-json "$facts"
"$M" pack -o "$W/from-dir.mcache" -s "$W/proof.key" --from-dir "$W/cold" --labels-json "$facts"
"$M" list "$W/from-dir.mcache" | head -8
torch_version=$("$PY" -c "import json; print(json.load(open('$facts'))['torch'])")

echo "== 3. warm runs, each in a fresh process with a new empty cache dir"
for kind in from-torch from-dir; do
	for rep in 1 2; do
		d="$W/warm-$kind-$rep"
		t=$(now)
		"$M" load "$W/$kind.mcache" -p "$W/proof.pub" --cache-dir "$d" --require torch="$torch_version"
		t2=$(now)
		awk -v a="$t" -v b="$t2" 'BEGIN { printf "{\"load_s\": %.4f}\n", b - a }' > "$W/load-$kind-$rep.json"
		TORCHINDUCTOR_CACHE_DIR="$d" "$PY" "$MODEL" warm --out "$W/warm-$kind-$rep.json"
	done
done

echo "== 4. torch's own load_cache_artifacts on the same blob"
for rep in 1 2; do
	TORCHINDUCTOR_CACHE_DIR="$W/warm-torchload-$rep" "$PY" "$MODEL" torch-load --blob "$W/blob.bin" \
		--out "$W/torchload-$rep.json"
done

status=0
"$PY" "$top/examples/torch/summarize.py" "$W" > "$W/table.md" || status=$?
cat "$W/table.md"
cp "$W"/*.json "$W/table.md" "$R/"
exit "$status"
