#!/bin/sh
# size.sh - how large a signed bundle is against tar and zstd on the same files. For each
# cache: the bundle `megacache pack` writes at the default level (3) and at the highest
# (19), against the same files as `tar --zstd` at those levels and as
# `tar | zstd -19 --long=27`. Sizes only, no timing.
#   sh tests/bench/size.sh
# The caches: the two real cache dirs of tests/data (packed with --keep-unknown, as
# bench.sh does, so that both sides hold every file), the three real torch blobs (packed
# from the blob; the tar side holds what the bundle installs into an empty folder), and
# the bench corpus (the CUDA MLP cache dir scaled COPIES times, as bench.sh makes it).
# Environment: COPIES (default 130; 0 leaves the corpus out), WORK (/tmp/megacache-size),
# SHARED (../shared). Needs: python3, zstd, tar. Run from a built tree.
set -eu
top=$(pwd)
COPIES=${COPIES:-130}
WORK=${WORK:-/tmp/megacache-size}
SHARED=${SHARED:-$top/../shared}
DATA="$top/tests/data/torch-2.11"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for tool in python3 zstd tar; do
	command -v "$tool" >/dev/null 2>&1 || { echo "size: $tool is needed" >&2; exit 2; }
done
CAP="--max-manifest-bytes 1073741824"
rm -rf "$WORK/src" "$WORK/out"
mkdir -p "$WORK/src" "$WORK/out"
"$M" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$WORK/src"

# tarz DIR ZSTD_ARGS...: the size in bytes of DIR as one tar (names sorted, owners and
# times zeroed, as a reproducible image build makes it) compressed by zstd.
tarz() {
	d=$1
	shift
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -C "$d" . |
		zstd -q -c "$@" | wc -c
}

# row NAME DIR PACK_SOURCE...: one line of the table; DIR holds the files the tar side
# compresses, PACK_SOURCE is how pack reads them.
row() {
	name=$1 dir=$2
	shift 2
	for lv in 3 19; do
		"$M" pack $CAP -q -o "$WORK/out/b$lv.mcache" -s "$WORK/k.key" --level "$lv" "$@" || {
			echo "size: pack of $name at level $lv failed" >&2
			exit 1
		}
	done
	files=$(find "$dir" -type f | wc -l)
	bytes=$(find "$dir" -type f -printf '%s\n' | awk '{ n += $1 } END { print n + 0 }')
	m3=$(stat -c %s "$WORK/out/b3.mcache")
	m19=$(stat -c %s "$WORK/out/b19.mcache")
	t3=$(tarz "$dir" -3)
	t19=$(tarz "$dir" -19)
	tl=$(tarz "$dir" -19 --long=27)
	awk -v n="$name" -v f="$files" -v b="$bytes" -v m3="$m3" -v t3="$t3" -v m19="$m19" \
		-v t19="$t19" -v tl="$tl" 'BEGIN {
		mb = 1e6
		printf "| %s | %d | %.2f | %.3f | %.3f | %.2f | %.3f | %.3f | %.3f | %.2f | %.2f |\n",
			n, f, b / mb, m3 / mb, t3 / mb, m3 / t3, m19 / mb, t19 / mb, tl / mb,
			m19 / t19, m19 / tl
	}'
}

# blob NAME: a torch blob's row; its tar side is the bundle loaded into an empty folder.
blob() {
	b="$DATA/$1.megacache"
	d="$WORK/src/$1"
	"$M" pack -q -o "$WORK/out/blob.mcache" -s "$WORK/k.key" --from-torch "$b"
	"$M" load -q "$WORK/out/blob.mcache" -p "$WORK/k.pub" --cache-dir "$d"
	row "$1 (blob)" "$d" --from-torch "$b"
}

echo "| cache | files | content (MB) | megacache -3 (MB) | tar --zstd -3 (MB) | ratio -3 |" \
	"megacache -19 (MB) | tar --zstd -19 (MB) | tar \\| zstd -19 --long=27 (MB) |" \
	"ratio -19 | ratio to --long |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
row "mlp-cuda cache dir" "$WORK/src/cache_mlp_cold" --from-dir "$WORK/src/cache_mlp_cold" --keep-unknown
row "mlp-cpu cache dir" "$WORK/src/cache_cpu_cold" --from-dir "$WORK/src/cache_cpu_cold" --keep-unknown
for b in mlp-cuda mlp-cuda-precompile mlp-cpu-pgo; do
	blob "$b"
done
if [ "$COPIES" -gt 0 ]; then
	C="$WORK/cache-$COPIES"
	if [ ! -d "$C" ]; then
		python3 "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C.tmp" "$COPIES"
		mv "$C.tmp" "$C"
	fi
	row "bench corpus ($COPIES copies)" "$C" --from-dir "$C" --keep-unknown
fi
echo
echo "sizes in MB (10^6 bytes); bundles signed; ratio: megacache / tar at the same level;" \
	"ratio to --long: megacache -19 / tar | zstd -19 --long=27"
