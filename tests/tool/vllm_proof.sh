# vllm_proof.sh - examples/vllm/proof.sh without torch: a stand-in python builds a
# vLLM-shaped root and "checks" a root by loading each handle whose stored path exists,
# so that what megacache does in the proof (a save of vLLM's folder alone; loads at the
# same root and at another; a cp -a copy beside them) and the table that proof_summary.py
# writes are tested, with the exit statuses of a run that fails in part and of one that
# cannot run.
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/bin/python3 ]; then
	echo "SKIP: no /usr/bin/python3"
	exit 77
fi
PROOF="$MC_SRCDIR/examples/vllm/proof.sh"
OUT="$T/out"

# The stand-in for python3 with torch: vllm_cache_probe.py build and check faked, the
# rest (proof_summary.py) run by /usr/bin/python3; FAKE_FAIL=build|check makes one fail.
cat >"$T/python" <<'PY'
#!/usr/bin/python3
import ast, json, os, sys

args = sys.argv[1:]
if not args[0].endswith("vllm_cache_probe.py"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + args)
if os.environ.get("FAKE_FAIL") == args[1]:
    sys.exit("fake failure of " + args[1])
cmd, root, out = args[1], os.path.abspath(args[2]), args[args.index("--json") + 1]
AOT = "torch_compile_cache/torch_aot_compile/" + "%064x" % 0xfeed
N = "abcdefghijklmnopqrstuvwxyz234567" * 2


def put(rel, data):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(data)


def kernel(base, seed):
    """An Inductor output folder's Triton kernel, its group file naming it absolutely."""
    d = f"{base}/triton/0/{N[seed:seed + 52].upper()}"
    put(f"{d}/triton_poi_0.cubin", "cubin")
    put(f"{d}/__grp__triton_poi_0.json",
        json.dumps({"child_paths": {"triton_poi_0.cubin": f"{root}/{d}/triton_poi_0.cubin"}}))


def build():
    for h, fmt in (("a06ab0848f", "binary"), ("946a83ba6f", "unpacked")):
        for rank in (0, 1):
            pre = f"torch_compile_cache/{h}/rank_{rank}_0/backbone"
            put(f"{pre}/cache_key_factors.json",
                json.dumps({"env": {"VLLM_COMPILE_CACHE_SAVE_FORMAT": fmt}}))
            put(f"{pre}/computation_graph.py", "import torch\n")
            cache = {}
            for i in (0, 1):
                art = f"artifact_compile_range_8_8_subgraph_{i}"
                if fmt == "binary":
                    put(f"{pre}/{art}", "binary artifact")
                else:
                    put(f"{pre}/{art}/aotautograd/a{N[i:i + 51]}/{N[i + 1:i + 52]}", "entry")
                    kernel(f"{pre}/{art}", i)
                cache[((8, 8), i, "inductor_standalone")] = (art, f"{root}/{pre}/{art}")
            put(f"{pre}/vllm_compile_cache.py", repr(cache))
    for rank in (0, 1):
        put(f"{AOT}/rank_{rank}_0/model", "opaque pickle")
    kernel(f"{AOT}/inductor_cache", 5)
    return [{"step": "api", "torch": "2.11.0", "triton": "3.6.0"},
            {"step": "build-jit", "compile_s": {"submod_0": 4.5, "submod_1": 0.25}},
            {"step": "build-aot", "compile_s": 5.0}]


