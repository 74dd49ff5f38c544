#!/bin/sh
# gpu.sh - proves on a GPU machine the two checks megacache makes around a job: that a
# bundle's Triton kernels are for this host's GPU (SPEC.md section 12.6), and what the
# job read of what was loaded. For the jobs blocks (three transformer blocks, a
# training step) and guard (a dynamic-shape compile with a size guard) of
# examples/torch/fidelity.py:
#   1. a cold run fills $W/cold-JOB/{inductor,triton}; it is packed into a signed
#      bundle of format 2 (which records the targets) and of format 1 (which does not);
#   2. the host's targets as NVML gives them (megacache.gpu_targets() and
#      nvidia-smi's compute_cap), and what list says of the bundle;
#   3. load with the GPUs detected; with --gpu-target cuda:80 (refused, nothing
#      written); with --gpu-target cuda:80 --skip-other-gpus (every kernel left out),
#      for both formats;
#   4. megacache run around the warm job, in empty folders: what it says the job read,
#      beside torch's own counters (FX graph and AOTAutograd cache hits).
# Run from the top of a built tree with .gpu-libs/ (see examples/torch/proof.sh). Works
# in $WORK (default /tmp/megacache-gpu); what it saw and table.md go to $OUT (default
# ./run/gpu).
set -eu
top=$(pwd)
W=${WORK:-/tmp/megacache-gpu}
R=${OUT:-$top/run/gpu}
PY=${PYTHON:-python3}
FID="$top/examples/torch/fidelity.py"
export LD_LIBRARY_PATH="$top/.gpu-libs:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME || true
rm -rf "$W"
mkdir -p "$W" "$R"
finish() {
	for f in "$W"/*.json "$W"/*.txt "$W/table.md"; do
		if [ -f "$f" ]; then cp "$f" "$R/"; fi
	done
}
trap finish EXIT
# say FILE CMD...: CMD's exit status, standard output and error into FILE, and shown.
say() {
	f=$1
	shift
	set +e
	"$@" >"$W/$f" 2>&1
	echo "exit $?" >>"$W/$f"
	set -e
	echo "\$ $*" | sed "s|$W|\$W|g; s|$top/||g"
	sed "s|$W|\$W|g" "$W/$f"
}

"$M" keygen -q -W -f -p "$W/k.pub" -s "$W/k.key"
for job in blocks guard; do
	echo "== 1. $job: cold run, packed"
	c="$W/cold-$job"
	env TORCHINDUCTOR_CACHE_DIR="$c/inductor" TRITON_CACHE_DIR="$c/triton" \
		"$PY" "$FID" "$job" cold --out "$W/cold-$job.json"
	"$M" pack -q -o "$W/$job.mcache" -s "$W/k.key" --from-dir "$c/inductor" --from-triton-dir "$c/triton"
	"$M" pack -q -o "$W/$job-v1.mcache" -s "$W/k.key" --format-version 1 \
		--from-dir "$c/inductor" --from-triton-dir "$c/triton"
done

echo "== 2. this host's GPU targets, and the bundle's"
nvidia-smi --query-gpu=name,compute_cap --format=csv >"$W/nvidia-smi.txt" 2>&1 || true
cat "$W/nvidia-smi.txt"
PYTHONPATH="$top/python" MEGACACHE_LIBRARY="$top/lib/.libs/libmegacache.so.0" "$PY" -c \
	'import json, megacache; print(json.dumps(megacache.gpu_targets()))' >"$W/detected.txt"
echo "megacache.gpu_targets(): $(cat "$W/detected.txt")"
say list.txt "$M" list "$W/blocks.mcache"

echo "== 3. load: detected, another GPU, its kernels left out"
for b in blocks blocks-v1; do
	say "load-$b-detected.txt" "$M" load "$W/$b.mcache" -p "$W/k.pub" \
		--cache-dir "$W/d-$b/inductor" --triton-dir "$W/d-$b/triton"
	say "load-$b-cuda80.txt" "$M" load "$W/$b.mcache" -p "$W/k.pub" \
		--cache-dir "$W/r-$b/inductor" --triton-dir "$W/r-$b/triton" --gpu-target cuda:80
	if [ -e "$W/r-$b" ]; then echo "after the refusal: $(find "$W/r-$b" | wc -l) paths"; else echo "after the refusal: $W/r-$b does not exist" | sed "s|$W|\$W|"; fi
	"$M" load --json "$W/$b.mcache" -p "$W/k.pub" --cache-dir "$W/s-$b/inductor" \
		--triton-dir "$W/s-$b/triton" --gpu-target cuda:80 --skip-other-gpus >"$W/load-$b-skip.json" || true
	say "load-$b-skip.txt" "$M" load "$W/$b.mcache" -p "$W/k.pub" --cache-dir "$W/s2-$b/inductor" \
		--triton-dir "$W/s2-$b/triton" --gpu-target cuda:80 --skip-other-gpus
	echo "kernel files: $(find "$W/cold-blocks/triton" -type f | wc -l) in the cold cache," \
		"$(find "$W/d-$b/triton" -type f | wc -l) loaded for the host's GPU," \
		"$( (find "$W/s-$b/triton" -type f 2>/dev/null || true) | wc -l) with --skip-other-gpus for cuda:80" |
		tee "$W/kernels-$b.txt"
done

echo "== 4. run around the warm job: what it read, beside torch's counters"
for job in blocks guard; do
	w="$W/warm-$job"
	"$M" run --json-file "$W/run-$job.json" -b "$W/$job.mcache" -p "$W/k.pub" \
		--cache-dir "$w/inductor" --triton-dir "$w/triton" -- \
		"$PY" "$FID" "$job" warm --out "$W/warm-$job.json" 2>"$W/run-$job.txt" || true
	sed "s|$W|\$W|g" "$W/run-$job.txt"
done
# The same as a user sees it: the line on standard error (and no warning).
"$M" run -b "$W/blocks.mcache" -p "$W/k.pub" --cache-dir "$W/text/inductor" \
	--triton-dir "$W/text/triton" -- "$PY" "$FID" blocks warm --out "$W/warm-text.json" \
	2>"$W/run-text.txt" >/dev/null || true
sed "s|$W|\$W|g" "$W/run-text.txt"
"$PY" - "$W" >"$W/table.md" <<'EOF'
import json, os, sys
W = sys.argv[1]
rows = ["| job | FX graph cache hits (torch) | inductor entries read (megacache) | "
        "AOTAutograd hits (torch) | aot_autograd entries read | triton files read / loaded | "
        "new files |", "|---|---|---|---|---|---|---|"]
for job in ("blocks", "guard"):
    w = json.load(open(os.path.join(W, "warm-%s.json" % job)))
    r = json.load(open(os.path.join(W, "run-%s.json" % job)))
    ind, ag = w["counters"].get("inductor", {}), w["counters"].get("aot_autograd", {})
    used = r.get("used") or {}
    u = lambda t, k: used.get(t, {}).get(k, 0)
    new = sum(v.get("new", 0) for v in used.values())
    rows.append("| %s | %d (misses %d) | %d of %d | %d (misses %d) | %d of %d | %d / %d | %d |" % (
        job, ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0),
        u("inductor", "read"), u("inductor", "installed"), ag.get("autograd_cache_hit", 0),
        ag.get("autograd_cache_miss", 0), u("aot_autograd", "read"),
        u("aot_autograd", "installed"), u("triton", "read"), u("triton", "installed"), new))
    if (u("inductor", "read"), u("aot_autograd", "read")) != (ind.get("fxgraph_cache_hit", 0),
                                                           ag.get("autograd_cache_hit", 0)):
        rows.append("%s: the entries read are not torch's hits" % job)
print("\n".join(rows))
EOF
cat "$W/table.md"
# The entries read must be torch's hits, one for one.
! grep -q "are not torch's hits" "$W/table.md"
