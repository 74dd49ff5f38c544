# faults.sh - a loader killed at random points never leaves a partial file under a final
# name and a rerun completes the tree; a full disk gives a clear error and no partial
# files; eight loaders at once, of one bundle or of two overlapping ones, all succeed
# and leave the exact tree; loads beside a torch-style writer lose nothing.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
TRIALS=${MC_KILL_TRIALS:-100}
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$T"
run 0 "" pack -q -o "$T/all.mcache" -s "$SEC" --from-dir "$T/cache_mlp_cold" --from-dir "$T/cache_cpu_cold"
run 0 "" pack -q -o "$T/blob.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache"
run 0 "" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/ref"
sums() { tree_sum "$1" visible | LC_ALL=C sort; }
sums "$T/ref" > "$T/ref.sums"
nref=$(wc -l < "$T/ref.sums")
[ "$nref" -gt 200 ] && ok || bad "reference tree has only $nref files"
# The binary itself, so that kill -9 reaches the loader and not a wrapper script.
BIN="$MC_BUILDDIR/bin/.libs/megacache"
[ -x "$BIN" ] || BIN="$MC_BUILDDIR/bin/megacache"
export LD_LIBRARY_PATH="$MC_BUILDDIR/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# 1. kill -9 at random points: delays spread over the length of a load, measured here
# as the shortest of three (one slowed by a busy machine would put most kills too late).
span_ms=0
for r in 1 2 3; do
	rm -rf "$T/timed"
	t0=$(date +%s%N)
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/timed" 2>/dev/null
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$span_ms" -eq 0 ] || [ "$ms" -lt "$span_ms" ] && span_ms=$ms
done
[ "$span_ms" -gt 0 ] || span_ms=1
partial=0
interrupted=0
staged=0
i=0
while [ "$i" -lt "$TRIALS" ]; do
	i=$((i + 1))
	d="$T/k"
	rm -rf "$d"
	# Every other load into a folder that exists; the rest stage it whole beside it.
	[ $((i % 2)) = 1 ] && mkdir "$d"
	delay=$(awk -v s="$i" -v ms="$span_ms" 'BEGIN { srand(s * 7919); printf "%.4f", rand() * ms / 1000 }')
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$d" 2>/dev/null &
	pid=$!
	sleep "$delay"
	# A load that had ended by then: loads run faster now than when measured (the machine
	# was busier), and the span shrinks towards their length.
	if kill -9 "$pid" 2>/dev/null; then
		interrupted=$((interrupted + 1))
	else
		span_ms=$((span_ms * 9 / 10 + 1))
	fi
	wait "$pid" 2>/dev/null
	[ -n "$({ find "$d" -name ".*.tmp"; find "$T" -maxdepth 1 -name ".k.mc*"; } 2>/dev/null | head -n 1)" ] && staged=$((staged + 1))
	if [ -d "$d" ]; then
		sums "$d" > "$T/got.sums"
		# Every final file present is one of the reference's, byte for byte.
		if [ -n "$(LC_ALL=C comm -23 "$T/got.sums" "$T/ref.sums")" ]; then
			bad "trial $i (kill after ${delay}s): a final file is partial or wrong"
			continue
		fi
		n=$(wc -l < "$T/got.sums")
		[ "$n" -gt 0 ] && [ "$n" -lt "$nref" ] && partial=$((partial + 1))
	fi
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$d" 2>"$T/err" || {
		bad "trial $i: the rerun failed: $(cat "$T/err")"
		continue
	}
	sums "$d" > "$T/got.sums"
	cmp -s "$T/got.sums" "$T/ref.sums" && ok || bad "trial $i: the rerun did not complete the tree"
	[ -z "$(find "$T" -maxdepth 1 -name '.k.mc*')" ] && ok ||
		bad "trial $i: a staging folder was left: $(find "$T" -maxdepth 1 -name '.k.mc*')"
done
echo "kill trials: $TRIALS; killed while running: $interrupted; left staged temp files: $staged; left some final files but not all: $partial"
[ "$interrupted" -ge $((TRIALS / 2)) ] && ok || bad "only $interrupted of $TRIALS kills hit a running load"

