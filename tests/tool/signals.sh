# signals.sh - SIGINT, SIGTERM and SIGHUP stop a load, a pack and a save part way: each
# exits 130, 143 or 129, having removed what it staged or wrote, the cache folder and
# the output as they were before; a load killed with -9 leaves temp files and folders
# that the next load into the same folders removes, sparing those of a live process.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$T"
run 0 "" pack -q -o "$T/all.mcache" -s "$SEC" --from-dir "$T/cache_mlp_cold" --from-dir "$T/cache_cpu_cold"
run 0 "" pack -q -o "$T/blob.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache"
# The binary itself, so that the signals reach it and not a wrapper script; started with
# the signals' default actions, which a shell's background job would have ignored.
BIN="$MC_BUILDDIR/bin/.libs/megacache"
[ -x "$BIN" ] || BIN="$MC_BUILDDIR/bin/megacache"
export LD_LIBRARY_PATH="$MC_BUILDDIR/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
DFL=--default-signal=HUP,INT,TERM
sums() { tree_sum "$1" | LC_ALL=C sort; }
temps() { find "$@" -name '*.tmp' 2>/dev/null; }
# signo NAME: the number of signal NAME (kill -l NAME is not in every sh)
signo() { case $1 in HUP) echo 1 ;; INT) echo 2 ;; TERM) echo 15 ;; esac; }
half=$(($(wc -c < "$T/all.mcache") / 2))

