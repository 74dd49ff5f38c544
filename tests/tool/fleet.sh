# fleet.sh - push, pull and audit against a real redis-server: what push writes is what
# torch's RemoteCacheJsonSerde reads back (the artifact's bytes, in torch's JSON form,
# under torch's keys); a second push changes nothing; pull gives the bundle back; an
# untrusted bundle sends nothing; passwords work and are never shown; a server that
# goes away mid-push is one clear error, and the next push completes; audit names what
# no trusted bundle vouches for.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
BLOB="$DATA/mlp-cuda.megacache"
PY=/usr/bin/python3
# pull's spool files, here rather than in the system's temp folder (other tests,
# exitcodes.sh, watch that one)
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"

# A build without hiredis says so, and this test has nothing to try.
"$MEGACACHE" push "$T/none.mcache" -p "$PUB" --redis redis://127.0.0.1:1 >"$T/out" 2>"$T/err"
rc=$?
if grep -qF "built without Redis support" "$T/err"; then
	[ "$rc" = 2 ] || { echo "FAIL: push without Redis support exited $rc, expected 2"; exit 1; }
	echo "SKIP: megacache built without Redis support"
	exit 77
fi
command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 ||
	{ echo "SKIP: no redis-server"; exit 77; }

PIDS=""
stop_all() {
	for p in $PIDS; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$T/big" "$T/big.mcache"
}
trap stop_all EXIT

# free_port: a port no one listens on now.
free_port() {
	$PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_redis NAME PORT [args...]: a redis-server in the foreground of a background job,
# its folder and pid under $T/NAME, no persistence; waits until it answers PING.
start_redis() {
	name=$1; port=$2; shift 2
	mkdir -p "$T/$name"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$T/$name" "$@" >"$T/$name/log" 2>&1 &
	echo $! >"$T/$name/pid"
	PIDS="$PIDS $!"
	for _ in $(seq 100); do
		redis-cli -p "$port" ping 2>/dev/null | grep -qE 'PONG|NOAUTH' && return 0
		sleep 0.05
	done
	echo "FAIL: redis-server on port $port did not start: $(cat "$T/$name/log")"
	exit 1
}

PORT=$(free_port)
start_redis r "$PORT" --unixsocket "$T/r/sock"
URL="redis://127.0.0.1:$PORT"
SHOWN="redis://127.0.0.1:$PORT/0"
rc() { redis-cli -p "$PORT" "$@"; }
dbsize() { rc dbsize; }

# kill_mid JOB TEST: kills the server once TEST holds (4 s at most), then waits for JOB
# (a megacache command in the background), whose exit status goes in r.
writing() { [ "$(dbsize 2>/dev/null)" -gt 0 ] 2>/dev/null; }
reading() { rc client list 2>/dev/null | grep -q "cmd=get"; }
kill_mid() {
	for _ in $(seq 400); do
		$2 && break
		sleep 0.01
	done
	kill -9 "$(cat "$T/r/pid")"
	wait "$(cat "$T/r/pid")" 2>/dev/null
	wait "$1"
	r=$?
}

run 0 "" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB"

# 1. push: torch's keys, torch's JSON form, the artifact's bytes (as load writes them).
run 0 "pushed $T/a.mcache into $SHOWN: 6 written, 0 replaced, 0 unchanged" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL"
grep -qF "4 artifacts of types torch keeps no remote cache of" "$T/out" && ok ||
	bad "push does not say the autotune artifacts were not pushed: $(cat "$T/out")"
run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/load"
"$MEGACACHE" list "$T/a.mcache" >"$T/list" 2>&1
# torch_values PORT DIR LIST: every pt2:* value decodes (as RemoteCacheJsonSerde does) to
# the bytes load wrote for its key, in exactly the text json.dumps gives; the keys are
# exactly the bundle's inductor and aot_autograd artifacts.
torch_values() {
	$PY - "$@" <<'PY'
import base64, glob, json, sys
import redis
port, root, listing = int(sys.argv[1]), sys.argv[2], sys.argv[3]
r = redis.Redis(host="127.0.0.1", port=port)
want = set()
for line in open(listing):
    f = line.split()
    # an FX graph or AOTAutograd artifact is one entry: torch's key, "/", the entry
    if len(f) == 4 and f[0] == "inductor":
        want.add("pt2:fx-graph-v1::%s:c1" % f[3].split("/")[0])
    elif len(f) == 4 and f[0] == "aot_autograd":
        want.add("pt2:autograd-experimental::%s:c1" % f[3].split("/")[0])
got = {k.decode() for k in r.scan_iter("pt2:*")}
assert got == want and len(got) == 6, (sorted(got), sorted(want))
for k in sorted(got):
    raw = r.get(k)
    d = json.loads(raw)
    data = base64.b64decode(d["data"], validate=True)
    assert raw == json.dumps({"data": d["data"], "time_taken_ms": 0}).encode(), raw[:80]
    assert raw.isascii()
    key = k.split("::")[1][:-3]
    if k.startswith("pt2:fx-graph-v1::"):
        files = glob.glob("%s/fxgraph/%s/%s/*" % (root, key[1:3], key))
    else:
        files = glob.glob("%s/aotautograd/%s/*" % (root, key))
    assert len(files) == 1, (k, files)
    assert open(files[0], "rb").read() == data, k
PY
}
check "push's values are not the loaded artifacts in torch's form" torch_values "$PORT" "$T/load" "$T/list"

# 2. a second push changes nothing; a dry run writes nothing.
run 0 "pushed $T/a.mcache into $SHOWN: nothing changed (6 entries there already)" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL"
first=$(rc --scan --pattern 'pt2:fx-graph-v1::*' | head -1)
rc del "$first" >/dev/null
run 0 "would write 1, replace 0; 5 unchanged" push "$T/a.mcache" -p "$PUB" --redis "$URL" --dry-run
[ "$(dbsize)" = 5 ] && ok || bad "a dry run changed the store: DBSIZE $(dbsize)"
[ "$(rc exists "$first")" = 0 ] && ok || bad "a dry run wrote $first"

# 11a. push --json: its counts.
"$MEGACACHE" push "$T/a.mcache" -p "$PUB" --redis "$URL" --json >"$T/out" 2>"$T/err"
[ $? = 0 ] && ok || bad "push --json failed: $(cat "$T/err")"
$PY - "$T/out" "$SHOWN" "$first" "$MC_SRCDIR/doc/json-schema.json" <<'PY' && ok || bad "push --json: $(head -c 1500 "$T/out")"
import json, sys
import jsonschema
j = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[4]))).validate(j)
assert j["schema"] == 3 and j["command"] == "push" and j["ok"] is True and j["exit"] == 0, j
assert j["bundle"].endswith("a.mcache") and j["artifact_count"] == 10 and j["format_version"] == 2, j
assert [s["state"] for s in j["signatures"]] == ["verified"] and j["labels"] == {}, j
assert j["redis"] == sys.argv[2] and j["dry_run"] is False and j["triton"] is False, j
assert (j["written"], j["replaced"], j["unchanged"], j["no_form"]) == (1, 0, 5, 4), j
assert len(j["entries"]) == 10, j
written = [e for e in j["entries"] if e["action"] == "written"]
assert [e["redis_key"] for e in written] == [sys.argv[3]], written
assert all(e["redis_key"] is None for e in j["entries"] if e["type"] == "autotune"), j
PY
[ "$(dbsize)" = 6 ] && ok || bad "push after a dry run: DBSIZE $(dbsize), expected 6"

# 3. pull gives the same artifacts back (autotune has no remote form), signed and
# labelled; pushing it changes nothing.
run 0 "pulled 6 entries from $SHOWN into $T/p.mcache, 1 signature" \
	pull --redis "$URL" -o "$T/p.mcache" -s "$SEC"
"$MEGACACHE" diff "$T/a.mcache" "$T/p.mcache" >"$T/out" 2>"$T/err"
d=$?
[ "$d" = 1 ] && grep -qxF "0 added, 4 removed, 0 changed" "$T/out" &&
	[ "$(grep -c '^- autotune ' "$T/out")" = 4 ] && [ "$(grep '^[-+~!]' "$T/out" | grep -vEc '^~ (format version|bundle version|expires|label [^ ]*|signers): ')" = 4 ] && ok ||
	bad "diff bundle pulled: exit $d: $(cat "$T/out" "$T/err")"
run 0 "label redis=$SHOWN" list "$T/p.mcache"
run 0 "" verify "$T/p.mcache" -p "$PUB"
run 0 "nothing changed (6 entries there already)" push "$T/p.mcache" -p "$PUB" --redis "$URL"
# --match: only the keys of a glob (a glob of one key: one entry)
run 0 "pulled 2 entries from $SHOWN" pull --redis "$URL" -o "$T/m.mcache" --match 'pt2:autograd-experimental::*'
[ "$("$MEGACACHE" list "$T/m.mcache" | grep -c '^aot_autograd ')" = 2 ] &&
	[ "$("$MEGACACHE" list "$T/m.mcache" | grep -c '^inductor ')" = 0 ] && ok ||
	bad "pull --match autograd: $("$MEGACACHE" list "$T/m.mcache")"
