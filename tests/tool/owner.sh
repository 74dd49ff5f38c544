# owner.sh - load --owner, as in an image built as root for another user: every file and
# folder the load makes (the missing parents of the cache dir included) is the owner's,
# what was there keeps its owner, a later load as root or as the owner goes on in those
# folders, and the owner can write in each. --owner needs root and an owner that exists.
# A dry run as a user who may not write fails as the load would, with the same line and
# exit status. A link at the Triton root beneath the cache dir is refused.
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null 2>&1; then
	echo "SKIP: --owner needs root, and the checks as another user setpriv"
	exit 77
fi
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
umask 022
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
run 0 "" pack -q -o "$T/cuda.mcache" -s "$SEC" --from-dir "$T/cache_mlp_cold"
chmod o+rx "$T"
chmod o+r "$T/cuda.mcache"

# as UID COMMAND...: runs it as that user, with that group and no others.
as() {
	u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}
# owners DIR: each owner and mode under DIR (DIR too), with how many have it.
owners() { find "$1" -printf '%U:%G %y %m\n' | LC_ALL=C sort | uniq -c | sed 's/^ *//'; }
snap() { (cd "$1" && find . -printf '%p %y %U:%G %m %s\n' | LC_ALL=C sort); }
nfiles=$(find "$T/cache_mlp_cold" -type f | wc -l)

# By numbers, into a cache dir two of whose parents are missing: all of it is 1000's,
# files 0644 and folders 0755 (umask 022), the folder that was there is left as it was.
mkdir "$T/img"
chmod 0750 "$T/img"
run 0 "154 files installed" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/img/a/b" --owner 1000:1000
ndirs=$(find "$T/img/a" -type d | wc -l)
owned=$(owners "$T/img/a")
all_owned=$(printf '%s 1000:1000 d 755\n%s 1000:1000 f 644' "$ndirs" 154)
[ "$owned" = "$all_owned" ] && ok || bad "--owner 1000:1000: owners and modes: $owned"
[ "$(stat -c '%u:%g %a' "$T/img")" = "0:0 750" ] && ok || bad "a folder that was there changed: $(stat -c '%u:%g %a' "$T/img")"
[ -z "$(find "$T/img" -name '.*')" ] && ok || bad "temp files left: $(find "$T/img" -name '.*' | head -3)"
[ "$(find "$T/img/a/b" -type f | wc -l)" = 154 ] && [ "$nfiles" -ge 154 ] && ok || bad "not every file installed"

# Again as root, into the owner's folders (the Triton root among them, which a load
# takes only from its user, root, or the owner it gives files to): a removed kernel
# folder and file come back, the owner's.
chmod o+x "$T/img"
k=$(find "$T/img/a/b/triton/0" -mindepth 1 -maxdepth 1 -type d | head -1)
f=$(find "$T/img/a/b/fxgraph" -type f | head -1)
nk=$(find "$k" -type f | wc -l)
rm -rf "$k" "$f"
run 0 "$((nk + 1)) files installed" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/img/a/b" \
	--owner 1000:1000
[ "$(owners "$T/img/a")" = "$all_owned" ] && ok || bad "second load as root: $(owners "$T/img/a")"
[ -d "$k" ] && [ -f "$f" ] && ok || bad "second load did not put back the removed files"
# The owner can make files in every folder, and load into them itself.
n=0
for d in $(find "$T/img/a" -type d); do
	as 1000 touch "$d/.mine" || n=$((n + 1))
	rm -f "$d/.mine"
done
[ "$n" = 0 ] && ok || bad "the owner cannot write in $n folders"
as 1000 "$MEGACACHE" load -q "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/img/a/b" >"$T/out" 2>"$T/err" \
	&& ok || bad "a load by the owner into its folders failed: $(cat "$T/err")"

# USER alone: its passwd entry's uid and primary group; a name with a group number.
nob=$(getent passwd nobody | cut -d: -f3,4)
run 0 "" load -q "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/n/c" --owner nobody
[ "$(owners "$T/n" | cut -d' ' -f2 | sort -u)" = "$nob" ] && ok || bad "--owner nobody: $(owners "$T/n")"
run 0 "" load -q "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/ng" --owner nobody:0
[ "$(owners "$T/ng" | cut -d' ' -f2 | sort -u)" = "${nob%%:*}:0" ] && ok || bad "--owner nobody:0: $(owners "$T/ng")"

