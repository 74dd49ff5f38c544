# usedbundle.sh - run --save-used: a signed bundle of what the job used of the caches,
# the loaded files it read and the files it wrote, each with the rest of its unit (a
# Triton kernel's folder, the kernel code an FX graph entry names), and nothing else;
# files the caches held before the run are watched too; a job that used nothing writes
# nothing; and files whose reads cannot be seen (a noatime mount, overlayfs lower files)
# make it refuse, naming why, unless --save-used-keep-unseen keeps them.
. "$(dirname "$0")/lib.sh"
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME TEMP TMP
export HOME="$T/home" TMPDIR="$T/tmp"
mkdir -p "$HOME" "$TMPDIR"
umask 022
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
SRC="$T/cache_mlp_cold"
B="$T/b.mcache"
"$MEGACACHE" keygen -q -W -f -p "$T/k.pub" -s "$T/k.key"
run 0 "" pack -q -o "$B" -s "$T/k.key" --from-dir "$SRC"
SCHEMA="$MC_SRCDIR/doc/json-schema.json"
KERNEL=4EZKWCJAMJOFUBJSA7CVHLDBLWWYSLPH5NKI6ZRGKA6Z2VZHQQCQ # 8 files
FX=fxgraph/ko/fkoy5kpu5lpfwjb4gqjg7cvgsvicbqut2w7ot5lgauhvu6e43q27
FXFILE="$FX/$(basename "$SRC/$FX"/*)"
# keys BUNDLE: its artifacts as sorted "type key" lines
keys() {
	"$MEGACACHE" list --json "$1" | /usr/bin/python3 -c 'import json, sys
for a in sorted((a["type"], a["key"]) for a in json.load(sys.stdin)["artifacts"]):
    print(*a)'
}
# The kernel code the FX entry names: the 52-character names in it that are files here.
names=$(grep -aoE 'c[a-z2-7]{51}' "$SRC/$FX"/* | sort -u)
code=$(for n in $names; do for f in "$SRC"/??/"$n".*; do [ -f "$f" ] && echo "kernel_code ${f#"$SRC"/}"; done; done)
[ "$(printf '%s\n' "$code" | grep -c .)" = 4 ] && ok || bad "the FX entry names $(printf '%s\n' "$code" | grep -c .) kernel code files here, not 4: $code"

# The job reads one FX graph entry and one file of one Triton kernel, and writes a
# kernel code file and replaces an autotune result it did not read.
job='C=$0
cat "$C/'"$FX"'"/* "$C/triton/0/$1"/*.json >/dev/null
mkdir -p "$C/zz"
echo "print(1)" >"$C/zz/cjobnew.py"
echo "{}" >"$C/vu/new.tmp" && mv "$C/vu/new.tmp" "$C/vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"'
U="$T/used.mcache"
run 0 "" run -b "$B" -p "$T/k.pub" --cache-dir "$T/c" --save-used "$U" -s "$T/k.key" -- \
	sh -c "$job" "$T/c" "$KERNEL"
line="megacache: saved 15 used artifacts (565.5 kB) into $U; 140 in the caches left out"
grep -qxF "$line" "$T/err" && ok || bad "save-used: no line '$line': $(cat "$T/err")"
{
	echo "autotune vu/3c94721ce31cf8b3349d5a8a98d5c9c17a2d92edbef10c78ff797fc5c6a743bb.best_config"
	echo "inductor ${FXFILE#fxgraph/??/}"
	printf '%s\n' "$code"
	echo "kernel_code zz/cjobnew.py"
	for f in "$SRC/triton/0/$KERNEL"/*; do echo "triton 0/$KERNEL/${f##*/}"; done
} | sort >"$T/want"
keys "$U" >"$T/got"
cmp -s "$T/want" "$T/got" && ok || bad "save-used: artifacts: $(diff "$T/want" "$T/got")"
run 0 "" verify -p "$T/k.pub" "$U"
run 0 "label megacache.contents=used" list "$U"
grep -qF "what one job used (run --save-used): for the same job on the same GPU and torch" "$T/out" &&
	ok || bad "list: no word of what the bundle is for: $(cat "$T/out")"