one=$(rc --scan --pattern 'pt2:fx-graph-v1::*' | sort | head -1)
run 0 "pulled 1 entry from $SHOWN into $T/m1.mcache, 1 signature" pull --redis "$URL" -o "$T/m1.mcache" --match "$one" -s "$SEC"
k=$("$MEGACACHE" list "$T/m1.mcache" | awk '$1 == "inductor" { print $4 }')
[ "pt2:fx-graph-v1::${k%%/*}:c1" = "$one" ] && ok || bad "pull --match $one gave '$k'"
run 0 "pushed $T/m1.mcache into $SHOWN: nothing changed (1 entry there already)" push "$T/m1.mcache" -p "$PUB" --redis "$URL"

# 11b. pull --json.
"$MEGACACHE" pull --redis "$URL" -o "$T/p2.mcache" --json >"$T/out" 2>"$T/err"
[ $? = 0 ] && ok || bad "pull --json failed: $(cat "$T/err")"
$PY - "$T/out" "$SHOWN" "$MC_SRCDIR/doc/json-schema.json" <<'PY' && ok || bad "pull --json: $(head -c 1500 "$T/out")"
import json, sys
import jsonschema
j = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[3]))).validate(j)
assert j["schema"] == 3 and j["command"] == "pull" and j["ok"] is True and j["exit"] == 0, j
assert j["output"].endswith("p2.mcache") and "bundle" not in j, j
assert j["redis"] == sys.argv[2] and j["artifact_count"] == 6 and j["odd"] == 0, j
assert j["signed"] is False and j["signature_count"] == 0 and j["bytes"] > 2000000, j
PY

# torch's TORCHINDUCTOR_REDIS_URL when --redis is not given; --redis over it.
TORCHINDUCTOR_REDIS_URL="$URL/1" run 0 "pushed $T/a.mcache into redis://127.0.0.1:$PORT/1: 6 written" \
	push "$T/a.mcache" -p "$PUB"
[ "$(rc -n 1 dbsize)" = 6 ] && [ "$(dbsize)" = 6 ] && ok || bad "TORCHINDUCTOR_REDIS_URL: db 1 holds $(rc -n 1 dbsize)"
TORCHINDUCTOR_REDIS_URL="$URL/2" run 0 "into $SHOWN: nothing changed" push "$T/a.mcache" -p "$PUB" --redis "$URL"
[ "$(rc -n 2 dbsize)" = 0 ] && ok || bad "--redis did not win over TORCHINDUCTOR_REDIS_URL"

# a Unix socket, and a database by number
run 0 "pushed $T/a.mcache into unix://$T/r/sock?db=3: 6 written" push "$T/a.mcache" -p "$PUB" --redis "unix://$T/r/sock?db=3"
[ "$(rc -n 3 dbsize)" = 6 ] && ok || bad "unix://...?db=3: db 3 holds $(rc -n 3 dbsize)"
# pull reads on a connection per worker, each in the URL's database (the keys go to the
# workers one by one here, and database 0 is emptied: a connection in another database
# finds none of them)
# redis_stat FILE NAME [FIELD]: the server's INFO counter NAME (its FIELD, as calls=N).
redis_stat() {
	tr -d '\r' <"$1" | awk -F: -v k="$2" -v f="${3:-}" '$1 == k {
		if (f == "") { print $2; exit }
		n = split($2, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, "="); if (p[1] == f) print p[2] } }'
}
rc flushdb >/dev/null
rc info everything >"$T/info0"
run 0 "pulled 6 entries from unix://$T/r/sock?db=3" pull --redis "unix://$T/r/sock?db=3" -o "$T/db3.mcache" --threads 4
rc info everything >"$T/info1"
c=$(($(redis_stat "$T/info1" total_connections_received) - $(redis_stat "$T/info0" total_connections_received)))
s=$(($(redis_stat "$T/info1" cmdstat_select calls) - $(redis_stat "$T/info0" cmdstat_select calls)))
[ "$c" = 5 ] && [ "$s" = 4 ] && ok || bad "pull --threads 4: $((c - 1)) connections and $s SELECTs, not 4 and 4"
[ "$("$MEGACACHE" list "$T/db3.mcache" | grep -c '^inductor \|^aot_autograd ')" = 6 ] && ok ||
	bad "pull of db 3: $("$MEGACACHE" list "$T/db3.mcache")"
run 2 "SELECT refused" push "$T/a.mcache" -p "$PUB" --redis "$URL/100000"

# 4. pgo: its own cache id, and no time_taken_ms.
run 0 "" pack -q -o "$T/g.mcache" -s "$SEC" --from-torch "$DATA/mlp-cpu-pgo.megacache"
pgokey=$("$MEGACACHE" list "$T/g.mcache" | awk '$1 == "pgo" { print $4 }')
[ -n "$pgokey" ] && ok || bad "no pgo artifact in the pgo bundle"
rc flushall >/dev/null
# 5. with --ttl.
run 0 "7 written" push "$T/g.mcache" -p "$PUB" --redis "$URL" --ttl 100
$PY - "$PORT" "pt2:dynamo-pgo::$pgokey:c1" "$T/g.mcache" <<'PY' && ok || bad "the pgo value is not in torch's form"
import base64, json, sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
raw = r.get(sys.argv[2])
assert raw is not None, sorted(r.keys("*"))
d = json.loads(raw)
assert list(d) == ["data"] and raw == json.dumps(d).encode(), raw[:80]
assert len(base64.b64decode(d["data"], validate=True)) > 0
PY
ttl=$(rc ttl "pt2:dynamo-pgo::$pgokey:c1")
[ "$ttl" -ge 1 ] 2>/dev/null && [ "$ttl" -le 100 ] && ok || bad "--ttl 100: TTL $ttl"
ttl=$(rc ttl "$(rc --scan --pattern 'pt2:fx-graph-v1::*' | head -1)")
[ "$ttl" -ge 1 ] 2>/dev/null && [ "$ttl" -le 100 ] && ok || bad "--ttl 100: fx graph TTL $ttl"

# 5b. a push without --ttl keeps the TTL each entry has (KEEPTTL); one with --ttl sets
# it anew, and that is a change, said as one (--dry-run says the same and writes
# nothing); so over entries that had none. Each entry's TTL is read and its value
# written in one transaction.
# ttls LOW HIGH: every pt2 key's TTL, read as torch's client reads it, is in [LOW, HIGH]
# (-1: none)
ttls() {
	$PY - "$PORT" "$1" "$2" <<'PY'
import sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
lo, hi = int(sys.argv[2]), int(sys.argv[3])
t = {k: r.ttl(k) for k in r.scan_iter("pt2:*")}
assert len(t) == 6 and all(lo <= v <= hi for v in t.values()), t
PY
}
rc flushall >/dev/null
run 0 "6 written" push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 120
run 0 "pushed $T/a.mcache into $SHOWN: nothing changed (6 entries there already)" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL"
check "a push without --ttl took the TTL of 120 away" ttls 60 120
run 0 "would write 0, replace 0, set a new TTL on 6; 0 unchanged" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 300 --dry-run
check "a dry run with --ttl 300 changed the TTL" ttls 60 120
run 0 "pushed $T/a.mcache into $SHOWN: 0 written, 0 replaced, 0 unchanged, 6 with a new TTL" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 300
check "push --ttl 300 over a TTL of 120" ttls 240 300
# --json: the counts, each entry's action, and whether the store changed
"$MEGACACHE" push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 60 --json >"$T/out" 2>"$T/err"
r=$?
"$MEGACACHE" push "$T/a.mcache" -p "$PUB" --redis "$URL" --json >"$T/out2" 2>>"$T/err"
r2=$?
$PY - "$T/out" "$T/out2" "$MC_SRCDIR/doc/json-schema.json" <<'PY' && [ "$r$r2" = 00 ] && ok || bad "push --ttl 60 --json: exit $r $r2: $(head -c 1500 "$T/out" "$T/err")"
import json, sys
j, k = (json.load(open(f)) for f in sys.argv[1:3])
s = json.load(open(sys.argv[3]))
import jsonschema
for x in (j, k):
    jsonschema.Draft202012Validator(s).validate(x)
