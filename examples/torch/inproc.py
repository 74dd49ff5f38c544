"""The Python package inside the training process, one phase per fresh process:

  python inproc.py PHASE --work DIR --out RESULT.json

cold        empty cache dir: compile and train one step, then save in-process twice:
            megacache.save() of the cache dirs (DIR/dirs.mcache) and
            megacache.pack_torch_artifacts() of torch.compiler.save_cache_artifacts()
            (DIR/bytes.mcache)
load        empty cache dir, megacache.load(DIR/dirs.mcache) before the first compile
torch-load  empty cache dir, torch.compiler.load_cache_artifacts() of the bytes
            megacache.torch_artifacts(DIR/bytes.mcache) gives back
bytes-load  empty cache dir, megacache.load(DIR/bytes.mcache) (torch's artifacts installed
            by megacache, no torch call)
warm        empty cache dir, `with megacache.warm(DIR/dirs.mcache, save_to=DIR/next.mcache)`
            around a job that also trains a wider MLP: only the new graphs are saved

Each phase sets TORCHINDUCTOR_CACHE_DIR and TRITON_HOME to fresh folders before torch is
imported and writes torch's cache counters and its timings to RESULT.json.
"""
import argparse
import json
import os
import time

import megacache


def mlp(torch, width):
    return torch.nn.Sequential(torch.nn.Linear(512, width), torch.nn.GELU(),
                               torch.nn.Linear(width, 512), torch.nn.LayerNorm(512)).cuda()


def first_step(torch, width):
    """Compiles a model and runs one training step; its seconds."""
    torch.manual_seed(0)
    model = mlp(torch, width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model)
    x = torch.randn(128, 512, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(step(x), x).backward()
    opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["cold", "load", "torch-load", "bytes-load", "warm"])
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    w = os.path.abspath(a.work)
    pub, sec = os.path.join(w, "k.pub"), os.path.join(w, "k.key")
    tag = "%s-%d" % (a.phase, os.getpid())
    cache = os.path.join(w, "cache-" + tag)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ["TRITON_HOME"] = os.path.join(w, "home-" + tag)
    os.environ.pop("TRITON_CACHE_DIR", None)
    r = {"phase": a.phase, "cache_dir": cache, "megacache": megacache.__version__}

    # Before torch is imported: what a launcher does first.
    if a.phase in ("load", "bytes-load"):
        name = "dirs.mcache" if a.phase == "load" else "bytes.mcache"
        t = time.perf_counter()
        rep = megacache.load(os.path.join(w, name), pub, progress=False)
        r["megacache_load_s"] = time.perf_counter() - t
        r["installed"] = rep.installed

    import torch
    from torch._dynamo.utils import counters
    r["torch"] = torch.__version__

    if a.phase == "torch-load":
        t = time.perf_counter()
        blob = megacache.torch_artifacts(os.path.join(w, "bytes.mcache"), pub, progress=False)
        r["megacache_bytes_s"] = time.perf_counter() - t
        t = time.perf_counter()
        torch.compiler.load_cache_artifacts(blob)
        r["torch_load_s"] = time.perf_counter() - t
        r["blob_bytes"] = len(blob)

    if a.phase == "warm":
        nxt = os.path.join(w, "next.mcache")
        with megacache.warm(os.path.join(w, "dirs.mcache"), pub, save_to=nxt, secret_key=sec,
                            progress=False) as ws:
            r["first_step_s"] = first_step(torch, 2048)
            r["wide_step_s"] = first_step(torch, 4096)
        r["warm_loaded"] = ws.loaded[0].installed
        r["warm_saved"] = None if ws.saved is None else {
            "artifacts": ws.saved.artifact_count,
            "added": sum(1 for c in ws.saved.changes if c.what == "added"),
            "changed": sum(1 for c in ws.saved.changes if c.what == "changed"),
            "types": sorted({c.type for c in ws.saved.changes})}
    else:
        r["first_step_s"] = first_step(torch, 2048)

    if a.phase == "cold":
        t = time.perf_counter()
        saved = megacache.save(os.path.join(w, "dirs.mcache"), sec, progress=False)
        r["save_dirs_s"] = time.perf_counter() - t
        r["save_dirs_artifacts"] = saved.artifact_count
        blob, _info = torch.compiler.save_cache_artifacts()
        with open(os.path.join(w, "torch-blob.bin"), "wb") as f:
            f.write(blob)
        t = time.perf_counter()
        packed = megacache.pack_torch_artifacts(blob, os.path.join(w, "bytes.mcache"), sec)
        r["save_bytes_s"] = time.perf_counter() - t
        r["save_bytes_artifacts"] = packed.artifact_count
        back = megacache.torch_artifacts(os.path.join(w, "bytes.mcache"), pub, progress=False)
        r["bytes_round_trip_equal"] = back == blob
        r["blob_bytes"] = len(blob)

    r["counters"] = {k: dict(counters[k]) for k in ("inductor", "aot_autograd") if k in counters}
    with open(a.out, "w") as f:
        json.dump(r, f, indent=1)
    c = r["counters"]
    print(json.dumps({"phase": a.phase, "first_step_s": round(r["first_step_s"], 3),
                      "fx_hit": c.get("inductor", {}).get("fxgraph_cache_hit", 0),
                      "fx_miss": c.get("inductor", {}).get("fxgraph_cache_miss", 0),
                      "aot_hit": c.get("aot_autograd", {}).get("autograd_cache_hit", 0),
                      "aot_miss": c.get("aot_autograd", {}).get("autograd_cache_miss", 0)}))


if __name__ == "__main__":
    main()