# It loads alone into a fresh folder: the kernel whole, its group file naming where it
# landed, the bytes of what the job read as they were.
run 0 "" load -q -p "$T/k.pub" --cache-dir "$T/fresh" "$U"
for f in "$FXFILE" "triton/0/$KERNEL/triton_poi_fused_add_addmm_2.cubin"; do
	cmp -s "$SRC/$f" "$T/fresh/$f" && ok || bad "load of the used bundle: $f differs"
done
grp="$T/fresh/triton/0/$KERNEL/__grp__triton_poi_fused_add_addmm_2.json"
[ "$(cat "$grp")" = "$(grp_form "$grp" "$T/fresh/triton/0/$KERNEL")" ] && ok ||
	bad "load of the used bundle: the group file does not name its folder: $(cat "$grp")"
[ "$(find "$T/fresh" -type f | wc -l)" = 15 ] && ok || bad "load of the used bundle: $(find "$T/fresh" -type f | wc -l) files, not 15"

# --json-file: the save_used object, valid against the schema.
run 0 "" run -b "$B" -p "$T/k.pub" --cache-dir "$T/c2" --save-used "$T/u2.mcache" -s "$T/k.key" \
	--json-file "$T/r.json" -- sh -c "$job" "$T/c2" "$KERNEL"
/usr/bin/python3 - "$SCHEMA" "$T/r.json" "$T/u2.mcache" <<'EOF' && ok || bad "run --json-file: save_used: $(cat "$T/r.json")"
import json, sys
import jsonschema
schema, path, out = sys.argv[1:]
j = json.load(open(path))
jsonschema.Draft202012Validator(json.load(open(schema))).validate(j)
s = j["save_used"]
assert s == {"output": out, "written": True, "artifact_count": 15, "bytes": s["bytes"],
             "left_out": 140, "kept_unseen": 0, "signature_count": 1, "signed": True}, s
assert s["bytes"] > 500000 and j["save"] is None and j["error"] is None, j
EOF

# A cache the run did not load (a folder there from before, no -b): its files are
# watched as well; the job reads one kernel, and only that kernel is saved.
run 0 "" run --cache-dir "$T/c" --save-used "$T/u3.mcache" -s "$T/k.key" -- \
	sh -c 'cat "$0"/*.ptx >/dev/null' "$T/c/triton/0/$KERNEL"
line="megacache: saved 8 used artifacts (36.9 kB) into $T/u3.mcache; 147 in the caches left out"
grep -qxF "$line" "$T/err" && ok || bad "no bundle loaded: no line '$line': $(cat "$T/err")"
[ "$(keys "$T/u3.mcache" | grep -c "^triton 0/$KERNEL/")" = 8 ] && ok || bad "no bundle loaded: $(keys "$T/u3.mcache")"

# A job that uses nothing: nothing written.
run 0 "" run -b "$B" -p "$T/k.pub" --cache-dir "$T/c" --save-used "$T/u4.mcache" -s "$T/k.key" -- true
grep -qxF "megacache: the job used nothing of the caches; $T/u4.mcache not written" "$T/err" &&
	ok || bad "a job that used nothing: $(cat "$T/err")"
[ ! -e "$T/u4.mcache" ] && ok || bad "a job that used nothing: $T/u4.mcache written"
# A job that fails used only part of what it needs: nothing written, its status passed on.
run 3 "megacache: $T/u4.mcache not written: the job did not succeed" \
	run -b "$B" -p "$T/k.pub" --cache-dir "$T/c" --save-used "$T/u4.mcache" -s "$T/k.key" -- \
	sh -c 'cat "$0/'"$FXFILE"'"; exit 3' "$T/c"
[ ! -e "$T/u4.mcache" ] && ok || bad "a job that failed: $T/u4.mcache written"

# Options that do not go together.
run 2 "--save-used-keep-unseen applies to --save-used" run --save-used-keep-unseen -- true
run 2 "--save-to and --save-used name one file" run --save-to "$T/x" --save-used "$T/x" -- true
run 2 "--save-used" run --save-used - -- true

