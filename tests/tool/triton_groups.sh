# triton_groups.sh - Triton's group files (__grp__<kernel>.json) name the kernel's files
# by absolute path, and Triton takes only those that exist: a bundle records them with
# bare names, and a load writes them naming where the kernel landed, so a cache
# installed in another folder is found (SPEC.md section 4).
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
export SOURCE_DATE_EPOCH=1700000000
H=VTAVU5NVGPUS2EEVSN5YOQWW4UFVBQ6S7FGQEU5QNIQFJ3KQL6GQ
K=triton_poi_fused_add_0
G="__grp__$K.json"
# The group file as Python writes it for names at folder dir (dir "": bare names):
# json_dumps DIR NAME...
json_dumps() {
	/usr/bin/python3 -c 'import json, sys
d = sys.argv[1]
print(json.dumps({"child_paths": {n: d + "/" + n if d else n for n in sys.argv[2:]}}), end="")' "$@"
}
NAMES="$K.source $K.ttir $K.ttgir $K.llir $K.ptx $K.cubin $K.json" # Triton's order
SORTED="$K.cubin $K.json $K.llir $K.ptx $K.source $K.ttgir $K.ttir"

# A kernel folder as Triton leaves it in cache folder $1, with a group file naming $1.
kernel() {
	mkdir -p "$1/$H"
	for n in $NAMES; do printf '%s\n' "$n" > "$1/$H/$n"; done
	# shellcheck disable=SC2086
	json_dumps "$1/$H" $NAMES > "$1/$H/$G"
}
A="$T/a"
kernel "$A"
C="$T/cache"
kernel "$C/triton/0"

# Packed from a flat Triton cache and from a cache dir: the group file is recorded in
# one form (bare names, sorted), whichever folder it named; the bundles are the same.
run 0 "" pack -q -o "$T/flat.mcache" -s "$SEC" --from-triton-dir "$A"
run 0 "" pack -q -o "$T/dir.mcache" -s "$SEC" --from-dir "$C"
check "the same kernel packed from two folders gives the same bundle" \
	cmp -s "$T/flat.mcache" "$T/dir.mcache"
# shellcheck disable=SC2086
rec=$(json_dumps "" $SORTED)
run 0 "" list "$T/flat.mcache" --json
size=$(/usr/bin/python3 -c 'import json, sys
for a in json.load(open(sys.argv[1]))["artifacts"]:
    if a["key"] == sys.argv[2]:
        print(a["size"])' "$T/out" "0/$H/$G")
[ "$size" = "${#rec}" ] && ok || bad "list --json: group file of $size bytes, the recorded form has ${#rec}"
rm -rf "$A" "$C"

# Loaded into another folder, through a relative --triton-dir: the file names that
# folder's absolute path, byte for byte as Triton would have written it there.
B="$T/b"
mkdir -p "$B"
(cd "$T" && "$MEGACACHE" load flat.mcache -p "$PUB" --triton-dir ./x/..//b/ >"$T/out" 2>"$T/err") &&
	ok || bad "load into b failed: $(cat "$T/err")"
# shellcheck disable=SC2086
json_dumps "$B/$H" $SORTED > "$T/want"
check "group file written for b" cmp -s "$T/want" "$B/$H/$G"
for n in $NAMES; do
	[ -f "$B/$H/$n" ] && ok || bad "$n not installed"
done
# Triton's CacheManager.get_group(): json.load, and only children whose path exists.
found=$(cd / && /usr/bin/python3 -c 'import json, os, sys
with open(sys.argv[1]) as f:
    paths = json.load(f)["child_paths"]
print(len({n: p for n, p in paths.items() if os.path.exists(p)}))' "$B/$H/$G")
[ "$found" = 7 ] && ok || bad "Triton would find $found of the 7 files of the kernel"

# A second load finds everything in place: the group file too.
run 0 "" load "$T/flat.mcache" -p "$PUB" --triton-dir "$B" --json
"$MC_BUILDDIR/tests/jsoncheck" < "$T/out" && ok || bad "load --json is not JSON"
counts=$(/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
g = [a["action"] for a in j["artifacts"] if a["key"].endswith(sys.argv[2])]
print(j["installed"], j["unchanged"], " ".join(g))' "$T/out" "$G")
[ "$counts" = "0 8 unchanged" ] && ok || bad "second load: installed, unchanged, group file: $counts"
run 0 "0 to install, 0 to replace, 8 already there" list "$T/flat.mcache" --explain --triton-dir "$B"

# A group file naming another folder (written by an older loader) is rewritten, alone.
# shellcheck disable=SC2086
json_dumps "/elsewhere/$H" $NAMES > "$B/$H/$G"
run 0 "0 files installed, 1 replaced, 7 already there" load "$T/flat.mcache" -p "$PUB" --triton-dir "$B"
check "stale group file rewritten for b" cmp -s "$T/want" "$B/$H/$G"

# Through --cache-dir: the kernel lands in <cache dir>/triton/0 and names it.
run 0 "" load "$T/dir.mcache" -p "$PUB" --cache-dir "$T/d"
# shellcheck disable=SC2086
json_dumps "$T/d/triton/0/$H" $SORTED > "$T/want-d"
check "group file written for the cache dir" cmp -s "$T/want-d" "$T/d/triton/0/$H/$G"

# A group file in no form Triton writes is packed and loaded as it is.
mkdir -p "$T/odd/$H"
printf '{"child_paths": {"%s": "/x/%s"}, "extra": 1}' "$K.cubin" "$K.cubin" > "$T/odd/$H/$G"
run 0 "" pack -q -o "$T/odd.mcache" --from-triton-dir "$T/odd"
run 0 "" load "$T/odd.mcache" --insecure-no-verify --triton-dir "$T/odd2"
check "an unknown form kept byte for byte" cmp -s "$T/odd/$H/$G" "$T/odd2/$H/$G"

# The format vector (format/vectors/README.md): every form a loader reads is written
# for the folder its kernel lands in, and the file in no such form as it is.
V="$T/v/triton/0"
run 0 "" load "$MC_SRCDIR/format/vectors/valid-triton-groups.mcache" -p "$PUB" --cache-dir "$T/v"
json_dumps "$V/kern" a.cubin a.json > "$T/want-a"
json_dumps "$V/old" b.cubin b.json > "$T/want-b"
json_dumps "$V/list" c.json > "$T/want-c"
printf '{"child_paths": {"d.json": "/x/d.json"}, "version": 1}' > "$T/want-d"
check "vector: recorded form" cmp -s "$T/want-a" "$V/kern/__grp__a.json"
check "vector: absolute form of an older bundle" cmp -s "$T/want-b" "$V/old/__grp__b.json"
check "vector: list form" cmp -s "$T/want-c" "$V/list/__grp__c.json"
check "vector: another form kept" cmp -s "$T/want-d" "$V/odd/__grp__d.json"
finish
