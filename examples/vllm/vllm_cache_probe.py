#!/usr/bin/env python3
"""Build and read back a vLLM-shaped torch.compile cache root with torch alone.

vLLM (>= 0.11) on torch 2.11 keeps its compile cache under
$VLLM_CACHE_ROOT/torch_compile_cache/ in two shapes:

  JIT  <10 hex>/rank_<r>_<dp>/<prefix>/
         cache_key_factors.json, computation_graph.py, vllm_compile_cache.py,
         artifact_compile_range_<start>_<end>_subgraph_<i>   (file or folder)
  AOT  torch_aot_compile/<64 hex>/rank_<r>_<dp>/model
       torch_aot_compile/<64 hex>/inductor_cache/

This script makes both with the calls vLLM makes (standalone_compile and
CompiledArtifact.save for JIT, torch.compile(...).aot_compile and
save_compiled_function for AOT), then loads them back the way vLLM does, in
fresh processes with an empty Inductor cache.  vLLM itself is not needed.

  vllm_cache_probe.py build ROOT       make ROOT/torch_compile_cache/...
  vllm_cache_probe.py check ROOT       load every handle and AOT model, run, compare
  build and check take --json FILE     (their reports written to FILE as well);
  check takes --together               (every JIT hash folder in one process, not
                                       one process each)
  vllm_cache_probe.py probe WORK OUT   build, check, copy the root elsewhere,
                                       remove the original, check again;
                                       the report and samples go to OUT

Every step that imports torch runs in its own process, so that each one
starts with the Inductor cache folder it is given and nothing in memory.
"""

import ast
import hashlib
import json
import os
import pprint
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

PREFIX = "backbone"
RANKS = ("rank_0_0", "rank_1_0")
FORMATS = ("binary", "unpacked")
COMPILE_RANGE = (8, 8)  # one size: vLLM compiles those "from_example_inputs"
COMPILER_NAME = "inductor_standalone"
FORMAT_ENV = "VLLM_COMPILE_CACHE_SAVE_FORMAT"
REPORT_MARK = "REPORT-JSON "


# ---------------------------------------------------------------- the model

def model_fn(x, w1, w2):
    import torch

    h = torch.relu(x @ w1)
    return torch.nn.functional.gelu(h @ w2) * 0.5 + 1.0


def example_inputs():
    import torch

    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(COMPILE_RANGE[0], 64, device=dev)
    w1 = torch.randn(64, 128, device=dev) / 8
    w2 = torch.randn(128, 64, device=dev) / 11
    return x, w1, w2


