# vllm.sh - vLLM's compile cache (tier vllm): a root of two ranks, with a binary
# artifact, an unpacked artifact folder, the index file and an ahead-of-time compile,
# saved from $VLLM_CACHE_ROOT, listed, and loaded into another root (--vllm-dir) byte
# for byte; files of no vLLM shape reported and left out, or kept on request; a bundle
# with a hostile vLLM key refused; labels vllm.* of what the cache was made for; the
# older adaptor's torch and Triton caches of each rank (vllm_inductor); what a job run
# read of the vLLM files loaded and wrote anew.
. "$(dirname "$0")/lib.sh"
unset VLLM_CACHE_ROOT # this test names vLLM's root itself, each way vLLM finds it
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
SRC="$T/src"

# The tree, in the names vLLM and torch give (a hash of 10 hex, rank_<n>_<m>, a model
# prefix, torch's 51-character base32 names).
# What both trees below are made with: torch-like names, and a file put beneath the root.
cat > "$T/vtree.py" <<'EOF'
import os, sys
root = sys.argv[1]
B = "abcdefghijklmnopqrstuvwxyz234567"
def b32(seed, n=51, a=7, b=13):
    return "".join(B[(seed * a + i * b) % 32] for i in range(n))
def put(rel, data):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
def kernel(kdir, name, cubin): # a Triton kernel's folder, its group file naming it here
    put(f"{kdir}/{name}.cubin", cubin)
    put(f"{kdir}/{name}.json", '{"name": "%s"}' % name)
    put(f"{kdir}/__grp__{name}.json", '{"child_paths": {"%s.cubin": "%s/%s/%s.cubin", '
        '"%s.json": "%s/%s/%s.json"}}' % (name, root, kdir, name, name, root, kdir, name))
EOF
/usr/bin/python3 - "$SRC" "$T" <<'EOF'
import struct, sys, zlib, base64
sys.path.insert(0, sys.argv[2])
from vtree import *
def field(b):
    return struct.pack(">Q", len(b)) + b
def binary_artifact(key):
    body = (field(b"CacheCompiledArtifact") + field(bytes(range(32))) +
            field(base64.b64encode(key.encode())) + field(b"\0\1payload" * 40))
    return struct.pack(">I", zlib.crc32(body)) + body
def torch_tree(base, seed):
    ak, fk = "a" + b32(seed), "f" + b32(seed + 1)
    put(f"{base}/aotautograd/{ak}/{b32(seed + 2)}", b"aot entry %d" % seed)
    put(f"{base}/fxgraph/{fk[1:3]}/{fk}/{b32(seed + 3)}", b"fx entry %d" % seed)
    put(f"{base}/{b32(seed + 4, 2)}/c{b32(seed + 5)}.py", "# output code\n")
    put(f"{base}/{b32(seed + 4, 2)}/{'%064x' % (seed + 99)}.best_config", '{"XBLOCK": 128}')
    kernel(f"{base}/triton/0/{b32(seed + 6, 52).upper()}", "triton_poi_0", b"\x7fELF cubin")
    return ak
for rank in (0, 1):
    pre = f"torch_compile_cache/a06ab0848f/rank_{rank}_0/backbone"
    put(f"{pre}/cache_key_factors.json", '{\n  "code_hash": "c0de",\n  "config_hash": "c0f1"\n}')
    put(f"{pre}/computation_graph.py", "from __future__ import annotations\nimport torch\n")
    put(f"{pre}/transformed_code.py", "def forward(x):\n    return x\n")
    art = "artifact_compile_range_8_8_subgraph_0"
    if rank == 0:
        put(f"{pre}/{art}", binary_artifact("a" + b32(40)))
    else:
        torch_tree(f"{pre}/{art}", 50)
    if rank == 0: # the handle itself, or (newer vLLM) a dict holding it
        put(f"{pre}/vllm_compile_cache.py",
            "{   ((8, 8), 0, 'inductor_standalone'): (   '%s',\n"
            "                                            '%s/%s/%s')}" % (art, root, pre, art))
    else:
        put(f"{pre}/vllm_compile_cache.py",
            "{   ((8, 8), 0, 'inductor_standalone'): {   'cache_key': 'k1',\n"
            "                                            'graph_handle': (   '%s',\n"
            "                                                                '%s/%s/%s')}}"
            % (art, root, pre, art))
