# usage.sh - what the job used: run tells, per type, how many artifacts it loaded, how
# many of those the job read and how many files it wrote anew, in a line and in its
# JSON; a type the job read none of is said plainly, with where to look; a file only
# stat'ed is not read; a file loaded by two bundles counts once; and files whose reads
# cannot be seen (a noatime mount, another user's files) are counted as such, never as
# read or unread.
. "$(dirname "$0")/lib.sh"
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME TEMP TMP
export HOME="$T/home" TMPDIR="$T/tmp"
mkdir -p "$HOME" "$TMPDIR"
umask 022
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
B="$T/b.mcache"
run 0 "" pack -q -o "$B" --from-dir "$T/cache_mlp_cold"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
KERNEL=4EZKWCJAMJOFUBJSA7CVHLDBLWWYSLPH5NKI6ZRGKA6Z2VZHQQCQ # 8 files
types="aot_autograd (2), autotune (4), inductor (4), kernel_code (16), triton (128)"
hint="the likely cause is a torch, Triton or config mismatch: compare the bundle's labels (megacache list $B) with this host's"

# The job reads the four FX graph entries and one Triton kernel's 8 files, only stats
# the generated code, and writes a new Triton kernel (2 files) and a new kernel_code file.
job='C=$0
cat "$C"/fxgraph/*/*/* "$C/triton/0/$1"/* >/dev/null
stat "$C"/*/*.py >/dev/null
mkdir -p "$C/triton/0/NEWKERNELHASH" "$C/zz"
echo cubin >"$C/triton/0/NEWKERNELHASH/k.cubin"
echo "{}" >"$C/triton/0/NEWKERNELHASH/k.json"
echo "print(1)" >"$C/zz/cjobnew.py"'
run 0 "" run -b "$B" --insecure-no-verify --cache-dir "$T/c" -- sh -c "$job" "$T/c" "$KERNEL"
line="megacache: the job read 12 of 154 loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, inductor 4 of 4, kernel_code 0 of 16, triton 8 of 128); 3 new"
grep -qxF "$line" "$T/err" && ok || bad "run: no line '$line': $(cat "$T/err")"
# Of the types torch reads only to compile (autotune, kernel_code), none read is what a
# warm start is once the FX graphs were read: only aot_autograd is told.
warn="megacache: warning: the job read none of the loaded aot_autograd (2) artifacts; $hint"
grep -qxF "$warn" "$T/err" && ok || bad "run: no warning '$warn': $(cat "$T/err")"
[ "$(grep -c "the job" "$T/err")" = 2 ] && ok || bad "run: more than the line and the warning: $(cat "$T/err")"

# The same in the JSON (a cache dir of its own, as empty as the first one was).
# used JSON ASSERTION: JSON is valid against the schema, and ASSERTION holds of j["used"]
# (u) and j["used_not_seen"] (ns).
used() {
	/usr/bin/python3 - "$SCHEMA" "$@" <<'EOF'
import json, sys
import jsonschema
schema, path, expr = sys.argv[1:]
j = json.load(open(path))
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
u, ns = j["used"], j["used_not_seen"]
assert eval(expr), (u, ns)
EOF
}
run 0 "" run -b "$B" --insecure-no-verify --cache-dir "$T/c2" --json-file "$T/r.json" -- \
	sh -c "$job" "$T/c2" "$KERNEL"
used "$T/r.json" 'u == {"aot_autograd": {"installed": 2, "read": 0, "new": 0, "not_seen": 0}, "autotune": {"installed": 4, "read": 0, "new": 0, "not_seen": 0}, "inductor": {"installed": 4, "read": 4, "new": 0, "not_seen": 0}, "kernel_code": {"installed": 16, "read": 0, "new": 1, "not_seen": 0}, "triton": {"installed": 128, "read": 8, "new": 2, "not_seen": 0}} and ns == {}' &&
	ok || bad "run --json-file: used: $(cat "$T/r.json")"
! grep -q "the job" "$T/err" && ok || bad "run --json-file said the line as text: $(cat "$T/err")"
# -q: not a word of it
run 0 "" run -q -b "$B" --insecure-no-verify --cache-dir "$T/c2" -- true
[ ! -s "$T/err" ] && ok || bad "run -q said: $(cat "$T/err")"

# Two bundles that hold the same files: each loaded file counts once. The job reads
# nothing, the files it finds are there from before: nothing new, every type unread.
run 0 "" run -b "$B" -b "$B" --insecure-no-verify --cache-dir "$T/c" -- true
line="megacache: the job read 0 of 154 loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, inductor 0 of 4, kernel_code 0 of 16, triton 0 of 128); 0 new"
grep -qxF "$line" "$T/err" && ok || bad "two bundles: no line '$line': $(cat "$T/err")"
warn="megacache: warning: the job read none of the loaded $types artifacts; the likely cause is a torch, Triton or config mismatch: compare the bundle's labels (megacache list BUNDLE) with this host's"
grep -qxF "$warn" "$T/err" && ok || bad "two bundles: no warning '$warn': $(cat "$T/err")"

