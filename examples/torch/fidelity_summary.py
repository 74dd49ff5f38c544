"""Turns the results of fidelity.sh (one JOB) into a Markdown table, with a note per row,
and checks the rule: each megacache row that runs on a local restore (save -> load, run
-b save.mcache --save-used, a load of the used bundle alone, pack --from-torch -> load)
gives the same FX graph hits and misses, AOTAutograd hits and misses, dynamo precompile
hits and misses and user kernel hits as the cp -a row; exit status 1 if not. The fleet
rows are told, with what torch 2.11 does that explains them, and decide nothing. A second
table sets the full bundle (save) beside the bundle of what the job used.

  python fidelity_summary.py WORK_DIR JOB
"""
import json
import os
import sys

# (row, what restored the cache, its part in the check)
ROWS = (
    ("cold", "cold run, empty folders", "ref"),
    ("same-dir", "same dir (the untouched cold folders)", "info"),
    ("cp", "`cp -a` back into the same paths", "base"),
    ("torch-load", "torch `load_cache_artifacts` of the cold run's blob", "info"),
    ("save-load", "megacache `save` -> `load`", "local"),
    ("run-used", "megacache `run -b` of that bundle, `--save-used`", "local"),
    ("used-load", "megacache `load` of the used bundle alone", "local"),
    ("pack-load", "megacache `pack --from-torch` -> `load`", "local"),
    ("fleet-off", "fleet: `push` of the `save` above (db 0), empty folders, remote on", "fleet"),
    ("cold-remote", "cold run, remote caches on, no Redis reachable", "ref"),
    ("fleet-on", "fleet: `push` of that run's `save` (db 2), empty folders, remote on", "fleet"),
)


def read(w, name):
    path = os.path.join(w, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f) if name.endswith(".json") else f.read().strip()


def stats(r):
    """(FX hit, FX miss, AOT hit, AOT miss, user kernel hits, dynamo precompile hit,
    dynamo precompile miss) and the user kernel count."""
    ind = r["counters"].get("inductor", {})
    ag = r["counters"].get("aot_autograd", {})
    dc = r["counters"].get("dynamo_cache", {})
    uk = r.get("user_kernel")
    return ((ind.get("fxgraph_cache_hit", 0), ind.get("fxgraph_cache_miss", 0),
             ag.get("autograd_cache_hit", 0), ag.get("autograd_cache_miss", 0),
             None if uk is None else sum(1 for k in uk if k.get("cache_hit") is True),
             dc.get("dynamo_cache_hit", 0), dc.get("dynamo_cache_miss", 0)),
            None if uk is None else len(uk))


def shape(layout, kind):
    """'K keys / E entries (M keys hold more than one)' of a layout kind."""
    keys = (layout or {}).get(kind, {})
    multi = sum(1 for n in keys.values() if n > 1)
    return "%s / %s%s" % (plural(len(keys), "key", "keys"),
                          plural(sum(keys.values()), "entry", "entries"),
                          " (%s more than one)" % plural(multi, "key holds", "keys hold")
                          if multi else ""), multi


def plural(n, one, many):
    return "%d %s" % (n, one if n == 1 else many)


def cell(text):
    """text fit for a table cell: one line, no column bar."""
    return " ".join(text.split()).replace("|", "/")


def push_line(w, name):
    """push's counts from its --json report, and whatever it said on stderr."""
    p = read(w, name + ".json")
    out = []
    if isinstance(p, dict):
        counts = ", ".join("%s %s" % (k, p[k]) for k in (
            "written", "replaced", "unchanged", "no_form", "shadowed") if k in p)
        out.append("push: " + counts)
    err = read(w, name + ".err")
    if err:
        out.append("push said on stderr: `" + " / ".join(err.splitlines()[:20]) + "`")
    return out


def bundles(w, results):
    """The full bundle beside the bundle of what the job used: artifacts, their bytes, the
    file's bytes, and the warm row each gave."""
    rows = []
    for name, row in (("save", "save-load"), ("used", "used-load")):
        info = read(w, "list-%s.json" % name)
        path = os.path.join(w, "%s.mcache" % name)
        if not isinstance(info, dict) or not os.path.exists(path):
            continue
        r = results[row]
        hits = "—" if r is None else "FX %d/%d, AOT %d/%d, precompile %d/%d" % (
            stats(r)[0][0], stats(r)[0][1], stats(r)[0][2], stats(r)[0][3], stats(r)[0][5],
            stats(r)[0][6])
        rows.append("| %s | %d | %.1f | %.1f | %s | %s |" % (
            "`save` (everything)" if name == "save" else "`run --save-used` (what the job used)",
            info["artifact_count"], sum(a["size"] for a in info["artifacts"]) / 1e6,
            os.path.getsize(path) / 1e6, hits,
            "—" if r is None else "%.2f" % r["first_step_s"]))
    if rows:
        print()
        print("| bundle | artifacts | content MB | file MB | warm from it alone | first step s |")
        print("|---|---|---|---|---|---|")
        for line in rows:
            print(line)