aot = "torch_compile_cache/torch_aot_compile/" + "%064x" % 0xfeed
put(f"{aot}/rank_0_0/model", b"\x80\x04\x95opaque pickle 0")
put(f"{aot}/rank_1_0/model", b"\x80\x04\x95opaque pickle 1")
torch_tree(f"{aot}/inductor_cache", 70)
# Files of no vLLM shape.
put("torch_compile_cache/a06ab0848f/rank_0_0/backbone/notes.txt", "mine\n")
put("torch_compile_cache/a06ab0848f/rank_01_0/backbone/computation_graph.py", "odd rank\n")
put("modelinfo/x.json", "{}")
EOF
[ -f "$SRC/torch_compile_cache/a06ab0848f/rank_0_0/backbone/vllm_compile_cache.py" ] && ok ||
	bad "the vLLM tree was not built"
UNKNOWN='notes\.txt|rank_01_0|modelinfo'
ART="artifact_compile_range_8_8_subgraph_0"
HB0="torch_compile_cache/a06ab0848f/rank_0_0/backbone"

# save finds the root through VLLM_CACHE_ROOT and says so; unknown files are reported.
export TORCHINDUCTOR_CACHE_DIR="$T/no-torch" TRITON_CACHE_DIR="$T/no-triton"
VLLM_CACHE_ROOT="$SRC" run 0 "read $SRC (vLLM's cache): 25 artifacts" save -v -o "$T/v.mcache" -s "$SEC"
for f in notes.txt rank_01_0/backbone/computation_graph.py modelinfo/x.json; do
	grep -q "skipped .*$f: not a known vLLM cache file" "$T/err" && ok || bad "$f not reported: $(cat "$T/err")"
done
VLLM_CACHE_ROOT="$SRC" run 0 '"vllm"' save -q --dry-run --json -o "$T/dry.mcache"
HOME="$T/home" XDG_CACHE_HOME="$T/xdg" run 2 "or $T/xdg/vllm (not there)" save --dry-run -o "$T/dry.mcache"

# list: each type, and no unknown file.
run 0 "" list "$T/v.mcache"
for t in vllm_meta vllm_handles vllm_artifact vllm_aot; do
	grep -q "^$t " "$T/out" && ok || bad "no $t artifact in the bundle"
done
grep -Eq "$UNKNOWN" "$T/out" && bad "an unknown file was saved" || ok
run 0 "$T/dst/torch_compile_cache/a06ab0848f/rank_1_0/backbone" list "$T/v.mcache" --explain --vllm-dir "$T/dst"
grep -q "^  torch_compile_cache/a06ab0848f/rank_1_0: 11 to install, 0 to replace, 0 already there$" "$T/out" &&
	grep -q "^  torch_compile_cache/torch_aot_compile/0*feed/inductor_cache: 7 to install" "$T/out" && ok ||
	bad "list --explain does not tell vLLM's folders: $(cat "$T/out")"
# The same in JSON, as the schema says.
run 0 "" list "$T/v.mcache" --explain --vllm-dir "$T/dst" --json
/usr/bin/python3 - "$MC_SRCDIR/doc/json-schema.json" "$T/out" <<'EOF' && ok || bad "list --explain --json: vLLM's folders"
import json, sys, jsonschema
j = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(j)
f = {x["folder"]: x["would_install"] for x in j["vllm_folders"]}
assert f["torch_compile_cache/a06ab0848f/rank_0_0"] == 5, f
assert len(f) == 5, f
EOF

