# durable.sh - what survives a power cut, seen in the system calls: pack, sign, merge and
# export flush the new file before it is renamed over the target and its folder after;
# load --sync flushes each filesystem of the cache dirs once, a plain load none; a flush
# that fails is an error (exit 2) that names the file, and leaves the old target whole.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
if ! strace -f -qq -o /dev/null true 2>/dev/null; then
	echo "SKIP: strace cannot trace here (not installed, or ptrace is forbidden)"
	exit 77
fi
# LeakSanitizer cannot run under a tracer (it stops the process with ptrace itself):
# with a sanitized build, leaks are left to the other tests.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
# strace names files by their real path: the outputs are written under it.
R=$(cd "$T" && pwd -P)
CALLS=fsync,fdatasync,rename,renameat,renameat2,syncfs

# traced LOG ARGS...: megacache under strace, with its calls that matter here in LOG
# (each with the path of its descriptor). The status is megacache's.
traced() {
	log=$1; shift
	strace -f -qq -y -e signal=none -e trace=$CALLS -o "$log" "$MEGACACHE" "$@" \
		>"$T/out" 2>"$T/err"
}

# durable WHAT LOG TARGET: LOG shows a temp file beside TARGET flushed, then renamed to
# TARGET, then TARGET's folder flushed, in that order.
durable() {
	awk -v t="$3" -v d="${3%/*}" '
		step == 0 && /fsync\(/ && index($0, "<" t ".") && /\.tmp>\) += 0$/ {
			tmp = substr($0, index($0, "<") + 1); sub(/>.*/, "", tmp); step = 1; next }
		step == 1 && /rename/ && index($0, "\"" tmp "\"") && index($0, "\"" t "\")") && / = 0$/ {
			step = 2; next }
		step == 2 && /fsync\(/ && index($0, "<" d ">)") && / = 0$/ { step = 3 }
		END { exit step != 3 }' "$2" && ok || bad "$1: not flushed, renamed, folder flushed: $(cat "$2")"
}

tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
traced "$T/pack.log" pack -q -o "$R/a.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache" &&
	ok || bad "pack failed: $(cat "$T/err")"
durable pack "$T/pack.log" "$R/a.mcache"
traced "$T/sign.log" sign "$R/a.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub" && ok || bad "sign failed: $(cat "$T/err")"
durable sign "$T/sign.log" "$R/a.mcache"
run 0 "" pack -q -o "$R/dir.mcache" -s "$SEC" --from-dir "$T/cache_mlp_cold"
traced "$T/merge.log" merge -q -o "$R/m.mcache" "$R/a.mcache" "$R/dir.mcache" -p "$PUB" -s "$SEC" &&
	ok || bad "merge failed: $(cat "$T/err")"
durable merge "$T/merge.log" "$R/m.mcache"
traced "$T/export.log" export -q "$R/a.mcache" --torch "$R/a.bin" -p "$PUB" &&
	ok || bad "export failed: $(cat "$T/err")"
durable export "$T/export.log" "$R/a.bin"
check "export gives the blob back" cmp -s "$DATA/mlp-cuda.megacache" "$R/a.bin"

# A flush that fails: the file's (the first fsync), then its folder's (the second).
# inject N CMD ARGS...: megacache with its Nth fsync failing with EIO.
inject() {
	n=$1; shift
	strace -f -qq -e signal=none -e trace=fsync -e inject=fsync:error=EIO:when="$n" \
		-o /dev/null "$MEGACACHE" "$@" >"$T/out" 2>"$T/err"
}
# flush_fails WHAT TARGET ARGS...: an old TARGET stays as it was, no temp file is left.
flush_fails() {
	what=$1 target=$2; shift 2
	printf 'old bytes\n' > "$target"
	inject 1 "$@"
	[ $? = 2 ] && ok || bad "$what with a failing fsync did not exit 2"
	grep -qxF "megacache: $target: cannot flush to disk: Input/output error" "$T/err" &&
		ok || bad "$what: wrong message for a failing fsync: $(cat "$T/err")"
	[ "$(cat "$target")" = "old bytes" ] && ok || bad "$what: the old target was replaced"
	[ -z "$(find "$R" -maxdepth 1 -name '*.tmp')" ] && ok || bad "$what: a temp file was left"
	rm -f "$target"
}
flush_fails pack "$R/f.mcache" pack -q -o "$R/f.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache"
cp "$R/a.mcache" "$R/s.mcache"
inject 1 sign "$R/s.mcache" -s "$SEC" -p "$KEYS/test.pub"
[ $? = 2 ] && ok || bad "sign in place with a failing fsync did not exit 2"
check "sign in place with a failing fsync leaves the bundle" cmp -s "$R/a.mcache" "$R/s.mcache"
flush_fails sign "$R/f.mcache" sign "$R/a.mcache" -s "$SEC" -p "$KEYS/test.pub" -o "$R/f.mcache"
flush_fails merge "$R/f.mcache" merge -q -o "$R/f.mcache" "$R/a.mcache" -p "$PUB" --unsigned
flush_fails export "$R/f.bin" export -q "$R/a.mcache" --torch "$R/f.bin" -p "$PUB"
inject 2 pack -q -o "$R/g.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache"
[ $? = 2 ] && ok || bad "pack with a failing folder fsync did not exit 2"
grep -qxF "megacache: $R/g.mcache: in place, but its folder cannot be flushed to disk: Input/output error" \
	"$T/err" && ok || bad "wrong message for a failing folder fsync: $(cat "$T/err")"

# load --sync: one syncfs per filesystem, on the cache dirs; none without it.
# syncs LOG: the paths syncfs was called on, one a line, sorted.
syncs() {
	sed -n 's/.*syncfs([0-9]*<\(.*\)>) = 0$/\1/p' "$1" | sort
}
ALL="$R/all.mcache"
run 0 "" pack -q -o "$ALL" -s "$SEC" --from-dir "$T/cache_mlp_cold"
traced "$T/load.log" load -q "$ALL" -p "$PUB" --cache-dir "$R/plain"
[ $? = 0 ] && ok || bad "load failed: $(cat "$T/err")"
[ -z "$(syncs "$T/load.log")" ] && ! grep -q syncfs "$T/load.log" && ok ||
	bad "a load without --sync called syncfs: $(grep syncfs "$T/load.log")"
traced "$T/load.log" load "$ALL" -p "$PUB" --cache-dir "$R/one" --sync --json
[ $? = 0 ] && ok || bad "load --sync failed: $(cat "$T/err")"
[ "$(syncs "$T/load.log")" = "$R/one" ] && [ "$(grep -c syncfs "$T/load.log")" = 1 ] && ok ||
	bad "load --sync into one cache dir: not one syncfs on it: $(grep syncfs "$T/load.log")"
grep -q '"synced":[[:space:]]*true' "$T/out" && ok || bad "load --sync --json lacks \"synced\": true"
check "load --sync installs the same tree" [ "$(tree_sum "$R/one")" = "$(tree_sum "$R/plain")" ]
run 0 "" load "$ALL" -p "$PUB" --cache-dir "$R/plain" --json
grep -q '"synced":[[:space:]]*false' "$T/out" && ok || bad "load --json lacks \"synced\": false"
run 0 "" load "$ALL" -p "$PUB" --cache-dir "$R/dry" --sync --dry-run --json
grep -q '"synced":[[:space:]]*false' "$T/out" && ok || bad "load --dry-run --sync --json lacks \"synced\": false"
# Nothing new to install: the files already there are flushed all the same.
traced "$T/load.log" load -q "$ALL" -p "$PUB" --cache-dir "$R/plain" --sync
[ "$(syncs "$T/load.log")" = "$R/plain" ] && ok ||
	bad "load --sync of an installed bundle: not one syncfs: $(grep syncfs "$T/load.log")"
# Two filesystems: the cache dir in a tmpfs, the Triton cache here.
SHM=$(mktemp -d /dev/shm/megacache-durable.XXXXXX 2>/dev/null) || SHM=
if [ -n "$SHM" ] && [ "$(stat -c %d "$SHM")" != "$(stat -c %d "$R")" ]; then
	traced "$T/load.log" load -q "$ALL" -p "$PUB" --cache-dir "$SHM/c" --triton-dir "$R/tri" --sync
	[ $? = 0 ] && ok || bad "load --sync on two filesystems failed: $(cat "$T/err")"
	[ "$(syncs "$T/load.log")" = "$(printf '%s\n%s' "$R/tri" "$SHM/c" | sort)" ] &&
		[ "$(grep -c syncfs "$T/load.log")" = 2 ] && ok ||
		bad "load --sync on two filesystems: not one syncfs each: $(grep syncfs "$T/load.log")"
	[ -n "$(ls "$R/tri")" ] && [ -n "$(ls "$SHM/c")" ] && ok || bad "a tier received no file"
else
	echo "note: /dev/shm is not a separate filesystem here; the two-filesystem case is not run"
fi
[ -n "$SHM" ] && rm -rf "$SHM"
# A syncfs that fails: exit 2, naming the cache dir.
strace -f -qq -e signal=none -e trace=syncfs -e inject=syncfs:error=EIO -o /dev/null \
	"$MEGACACHE" load -q "$ALL" -p "$PUB" --cache-dir "$R/eio" --sync >"$T/out" 2>"$T/err"
[ $? = 2 ] && ok || bad "load --sync with a failing syncfs did not exit 2"
grep -qxF "megacache: $R/eio: installed, but cannot be flushed to disk: Input/output error" "$T/err" &&
	ok || bad "wrong message for a failing syncfs: $(cat "$T/err")"
finish