def split_model():
    """make_fx the model and split it in two at the relu, as vLLM splits
    at its splitting ops; returns the split module and each piece's inputs."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.passes.split_module import split_module

    args = example_inputs()
    gm = make_fx(model_fn)(*args)
    part, cur = {}, 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        part[node.name] = cur
        if node.target == torch.ops.aten.relu.default:
            cur = 1
    split_gm = split_module(gm, gm, lambda n: part[n.name])

    inputs = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target, a, kw):
            inputs[target] = list(a)
            return super().call_module(target, a, kw)

    with torch.no_grad():
        Recorder(split_gm).run(*args)
    names = sorted(inputs)  # submod_0, submod_1
    return split_gm, names, inputs


# ---------------------------------------------------------------- helpers

def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def counters_now():
    from torch._dynamo.utils import counters

    return {k: dict(v) for k, v in counters.items()
            if k in ("inductor", "aot_autograd")}


def counters_delta(before, after):
    out = {}
    for cat, vals in after.items():
        for k, v in vals.items():
            d = v - before.get(cat, {}).get(k, 0)
            if d:
                out[f"{cat}.{k}"] = d
    return out


def tree_files(path):
    """{relative path: size} of every file under path (or of path itself)."""
    if os.path.isfile(path):
        return {".": os.path.getsize(path)}
    files = {}
    for d, _, names in os.walk(path):
        for n in names:
            p = os.path.join(d, n)
            files[os.path.relpath(p, path)] = os.path.getsize(p)
    return files


def compare(got, want):
    import torch
    from torch.utils._pytree import tree_leaves

    g = [t for t in tree_leaves(got) if isinstance(t, torch.Tensor)]
    w = [t for t in tree_leaves(want) if isinstance(t, torch.Tensor)]
    if len(g) != len(w):
        return {"match": False, "why": f"{len(g)} outputs, eager gave {len(w)}"}
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(g, w))
    ok = all(torch.allclose(a, b, atol=1e-3, rtol=1e-3) for a, b in zip(g, w))
    return {"match": ok, "max_abs_diff": diff}


def error_text(exc):
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return (f"{type(exc).__name__}: {str(exc)[:400]} "
            f"(at {os.path.basename(where.filename)}:{where.lineno} {where.line})")


def emit(report):
    print(REPORT_MARK + json.dumps(report, sort_keys=True), flush=True)


def jit_hash(fmt):
    """The four factors and the 10-hex folder name, as VllmBackend makes them
    (the factor values are stand-ins; the save format is in the config)."""
    from torch._inductor.codecache import CacheBase, torch_key

    env = {FORMAT_ENV: fmt, "VLLM_USE_STANDALONE_COMPILE": "1",
           "VLLM_USE_AOT_COMPILE": "1"}
    env_hash = sha(json.dumps(env, sort_keys=True))
    config_hash = sha(str(["probe-model", "compile_cache_save_format", fmt]))[:10]
    code_hash = sha("\n".join([os.path.abspath(__file__), open(__file__).read()]))
    compiler_hash = sha(str([CacheBase.get_system(), torch_key()]))[:10]
    factors = [env_hash, config_hash, code_hash, compiler_hash]
    key = sha(str(factors))[:10]
    meta = {"env": env, "config_hash": config_hash, "code_hash": code_hash,
            "compiler_hash": compiler_hash}
    return key, meta


def aot_hash():
    """64 hex, as vLLM's decorator makes it (stand-in factors)."""
    factors = ["probe-model", "aot_compile_hash_factors"]
    factors.append(sha(model_fn.__code__.co_code.hex()))
    return sha(str(factors))


def aot_dir(root):
    return os.path.join(root, "torch_compile_cache", "torch_aot_compile")


# ---------------------------------------------------------------- steps (each its own process)