# load into a fresh root: every file's bytes and path, group files written for where
# they land.
run 0 "" load "$T/v.mcache" -p "$PUB" --vllm-dir "$T/dst"
src_sum "$SRC" | grep -Ev "$UNKNOWN" > "$T/want"
tree_sum "$T/dst" > "$T/got"
check "vLLM root reproduced byte for byte" cmp -s "$T/want" "$T/got"
# Each handle names its artifact where it landed, and the file still reads as vLLM reads it.
handles_at() { # handles_at ROOT: every handle's path is ROOT's artifact of that name, there
	/usr/bin/python3 - "$1" <<'EOF'
import ast, glob, os, sys
root = os.path.abspath(sys.argv[1])
files = glob.glob(root + "/torch_compile_cache/*/rank_*/*/vllm_compile_cache.py")
assert len(files) == 2, files
for f in files:
    for key, h in ast.literal_eval(open(f).read()).items():
        h = h["graph_handle"] if isinstance(h, dict) else h
        assert h[1] == os.path.join(os.path.dirname(f), h[0]), (f, h)
        assert os.path.exists(h[1]), h[1]
EOF
}
check "handles name the artifacts where they landed" handles_at "$T/dst"
g=$(find "$T/dst" -name '__grp__*.json' | head -1)
grep -qF "\"$(dirname "$g")/triton_poi_0.cubin\"" "$g" && ok || bad "group file not written for $T/dst: $(cat "$g")"

# A handle file loaded without its artifacts is refused, nothing installed; with them
# in place already it loads.
run 1 "handle to a missing artifact: torch_compile_cache/a06ab0848f/rank_0_0/backbone/$ART is neither loaded nor in place" \
	load "$T/v.mcache" -p "$PUB" --vllm-dir "$T/only" --types vllm_handles
[ ! -e "$T/only" ] && ok || bad "a refused handle file left $(find "$T/only" | head -3)"
rm "$T/dst/torch_compile_cache/a06ab0848f/rank_1_0/backbone/vllm_compile_cache.py"
run 0 "" load "$T/v.mcache" -p "$PUB" --vllm-dir "$T/dst" --types vllm_handles
# A link where the artifact would be is no artifact in place.
mkdir -p "$T/lnk/$HB0"
ln -s "$T/nowhere" "$T/lnk/$HB0/$ART"
run 1 "handle to a missing artifact" \
	load "$T/v.mcache" -p "$PUB" --vllm-dir "$T/lnk" --types vllm_handles
[ ! -e "$T/lnk/$HB0/vllm_compile_cache.py" ] && ok || bad "a handle file was written beside a link"
check "a handle file loaded beside artifacts in place" handles_at "$T/dst"

# VLLM_CACHE_ROOT with a leading ~ is the home folder's, as vLLM expands it.
HOME="$T/h" VLLM_CACHE_ROOT="~/vc" run 0 "" load "$T/v.mcache" -p "$PUB"
tree_sum "$T/h/vc" > "$T/got"
check "~ in VLLM_CACHE_ROOT expanded" cmp -s "$T/want" "$T/got"
check "handles written for the root ~ names" handles_at "$T/h/vc"

# --keep-unknown keeps them, as vllm_extra, and they load back.
run 0 "" pack -q -o "$T/k.mcache" --from-vllm-dir "$SRC" --keep-unknown
run 0 "vllm_extra " list "$T/k.mcache"
run 0 "" load "$T/k.mcache" --insecure-no-verify --vllm-dir "$T/dk"
src_sum "$SRC" > "$T/want-all"
tree_sum "$T/dk" > "$T/got"
check "unknown files kept with --keep-unknown" cmp -s "$T/want-all" "$T/got"

# The handle file is read strictly at save: code, a handle outside the root or to a
# missing artifact, deep nesting and an oversize file are refused, naming the file, and
# no bundle is written.
HB="torch_compile_cache/a06ab0848f/rank_0_0/backbone"
bad_handles() { # bad_handles TEXT WHY: a root whose handle file is TEXT is refused for WHY
	rm -rf "$T/hs" "$T/hs.mcache"
	mkdir -p "$T/hs/$HB"
	cp "$SRC/$HB/$ART" "$T/hs/$HB/"
	printf '%s' "$1" > "$T/hs/$HB/vllm_compile_cache.py"
	run 1 "$T/hs/$HB/vllm_compile_cache.py: $2" pack -q -o "$T/hs.mcache" --from-vllm-dir "$T/hs"
	[ ! -e "$T/hs.mcache" ] && ok || bad "a refused handle file ($2) left a bundle"
}
bad_handles "{((8, 8), 0, 'inductor_standalone'): __import__('os').system('id')}" \
	"line 1, column 38: found the name '__import__' (names and calls are not read)"