def main(w, job):
    results = {row: read(w, "r-%s.json" % row) for row, _, _ in ROWS}
    cold = results["cold"]
    if cold is None:
        print("fidelity %s: no cold run (r-cold.json missing)" % job)
        return 1
    base = stats(results["cp"])[0] if results["cp"] else None
    fx_shape, fx_multi = shape(cold.get("layout"), "fxgraph")
    ag_shape, ag_multi = shape(cold.get("layout"), "aotautograd")
    print("Job `%s` on %s, torch %s, triton %s, CUDA %s. The cold run left fxgraph: %s; "
          "aotautograd: %s.\n" % (job, cold["gpu"], cold["torch"], cold.get("triton"),
                                   cold.get("cuda"), fx_shape, ag_shape))
    print("| restored by | FX hit/miss | AOT hit/miss | precompile hit/miss | user kernel hits "
          "| first step s | equal to cp -a |")
    print("|---|---|---|---|---|---|---|")
    ok, notes = True, []
    if base is None:
        ok = False
        notes.append("no `cp -a` row to compare with: FAIL")
    for row, label, part in ROWS:
        r = results[row]
        if r is None:
            why = read(w, "r-%s.note" % row) or "no result"
            print("| %s | %s | | | | | |" % (label, cell(why)))
            if part in ("local", "base") and not why.startswith("skipped"):
                ok = False
            continue
        s, uk_n = stats(r)
        uk = "—" if uk_n is None else "%d/%d" % (s[4], uk_n)
        if part in ("ref", "base") or base is None:
            equal = "—"
        else:
            equal = "yes" if s == base else "NO"
            if s != base and part == "local":
                ok = False
        print("| %s | %d/%d | %d/%d | %d/%d | %s | %.2f | %s |" % (
            label, s[0], s[1], s[2], s[3], s[5], s[6], uk, r["first_step_s"], equal))
        bypass = [(k, v) for c in r["counters"].values() for k, v in c.items()
                  if k.endswith("_bypass") and v]
        if bypass:
            notes.append("%s: %s" % (label, ", ".join("%s %s" % kv for kv in bypass)))
        if r.get("torch_load_artifacts") is not None:
            notes.append("%s: torch loaded %s" % (label, r["torch_load_artifacts"]))

    # What the rows that did not run on a plain local copy meet, said beside them.
    save_err = read(w, "save.err")
    if save_err:
        notes.append("megacache save said on stderr: `%s`" % " / ".join(save_err.splitlines()[:20]))
    if cold.get("blob_artifacts") is not None:
        notes.append("torch's blob of the cold run: %s" % cold["blob_artifacts"])
    if results["fleet-off"] is not None or read(w, "push-off.json") is not None:
        notes.append("fleet (db 0): " + "; ".join(push_line(w, "push-off")))
        notes.append("fleet (db 0): the bundle comes from the cold run with the remote caches "
                     "off. torch 2.11's AOTAutograd cache key includes "
                     "`torch._functorch.config.enable_remote_autograd_cache` (None when "
                     "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE is unset, True for 1), so on a "
                     "worker with it on every AOTAutograd lookup is under another key: AOT "
                     "misses are expected there (the FX graphs can still hit).")
    if fx_multi or ag_multi:
        notes.append("torch's Redis holds ONE value per key: of the cold folders' keys, %d FX "
                     "graph and %d AOTAutograd keys hold more than one entry (guards that "
                     "differ), of which a worker reading Redis can get one."
                     % (fx_multi, ag_multi))
    if results["fleet-on"] is not None or read(w, "push-on.json") is not None:
        notes.append("fleet (db 2): " + "; ".join(push_line(w, "push-on")))
        err = read(w, "save-remote.err")
        if err:
            notes.append("fleet (db 2): megacache save said on stderr: `%s`"
                         % " / ".join(err.splitlines()[:20]))
        notes.append("fleet (db 2): the bundle comes from a cold run with the remote caches on "
                     "(TORCHINDUCTOR_REDIS_URL=redis://127.0.0.1:1/0, no server there), so its "
                     "AOTAutograd keys are the ones a remote-on worker looks up.")
    if job == "userkernel":
        notes.append("user @triton.jit kernels are not in torch's blob nor in torch's Redis "
                     "cache (push without --triton): the torch-load, pack and fleet rows cannot "
                     "carry them.")
    for k in ("keys-0.txt", "keys-2.txt"):
        keys = read(w, k)
        if keys is not None:
            notes.append("Redis db %s after push: %d pt2: keys" % (k[5], len(keys.split())))

    if notes:
        print()
        for n in notes:
            print("- " + n)
    bundles(w, results)
    print()
    print("megacache's local rows (save, run --save-used, the used bundle, pack) equal to cp -a:",
          "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