assert (j["written"], j["replaced"], j["unchanged"], j["ttl_changed"]) == (0, 0, 0, 6), j
assert j["changed"] is True and j["would_change_ttl"] == 0, j
assert sorted(e["action"] for e in j["entries"] if e["redis_key"]) == ["ttl_changed"] * 6, j
assert (k["unchanged"], k["ttl_changed"], k["changed"]) == (6, 0, False), k
PY
check "push --ttl 60, then a push without --ttl" ttls 1 60
rc flushall >/dev/null
run 0 "6 written" push "$T/a.mcache" -p "$PUB" --redis "$URL"
check "push without --ttl gave a TTL" ttls -1 -1
run 0 "" push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 60 --dry-run --json
grep -q '"changed":[[:space:]]*true' "$T/out" && grep -q '"would_change_ttl":[[:space:]]*6' "$T/out" &&
	ok || bad "push --ttl 60 --dry-run --json over entries without a TTL: $(cat "$T/out")"
check "a dry run with --ttl 60 set a TTL" ttls -1 -1
run 0 "0 written, 0 replaced, 0 unchanged, 6 with a new TTL" push "$T/a.mcache" -p "$PUB" --redis "$URL" --ttl 60
check "push --ttl 60 over entries without one" ttls 1 60

# 6. an untrusted bundle: nothing sent.
run 0 "" pack -q -o "$T/u.mcache" -s "$KEYS/test2.key" --from-torch "$BLOB"
n=$(dbsize)
run 1 "no signature by a trusted key" push "$T/u.mcache" -p "$PUB" --redis "$URL"
[ "$(dbsize)" = "$n" ] && ok || bad "an untrusted push changed the store: $n -> $(dbsize)"
run 1 "no signature by a trusted key" push "$T/u.mcache" -p "$PUB" --redis redis://127.0.0.1:1

# 7. passwords, from each place, never shown.
PPORT=$(free_port)
start_redis pw "$PPORT" --requirepass s3cret
PURL="redis://127.0.0.1:$PPORT"
nopw() { # the password is in neither output
	! grep -qF s3cret "$T/out" "$T/err" && ! grep -qF wr0ng "$T/out" "$T/err" && ok ||
		bad "a password shows: $(cat "$T/out" "$T/err")"
}
run 2 "redis://127.0.0.1:$PPORT/0: the server needs a password" push "$T/a.mcache" -p "$PUB" --redis "$PURL"
printf 'wr0ng\n' >"$T/wrong.pw"
run 2 "authentication refused" push "$T/a.mcache" -p "$PUB" --redis "$PURL" --redis-password-file "$T/wrong.pw"
nopw
MEGACACHE_REDIS_PASSWORD=wr0ng run 2 "authentication refused" push "$T/a.mcache" -p "$PUB" --redis "$PURL" -v
nopw
run 2 "authentication refused" push "$T/a.mcache" -p "$PUB" --redis "redis://:wr0ng@127.0.0.1:$PPORT" --json
grep -qF '"error":	"remote"' "$T/out" && ok || bad "a refused password: $(cat "$T/out")"
nopw
MEGACACHE_REDIS_PASSWORD=s3cret run 0 "6 written" push "$T/a.mcache" -p "$PUB" --redis "$PURL" -v
nopw
run 0 "nothing changed" push "$T/a.mcache" -p "$PUB" --redis "redis://:s3cret@127.0.0.1:$PPORT" -v
nopw
printf 's3cret\n' >"$T/right.pw"
run 0 '"unchanged":	6' push "$T/a.mcache" -p "$PUB" --redis "$PURL" --redis-password-file "$T/right.pw" --json
nopw
# the file comes before the environment
MEGACACHE_REDIS_PASSWORD=wr0ng run 0 "nothing changed" push "$T/a.mcache" -p "$PUB" --redis "$PURL" --redis-password-file "$T/right.pw"
run 0 "pulled 6 entries from redis://127.0.0.1:$PPORT/0" pull --redis "redis://:s3cret@127.0.0.1:$PPORT" -o "$T/pw.mcache"
nopw
# each of pull's connections gives the password, from the URL or the file
prc() { redis-cli -p "$PPORT" --no-auth-warning -a s3cret "$@"; }
prc info everything >"$T/info0"
run 0 "pulled 6 entries" pull --redis "redis://:s3cret@127.0.0.1:$PPORT" -o "$T/pw4.mcache" --threads 4
run 0 "pulled 6 entries" pull --redis "$PURL" --redis-password-file "$T/right.pw" -o "$T/pw4.mcache" --threads 3
nopw
prc info everything >"$T/info1"
c=$(($(redis_stat "$T/info1" total_connections_received) - $(redis_stat "$T/info0" total_connections_received)))
a=$(($(redis_stat "$T/info1" cmdstat_auth calls) - $(redis_stat "$T/info0" cmdstat_auth calls)))
[ "$(grep '^errorstat_' "$T/info1")" = "$(grep '^errorstat_' "$T/info0")" ] && [ "$c" = 8 ] && [ "$a" = 8 ] &&
	ok || bad "pull with a password: $((c - 1)) connections, $((a - 1)) AUTHs, not 7 and 7; errors: $(grep '^errorstat_' "$T/info1")"
run 0 "label redis=redis://127.0.0.1:$PPORT/0" list "$T/pw.mcache"
nopw
# a server that takes fewer connections than pull has threads: the workers it took
MPORT=$(free_port)
start_redis few "$MPORT" --maxclients 2
run 0 "6 written" push "$T/a.mcache" -p "$PUB" --redis "redis://127.0.0.1:$MPORT"
for threads in 1 4; do
	SOURCE_DATE_EPOCH=1700000000 run 0 "pulled 6 entries" pull --redis "redis://127.0.0.1:$MPORT" \
		-o "$T/few$threads.mcache" --threads "$threads"
done
cmp -s "$T/few1.mcache" "$T/few4.mcache" && ok || bad "pull --threads 4 from a server of 2 connections made another bundle"
grep -q "max number of clients" "$T/few/log" 2>/dev/null || redis-cli -p "$MPORT" info stats | grep -q '^rejected_connections:[1-9]' &&
	ok || bad "the server of 2 connections rejected none"
# a URL refused for its form is not echoed with its password
run 2 "bad port" push "$T/a.mcache" -p "$PUB" --redis "redis://:s3cret@127.0.0.1:notaport"
nopw
run 2 "Redis URL 'redis://***@127.0.0.1:$PPORT': a NUL byte (%00) in the user or password" \
	pull --redis "redis://:s3cret%00x@127.0.0.1:$PPORT" -o "$T/none.mcache"
nopw
run 2 "bad database number" pull --redis "redis://:s3cret@127.0.0.1:$PPORT/x" -o "$T/none.mcache" --json
nopw

# 8. a port that is not Redis; a port no one listens on.
HPORT=$(free_port)
(cd "$T" && exec $PY -m http.server --bind 127.0.0.1 "$HPORT") >"$T/http.log" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 100); do
	$PY -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$HPORT" 2>/dev/null && break
	sleep 0.05
done
"$MEGACACHE" push "$T/a.mcache" -p "$PUB" --redis "redis://127.0.0.1:$HPORT" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 2 ] && grep -qE "redis://127.0.0.1:$HPORT/0: .*(not a Redis server|closed the connection)" "$T/err" &&
	[ "$(wc -l <"$T/err")" = 1 ] && ok || bad "push to an HTTP server: exit $r: $(cat "$T/err")"
CPORT=$(free_port)
run 2 "redis://127.0.0.1:$CPORT/0: cannot connect: Connection refused" push "$T/a.mcache" -p "$PUB" --redis "redis://127.0.0.1:$CPORT"
run 2 "cannot connect" pull --redis "redis://127.0.0.1:$CPORT" -o "$T/none.mcache"
[ ! -e "$T/none.mcache" ] && ok || bad "a failed pull wrote its bundle"
run 2 "cannot connect" audit --redis "redis://127.0.0.1:$CPORT" -p "$PUB" "$T/a.mcache"

# 10. audit: clean; then a planted value, a changed one, one not in torch's form.
rc flushall >/dev/null
run 0 "6 written" push "$T/a.mcache" -p "$PUB" --redis "$URL"
run 0 "audit of $SHOWN: 6 entries, 6 vouched for by a trusted bundle, 0 not" \
	audit --redis "$URL" -p "$PUB" "$T/a.mcache"
planted="pt2:fx-graph-v1::f$(printf 'q%.0s' $(seq 51)):c1"
rc set "$planted" '{"data": "aGk="}' >/dev/null
changed=$(rc --scan --pattern 'pt2:autograd-experimental::*' | head -1)
rc set "$changed" '{"data": "b3RoZXIgYnl0ZXM=", "time_taken_ms": 0}' >/dev/null
odd=$(rc --scan --pattern 'pt2:fx-graph-v1::*' | grep -vF "$planted" | head -1)
rc set "$odd" 'not json' >/dev/null
"$MEGACACHE" audit --redis "$URL" -p "$PUB" "$T/a.mcache" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qxF "audit of $SHOWN: 7 entries, 4 vouched for by a trusted bundle, 3 not (1 differ, 1 in no bundle, 1 unreadable by torch: not in their key's form)" "$T/out" &&
	[ ! -s "$T/err" ] && ok || bad "audit with 3 findings: exit $r: $(cat "$T/out" "$T/err")"