bad_handles "{((8, 8), 0, 'inductor_standalone'): ('$ART', '/etc/$ART')}" \
	"line 1, column 80: handle path /etc/$ART is outside the folder being saved"
bad_handles "{((8, 8), 1, 'inductor_standalone'): ('artifact_compile_range_8_8_subgraph_1', '$T/hs/$HB/artifact_compile_range_8_8_subgraph_1')}" \
	"line 1, column 80: handle to a missing artifact: $T/hs/$HB/artifact_compile_range_8_8_subgraph_1"
bad_handles "{0: $(printf '%.0s[' $(seq 100))" "line 1, column 68: brackets nested over 64 deep"
bad_handles "{((8, 8), 0, 'gcc'): ('$ART', '$T/hs/$HB/$ART')}" "line 1, column 14: compiler gcc is not one vLLM keeps handles for"
bad_handles "{5: ('$ART', '$T/hs/$HB/$ART')}" "line 1, column 6: a handle whose key names no compiler"
bad_handles "{((8, 8), 0, 'inductor'): ('..', '$T/hs/torch_compile_cache/a06ab0848f/rank_0_0/inductor_cache/x.py')}" \
	"line 1, column 28: .. is not an FX graph's key"
/usr/bin/python3 -c "import sys; sys.stdout.write('{' + ' ' * (2 << 20) + '}')" > "$T/big"
bad_handles "$(cat "$T/big")" "2097154 bytes, over the 1048576"
# A handle that names its artifact through a link to the root is that artifact, and an
# older adaptor's handle so names its rank's inductor_cache/.
ln -s "$T/hs" "$T/hs-link"
IC="torch_compile_cache/a06ab0848f/rank_0_0/inductor_cache"
FX="f$(printf 'a%.0s' $(seq 51))"
mkdir -p "$T/hs/$IC"
printf '%s' "{((8, 8), 0, 'inductor_standalone'): ('$ART', '$T/hs-link/$HB/$ART'), ((8, 8), 1, 'inductor'): ('$FX', '$T/hs-link/$IC/xy/cxy.py')}" \
	> "$T/hs/$HB/vllm_compile_cache.py"
run 0 "" pack -q -o "$T/hs.mcache" --from-vllm-dir "$T/hs"
run 0 "" load "$T/hs.mcache" --insecure-no-verify --vllm-dir "$T/hs-dst"
grep -qF "'$T/hs-dst/$IC/xy/cxy.py'" "$T/hs-dst/$HB/vllm_compile_cache.py" && ok ||
	bad "inductor handle through a link not relocated: $(cat "$T/hs-dst/$HB/vllm_compile_cache.py")"
grep -qF "'$T/hs-dst/$HB/$ART'" "$T/hs-dst/$HB/vllm_compile_cache.py" && ok ||
	bad "handle through a link not relocated: $(cat "$T/hs-dst/$HB/vllm_compile_cache.py")"

# The number of worker threads changes neither the bundle nor the loaded tree.
for n in 1 4; do
	SOURCE_DATE_EPOCH=1700000000 run 0 "" pack -q -o "$T/j$n.mcache" -s "$SEC" --from-vllm-dir "$SRC" --threads "$n"
	run 0 "" load -q "$T/j$n.mcache" -p "$PUB" --vllm-dir "$T/j$n" --threads "$n"
	tree_sum "$T/j$n" > "$T/j$n.sum"
done
check "--threads 1 and 4 pack the same bytes" cmp -s "$T/j1.mcache" "$T/j4.mcache"
check "--threads 1 and 4 load the same tree" cmp -s "$T/j1.sum" "$T/j4.sum"

