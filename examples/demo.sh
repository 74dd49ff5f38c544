#!/bin/sh
# demo.sh - the main job on a real torch cache shipped in the repository: make a key,
# save the cache a torch 2.11 job left (a CUDA MLP) into a signed bundle, verify it,
# and run a next "job" on a fresh machine's empty cache: loaded first, then only what
# the job added saved. Run from the top of a built tree.
set -eu
M=./bin/megacache
D=run/demo
rm -rf "$D"
mkdir -p "$D"
tar -xzf tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz -C "$D"
# The job's machine: torch's cache where TORCHINDUCTOR_CACHE_DIR says, Triton's own
# cache in the demo's home.
export TORCHINDUCTOR_CACHE_DIR="$PWD/$D/cache_mlp_cold" HOME="$PWD/$D/home"
unset TRITON_CACHE_DIR TRITON_HOME

echo "== keygen"
$M keygen -W -p "$D/demo.pub" -s "$D/demo.key"
echo "== save (after the job)"
$M save -o "$D/demo.mcache" -s "$D/demo.key" --label source=mlp-cuda --label torch=2.11.0+cu130
echo "== verify"
$M verify "$D/demo.mcache" -p "$D/demo.pub"
echo "== run the next job on an empty cache: load, run, save what is new"
# The "job" reads every file loaded, as a warm torch job reads the entries it hits (run
# tells what it read), and writes one file anew.
export TORCHINDUCTOR_CACHE_DIR="$PWD/$D/fresh-machine-cache"
$M run -b "$D/demo.mcache" -p "$D/demo.pub" --save-to "$D/next.mcache" -s "$D/demo.key" -- \
	sh -c 'ls "$TORCHINDUCTOR_CACHE_DIR/fxgraph" | sed "s/^/job sees fxgraph\//"; find "$TORCHINDUCTOR_CACHE_DIR" -type f -exec cat {} + >/dev/null; mkdir -p "$TORCHINDUCTOR_CACHE_DIR/zz" && echo "print(1)" > "$TORCHINDUCTOR_CACHE_DIR/zz/cjobnew.py"'
$M list "$D/next.mcache"
