"""Summarizes the results of inproc.sh as a Markdown table (printed and written to
summary.md in the results folder)."""
import glob
import json
import os
import statistics
import sys


def main():
    d = sys.argv[1]
    rows = []
    for p in sorted(glob.glob(os.path.join(d, "*-*.json"))):
        r = json.load(open(p))
        c = r.get("counters", {})
        ind, aot = c.get("inductor", {}), c.get("aot_autograd", {})
        rows.append((os.path.basename(p)[:-5], r, ind, aot))
    out = ["| run | first step (s) | fxgraph hit/miss | autograd hit/miss | install (s) |",
           "|---|---|---|---|---|"]
    for name, r, ind, aot in rows:
        inst = r.get("megacache_load_s")
        if "torch_load_s" in r:
            inst = r["torch_load_s"] + r["megacache_bytes_s"]
        out.append("| %s | %.3f | %d/%d | %d/%d | %s |" % (
            name, r["first_step_s"], ind.get("fxgraph_cache_hit", 0),
            ind.get("fxgraph_cache_miss", 0), aot.get("autograd_cache_hit", 0),
            aot.get("autograd_cache_miss", 0), "-" if inst is None else "%.3f" % inst))
    by = {}
    for name, r, _, _ in rows:
        by.setdefault(r["phase"], []).append(r)

    def med(phase, key):
        vals = [r[key] for r in by.get(phase, []) if key in r]
        return statistics.median(vals) if vals else float("nan")
    cold, load = med("cold", "first_step_s"), med("load", "first_step_s")
    tl = med("torch-load", "first_step_s")
    out.append("")
    out.append("median first step: cold %.3f s, megacache.load %.3f s (%.1fx faster), "
               "torch load_cache_artifacts %.3f s" % (cold, load, cold / load, tl))
    out.append("median install: megacache.load %.3f s, torch_artifacts + "
               "load_cache_artifacts %.3f s (%.1fx)" % (
                   med("load", "megacache_load_s"),
                   med("torch-load", "torch_load_s") + med("torch-load", "megacache_bytes_s"),
                   (med("torch-load", "torch_load_s") + med("torch-load", "megacache_bytes_s"))
                   / med("load", "megacache_load_s")))
    for r in by.get("cold", []):
        out.append("cold: saved %d artifacts from the dirs, %d from torch's bytes (%d bytes); "
                   "bytes back equal: %s" % (r["save_dirs_artifacts"], r["save_bytes_artifacts"],
                                             r["blob_bytes"], r["bytes_round_trip_equal"]))
    for r in by.get("warm", []):
        out.append("warm: loaded %d, saved %s" % (r["warm_loaded"], json.dumps(r["warm_saved"])))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
