#!/bin/sh
# vllm.sh - the vLLM tier against the torch tier on the same files: pack, load and
# verify of a vLLM cache root, and of a torch cache folder holding the same files, at
# the same zstd level, alternating which side goes first (it flips every run); the table
# gives medians of wall time, peak RSS and CPU-seconds (user and system) of each side,
# and the ratios vllm/torch.
#   sh tests/bench/vllm.sh [COPIES]
# COPIES: copies of the real CUDA MLP cache dir (default 130: about 510 MB in 20,000
# files), scaled as bench.sh scales them. From that folder C it builds
#   V, a vLLM root: C's files in an ahead-of-time compile's inductor_cache/
#     (torch_compile_cache/torch_aot_compile/<64 hex>/inductor_cache/<path in C>), and
#     RANKS JIT folders torch_compile_cache/<10 hex>/rank_<r>_0/backbone/ each with
#     cache_key_factors.json, computation_graph.py, ARTIFACTS binary artifacts of about
#     300 KB (bytes of C's files behind the header torch writes) and the handle file
#     vllm_compile_cache.py naming them by absolute path, as pprint writes it;
#   C', a torch cache folder of the same files: C's, the artifacts as FX graph entries
#     and the three text files of each JIT folder as kernel code, byte for byte.
# Files of C that either tier would skip are left out of both. The loaded vLLM root is
# checked once: every file there, each handle naming the new root.
# Environment: RUNS (default 5), LEVEL (3), WORK (/tmp/megacache-vllm-bench), SHARED
# (../shared), THREADS (megacache's --threads, default 0: one per CPU), RANKS (4),
# ARTIFACTS (8). Needs: python3, GNU time (/usr/bin/time), tar. Run from a built tree.
#
# Before each step the page cache is written back and dropped (as root) and the step's
# input read once; each load writes a new folder, all removed at the end (bench.sh says
# why).
set -eu
top=$(pwd)
RUNS=${RUNS:-5}
LEVEL=${LEVEL:-3}
THREADS=${THREADS:-0}
RANKS=${RANKS:-4}
ARTIFACTS=${ARTIFACTS:-8}
WORK=${WORK:-/tmp/megacache-vllm-bench}
SHARED=${SHARED:-$top/../shared}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR VLLM_CACHE_ROOT # the options alone name the roots
copies=${1:-130}
for tool in python3 /usr/bin/time tar; do
	command -v "$tool" >/dev/null 2>&1 || { echo "vllm bench: $tool is needed" >&2; exit 2; }
done
mkdir -p "$WORK"
rm -rf "$WORK/src" "$WORK"/out-* "$WORK/empty"
mkdir -p "$WORK/src" "$WORK/empty"
tar -xzf "$top/tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
"$M" keygen -q -W -f -p "$WORK/k.pub" -s "$WORK/k.key"
C="$WORK/cache-$copies"
CP="$WORK/torch-$copies-$RANKS-$ARTIFACTS"
V="$WORK/vllm-$copies-$RANKS-$ARTIFACTS"
[ -d "$C" ] || python3 "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C" "$copies"

# The two trees, from C: V, and C' holding the same bytes in torch's names; kept for the
# next run, as a tree removed just before the loads would slow them (bench.sh says why).
if [ ! -f "$V.made" ]; then
	rm -rf "$CP" "$V"
	python3 - "$C" "$CP" "$V" "$RANKS" "$ARTIFACTS" <<'EOF'
import base64, hashlib, os, pprint, struct, sys, zlib
src, cp, v, ranks, arts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
B32 = "abcdefghijklmnopqrstuvwxyz234567"
def name(seed, n=51):
    d = hashlib.sha256(seed.encode()).digest() * 2
    return "".join(B32[b % 32] for b in d[:n])
def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
aot = os.path.join(v, "torch_compile_cache", "torch_aot_compile",
                   hashlib.sha256(b"aot").hexdigest(), "inductor_cache")
def entry(data): # torch names a graph entry after its content, as fleet.sh does
    return base64.b32encode(hashlib.sha256(data).digest()).decode().lower()[:51]
rels = sorted(os.path.relpath(os.path.join(r, n), src) for r, _, ns in os.walk(src) for n in ns)
for rel in rels:
    with open(os.path.join(src, rel), "rb") as f:
        data = f.read()
    if rel.startswith(("fxgraph/", "aotautograd/")):
        rel = os.path.join(os.path.dirname(rel), entry(data))
    for top in (cp, aot):
        put(os.path.join(top, rel), data)
# The artifacts' contents: C's files one after another, about 300 KB each.
def chunks():
    buf = b""
    while True:
        for rel in rels:
            with open(os.path.join(src, rel), "rb") as f:
                buf += f.read()
            if len(buf) >= 300000:
                yield buf
                buf = b""
