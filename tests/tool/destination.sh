# destination.sh - hostile destinations: links planted in the cache dir at a folder, at
# a final file name and at a Triton kernel folder; a cache dir the loader may not
# write. Each is refused with exit 2 and a message naming the path, and nothing outside
# (or inside) changes.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$T"
run 0 "" pack -q -o "$T/cuda.mcache" -s "$SEC" --from-dir "$T/cache_mlp_cold"
run 0 "" pack -q -o "$T/cpu.mcache" -s "$SEC" --from-torch "$DATA/mlp-cpu-pgo.megacache"
mkdir -p "$T/outside"
echo precious > "$T/outside/victim"
snap() { (cd "$1" && find . -printf '%p %y %s %T@\n' | LC_ALL=C sort); }

fresh_root() {
	rm -rf "$T/root"
	mkdir -p "$T/root"
}

# A link at fxgraph/.
fresh_root
ln -s "$T/outside" "$T/root/fxgraph"
snap "$T/outside" > "$T/before"
snap "$T/root" > "$T/root.before"
run 2 "fxgraph: is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/root"
snap "$T/outside" | cmp -s - "$T/before" && ok || bad "the folder behind the link changed"
snap "$T/root" | cmp -s - "$T/root.before" && ok || bad "the cache dir changed"

# A link at a final file name.
fresh_root
mkdir -p "$T/root/dynamo"
ln -s "$T/outside/victim" "$T/root/dynamo/code_state_megacache-probe_None_.pkl"
snap "$T/root" > "$T/root.before"
run 2 "code_state_megacache-probe_None_.pkl: exists and is a symlink" load "$T/cpu.mcache" -p "$PUB" --cache-dir "$T/root"
[ "$(cat "$T/outside/victim")" = precious ] && ok || bad "the file behind the link was written"
snap "$T/root" | cmp -s - "$T/root.before" && ok || bad "the cache dir changed"

# A link at a Triton kernel folder.
fresh_root
mkdir -p "$T/root/triton/0"
ln -s "$T/outside" "$T/root/triton/0/5R467APMN4NBYYOOQVSRYSCYJWWLZWXLOLQGVNQZHQXVOTJYWSOA"
snap "$T/outside" > "$T/before"
run 2 "is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/root"
snap "$T/outside" | cmp -s - "$T/before" && ok || bad "the folder behind the kernel link changed"
[ "$(find "$T/root" | wc -l)" = 4 ] && ok || bad "the cache dir changed: $(find "$T/root" | head)"

# A link at the tier root itself is the caller's choice and is followed.
fresh_root
ln -s "$T/root" "$T/root-link"
run 0 "" load -q "$T/cpu.mcache" -p "$PUB" --cache-dir "$T/root-link"
[ -f "$T/root/dynamo/code_state_megacache-probe_None_.pkl" ] && ok || bad "a linked root was not followed"

# A link at the default Triton root (<cache dir>/triton): not named by the caller, so
# walked like every folder beneath the cache dir. load, load --dry-run and
# list --explain all refuse it, and nothing is written anywhere.
fresh_root
ln -s "$T/outside" "$T/root/triton"
snap "$T/outside" > "$T/before"
snap "$T/root" > "$T/root.before"
run 2 "$T/root/triton: is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/root"
run 2 "$T/root/triton: is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/root" --dry-run
run 2 "$T/root/triton: is a symlink or not a folder" list "$T/cuda.mcache" --explain --cache-dir "$T/root"
snap "$T/outside" | cmp -s - "$T/before" && ok || bad "the folder behind the Triton root link changed"
snap "$T/root" | cmp -s - "$T/root.before" && ok || bad "the cache dir changed"
# The same link when the cache dir does not exist yet and is made by the load: the
# Triton root is made as a real folder beneath it, never through a link.
rm -rf "$T/root"
unset TRITON_CACHE_DIR; run 0 "" load -q "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/root"
[ -d "$T/root/triton" ] && [ ! -L "$T/root/triton" ] && ok || bad "the Triton root is not a plain folder"

# The default cache dir, $TMPDIR/torchinductor_<user>, lies in a folder others may
# write: a link planted there is refused, as at any folder below the cache dir.
mkdir -p "$T/tmpdir"
ln -s "$T/outside" "$T/tmpdir/torchinductor_planted"
snap "$T/outside" > "$T/before"
env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR TMPDIR="$T/tmpdir" LOGNAME=planted \
	"$MEGACACHE" load "$T/cpu.mcache" -p "$PUB" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && grep -q "torchinductor_planted: is a symlink or not a folder" "$T/err" && ok \
	|| bad "link at the default cache dir: exit $rc: $(cat "$T/err")"
