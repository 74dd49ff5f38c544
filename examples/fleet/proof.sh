#!/bin/sh
# proof.sh - proves on a GPU machine that `megacache push` fills torch's Redis remote
# cache so that a fresh process with an EMPTY local cache dir hits every FX graph and
# AOTAutograd entry remotely. Run from the top of a built tree, with
# run/fleet-gpu.tar.xz unpacked into $FG (default ./run/fleet-gpu): bin/redis-server,
# bin/redis-cli, lib/ (the shared libraries they and megacache need) and py/ (Debian's
# pure-Python redis package and what it imports, for torch). Results (JSON of each
# run, table.md) go to $OUT (default ./run/fleet-proof).
set -eu
top=$(pwd)
W=${WORK:-/tmp/megacache-fleet}
R=${OUT:-$top/run/fleet-proof}
FG=${FG:-$top/run/fleet-gpu}
PY=${PYTHON:-python3}
PORT=${PORT:-16379}
rm -rf "$W"
mkdir -p "$W/redis" "$R"
export LD_LIBRARY_PATH="$FG/lib:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
MODEL="$top/examples/torch/model.py"
URL="redis://127.0.0.1:$PORT/0"
unset TRITON_CACHE_DIR TORCHINDUCTOR_REDIS_URL || true
cli() { "$FG/bin/redis-cli" -p "$PORT" "$@"; }

echo "== 1. a Redis server on 127.0.0.1:$PORT, nothing kept on disk"
"$FG/bin/redis-server" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$W/redis" --daemonize no >"$W/redis/log" 2>&1 &
rpid=$!
trap 'kill "$rpid" 2>/dev/null || true' EXIT
for i in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
cli ping

# torch's AOTAutograd key covers the remote-cache settings: the cold run has them as the
# warm runs will, its own remote writes going to database 1, away from what push fills.
remote() {
	url=$1
	shift
	PYTHONPATH="$FG/py${PYTHONPATH:+:$PYTHONPATH}" TORCHINDUCTOR_REDIS_URL="$url" \
	TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE=1 TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1 "$@"
}
echo "== 2. cold compile (torch's own remote writes to db 1), its cache dir packed and signed"
TORCHINDUCTOR_CACHE_DIR="$W/cold" remote "redis://127.0.0.1:$PORT/1" \
	"$PY" "$MODEL" cold --blob "$W/blob.bin" --out "$W/cold.json"
"$M" keygen -q -W -f -p "$W/fleet.pub" -s "$W/fleet.key"
"$M" pack -q -o "$W/cold.mcache" -s "$W/fleet.key" --from-dir "$W/cold" --labels-json "$W/blob.bin.labels.json"
"$M" list "$W/cold.mcache" | tail -4

echo "== 3. push into Redis, twice (the second changes nothing), and audit"
"$M" push "$W/cold.mcache" -p "$W/fleet.pub" --redis "$URL" --json > "$W/push1.json"
"$M" push "$W/cold.mcache" -p "$W/fleet.pub" --redis "$URL"
"$M" audit --redis "$URL" -p "$W/fleet.pub" "$W/cold.mcache"
cli --scan --pattern 'pt2:*' | sort > "$W/keys.txt"
cat "$W/keys.txt"
cli info stats | tr -d '\r' | grep -E '^keyspace_(hits|misses)' > "$W/stats-before.txt"

echo "== 4. warm runs: fresh process, EMPTY local cache dir, torch's remote caches on"
for rep in 1 2; do
	d="$W/empty-$rep"
	mkdir -p "$d"
	TORCHINDUCTOR_CACHE_DIR="$d" remote "$URL" "$PY" "$MODEL" warm --out "$W/remote-$rep.json"
	ls "$d" > "$W/empty-$rep.ls"
