# arguments.sh - what the command line makes of its arguments: "-" as a file is standard
# output where a command can give it its bundle (sign, merge and pull -o -, as pack's),
# and a usage error everywhere else, never a file named "-"; keygen refuses one file for
# both keys, whatever its names; and every usage error under --json, a command named or
# not, is the failure object on standard output.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cpu-pgo.megacache"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
CMDS="keygen save pack sign verify list load export merge diff push pull audit"
export SOURCE_DATE_EPOCH=1700000000
"$MEGACACHE" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB" 2>/dev/null ||
	bad "pack of a.mcache"
mkdir -p "$T/cwd"
cd "$T/cwd" || exit 1

# no_dash WHAT: no file named "-" was made (in the working folder, where "-" would be).
no_dash() {
	[ ! -e ./- ] && ok || { bad "$1 made a file named '-'"; rm -f ./-; }
}

# ---- 3. keygen: one file for both keys is refused, whatever its names ----
run 2 "are one file: the secret key would be lost" keygen -W -f -p "$T/same.k" -s "$T/same.k"
[ ! -e "$T/same.k" ] && ok || bad "keygen -p F -s F wrote F"
run 2 "are one file" keygen -W -p "$T/new.k" -s "$T/cwd/../new.k"
[ ! -e "$T/new.k" ] && ok || bad "keygen -p F -s DIR/../F wrote F"
run 0 "" keygen -W -p "$T/k.pub" -s "$T/k.key"
cp "$T/k.key" "$T/k.key.was"
ln -s "$T/k.key" "$T/link.pub"
ln "$T/k.key" "$T/hard.pub"
for other in "$T/link.pub" "$T/hard.pub"; do
	run 2 "are one file" keygen -W -f -p "$other" -s "$T/k.key"
	check "keygen -f -p $other -s its target left the secret key" cmp -s "$T/k.key" "$T/k.key.was"
done

# ---- 4. a usage error under --json, whatever it is: the failure object on stdout ----
# fails CMD ARGS...: megacache ARGS exits 2, standard output is a failure object valid
# against the schema, its command CMD, its error "usage".
fails() {
	want=$1; shift
	"$MEGACACHE" "$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" = 2 ] && ok || bad "megacache $* exited $got, expected 2"
	if /usr/bin/python3 -c '
import json, sys
import jsonschema
schema, out, cmd = sys.argv[1:]
j = json.load(open(out, encoding="utf-8"))
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
assert j["command"] == cmd and j["ok"] is False and j["error"] == "usage", j
assert j["exit"] == 2 and j["message"].startswith("megacache"), j
' "$SCHEMA" "$T/out" "$want" 2>"$T/perr"; then
		ok
	else
		bad "megacache $*: $(tail -n 1 "$T/perr"): $(head -c 600 "$T/out")"
	fi
}
fails "" --json
fails "" bogus --json
fails "" --json bogus
fails "" help bogus --json
for c in $CMDS; do
	fails "$c" "$c" --json --no-such-option
	fails "$c" "$c" --no-such-option --json
	fails "$c" "$c" --json --threads
	fails "$c" "$c" --json=1
done
fails verify verify "$T/a.mcache" --json

finish
