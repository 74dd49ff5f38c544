# cli.sh - the command line explains itself: each command's own help (CMD --help, -h,
# help CMD), -q and -v taken by every command, option errors that list the valid values
# and point to the command's help, --progress plain lines for logs, public keys given as
# their base64 text, --labels-json with members that are not strings, errors in the
# user's words, and the bash completion.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cpu-pgo.megacache"
CMDS="keygen save run pack sign verify list load export merge diff push pull audit"
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
# A dry run is told in a load's shape, a line per type and the totals; a line per
# artifact only with -v, in the words of a load's.
"$MEGACACHE" list "$T/e.mcache" --json | /usr/bin/python3 -c '
import json, sys
a = json.load(sys.stdin)["artifacts"]
print(len(a), len({x["type"] for x in a}))' >"$T/counts"
read -r narts ntypes <"$T/counts"
run 0 "" load "$T/e.mcache" -p "$PUB" --cache-dir "$T/c4" --dry-run
[ "$(wc -l <"$T/out")" = $((ntypes + 2)) ] && [ "$(head -n 1 "$T/out")" = "would warm $T/e.mcache into $T/c4" ] &&
	[ "$(tail -n 1 "$T/out" | cut -d'(' -f1)" = "$narts files to install, 0 to replace, 0 already there " ] &&
	ok || bad "load --dry-run of $narts artifacts of $ntypes types: $(head -c 600 "$T/out")"
run 0 "" load -v "$T/e.mcache" -p "$PUB" --cache-dir "$T/c4" --dry-run
[ "$(grep -c '^would install ' "$T/out")" = "$narts" ] && [ "$(wc -l <"$T/out")" = $((narts + ntypes + 2)) ] &&
	ok || bad "load -v --dry-run: not a line per artifact: $(head -c 600 "$T/out")"
[ ! -e "$T/c4" ] && ok || bad "load --dry-run made $T/c4"

# 3. Option errors: the valid values, and the command's own help.
run 2 "the types are: inductor, aot_autograd" load "$T/a.mcache" -p "$PUB" --types inductor,bogus \
	--cache-dir "$T/c3"
[ -e "$T/c3" ] && bad "load with a bad --types wrote $T/c3" || ok
run 2 "takes 2.7 or current" export "$T/a.mcache" --torch "$T/x.bin" --torch-format 3 -p "$PUB"
run 2 "Try 'megacache load --help'." load --bogus
run 2 "Try 'megacache pack --help'." pack --level x -o "$T/y.mcache"
run 2 "pack needs at least one --from-torch BLOB, --from-dir DIR, --from-triton-dir DIR or --from-vllm-dir DIR" \
	pack -o "$T/y.mcache"
run 2 "Try 'megacache --help'." bogus

# 8. --progress plain: lines on a pipe, at most one per 5%; none and -q: nothing.
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress plain
grep -qx 'verify: 100%' "$T/err" && ok || bad "--progress plain: no 'verify: 100%' line"
n=$(grep -c '^verify: [0-9]*%$' "$T/err")
[ "$n" -ge 1 ] && [ "$n" -le 21 ] && ok || bad "--progress plain: $n lines"
awk -F'[ %]' '/^verify: / { if ($2 % 5 != 0 || $2 <= last) bad = 1; last = $2 } END { exit bad }' \
	last=-1 "$T/err" && ok || bad "--progress plain: not rising steps of 5%: $(cat "$T/err")"
