# replaced.sh - load tells a file it wrote where none was (installed) from one it wrote
# over a stale file (replaced) and one it left alone (unchanged): in the summary, per
# type, per artifact in --json, in a dry run, in list --explain and in run.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
run 0 "" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$DATA/mlp-cuda.megacache"
STALE=ig/4284062ea9a84465a56e21b40068c15a3f8fb827c0ab27e61d71153e3e3fadcc.best_config
SAME=iz/37485e163d3fdfeb22e810e79f9a6473de5b5d78699ebad9014193a2efa07b44.best_config
run 0 "" load -q "$T/a.mcache" -p "$PUB" --cache-dir "$T/full"

# A cache where one file is stale, one identical, the other 8 missing (their folders kept).
stale_cache() {
	rm -rf "$1"
	cp -r "$T/full" "$1"
	find "$1" -type f ! -path "$1/$SAME" -exec rm {} +
	printf 'stale' > "$1/$STALE"
}

# What load --json and list --explain --json said: the counts, and per artifact
# "<key's last part> <action>" for the two files there.
counts() {
	/usr/bin/python3 - "$T/out" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("%s=%s" % (k, d.get(k)) for k in sys.argv[2:]))
acts = {}
for a in d["artifacts"]:
    acts[a["action"]] = acts.get(a["action"], 0) + 1
    if a["key"].endswith(".best_config") and a["key"][:2] in ("ig", "iz"):
        print(a["key"][:2], a["action"])
print(" ".join("%s:%d" % kv for kv in sorted(acts.items())))
PY
}
expect() { # expect DESCRIPTION WANT...: counts' lines
	desc=$1; shift
	printf '%s\n' "$@" > "$T/want"
	cmp -s "$T/want" "$T/got" && ok || bad "$desc: $(tr '\n' '|' < "$T/got")"
}

stale_cache "$T/c"
# list --explain: the words of each artifact and the totals.
run 0 "8 to install, 1 to replace, 1 already there (signatures not checked)" \
	list "$T/a.mcache" --explain --cache-dir "$T/c"
grep -Eq "autotune +258 B +would replace +$STALE\$" "$T/out" && ok || bad "explain: stale file: $(cat "$T/out")"
grep -Eq "autotune +258 B +unchanged +$SAME\$" "$T/out" && ok || bad "explain: identical file: $(cat "$T/out")"
[ "$(grep -c ' would install ' "$T/out")" = 8 ] && ok || bad "explain: not 8 to install: $(cat "$T/out")"
run 0 "" list "$T/a.mcache" --explain --cache-dir "$T/c" --json
counts would_install would_replace unchanged > "$T/got"
expect "list --explain --json" "would_install=8 would_replace=1 unchanged=1" \
	"ig would_replace" "iz unchanged" "unchanged:1 would_install:8 would_replace:1"

# A dry run says what load would do, and writes nothing.
run 0 "8 files to install, 1 to replace, 1 already there (" load "$T/a.mcache" -p "$PUB" \
	--cache-dir "$T/c" --dry-run
grep -Eq "^  autotune +3 files +.*\(1 to replace, 1 already there\)\$" "$T/out" && ok ||
	bad "dry run: autotune's line: $(cat "$T/out")"
grep -Eq "^would[- ](install|replace) " "$T/out" && bad "dry run without -v: a line per artifact: $(cat "$T/out")" || ok
run 0 "" load -v "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --dry-run
grep -Eq "^would replace +autotune +$STALE\$" "$T/out" && ok || bad "dry run -v: stale file: $(cat "$T/out")"
grep -Eq "^unchanged +autotune +$SAME\$" "$T/out" && ok || bad "dry run -v: identical file: $(cat "$T/out")"
run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --dry-run --json
counts installed replaced unchanged would_install would_replace > "$T/got"
expect "load --dry-run --json" "installed=0 replaced=0 unchanged=1 would_install=8 would_replace=1" \
	"ig would_replace" "iz unchanged" "unchanged:1 would_install:8 would_replace:1"
[ "$(cat "$T/c/$STALE")" = stale ] && ok || bad "the dry run replaced the stale file"

# The load: 8 installed, 1 replaced, 1 unchanged; per type and in the totals.
run 0 "8 files installed, 1 replaced, 1 already there (" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c"
grep -Eq "^  autotune +3 files +.*\(1 replaced, 1 already there\)\$" "$T/out" && ok ||
	bad "load: autotune's line: $(cat "$T/out")"
grep -Eq "^  inductor +4 files +[^(]*\$" "$T/out" && ok || bad "load: inductor's line: $(cat "$T/out")"
cmp -s "$T/full/$STALE" "$T/c/$STALE" && ok || bad "the stale file was not replaced"
stale_cache "$T/c"
run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" --json
counts installed replaced unchanged would_install would_replace > "$T/got"
expect "load --json" "installed=8 replaced=1 unchanged=1 would_install=0 would_replace=0" \
	"ig replaced" "iz unchanged" "installed:8 replaced:1 unchanged:1"
/usr/bin/python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["types"]["autotune"]
sys.exit(not (t["count"] == 3 and t["replaced"] == 1 and t["unchanged"] == 1))' "$T/out" &&
	ok || bad "load --json: autotune's sums: $(cat "$T/out")"

# run: the same three counts on stderr.
stale_cache "$T/c"
"$MEGACACHE" run -b "$T/a.mcache" -p "$PUB" --cache-dir "$T/c" -- true >"$T/out" 2>"$T/err" &&
	ok || bad "run: $(cat "$T/err")"
grep -qxF "megacache: warmed $T/a.mcache: 8 files installed, 1 replaced, 1 already there" "$T/err" &&
	ok || bad "run's report: $(cat "$T/err")"
finish