[ "$(grep -c "$planted" "$T/out")" = 1 ] && [ "$(grep -c "$changed" "$T/out")" = 1 ] &&
	[ "$(grep -c "$odd" "$T/out")" = 1 ] && ok || bad "audit does not list each finding once: $(cat "$T/out")"
grep -E '^[!~]' "$T/out" | grep -qF "$planted" && ok || bad "audit: the planted key is not marked: $(cat "$T/out")"
# an untrusted bundle is refused, as load refuses it
run 1 "no signature by a trusted key" audit --redis "$URL" -p "$PUB" "$T/u.mcache"
# nor can --insecure-no-verify make it vouch: refused before any bundle is read
run 2 "audit takes no --insecure-no-verify" audit --redis "$URL" -p "$PUB" "$T/u.mcache" --insecure-no-verify
"$MEGACACHE" audit --redis "$URL" -p "$PUB" "$T/a.mcache" --json >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && ok || bad "audit --json exited $r: $(cat "$T/err")"
$PY - "$T/out" "$SHOWN" "$planted" "$changed" "$odd" "$MC_SRCDIR/doc/json-schema.json" <<'PY' && ok || bad "audit --json: $(head -c 1500 "$T/out")"
import json, sys
out, url, planted, changed, odd, schema = sys.argv[1:]
j = json.load(open(out))
s = json.load(open(schema))
if "audit" in json.dumps(s):
    import jsonschema
    jsonschema.Draft202012Validator(s).validate(j)
assert j["schema"] == 3 and j["command"] == "audit" and j["ok"] is False and j["exit"] == 1, j
assert "error" not in j, j
assert j["redis"] == url and j["bundles"][0].endswith("a.mcache"), j
assert (j["entry_count"], j["vouched"], j["differs"], j["unvouched"], j["odd"]) == (7, 4, 1, 1, 1), j
assert j["clean"] is False, j
f = {x["redis_key"]: x for x in j["findings"]}
assert len(f) == 3 and len(j["findings"]) == 3, j
assert f[planted]["action"] == "unvouched" and f[planted]["type"] == "inductor", f
assert f[planted]["key"] == planted.split("::")[1][:-3], f
assert f[changed]["action"] == "differs" and f[changed]["type"] == "aot_autograd", f
assert f[odd]["action"] == "odd", f
PY
# pull skips the value not in its key's form, and says so
run 0 "1 entry skipped: not in the form of their key" pull --redis "$URL" -o "$T/odd.mcache"
grep -qF "pulled 6 entries" "$T/out" && ok || bad "pull with one odd value: $(cat "$T/out")"
# a value that is not a string (someone's list under a pt2 key) is not in its key's form
# either: skipped by pull, odd to audit, not the end of either
rc rpush "pt2:fx-graph-v1::f$(printf 'r%.0s' $(seq 51)):c1" x >/dev/null
run 0 "2 entries skipped: not in the form of their key" pull --redis "$URL" -o "$T/odd2.mcache"
"$MEGACACHE" audit --redis "$URL" -p "$PUB" "$T/a.mcache" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "8 entries, 4 vouched for by a trusted bundle, 4 not (1 differ, 1 in no bundle, 2 unreadable by torch: not in their key's form)" "$T/out" &&
	ok || bad "audit with a list under a pt2 key: exit $r: $(cat "$T/out" "$T/err")"
# a value in torch's JSON under an FX graph key torch never makes (not 'f' and 51 of
# [a-z2-7]): nothing reads it. pull and audit judge it by one check: pull skips it as
# odd, audit counts it unreadable by torch (odd), not as an entry no bundle has.
nokey="pt2:fx-graph-v1::hello:c1"
rc set "$nokey" '{"data":"aGVsbG8="}' >/dev/null
run 0 "3 entries skipped: not in the form of their key" pull -v --redis "$URL" -o "$T/odd3.mcache"
grep -qxF "! odd form       $nokey" "$T/out" && ok || bad "pull -v of an FX value under a key torch never makes: $(cat "$T/out")"
"$MEGACACHE" audit -v --redis "$URL" -p "$PUB" "$T/a.mcache" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qxF "! odd form       $nokey" "$T/out" &&
	grep -qF "9 entries, 4 vouched for by a trusted bundle, 5 not (1 differ, 1 in no bundle, 3 unreadable by torch: not in their key's form)" "$T/out" &&
	ok || bad "audit of an FX value under a key torch never makes: exit $r: $(cat "$T/out" "$T/err")"
"$MEGACACHE" audit --redis "$URL" -p "$PUB" "$T/a.mcache" --json >"$T/out" 2>"$T/err"
r=$?
$PY - "$T/out" "$nokey" "$MC_SRCDIR/doc/json-schema.json" <<'PY' && [ "$r" = 1 ] && ok || bad "audit --json of an FX value under a key torch never makes: exit $r: $(head -c 1500 "$T/out")"
import json, sys
out, nokey, schema = sys.argv[1:]
j = json.load(open(out))
s = json.load(open(schema))
assert "torch cannot read" in s["$defs"]["audit"]["properties"]["odd"]["description"]
import jsonschema
jsonschema.Draft202012Validator(s).validate(j)
assert (j["entry_count"], j["vouched"], j["unvouched"], j["odd"]) == (9, 4, 1, 3), j
f = [x for x in j["findings"] if x["redis_key"] == nokey]
assert len(f) == 1 and f[0]["action"] == "odd" and f[0]["type"] is None, f
PY
rc del "$nokey" >/dev/null

# 12. --triton: Triton's kernels under triton:<hash>:<file>, raw; group files with
# their children's bare names, sorted, as Triton's remote cache writes them.
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
SRC=$(dirname "$(find "$T/src" -type d -name fxgraph | head -1)")
run 0 "" pack -q -o "$T/t.mcache" -s "$SEC" --from-dir "$SRC"
rc flushall >/dev/null
ntriton=$(find "$SRC/triton" -type f | wc -l)
run 0 "pushed $T/t.mcache into $SHOWN: $((ntriton + 6)) written" push "$T/t.mcache" -p "$PUB" --redis "$URL" --triton
$PY - "$PORT" "$SRC/triton" "$ntriton" <<'PY' && ok || bad "Triton's values are not its files"
import json, os, sys
import redis
port, root, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
r = redis.Redis(host="127.0.0.1", port=port)
keys = sorted(k.decode() for k in r.scan_iter("triton:*"))
assert len(keys) == n, (len(keys), n)
(dev,) = os.listdir(root)
for k in keys:
    _, h, f = k.split(":")
    data = open(os.path.join(root, dev, h, f), "rb").read()
    if f.startswith("__grp__"):
        names = sorted(json.loads(data)["child_paths"])
        data = json.dumps({"child_paths": names}).encode()
    assert r.get(k) == data, k
PY
run 0 "pushed $T/t.mcache into $SHOWN: nothing changed ($((ntriton + 6)) entries there already)" \
	push "$T/t.mcache" -p "$PUB" --redis "$URL" --triton
run 0 "pulled $((ntriton + 6)) entries" pull --redis "$URL" -o "$T/tp.mcache" -s "$SEC" --triton
run 0 "pulled 6 entries" pull --redis "$URL" -o "$T/tp6.mcache" -s "$SEC"
run 0 "nothing changed ($((ntriton + 6)) entries there already)" push "$T/tp.mcache" -p "$PUB" --redis "$URL" --triton
run 0 "audit of $SHOWN: $((ntriton + 6)) entries, $((ntriton + 6)) vouched for" \
	audit --redis "$URL" -p "$PUB" "$T/t.mcache" --triton
rm -rf "$T/src"

# 9. the server killed mid-push: one clear error, no crash; then a push completes.
$PY - "$T/big" 300 <<'PY'
import base64, hashlib, os, sys
root, n = sys.argv[1], int(sys.argv[2])
b32 = lambda b: base64.b32encode(hashlib.sha256(b).digest()).decode().lower()[:51]
for i in range(n):
    data = os.urandom(1 << 20)
    key = "f" + b32(b"key %d" % i)
    d = os.path.join(root, "fxgraph", key[1:3], key)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, b32(data)), "wb") as f:
        f.write(data)
