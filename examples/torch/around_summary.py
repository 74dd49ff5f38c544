"""Reads the results of around.sh and writes summary.md; exits 1 when a warm run
compiled something it should have found in its cache."""
import json
import os
import sys

R = sys.argv[1]


def load(name):
    with open(os.path.join(R, name)) as f:
        return json.load(f)


def fx(r, what):
    return r["counters"].get("inductor", {}).get("fxgraph_cache_" + what, 0)


def aot(r, what):
    return r["counters"].get("aot_autograd", {}).get("autograd_cache_" + what, 0)


def kernel(r):
    return ",".join(str(c["cache_hit"]) for c in r["user_kernel_compiles"]) or "-"


rows, bad = [], []
for name, label, warm in [("m1-cold.json", "machine 1: cold job, then save", False),
                          ("m2-warm.json", "machine 2: load, then job", True),
                          ("m3-run.json", "machine 3: run around the grown job", None),
                          ("m4-run.json", "machine 4: run with both bundles", True),
                          ("t-cold.json", "Triton kernel compiled in folder A", False),
                          ("t-copied.json", "A copied to C (cp -a), A removed", None),
                          ("t-loaded.json", "saved from A, A removed, loaded into B", True)]:
    r = load(name)
    rows.append("| %s | %d | %d | %d | %d | %s | %.2f |" % (
        label, fx(r, "hit"), fx(r, "miss"), aot(r, "hit"), aot(r, "miss"), kernel(r), r["train_s"]))
    if warm and (fx(r, "miss") or aot(r, "miss") or kernel(r) != "True"):
        bad.append(label)

m1, m3 = load("m1-cold.json"), load("m3-run.json")
if fx(m3, "hit") != fx(m1, "miss") or kernel(m3) != "True":
    bad.append("machine 3 did not hit the first job's graphs")
if kernel(load("t-cold.json")) != "False":
    bad.append("the Triton kernel did not compile cold")
diff = load("m3-diff.json")
added = len(diff.get("added", []))
changed = len(diff.get("changed", []))
lines = ["# around.sh on %s, torch %s, triton %s" % (os.uname().nodename, m1["torch"], m1["triton"]),
         "",
         "| run | fxgraph hit | fxgraph miss | autograd hit | autograd miss | user kernel cache_hit | train s |",
         "|---|---|---|---|---|---|---|"] + rows + [
         "",
         "next.mcache against b.mcache: %d added, %d changed (what machine 3's job added)." % (added, changed),
         "",
         "FAILED: " + "; ".join(bad) if bad else "all warm runs hit every cache they should"]
text = "\n".join(lines) + "\n"
with open(os.path.join(R, "summary.md"), "w") as f:
    f.write(text)
print(text)
sys.exit(1 if bad else 0)