feed = chunks()
def field(b):
    return struct.pack(">Q", len(b)) + b
def artifact(key, payload):
    body = (field(b"CacheCompiledArtifact") + field(hashlib.sha256(b"torch").digest()) +
            field(base64.b64encode(key.encode())) + field(payload))
    return struct.pack(">I", zlib.crc32(body)) + body
jit = hashlib.sha256(b"jit").hexdigest()[:10]
for r in range(ranks):
    d = os.path.join(v, "torch_compile_cache", jit, "rank_%d_0" % r, "backbone")
    files = {"cache_key_factors.json": b'{\n  "code_hash": "%s",\n  "config_hash": "%s"\n}'
             % (hashlib.sha256(b"code%d" % r).hexdigest().encode(),
                hashlib.sha256(b"config").hexdigest().encode()),
             "computation_graph.py": b"from __future__ import annotations\nimport torch\n" +
             b"class GraphModule(torch.nn.Module):\n    def forward(self, x):\n" * 40}
    handles = {}
    for i in range(arts):
        lo, hi = (1, 8) if i % 2 == 0 else (9, 8192)
        art = "artifact_compile_range_%d_%d_subgraph_%d" % (lo, hi, i // 2)
        files[art] = artifact("a" + name("key%d.%d" % (r, i)), next(feed))
        handles[((lo, hi), i // 2, "inductor_standalone")] = (art, os.path.join(d, art))
    files["vllm_compile_cache.py"] = pprint.PrettyPrinter(indent=4).pformat(handles).encode()
    for f, data in files.items():
        put(os.path.join(d, f), data)
        if f.startswith("artifact_"): # an FX graph entry
            k = "f" + name("fx%d.%s" % (r, f))
            put(os.path.join(cp, "fxgraph", k[1:3], k, entry(data)), data)
        else: # kernel code
            put(os.path.join(cp, name("dir%d.%s" % (r, f), 2), "c" + name("c%d.%s" % (r, f))
                             + os.path.splitext(f)[1]), data)
EOF
	# What either tier skips leaves both trees: a pack lists each file it skips.
	skip() { # skip SIDE-OPTION DIR: the paths beneath DIR that a pack of it skips
		"$M" pack -v -o "$WORK/probe.mcache" "$1" "$2" 2>&1 >/dev/null |
			sed -n "s|^skipped \($2/\)\{0,1\}\([^:]*\): .*|\2|p"
	}
	skip --from-vllm-dir "$V" | sed -n 's|^torch_compile_cache/torch_aot_compile/[0-9a-f]*/inductor_cache/||p' > "$WORK/skip"
	skip --from-dir "$CP" >> "$WORK/skip"
	aotdir=$(echo "$V"/torch_compile_cache/torch_aot_compile/*/inductor_cache)
	while read -r rel; do
		rm -f "$CP/$rel" "$aotdir/$rel"
	done < "$WORK/skip"
	rm -f "$WORK/probe.mcache"
	[ -z "$(skip --from-vllm-dir "$V")$(skip --from-dir "$CP")" ] ||
		{ echo "vllm bench: files still skipped" >&2; exit 1; }
	touch "$V.made"
fi

BENCH="vllm bench"
. "$top/tests/bench/timing.sh"

CAP="--max-manifest-bytes 1073741824"
COMMON="$CAP -q --threads $THREADS"
pack_torch() { settle "$CP"; t pack-torch "$M" pack $COMMON -o "$WORK/torch.mcache" -s "$WORK/k.key" --from-dir "$CP" --level "$LEVEL"; }
pack_vllm() { settle "$V"; t pack-vllm "$M" pack $COMMON -o "$WORK/vllm.mcache" -s "$WORK/k.key" --from-vllm-dir "$V" --level "$LEVEL"; }
load_torch() {
	ot="$WORK/out-torch-$i"
	settle "$WORK/torch.mcache"
	t load-torch "$M" load $COMMON "$WORK/torch.mcache" -p "$WORK/k.pub" --max-expansion 0 \
		--cache-dir "$ot" --vllm-dir "$WORK/empty/vllm-$i"
}
load_vllm() {
	ov="$WORK/out-vllm-$i"
	settle "$WORK/vllm.mcache"
	t load-vllm "$M" load $COMMON "$WORK/vllm.mcache" -p "$WORK/k.pub" --max-expansion 0 \
		--vllm-dir "$ov" --cache-dir "$WORK/empty/torch-$i"
}
verify_torch() { settle "$WORK/torch.mcache"; t verify-torch "$M" verify $COMMON "$WORK/torch.mcache" -p "$WORK/k.pub" --max-expansion 0; }
verify_vllm() { settle "$WORK/vllm.mcache"; t verify-vllm "$M" verify $COMMON "$WORK/vllm.mcache" -p "$WORK/k.pub" --max-expansion 0; }

rm -f "$WORK"/*.times
i=0
while [ "$i" -lt "$RUNS" ]; do
	i=$((i + 1))
	rm -f "$WORK/torch.mcache" "$WORK/vllm.mcache"
	if [ $((i % 2)) -eq 1 ]; then
		pack_torch; pack_vllm; load_torch; load_vllm; verify_torch; verify_vllm
	else
		pack_vllm; pack_torch; load_vllm; load_torch; verify_vllm; verify_torch
	fi
done

# The loads must be right: each tree holds every file of its source with its bytes, but
# for the files that name where they are (Triton's group files, vLLM's handle files),
# which must name the new folder; and nothing went into the roots left empty.
python3 - "$CP" "$ot" "$V" "$ov" "$WORK/empty" <<'EOF'
import ast, json, os, sys
cp, ot, v, ov, empty = sys.argv[1:]
def files(top):
    return sorted(os.path.relpath(os.path.join(r, n), top) for r, _, ns in os.walk(top) for n in ns)
def same(src, out, what):
    if files(src) != files(out):
        sys.exit("vllm bench: the %s load does not hold its source's files" % what)
    for rel in files(src):
        a, b = (open(os.path.join(t, rel), "rb").read() for t in (src, out))
        name = os.path.basename(rel)
        if name == "vllm_compile_cache.py" and what == "vllm":
            got = ast.literal_eval(b.decode())
            want = {k: (n, os.path.join(out, os.path.dirname(rel), n))
                    for k, (n, _) in ast.literal_eval(a.decode()).items()}
            if got != want or not all(os.path.isfile(p) for _, p in got.values()):
                sys.exit("vllm bench: %s does not name the loaded artifacts" % rel)
            continue
        try:  # the corpus's copies of a group file are scrambled, not JSON
            grp = name.startswith("__grp__") and name.endswith(".json") and json.loads(a)
        except ValueError:
            grp = None
        if grp:
            want = {k: os.path.join(out, os.path.dirname(rel), k) for k in grp["child_paths"]}
            if json.loads(b)["child_paths"] != want:
                sys.exit("vllm bench: the %s load differs in %s" % (what, rel))
        elif a != b:
            sys.exit("vllm bench: the %s load differs in %s" % (what, rel))
same(cp, ot, "torch")
same(v, ov, "vllm")
if files(empty):
    sys.exit("vllm bench: a load wrote into a root it was not given: " + files(empty)[0])
EOF

for f in "$WORK"/*.times; do # every run, for the record
	echo "vllm bench: $copies copies, $(basename "$f" .times) (s): $(cut -d' ' -f1 "$f" | tr '\n' ' ')" >&2
done
count() { find "$1" -type f | wc -l; }
bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.1f", s / 1e6 }'; }
echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/ { print $2 }') GiB," \
	"$(uname -sr), $(df -T "$WORK" | awk 'NR == 2 { print $2 }') at $WORK; megacache --threads $THREADS"
echo
echo "| operation | torch tier (s) | vllm tier (s) | ratio vllm/torch | torch RSS (MiB) | vllm RSS (MiB) | torch CPU (s) | vllm CPU (s) |"
echo "|---|---|---|---|---|---|---|---|"
for op in pack load verify; do
	tw=$(median 1 "$WORK/$op-torch.times")
	vw=$(median 1 "$WORK/$op-vllm.times")
	tr=$(median 2 "$WORK/$op-torch.times")
	vr=$(median 2 "$WORK/$op-vllm.times")
	tc=$(median 0 "$WORK/$op-torch.times")
	vc=$(median 0 "$WORK/$op-vllm.times")
	awk -v op="$op" -v tw="$tw" -v vw="$vw" -v tr="$tr" -v vr="$vr" -v tc="$tc" -v vc="$vc" \
		'BEGIN { printf "| %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f |\n", op, tw, vw, vw / tw, tr / 1024, vr / 1024, tc, vc }'
done
echo "| files | $(count "$CP") | $(count "$V") | | | | | |"
echo "| content (MB) | $(bytes "$CP") | $(bytes "$V") | | | | | |"
echo "| bundle (MB) | $(stat -c %s "$WORK/torch.mcache" | awk '{ printf "%.1f", $1 / 1e6 }') | $(stat -c %s "$WORK/vllm.mcache" | awk '{ printf "%.1f", $1 / 1e6 }') | | | | | |"
rm -rf "$WORK"/out-* "$WORK/empty"
echo
echo "medians of $RUNS alternating runs, zstd level $LEVEL; $copies copies of the corpus, $RANKS ranks of $ARTIFACTS artifacts"
