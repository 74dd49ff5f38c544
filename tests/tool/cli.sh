# cli.sh - the command line explains itself: each command's own help (CMD --help, -h,
# help CMD), -q and -v taken by every command, option errors that list the valid values
# and point to the command's help, --progress plain lines for logs, public keys given as
# their base64 text, --labels-json with members that are not strings, errors in the
# user's words, and the bash completion.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cpu-pgo.megacache"
CMDS="keygen save run pack sign verify list load export merge diff"
"$MEGACACHE" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB" || bad "pack of a.mcache"

# 1. Each command's help: its usage and an example, not the overview; three ways.
for c in $CMDS; do
	for form in "$c --help" "$c -h" "help $c"; do
		# shellcheck disable=SC2086
		"$MEGACACHE" $form >"$T/out" 2>"$T/err"; rc=$?
		[ $rc = 0 ] && ok || bad "megacache $form exited $rc"
		grep -q "^usage: megacache $c" "$T/out" && ok || bad "megacache $form: no usage line"
		grep -q "^example: megacache $c" "$T/out" && ok || bad "megacache $form: no example"
		grep -q "^commands:" "$T/out" && bad "megacache $form printed the overview" || ok
		[ "$(wc -l < "$T/out")" -lt 40 ] && ok || bad "megacache $form: over 40 lines"
	done
done
run 0 "commands:" --help
run 0 "commands:" help
run 2 "unknown command 'bogus'" help bogus

# 2. -q and -v, short and long, taken by every command (its help, then a run).
for c in $CMDS; do
	for o in -q --quiet -v --verbose; do
		"$MEGACACHE" "$c" "$o" --help >/dev/null 2>&1 && ok || bad "$c $o not taken"
	done
done
run 0 "" verify -v "$T/a.mcache" -p "$PUB"
run 0 "" list -v "$T/a.mcache"
run 0 "" load -v "$T/a.mcache" -p "$PUB" --cache-dir "$T/c1"
n=$(grep -c '^installed ' "$T/out")
[ "$n" = 7 ] && ok || bad "load -v: $n lines of installed artifacts, expected 7"
run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c2"
grep -q '^installed ' "$T/out" && bad "load without -v listed artifacts" || ok
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
SRC=$(dirname "$(find "$T/src" -type d -name fxgraph | head -1)")
run 0 "" pack -v -o "$T/d.mcache" -s "$SEC" --from-dir "$SRC"
grep -q '^recorded fxgraph/' "$T/err" && ok || bad "pack -v: no line per file recorded"
run 0 "" pack -o "$T/e.mcache" -s "$SEC" --from-dir "$SRC"
grep -q '^recorded ' "$T/err" && bad "pack without -v listed files" || ok

# 3. Option errors: the valid values, and the command's own help.
run 2 "the types are: inductor, aot_autograd" load "$T/a.mcache" -p "$PUB" --types inductor,bogus \
	--cache-dir "$T/c3"
[ -e "$T/c3" ] && bad "load with a bad --types wrote $T/c3" || ok
run 2 "takes 2.7 or current" export "$T/a.mcache" --torch "$T/x.bin" --torch-format 3 -p "$PUB"
run 2 "Try 'megacache load --help'." load --bogus
run 2 "Try 'megacache pack --help'." pack --level x -o "$T/y.mcache"
run 2 "Try 'megacache --help'." bogus

# 8. --progress plain: lines on a pipe, at most one per 5%; none and -q: nothing.
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress plain
grep -qx 'verify: 100%' "$T/err" && ok || bad "--progress plain: no 'verify: 100%' line"
n=$(grep -c '^verify: [0-9]*%$' "$T/err")
[ "$n" -ge 2 ] && [ "$n" -le 21 ] && ok || bad "--progress plain: $n lines"
grep -q "$(printf '\r')" "$T/err" && bad "--progress plain wrote a carriage return" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress=none
[ -s "$T/err" ] && bad "--progress none: wrote $(cat "$T/err")" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress=plain -q
[ -s "$T/err" ] && bad "--progress plain -q: wrote $(cat "$T/err")" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB"
[ -s "$T/err" ] && bad "no --progress, not a terminal: wrote $(cat "$T/err")" || ok
run 2 "--progress takes tty, plain or none, not 'bogus'" verify "$T/a.mcache" -p "$PUB" --progress bogus

# 5. A public key given as its base64 text.
run 0 "OK" verify "$T/a.mcache" -p "$(tail -n 1 "$PUB")"

finish
