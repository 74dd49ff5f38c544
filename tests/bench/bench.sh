#!/bin/sh
# bench.sh - megacache against the obvious script on the same content at the same zstd
# level: `tar --zstd` + `minisign` for pack, `minisign -V` + `tar --zstd -x` for load,
# and `zstd -d` of the baseline bundle for verify. The two sides alternate (which goes
# first flips every run); the table gives medians of wall time and peak RSS, the
# ratios megacache/baseline, and the CPU-seconds each side used (user and system, its
# child processes' too: tar's zstd, say): a step whose CPU-seconds over its wall time
# come near the machine's CPUs is bound by them.
#   sh tests/bench/bench.sh [COPIES...]
# COPIES: copies of the real CUDA MLP cache dir (130: about 510 MB in 20,000 files);
# several give the scaling series, e.g. `130 520 2080` for 1x, 4x and 16x.
# Environment: RUNS (default 5), LEVEL (3), WORK (/tmp/megacache-bench), SHARED
# (../shared), THREADS (megacache's --threads, default 0: one per CPU), FRESH (1),
# FIXTURE (mlp-cuda; mlp-cpu copies the CPU MLP cache dir instead, 32.6 MB in 78 files
# of which 22 are compiled kernel libraries: a corpus of other shapes, which nothing
# here was tuned on; 16 copies make about 500 MB).
# Needs: python3, GNU time (/usr/bin/time), zstd, minisign, tar. Run from a built tree.
#
# Each load writes into a new folder with a clean page cache: dirty pages are written
# back and, when this runs as root, the page cache is dropped; then the bundle is read
# once so that both sides start from it in memory. The outputs stay until the corpus's
# runs are over (all of them, at the end): on ext4 without a journal the kernel skips the inodes deleted in the
# last minute (five when their table is unwritten) one by one, with a lookup each, so
# a tree made right after removing another measures that search more than the loader,
# and more so with several threads (a new machine or container has no such inodes).
# FRESH=0 removes each output just before the next load instead, as this did before.
# Each pack starts with its source tree read once, and each verify with its bundle,
# for the same reason (and so that the write-back of a load's output does not compete
# with the next step).
set -eu
top=$(pwd)
RUNS=${RUNS:-5}
LEVEL=${LEVEL:-3}
THREADS=${THREADS:-0}
FRESH=${FRESH:-1}
FIXTURE=${FIXTURE:-mlp-cuda}
WORK=${WORK:-/tmp/megacache-bench}
SHARED=${SHARED:-$top/../shared}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
copies_list=${*:-130}
for tool in python3 /usr/bin/time zstd minisign tar; do
	command -v "$tool" >/dev/null 2>&1 || { echo "bench: $tool is needed" >&2; exit 2; }
done
mkdir -p "$WORK"
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
tar -xzf "$top/tests/data/torch-2.11/$FIXTURE-cachedir.tar.gz" -C "$WORK/src"
SRC=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)
"$M" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"

BENCH="bench"
. "$top/tests/bench/timing.sh"

pack_base() { t pack-base sh -c "tar -cf - -C '$C' . | zstd -q -$LEVEL -T1 -o '$WORK/base.tar.zst' && minisign -S -s '$WORK/k.key' -m '$WORK/base.tar.zst'"; }
# A manifest takes about 410 bytes per file: the 16x corpus needs more than the default
# cap of 64 MiB, on both sides.
CAP="--max-manifest-bytes 1073741824"
pack_mc() { t pack-mc "$M" pack $CAP -q -o "$WORK/mc.mcache" -s "$WORK/k.key" --from-dir "$C" --keep-unknown --level "$LEVEL" --threads "$THREADS"; }
# outdir NAME: the folder the load of this run writes (out-NAME-RUN; with FRESH=0,
# out-NAME, its last tree removed).
outdir() {
	if [ "$FRESH" = 0 ]; then
		rm -rf "$WORK/out-$1"
		echo "$WORK/out-$1"
	else
		echo "$WORK/out-$1-$i"
	fi
}
load_base() {
	ob=$(outdir base)
	mkdir -p "$ob"
	settle "$WORK/base.tar.zst"
	t load-base sh -c "minisign -Vq -p '$WORK/k.pub' -m '$WORK/base.tar.zst' && tar --zstd -xf '$WORK/base.tar.zst' -C '$ob'"
}
load_mc() {
	om=$(outdir mc)
	settle "$WORK/mc.mcache"
	t load-mc "$M" load $CAP -q "$WORK/mc.mcache" -p "$WORK/k.pub" --cache-dir "$om" --max-expansion 0 --threads "$THREADS"
}
verify_base() { settle "$WORK/base.tar.zst"; t verify-base sh -c "zstd -q -d -c '$WORK/base.tar.zst' > /dev/null"; }
verify_mc() { settle "$WORK/mc.mcache"; t verify-mc "$M" verify $CAP -q "$WORK/mc.mcache" -p "$WORK/k.pub" --max-expansion 0 --threads "$THREADS"; }

echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/ { print $2 }') GiB," \
	"$(uname -sr), $(df -T "$WORK" | awk 'NR == 2 { print $2 }') at $WORK; megacache --threads $THREADS"
echo
echo "| corpus | operation | baseline (s) | megacache (s) | ratio | baseline RSS (MiB) | megacache RSS (MiB) | baseline CPU (s) | megacache CPU (s) |"
echo "|---|---|---|---|---|---|---|---|---|"
for copies in $copies_list; do
	C="$WORK/cache-$FIXTURE-$copies"
	if [ ! -d "$C" ]; then
		python3 "$SHARED/bench/scale_cache.py" "$SRC" "$C" "$copies"
	fi
	size=$(du -sm "$C" | cut -f1)
	files=$(find "$C" -type f | wc -l)
	rm -f "$WORK"/*.times
	i=0
	while [ "$i" -lt "$RUNS" ]; do
		i=$((i + 1))
		rm -f "$WORK/base.tar.zst" "$WORK/base.tar.zst.minisig" "$WORK/mc.mcache"
		if [ $((i % 2)) -eq 1 ]; then
			settle "$C"; pack_base; settle "$C"; pack_mc
			load_base; load_mc
			verify_base; verify_mc
		else
			settle "$C"; pack_mc; settle "$C"; pack_base
			load_mc; load_base
			verify_mc; verify_base
		fi
	done
	# The two loads must give the same tree, but for Triton's group files, whose absolute
	# paths megacache points at the folder it installed their kernel into, and torch's
	# empty lock files, which are no artifacts (the CPU fixture has them).
	python3 - "$ob" "$om" <<'EOF'
import json, os, sys
base, mc = sys.argv[1:]
def files(top):
    return sorted(os.path.relpath(os.path.join(r, n), top) for r, _, ns in os.walk(top) for n in ns
                  if not (n.endswith(".lock") and os.path.getsize(os.path.join(r, n)) == 0))
if files(base) != files(mc):
    sys.exit("bench: the loads hold different files")
for rel in files(base):
    a, b = (open(os.path.join(t, rel), "rb").read() for t in (base, mc))
    name = os.path.basename(rel)
    try:  # the corpus's copies of a group file are scrambled, not JSON, and kept as they are
        grp = name.startswith("__grp__") and name.endswith(".json") and json.loads(a)
    except ValueError:
        grp = None
    if grp:
        want = {k: os.path.join(mc, os.path.dirname(rel), k) for k in grp["child_paths"]}
        if json.loads(b)["child_paths"] != want:
            sys.exit("bench: the loads differ in " + rel)
    elif a != b:
        sys.exit("bench: the loads differ in " + rel)
EOF
	for f in "$WORK"/*.times; do # every run, for the record
		echo "bench: $copies copies, $(basename "$f" .times) (s): $(cut -d' ' -f1 "$f" | tr '\n' ' ')" >&2
	done
	for op in pack load verify; do
		bw=$(median 1 "$WORK/$op-base.times")
		mw=$(median 1 "$WORK/$op-mc.times")
		br=$(median 2 "$WORK/$op-base.times")
		mr=$(median 2 "$WORK/$op-mc.times")
		bc=$(median 0 "$WORK/$op-base.times")
		mc=$(median 0 "$WORK/$op-mc.times")
		awk -v c="$size MB, $files files" -v op="$op" -v bw="$bw" -v mw="$mw" -v br="$br" -v mr="$mr" \
			-v bc="$bc" -v mc="$mc" \
			'BEGIN { printf "| %s | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f |\n", c, op, bw, mw, mw / bw, br / 1024, mr / 1024, bc, mc }'
	done
	echo "| | bundle size (MB) | $(stat -c %s "$WORK/base.tar.zst" | awk '{ printf "%.1f", $1 / 1e6 }') | $(stat -c %s "$WORK/mc.mcache" | awk '{ printf "%.1f", $1 / 1e6 }') | | | | | |"
done
rm -rf "$WORK"/out-base* "$WORK"/out-mc*
echo
echo "medians of $RUNS alternating runs, zstd level $LEVEL; verify's baseline is \`zstd -d\` of the baseline bundle to /dev/null"
