"""A small training step under torch.compile, timed cold or warm.

Modes:
  cold        compile with an empty cache dir, then save torch's cache blob (--blob)
  warm        compile with whatever the cache dir holds (filled by `megacache load`)
  torch-load  load --blob with torch.compiler.load_cache_artifacts(), then compile

Set TORCHINDUCTOR_CACHE_DIR before starting; the result (first-step time, cache
counters, environment) is written as JSON to --out.
"""
import argparse
import json
import os
import time


def build(torch):
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(1024, 4096)
            self.l2 = torch.nn.Linear(4096, 1024)
            self.norm = torch.nn.LayerNorm(1024)

        def forward(self, x):
            return self.norm(self.l2(torch.nn.functional.gelu(self.l1(x))) + x)

    return MLP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["cold", "warm", "torch-load"])
    ap.add_argument("--blob")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    t0 = time.perf_counter()
    import torch
    from torch._dynamo.utils import counters
    import_s = time.perf_counter() - t0

    load_s = None
    if args.mode == "torch-load":
        with open(args.blob, "rb") as f:
            blob = f.read()
        t = time.perf_counter()
        torch.compiler.load_cache_artifacts(blob)
        load_s = time.perf_counter() - t

    torch.manual_seed(0)
    dev = "cuda"
    model = build(torch)().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = torch.compile(model)
    x = torch.randn(256, 1024, device=dev)
    y = torch.randn(256, 1024, device=dev)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(step(x), y)
        loss.backward()
        opt.step()
        return loss

    torch.cuda.synchronize()
    t = time.perf_counter()
    train_step()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    train_step()
    torch.cuda.synchronize()
    second_s = time.perf_counter() - t

    result = {
        "mode": args.mode,
        "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "first_step_s": first_s,
        "second_step_s": second_s,
        "import_torch_s": import_s,
        "torch_load_cache_artifacts_s": load_s,
        "counters": {k: dict(counters[k]) for k in ("inductor", "aot_autograd") if k in counters},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
    }
    if args.mode == "cold":
        blob, _info = torch.compiler.save_cache_artifacts()
        with open(args.blob, "wb") as f:
            f.write(blob)
        result["blob_bytes"] = len(blob)
        # Facts about the environment, for `megacache pack --labels-json`.
        with open(args.blob + ".labels.json", "w") as f:
            json.dump({"torch": torch.__version__, "cuda": str(torch.version.cuda),
                       "gpu": torch.cuda.get_device_name(0)}, f)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
