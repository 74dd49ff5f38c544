#!/bin/sh
# around.sh - on a GPU machine, the three lines of a user around training runs, each
# "machine" a fresh HOME and TMPDIR with no cache variables set: a cold job then
# `megacache save`; `megacache load` then the job; `megacache run` around a job that
# grew, saving only what is new. Then a Triton cache loaded into another folder than
# the one it was made in. Run from the top of a built tree with .gpu-libs/ (see
# examples/torch/proof.sh); results and summary.md go to $OUT (default ./run/around).
set -eu
top=$(pwd)
W=${WORK:-/tmp/megacache-around}
R=${OUT:-$top/run/around}
export LD_LIBRARY_PATH="$top/.gpu-libs:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
PY=${PYTHON:-python3}
TRAIN="$top/examples/torch/train.py"
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME TEMP TMP || true
rm -rf "$W"
mkdir -p "$W" "$R"
cd "$W"
# A new machine: the previous one's folders are gone (so no path into them can hit).
machine() {
	rm -rf "$W"/m?
	HOME="$W/$1/home" TMPDIR="$W/$1/tmp"
	export HOME TMPDIR
	mkdir -p "$HOME" "$TMPDIR"
}

"$M" keygen -q -W -f -p k.pub -s k.key
echo "== machine 1: a cold job, then megacache save"
machine m1
"$PY" "$TRAIN" --out "$R/m1-cold.json"
"$M" save -o b.mcache -s k.key | tee "$R/m1-save.txt"

echo "== machine 2: megacache load, then the job"
machine m2
"$M" load b.mcache -p k.pub | tee "$R/m2-load.txt"
"$PY" "$TRAIN" --out "$R/m2-warm.json"

echo "== machine 3: megacache run around a job that grew"
machine m3
"$M" run -b b.mcache -p k.pub --save-to next.mcache -s k.key -- \
	"$PY" "$TRAIN" --wide --out "$R/m3-run.json" 2>&1 | tee "$R/m3-run.txt"
# diff exits 1 when the bundles differ, as the grown job's must.
rc=0
"$M" diff b.mcache next.mcache --json > "$R/m3-diff.json" || rc=$?
[ "$rc" = 1 ] || { echo "around: diff of b.mcache and next.mcache exited $rc, expected 1" >&2; exit 1; }

echo "== machine 4: both bundles, the grown job"
machine m4
"$M" run -b b.mcache -b next.mcache -p k.pub -- "$PY" "$TRAIN" --wide --out "$R/m4-run.json"

echo "== a Triton cache made in folder A, A removed, loaded into B (and copied to C)"
machine m5
TRITON_CACHE_DIR="$W/tA" "$PY" "$TRAIN" --kernel-only --out "$R/t-cold.json"
cp -a "$W/tA" "$W/tC"
TRITON_CACHE_DIR="$W/tA" "$M" save -o t.mcache -s k.key | tee "$R/t-save.txt"
rm -rf "$W/tA"
TRITON_CACHE_DIR="$W/tC" "$PY" "$TRAIN" --kernel-only --out "$R/t-copied.json"
"$M" load t.mcache -p k.pub --triton-dir "$W/tB"
TRITON_CACHE_DIR="$W/tB" "$PY" "$TRAIN" --kernel-only --out "$R/t-loaded.json"
cp "$W"/tB/*/__grp__*.json "$R/" 2>/dev/null || true

"$PY" "$top/examples/torch/around_summary.py" "$R"