def check():
    base = os.path.join(root, "torch_compile_cache")
    jit = {"step": "check-jit", "prefixes": []}
    for h in sorted(n for n in os.listdir(base) if len(n) == 10):
        for rank in sorted(os.listdir(os.path.join(base, h))):
            local = os.path.join(base, h, rank, "backbone")
            with open(os.path.join(local, "vllm_compile_cache.py")) as f:
                cache = ast.literal_eval(f.read())
            entries = []
            for k in sorted(cache):
                path = cache[k][1]
                e = {"handle_inside_read_root": path.startswith(local + "/")}
                if os.path.exists(path):
                    e.update({"load_s": 0.01, "first_call_s": 0.002, "vs_eager": {"match": True},
                              "counters": {"inductor.fxgraph_cache_hit": 1}})
                else:
                    e.update({"counters": {}, "error": "FileNotFoundError: [Errno 2] No such "
                              f"file or directory: '{path}'"})
                entries.append(e)
            jit["prefixes"].append({"dir": local, "entries": entries})
    # the AOT models autotune again when a Triton group file names a path that is gone
    grp = [os.path.join(d, n) for d, _, names in os.walk(os.path.join(root, AOT))
           for n in names if n.startswith("__grp__")]
    stale = any(not os.path.exists(p) for g in grp
                for p in json.load(open(g))["child_paths"].values())
    counters = {"inductor.benchmarking.InductorBenchmarker.benchmark": 2} if stale else {}
    aot = {"step": "check-aot", "models": [
        {"load_s": 0.5, "first_call_s": 0.003, "vs_eager": {"match": True}, "counters": counters}
        for _ in (0, 1)]}
    return [jit, aot]


reps = build() if cmd == "build" else check()
with open(out, "w") as f:
    json.dump(reps, f)
PY
chmod +x "$T/python"

# row CASE: the table's row of that case (its first words).
row() { grep "^| $1 " "$OUT/table.md"; }
proof() {
	MEGACACHE="$MEGACACHE" PYTHON="$T/python" WORK="$T/work" sh "$PROOF" "$@" >"$T/stdout" 2>&1
}

proof "$OUT"
rc=$?
[ "$rc" = 0 ] && ok || bad "proof.sh exited $rc: $(tail -n 5 "$T/stdout")"
for f in table.md report.json steps.tsv build.json save.json list.json same-root.load.json \
	same-root.check.json other-root.load.json other-root.check.json copy.check.json \
	logs/other-root-vllm_compile_cache.py logs/copy-tree.txt; do
	[ -s "$OUT/$f" ] && ok || bad "proof.sh left no $f"
done
for s in $(cut -f 1 "$OUT/steps.tsv"); do
	[ -f "$OUT/logs/$s.log" ] && ok || bad "step $s left no log"
done
grep -q "^1 of 3 cases warm; 13 steps took [0-9.]* s\.$\|^2 of 3 cases warm; 13 steps took [0-9.]* s\.$" \
	"$OUT/table.md" && ok || bad "table foot: $(tail -n 1 "$OUT/table.md")"
# Every step ran and exited 0.
awk -F '\t' '$2 != 0 { print; bad = 1 } END { exit bad || NR != 13 }' "$OUT/steps.tsv" && ok ||
	bad "steps that failed or are missing: $(cat "$OUT/steps.tsv")"
# The bundle holds vLLM's folder alone: torch's and Triton's folders were empty ones.
/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
types = {a["type"] for a in j["artifacts"]}
sys.exit(not (types and all(t.startswith("vllm_") for t in types)))' "$OUT/list.json" && ok ||
	bad "the bundle holds more than vLLM's folder: $(head -c 400 "$OUT/list.json")"

# Same root: every handle loaded and hit, the AOT models did not autotune again.
row "same root" | grep -qF "| warm start | 8/8 | 8/8 | 8/8 + AOT 2/2 | 8 | 0 | 2/2 | no | 0.010 | 0.002 | 0.500 | 0.003 |" &&
	row "same root" | grep -q "| warm start |$" && ok || bad "same root row: $(row "same root")"