def step_api(_root):
    import inspect

    import torch
    import torch._dynamo.aot_compile as aot

    try:
        import triton
        triton_version = triton.__version__
    except ImportError as exc:
        triton_version = error_text(exc)
    r = {"torch": torch.__version__, "triton": triton_version,
         "aot_compile_module_names": [n for n in dir(aot) if not n.startswith("__")],
         "enable_aot_compile_default":
             getattr(torch._dynamo.config, "enable_aot_compile", "absent"),
         "load_compiled_function":
             str(inspect.signature(torch.compiler.load_compiled_function)),
         "save_compiled_function":
             str(inspect.signature(aot.AOTCompiledFunction.save_compiled_function)),
         "standalone_compile":
             str(inspect.signature(torch._inductor.standalone_compile)),
         "CompiledArtifact.load":
             str(inspect.signature(torch._inductor.CompiledArtifact.load))}
    r["compiled_has_aot_compile_by_default"] = hasattr(
        torch.compile(model_fn, fullgraph=True), "aot_compile")
    r["cache_dir"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    emit({"step": "api", **r})


def write_jit_prefix(local, meta, split_gm, compiled, names, fmt):
    """What VllmBackend and CompilerManager write in one <prefix>/ folder."""
    os.makedirs(local, exist_ok=True)
    meta_path = os.path.join(local, "cache_key_factors.json")
    if not os.path.exists(meta_path):
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
    graph_path = os.path.join(local, "computation_graph.py")
    if not os.path.exists(graph_path):
        src = ("from __future__ import annotations\nimport torch\n"
               + split_gm.print_readable(print_output=False))
        with open(graph_path, "w") as f:
            f.write(src.replace("<lambda>", "GraphModule"))
    cache = {}
    start, end = COMPILE_RANGE
    for index, name in enumerate(names):
        key = f"artifact_compile_range_{start}_{end}_subgraph_{index}"
        path = os.path.join(local, key)
        compiled[name].save(path=path, format=fmt)
        cache[((start, end), index, COMPILER_NAME)] = (key, path)
    printer = pprint.PrettyPrinter(indent=4)
    data = printer.pformat(cache)
    with open(os.path.join(local, "vllm_compile_cache.py"), "w") as f:
        f.write(data)


def step_build_jit(root):
    import torch

    split_gm, names, inputs = split_model()
    compiled, times = {}, {}
    before = counters_now()
    for name in names:
        t0 = time.perf_counter()
        compiled[name] = torch._inductor.standalone_compile(
            getattr(split_gm, name), inputs[name],
            dynamic_shapes="from_example_inputs")
        times[name] = round(time.perf_counter() - t0, 3)
    r = {"step": "build-jit", "compile_s": times,
         "counters": counters_delta(before, counters_now()), "hash_dirs": {}}
    for fmt in FORMATS:
        key, meta = jit_hash(fmt)
        r["hash_dirs"][fmt] = key
        try:
            for rank in RANKS:
                local = os.path.join(root, "torch_compile_cache", key, rank, PREFIX)
                write_jit_prefix(local, meta, split_gm, compiled, names, fmt)
        except Exception as exc:
            r["error_" + fmt] = error_text(exc)
    emit(r)


def step_build_aot(root):
    import torch

    h = aot_hash()
    base = os.path.join(aot_dir(root), h)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(base, "inductor_cache")
    if hasattr(torch._dynamo.config, "enable_aot_compile"):
        torch._dynamo.config.enable_aot_compile = True
    args = example_inputs()
    before = counters_now()
    r = {"step": "build-aot", "hash": h}
    try:
        t0 = time.perf_counter()
        fn = torch.compile(model_fn, fullgraph=True).aot_compile((args, {}))
        r["compile_s"] = round(time.perf_counter() - t0, 3)
        r["type"] = type(fn).__module__ + "." + type(fn).__name__
        r["vs_eager"] = compare(fn(*args), model_fn(*args))
        for rank in RANKS:
            d = os.path.join(base, rank)
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "model")
            tmp = f"{path}.{os.getpid()}.tmp"
            fn.save_compiled_function(tmp)
            os.replace(tmp, path)
    except Exception as exc:
        r["error"] = error_text(exc)
    r["counters"] = counters_delta(before, counters_now())
    emit(r)


def handle_of(value):
    """vLLM has stored the raw handle and, later, {"graph_handle": ...}."""
    if isinstance(value, dict):
        return value["graph_handle"]
    return value


def load_one(local, key, value, fmt, rewrite, split_gm, names, inputs):
    import torch

    _, index, _ = key
    handle = handle_of(value)
    path = handle[1]
    if rewrite:
        path = os.path.join(local, handle[0])
    here = os.path.join(local, handle[0])
    r = {"key": repr(key), "handle_path": handle[1], "loaded_from": path,
         "handle_inside_read_root": os.path.realpath(handle[1]).startswith(
             os.path.realpath(local) + os.sep)}
    watch = {p for p in (path, here) if os.path.isdir(p)}
    files_before = {p: tree_files(p) for p in watch}
    before = counters_now()
    args = inputs[names[index]]
    try:
        t0 = time.perf_counter()
        art = torch._inductor.CompiledArtifact.load(path=path, format=fmt)
        t1 = time.perf_counter()
        got = art(*args)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        art(*args)
        torch.cuda.synchronize()
        t3 = time.perf_counter()
    except Exception as exc:  # report what vLLM would have raised
        r["error"] = error_text(exc)
        r["counters"] = counters_delta(before, counters_now())
        return r
    with torch.no_grad():
        want = getattr(split_gm, names[index])(*args)
    r.update({"load_s": round(t1 - t0, 4), "first_call_s": round(t2 - t1, 4),
              "load_and_first_call_s": round(t2 - t0, 4),
              "second_call_s": round(t3 - t2, 4), "vs_eager": compare(got, want),
              "counters": counters_delta(before, counters_now())})
    for p in watch:
        after = tree_files(p)
        added = sorted(set(after) - set(files_before[p]))
        r["added_under_" + ("loaded_path" if p == path else "read_root")] = added[:40]
    return r


