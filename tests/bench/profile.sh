#!/bin/sh
# profile.sh - where a load's wall time goes, phase by phase (MEGACACHE_PROFILE), at each
# thread count asked for, on the scaled copies of the real CUDA MLP cache that bench.sh
# uses; beside it, `tar --zstd -x` of the same content (the baseline) and the file
# system's part alone (fsfloor.c: the same tree made from memory, no decompression, no
# hashing, no renames), which no loader goes below.
#   sh tests/bench/profile.sh [COPIES...]
# Environment: THREADS (default "1 0": one thread, then one per CPU), RUNS (3), LEVEL
# (3), WORK (/tmp/megacache-bench), SHARED (../shared), CC (cc), FRESH (1). Needs
# python3, GNU time (/usr/bin/time), zstd, tar and a C compiler. Run from a built tree.
#
# Each load, extraction and floor run writes into a new folder with the page cache
# written back and dropped (as root), the bundle read once. The outputs stay until all
# runs are over: on ext4 without a journal the kernel skips inodes deleted in
# the last minute (five when their table is unwritten) one by one, with a lookup each,
# so a tree made right after removing another measures that search more than the
# loader; a new machine has no such inodes. FRESH=0 removes each output just before
# the next run instead, as bench.sh did before, to show the difference.
#
# The phases: GPU detection (NVML and the KFD topology, on a thread of its own beside
# open), open (signatures, manifest), plan (policy, plan, the survey
# of what is in place), folders (the list of folders to make, and the tier roots),
# stream (the verify pass that makes the folders and writes the staged files, wall
# time), renames (into place, on the threads) and reports (what became of each file,
# told in order). create (with the folders made on the way), write and close are the
# seconds of those calls summed over the threads, "stream threads" the seconds the
# threads spent on blocks, summed. Figures are medians; RSS the largest seen. The
# phases do not add up to the load's wall time: the process's start, the tool's work
# around the library and its exit are outside them.
set -eu
top=$(pwd)
RUNS=${RUNS:-3}
LEVEL=${LEVEL:-3}
THREADS=${THREADS:-1 0}
WORK=${WORK:-/tmp/megacache-bench}
SHARED=${SHARED:-$top/../shared}
FRESH=${FRESH:-1}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
copies_list=${*:-130}
CAP="--max-manifest-bytes 1073741824"
for tool in python3 /usr/bin/time zstd tar "${CC:-cc}"; do
	command -v "$tool" >/dev/null 2>&1 || { echo "profile: $tool is needed" >&2; exit 2; }
done
mkdir -p "$WORK"
if [ ! -d "$WORK/src/cache_mlp_cold" ]; then
	mkdir -p "$WORK/src"
	tar -xzf "$top/tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
fi
"${CC:-cc}" -O2 -pthread -o "$WORK/fsfloor" "$top/tests/bench/fsfloor.c"
"$M" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"

settle() {
	sync
	[ -w /proc/sys/vm/drop_caches ] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || :
	cat "$@" > /dev/null
}

# out NAME: sets o to a new, absent output path (with FRESH=0, the one path for NAME,
# its last tree removed).
n=0
out() {
	n=$((n + 1))
	if [ "$FRESH" = 0 ]; then
		o="$WORK/outs/$1"
		rm -rf "$o"
	else
		o="$WORK/outs/$1-$copies-$n"
	fi
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# phase NAME FILE: the median of NAME's seconds over the profile lines in FILE.
phase() {
	awk -v want="$1" '{
		sub(/^megacache: profile: /, "")
		n = split($0, part, /[,;] /)
		v = 0
		for (i = 1; i <= n; i++) {
			s = part[i]
			sub(/ \([0-9]+\)$/, "", s)
			sub(/ s$/, "", s)
			if (i == 1) { t = s; sub(/ .*/, "", t); if (want == "total") v = t }
			k = s; sub(/ [0-9.]+$/, "", k)
			x = s; sub(/^.* /, "", x)
			if (k == want) v = x
		}
		print v
	}' "$2" | median
}

echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(uname -sr), $(df -T "$WORK" | awk 'NR == 2 { print $2 }') at $WORK; fresh output folders: $FRESH"
echo
echo "| corpus | threads | tar -x (s) | floor (s) | load (s) | ratio | GPU detection (thread) | open | plan | folders | stream | renames | reports | create (sum) | write (sum) | close (sum) | stream threads (sum) | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for copies in $copies_list; do
	C="$WORK/cache-$copies"
	[ -d "$C" ] || python3 "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C" "$copies"
	files=$(find "$C" -type f | wc -l)
	rm -f "$WORK/prof.mcache" "$WORK/prof.tar.zst"
	mkdir -p "$WORK/outs"
	"$M" pack $CAP -q -o "$WORK/prof.mcache" -s "$WORK/k.key" --from-dir "$C" --keep-unknown --level "$LEVEL"
	tar -cf - -C "$C" . | zstd -q -"$LEVEL" -T1 -o "$WORK/prof.tar.zst"
	: > "$WORK/tar.times"
	i=0
	while [ "$i" -lt "$RUNS" ]; do
		i=$((i + 1))
		out tar
		mkdir "$o"
		settle "$WORK/prof.tar.zst"
		s=$(date +%s.%N)
		tar --zstd -xf "$WORK/prof.tar.zst" -C "$o"
		echo "$(date +%s.%N) $s" | awk '{ printf "%.3f\n", $1 - $2 }' >> "$WORK/tar.times"
	done
	tar_s=$(median < "$WORK/tar.times")
	for th in $THREADS; do
		: > "$WORK/prof.lines"
		: > "$WORK/rss.kb"
		: > "$WORK/floor.times"
		: > "$WORK/load.times"
		: > "$WORK/gpu.times"
		fth=$th
		[ "$fth" = 0 ] && fth=$(nproc)
		i=0
		while [ "$i" -lt "$RUNS" ]; do
			i=$((i + 1))
			out floor
			settle "$WORK/prof.mcache"
			"$WORK/fsfloor" "$C" "$o" "$fth" | sed 's/.*total \([0-9.]*\) s/\1/' >> "$WORK/floor.times"
			out load
			settle "$WORK/prof.mcache"
			s=$(date +%s.%N)
			MEGACACHE_PROFILE=1 /usr/bin/time -f "%M" -o "$WORK/.rss" "$M" load $CAP -q \
				"$WORK/prof.mcache" -p "$WORK/k.pub" --cache-dir "$o" \
				--max-expansion 0 --threads "$th" 2> "$WORK/.err"
			echo "$(date +%s.%N) $s" | awk '{ printf "%.3f\n", $1 - $2 }' >> "$WORK/load.times"
			cat "$WORK/.rss" >> "$WORK/rss.kb"
			# The load's own line comes last; the GPU detection's context, on a thread
			# of its own, ends before it.
			grep '^megacache: profile:' "$WORK/.err" | tail -1 >> "$WORK/prof.lines"
			grep '^megacache: profile:.* gpu detect ' "$WORK/.err" | head -1 |
				sed 's/.* gpu detect \([0-9.]*\) s.*/\1/' >> "$WORK/gpu.times"
		done
		cp "$WORK/prof.lines" "$WORK/prof.only"
		echo "profile: $copies copies, --threads $th:" >&2
		cat "$WORK/prof.only" >&2
		echo "profile: floor (s): $(tr '\n' ' ' < "$WORK/floor.times")" >&2
		load_s=$(median < "$WORK/load.times")
		row="| $files files | $th | $tar_s | $(median < "$WORK/floor.times") | $load_s | $(awk -v a="$load_s" -v b="$tar_s" 'BEGIN { printf "%.2f", a / b }')"
		row="$row | $(median < "$WORK/gpu.times")"
		for p in open plan folders stream renames reports create write close "stream threads"; do
			row="$row | $(phase "$p" "$WORK/prof.only")"
		done
		echo "$row | $(awk '$1 > m { m = $1 } END { printf "%.1f", m / 1024 }' "$WORK/rss.kb") |"
	done
done
rm -rf "$WORK/outs"
echo
echo "seconds, medians of $RUNS runs; threads 0: one per CPU; tar -x and load: the wall time of the command, measured the same way"