# A file the job rewrites in place that it did not load is new; one it only reads is not.
run 0 "" run --cache-dir "$T/c" -- sh -c 'cat "$0/zz/cjobnew.py" >/dev/null; echo 2 >>"$0/triton/0/NEWKERNELHASH/k.json"' "$T/c"
line="megacache: the job read 0 of 0 loaded artifacts; 1 new"
grep -qxF "$line" "$T/err" && ok || bad "no bundle: no line '$line': $(cat "$T/err")"
# Nothing loaded and nothing new: nothing said.
run 0 "" run --cache-dir "$T/c" -- true
[ ! -s "$T/err" ] && ok || bad "run of nothing said: $(cat "$T/err")"

# A job that hits torch's precompile cache (dynamo's whole frame) reads no FX graph or
# AOTAutograd entry, nor what a compile reads: a warm start, with no warning.
cp -a "$T/cache_mlp_cold" "$T/pre"
PRE=dynamo/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
mkdir -p "$T/pre/$PRE"
echo "frame" >"$T/pre/$PRE/entry"
run 0 "" pack -q -o "$T/pre.mcache" --from-dir "$T/pre"
run 0 "" run -b "$T/pre.mcache" --insecure-no-verify --cache-dir "$T/c3" -- \
	sh -c 'cat "$0/'"$PRE"'/entry" >/dev/null' "$T/c3"
line="megacache: the job read 1 of 155 loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, inductor 0 of 4, kernel_code 0 of 16, precompile 1 of 1, triton 0 of 128); 0 new"
grep -qxF "$line" "$T/err" && ok || bad "precompile: no line '$line': $(cat "$T/err")"
! grep -q "warning: the job read none" "$T/err" && ok || bad "precompile: a warning: $(cat "$T/err")"
# The same bundle, its precompile entry unread: every type is named.
run 0 "" run -b "$T/pre.mcache" --insecure-no-verify --cache-dir "$T/c4" -- true
grep -qF "warning: the job read none of the loaded aot_autograd (2), autotune (4), inductor (4), kernel_code (16), precompile (1), triton (128) artifacts" "$T/err" &&
	ok || bad "precompile unread: no warning naming it: $(cat "$T/err")"

# Files whose reads cannot be seen. Both cases need root: a tmpfs mounted noatime, and
# files of root's that another user's job reads.
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: the files not seen (a noatime mount, another user's files) need root"
	finish
	exit
fi
mkdir "$T/na"
if mount -t tmpfs -o noatime,size=64m tmpfs "$T/na" 2>/dev/null; then
	trap 'umount "$T/na"' EXIT
	run 0 "" run -b "$B" --insecure-no-verify --cache-dir "$T/na/c" -- sh -c "$job" "$T/na/c" "$KERNEL"
	line="megacache: the job read 0 of 154 loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, inductor 0 of 4, kernel_code 0 of 16, triton 0 of 128); 3 new; 154 not seen (154 on a noatime mount)"
	grep -qxF "$line" "$T/err" && ok || bad "noatime: no line '$line': $(cat "$T/err")"
	! grep -q "warning: the job read none" "$T/err" && ok || bad "noatime: a warning of files not seen: $(cat "$T/err")"
	rm -rf "$T/na/c"
	run 0 "" run -b "$B" --insecure-no-verify --cache-dir "$T/na/c" --json-file "$T/na.json" -- true
	used "$T/na.json" 'ns == {"noatime": 154} and u["triton"] == {"installed": 128, "read": 0, "new": 0, "not_seen": 128}' &&
		ok || bad "noatime: JSON: $(cat "$T/na.json")"
	umount "$T/na" && trap - EXIT
else
	echo "SKIP: a tmpfs cannot be mounted here: no noatime case"
fi
if command -v setpriv >/dev/null 2>&1; then
	run 0 "" load "$B" --insecure-no-verify --cache-dir "$T/root-c"
	chmod -R o+rX "$T"
	mkdir -m 1777 "$T/anyone"
	HOME="$T/anyone" TMPDIR="$T/anyone" setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$MEGACACHE" run -b "$B" --insecure-no-verify --cache-dir "$T/root-c" -- \
		sh -c 'cat "$0"/fxgraph/*/*/* >/dev/null' "$T/root-c" 2>"$T/err"
	rc=$?
	[ "$rc" = 0 ] && ok || bad "another user's run exited $rc: $(cat "$T/err")"
	line="megacache: the job read 0 of 154 loaded artifacts (aot_autograd 0 of 2, autotune 0 of 4, inductor 0 of 4, kernel_code 0 of 16, triton 0 of 128); 0 new; 154 not seen (154 owned by another user)"
	grep -qxF "$line" "$T/err" && ok || bad "another user's files: no line '$line': $(cat "$T/err")"
else
	echo "SKIP: no setpriv: no case of another user's files"
fi
finish
