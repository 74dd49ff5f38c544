# run.sh - the commands around a training run: save records the folders torch and Triton
# use (resolved as they resolve them) and load puts everything back there; run verifies
# and loads, runs a command on the warm caches with signals and exit status passed on,
# then saves only what the command added.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"

# A user's machine: a home, a temp folder, no cache variables.
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME TEMP TMP
export HOME="$T/home" TMPDIR="$T/tmp" LOGNAME=trainer
mkdir -p "$HOME" "$TMPDIR"
IND="$TMPDIR/torchinductor_trainer"
TH="$HOME/.triton/cache"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
cp -a "$T/cache_mlp_cold" "$IND"
# Triton's own cache: a launcher helper and a user kernel.
mkdir -p "$TH/HELPERHASH0" "$TH/USERKERNELHASH"
printf 'ELF helper' > "$TH/HELPERHASH0/cuda_utils.cpython-312-x86_64-linux-gnu.so"
printf 'cubin bytes' > "$TH/USERKERNELHASH/add_kernel.cubin"
printf '{"name": "add_kernel"}' > "$TH/USERKERNELHASH/add_kernel.json"
cp -a "$IND" "$T/ind-orig"
cp -a "$TH" "$T/th-orig"

# save: both folders read and named, nothing to give on the command line.
run 0 "read $IND (torch's cache)" save -o "$T/b.mcache" -s "$SEC"
grep -qF "read $TH (Triton's cache): 3 artifacts" "$T/out" && ok || bad "Triton's cache not read: $(cat "$T/out")"
run 0 "" save -o "$T/dry.mcache" --dry-run --json
[ ! -e "$T/dry.mcache" ] && ok || bad "--dry-run wrote a bundle"
/usr/bin/python3 - "$T/out" "$IND" "$TH" <<'PY' && ok || bad "save --dry-run --json folders wrong: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
f = {x["tier"]: x for x in j["folders"]}
assert f["inductor"]["path"] == sys.argv[2] and f["inductor"]["exists"], f
assert f["triton_home"]["path"] == sys.argv[3] and f["triton_home"]["artifact_count"] == 3, f
assert j["dry_run"] is True and j["artifact_count"] > 100, j
PY
run 0 "" list "$T/b.mcache"
grep -q "^triton_home " "$T/out" && ok || bad "no triton_home artifact listed"

# load with no options puts everything back where it came from.
rm -rf "$IND" "$HOME/.triton"
run 0 "warmed $T/b.mcache into $IND and $TH" load "$T/b.mcache" -p "$PUB"
[ "$(tree_sum "$TH")" = "$(tree_sum "$T/th-orig")" ] && ok || bad "Triton's cache not restored"
# Byte for byte, but Triton's group files: those name where they are (triton_groups.sh).
nogrp() { tree_sum "$1" | grep -v '/__grp__'; }
[ "$(nogrp "$IND")" = "$(nogrp "$T/ind-orig")" ] && ok || bad "inductor cache not restored byte for byte"

# Nothing to save is an error that names the folders.
HOME="$T/nohome" TMPDIR="$T/notmp-parent" run 2 "nothing to save" save -o "$T/none.mcache"
[ ! -e "$T/notmp-parent" ] && ok || bad "save created a missing TMPDIR"
# An unset variable in pack's old idiom gets a clear line, not ': not a folder'.
run 2 "--from-dir: empty path" pack -o "$T/x.mcache" --from-dir ""
# A Triton cache torch reads but pack was not given is warned about.
mkdir -p "$T/tcd/K1"; printf x > "$T/tcd/K1/k.cubin"
TRITON_CACHE_DIR="$T/tcd" run 0 "" pack -o "$T/p.mcache" --from-dir "$IND"
grep -qF "the Triton cache torch reads, $T/tcd" "$T/err" && ok || bad "no warning of an unrecorded TRITON_CACHE_DIR: $(cat "$T/err")"

# run: the command sees the loaded caches; its exit status is passed on.
rm -rf "$IND" "$HOME/.triton"
run 7 "" run -b "$T/b.mcache" -p "$PUB" -- sh -c 'test -d "$0/fxgraph" && test -d "$1" && exit 7' "$IND" "$TH"
grep -qF "warmed $T/b.mcache" "$T/err" && ok || bad "run did not say what it loaded: $(cat "$T/err")"
# Options after the command's name are the command's.
run 3 "" run -- sh -c 'exit 3' -p nothing --json
run 127 "cannot run" run -- "$T/no-such-program"
# A command that cannot start is looked for before anything is loaded: nothing installed.
rm -rf "$IND" "$HOME/.triton"
run 127 "cannot run nosuchcmd-mc: command not found in PATH; nothing was loaded" \
	run -b "$T/b.mcache" -p "$PUB" -- nosuchcmd-mc
