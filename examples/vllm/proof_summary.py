#!/usr/bin/env python3
"""proof_summary.py - the table of examples/vllm/proof.sh: one row for each way a vLLM
compile cache was put in place, from what the run left in OUT.

  proof_summary.py OUT     writes OUT/table.md and OUT/report.json, prints the table

It reads OUT/steps.tsv (each step's name, exit status and seconds), OUT/<case>.check.json
(the reports of `vllm_cache_probe.py check --together --json`), OUT/<case>.load.json
(`megacache load --json`), OUT/build.json, OUT/list.json and the last line of
OUT/logs/<step>.log for a step that failed. Whatever the rows say, it exits 0 once the
table is written; 2 for a wrong command line. Python's standard library only.
"""

import json
import os
import sys

# (name, what was done, what a good megacache gives)
CASES = (
    ("same-root", "same root (A moved away, bundle loaded into A)", "warm start"),
    ("other-root", "another root (bundle loaded into B, A gone)", "warm start"),
    ("copy", "cp -a to another root (built tree copied to C, A gone)",
     "fails: the handles name A"),
)
COLUMNS = ("case", "expected", "handles loaded", "handles name this root", "outputs equal",
           "FX hits", "FX misses", "AOT models loaded", "AOT autotuned again",
           "first load s", "first call s", "AOT first load s", "AOT first call s",
           "megacache load s", "result")
BENCHMARK = "InductorBenchmarker.benchmark"
TEXT_MAX = 200


