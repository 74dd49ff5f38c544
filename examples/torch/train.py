"""A training job as a launcher runs it: torch.compile'd steps of an MLP, and a user
@triton.jit kernel, with nothing megacache-specific in it.

  python train.py [--wide | --kernel-only] --out RESULT.json

--wide also trains a second, wider MLP (new graphs for a job that grew); --kernel-only
runs the user kernel and nothing else. The result
holds torch's cache counters and, for the user kernel, whether Triton found it in its
cache (from Triton's compilation listener).
"""
import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wide", action="store_true")
    ap.add_argument("--kernel-only", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import torch
    import triton
    import triton.language as tl
    from torch._dynamo.utils import counters

    compiles = []

    def listener(**kw):
        compiles.append({"name": kw["metadata"]["name"] if isinstance(kw.get("metadata"), dict)
                         else str(kw.get("src")), "cache_hit": kw.get("cache_hit")})

    triton.knobs.compilation.listener = listener

    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0 + tl.load(y_ptr + i, mask=m), mask=m)

    dev = "cuda"
    torch.manual_seed(0)

    # The user kernel first, in a process where torch has not compiled anything yet.
    a = torch.randn(4096, device=dev)
    b = torch.randn(4096, device=dev)
    c = torch.empty_like(a)
    t = time.perf_counter()
    scale_add[(4,)](a, b, c, a.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    kernel_s = time.perf_counter() - t
    assert torch.allclose(c, a * 2 + b)
    user_kernel = [x for x in compiles if x["name"] == "scale_add"]

    def mlp(width):
        return torch.nn.Sequential(torch.nn.Linear(512, width), torch.nn.GELU(),
                                   torch.nn.Linear(width, 512), torch.nn.LayerNorm(512)).to(dev)

    def train(model, steps=2):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        step = torch.compile(model)
        x = torch.randn(128, 512, device=dev)
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(step(x), x).backward()
            opt.step()
        torch.cuda.synchronize()

    t = time.perf_counter()
    if not args.kernel_only:
        train(mlp(2048))
    if args.wide:
        train(mlp(4096))
    train_s = time.perf_counter() - t

    result = {
        "wide": args.wide,
        "env": {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                                "TMPDIR", "HOME")},
        "user_kernel_compiles": user_kernel,
        "user_kernel_s": kernel_s,
        "train_s": train_s,
        "counters": {k: dict(counters[k]) for k in ("inductor", "aot_autograd") if k in counters},
        "torch": torch.__version__,
        "triton": triton.__version__,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"fx_hit": result["counters"].get("inductor", {}).get("fxgraph_cache_hit", 0),
                      "fx_miss": result["counters"].get("inductor", {}).get("fxgraph_cache_miss", 0),
                      "user_kernel": user_kernel}))


if __name__ == "__main__":
    main()