def jit_hashes(root):
    base = os.path.join(root, "torch_compile_cache")
    return [n for n in sorted(os.listdir(base)) if len(n) == 10]


def step_check_jit(root, hash_key, rewrite):
    """One JIT hash folder (every one for "all"), as CompilerManager.initialize_cache
    and load do."""
    split_gm, names, inputs = split_model()
    keys = jit_hashes(root) if hash_key == "all" else [hash_key]
    out = {"step": "check-jit", "hash": hash_key, "rewrite": rewrite, "prefixes": []}
    ranks = [(k, r) for k in keys
             for r in sorted(os.listdir(os.path.join(root, "torch_compile_cache", k)))]
    for key, rank in ranks:
        local = os.path.join(root, "torch_compile_cache", key, rank, PREFIX)
        with open(os.path.join(local, "cache_key_factors.json")) as f:
            fmt = json.load(f)["env"][FORMAT_ENV]
        with open(os.path.join(local, "vllm_compile_cache.py")) as f:
            cache = ast.literal_eval(f.read())
        entries = [load_one(local, k, cache[k], fmt, rewrite, split_gm, names, inputs)
                   for k in sorted(cache)]
        out["prefixes"].append({"dir": local, "format": fmt, "entries": entries})
    out["counters_total"] = counters_now()
    cache_dir = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    out["inductor_cache_dir_files"] = len(tree_files(cache_dir))
    emit(out)


def step_check_aot(root):
    import torch

    args = example_inputs()
    want = model_fn(*args)
    out = {"step": "check-aot", "models": []}
    for h in sorted(os.listdir(aot_dir(root))):
        for rank in RANKS:
            path = os.path.join(aot_dir(root), h, rank, "model")
            r = {"model": path}
            before = counters_now()
            try:
                t0 = time.perf_counter()
                with open(path, "rb") as f:
                    fn = torch.compiler.load_compiled_function(f, f_globals=globals())
                t1 = time.perf_counter()
                got = fn(*args)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                r.update({"load_s": round(t1 - t0, 4), "first_call_s": round(t2 - t1, 4),
                          "vs_eager": compare(got, want)})
            except Exception as exc:
                r["error"] = error_text(exc)
            r["counters"] = counters_delta(before, counters_now())
            out["models"].append(r)
    cache_dir = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    out["inductor_cache_dir_after"] = sorted(tree_files(cache_dir))[:60]
    emit(out)


STEPS = {"api": step_api, "build-jit": step_build_jit, "build-aot": step_build_aot,
         "check-aot": step_check_aot}


# ---------------------------------------------------------------- driver