# Not root: refused with one line before anything is read or written, dry run or not.
for dry in "" --dry-run; do
	as 65534 "$MEGACACHE" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/nr" --owner 1000:1000 $dry \
		>"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q -- "--owner: .*needs root.* uid 65534" "$T/err" \
		&& ok || bad "--owner as uid 65534 $dry: exit $rc: $(cat "$T/err")"
	[ ! -e "$T/nr" ] && ok || bad "--owner as uid 65534 $dry wrote"
done
# An owner that does not exist: one line naming it, nothing written.
run 2 "--owner: no user 'megacache-no-such-user'" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/nu" \
	--owner megacache-no-such-user
run 2 "--owner: no group 'megacache-no-such-group'" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/nu" \
	--owner nobody:megacache-no-such-group --dry-run
[ "$(wc -l <"$T/err")" = 1 ] && ok || bad "more than one line: $(cat "$T/err")"
if [ -z "$(getent passwd 4242)" ]; then
	run 2 "uid 4242 has no passwd entry" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/nu" --owner 4242
	run 0 "" load -q "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/nu" --owner 4242:4243 --types inductor
	[ "$(owners "$T/nu" | cut -d' ' -f2 | sort -u)" = "4242:4243" ] && ok || bad "--owner 4242:4243: $(owners "$T/nu")"
	rm -rf "$T/nu"
fi
[ ! -e "$T/nu" ] && ok || bad "a refused --owner wrote"

# A dry run as a user who may not write where the load would: the line and exit status
# of the real load, which fails so and leaves the tree as it was. 1: a folder to make
# in a root's folder; 2: an existing root's folder to make a kernel folder in; 3: a
# missing parent of the cache dir.
dry_same() { # dry_same WHAT TEXT CACHEDIR
	what=$1 text=$2 dir=$3
	snap "$T/ro" >"$T/ro.before"
	as 65534 "$MEGACACHE" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$dir" --dry-run >"$T/out" 2>"$T/dry"
	drc=$?
	as 65534 "$MEGACACHE" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$dir" >"$T/out" 2>"$T/real"
	lrc=$?
	[ "$drc" = 2 ] && [ "$lrc" = 2 ] && ok || bad "$what: dry run exit $drc, load exit $lrc"
	grep -qF -- "$text" "$T/dry" && cmp -s "$T/dry" "$T/real" && [ "$(wc -l <"$T/dry")" = 1 ] && ok \
		|| bad "$what: dry run said '$(cat "$T/dry")', the load '$(cat "$T/real")'"
	snap "$T/ro" | cmp -s - "$T/ro.before" && ok || bad "$what: the tree changed"
}
mkdir -p "$T/ro/c"
dry_same "folder to make" "$T/ro/c/aotautograd: cannot create folder: Permission denied" "$T/ro/c"
chown 65534:65534 "$T/ro/c"
mkdir -p "$T/ro/c/triton/0"
dry_same "kernel folder to make" "$T/ro/c/triton/0: cannot create files in it: Permission denied" "$T/ro/c"
dry_same "parent of the cache dir" "$T/ro/x: cannot create folder: Permission denied" "$T/ro/x/y"
# Where the user may write, the dry run says what it would install.
chown 65534:65534 "$T/ro/c/triton" "$T/ro/c/triton/0"
as 65534 "$MEGACACHE" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/ro/c" --dry-run >"$T/out" 2>"$T/err" \
	&& grep -q "154 files to install" "$T/out" && ok || bad "dry run into the user's own tree: $(cat "$T/err")"
[ -z "$(find "$T/ro/c" -mindepth 1 ! -path "$T/ro/c/triton" ! -path "$T/ro/c/triton/0")" ] && ok \
	|| bad "the dry run wrote"

# A link at the Triton root beneath the cache dir (<cache dir>/triton, or its device
# folder) is refused, with --owner and in a dry run too, and nothing is written.
mkdir -p "$T/outside" "$T/ln/triton"
ln -s "$T/outside" "$T/ln/triton/0"
for opt in "" --dry-run "--owner 1000:1000"; do
	run 2 "$T/ln/triton/0: is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/ln" $opt
done
rm "$T/ln/triton/0"
rmdir "$T/ln/triton"
ln -s "$T/outside" "$T/ln/triton"
for opt in "" --dry-run "--owner 1000:1000"; do
	run 2 "$T/ln/triton: is a symlink or not a folder" load "$T/cuda.mcache" -p "$PUB" --cache-dir "$T/ln" $opt
done
[ -z "$(find "$T/outside" -mindepth 1)" ] && ok || bad "written through the link"
[ "$(find "$T/ln" | wc -l)" = 2 ] && ok || bad "the cache dir changed: $(find "$T/ln")"
finish