PY
run 0 "packed 300 artifacts" pack -o "$T/big.mcache" -s "$SEC" --from-dir "$T/big"
rm -rf "$T/big"
rc flushall >/dev/null
"$MEGACACHE" push "$T/big.mcache" -p "$PUB" --redis "$URL" >"$T/bout" 2>"$T/berr" &
kill_mid $! writing
[ "$r" = 2 ] && ok || bad "push with its server killed exited $r, expected 2: $(cat "$T/berr")"
# one error naming the server, and (when replies came back first) how much was written
head -n 1 "$T/berr" | grep -qE "^megacache: redis://127.0.0.1:$PORT/0: " &&
	[ "$(wc -l <"$T/berr")" -le 2 ] && { [ "$(wc -l <"$T/berr")" = 1 ] ||
	tail -n 1 "$T/berr" | grep -qE "^megacache: note: [0-9]+ entr(y was|ies were) written before that"; } && ok ||
	bad "push with its server killed: not one line naming the server: $(cat "$T/berr")"
[ ! -s "$T/bout" ] && ok || bad "push with its server killed reported: $(cat "$T/bout")"
start_redis r "$PORT"
run 0 "pushed $T/big.mcache into $SHOWN: 300 written, 0 replaced, 0 unchanged" push "$T/big.mcache" -p "$PUB" --redis "$URL"
[ "$(dbsize)" = 300 ] && ok || bad "after the second push the store holds $(dbsize) keys, not 300"

# 9b. pull on 1, 2 and 4 threads: the same bundle, byte for byte, and the same lines, in
# key order. The store: the 300 entries of 1 MiB of random bytes (stored as they are),
# 40 small ones that compress, 3 values not in their key's form and 2 lists among them.
$PY - "$PORT" <<'PY'
import base64, hashlib, json, sys
import redis
r = redis.Redis(port=int(sys.argv[1]))
b32 = lambda b: base64.b32encode(hashlib.sha256(b).digest()).decode().lower()[:51]
for i in range(40):
    data = b"small entry %d " % i * 200
    r.set("pt2:fx-graph-v1::f%s:c1" % b32(data), json.dumps(
        {"data": base64.b64encode(data).decode(), "time_taken_ms": i}))
for i in range(3):
    r.set("pt2:fx-graph-v1::f%s:c1" % b32(b"odd %d" % i), b"not json %d" % i)
for i in range(2):
    r.rpush("pt2:fx-graph-v1::f%s:c1" % b32(b"list %d" % i), b"x")
PY
for threads in 1 2 4; do
	SOURCE_DATE_EPOCH=1700000000 "$MEGACACHE" pull --redis "$URL" -o "$T/pt$threads.mcache" \
		-s "$SEC" -v --threads "$threads" >"$T/pt$threads.out" 2>"$T/pt$threads.err"
	r=$?
	[ "$r" = 0 ] && grep -qF "pulled 340 entries from $SHOWN" "$T/pt$threads.out" &&
		grep -qF "5 entries skipped" "$T/pt$threads.out" && ok ||
		bad "pull --threads $threads of 345 entries: exit $r: $(head -c 400 "$T/pt$threads.out" "$T/pt$threads.err")"
done
for threads in 2 4; do
	cmp -s "$T/pt1.mcache" "$T/pt$threads.mcache" &&
		cmp -s "$T/pt1.out" "$(sed "s/pt$threads[.]mcache/pt1.mcache/" "$T/pt$threads.out" >"$T/ptx.out"; echo "$T/ptx.out")" && ok ||
		bad "pull --threads $threads made another bundle or said other lines than --threads 1"
done
[ "$(grep -c '^! odd' "$T/pt1.out")" = 5 ] && ok || bad "pull -v: the skipped entries: $(grep -c '^! odd' "$T/pt1.out")"
run 0 "OK (340 artifacts" verify "$T/pt1.mcache" -p "$PUB"
run 0 "nothing changed (340 entries there already)" push "$T/pt1.mcache" -p "$PUB" --redis "$URL"
"$MEGACACHE" list "$T/pt1.mcache" --json | $PY -c '
import json, sys
a = json.load(sys.stdin)["artifacts"]
print(sum(x["size"] == 1 << 20 for x in a), sum(x["size"] < 4096 for x in a))' >"$T/sizes"
[ "$(cat "$T/sizes")" = "300 40" ] && ok || bad "pulled bundle: sizes $(cat "$T/sizes"), not 300 of 1 MiB and 40 small"
# A failure part way (a user whose ACL refuses GET of the keys after 'f...m'): the
# entries before it are told, the same ones on 1 and 4 threads, then the server's error.
rc acl setuser part on '>pw' '~pt2:fx-graph-v1::f[2-7a-m]*' '+get' '+scan' '+ping' >/dev/null
before=$(rc --scan --pattern 'pt2:*' | sort | awk '/^pt2:fx-graph-v1::f[n-z]/ { exit } { n++ } END { print n + 0 }')
for threads in 1 4; do
	"$MEGACACHE" pull --redis "redis://part:pw@127.0.0.1:$PORT/0" -o "$T/part.mcache" -v \
		--threads "$threads" >"$T/part$threads.out" 2>"$T/part$threads.err"
	r=$?
	[ "$r" = 2 ] && grep -qF "refused: NOPERM" "$T/part$threads.err" && [ ! -e "$T/part.mcache" ] &&
		[ "$(grep -c '^[+!] ' "$T/part$threads.out")" = "$before" ] && ok ||
		bad "pull --threads $threads refused part way: exit $r, $(grep -c '^[+!] ' "$T/part$threads.out") entries told, not $before: $(cat "$T/part$threads.err")"
done
[ "$before" -gt 100 ] && [ "$before" -lt 300 ] && cmp -s "$T/part1.out" "$T/part4.out" && ok ||
	bad "pull refused part way: other lines on 4 threads than on 1 ($before before the refusal)"
rm -f "$T"/pt[124].mcache

# 9c. the server killed mid-pull: one clear error naming it, no bundle, nothing left.
"$MEGACACHE" pull --redis "$URL" -o "$T/killed.mcache" >"$T/kout" 2>"$T/kerr" &
kill_mid $! reading
[ "$r" = 2 ] && [ "$(wc -l <"$T/kerr")" = 1 ] && grep -qE "^megacache: redis://127.0.0.1:$PORT/0: " "$T/kerr" &&
	ok || bad "pull with its server killed: exit $r, expected 2 and one line naming the server: $(cat "$T/kerr")"
[ ! -e "$T/killed.mcache" ] && [ ! -s "$T/kout" ] && ok ||
	bad "pull with its server killed wrote a bundle or reported: $(cat "$T/kout")"
start_redis r "$PORT"
run 0 "pushed $T/big.mcache into $SHOWN: 300 written" push "$T/big.mcache" -p "$PUB" --redis "$URL"

# 12. what is said: a push with nothing in a remote form says so; pull names what it skips
# only with -v; torch's own host and port variables are a default for --redis.
run 0 "pushed nothing from $T/a.mcache: none of its artifacts has a form in" \
	push "$T/a.mcache" -p "$PUB" --redis "$URL" --types autotune
rc set "pt2:fx-graph-v1::f$(printf 'q%.0s' $(seq 51)):c1" 'not json' >/dev/null
run 0 "1 entry skipped" pull --redis "$URL" -o "$T/odd.mcache" -s "$SEC"
grep -q "^! odd" "$T/out" && bad "pull listed a skipped entry without -v: $(cat "$T/out")" || ok
run 0 "1 entry skipped" pull --redis "$URL" -o "$T/odd.mcache" -s "$SEC" -v
grep -q "^! odd .*fqqqq" "$T/out" && ok || bad "pull -v did not name the skipped entry: $(cat "$T/out")"
TORCHINDUCTOR_REDIS_HOST=127.0.0.1 TORCHINDUCTOR_REDIS_PORT=$PORT \
	run 0 "into redis://127.0.0.1:$PORT/0: nothing changed" push "$T/big.mcache" -p "$PUB"
# torch's TORCHINDUCTOR_REDIS_HOST and _PORT name the server of pull and audit too, with
# no --redis: localhost for a host unset; TORCHINDUCTOR_REDIS_URL wins over them, and
# --redis over all. The help, the man page and README say so.
rc del "pt2:fx-graph-v1::f$(printf 'q%.0s' $(seq 51)):c1" >/dev/null
unset TORCHINDUCTOR_REDIS_URL TORCHINDUCTOR_REDIS_HOST TORCHINDUCTOR_REDIS_PORT
TORCHINDUCTOR_REDIS_HOST=127.0.0.1 TORCHINDUCTOR_REDIS_PORT=$PORT \
	run 0 "pulled 300 entries from redis://127.0.0.1:$PORT/0 into $T/env.mcache" pull -o "$T/env.mcache" -s "$SEC"
TORCHINDUCTOR_REDIS_PORT=$PORT \
	run 0 "audit of redis://localhost:$PORT/0: 300 entries, 300 vouched for" audit -p "$PUB" "$T/env.mcache"
TORCHINDUCTOR_REDIS_URL="$URL" TORCHINDUCTOR_REDIS_HOST=127.0.0.1 TORCHINDUCTOR_REDIS_PORT=1 \
	run 0 "audit of $SHOWN: 300 entries" audit -p "$PUB" "$T/env.mcache"