# A root whose path has spaces: pprint splits a long handle path into adjacent strings
# at them; the file is read and written back for another such root.
SP="$T/a root with spaces in its name, long enough for pprint to split the path"
mkdir -p "$SP/$HB"
cp "$SRC/$HB/$ART" "$SP/$HB/"
/usr/bin/python3 - "$SP/$HB" "$ART" <<'EOF'
import os, pprint, sys
d, art = sys.argv[1], sys.argv[2]
text = pprint.PrettyPrinter(indent=4).pformat(
    {((8, 8), 0, "inductor_standalone"): (art, os.path.join(d, art))})
assert "'\n" in text.split("(", 2)[2], text # split into adjacent strings
open(os.path.join(d, "vllm_compile_cache.py"), "w").write(text)
EOF
run 0 "" pack -q -o "$T/sp.mcache" --from-vllm-dir "$SP"
run 0 "" load "$T/sp.mcache" --insecure-no-verify --vllm-dir "$T/an other root"
/usr/bin/python3 - "$T/an other root/$HB" "$ART" <<'EOF' && ok || bad "split handle path not relocated"
import ast, os, sys
d, art = sys.argv[1], sys.argv[2]
h = ast.literal_eval(open(os.path.join(d, "vllm_compile_cache.py")).read())
assert list(h.values()) == [(art, os.path.join(d, art))], h
EOF

# Hostile keys: a bundle whose vLLM key climbs out or names a bad rank is refused, with
# nothing installed. Made from an uncompressed bundle by rewriting a key in place.
mkdir -p "$T/h1/torch_compile_cache/a06ab0848f/rank_0_0/backbone"
echo evil > "$T/h1/torch_compile_cache/a06ab0848f/rank_0_0/backbone/computation_graph.py"
run 0 "" pack -q -o "$T/h1.mcache" --from-vllm-dir "$T/h1" --no-compress --format-version 1
hostile() { # hostile SRC FROM TO OUT: OUT is bundle SRC with every FROM of its manifest made TO
	/usr/bin/python3 - "$@" <<'EOF'
import sys
src, a, b, out = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode(), sys.argv[4]
assert len(a) == len(b)
data = open(src, "rb").read()
assert a in data
open(out, "wb").write(data.replace(a, b))
EOF
}
for pair in "a06ab0848f/rank_0_0/backbone ../../../../../../../../..xx" \
	    "rank_0_0 rank_x_0" "backbone back/one" "a06ab0848f a06ab0848F"; do
	set -- $pair
	hostile "$T/h1.mcache" "$1" "$2" "$T/h2.mcache"
	rm -rf "$T/dh"
	run 1 "refused" load "$T/h2.mcache" --insecure-no-verify --vllm-dir "$T/dh/root"
	[ ! -e "$T/dh" ] && ok || bad "a refused bundle ($2) installed something"
done
run 0 "" load "$T/h1.mcache" --insecure-no-verify --vllm-dir "$T/dh"

# Labels: what the cache was made for, from each cache_key_factors.json's hashes and
# each binary artifact's torch key (the tree above: one key, bytes 0..31), shown by
# list and required by load.
K0=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
K1=202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f
K2=404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f
run 0 "" list "$T/v.mcache"
for l in "vllm.code_hash=c0de" "vllm.config_hash=c0f1" "vllm.torch_key=$K0"; do
	grep -qxF "label $l" "$T/out" && ok || bad "list: no label $l: $(cat "$T/out")"
done
grep -q "^label vllm.compiler_hash" "$T/out" && bad "a hash the factors lack was labelled" || ok
run 0 "" load "$T/v.mcache" -p "$PUB" --vllm-dir "$T/dr" --require "vllm.torch_key=$K0" \
	--require vllm.code_hash=c0de
run 1 "label vllm.torch_key is '$K0' in the bundle, '$K1' required" load "$T/v.mcache" \
	-p "$PUB" --vllm-dir "$T/dr2" --require "vllm.torch_key=$K1"
[ ! -e "$T/dr2" ] && ok || bad "a bundle refused for its label installed something"