# Temp files of killed loaders of another pid namespace (a container sharing the cache,
# whose pids mean nothing here) are removed by a later load once they are an hour old;
# signals.sh has those of this one, removed at once. A loader is killed as soon as its
# temp files appear (tried again if it finished first), its names then given another
# namespace.
left=0
for try in 1 2 3 4 5 6 7 8; do
	rm -rf "$T/st"
	mkdir "$T/st"
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/st" 2>/dev/null &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		if [ -n "$(find "$T/st" -name '.*.tmp' 2>/dev/null | head -n 1)" ]; then
			kill -9 "$pid" 2>/dev/null
			break
		fi
	done
	wait "$pid" 2>/dev/null
	[ -n "$(find "$T/st" -name '.*.tmp' 2>/dev/null | head -n 1)" ] && { left=1; break; }
done
[ "$left" = 1 ] && ok || bad "no killed loader left temp files to clean up"
if [ "$left" = 1 ]; then
	find "$T/st" -depth -name '.*.tmp' | while IFS= read -r f; do
		mv "$f" "$(printf '%s' "$f" | sed 's/-[0-9a-f]*\.tmp$/-00000001.tmp/')"
	done
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/st"
	[ -n "$(find "$T/st" -name '.*.tmp' | head -n 1)" ] && ok || bad "fresh temp files were removed"
	find "$T/st" -name '.*.tmp' -exec touch -h -d '2 hours ago' {} +
	rm -f "$T"/st/vu/*.best_config
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/st"
	[ -z "$(find "$T/st/vu" -name '.*.tmp')" ] && ok || bad "stale temp files were kept"
	sums "$T/st" > "$T/got.sums"
	cmp -s "$T/got.sums" "$T/ref.sums" && ok || bad "stale-temp cleanup changed the tree"
fi

# 2. A full disk (a file-size limit): a clear error, exit 2, nothing left.
(
	ulimit -f 100
	"$BIN" load "$T/all.mcache" -p "$PUB" --cache-dir "$T/full" 2>"$T/err"
	echo $? > "$T/rc"
)
[ "$(cat "$T/rc")" = 2 ] && ok || bad "full disk: exit $(cat "$T/rc"), expected 2"
grep -q "File too large" "$T/err" && ok || bad "full disk: no clear error: $(cat "$T/err")"
[ ! -e "$T/full" ] && ok || bad "full disk: files left behind: $(find "$T/full" | head -3)"
(
	ulimit -f 100
	"$BIN" pack -o "$T/full.mcache" --from-dir "$T/cache_cpu_cold" 2>"$T/err"
	echo $? > "$T/rc"
)
[ "$(cat "$T/rc")" = 2 ] && ok || bad "full disk pack: exit $(cat "$T/rc"), expected 2"
[ -z "$(find "$T" -maxdepth 1 -name 'full.mcache*')" ] && ok || bad "full disk pack left a file"

# A full disk is told of the file the command was asked to write, with the reason, not
# of a temp file; nothing is left. A file-size limit (EFBIG) always, and a small tmpfs
# (ENOSPC) where this user may mount one. full_out WHAT DIR LIMIT SIGNED: the commands
# write into DIR under ulimit -f LIMIT (none: 0), sign a copy of bundle SIGNED there.
full_out() {
	what=$1; dir=$2; lim=$3
	cp "$4" "$dir/signed.mcache"
	[ "$lim" != 0 ] || head -c 2000000 /dev/zero > "$dir/filler" 2>/dev/null # the rest
	ls -A "$dir" > "$T/full.before"
	for c in pack save export merge sign; do
		case $c in
		pack) set -- pack -o "$dir/p.mcache" --from-dir "$T/cache_cpu_cold"; out="$dir/p.mcache" ;;
		save) set -- save -o "$dir/s.mcache" --cache-dir "$T/cache_cpu_cold"; out="$dir/s.mcache" ;;
		export) set -- export "$T/all.mcache" -p "$PUB" --torch "$dir/blob"; out="$dir/blob" ;;
		merge) set -- merge -o "$dir/m.mcache" -p "$PUB" "$T/all.mcache"; out="$dir" ;;
		sign) set -- sign -s "$SEC" -p "$PUB" "$dir/signed.mcache"; out="$dir/signed.mcache" ;;
		esac
		(
			[ "$lim" = 0 ] || ulimit -f "$lim"
			"$BIN" "$@" 2>"$T/err"
			echo $? > "$T/rc"
		)
		[ "$(cat "$T/rc")" = 2 ] && ok || bad "$what: $c exited $(cat "$T/rc"), expected 2"
		grep -q "^megacache: $out[:/].*cannot write.*: $why" "$T/err" && ! grep -q '\.tmp\|\.mc[A-Za-z0-9]\{6\}\|megacache-merge\|spool' "$T/err" &&
			ok || bad "$what: $c did not name $out and why: $(cat "$T/err")"
		ls -A "$dir" | cmp -s - "$T/full.before" && ok || bad "$what: $c left $(ls -A "$dir")"
	done
	rm -f "$dir/signed.mcache" "$dir/filler"
}
mkdir -p "$T/fsize"
why="File too large"
full_out "file-size limit" "$T/fsize" 300 "$T/all.mcache"
mkdir -p "$T/tmpfs"
if mount -t tmpfs -o size=1m tmpfs "$T/tmpfs" 2>/dev/null; then
	trap 'umount "$T/tmpfs" 2>/dev/null' EXIT
	why="No space left on device"
	run 0 "" pack -q -o "$T/small.mcache" -s "$SEC" --from-torch "$DATA/mlp-cpu-pgo.megacache"
	full_out "full tmpfs" "$T/tmpfs" 0 "$T/small.mcache"
	umount "$T/tmpfs"
else
	echo "no tmpfs could be mounted here: the full disk was a file-size limit only"
fi

# 3. Eight loaders of one bundle into one empty root, five rounds.
round=0
while [ "$round" -lt 5 ]; do
	round=$((round + 1))
	rm -rf "$T/c8"
	pids=""
	n=0
	while [ "$n" -lt 8 ]; do
		n=$((n + 1))
		"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/c8" 2>"$T/err.$n" &
		pids="$pids $!"
	done
	n=0
	for p in $pids; do
		n=$((n + 1))
		wait "$p" && ok || bad "round $round: loader $n failed: $(cat "$T/err.$n")"
	done
	sums "$T/c8" > "$T/got.sums"
	cmp -s "$T/got.sums" "$T/ref.sums" && ok || bad "round $round: the tree is not exact"
	[ -z "$(find "$T/c8" -name '.*')" ] && ok || bad "round $round: temp files left"
done

# 4. Two different bundles that share artifacts, four loaders each, at once.
rm -rf "$T/c2"
pids=""
for n in 1 2 3 4 5 6 7 8; do
	b="$T/all.mcache"
	[ $((n % 2)) = 0 ] && b="$T/blob.mcache"
	"$BIN" load -q "$b" -p "$PUB" --cache-dir "$T/c2" 2>"$T/err.$n" &
	pids="$pids $!"
done
n=0
for p in $pids; do
	n=$((n + 1))
	wait "$p" && ok || bad "mixed loader $n failed: $(cat "$T/err.$n")"
done
sums "$T/c2" > "$T/got.sums"
cmp -s "$T/got.sums" "$T/ref.sums" && ok || bad "mixed loaders: the tree is not exact"

# 5. A torch-style writer (temp file, then rename) in the same root during loads.
rm -rf "$T/tw"
mkdir -p "$T/tw/fxgraph"
(
	j=0
	while [ "$j" -lt 300 ]; do
		j=$((j + 1))
		dir="$T/tw/fxgraph/zz/fwriter$j"
		mkdir -p "$dir"
		printf 'torch wrote %d\n' "$j" > "$dir/.$$.$j.tmp"
		mv "$dir/.$$.$j.tmp" "$dir/entry"
	done
) &
wpid=$!
for n in 1 2 3; do
	"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/tw" 2>"$T/err" && ok || bad "load beside a writer failed: $(cat "$T/err")"
	rm -rf "$T/tw/aotautograd"
done
wait "$wpid"
"$BIN" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/tw" && ok || bad "final load failed"
missing=0
j=0
while [ "$j" -lt 300 ]; do
	j=$((j + 1))
	grep -qx "torch wrote $j" "$T/tw/fxgraph/zz/fwriter$j/entry" 2>/dev/null || missing=$((missing + 1))
done
[ "$missing" = 0 ] && ok || bad "the torch-style writer lost $missing files"
rm -rf "$T/tw/fxgraph/zz"
sums "$T/tw" > "$T/got.sums"
cmp -s "$T/got.sums" "$T/ref.sums" && ok || bad "loads beside a writer: the tree is not exact"
rm -rf "$T/k" "$T/c8" "$T/c2" "$T/tw" "$T/ref"
finish