TORCHINDUCTOR_REDIS_URL=redis://127.0.0.1:1/0 TORCHINDUCTOR_REDIS_PORT=1 \
	run 0 "audit of $SHOWN: 300 entries" audit -p "$PUB" "$T/env.mcache" --redis "$URL"
run 2 "audit needs --redis URL" audit -p "$PUB" "$T/env.mcache"
# set but empty is not set
TORCHINDUCTOR_REDIS_HOST= TORCHINDUCTOR_REDIS_PORT= \
	run 2 "audit needs --redis URL" audit -p "$PUB" "$T/env.mcache"
for w in TORCHINDUCTOR_REDIS_HOST TORCHINDUCTOR_REDIS_PORT; do
	"$MEGACACHE" --help | grep -qF "\$$w" && ok || bad "megacache --help does not name $w"
	"$MEGACACHE" push --help | grep -qF "\$$w" && ok || bad "push --help does not name $w"
	sed -n '/^\.SH ENVIRONMENT/,/^\.SH EXAMPLES/p' "$MC_SRCDIR/doc/megacache.1" | grep -qF "$w" &&
		ok || bad "the man page's ENVIRONMENT does not name $w"
	grep -qF "\`$w\`" "$MC_SRCDIR/README.md" && ok || bad "README does not name $w"
done
# a user alone in the URL, the password from the file: refused as the user's (default
# user has no such password here), not as a malformed URL
run 2 "authentication refused" push "$T/a.mcache" -p "$PUB" --redis "redis://alice@127.0.0.1:$PORT/0" \
	--redis-password-file "$T/right.pw"

# 13. several entries under one remote key. torch keeps two entries of one FX graph key
# on disk (guards that differ); a bundle holds one artifact per type and key: pack warns
# and keeps the last in name order, and push writes that one. Triton kernels of one hash
# on two devices have one remote key: the last in the bundle's order is written, the
# other counted as not pushed.
$PY - "$T/two" <<'PY'
import base64, hashlib, os, sys
b32 = lambda b: base64.b32encode(hashlib.sha256(b).digest()).decode().lower()[:51]
key = "f" + b32(b"two entries")
d = os.path.join(sys.argv[1], "fxgraph", key[1:3], key)
os.makedirs(d)
for data in (b"guard variant one " * 50, b"guard variant two " * 50):
    open(os.path.join(d, b32(data)), "wb").write(data)
h = "A" * 52
for dev, data in (("0", b"cubin for device 0"), ("1", b"cubin for device 1")):
    k = os.path.join(sys.argv[1], "triton", dev, h)
    os.makedirs(k)
    open(os.path.join(k, "kern.cubin"), "wb").write(data)
open(os.path.join(sys.argv[1], "key"), "w").write(key)
PY
# Both entries of the FX graph key are kept (torch keeps one per set of guards); torch's
# remote cache holds one value per key, so push writes the last and says so.
run 0 "" pack -o "$T/two.mcache" -s "$SEC" --from-dir "$T/two"
grep -q "warning" "$T/err" && bad "pack of two entries of one key warned: $(cat "$T/err")" || ok
[ "$("$MEGACACHE" list "$T/two.mcache" | grep -c "^inductor .* $(cat "$T/two/key")/")" = 2 ] &&
	ok || bad "pack kept not both FX graph entries: $("$MEGACACHE" list "$T/two.mcache")"
rc flushall >/dev/null
run 0 "2 artifacts not pushed: another of the bundle has the same remote key (the last is pushed; torch's remote cache keeps one entry per FX graph or AOTAutograd key" \
	push "$T/two.mcache" -p "$PUB" --redis "$URL" --triton
[ "$(rc get "triton:$(printf 'A%.0s' $(seq 52)):kern.cubin")" = "cubin for device 1" ] && ok ||
	bad "the kernel of device 1 (the last) was not the one pushed"
$PY - "$PORT" "$(cat "$T/two/key")" <<'PY' && ok || bad "the FX graph pushed is not the last entry"
import base64, hashlib, json, sys
import redis
b32 = lambda b: base64.b32encode(hashlib.sha256(b).digest()).decode().lower()[:51]
last = max((b"guard variant one " * 50, b"guard variant two " * 50), key=b32)  # in name order
v = redis.Redis(port=int(sys.argv[1])).get("pt2:fx-graph-v1::%s:c1" % sys.argv[2])
assert base64.b64decode(json.loads(v)["data"]) == last, v[:80]
PY

# 13b. push checks keys and destinations (the plan) beside making its first commands
# when it has several threads; nothing is sent or told before the plan passed, and what
# it sends and tells is what one thread, which plans first, sends and tells. One kernel
# on two devices, the same bytes, in a Triton root without device level: the plan
# installs it once, and push writes it once, without calling it a second entry.
$PY - "$T/twin" <<'PY'
import base64, hashlib, os, sys
b32 = lambda b: base64.b32encode(hashlib.sha256(b).digest()).decode().lower()[:51]
key = "f" + b32(b"twin kernels")
d = os.path.join(sys.argv[1], "fxgraph", key[1:3], key)
os.makedirs(d)
data = b"one FX graph entry " * 40
open(os.path.join(d, b32(data)), "wb").write(data)
open(os.path.join(sys.argv[1], "path"), "w").write(os.path.join(key[1:3], key, b32(data)))
for dev in ("0", "1"):
    k = os.path.join(sys.argv[1], "triton", dev, "B" * 52)
    os.makedirs(k)
    open(os.path.join(k, "kern.cubin"), "wb").write(b"one cubin, two devices")
PY
run 0 "" pack -q -o "$T/twin.mcache" -s "$SEC" --from-dir "$T/twin"
for threads in 1 4; do
	rc flushall >/dev/null
	TRITON_CACHE_DIR="$T/flat" "$MEGACACHE" push "$T/twin.mcache" -p "$PUB" --redis "$URL" \
		--triton --threads "$threads" --json >"$T/twin$threads.json" 2>"$T/twin$threads.err"
	r=$?
	[ "$r" = 0 ] && [ "$(dbsize)" = 2 ] && ok || bad "push --threads $threads of twin kernels:" \
		"exit $r, DBSIZE $(dbsize): $(cat "$T/twin$threads.err")"
done
if $PY - "$T/twin1.json" "$T/twin4.json" <<'PY'
import json, sys
one, four = (json.load(open(f)) for f in sys.argv[1:])
assert one == four, (one, four)
assert (one["written"], one["shadowed"]) == (2, 0), one
assert [e["action"] for e in one["entries"]] == ["written", "written"], one["entries"]
PY
then ok; else bad "push of twin kernels: other entries on 4 threads than on 1"; fi
# A plan that fails sends nothing, on any number of threads: here Triton's root is the
# FX graph entry's file, so a kernel would have to be written inside it.
for threads in 1 4; do
	rc flushall >/dev/null
	TORCHINDUCTOR_CACHE_DIR="$T/ind" TRITON_CACHE_DIR="$T/ind/fxgraph/$(cat "$T/twin/path")" \
		"$MEGACACHE" push "$T/twin.mcache" -p "$PUB" --redis "$URL" --triton \
		--threads "$threads" >"$T/clash$threads.out" 2>"$T/clash$threads.err"
	r=$?
	[ "$r" = 1 ] && [ ! -s "$T/clash$threads.out" ] && [ "$(dbsize)" = 0 ] &&
		grep -qF "both need $T/ind/fxgraph/$(cat "$T/twin/path")" "$T/clash$threads.err" &&
		ok || bad "push --threads $threads with a plan that fails: exit $r," \
		"DBSIZE $(dbsize): $(cat "$T/clash$threads.err")"
done
cmp -s "$T/clash1.err" "$T/clash4.err" && ok ||
	bad "a plan that fails: other words on 4 threads than on 1"

# 14. review findings. A password with '/' in a URL refused for its form is not shown.
run 2 "Redis URL 'redis://***@h:6379/0'" push "$T/a.mcache" -p "$PUB" --redis 'redis://:pa/ss@h:6379/0'
grep -qF "pa/ss" "$T/err" && bad "a refused URL showed its password: $(cat "$T/err")" || ok
# A GET the server refuses for another reason than the type (an ACL without GET) is the
# server's error (exit 2), not a store full of odd entries.
rc flushall >/dev/null
run 0 "" push "$T/a.mcache" -p "$PUB" --redis "$URL"
rc acl setuser noget on '>pw' '~*' '+@all' '-get' >/dev/null
run 2 "refused: NOPERM" audit --redis "redis://noget:pw@127.0.0.1:$PORT/0" -p "$PUB" "$T/a.mcache"
run 2 "refused: NOPERM" pull --redis "redis://noget:pw@127.0.0.1:$PORT/0" -o "$T/noget.mcache"
[ ! -e "$T/noget.mcache" ] && ok || bad "a refused pull wrote a bundle"
# A value in torch's form whose base64 holds a JSON escape ("\/") is read as JSON.
k=$(rc --scan --pattern 'pt2:fx-graph-v1::*' | head -n 1)
$PY - "$PORT" "$k" <<'PY'
import sys
import redis
r = redis.Redis(port=int(sys.argv[1]))
v = r.get(sys.argv[2]).replace(b"/", b"\\/")
assert b"\\/" in v
r.set(sys.argv[2], v)
PY
run 0 "6 vouched for by a trusted bundle, 0 not" audit --redis "$URL" -p "$PUB" "$T/a.mcache"