# Waits (at most 10 s) until a file matching NAME appears under DIR: wait_for DIR NAME.
wait_for() {
	n=0
	while [ -z "$(find "$1" -name "$2" 2>/dev/null | head -n 1)" ] && [ "$n" -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
}

# Waits for process PID (at most 30 s: then it is killed); its exit status.
reap() {
	n=0
	while kill -0 "$1" 2>/dev/null && [ "$n" -lt 300 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# 1. load - from a FIFO held open, half the bundle written: the load has staged files
# and waits for the rest when the signal comes. The cache held another bundle's files.
mkfifo "$T/fifo"
for sig in INT TERM HUP; do
	d="$T/load-$sig"
	run 0 "" load -q "$T/blob.mcache" -p "$PUB" --cache-dir "$d"
	sums "$d" > "$T/before.sums"
	env $DFL "$BIN" load --json - -p "$PUB" --cache-dir "$d" < "$T/fifo" >"$T/json" 2>"$T/err" &
	pid=$!
	exec 7>"$T/fifo"
	head -c "$half" "$T/all.mcache" >&7
	wait_for "$d" '.*.tmp'
	[ -n "$(temps "$d")" ] && ok || bad "load ($sig): nothing staged before the signal"
	kill -"$sig" "$pid"
	reap "$pid"
	rc=$?
	exec 7>&-
	want=$((128 + $(signo "$sig")))
	[ "$rc" = "$want" ] && ok || bad "load ($sig): exit $rc, expected $want: $(cat "$T/err")"
	grep -q "interrupted by SIG$sig" "$T/err" && ok || bad "load ($sig): said $(cat "$T/err")"
	grep -q '"error":.*"cancelled"' "$T/json" && grep -q "\"exit\":.*$want" "$T/json" && ok ||
		bad "load ($sig): --json gave $(cat "$T/json")"
	[ -z "$(temps "$d")" ] && ok || bad "load ($sig): left $(temps "$d" | head -n 3)"
	sums "$d" > "$T/after.sums"
	cmp -s "$T/before.sums" "$T/after.sums" && ok || bad "load ($sig): the cache changed"
done

# run stopped in its load does not run its command, even with --allow-cold. Its cache
# folder does not exist yet: the load stages it whole beside it (3b).
env $DFL "$BIN" run -q --allow-cold -b - -p "$PUB" --cache-dir "$T/run" -- touch "$T/ran" \
	< "$T/fifo" 2>"$T/err" &
pid=$!
exec 7>"$T/fifo"
head -c "$half" "$T/all.mcache" >&7
wait_for "$T" '.run.mc*.tmp'
[ -n "$(find "$T" -maxdepth 1 -name '.run.mc*.tmp')" ] && ok || bad "run (INT): nothing staged before the signal"
kill -INT "$pid"
reap "$pid"
rc=$?
exec 7>&-
[ "$rc" = 130 ] && ok || bad "run (INT): exit $rc, expected 130: $(cat "$T/err")"
[ ! -e "$T/ran" ] && [ ! -e "$T/run" ] && [ -z "$(find "$T" -maxdepth 1 -name '.run.mc*')" ] && ok ||
	bad "run (INT): ran its command or left the cache: $(ls -A "$T")"

# 2. pack and save: the signal comes while the first pass reads the caches (its progress
# said on a FIFO); an older OUT stays as it was, and nothing is left beside it. A run
# that ended before the signal (a busy machine) is tried again.
# interrupt SIG OUT COMMAND...: runs a command writing OUT, with the signal.
interrupt() {
	sig=$1; out=$2; shift 2
	printf 'the previous bundle\n' > "$out"
	hit=0
	for try in 1 2 3 4 5; do
		rm -f "$T/progress"
		mkfifo "$T/progress"
		env $DFL "$BIN" "$@" --progress plain 2>"$T/progress" &
		pid=$!
		exec 8<"$T/progress"
		while IFS= read -r line <&8; do
			case $line in *": "[0-9]*%) kill -"$sig" "$pid"; break ;; esac
		done
		cat <&8 > "$T/err"
		exec 8<&-
		reap "$pid"
		rc=$?
		[ "$rc" = 0 ] && { printf 'the previous bundle\n' > "$out"; continue; }
		hit=1
		want=$((128 + $(signo "$sig")))
		[ "$rc" = "$want" ] && ok || bad "$1 ($sig): exit $rc, expected $want: $(cat "$T/err")"
		break
	done
	[ "$hit" = 1 ] && ok || bad "$1 ($sig): never interrupted in 5 tries"
	[ "$(cat "$out")" = "the previous bundle" ] && ok || bad "$1 ($sig): $out was changed"
	[ -z "$(temps "$(dirname "$out")")" ] && ok ||
		bad "$1 ($sig): left $(temps "$(dirname "$out")" | head -n 3)"
}
mkdir -p "$T/dest"
sums "$T/cache_cpu_cold" > "$T/src.sums"
interrupt INT "$T/dest/p.mcache" pack -o "$T/dest/p.mcache" -s "$SEC" --from-dir "$T/cache_cpu_cold" \
	--from-dir "$T/cache_mlp_cold"
interrupt TERM "$T/dest/s.mcache" save -o "$T/dest/s.mcache" --cache-dir "$T/cache_cpu_cold"
interrupt HUP "$T/dest/m.mcache" merge -o "$T/dest/m.mcache" -p "$PUB" -s "$SEC" "$T/all.mcache" \
	"$T/blob.mcache"
sums "$T/cache_cpu_cold" > "$T/after.sums"
cmp -s "$T/src.sums" "$T/after.sums" && ok || bad "the packed cache changed"
[ "$(ls -A "$T/dest" | wc -l)" = 3 ] && ok || bad "files left beside the outputs: $(ls -A "$T/dest")"

# kill_load DIR NAME ARGS...: a load of - with ARGS from the FIFO, half the bundle
# written, killed with -9 once NAME (PID standing for its pid) appears under DIR; $pid.
kill_load() {
	kd=$1 kn=$2
	shift 2
	env $DFL "$BIN" load -q - -p "$PUB" "$@" < "$T/fifo" 2>/dev/null &
	pid=$!
	exec 7>"$T/fifo"
	head -c "$half" "$T/all.mcache" >&7
	wait_for "$kd" "$(echo "$kn" | sed "s/PID/$pid/")"
	sleep 0.2
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	exec 7>&-
}

# 3. A load killed with -9 half way leaves temp files and folders; the next load into
# the same folders removes them, but not one named for a live process (this shell) nor
# a young one of another pid namespace (a container sharing the cache), nor what it did
# not make. The tier roots exist already (a load into missing ones stages them whole
# beside them: below).
d="$T/killed"
mkdir "$d"
kill_load "$d" '.*.tmp' --cache-dir "$d"
[ -n "$(find "$d" -name '.*.tmp' -type f)" ] && ok || bad "the killed load left no temp file"
dir=$(find "$d" -name '.*.tmp' -type d | head -n 1)
[ -n "$dir" ] && ok || bad "the killed load left no temp folder"
# Its names end ".mc<pid>-<random>-<namespace>.tmp": the same names, another pid.
one=$(find "$d" -name '.*.tmp' -type f | head -n 1)
live=$(dirname "$one")/$(basename "$one" | sed "s/\.mc[0-9]*-/.mc$$-/")
foreign=$(dirname "$one")/$(basename "$one" | sed 's/\.mc[0-9]*-/.mc999999999-/; s/-[0-9a-f]*\.tmp$/-00000001.tmp/')
printf 'live\n' > "$live"
printf 'foreign\n' > "$foreign"
mkdir "$(echo "$dir" | sed "s/\.mc[0-9]*-/.mc$$-/")"
mine=$(dirname "$one")/.not-a-loader.tmp
printf 'mine\n' > "$mine"
run 0 "" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$d"
temps "$d" | LC_ALL=C sort > "$T/left"
printf '%s\n' "$(echo "$dir" | sed "s/\.mc[0-9]*-/.mc$$-/")" "$foreign" "$live" "$mine" |
	LC_ALL=C sort > "$T/spared"
cmp -s "$T/left" "$T/spared" && ok || bad "after the next load: $(diff "$T/spared" "$T/left")"
rm -rf "$(echo "$dir" | sed "s/\.mc[0-9]*-/.mc$$-/")" "$foreign" "$live" "$mine"

# 3b. A load into tier roots that do not exist yet stages them whole in one hidden
# staging folder beside each outermost one (Triton's root inside torch's, by default);
# killed with -9 half way, it leaves that folder and no root; the next load removes it
# and installs the same tree as a load into existing roots, derived files (Triton's
# group files) naming the final roots. Both with Triton's root apart and inside.
# Every file's bytes and every mode alike, the folder the derived files name aside.
bytes() { (cd "$1" && find . | LC_ALL=C sort | while read -r n; do
	if [ -f "$n" ]; then
		printf '%s %s %s\n' "$n" "$(stat -c %a "$n")" "$(sed "s|$1|ROOT|g" "$n" | cksum)"
	else
		printf '%s %s\n' "$n" "$(stat -c %a "$n")"
	fi; done); }
for layout in apart inside; do
	if [ "$layout" = apart ]; then
		roots() { echo "--cache-dir $1/cache --triton-dir $1/triton"; }
		beside="cache triton "
	else
		roots() { echo "--cache-dir $1/cache"; }
		beside="cache "
	fi
	f="$T/fresh-$layout"
	mkdir -p "$f" "$T/same-$layout/cache" "$T/same-$layout/triton"
	# shellcheck disable=SC2046
	kill_load "$f" ".cache.mcPID-*.tmp" $(roots "$f")
	stage=$(find "$f" -maxdepth 1 -name ".cache.mc$pid-*.tmp" -type d)
	[ -n "$stage" ] && [ "$(ls -A "$f" | wc -l)" = "$(echo $beside | wc -w)" ] && ok ||
		bad "$layout: the killed load left $(ls -A "$f")"
	[ ! -e "$f/cache" ] && ok || bad "$layout: the killed load made the root"
	[ "$(stat -c %a "$stage")" = 700 ] && ok || bad "$layout: staging folder mode $(stat -c %a "$stage")"
	[ -z "$(find "$stage" -mindepth 1 -name '.*.tmp')" ] && ok ||
		bad "$layout: temp names in the staging folder"
	# shellcheck disable=SC2046
	run 0 "" load -q "$T/all.mcache" -p "$PUB" $(roots "$f")
	[ "$(ls -A "$f" | tr '\n' ' ')" = "$beside" ] && ok ||
		bad "$layout: left beside the roots: $(ls -A "$f")"
	[ "$layout" = inside ] && rmdir "$T/same-$layout/triton"
	# shellcheck disable=SC2046
	run 0 "" load -q "$T/all.mcache" -p "$PUB" $(roots "$T/same-$layout")
	bytes "$T/same-$layout" > "$T/same.bytes"
	bytes "$f" > "$T/fresh.bytes"
	cmp -s "$T/same.bytes" "$T/fresh.bytes" && ok ||
		bad "$layout: fresh tree: $(diff "$T/same.bytes" "$T/fresh.bytes")"
	[ -n "$(grep -rl "\"$f/[a-z]*/*triton/" "$f")" ] && ok || bad "$layout: no group file names the root"
	[ -z "$(grep -rl '\.mc[0-9]' "$f")" ] && ok || bad "$layout: a file names a staging folder"

	# 3b'. Stopped by a signal instead, that load removes its staging folder and the
	# folder it made for it (new): no root, nothing beside where the roots would be.
	f="$T/stopped-$layout"
	mkdir -p "$f"
	# shellcheck disable=SC2046
	env $DFL "$BIN" load -q - -p "$PUB" $(roots "$f/new") < "$T/fifo" 2>/dev/null &
	pid=$!
	exec 7>"$T/fifo"
	head -c "$half" "$T/all.mcache" >&7
	n=0
	while [ -z "$(find "$f" -mindepth 3 -type f 2>/dev/null | head -n 1)" ] && [ "$n" -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	[ -n "$(find "$f" -mindepth 3 -type f)" ] && ok || bad "$layout: stopped load: nothing staged"
	kill -TERM "$pid"
	reap "$pid"
	rc=$?
	exec 7>&-
	[ "$rc" = 143 ] && ok || bad "$layout: stopped load: exit $rc, expected 143"
	[ -z "$(ls -A "$f")" ] && ok || bad "$layout: the stopped load left: $(ls -A "$f")"

	# 3c. Another loader installs the roots while a load stages them: that load moves its
	# files into those roots one by one instead, and the tree is the same.
	f="$T/raced-$layout"
	mkdir -p "$f"
	# shellcheck disable=SC2046
	env $DFL "$BIN" load -q - -p "$PUB" $(roots "$f") < "$T/fifo" 2> "$T/raced.err" &
	pid=$!
	exec 7>"$T/fifo"
	head -c "$half" "$T/all.mcache" >&7
	wait_for "$f" ".cache.mc$pid-*.tmp"
	# shellcheck disable=SC2046
	run 0 "" load -q "$T/all.mcache" -p "$PUB" $(roots "$f")
	tail -c +$((half + 1)) "$T/all.mcache" >&7
	exec 7>&-
	wait "$pid" && ok || bad "$layout: the raced load failed: $(cat "$T/raced.err")"
	[ "$(ls -A "$f" | tr '\n' ' ')" = "$beside" ] && ok ||
		bad "$layout: left beside the roots: $(ls -A "$f")"
	bytes "$f" > "$T/raced.bytes"
	cmp -s "$T/same.bytes" "$T/raced.bytes" && ok ||
		bad "$layout: raced tree: $(diff "$T/same.bytes" "$T/raced.bytes")"
done
# 3d. A killed load's staging folder beside a root that was made since is removed by the
# next load into that root.
f="$T/made-since"
mkdir -p "$f"
kill_load "$f" ".cache.mcPID-*.tmp" --cache-dir "$f/cache"
[ -n "$(find "$f" -maxdepth 1 -name '.cache.mc*')" ] && ok || bad "made since: the kill left no staging folder"
mkdir "$f/cache"
run 0 "" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$f/cache"
[ "$(ls -A "$f" | tr '\n' ' ')" = "cache " ] && ok || bad "made since: left beside the root: $(ls -A "$f")"
run 0 "" load -q "$T/all.mcache" -p "$PUB" --cache-dir "$T/ref"
[ "$(sums "$d")" = "$(sums "$T/ref")" ] && ok || bad "the next load did not complete the tree"
rm -rf "$T"/load-* "$d" "$T/ref" "$T/dest"

# 4. keygen -f stopped once its new secret key is on disk, while its public key is
# written (strace holds that fsync): the old pair stays whole, and no temp file is left.
if strace -f -qq -o /dev/null true 2>/dev/null; then
	k="$T/kg"
	mkdir "$k"
	"$BIN" keygen -q -W -p "$k/a.pub" -s "$k/a.key" || bad "keygen of the old pair"
	cp "$k/a.pub" "$T/old.pub"
	cp "$k/a.key" "$T/old.key"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o /dev/null \
		-e trace=fsync -e inject=fsync:delay_exit=3000000:when=2 \
		env $DFL "$BIN" keygen -q -W -f -p "$k/a.pub" -s "$k/a.key" 2>"$T/err" &
	spid=$!
	n=0
	while [ "$(ls -A "$k" | wc -l)" -lt 4 ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
	kpid=$(pgrep -P "$spid" -f "keygen" | head -n 1)
	[ -n "$kpid" ] && [ "$(ls -A "$k" | wc -l)" = 4 ] && ok ||
		bad "keygen -f: no process ($kpid) with both keys staged: $(ls -A "$k")"
	kill -INT "$kpid"
	reap "$spid"
	grep -q "interrupted by SIGINT" "$T/err" && ok || bad "keygen -f (INT): said $(cat "$T/err")"
	cmp -s "$k/a.key" "$T/old.key" && cmp -s "$k/a.pub" "$T/old.pub" && ok ||
		bad "keygen -f (INT): the old pair changed or is gone: $(ls -A "$k")"
	[ "$(ls -A "$k" | wc -l)" = 2 ] && ok || bad "keygen -f (INT): left $(ls -A "$k")"
fi

# 5. -o - into a pipe whose reader stopped reading: the signal ends the stalled write.
mkfifo "$T/stall"
for c in "pack -q -o - -s $SEC --from-dir $T/cache_cpu_cold" "sign $T/all.mcache -q -s $SEC -p $PUB -o -" \
	"merge -q -o - $T/all.mcache -p $PUB -s $SEC" "export $T/blob.mcache -p $PUB --torch -"; do
	# shellcheck disable=SC2086
	env $DFL "$BIN" $c >"$T/stall" 2>"$T/err" &
	pid=$!
	exec 9<"$T/stall"
	n=0
	while ! grep -q pipe_write "/proc/$pid/wchan" 2>/dev/null && [ "$n" -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	grep -q pipe_write "/proc/$pid/wchan" && ok || bad "${c%% *} -o -: never stalled in a write"
	kill -TERM "$pid"
	reap "$pid"
	rc=$?
	exec 9<&-
	[ "$rc" = 143 ] && grep -q "interrupted by SIGTERM" "$T/err" && ok ||
		bad "${c%% *} -o - stalled (TERM): exit $rc: $(cat "$T/err")"
done

finish