# Another root: a warm start exactly when load left handles naming it.
r=$(row "another root")
case $r in
*"| warm start | 8/8 | 8/8 | 8/8 + AOT 2/2 | 8 | 0 | 2/2 |"*"| warm start |") ok ;;
*"| warm start | 0/8 | 0/8 | 0/8 + AOT 2/2 | 0 | 0 | 2/2 |"*"| failed: 8 of 8 handles not loaded (FileNotFoundError x8: [Errno 2] No such file or directory: '$T/work/a/vllm/torch_compile_cache/"*) ok ;;
*) bad "another root row: $r" ;;
esac
# cp -a: the handles name the removed original; its Triton group files too.
row "cp -a" | grep -qF "| 0/8 | 0/8 | 0/8 + AOT 2/2 | 0 | 0 | 2/2 | yes (4 benchmarks) | - | - | 0.500 | 0.003 | - | failed: 8 of 8 handles not loaded (FileNotFoundError x8: [Errno 2] No such file or directory: '$T/work/a/vllm/" &&
	row "cp -a" | grep -qF "; AOT autotuned again (4 benchmarks) |" && ok || bad "cp -a row: $(row "cp -a")"
grep -qx "torch 2.11.0, triton 3.6.0; cold compile: JIT 4.750 s (both pieces), AOT 5.000 s." "$OUT/table.md" &&
	grep -qx "bundle: 32 artifacts (vllm_aot 4, vllm_artifact 16, vllm_handles 4, vllm_meta 8)." "$OUT/table.md" &&
	ok || bad "table head: $(head -n 5 "$OUT/table.md")"
/usr/bin/python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["cases"]
sys.exit(not (c["same-root"]["warm"] and not c["copy"]["warm"]
              and c["same-root"]["jit"]["fx_hits"] == 8 and c["copy"]["aot"]["benchmarks"] == 4))' \
	"$OUT/report.json" && ok || bad "report.json: $(head -c 600 "$OUT/report.json")"

# A check that fails is a row that says so; the run still exits 0 with its table.
FAKE_FAIL=check proof "$OUT"
rc=$?
[ "$rc" = 0 ] && ok || bad "proof.sh with failing checks exited $rc: $(tail -n 5 "$T/stdout")"
[ "$(grep -c "| failed: [a-z-]*-check exited 1: fake failure of check |$" "$OUT/table.md")" = 3 ] &&
	ok || bad "failed checks not in the table: $(cat "$OUT/table.md")"
# A failed build: nothing to save, every case fails, and the table says why.
FAKE_FAIL=build proof "$OUT"
rc=$?
[ "$rc" = 0 ] && grep -q "^step build exited 1: fake failure of build$" "$OUT/table.md" &&
	grep -q "^step save exited 2: megacache: nothing to save" "$OUT/table.md" &&
	grep -q "| failed: same-root-load exited 2: megacache: .*cache.mcache: cannot open" "$OUT/table.md" &&
	grep -q "| failed: copy-cp exited 1: cp: " "$OUT/table.md" && ok ||
	bad "proof.sh after a failed build exited $rc: $(cat "$OUT/table.md")"

# What cannot run at all exits 2 and says why.
MEGACACHE=/bin/false PYTHON="$T/python" WORK="$T/work" sh "$PROOF" "$T/o2" >"$T/stdout" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "no megacache that runs" "$T/stdout" && ok || bad "no megacache: exit $rc"
PYTHON="$T/python" WORK="$T/work" sh "$PROOF" >"$T/stdout" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "^usage: " "$T/stdout" && ok || bad "no OUT: exit $rc"
WORK="$T" sh "$PROOF" "$T/o3" >"$T/stdout" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "lies inside WORK" "$T/stdout" && [ -f "$T/python" ] && ok ||
	bad "OUT inside WORK: exit $rc"
mkdir -p "$T/mine"
echo keep >"$T/mine/file"
MEGACACHE="$MEGACACHE" PYTHON="$T/python" WORK="$T/mine" sh "$PROOF" "$T/o4" >"$T/stdout" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "holds files of something else" "$T/stdout" && [ -f "$T/mine/file" ] &&
	ok || bad "a WORK of other files: exit $rc, $(ls "$T/mine")"

finish