# 15. damaged objects. push reads only the blocks that hold objects it sends, each
# object checked before it is sent; one that fails stops the push: the entries of the
# objects before it in the bundle are written, none after, whatever the number of
# workers. The big bundle's random contents are stored as they are (blocks of 16
# objects), so a flipped byte fails the object that holds it.
# index BUNDLE: the index's JSON text of BUNDLE.
index() {
	tar -xOf "$1" index.json.zst | zstd -dcq
}
# damage BUNDLE OUT N: OUT is BUNDLE with a byte in the middle of object N's content
# flipped (N counts from 1, in the index's order; its block is stored as is).
damage() {
	index "$1" >"$T/index.json"
	$PY - "$@" "$T/index.json" <<'PY'
import json, shutil, sys, tarfile
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3]) - 1
j = json.load(open(sys.argv[4]))
first = 0
for k, b in enumerate(j["blocks"]):
    if n < first + b["objects"]:
        break
    first += b["objects"]
assert b["encoding"] == "none", b
at = sum(o["size"] for o in j["objects"][first:n]) + j["objects"][n]["size"] // 2
shutil.copyfile(src, out)
with tarfile.open(src) as t:
    m = t.getmember("blocks/%d" % k)
with open(out, "r+b") as f:
    f.seek(m.offset_data + at)
    c = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([c[0] ^ 0x40]))
print(j["objects"][n]["hash"])
PY
}
# object_keys BUNDLE: the FX graph keys of BUNDLE, one a line, in its objects' order.
object_keys() {
	index "$1" | $PY -c '
import json, sys
j = json.load(sys.stdin)
key = {a["hash"]: a["key"].split("/")[0] for a in j["artifacts"] if a["type"] == "inductor"}
for o in j["objects"]:
    if o["hash"] in key:
        print(key[o["hash"]])
'
}
object_keys "$T/big.mcache" >"$T/order"
[ "$(wc -l <"$T/order")" = 300 ] && ok || bad "the big bundle's objects: $(wc -l <"$T/order")"
hash=$(damage "$T/big.mcache" "$T/bad.mcache" 150)
head -n 149 "$T/order" | sed 's/^/pt2:fx-graph-v1::/; s/$/:c1/' | sort >"$T/before"
for threads in 1 2; do
	rc flushall >/dev/null
	run 1 "$T/bad.mcache: object $hash: content does not match its hash" \
		push "$T/bad.mcache" -p "$PUB" --redis "$URL" --threads "$threads"
	rc --scan --pattern 'pt2:*' | sort >"$T/written"
	cmp -s "$T/written" "$T/before" && ok ||
		bad "push --threads $threads of a bundle damaged at object 150: wrote $(wc -l <"$T/written") keys, not the 149 before it"
	# what it says was written is what the store got
	grep -qxF "megacache: note: 149 entries were written before that, each checked; a push again finishes the rest" "$T/err" &&
		ok || bad "push --threads $threads of a damaged bundle: $(cat "$T/err")"
done
# The small bundle is one zstd block: a byte flipped in it is told as such, by push and
# by verify.
flip_member "$T/a.mcache" "$T/badtune.mcache" blocks/0 0x40
rc flushall >/dev/null
run 1 "blocks/0: stored bytes do not match their hash" push "$T/badtune.mcache" -p "$PUB" --redis "$URL"
run 1 "blocks/0: stored bytes do not match their hash" verify "$T/badtune.mcache" -p "$PUB"
# From a pipe the blocks are read in order, and the damage is found alike; a sound
# bundle from a pipe pushes as from its file. (Standard input redirected from a file is
# read as that file.)
rc flushall >/dev/null
cat "$T/badtune.mcache" | "$MEGACACHE" push - -p "$PUB" --redis "$URL" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "blocks/0: stored bytes do not match their hash" "$T/err" && ok ||
	bad "push of a damaged bundle from a pipe: exit $r: $(cat "$T/err")"
rc flushall >/dev/null
cat "$T/a.mcache" | "$MEGACACHE" push - -p "$PUB" --redis "$URL" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 0 ] && grep -qF "pushed standard input into $SHOWN: 6 written" "$T/out" && [ "$(dbsize)" = 6 ] &&
	ok || bad "push from a pipe: exit $r: $(cat "$T/out" "$T/err")"
# A block push does not read is not checked (SPEC.md section 11): the vector's only
# damage lies in the block of its autotune config, which has no remote form. push from
# the file writes the pgo probe from the other block; verify and load refuse the bundle;
# from a pipe push reads every block and refuses it too.
OTHER="$MC_SRCDIR/format/vectors/v2-flip-other-block.mcache"
rc flushall >/dev/null
run 0 "into $SHOWN: 1 written, 0 replaced, 0 unchanged" push "$OTHER" -p "$PUB" --redis "$URL"
[ "$(rc --scan --pattern '*')" = "pt2:dynamo-pgo::megacache-probe:None::c1" ] && ok ||
	bad "push of a bundle damaged in a block it does not read wrote: $(rc --scan --pattern '*')"
run 1 "content does not match its hash" verify "$OTHER" -p "$PUB"
rc flushall >/dev/null
cat "$OTHER" | "$MEGACACHE" push - -p "$PUB" --redis "$URL" >"$T/out" 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "content does not match its hash" "$T/err" && [ "$(dbsize)" = 0 ] && ok ||
	bad "push from a pipe of a bundle damaged in a block of other types: exit $r: $(cat "$T/err")"

# 16. the bundle's FX graph keys hold lists (SET ... GET refuses them): the first
# refusal is the error (exit 2), and the note counts every entry the store took (its
# AOTAutograd entries), past the later refusals too.
rc flushall >/dev/null
for k in $("$MEGACACHE" list "$T/a.mcache" | awk '$1 == "inductor" { sub("/.*", "", $4); print "pt2:fx-graph-v1::" $4 ":c1" }'); do
	rc rpush "$k" x >/dev/null
done
run 2 "WRONGTYPE" push "$T/a.mcache" -p "$PUB" --redis "$URL"
strings=0
for k in $(rc --scan --pattern 'pt2:*'); do
	[ "$(rc type "$k")" = string ] && strings=$((strings + 1))
done
naot=$("$MEGACACHE" list "$T/a.mcache" | awk '$1 == "aot_autograd" { n++ } END { print n + 0 }')
[ "$naot" -ge 1 ] && [ "$strings" = "$naot" ] &&
	grep -qxF "megacache: note: $naot entries were written before that, each checked; a push again finishes the rest" "$T/err" &&
	ok || bad "push onto lists: $strings strings stored of $naot; said: $(cat "$T/err")"

# 17. torch 2.11 keys an AOTAutograd entry by TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE as the
# run that made it had it, so a worker with the remote caches on ("1") finds only entries
# made with "1". save records the setting as a label; push warns when the AOTAutograd
# entries it writes were made otherwise, or when the bundle does not say.
W17="$T/aotlabel"
mkdir -p "$W17/home"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$W17"
AW="its 1 AOTAutograd entry was made with TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE unset; torch keys AOTAutograd entries by that setting, so workers with TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1"
# the mlp cache dir holds two AOTAutograd keys: two entries
AW2=$(printf '%s' "$AW" | sed 's/its 1 AOTAutograd entry was/its 2 AOTAutograd entries were/')
HOME="$W17/home" TORCHINDUCTOR_CACHE_DIR="$W17/cache_mlp_cold" run 0 "" save -q -o "$W17/off.mcache" -s "$SEC"
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=unset" list "$W17/off.mcache"
rc flushall >/dev/null
run 0 "pushed $W17/off.mcache" push "$W17/off.mcache" -p "$PUB" --redis "$URL"
grep -qF "megacache: warning: $W17/off.mcache: $AW2" "$T/err" && grep -qF "Make the bundle in a run with TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" "$T/err" &&
	ok || bad "push of AOTAutograd entries made with the remote caches unset: no warning: $(cat "$T/err")"
