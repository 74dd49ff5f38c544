#!/bin/sh
# bench.sh - megacache against the obvious script on the same content at the same zstd
# level: `tar --zstd` + `minisign` for pack, `minisign -V` + `tar --zstd -x` for load,
# and `zstd -d` of the baseline bundle for verify. Runs alternate; the table gives
# medians of wall time and peak RSS and the ratios megacache/baseline.
#   sh tests/bench/bench.sh [COPIES...]      (default 130: about 510 MB in 20,000 files)
# Environment: RUNS (default 5), LEVEL (3), WORK (/tmp/megacache-bench), SHARED (../shared).
# Needs: python3, GNU time (/usr/bin/time), zstd, minisign, tar. Run from a built tree.
set -eu
top=$(pwd)
RUNS=${RUNS:-5}
LEVEL=${LEVEL:-3}
WORK=${WORK:-/tmp/megacache-bench}
SHARED=${SHARED:-$top/../shared}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
copies_list=${*:-130}
mkdir -p "$WORK"
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
tar -xzf "$top/tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
"$M" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"

# t NAME CMD...: runs CMD under GNU time, appends "wall rss_kb" to $WORK/NAME.times.
t() {
	name=$1
	shift
	/usr/bin/time -f "%e %M" -o "$WORK/.t" "$@" >/dev/null 2>"$WORK/.err" || {
		echo "bench: $name failed: $(tail -3 "$WORK/.err")" >&2
		exit 1
	}
	cat "$WORK/.t" >> "$WORK/$name.times"
}

median() { # median COLUMN FILE
	cut -d' ' -f"$1" "$2" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "| corpus | operation | baseline (s) | megacache (s) | ratio | baseline RSS (MiB) | megacache RSS (MiB) |"
echo "|---|---|---|---|---|---|---|"
for copies in $copies_list; do
	C="$WORK/cache-$copies"
	if [ ! -d "$C" ]; then
		python3 "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C" "$copies"
	fi
	size=$(du -sm "$C" | cut -f1)
	files=$(find "$C" -type f | wc -l)
	rm -f "$WORK"/*.times
	i=0
	while [ "$i" -lt "$RUNS" ]; do
		i=$((i + 1))
		rm -f "$WORK/base.tar.zst" "$WORK/base.tar.zst.minisig" "$WORK/mc.mcache"
		t pack-base sh -c "tar -cf - -C '$C' . | zstd -q -$LEVEL -T1 -o '$WORK/base.tar.zst' && minisign -S -s '$WORK/k.key' -m '$WORK/base.tar.zst'"
		t pack-mc "$M" pack -q -o "$WORK/mc.mcache" -s "$WORK/k.key" --from-dir "$C" --keep-unknown --level "$LEVEL"
		rm -rf "$WORK/out-base" "$WORK/out-mc"
		mkdir -p "$WORK/out-base"
		t load-base sh -c "minisign -Vq -p '$WORK/k.pub' -m '$WORK/base.tar.zst' && tar --zstd -xf '$WORK/base.tar.zst' -C '$WORK/out-base'"
		t load-mc "$M" load -q "$WORK/mc.mcache" -p "$WORK/k.pub" --cache-dir "$WORK/out-mc" --max-expansion 0
		t verify-base sh -c "zstd -q -d -c '$WORK/base.tar.zst' > /dev/null"
		t verify-mc "$M" verify -q "$WORK/mc.mcache" -p "$WORK/k.pub" --max-expansion 0
	done
	# The two loads must give the same tree.
	(cd "$WORK/out-base" && find . -type f | sort | xargs sha256sum) > "$WORK/base.sums"
	(cd "$WORK/out-mc" && find . -type f | sort | xargs sha256sum) > "$WORK/mc.sums"
	cmp -s "$WORK/base.sums" "$WORK/mc.sums" || { echo "bench: the loads differ" >&2; exit 1; }
	for op in pack load verify; do
		bw=$(median 1 "$WORK/$op-base.times")
		mw=$(median 1 "$WORK/$op-mc.times")
		br=$(median 2 "$WORK/$op-base.times")
		mr=$(median 2 "$WORK/$op-mc.times")
		awk -v c="$size MB, $files files" -v op="$op" -v bw="$bw" -v mw="$mw" -v br="$br" -v mr="$mr" \
			'BEGIN { printf "| %s | %s | %.2f | %.2f | %.2f | %.1f | %.1f |\n", c, op, bw, mw, mw / bw, br / 1024, mr / 1024 }'
	done
	echo "bundle sizes: baseline $(stat -c %s "$WORK/base.tar.zst") bytes, megacache $(stat -c %s "$WORK/mc.mcache") bytes" >&2
done
echo
echo "medians of $RUNS alternating runs, zstd level $LEVEL; verify's baseline is \`zstd -d\` of the baseline bundle to /dev/null"