# Models of three torch builds in one root: each label holds the distinct values,
# sorted and joined with ','. One artifact is of torch before 2.10 (no header), one of
# a graph compiled ahead of time (header AOTCompiledArtifact). Factors that are no
# JSON, a hash that is no string or holds a ',', an artifact of other bytes: they tell
# nothing, and are saved all the same.
/usr/bin/python3 - "$T/two" <<'EOF'
import os, struct, sys, zlib
root = sys.argv[1]
def put(rel, data):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
def field(b):
    return struct.pack(">Q", len(b)) + b
def artifact(key, header):
    body = (header and field(header) or b"") + field(key) + field(b"k" * 60)
    return struct.pack(">I", zlib.crc32(body)) + body
J = "torch_compile_cache/%s/rank_0_0/backbone/"
put(J % "1111111111" + "cache_key_factors.json",
    '{"env": {"VLLM_X": "1"}, "code_hash": "c0de", "compiler_hash": "9f8e7d6c5b", "config_hash": "c0f1"}')
put(J % "1111111111" + "artifact_compile_range_1_8_subgraph_0", artifact(bytes(range(32, 64)), b""))
put(J % "2222222222" + "cache_key_factors.json",
    '{"code_hash": "0ld", "compiler_hash": 7, "config_hash": "a,b", "more": {"x": [1]}}')
put(J % "2222222222" + "artifact_compile_range_1_8_subgraph_0", artifact(bytes(range(32)), b"CacheCompiledArtifact"))
put(J % "2222222222" + "artifact_shape_None_subgraph_1", b"\0\0\0\0not torch's bytes")
put(J % "3333333333" + "cache_key_factors.json", '{"code_hash": "c0de"')
put(J % "4444444444" + "artifact_shape_8_subgraph_0", artifact(bytes(range(64, 96)), b"AOTCompiledArtifact"))
EOF
run 0 "" pack -q -o "$T/two.mcache" --from-vllm-dir "$T/two"
run 0 "" list --json "$T/two.mcache"
/usr/bin/python3 - "$T/out" "$K0,$K1,$K2" <<'EOF' && ok || bad "three builds: labels: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
want = {"vllm.code_hash": "0ld,c0de", "vllm.compiler_hash": "9f8e7d6c5b",
        "vllm.config_hash": "c0f1", "vllm.torch_key": sys.argv[2]}
assert j["labels"] == want, j["labels"]
assert j["artifact_count"] == 7, j["artifact_count"]
EOF
run 0 "" load "$T/two.mcache" --insecure-no-verify --vllm-dir "$T/dt" \
	--require "vllm.torch_key=$K0,$K1,$K2"
# A label given on the command line is the user's, whatever the files say; the others
# are still found.
run 0 "" pack -q -o "$T/mine.mcache" --from-vllm-dir "$T/two" --label vllm.torch_key=mine
run 0 "label vllm.torch_key=mine" list "$T/mine.mcache"
grep -qxF "label vllm.code_hash=0ld,c0de" "$T/out" && ok || bad "--label: the other labels lost: $(cat "$T/out")"
VLLM_CACHE_ROOT="$T/two" run 0 "" save -q -o "$T/mine2.mcache" --label "vllm.code_hash=my code"
run 0 "label vllm.code_hash=my code" list "$T/mine2.mcache"
grep -qxF "label vllm.torch_key=$K0,$K1,$K2" "$T/out" && ok || bad "save: no torch key label: $(cat "$T/out")"

# vLLM's older adaptor (InductorAdaptor) keeps torch's and Triton's caches per rank, in
# rank_<n>_<m>/inductor_cache/ and rank_<n>_<m>/triton_cache/: saved as vllm_inductor,
# loaded elsewhere byte for byte, a Triton group file written for where it lands.
LEG="$T/legacy"
/usr/bin/python3 - "$LEG" "$T" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from vtree import *
def b32(seed, n=51): # names of their own
    return "".join(B[(seed * 5 + i * 11) % 32] for i in range(n))
