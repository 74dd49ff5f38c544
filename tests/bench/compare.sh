#!/bin/sh
# compare.sh - two builds of megacache on the same cache dir, alternating: pack, verify
# and load, each run by A then B or B then A (the order flips every run). Prints the
# median wall time of each side and the ratio B/A; the two packs must be byte-identical
# when the builds write the same format. Each load writes a new folder, all removed at the
# end (bench.sh says why).
#   sh tests/bench/compare.sh A_MEGACACHE B_MEGACACHE CACHE_DIR
# Environment: RUNS (default 5), WORK (/tmp/megacache-compare). Needs GNU time.
set -eu
[ $# -eq 3 ] || { echo "usage: compare.sh A_MEGACACHE B_MEGACACHE CACHE_DIR" >&2; exit 2; }
A=$1 B=$2 SRC=$3
RUNS=${RUNS:-5}
WORK=${WORK:-/tmp/megacache-compare}
rm -rf "$WORK"
mkdir -p "$WORK"
"$A" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"
export SOURCE_DATE_EPOCH=1700000000

# t SIDE OP CMD...: runs CMD under GNU time, appends the wall time to $WORK/SIDE.OP.
t() {
	side=$1 op=$2
	shift 2
	/usr/bin/time -f "%e" -o "$WORK/.t" "$@" >/dev/null 2>"$WORK/.err" || {
		echo "compare: $side $op failed: $(tail -3 "$WORK/.err")" >&2
		exit 1
	}
	cat "$WORK/.t" >>"$WORK/$side.$op"
}

# settle FILE...: the page cache written back and dropped (when allowed), then FILEs
# read once, so that each step starts alike (as bench.sh does).
settle() {
	sync
	[ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || :
	for f in "$@"; do
		if [ -d "$f" ]; then tar -cf - -C "$f" . | cat >/dev/null; else cat "$f" >/dev/null; fi
	done
}

step() { # step SIDE BINARY
	side=$1 m=$2
	settle "$SRC"
	t "$side" pack "$m" pack -q -o "$WORK/$side.mcache" -s "$WORK/k.key" --from-dir "$SRC" --keep-unknown
	settle "$WORK/$side.mcache"
	t "$side" verify "$m" verify -q "$WORK/$side.mcache" -p "$WORK/k.pub"
	settle "$WORK/$side.mcache"
	t "$side" load "$m" load -q "$WORK/$side.mcache" -p "$WORK/k.pub" --cache-dir "$WORK/out-$side-$i"
}

i=0
while [ "$i" -lt "$RUNS" ]; do
	if [ $((i % 2)) -eq 0 ]; then step a "$A"; step b "$B"; else step b "$B"; step a "$A"; fi
	i=$((i + 1))
done
rm -rf "$WORK"/out-*
if cmp -s "$WORK/a.mcache" "$WORK/b.mcache"; then same=yes; else same=no; fi
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-7s %9s %9s %7s\n' op "A (s)" "B (s)" B/A
for op in pack verify load; do
	ma=$(median "$WORK/a.$op") mb=$(median "$WORK/b.$op")
	printf '%-7s %9s %9s %7.3f\n' "$op" "$ma" "$mb" "$(echo "$mb $ma" | awk '{ print $1 / $2 }')"
done
echo "runs: $RUNS per side; packs byte-identical: $same"
