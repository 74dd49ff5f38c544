#!/bin/sh
# fidelity.sh - proves on a GPU machine, side by side, that a cache restored by megacache
# gives a fresh process the same cache hits as the same cache restored by `cp -a`: for
# one JOB of examples/torch/fidelity.py (mlp, blocks, guard, autotune, userkernel or
# precompile, the mlp job with TORCH_CACHING_PRECOMPILE=1 in every run) a cold run
# fills $W/c/inductor (TORCHINDUCTOR_CACHE_DIR) and $W/c/triton (TRITON_CACHE_DIR); then,
# for each way of restoring, $W/c is emptied, restored into the SAME paths (Triton's group
# files hold absolute paths) and the job runs warm in a fresh process:
#   same dir (the untouched cold folders), cp -a, torch's load_cache_artifacts, megacache
#   save -> load, megacache run -b of the save with --save-used (warm under run, writing a
#   bundle of what the job used), a load of that used bundle alone, megacache pack
#   --from-torch -> load, and the fleet: megacache push into
#   a real Redis, read by a worker with EMPTY folders and torch's remote caches on (once
#   from the cold run above, once from a cold run with the remote caches on).
# The megacache rows must equal the cp -a row (FX graph and AOTAutograd hits and misses,
# user kernel hits), or the exit status is 1; the fleet rows are told with their notes.
#
#   sh examples/torch/fidelity.sh JOB
#
# Run from the top of a built tree with .gpu-libs/ (see examples/torch/proof.sh); the
# fleet rows need run/fleet-gpu unpacked into $FG (see examples/fleet/proof.sh), else they
# say "skipped (no redis)". Works in $WORK/JOB (default /tmp/megacache-fidelity/JOB);
# the JSON of each run, what megacache said and table.md go to $OUT/JOB (default
# ./run/fidelity/JOB). ROWS=used runs only the rows of the used bundle's comparison
# (cold, cp -a, save -> load, run --save-used, the used bundle), the others noted as
# skipped.
set -eu
JOB=${1:-}
case $JOB in
mlp | blocks | guard | autotune | userkernel | precompile) ;;
*)
	echo "usage: sh examples/torch/fidelity.sh mlp|blocks|guard|autotune|userkernel|precompile" >&2
	exit 2
	;;
esac
top=$(pwd)
W=${WORK:-/tmp/megacache-fidelity}/$JOB
R=${OUT:-$top/run/fidelity}/$JOB
FG=${FG:-$top/run/fleet-gpu}
PY=${PYTHON:-python3}
PORT=${PORT:-16380}
FID="$top/examples/torch/fidelity.py"
export LD_LIBRARY_PATH="$top/.gpu-libs:$FG/lib:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME TORCHINDUCTOR_REDIS_URL \
	TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE \
	TORCH_CACHING_PRECOMPILE || true
# torch reads it at import: dynamo then saves and loads whole compiled frames
if [ "$JOB" = precompile ]; then export TORCH_CACHING_PRECOMPILE=1; fi
rm -rf "$W"
mkdir -p "$W" "$R"
C="$W/c"

