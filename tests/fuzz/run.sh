#!/bin/sh
# run.sh - runs each libFuzzer target for a while, from a copy of its seed corpus.
#   ./configure CC=clang --enable-fuzzing && make && sh tests/fuzz/run.sh [SECONDS] [TARGET...]
# Crashes land in run/fuzz/<target>/; copy each into tests/fuzz/crashes/<target>/ once
# fixed, so that make check replays it.
set -eu
secs=${1:-600}
[ $# -gt 0 ] && shift
targets=${*:-bundle manifest torchblob keys pylit}
found=0
src=$(cd "$(dirname "$0")" && pwd)
for t in $targets; do
	w=run/fuzz/$t
	mkdir -p "$w/corpus"
	cp -n "$src/corpus/$t"/* "$w/corpus/" 2>/dev/null || true
	[ "$t" = bundle ] && cp -n "$src/../../format/vectors"/*.mcache "$w/corpus/" 2>/dev/null || true
	echo "== fuzz_$t for ${secs}s"
	TMPDIR="$w" ./tests/fuzz/fuzz_$t -max_total_time="$secs" -max_len=65536 -rss_limit_mb=1024 \
		-artifact_prefix="$w/" -print_final_stats=1 "$w/corpus" > "$w/log" 2>&1 || true
	grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|cov: ' "$w/log" | tail -4
	if ls "$w"/crash-* "$w"/leak-* "$w"/timeout-* "$w"/oom-* 2>/dev/null; then
		found=1
	else
		echo "no crash"
	fi
done
exit "$found"
