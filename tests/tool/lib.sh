# lib.sh - shared by the tool-level tests: a scratch folder under the build tree,
# assertions that count, and the closing line.
set -u
: "${MC_SRCDIR:?run through make check}" "${MC_BUILDDIR:?}" "${MEGACACHE:?}"
NAME=$(basename "$0" .sh)
T="$MC_BUILDDIR/tests/tmp/$NAME"
rm -rf "$T"
mkdir -p "$T"
# No test reads or fills a vLLM cache but one it names (each its own, never the runner's).
VLLM_CACHE_ROOT="$T/.no-vllm-root"
export VLLM_CACHE_ROOT
DATA="$MC_SRCDIR/tests/data/torch-2.11"
KEYS="$MC_SRCDIR/format/vectors/keys"
PASSED=0
FAILED=0

ok() { PASSED=$((PASSED + 1)); }
bad() { FAILED=$((FAILED + 1)); printf 'FAIL: %s\n' "$*"; } # printf: echo may expand backslashes
check() { # check DESCRIPTION COMMAND...: the command must succeed
	desc=$1; shift
	if "$@"; then ok; else bad "$desc"; fi
}

# run EXPECTED_EXIT TEXT megacache-args...: checks the exit status, and that TEXT is in
# stderr (on failure) or stdout (on success).
run() {
	want=$1; text=$2; shift 2
	"$MEGACACHE" "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" != "$want" ]; then
		bad "megacache $* exited $got, expected $want: $(head -c 400 "$T/err")"
		return 1
	fi
	where="$T/err"
	[ "$want" = 0 ] && where="$T/out"
	if [ -n "$text" ] && ! grep -qF -- "$text" "$where"; then
		bad "megacache $*: output lacks '$text': $(head -c 400 "$where")"
		return 1
	fi
	ok
	return 0
}

# Triton's group files (__grp__*.json) name their kernel's files by absolute path: a
# bundle records them with bare names and a load writes them for where they land
# (SPEC.md section 4). grp_form FILE [DIR] prints what Python's json.dumps writes for
# FILE's children at folder DIR, or with bare names (the recorded form) without DIR.
grp_form() {
	/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1], encoding="utf-8"))["child_paths"]
d = sys.argv[2] if len(sys.argv) > 2 else None
print(json.dumps({"child_paths": {n: n if d is None else d + "/" + n for n in sorted(c)}}), end="")' "$@"
}

# Lists a tree as "sha256  ./path" lines, to compare trees byte for byte: tree_sum DIR
# [visible] (visible: leaves out hidden files). A group file that names its own
# folder is listed with the sum of its recorded form, so that trees loaded into two
# places compare equal; src_sum DIR lists every group file so, whatever it names (the
# cache a bundle was packed from). vLLM's handle files are listed with their own
# folder's path taken out of them.
tree_sum() { _sums "$1" own "${2:-}"; }
src_sum() { _sums "$1" any ""; }
_sums() {
	/usr/bin/python3 - "$@" <<'EOF'
import hashlib, json, os, sys
root, mode, visible = sys.argv[1], sys.argv[2], sys.argv[3] == "visible"

def form(names, d):
    return json.dumps({"child_paths": {n: n if d is None else d + "/" + n for n in names}}).encode()

def recorded(data, folder):
    try:
        names = sorted(json.loads(data)["child_paths"])
    except (ValueError, KeyError, TypeError):
        return data
    if mode == "any" or data == form(names, folder):
        return form(names, None)
    return data

rows = []
for dp, dns, fns in os.walk(root):
    for fn in fns:
        p = os.path.join(dp, fn)
        rel = "./" + os.path.relpath(p, root)
        if os.path.islink(p) or (visible and "/." in rel[1:]):
            continue
        with open(p, "rb") as f:
            data = f.read()
        if fn.startswith("__grp__") and fn.endswith(".json"):
            data = recorded(data, os.path.abspath(dp))
        elif fn == "vllm_compile_cache.py": # vLLM's handles name their own folder
            data = data.replace((os.path.abspath(dp) + "/").encode(), b"")
        rows.append((rel.encode(), hashlib.sha256(data).hexdigest()))
for rel, h in sorted(rows):
    print(h + "  " + rel.decode())
EOF
}

# flip_member SRC OUT MEMBER MASK: OUT is the bundle SRC with the byte in the middle of
# MEMBER's data XORed with MASK (a number, 0x40 say).
flip_member() {
	/usr/bin/python3 - "$@" <<'EOF'
import shutil, sys, tarfile
src, out, member, mask = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4], 0)
shutil.copyfile(src, out)
with tarfile.open(src) as t:
    m = t.getmember(member)
with open(out, "r+b") as f:
    f.seek(m.offset_data + m.size // 2)
    c = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([c[0] ^ mask]))
EOF
}

# key_id PUBFILE: the key id a minisign public key file's comment names.
key_id() { sed -n 's/^untrusted comment: minisign public key \([0-9A-F]*\).*/\1/p' "$1"; }

# tally FILE: each line of FILE tells a check a helper program made: "ok" passed, any
# other line (its "FAIL: " left off) the failure.
tally() {
	while IFS= read -r line; do
		case $line in
		ok) ok ;;
		*) bad "${line#FAIL: }" ;;
		esac
	done <"$1"
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}
