# selection.sh - a load of some types (--types) reads and checks every block, as verify
# does (SPEC.md sections 4 and 12.4): a bundle whose only damage lies in a block that
# holds none of the selected artifacts is refused by every load, from a file or a pipe,
# and installs nothing. The same bundle repaired loads the selected type alone.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
BAD="$MC_SRCDIR/format/vectors/v2-flip-other-block.mcache"
MSG="content does not match its hash"

run 1 "$MSG" verify "$BAD" -p "$PUB"
run 1 "$MSG" load "$BAD" -p "$PUB" --cache-dir "$T/all"
run 1 "$MSG" load "$BAD" -p "$PUB" --cache-dir "$T/pgo" --types pgo
run 1 "$MSG" load "$BAD" -p "$PUB" --cache-dir "$T/dry" --types pgo --dry-run
run 1 "$MSG" load "$BAD" -p "$PUB" --cache-dir "$T/tune" --types autotune
cat "$BAD" | "$MEGACACHE" load - -p "$PUB" --cache-dir "$T/pipe" --types pgo >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "$MSG" "$T/err" && ok || bad "load --types pgo from a pipe: exit $r: $(cat "$T/err")"
for d in all pgo dry tune pipe; do
	[ ! -e "$T/$d" ] && ok || bad "a refused load of some types left $(find "$T/$d" | head -3)"
done

# The byte changed back (the middle of blocks/0, which holds the autotune config): the
# selection loads, and installs the pgo probe alone.
flip_member "$BAD" "$T/good.mcache" blocks/0 0x01
run 0 "" verify "$T/good.mcache" -p "$PUB"
run 0 "" load "$T/good.mcache" -p "$PUB" --cache-dir "$T/good" --types pgo
files=$(cd "$T/good" && find . -type f | sort | tr '\n' ' ')
[ "$files" = "./dynamo/code_state_megacache-probe_None_.pkl " ] && ok ||
	bad "load --types pgo of the repaired bundle installed: $files"
finish