rank = "torch_compile_cache/5a5a5a5a5a/rank_0_0"
ind, tri = rank + "/inductor_cache", rank + "/triton_cache"
fk, ak = "f" + b32(1), "a" + b32(2)
put(f"{rank}/backbone/cache_key_factors.json", '{"compiler_hash": "0a1b2c3d4e"}')
put(f"{ind}/fxgraph/{fk[1:3]}/{fk}/{b32(4)}", b"fx entry")
put(f"{ind}/aotautograd/{ak}/{b32(5)}", b"aot entry")
put(f"{ind}/xy/c{b32(3)}.py", "# output code\n")
put(f"{ind}/xy/{'%064x' % 7}.best_config", '{"XBLOCK": 64}')
kernel(f"{tri}/{b32(6, 52).upper()}", "triton_poi_1", b"\x7fELF cubin 1")
# no shape of torch's or Triton's: reported and left out
put(f"{ind}/notes.txt", "mine\n")
put(f"{tri}/tmp.pid_7_1/triton_poi_1.cubin", b"half written")
EOF
LUNK='notes\.txt|tmp\.pid_7_1'
VLLM_CACHE_ROOT="$LEG" run 0 "read $LEG (vLLM's cache): 8 artifacts" save -v -o "$T/leg.mcache" -s "$SEC"
for f in inductor_cache/notes.txt triton_cache/tmp.pid_7_1/triton_poi_1.cubin; do
	grep -q "skipped .*$f: not a known vLLM cache file" "$T/err" && ok || bad "$f not reported: $(cat "$T/err")"
done
run 0 "" list "$T/leg.mcache"
[ "$(grep -c "^vllm_inductor " "$T/out")" = 7 ] && ok || bad "not 7 vllm_inductor artifacts: $(cat "$T/out")"
grep -q "^vllm_inductor .*rank_0_0/triton_cache/.*/__grp__triton_poi_1.json$" "$T/out" && ok ||
	bad "the group file is not a vllm_inductor artifact: $(cat "$T/out")"
grep -Eq "$LUNK" "$T/out" && bad "a file of no shape was saved" || ok
run 0 "" load "$T/leg.mcache" -p "$PUB" --vllm-dir "$T/dleg"
src_sum "$LEG" | grep -Ev "$LUNK" > "$T/want"
tree_sum "$T/dleg" > "$T/got"
check "older adaptor's caches reproduced byte for byte" cmp -s "$T/want" "$T/got"
g=$(find "$T/dleg" -name '__grp__*.json')
[ "$(cat "$g")" = "$(grp_form "$g" "$(dirname "$g")")" ] && ok || bad "group file not written for $T/dleg: $(cat "$g")"

# A bundle whose vllm_inductor key is no shape of torch's or Triton's, or climbs out, is
# refused with nothing installed.
run 0 "" pack -q -o "$T/leg1.mcache" --from-vllm-dir "$LEG" --no-compress --format-version 1
for pair in "triton_cache/ triton_cachX/" "rank_0_0/inductor_cache ../../../../../../../.." \
	    "__grp__triton_poi_1.json __grp__triton_poi_1/json" \
	    "rank_0_0/triton_cache rank_0_x/triton_cache"; do
	set -- $pair
	hostile "$T/leg1.mcache" "$1" "$2" "$T/leg2.mcache"
	rm -rf "$T/dl2"
	run 1 "refused" load "$T/leg2.mcache" --insecure-no-verify --vllm-dir "$T/dl2/root"
	grep -q "vllm_inductor" "$T/err" && ok || bad "refusal of $2 does not name the type: $(cat "$T/err")"
	[ ! -e "$T/dl2" ] && ok || bad "a refused bundle ($2) installed something"
done