run 127 "no such file; nothing was loaded" run -b "$T/b.mcache" -p "$PUB" -- "$T/no-such-program"
run 126 "Permission denied; nothing was loaded" run -b "$T/b.mcache" -p "$PUB" -- "$T/b.mcache"
[ ! -e "$IND" ] && [ ! -e "$HOME/.triton" ] && ok || bad "run loaded for a command that cannot start"
run 0 "" run -q -b "$T/b.mcache" -p "$PUB" -- true
run 2 "run needs a command" run -b "$T/b.mcache" -p "$PUB"
run 2 "needs -p" run -b "$T/b.mcache" -- true

# A bundle that fails verification never runs the command, unless --allow-cold.
cp "$T/b.mcache" "$T/bad.mcache"
printf 'X' | dd of="$T/bad.mcache" bs=1 seek=3000 conv=notrunc 2>/dev/null
run 1 "" run -b "$T/bad.mcache" -p "$PUB" -- touch "$T/ran"
[ ! -e "$T/ran" ] && ok || bad "the command ran on an unverified bundle"
run 0 "" run -b "$T/bad.mcache" -p "$PUB" --allow-cold -- touch "$T/ran"
[ -e "$T/ran" ] && ok || bad "--allow-cold did not run the command"
grep -qF "allow-cold: running without $T/bad.mcache" "$T/err" && ok || bad "--allow-cold did not say so"

# --save-to (or -o): only what the command added, with the diff on stderr.
new="$IND/zz/czznewkernel.py"
run 0 "" run -b "$T/b.mcache" -p "$PUB" -o "$T/next.mcache" -s "$SEC" -- \
	sh -c 'mkdir -p "${0%/*}" && echo "print(1)" > "$0"' "$new"
grep -qF "+ kernel_code" "$T/err" && ok || bad "the new artifact was not listed: $(cat "$T/err")"
run 0 "" list "$T/next.mcache" --json
/usr/bin/python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["artifacts"]; assert [(x["type"], x["key"]) for x in a] == [("kernel_code", "zz/czznewkernel.py")], a' "$T/out" && ok || bad "next.mcache is not just the new artifact: $(head -c 600 "$T/out")"
run 0 "" verify "$T/next.mcache" -p "$PUB"
# Nothing new: no bundle written, and it says so.
run 0 "" run -b "$T/b.mcache" -b "$T/next.mcache" -p "$PUB" --save-to "$T/none2.mcache" -s "$SEC" -- true
[ ! -e "$T/none2.mcache" ] && ok || bad "a bundle was written with nothing new"
grep -qF "nothing new" "$T/err" && ok || bad "run did not say nothing was new"

# --cache-dir and --triton-dir are exported to the command, made absolute.
(cd "$T" && "$MEGACACHE" run --cache-dir rel-ind --triton-dir rel-tri -- sh -c 'echo "$TORCHINDUCTOR_CACHE_DIR $TRITON_CACHE_DIR" > env.txt')
[ "$(cat "$T/env.txt")" = "$T/rel-ind $T/rel-tri" ] && ok || bad "child environment: $(cat "$T/env.txt")"

# A signal sent to megacache reaches the command; its end is megacache's.
"$MEGACACHE" run -- sh -c 'trap "echo got > $0; exit 42" TERM; echo $$ > $0.pid; while :; do sleep 0.05; done' "$T/sig" &
mc=$!
for i in $(seq 100); do [ -s "$T/sig.pid" ] && break; sleep 0.05; done
kill -TERM "$mc"
wait "$mc"; st=$?
[ "$st" = 42 ] && ok || bad "run exited $st after SIGTERM, expected the command's 42"
[ "$(cat "$T/sig" 2>/dev/null)" = got ] && ok || bad "the command did not get SIGTERM"
# A command killed by a signal: megacache ends by the same signal.
"$MEGACACHE" run -- sh -c 'kill -KILL $$'; st=$?
[ "$st" = 137 ] && ok || bad "run exited $st for a command killed by SIGKILL, expected 137"

finish