# Reads that cannot be seen. Both cases need root: a tmpfs mounted noatime, and an
# overlay whose lower layer holds the cache.
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: a noatime mount and overlayfs need root"
	finish
fi
mkdir -p "$T/na"
if mount -t tmpfs -o noatime,size=64m tmpfs "$T/na" 2>/dev/null; then
	trap 'umount "$T/na"' EXIT
	run 2 "" run -b "$B" -p "$T/k.pub" --cache-dir "$T/na/c" --save-used "$T/u5.mcache" \
		-s "$T/k.key" --json-file "$T/r5.json" -- sh -c "$job" "$T/na/c" "$KERNEL"
	msg="megacache: $T/u5.mcache not written: the job's reads of 154 files in the cache folders could not be seen (154 on a noatime mount), so what it used of them is not known; --save-used-keep-unseen keeps them"
	grep -qxF "$msg" "$T/err" && ok || bad "noatime: no line '$msg': $(cat "$T/err")"
	[ ! -e "$T/u5.mcache" ] && ok || bad "noatime: $T/u5.mcache written"
	/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
assert (j["error"], j["exit"], j["save_used"]["written"]) == ("not_seen", 2, False), j' "$T/r5.json" &&
		ok || bad "noatime: JSON: $(cat "$T/r5.json")"
	rm -rf "$T/na/c"
	run 0 "" run -b "$B" -p "$T/k.pub" --cache-dir "$T/na/c" --save-used "$T/u5.mcache" \
		--save-used-keep-unseen -s "$T/k.key" -- sh -c "$job" "$T/na/c" "$KERNEL"
	grep -qxF "megacache: warning: $T/u5.mcache keeps 154 files whose reads could not be seen" "$T/err" &&
		ok || bad "noatime, kept: no warning: $(cat "$T/err")"
	[ "$(keys "$T/u5.mcache" | wc -l)" = 155 ] && ok || bad "noatime, kept: $(keys "$T/u5.mcache" | wc -l) artifacts, not 155"
	umount "$T/na" && trap - EXIT
else
	echo "SKIP: a tmpfs cannot be mounted here: no noatime case"
fi

# An image's cache in an overlay's lower layer: the load finds every file in place but
# the 16 group files (which name the lower folder), and overlayfs keeps no read's access
# time of a lower file.
mkdir -p "$T/ov/lower" "$T/ov/upper" "$T/ov/work" "$T/ov/m"
run 0 "" load -q -p "$T/k.pub" --cache-dir "$T/ov/lower/c" "$B"
if mount -t overlay overlay -o "lowerdir=$T/ov/lower,upperdir=$T/ov/upper,workdir=$T/ov/work" \
	"$T/ov/m" 2>/dev/null; then
	trap 'umount "$T/ov/m"' EXIT
	run 2 "could not be seen (138 found in place on overlayfs)" run -b "$B" -p "$T/k.pub" --cache-dir "$T/ov/m/c" \
		--save-used "$T/u6.mcache" -s "$T/k.key" -- sh -c "$job" "$T/ov/m/c" "$KERNEL"
	[ ! -e "$T/u6.mcache" ] && ok || bad "overlayfs: $T/u6.mcache written"
	# No bundle: every file there is found in place, the job's two of the run before too.
	run 0 "" run --cache-dir "$T/ov/m/c" --save-used "$T/u6.mcache" --save-used-keep-unseen \
		-s "$T/k.key" -- sh -c 'cat "$0"/*.ptx >/dev/null' "$T/ov/m/c/triton/0/$KERNEL"
	grep -qF "keeps 155 files whose reads could not be seen" "$T/err" && ok ||
		bad "overlayfs, kept: no warning: $(cat "$T/err")"
	[ "$(keys "$T/u6.mcache" | wc -l)" = 155 ] && ok || bad "overlayfs, kept: $(keys "$T/u6.mcache" | wc -l) artifacts, not 155"
	umount "$T/ov/m" && trap - EXIT
else
	echo "SKIP: overlayfs cannot be mounted here: no overlay case"
fi

finish