# run: what the job read of the vLLM files loaded, and wrote anew in vLLM's root (a
# model's notes, an artifact, a kernel of the older adaptor's Triton cache), per type, in
# a line and in its JSON. vLLM never reads its notes: no warning that none was read.
RJ='R="$VLLM_CACHE_ROOT/torch_compile_cache" B="$R/a06ab0848f/rank_0_0/backbone"
cat "$B/vllm_compile_cache.py" "$B/artifact_compile_range_8_8_subgraph_0" >/dev/null
echo art >"$B/artifact_compile_range_16_16_subgraph_0"
mkdir -p "$R/bbbbbbbbbb/rank_0_0/backbone" "$R/bbbbbbbbbb/rank_0_0/triton_cache/KERNEL"
echo "{}" >"$R/bbbbbbbbbb/rank_0_0/backbone/cache_key_factors.json"
echo cubin >"$R/bbbbbbbbbb/rank_0_0/triton_cache/KERNEL/k.cubin"
echo "{}" >"$R/bbbbbbbbbb/rank_0_0/triton_cache/KERNEL/k.json"
echo mine >"$R/notes.txt"'
run 0 "" run -b "$T/v.mcache" -p "$PUB" --vllm-dir "$T/ru" -- sh -c "$RJ"
line="megacache: the job read 2 of 25 loaded artifacts (vllm_aot 0 of 9, vllm_artifact 1 of 8, vllm_handles 1 of 2, vllm_meta 0 of 6); 4 new"
grep -qxF "$line" "$T/err" && ok || bad "run: no line '$line': $(cat "$T/err")"
warn="megacache: warning: the job read none of the loaded vllm_aot (9) artifacts; the likely cause is a torch, Triton or config mismatch: compare the bundle's labels (megacache list $T/v.mcache) with this host's"
grep -qxF "$warn" "$T/err" && ok || bad "run: no warning '$warn': $(cat "$T/err")"
run 0 "" run -b "$T/v.mcache" -p "$PUB" --vllm-dir "$T/ru2" --json-file "$T/r.json" -- sh -c "$RJ"
/usr/bin/python3 - "$MC_SRCDIR/doc/json-schema.json" "$T/r.json" <<'EOF' && ok || bad "run --json-file: used: $(cat "$T/r.json")"
import json, sys
import jsonschema
j = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[1]))).validate(j)
def c(i, r, n):
    return {"installed": i, "read": r, "new": n, "not_seen": 0}
want = {"vllm_aot": c(9, 0, 0), "vllm_artifact": c(8, 1, 1), "vllm_handles": c(2, 1, 0),
        "vllm_inductor": c(0, 0, 2), "vllm_meta": c(6, 0, 1)}
assert j["used"] == want and j["used_not_seen"] == {}, (j["used"], j["used_not_seen"])
EOF

# Ranks from two machines, each under its own root: merged into one bundle, loaded into a
# third root, each rank's handles naming it there.
for r in 0 1; do
	m="$T/machine$r/root"
	mkdir -p "$m/torch_compile_cache/a06ab0848f"
	cp -a "$SRC/torch_compile_cache/a06ab0848f/rank_${r}_0" "$m/torch_compile_cache/a06ab0848f/"
	/usr/bin/python3 - "$m" "$SRC" <<'EOF'
import glob, sys
m, src = sys.argv[1], sys.argv[2]
for f in glob.glob(m + "/torch_compile_cache/*/rank_*/*/vllm_compile_cache.py"):
    t = open(f).read()
    open(f, "w").write(t.replace(src + "/", m + "/"))
EOF
	run 0 "" pack -q -o "$T/rank$r.mcache" -s "$SEC" --from-vllm-dir "$m"
done
# rank 1's unpacked artifact tells no torch key: merge, as for any label that differs,
# asks for the merged bundle's value.
run 2 "label vllm.torch_key differs between the inputs" \
	merge -q -o "$T/ranks.mcache" -s "$SEC" -p "$PUB" "$T/rank0.mcache" "$T/rank1.mcache"
run 0 "" merge -q -o "$T/ranks.mcache" -s "$SEC" -p "$PUB" "$T/rank0.mcache" "$T/rank1.mcache" \
	--label "vllm.torch_key=$(printf '%02x' $(seq 0 31) | tr -d ' ')"
run 0 "" load "$T/ranks.mcache" -p "$PUB" --vllm-dir "$T/merged"
check "merged ranks name the root they were loaded into" handles_at "$T/merged"

finish