done
cli info stats | tr -d '\r' | grep -E '^keyspace_(hits|misses)' > "$W/stats-after.txt"
cli -n 0 dbsize > "$W/dbsize-after.txt"
# What push wrote (db 0) against what torch itself wrote in the cold run (db 1).
PYTHONPATH="$FG/py" "$PY" - "$PORT" > "$W/compare.txt" <<'PY'
import base64, json, sys
import redis
p = int(sys.argv[1])
a, b = redis.Redis(port=p, db=0), redis.Redis(port=p, db=1)
ka, kb = set(a.scan_iter("pt2:*")), set(b.scan_iter("pt2:*"))
same = sum(base64.b64decode(json.loads(a.get(k))["data"]) ==
           base64.b64decode(json.loads(b.get(k))["data"]) for k in ka & kb)
print("keys pushed %d, torch's own %d, in both %d, same bytes %d" % (len(ka), len(kb), len(ka & kb), same))
PY
cat "$W/compare.txt"

echo "== 5. the same, remote caches off (no bundle anywhere): a cold start again"
d="$W/empty-off"
mkdir -p "$d"
TORCHINDUCTOR_CACHE_DIR="$d" "$PY" "$MODEL" warm --out "$W/off.json"

status=0
"$PY" - "$W" > "$W/table.md" <<'PY' || status=$?
import json, sys, os
w = sys.argv[1]
def j(n):
    return json.load(open(os.path.join(w, n)))
def stats(n):
    return dict(l.split(":") for l in open(os.path.join(w, n)).read().split())
cold, push, off = j("cold.json"), j("push1.json"), j("off.json")
keys = open(os.path.join(w, "keys.txt")).read().split()
b, a = stats("stats-before.txt"), stats("stats-after.txt")
fx = sum(1 for k in keys if k.startswith("pt2:fx-graph-v1::"))
ag = sum(1 for k in keys if k.startswith("pt2:autograd-experimental::"))
print("| run | first step (s) | fxgraph hit / miss | autograd hit / miss |")
print("|---|---|---|---|")
def row(name, r):
    c = r["counters"]
    i, g = c.get("inductor", {}), c.get("aot_autograd", {})
    print("| %s | %.2f | %s / %s | %s / %s |" % (name, r["first_step_s"],
          i.get("fxgraph_cache_hit", 0), i.get("fxgraph_cache_miss", 0),
          g.get("autograd_cache_hit", 0), g.get("autograd_cache_miss", 0)))
row("cold (empty dir, remote on: db 1)", cold)
for rep in (1, 2):
    row("pushed, empty dir, remote on #%d" % rep, j("remote-%d.json" % rep))
row("empty dir, remote off", off)
print()
print("push: %d written, %d unchanged, %d not pushed (no remote form); store: %d fx-graph-v1 "
      "and %d autograd-experimental keys" % (push["written"], push["unchanged"], push["no_form"], fx, ag))
print("Redis keyspace hits during the warm runs: %d (misses %d)" % (
      int(a["keyspace_hits"]) - int(b["keyspace_hits"]),
      int(a["keyspace_misses"]) - int(b["keyspace_misses"])))
print(open(os.path.join(w, "compare.txt")).read().strip())
print("db 0 keys after the warm runs (torch adds none on a hit): %s" % open(os.path.join(w, "dbsize-after.txt")).read().strip())
print("GPU: %s, torch %s" % (cold["gpu"], cold["torch"]))
ok = True
for rep in (1, 2):
    c = j("remote-%d.json" % rep)["counters"]
    ok &= c.get("inductor", {}).get("fxgraph_cache_hit", 0) >= fx > 0
    ok &= c.get("aot_autograd", {}).get("autograd_cache_hit", 0) >= ag > 0
    ok &= c.get("inductor", {}).get("fxgraph_cache_miss", 0) == 0
print("every FX graph and AOTAutograd lookup hit remotely:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
PY
cat "$W/table.md"
cp "$W"/*.json "$W"/*.txt "$W"/*.ls "$W/table.md" "$R/" 2>/dev/null || true
exit "$status"
