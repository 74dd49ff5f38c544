"""One job of the fidelity proof (examples/torch/fidelity.sh), in a fresh process:

  python fidelity.py JOB MODE --out RESULT.json [--blob BLOB]

JOB:
  mlp         a static MLP (Linear, GELU, Linear, LayerNorm) under torch.compile, one
              training step (forward, backward, optimizer)
  blocks      three transformer blocks (attention, MLP), each compiled, one training step
  guard       a torch.compile(dynamic=True) function with a guard on the batch size,
              called with batches 64, 16, 128, 8 and a backward through each call: two
              compiles that share their keys, told apart by the guards stored with them
  autotune    a small matmul model under mode="max-autotune-no-cudagraphs", forward and
              backward (GEMM autotuning; TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=TRITON
              makes it cheaper, for every run alike)
  userkernel  a user @triton.jit kernel launched once, nothing else
  precompile  the mlp job with torch's precompile cache on: fidelity.sh sets
              TORCH_CACHING_PRECOMPILE=1 for each of its runs, and dynamo saves and
              loads the whole compiled frame (<cache dir>/dynamo/<key>/entry)
MODE:
  cold        run the job; write torch's save_cache_artifacts() blob to --blob (not when
              torch recorded nothing) and facts for `megacache pack --labels-json` to
              BLOB.labels.json
  warm        run the job with whatever the cache folders hold
  torch-load  torch.compiler.load_cache_artifacts(--blob), then run the job

The cache folders are the environment's: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR
(and the remote-cache variables, for the fleet rows). RESULT.json holds torch's cache
counters (inductor, aot_autograd, and dynamo's precompile cache: dynamo_cache),
Triton's cache_hit for the user kernel, the job's seconds, what the cache
folders hold afterwards (FX graph and AOTAutograd keys, entries per key) and versions.
"""
import argparse
import json
import os
import time