grep -q "$(printf '\r')" "$T/err" && bad "--progress plain wrote a carriage return" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress=none
[ -s "$T/err" ] && bad "--progress none: wrote $(cat "$T/err")" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB" --progress=plain -q
[ -s "$T/err" ] && bad "--progress plain -q: wrote $(cat "$T/err")" || ok
run 0 "" verify "$T/a.mcache" -p "$PUB"
[ -s "$T/err" ] && bad "no --progress, not a terminal: wrote $(cat "$T/err")" || ok
run 2 "--progress takes tty, plain or none, not 'bogus'" verify "$T/a.mcache" -p "$PUB" --progress bogus
# The writing of a bundle is told in the command's word: pack's "pack", save's and run's
# (its --save-to) "save", merge's "merge"; verify's reading "verify", and a load's putting
# in place of what it verified "install".
phases() { sed -n 's/^\([a-z]*\): [0-9]*%$/\1/p' "$T/err" | uniq | tr '\n' ' '; }
run 0 "" pack -o "$T/p.mcache" --from-dir "$SRC" -s "$SEC" --progress plain
[ "$(phases)" = "pack " ] && ok || bad "pack --progress plain: phases $(phases)"
run 0 "" save -o "$T/s.mcache" --cache-dir "$SRC" --triton-dir "$T/none" -s "$SEC" --progress plain
[ "$(phases)" = "save " ] && ok || bad "save --progress plain: phases $(phases)"
run 0 "" run -b "$T/a.mcache" -p "$PUB" --cache-dir "$T/rc" --triton-dir "$T/none" --save-to "$T/r.mcache" \
	-s "$SEC" --progress plain -- sh -c 'mkdir -p "$0/zz" && echo "print(3)" > "$0/zz/cprogress.py"' "$T/rc"
[ "$(phases)" = "verify install save " ] && ok || bad "run --progress plain: phases $(phases)"
run 0 "" merge -o "$T/m.mcache" "$T/s.mcache" "$T/r.mcache" -p "$PUB" -s "$SEC" --progress plain
[ "$(phases | tr ' ' '\n' | sort -u | tr '\n' ' ')" = "merge verify " ] && ok ||
	bad "merge --progress plain: phases $(phases)"

# 5. A public key given as its base64 text.
run 0 "OK" verify "$T/a.mcache" -p "$(tail -n 1 "$PUB")"

# 6. --labels-json: the string members recorded, each other one skipped with a note.
printf '{"torch": "2.11", "gpus": 8, "ok": true, "none": null, "list": [1]}' >"$T/facts.json"
run 0 "" pack -o "$T/l.mcache" --from-torch "$BLOB" --labels-json "$T/facts.json"
for m in gpus ok none list; do
	grep -qF -- "--labels-json $T/facts.json: skipped $m: not a string" "$T/err" && ok ||
		bad "--labels-json: no note for $m"
done
run 0 "label torch=2.11" list "$T/l.mcache"
grep -q "label gpus" "$T/out" && bad "--labels-json recorded a number" || ok
run 0 "" pack -q -o "$T/l2.mcache" --from-torch "$BLOB" --labels-json "$T/facts.json"
[ -s "$T/err" ] && bad "--labels-json -q: wrote $(cat "$T/err")" || ok

# 7. Errors in the user's words: a missing folder for an output, keygen over a key.
run 2 "cannot write $T/no/x.mcache: folder $T/no does not exist" pack -o "$T/no/x.mcache" \
	-s "$SEC" --from-torch "$BLOB"
run 2 "cannot write $T/no/x.bin: folder $T/no does not exist" export "$T/a.mcache" \
	--torch "$T/no/x.bin" -p "$PUB"
run 2 "cannot write $T/no/m.mcache: folder $T/no does not exist" merge -o "$T/no/m.mcache" \
	"$T/a.mcache" -p "$PUB" --unsigned
run 2 "cannot write $T/no/s.mcache: folder $T/no does not exist" sign "$T/a.mcache" -s "$SEC" -p "$PUB" \
	-o "$T/no/s.mcache"
run 2 "cannot write $T/no/r.mcache: folder $T/no does not exist" run --save-to "$T/no/r.mcache" \
	-- true
run 2 "cannot write $T/no/k.pub: folder $T/no does not exist" keygen -W -p "$T/no/k.pub" \
	-s "$T/k.key"