run 0 "" push "$W17/off.mcache" -p "$PUB" --redis "$URL" --json
$PY - "$T/out" <<'PY' && ok || bad "push --json lacks the warning: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["warnings"]) == 1 and "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE unset" in j["warnings"][0], j
PY
run 0 "" push "$W17/off.mcache" -p "$PUB" --redis "$URL" --types inductor
grep -q "warning" "$T/err" && bad "push of FX graphs alone warned: $(cat "$T/err")" || ok
TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=0 HOME="$W17/home" TORCHINDUCTOR_CACHE_DIR="$W17/cache_mlp_cold" \
	run 0 "" save -q -o "$W17/zero.mcache" -s "$SEC"
run 0 "" push "$W17/zero.mcache" -p "$PUB" --redis "$URL"
grep -qF "were made with TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=0;" "$T/err" && ok || bad "push of entries made with 0: $(cat "$T/err")"
# made as the workers are: no warning, and the JSON's warnings empty
TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1 HOME="$W17/home" TORCHINDUCTOR_CACHE_DIR="$W17/cache_mlp_cold" \
	run 0 "" save -q -o "$W17/on.mcache" -s "$SEC"
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" list "$W17/on.mcache"
run 0 "" push "$W17/on.mcache" -p "$PUB" --redis "$URL" --json
[ ! -s "$T/err" ] && grep -q '"warnings":[[:space:]]*\[\]' "$T/out" && ok || bad "push of entries made with 1 warned: $(cat "$T/err" "$T/out")"
# a label given wins over what save sees
HOME="$W17/home" TORCHINDUCTOR_CACHE_DIR="$W17/cache_mlp_cold" \
	run 0 "" save -q -o "$W17/given.mcache" -s "$SEC" --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" list "$W17/given.mcache"
# pack does not know how its sources were made: said so, with the label that tells
run 0 "" push "$T/a.mcache" -p "$PUB" --redis "$URL"
grep -qF "its 2 AOTAutograd entries were made under a TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE the bundle does not record" "$T/err" &&
	grep -qF "pack it with --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" "$T/err" && ok ||
	bad "push of a bundle that does not say: $(cat "$T/err")"
run 0 "" push "$T/a.mcache" -p "$PUB" --redis "$URL" -q
[ ! -s "$T/err" ] && ok || bad "push -q printed: $(cat "$T/err")"
# merge: inputs that agree keep the label; inputs that disagree are refused, naming it
run 0 "" merge -o "$W17/m-same.mcache" -p "$PUB" -s "$SEC" "$W17/on.mcache" "$W17/given.mcache"
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" list "$W17/m-same.mcache"
run 2 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE differs between the inputs" \
	merge -o "$W17/m-mixed.mcache" -p "$PUB" -s "$SEC" "$W17/off.mcache" "$W17/on.mcache"
[ ! -e "$W17/m-mixed.mcache" ] && ok || bad "a merge of differing settings was written"
# pull: the store does not record how its AOTAutograd entries were made (torch writes
# them only from runs with "1", but a push of a bundle made with it unset put these
# there), so the label says unknown, not 1, and a push of what was pulled warns; a
# --label given says what the user knows. A key that names an entry is not torch's,
# and is skipped as odd.
rc flushall >/dev/null
run 0 "" push "$W17/off.mcache" -p "$PUB" --redis "$URL" -q
rc set "pt2:fx-graph-v1::fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i/$(printf 'a%.0s' $(seq 51)):c1" \
	'{"data": "aGVsbG8=", "time_taken_ms": 0}' >/dev/null
run 0 "" pull --redis "$URL" -o "$W17/pulled.mcache" -s "$SEC" --json
grep -q '"odd":[[:space:]]*1' "$T/out" && ok || bad "pull of a key with an entry: $(cat "$T/out")"
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=unknown" list "$W17/pulled.mcache"
grep -q "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" "$T/out" && bad "pull of entries made unset says =1: $(cat "$T/out")" || ok
run 0 "" load "$W17/pulled.mcache" -p "$PUB" --cache-dir "$W17/pulled"
rc -n 8 flushdb >/dev/null
run 0 "6 written" push "$W17/pulled.mcache" -p "$PUB" --redis "$URL/8"
grep -qF "megacache: warning: $W17/pulled.mcache: its 2 AOTAutograd entries were pulled from a Redis cache, which does not record the TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE they were made with" "$T/err" &&
	grep -qF "if nothing else wrote that cache, pull it with --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" "$T/err" &&
	ok || bad "push of a pulled bundle did not warn: $(cat "$T/err")"
run 0 "" pull --redis "$URL" -o "$W17/pulled1.mcache" -s "$SEC" --label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1
run 0 "label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE=1" list "$W17/pulled1.mcache"
run 0 "" push "$W17/pulled1.mcache" -p "$PUB" --redis "$URL/8"
[ ! -s "$T/err" ] && ok || bad "push of a bundle pulled with --label ...=1 warned: $(cat "$T/err")"
rc -n 8 flushdb >/dev/null

# 18. -v: a line per entry, as the help says: a mark, what was done in words and the
# entry's Redis key (an artifact with no remote form: its type and key), then the
# summary. A database of its own.
V="$URL/7"
line() { printf '%s %-14s %s\n' "$@"; } # line MARK WORDS NAME: a line as -v prints it
keys=$("$MEGACACHE" push "$T/a.mcache" -p "$PUB" --redis "$V" --dry-run --json | $PY -c 'import json, sys
print("\n".join(sorted(e["redis_key"] for e in json.load(sys.stdin)["entries"] if e["redis_key"])))')
lines() { # lines MARK WORDS: the line of each Redis key the bundle fills, sorted
	for k in $keys; do line "$1" "$2" "$k"; done
}
noform=$("$MEGACACHE" list "$T/a.mcache" --json | $PY -c 'import json, sys
for a in sorted(a["key"] for a in json.load(sys.stdin)["artifacts"] if a["type"] == "autotune"):
    print("  %-14s autotune %s" % ("no remote form", a))')
told() { grep -E '^([+~=!] |  no remote form )' "$T/out" | sort; } # the entries' lines
[ "$(echo "$keys" | wc -l)" = 6 ] && [ "$(echo "$noform" | wc -l)" = 4 ] && ok ||
	bad "a.mcache: not 6 Redis keys and 4 autotune artifacts: $keys $noform"
run 0 "would write 6" push -v "$T/a.mcache" -p "$PUB" --redis "$V" --dry-run
[ "$(told)" = "$( (lines + "would write"; echo "$noform") | sort)" ] && ok ||
	bad "push -v --dry-run: $(cat "$T/out")"
run 0 "" push -v "$T/a.mcache" -p "$PUB" --redis "$V"
[ "$(told)" = "$( (lines + written; echo "$noform") | sort)" ] &&
	grep -qxF "pushed $T/a.mcache into redis://127.0.0.1:$PORT/7: 6 written, 0 replaced, 0 unchanged" "$T/out" &&
	ok || bad "push -v: $(cat "$T/out")"
run 0 "nothing changed" push -v "$T/a.mcache" -p "$PUB" --redis "$V"
[ "$(told | grep -v 'no remote form')" = "$(lines = unchanged)" ] && ok || bad "push -v again: $(cat "$T/out")"
run 0 "nothing changed" push "$T/a.mcache" -p "$PUB" --redis "$V"
[ -z "$(told)" ] && ok || bad "push without -v listed entries: $(cat "$T/out")"
odd="pt2:fx-graph-v1::f$(printf 'v%.0s' $(seq 51)):c1"
rc -n 7 set "$odd" 'not json' >/dev/null
run 0 "1 entry skipped" pull -v --redis "$V" -o "$T/v.mcache"
[ "$(told)" = "$( (lines + pulled; line '!' "odd form" "$odd") | sort)" ] && ok ||
	bad "pull -v: $(cat "$T/out")"
"$MEGACACHE" audit -v --redis "$V" -p "$PUB" "$T/a.mcache" >"$T/out" 2>"$T/err"
[ $? = 1 ] && [ "$(told)" = "$( (lines = vouched; line '!' "odd form" "$odd") | sort)" ] && ok ||
	bad "audit -v: $(cat "$T/out" "$T/err")"
"$MEGACACHE" audit --redis "$V" -p "$PUB" "$T/a.mcache" >"$T/out" 2>"$T/err"
[ $? = 1 ] && [ "$(told)" = "$(line '!' "odd form" "$odd")" ] && ok || bad "audit: $(cat "$T/out" "$T/err")"
# and the help says so
"$MEGACACHE" push --help | grep -qF "a line per artifact: written, replaced, unchanged" && ok ||
	bad "push --help does not say what -v prints"
"$MEGACACHE" pull --help | grep -qF "a line per entry: pulled, or skipped" && ok ||
	bad "pull --help does not say what -v prints"
"$MEGACACHE" --help | grep -qF "push, pull and audit each entry" && ok ||
	bad "megacache --help does not say what -v does for push, pull and audit"

# pull's spool files are gone after every pull, failed or not
[ -z "$(ls -A "$TMPDIR")" ] && ok || bad "left in the temp folder: $(ls -A "$TMPDIR")"

finish