def run_step(step, root, env_dirs, *extra):
    """Run one step in a fresh python with its own Inductor and Triton cache
    folders; returns the step's report (or its failure)."""
    env = dict(os.environ)
    for var, d in env_dirs.items():
        os.makedirs(d, exist_ok=True)
        env[var] = d
    cmd = [sys.executable, os.path.abspath(__file__), "_step", step, root, *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = round(time.perf_counter() - t0, 2)
    sys.stderr.write(p.stderr[-4000:] if p.returncode else "")
    for line in p.stdout.splitlines():
        if line.startswith(REPORT_MARK):
            rep = json.loads(line[len(REPORT_MARK):])
            rep["process_wall_s"] = wall
            return rep
    return {"step": step, "failed": p.returncode, "process_wall_s": wall,
            "stderr_tail": p.stderr[-3000:]}


def fresh_dirs(scratch, tag):
    """An empty Inductor cache folder.  TRITON_CACHE_DIR is left as it is, as
    vLLM leaves it in standalone mode: when it is set, Inductor's kernels go
    there instead of <inductor cache>/triton/<device>/."""
    d = tempfile.mkdtemp(prefix=tag + "-", dir=scratch)
    return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor")}


def build(root, scratch):
    reps = [run_step("api", root, fresh_dirs(scratch, "api")),
            run_step("build-jit", root, fresh_dirs(scratch, "build-jit"))]
    dirs = fresh_dirs(scratch, "build-aot")
    dirs["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(aot_dir(root), aot_hash(), "inductor_cache")
    reps.append(run_step("build-aot", root, dirs))
    return reps


def check(root, scratch, tag, rewrite=False, triton_dir=False, together=False):
    """Check every JIT hash folder (and, unless rewriting, the AOT models);
    rewrite loads <prefix>/<key> instead of the stored absolute path;
    triton_dir sets TRITON_CACHE_DIR to a fresh folder as well; together checks
    all JIT hash folders in one process instead of one process each."""
    reps = []
    for name in ["all"] if together else jit_hashes(root):
        extra = [name, "rewrite"] if rewrite else [name, "as-stored"]
        dirs = fresh_dirs(scratch, tag)
        if triton_dir:
            dirs["TRITON_CACHE_DIR"] = dirs["TORCHINDUCTOR_CACHE_DIR"] + "-triton"
        reps.append(run_step("check-jit", root, dirs, *extra))
    if not rewrite:
        reps.append(run_step("check-aot", root, fresh_dirs(scratch, tag)))
    return reps


def grp_survey(root, roots):
    """Where the child_paths of every Triton __grp__ file under root point."""
    out = []
    for d, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if not is_grp(d, n):
                continue
            with open(os.path.join(d, n)) as f:
                paths = list(json.load(f)["child_paths"].values())
            out.append({"grp": os.path.relpath(os.path.join(d, n), root),
                        "children": len(paths),
                        "children_exist": sum(os.path.exists(p) for p in paths),
                        "point_into": sorted({r for p in paths for r in roots
                                              if p.startswith(r + os.sep)})})
    return out


def listing(root):
    p = subprocess.run(["find", root, "-printf", "%y %s %P\n"],
                       capture_output=True, text=True)
    return "".join(sorted(p.stdout.splitlines(keepends=True), key=lambda l: l.split(" ", 2)[2]))


def first(root, test):
    for d, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            if test(d, n):
                return os.path.join(d, n)
    return None


def hex_head(path, n=200):
    data = open(path, "rb").read()
    lines = [f"file: {path}", f"size: {len(data)}"]
    for off in range(0, min(n, len(data)), 16):
        chunk = data[off:off + 16]
        lines.append(f"{off:08x}  {chunk.hex(' '):<47}  "
                     + "".join(chr(c) if 32 <= c < 127 else "." for c in chunk))
    return "\n".join(lines) + "\n"


def is_grp(_d, n):
    return n.startswith("__grp__") and n.endswith(".json")


def collect(root, scratch, out):
    """The sample files the probe brings back."""
    binary_vcc = first(root, lambda d, n: n == "vllm_compile_cache.py"
                       and "rank_0_0" in d and any(
                           os.path.isfile(os.path.join(d, m))
                           for m in os.listdir(d) if m.startswith("artifact_")))
    copies = {"vllm_compile_cache.py": binary_vcc,
              "cache_key_factors.json": first(root, lambda d, n: n == "cache_key_factors.json"),
              "computation_graph.py": first(root, lambda d, n: n == "computation_graph.py"),
              "grp.json": first(root, is_grp) or first(scratch, is_grp)}
    found = {}
    for name, src in copies.items():
        found[name] = src
        if src:
            shutil.copyfile(src, os.path.join(out, name))
    art = first(root, lambda d, n: n.startswith("artifact_compile_range_"))
    found["binary_artifact"] = art
    if art:
        with open(os.path.join(out, "binary_head.txt"), "w") as f:
            f.write(hex_head(art))
    return found


def probe(work, out):
    os.makedirs(out, exist_ok=True)
    scratch = os.path.join(work, "scratch")
    root = os.path.join(work, "a", "vllm")
    moved = os.path.join(work, "b", "vllm")
    for d in (scratch, root):
        os.makedirs(d, exist_ok=True)
    pristine = os.path.join(work, "pristine-copy", "vllm")
    os.makedirs(os.path.dirname(moved), exist_ok=True)
    os.makedirs(os.path.dirname(pristine), exist_ok=True)
    report = {"root": root, "copy": moved, "pristine_copy": pristine}
    lists = []

    def save():  # after every phase, so that a failure keeps what came before
        with open(os.path.join(out, "find_root.txt"), "w") as f:
            f.write("\n".join(lists))
        with open(os.path.join(out, "report.json"), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)

    report["build"] = build(root, scratch)
    lists.append("== built root: " + root + "\n" + listing(root))
    subprocess.run(["cp", "-a", root, pristine], check=True)
    save()
    report["check"] = check(root, scratch, "check")
    lists.append("== same root after check\n" + listing(root))
    report["samples"] = collect(root, scratch, out)
    grp = report["samples"]["grp.json"]
    if grp:
        report["grp_json"] = json.load(open(grp))
    save()
    subprocess.run(["cp", "-a", root, moved], check=True)
    report["copy_old_present"] = check(moved, scratch, "copy-old")
    lists.append("== original root after the copy was checked\n" + listing(root))
    save()
    shutil.rmtree(root)
    report["copy_old_removed"] = check(moved, scratch, "copy-gone")
    report["copy_old_removed_rewritten"] = check(moved, scratch, "copy-fix", rewrite=True)
    lists.append("== copy after its checks: " + moved + "\n" + listing(moved))
    roots = [root, moved, pristine]
    report["grp_survey_copy"] = grp_survey(moved, roots)
    save()
    # a copy taken before any load: first with TRITON_CACHE_DIR set, then as vLLM runs
    report["pristine_rewritten_triton_dir"] = check(pristine, scratch, "pristine-t",
                                                    rewrite=True, triton_dir=True)
    report["pristine_rewritten"] = check(pristine, scratch, "pristine", rewrite=True)
    report["grp_survey_pristine"] = grp_survey(pristine, roots)
    lists.append("== pristine copy after its checks: " + pristine + "\n" + listing(pristine))
    save()
    print(json.dumps(report, indent=1, sort_keys=True))


def parse_opts(cmd, args):
    """The options of build (--json FILE) and check (--json FILE, --together);
    None for another command or an unknown option."""
    if cmd not in ("build", "check"):
        return None
    opts, rest = {"json": None, "together": False}, list(args)
    while rest:
        a = rest.pop(0)
        if a == "--json" and rest:
            opts["json"] = rest.pop(0)
        elif a == "--together" and cmd == "check":
            opts["together"] = True
        else:
            return None
    return opts


def main(argv):
    if len(argv) >= 3 and argv[0] == "_step":
        step, root = argv[1], argv[2]
        if step == "check-jit":
            step_check_jit(root, argv[3], argv[4] == "rewrite")
        else:
            STEPS[step](root)
        return 0
    opts = parse_opts(argv[0], argv[2:]) if len(argv) >= 2 else None
    if opts is not None:
        root = os.path.abspath(argv[1])
        scratch = tempfile.mkdtemp(prefix="vllm-probe-")
        reps = (build(root, scratch) if argv[0] == "build"
                else check(root, scratch, "check", together=opts["together"]))
        print(json.dumps(reps, indent=1, sort_keys=True))
        if opts["json"]:
            with open(opts["json"], "w") as f:
                json.dump(reps, f, indent=1, sort_keys=True)
        return 0
    if len(argv) == 3 and argv[0] == "probe":
        probe(os.path.abspath(argv[1]), os.path.abspath(argv[2]))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception:
        traceback.print_exc()
        sys.exit(1)