# Whatever happened, Redis stops and what the runs left goes to $R.
rpid=
# shellcheck disable=SC2317  # called by the trap
finish() {
	[ -z "$rpid" ] || kill "$rpid" 2>/dev/null || true
	for f in "$W"/*.json "$W"/*.note "$W"/*.err "$W"/*.txt "$W/table.md"; do
		if [ -f "$f" ]; then cp "$f" "$R/"; fi
	done
}
trap finish EXIT

# at DIR CMD...: CMD with torch's and Triton's cache folders DIR/inductor and DIR/triton.
at() {
	d=$1
	shift
	env TORCHINDUCTOR_CACHE_DIR="$d/inductor" TRITON_CACHE_DIR="$d/triton" "$@"
}
# job MODE DIR ROW [VAR=VALUE]...: fidelity.py in a fresh process, its result r-ROW.json.
job() {
	mode=$1 d=$2 row=$3
	shift 3
	case $mode in
	cold) blob="$W/blob-$row.bin" ;;
	*) blob="$W/blob-cold.bin" ;;
	esac
	at "$d" "$@" "$PY" "$FID" "$JOB" "$mode" --blob "$blob" --out "$W/r-$row.json"
}
# remote_job MODE DIR ROW URL: job with torch's remote caches on, Redis at URL.
remote_job() {
	job "$1" "$2" "$3" PYTHONPATH="$FG/py${PYTHONPATH:+:$PYTHONPATH}" TORCHINDUCTOR_REDIS_URL="$4" \
		TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1 TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1
}
# note ROW TEXT: why ROW has no result ("skipped ..." or "failed ...").
note() {
	printf '%s\n' "$2" > "$W/r-$1.note"
	echo "fidelity: $1: $2" >&2
}
# want ROW: whether ROW runs (ROWS=used: only the used bundle's comparison).
want() {
	case ${ROWS:-all}:$1 in
	used:same-dir | used:torch-load | used:pack-load)
		note "$1" "skipped (ROWS=used)"
		return 1
		;;
	esac
	return 0
}
# fresh: the cache folders of the cold run, there and empty.
fresh() {
	rm -rf "$C"
	mkdir -p "$C/inductor" "$C/triton"
}
# mc_row ROW BUNDLE: megacache load of BUNDLE into the empty folders, then the job warm.
mc_row() {
	fresh
	if at "$C" "$M" load "$2" -p "$W/k.pub" > "$W/load-$1.txt" 2>&1; then
		job warm "$C" "$1" || note "$1" "failed: fidelity.py exited $?"
	else
		rc=$?
		note "$1" "failed: megacache load exited $rc: $(tail -n 1 "$W/load-$1.txt")"
	fi
}

"$M" keygen -q -W -f -p "$W/k.pub" -s "$W/k.key"
labels="$W/blob-cold.bin.labels.json"

echo "== $JOB: cold run, empty folders; snapshot (cp -a) and megacache save of them"
fresh
job cold "$C" cold
cp -a "$C" "$W/snap"
at "$C" "$M" save -o "$W/save.mcache" -s "$W/k.key" --labels-json "$labels" \
	> "$W/save.txt" 2> "$W/save.err"
cat "$W/save.txt" "$W/save.err"
"$M" list "$W/save.mcache" > "$W/list-save.txt" || true
"$M" list --json "$W/save.mcache" > "$W/list-save.json" || true

echo "== same dir: warm in the untouched cold folders"
if want same-dir; then job warm "$C" same-dir || note same-dir "failed: fidelity.py exited $?"; fi

echo "== cp -a: the snapshot copied back into the same paths"
fresh
cp -a "$W/snap/." "$C/"
job warm "$C" cp || note cp "failed: fidelity.py exited $?"

echo "== torch load_cache_artifacts of the cold run's blob, empty folders"
if ! want torch-load; then
	:
elif [ -f "$W/blob-cold.bin" ]; then
	fresh
	job torch-load "$C" torch-load || note torch-load "failed: fidelity.py exited $?"
else
	note torch-load "skipped: torch's blob holds nothing (no torch.compile in this job)"
fi

echo "== megacache save -> load"
mc_row save-load "$W/save.mcache"

echo "== megacache run -b save.mcache --save-used: warm under run, then a bundle of what it used"
fresh
if at "$C" "$M" run -b "$W/save.mcache" -p "$W/k.pub" --save-used "$W/used.mcache" -s "$W/k.key" \
	--json-file "$W/run-used.report.json" -- \
	"$PY" "$FID" "$JOB" warm --blob "$W/blob-cold.bin" --out "$W/r-run-used.json" \
	> "$W/run-used.txt" 2> "$W/run-used.err"; then
	cat "$W/run-used.err"
	"$PY" -c 'import json, sys
j = json.load(open(sys.argv[1]))
print("run --save-used:", json.dumps({"used": j["used"], "save_used": j["save_used"]}))' \
		"$W/run-used.report.json" || true
	"$M" list "$W/used.mcache" > "$W/list-used.txt" || true
	"$M" list --json "$W/used.mcache" > "$W/list-used.json" || true
	echo "== megacache load of the used bundle alone into the emptied folders"
	mc_row used-load "$W/used.mcache"
else
	rc=$?
	note run-used "failed: megacache run exited $rc: $(tail -n 1 "$W/run-used.err")"
	note used-load "skipped: no used bundle"
fi

echo "== megacache pack --from-torch -> load"
if ! want pack-load; then
	:
elif [ ! -f "$W/blob-cold.bin" ]; then
	note pack-load "skipped: torch's blob holds nothing (no torch.compile in this job)"
elif "$M" pack -o "$W/pack.mcache" -s "$W/k.key" --from-torch "$W/blob-cold.bin" \
	--labels-json "$labels" > "$W/pack.txt" 2> "$W/pack.err"; then
	mc_row pack-load "$W/pack.mcache"
else
	rc=$?
	note pack-load "failed: megacache pack exited $rc: $(tail -n 1 "$W/pack.err")"
fi

if [ ! -x "$FG/bin/redis-server" ]; then
	echo "== fleet: no $FG/bin/redis-server, its rows skipped"
	for row in fleet-off cold-remote fleet-on; do
		note "$row" "skipped (no redis)"
	done
else
	cli() { "$FG/bin/redis-cli" -p "$PORT" "$@"; }
	URL="redis://127.0.0.1:$PORT"
	echo "== fleet: a Redis server on 127.0.0.1:$PORT, nothing kept on disk"
	mkdir -p "$W/redis"
	"$FG/bin/redis-server" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$W/redis" --daemonize no > "$W/redis/log" 2>&1 &
	rpid=$!
	for _ in $(seq 50); do cli ping > /dev/null 2>&1 && break; sleep 0.1; done
	cli ping

	# fleet_row ROW BUNDLE DB TAG: push BUNDLE into database DB (its report push-TAG.json,
	# what it said push-TAG.err), then a worker with EMPTY folders reading it.
	fleet_row() {
		if "$M" push "$2" -p "$W/k.pub" --redis "$URL/$3" --json \
			> "$W/push-$4.json" 2> "$W/push-$4.err"; then
			cat "$W/push-$4.err"
			cli -n "$3" --scan --pattern 'pt2:*' | sort > "$W/keys-$3.txt"
			fresh
			remote_job warm "$C" "$1" "$URL/$3" || note "$1" "failed: fidelity.py exited $?"
		else
			rc=$?
			note "$1" "failed: megacache push exited $rc: $(tail -n 1 "$W/push-$4.err")"
		fi
	}

	echo "== fleet 1: push of save.mcache (cold run, remote caches off) into db 0, EMPTY folders"
	fleet_row fleet-off "$W/save.mcache" 0 off

	# torch's AOTAutograd key covers enable_remote_autograd_cache: a cold run as the
	# workers are set (remote caches on), with no Redis to reach, in folders of its own.
	echo "== fleet 2: cold run with the remote caches on and no Redis, saved, pushed into db 2"
	C2="$W/c2"
	rm -rf "$C2"
	mkdir -p "$C2/inductor" "$C2/triton"
	if remote_job cold "$C2" cold-remote redis://127.0.0.1:1/0 &&
		at "$C2" env TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1 "$M" save -o "$W/save-remote.mcache" \
			-s "$W/k.key" --labels-json "$labels" > "$W/save-remote.txt" 2> "$W/save-remote.err"; then
		cat "$W/save-remote.err"
		fleet_row fleet-on "$W/save-remote.mcache" 2 on
	else
		note fleet-on "failed: the remote-on cold run or its save failed"
	fi
fi

status=0
"$PY" "$top/examples/torch/fidelity_summary.py" "$W" "$JOB" > "$W/table.md" || status=$?
cat "$W/table.md"
exit "$status"
