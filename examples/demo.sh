#!/bin/sh
# demo.sh - the main job on a real torch cache shipped in the repository: make a key,
# pack the cache dir of a CUDA MLP compiled by torch 2.11 into a signed bundle, verify
# it, and warm an empty cache dir from it. Run from the top of a built tree.
set -eu
M=./bin/megacache
D=run/demo
rm -rf "$D"
mkdir -p "$D"
tar -xzf tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz -C "$D"

echo "== keygen"
$M keygen -W -p "$D/demo.pub" -s "$D/demo.key"
echo "== pack (the torch cache dir $D/cache_mlp_cold)"
$M pack -o "$D/demo.mcache" -s "$D/demo.key" --from-dir "$D/cache_mlp_cold" \
	--label source=mlp-cuda --label torch=2.11.0+cu130
echo "== verify"
$M verify "$D/demo.mcache" -p "$D/demo.pub"
echo "== load into an empty cache dir"
$M load "$D/demo.mcache" -p "$D/demo.pub" --cache-dir "$D/warm-cache"