def read_json(path):
    """The JSON in path, or None when it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def read_steps(out):
    """{step: {"exit": n, "seconds": s}} from steps.tsv."""
    steps = {}
    try:
        with open(os.path.join(out, "steps.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    steps[parts[0]] = {"exit": int(parts[1]), "seconds": float(parts[2])}
    except (OSError, ValueError):
        pass
    return steps


def count(items, name):
    """The sum of counter name (its last dotted part or parts) over items."""
    return sum(v for it in items for k, v in (it.get("counters") or {}).items()
               if k == name or k.endswith("." + name))


def short(text):
    text = " ".join(str(text).split())
    return text if len(text) <= TEXT_MAX else text[:TEXT_MAX - 3] + "..."


def errors_of(items):
    """"FileNotFoundError x4: <first message>; AssertionError x4: ..." for the items
    that failed."""
    by_type = {}
    for it in items:
        if "error" in it:
            kind, _, text = it["error"].partition(":")
            by_type.setdefault(kind, []).append(text.strip())
    return "; ".join(f"{k} x{len(v)}: {short(v[0])}" for k, v in by_type.items())


def process_failure(rep):
    tail = [ln for ln in (rep.get("stderr_tail") or "").splitlines() if ln.strip()]
    return f"exited {rep.get('failed')}: {short(tail[-1]) if tail else 'no output'}"


def jit_facts(reps):
    jit = [r for r in reps if r.get("step") == "check-jit"]
    entries = [e for r in jit for p in r.get("prefixes", []) for e in p.get("entries", [])]
    timed = [e for e in entries if "load_s" in e]
    first = timed[0] if timed and timed[0] is entries[0] else None
    return {
        "processes_failed": [process_failure(r) for r in jit if "failed" in r],
        "handles": len(entries),
        "loaded": sum("error" not in e for e in entries),
        "inside_root": sum(bool(e.get("handle_inside_read_root")) for e in entries),
        "equal": sum(bool((e.get("vs_eager") or {}).get("match")) for e in entries),
        "fx_hits": count(entries, "fxgraph_cache_hit"),
        "fx_misses": count(entries, "fxgraph_cache_miss"),
        "benchmarks": count(entries, BENCHMARK),
        "first_load_s": first and first.get("load_s"),
        "first_call_s": first and first.get("first_call_s"),
        "later_load_s_max": max((e["load_s"] for e in timed[1:]), default=None),
        "errors": errors_of(entries),
    }


def aot_facts(reps):
    aot = [r for r in reps if r.get("step") == "check-aot"]
    models = [m for r in aot for m in r.get("models", [])]
    first = models[0] if models and "load_s" in models[0] else None
    return {
        "processes_failed": [process_failure(r) for r in aot if "failed" in r],
        "models": len(models),
        "loaded": sum("error" not in m for m in models),
        "equal": sum(bool((m.get("vs_eager") or {}).get("match")) for m in models),
        "benchmarks": count(models, BENCHMARK),
        "first_load_s": first and first.get("load_s"),
        "first_call_s": first and first.get("first_call_s"),
        "errors": errors_of(models),
    }


def problems(jit, aot):
    """Why a case that checked is no warm start (empty when it is one)."""
    why = [f"JIT check process {p}" for p in jit["processes_failed"]]
    why += [f"AOT check process {p}" for p in aot["processes_failed"]]
    n = jit["handles"]
    if n == 0 and not jit["processes_failed"]:
        why.append("no JIT handle found")
    if jit["loaded"] < n:
        why.append(f"{n - jit['loaded']} of {n} handles not loaded ({jit['errors']})")
    if jit["equal"] < jit["loaded"]:
        why.append(f"{jit['loaded'] - jit['equal']} handles' outputs differ from eager")
    if jit["loaded"] and jit["fx_hits"] != jit["loaded"]:
        why.append(f"{jit['fx_hits']} FX hits for {jit['loaded']} handles loaded")
    if jit["fx_misses"]:
        why.append(f"{jit['fx_misses']} FX misses")
    if aot["models"] == 0 and not aot["processes_failed"]:
        why.append("no AOT model found")
    if aot["loaded"] < aot["models"]:
        why.append(f"{aot['models'] - aot['loaded']} of {aot['models']} AOT models not "
                   f"loaded ({aot['errors']})")
    if aot["equal"] < aot["loaded"]:
        why.append(f"{aot['loaded'] - aot['equal']} AOT models' outputs differ from eager")
    if aot["benchmarks"]:
        why.append(f"AOT autotuned again ({aot['benchmarks']} benchmarks)")
    return why


def step_failure(out, steps, name):
    """"<name> exited N: <last line of its log>", or None when it ran and exited 0."""
    s = steps.get(name)
    if s is None:
        return f"{name} did not run"
    if s["exit"]:
        line = last_line(os.path.join(out, "logs", name + ".log"))
        return f"{name} exited {s['exit']}: {short(line) or 'no output'}"
    return None


def case_row(out, steps, case):
    name, _, _ = case
    prep = "cp" if name == "copy" else "load"
    row = {"case": name, "load": None, "jit": None, "aot": None, "problems": []}
    failed = step_failure(out, steps, f"{name}-{prep}")
    if name != "copy":
        if not failed:
            row["megacache_load_s"] = steps[f"{name}-load"]["seconds"]
        load = read_json(os.path.join(out, name + ".load.json"))
        if isinstance(load, dict):
            row["load"] = {k: load.get(k) for k in ("installed", "bytes", "types", "roots")}
    if failed:
        row["problems"] = [failed]
        return row
    reps = read_json(os.path.join(out, name + ".check.json"))
    if not isinstance(reps, list):
        row["problems"] = [step_failure(out, steps, name + "-check")
                           or f"{name}.check.json missing or not a list"]
        return row
    row["jit"], row["aot"] = jit_facts(reps), aot_facts(reps)
    row["problems"] = problems(row["jit"], row["aot"])
    return row


def num(v):
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def cells(case, row):
    _, what, expected = case
    jit, aot = row["jit"], row["aot"]
    result = ("warm start" if not row["problems"]
              else "failed: " + "; ".join(row["problems"]))
    if jit is None:
        mid = ["-"] * 11
    else:
        mid = [f"{jit['loaded']}/{jit['handles']}", f"{jit['inside_root']}/{jit['handles']}",
               f"{jit['equal']}/{jit['handles']} + AOT {aot['equal']}/{aot['models']}",
               num(jit["fx_hits"]), num(jit["fx_misses"]), f"{aot['loaded']}/{aot['models']}",
               f"yes ({aot['benchmarks']} benchmarks)" if aot["benchmarks"] else "no",
               num(jit["first_load_s"]), num(jit["first_call_s"]),
               num(aot["first_load_s"]), num(aot["first_call_s"])]
    mid.append(num(row.get("megacache_load_s")))
    return [what, expected] + mid + [result]


def md_row(values):
    return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"


def build_facts(out):
    reps = read_json(os.path.join(out, "build.json"))
    reps = reps if isinstance(reps, list) else []
    by_step = {r.get("step"): r for r in reps if isinstance(r, dict)}
    api, jit, aot = (by_step.get(s, {}) for s in ("api", "build-jit", "build-aot"))
    jit_s = jit.get("compile_s")
    return {"torch": api.get("torch"), "triton": api.get("triton"),
            "jit_compile_s": round(sum(jit_s.values()), 3) if isinstance(jit_s, dict) else None,
            "aot_compile_s": aot.get("compile_s"),
            "errors": {s: r.get("error") or r.get("stderr_tail") for s, r in by_step.items()
                       if r.get("error") or r.get("failed")}}


def bundle_facts(out):
    lst = read_json(os.path.join(out, "list.json"))
    if not isinstance(lst, dict) or not lst.get("ok"):
        return None
    types = {}
    for a in lst.get("artifacts") or []:
        t = types.setdefault(a.get("type"), {"count": 0, "bytes": 0})
        t["count"] += 1
        t["bytes"] += a.get("size") or 0
    return {"artifact_count": lst.get("artifact_count"), "types": types}


def summary(out):
    steps = read_steps(out)
    rows = [case_row(out, steps, c) for c in CASES]
    build, bundle = build_facts(out), bundle_facts(out)
    lines = ["# vLLM compile cache through megacache", ""]
    lines.append(f"torch {build['torch'] or '?'}, triton {build['triton'] or '?'}; cold compile: "
                 f"JIT {num(build['jit_compile_s'])} s (both pieces), "
                 f"AOT {num(build['aot_compile_s'])} s.")
    for s, e in build["errors"].items():
        lines.append(f"build step {s} failed: {short(e)}")
    for name in ("build", "keygen", "save", "list"):
        failed = step_failure(out, steps, name)
        if failed:
            lines.append(f"step {failed}")
    if bundle:
        kinds = ", ".join(f"{t} {v['count']}" for t, v in sorted(bundle["types"].items()))
        lines.append(f"bundle: {bundle['artifact_count']} artifacts ({kinds}).")
    lines += ["", md_row(COLUMNS), md_row(["---"] * len(COLUMNS))]
    lines += [md_row(cells(c, r)) for c, r in zip(CASES, rows)]
    warm = sum(not r["problems"] for r in rows)
    total = sum(st["seconds"] for st in steps.values())
    lines += ["", f"{warm} of {len(rows)} cases warm; {len(steps)} steps took {total:.1f} s."]
    report = {"work": out, "build": build, "bundle": bundle, "steps": steps,
              "cases": {r["case"]: {**r, "warm": not r["problems"],
                                   "check": read_json(os.path.join(out, r["case"] + ".check.json"))}
                        for r in rows}}
    return "\n".join(lines) + "\n", report


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.stderr.write(__doc__)
        return 2
    out = argv[0]
    table, report = summary(out)
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