def job_mlp(torch, _triton):
    """One training step of a static MLP, as examples/torch/model.py."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model)
    x = torch.randn(256, 1024, device="cuda")
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(step(x), x).backward()
    opt.step()


def job_blocks(torch, _triton):
    """A training step of three transformer blocks (attention and MLP, pre-norm), each
    compiled on its own; their MLPs differ in width (2, 3 and 4 times the model's), so
    that each compile has graphs of its own, forward and backward."""
    torch.manual_seed(0)
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d, heads, wide):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, wide * d), nn.GELU(), nn.Linear(wide * d, d))

        def forward(self, x):
            h = self.n1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.n2(x))

    blocks = [Block(256, 4, wide).cuda() for wide in (2, 3, 4)]
    params = [p for b in blocks for p in b.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    steps = [torch.compile(b) for b in blocks]
    x = torch.randn(8, 128, 256, device="cuda")
    opt.zero_grad(set_to_none=True)
    y = x
    for step in steps:
        y = step(y)
    y.square().mean().backward()
    opt.step()


def job_guard(torch, _triton):
    """Two compiles under one key: a guard on the batch size (s0 > 32, s0 <= 32)."""
    torch.manual_seed(0)

    # Both sides of the branch trace to the same ops on purpose: what tells the two
    # compiles apart is then only the shape guard stored with each cache entry, so the
    # forward and backward FX graph keys and the AOTAutograd key each hold two entries,
    # one per side: what a store of one value per key cannot hold both of.
    @torch.compile(dynamic=True)
    def loss(x, w):
        if x.shape[0] > 32:
            y = torch.nn.functional.gelu(x @ w)
        else:
            y = torch.nn.functional.gelu(x @ w)
        return (y * y).mean()

    w = torch.randn(64, 64, device="cuda", requires_grad=True)
    for n in (64, 16, 128, 8):
        x = torch.randn(n, 64, device="cuda", requires_grad=True)
        loss(x, w).backward()


def job_autotune(torch, _triton):
    """A small matmul model under max-autotune (no CUDA graphs), forward and backward."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256)).cuda()
    step = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(256, 256, device="cuda")
    step(x).square().mean().backward()


def job_userkernel(torch, triton):
    """A user @triton.jit kernel (examples/torch/train.py's scale_add), launched once."""
    import triton.language as tl

    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0 + tl.load(y_ptr + i, mask=m), mask=m)

    torch.manual_seed(0)
    a = torch.randn(4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    c = torch.empty_like(a)
    scale_add[(4,)](a, b, c, a.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.allclose(c, a * 2 + b)


def layout(root):
    """The FX graph and AOTAutograd keys under torch's cache folder, entries per key:
    fxgraph/<k[1:3]>/<key>/<entry> and aotautograd/<key>/<entry>."""
    out = {}
    for kind, depth in (("fxgraph", 2), ("aotautograd", 1)):
        keys = {}
        base = os.path.join(root or "", kind)
        for dirpath, _dirs, files in os.walk(base):
            rel = os.path.relpath(dirpath, base)
            parts = [] if rel == "." else rel.split(os.sep)
            if len(parts) == depth and files:
                keys[parts[-1]] = len(files)
        out[kind] = keys
    return out


def artifact_counts(info):
    """Artifacts per type of a torch CacheInfo (None where torch gives none)."""
    artifacts = getattr(info, "artifacts", None)
    if artifacts is None:
        return None
    return {str(k): len(v) for k, v in artifacts.items()}


JOBS = {"mlp": job_mlp, "blocks": job_blocks, "guard": job_guard, "autotune": job_autotune,
        "userkernel": job_userkernel, "precompile": job_mlp}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("job", choices=JOBS)
    ap.add_argument("mode", choices=["cold", "warm", "torch-load"])
    ap.add_argument("--blob")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.mode == "torch-load" and not args.blob:
        ap.error("torch-load needs --blob")

    t0 = time.perf_counter()
    import torch
    import triton
    from torch._dynamo.utils import counters
    import_s = time.perf_counter() - t0

    # What Triton says of each compile in this process (the user kernel's cache_hit).
    compiles = []

    def listener(**kw):
        md = kw.get("metadata")
        compiles.append({"name": md.get("name") if isinstance(md, dict) else str(kw.get("src")),
                         "cache_hit": kw.get("cache_hit")})

    triton.knobs.compilation.listener = listener

    load_s, load_info = None, None
    if args.mode == "torch-load":
        with open(args.blob, "rb") as f:
            blob = f.read()
        t = time.perf_counter()
        load_info = artifact_counts(torch.compiler.load_cache_artifacts(blob))
        load_s = time.perf_counter() - t

    torch.cuda.init()
    torch.cuda.synchronize()
    t = time.perf_counter()
    JOBS[args.job](torch, triton)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t

    cache_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    result = {
        "job": args.job,
        "mode": args.mode,
        "first_step_s": first_s,
        "import_torch_s": import_s,
        "torch_load_cache_artifacts_s": load_s,
        "torch_load_artifacts": load_info,
        "counters": {k: dict(counters[k]) for k in ("inductor", "aot_autograd", "dynamo_cache")
                     if k in counters},
        "layout": layout(cache_dir),
        "env": {k: os.environ.get(k) for k in (
            "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_REDIS_URL",
            "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
            "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", "TORCH_CACHING_PRECOMPILE")},
        "caching_precompile": bool(torch._dynamo.config.caching_precompile),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
    }
    if args.job == "userkernel":
        result["user_kernel"] = [c for c in compiles if c["name"] == "scale_add"]

    if args.mode == "cold" and args.blob:
        saved = torch.compiler.save_cache_artifacts()
        counts = artifact_counts(saved[1]) if saved is not None else {}
        # A job torch compiled nothing for (userkernel) leaves no blob: the shell then
        # skips the rows that need one.
        if saved is not None and (counts is None or sum(counts.values()) > 0):
            with open(args.blob, "wb") as f:
                f.write(saved[0])
            result["blob_bytes"] = len(saved[0])
        elif os.path.exists(args.blob):
            os.remove(args.blob)
        result["blob_artifacts"] = counts
        # Facts about the environment, for `megacache pack --labels-json`.
        with open(args.blob + ".labels.json", "w") as f:
            json.dump({"torch": torch.__version__, "triton": triton.__version__,
                       "cuda": str(torch.version.cuda), "gpu": torch.cuda.get_device_name(0),
                       "job": args.job}, f)

    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    ind, ag = result["counters"].get("inductor", {}), result["counters"].get("aot_autograd", {})
    dc = result["counters"].get("dynamo_cache", {})
    print(json.dumps({"job": args.job, "mode": args.mode, "first_step_s": round(first_s, 3),
                      "fx": [ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0)],
                      "aot": [ag.get("autograd_cache_hit", 0), ag.get("autograd_cache_miss", 0)],
                      "dynamo": [dc.get("dynamo_cache_hit", 0), dc.get("dynamo_cache_miss", 0)],
                      "user_kernel": result.get("user_kernel")}))


if __name__ == "__main__":
    main()
