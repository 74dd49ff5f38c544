# lib.sh - shared by the tool-level tests: a scratch folder under the build tree,
# assertions that count, and the closing line.
set -u
: "${MC_SRCDIR:?run through make check}" "${MC_BUILDDIR:?}" "${MEGACACHE:?}"
NAME=$(basename "$0" .sh)
T="$MC_BUILDDIR/tests/tmp/$NAME"
rm -rf "$T"
mkdir -p "$T"
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

# Lists a tree as "path size sha256" lines, to compare trees byte for byte.
tree_sum() {
	(cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}