snap "$T/outside" | cmp -s - "$T/before" && ok || bad "the folder behind the default cache dir link changed"
# Loading only the Triton kernels goes through the same folder: refused too.
env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR TMPDIR="$T/tmpdir" LOGNAME=planted \
	"$MEGACACHE" load "$T/cuda.mcache" -p "$PUB" --types triton >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && grep -q "torchinductor_planted: is a symlink or not a folder" "$T/err" && ok \
	|| bad "link at the default cache dir, Triton only: exit $rc: $(cat "$T/err")"
snap "$T/outside" | cmp -s - "$T/before" && ok || bad "the folder behind the default cache dir link changed"
# A real folder planted there by another user, or one anyone may write, is refused
# as well: torch would run what its owner puts in it later.
if [ "$(id -u)" = 0 ]; then
	rm "$T/tmpdir/torchinductor_planted"
	mkdir "$T/tmpdir/torchinductor_planted"
	chown 65534:65534 "$T/tmpdir/torchinductor_planted"
	env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR TMPDIR="$T/tmpdir" LOGNAME=planted \
		"$MEGACACHE" load "$T/cpu.mcache" -p "$PUB" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 2 ] && grep -q "torchinductor_planted: owned by another user (uid 65534)" "$T/err" && ok \
		|| bad "planted folder of another user: exit $rc: $(cat "$T/err")"
	chown 0:0 "$T/tmpdir/torchinductor_planted"
	chmod 0777 "$T/tmpdir/torchinductor_planted"
	env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR TMPDIR="$T/tmpdir" LOGNAME=planted \
		"$MEGACACHE" load "$T/cpu.mcache" -p "$PUB" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 2 ] && grep -q "torchinductor_planted: .*writable by others" "$T/err" && ok \
		|| bad "world-writable default cache dir: exit $rc: $(cat "$T/err")"
	[ -z "$(find "$T/tmpdir/torchinductor_planted" -mindepth 1)" ] && ok || bad "planted folder written"
	rmdir "$T/tmpdir/torchinductor_planted"
else
	rm "$T/tmpdir/torchinductor_planted"
fi
# A plan that drops a twin (the same content twice) still checks the rest: refused
# every time, whatever order the plan's keyed hashes take.
for i in 1 2 3 4 5 6 7 8 9 10; do
	run 1 "installs as a whole" load "$MC_SRCDIR/format/vectors/tiers-twin-in-unit.mcache" -p "$PUB" \
		--cache-dir "$T/twin"
done
[ ! -e "$T/twin" ] && ok || bad "a refused twin load wrote"
# Without the link, the default cache dir is made and filled.
env -u TORCHINDUCTOR_CACHE_DIR -u TRITON_CACHE_DIR TMPDIR="$T/tmpdir" LOGNAME=planted \
	"$MEGACACHE" load -q "$T/cpu.mcache" -p "$PUB" >"$T/out" 2>"$T/err"
[ -f "$T/tmpdir/torchinductor_planted/dynamo/code_state_megacache-probe_None_.pkl" ] && ok \
	|| bad "default cache dir not filled: $(cat "$T/err")"

# A Triton root the caller sets inside the cache dir (a common set-up) is one tree with
# it: an artifact of the inductor tier on a Triton kernel file is a conflict there too.
fresh_root
TRITON_CACHE_DIR="$T/root/triton/0" run 1 "$T/root/triton/0/kern" \
	load "$MC_SRCDIR/format/vectors/tiers-same-file.mcache" -p "$PUB" --cache-dir "$T/root"
run 1 "$T/root/triton/0/kern" \
	load "$MC_SRCDIR/format/vectors/tiers-same-file.mcache" -p "$PUB" --cache-dir "$T/root" \
	--triton-dir "$T/root/triton/0"
# ... also when the caller names it through a link into the cache dir, one whose
# target this load would make.
ln -s "$T/root/triton/0" "$T/triton-link"
run 1 "$T/root/triton/0/kern" \
	load "$MC_SRCDIR/format/vectors/tiers-same-file.mcache" -p "$PUB" --cache-dir "$T/root" \
	--triton-dir "$T/triton-link"
[ -z "$(find "$T/root" -mindepth 1 ! -type l)" ] && ok || bad "a refused load wrote: $(find "$T/root")"
rm -f "$T/triton-link"

# A cache dir the loader may not write (as an unprivileged user when run as root).
fresh_root
chmod 0555 "$T/root"
if [ "$(id -u)" = 0 ]; then
	AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
	chmod o+rx "$T" "$T/cpu.mcache" 2>/dev/null
else
	AS=""
fi
$AS "$MEGACACHE" load "$T/cpu.mcache" -p "$PUB" --cache-dir "$T/root" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] && ok || bad "read-only cache dir: exit $rc, expected 2: $(cat "$T/err")"
grep -q "Permission denied" "$T/err" && grep -q "$T/root" "$T/err" && ok || bad "read-only: unclear error: $(cat "$T/err")"
[ -z "$(find "$T/root" -mindepth 1)" ] && ok || bad "read-only: something was written"
chmod 0755 "$T/root"
finish