run 2 "$T/a.mcache is not a folder" pack -o "$T/a.mcache/x" --from-torch "$BLOB"
[ -e "$T/no" ] && bad "an output's missing folder was made" || ok
run 0 "" keygen -q -W -p "$T/k.pub" -s "$T/k.key"
run 2 "add -f to replace the key pair" keygen -W -p "$T/k.pub" -s "$T/k.key"
run 0 "" keygen -q -W -f -p "$T/k.pub" -s "$T/k.key"
run 2 "the cache folder for inductor: empty" load "$T/a.mcache" -p "$PUB" --cache-dir ""
grep -q "tier" "$T/err" && bad "an error speaks of tiers: $(cat "$T/err")" || ok

# 5. Help and man page agree: every long option a command's help names is in the man
# page; it tells of --progress, --version, inline keys and each command's help.
MAN="$MC_SRCDIR/doc/megacache.1"
for c in $CMDS; do
	for o in $("$MEGACACHE" "$c" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
		m=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
		grep -q -- "$m" "$MAN" && ok || bad "$c --help names $o; the man page does not"
	done
done
for w in 'progress " WHEN"' 'B \-\-version' 'base64 line' 'megacache help load'; do
	grep -qF -- "$w" "$MAN" && ok || bad "the man page lacks $w"
done
# --threads: the commands whose work it spreads, the same in both.
"$MEGACACHE" --help | grep -qF "worker threads for pack, verify, load, push and pull" &&
	grep -qxF ".BR pull :" "$MAN" && ok || bad "megacache --help and the man page differ on --threads"

# Long options by their whole names only: any start of one, as getopt_long would take it
# (verify --insecure for --insecure-no-verify), is a usage error (exit 2) that names the
# whole name, never run. Every long option of every command's help, one letter short.
for c in $CMDS; do
	"$MEGACACHE" "$c" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u >"$T/longs"
	while read -r o; do
		short=${o%?}
		grep -qx -- "$short" "$T/longs" && continue # itself an option of c
		"$MEGACACHE" "$c" "$short" >"$T/out" 2>"$T/err" </dev/null; rc=$?
		[ "$rc" = 2 ] && ok || bad "megacache $c $short (for $o) exited $rc: $(head -c 300 "$T/err")"
	done <"$T/longs"
done
run 2 "unknown option '--insecure' (options are never abbreviated: did you mean --insecure-no-verify?)" \
	verify "$T/a.mcache" -p "$PUB" --insecure
run 2 "unknown option '--expl' (options are never abbreviated: did you mean --explain?)" \
	list "$T/a.mcache" --expl
run 2 "unknown option '--label-from' (options are never abbreviated: did you mean --label-from-env?)" \
	pack -o "$T/x.mcache" --label-from=HOME --from-torch "$BLOB"
[ ! -e "$T/x.mcache" ] && ok || bad "an abbreviated option wrote a bundle"

# The overview names each option once per command (merge's [--json] was there twice),
# and a public key's base64 line as it starts ("RW", then the algorithm's and the key
# id's bytes: RWQ..., RWT...), not "RWS".
"$MEGACACHE" --help | awk '/^  merge /{m=1; next} /^  [a-z]/{m=0} m && /\[--json\]/{n++} END {exit n != 1}' &&
	ok || bad "megacache --help: merge's [--json] not once"
"$MEGACACHE" --help | grep -q "RWS" && bad "megacache --help says public keys start RWS" || ok
sed -n 2p "$PUB" | grep -q "^RW" && "$MEGACACHE" --help | grep -qF "(RW...)" && ok ||
	bad "megacache --help does not say how a public key's line starts"

# Output that cannot be written fails the command (exit 2, said on stderr), never exit 0
# with the report lost: standard output a full device.
for c in "list $T/a.mcache" "verify $T/a.mcache -p $PUB --json" "--help" "--version"; do
	# shellcheck disable=SC2086
	"$MEGACACHE" $c >/dev/full 2>"$T/err"; rc=$?
	[ "$rc" = 2 ] && grep -q "cannot write standard output" "$T/err" && ok ||
		bad "megacache $c >/dev/full exited $rc: $(head -c 300 "$T/err")"
done

finish
