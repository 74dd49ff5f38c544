#!/bin/sh
# fleet.sh - megacache push and pull against raw pipelined Redis commands on the same bytes.
# The corpus is the real CUDA MLP cache dir scaled by COPIES (scale_cache.py), its FX-graph
# and AOTAutograd entries renamed after their new contents' hash (scale_cache.py keeps the
# old names, which pack skips), packed and signed. Only those entries are pushed.
# After one push, every pt2:* key and value is dumped into RESP files, and the baselines
# are `redis-cli --pipe` of them, the standard mass-insertion path (it reads and counts the
# replies, and discards them):
#   push (empty store)  vs  SET key value            into an empty store
#   push (full store)   vs  SET key value GET        onto the filled store (push's commands)
#   pull                vs  GET key                  from the filled store
# The two sides alternate (which goes first flips every run); the table gives medians of
# wall time, MB/s of value bytes (the sum of the values' lengths), megacache's peak RSS and
# the throughput ratio raw time / megacache time.
#   sh tests/bench/fleet.sh
# Environment: RUNS (default 5), COPIES (130), WORK (/tmp/megacache-fleet), SHARED
# (../shared), THREADS (megacache's --threads, default 0), PORT (default: a free one),
# PY (/usr/bin/python3), TIME (GNU time: /usr/bin/time).
# Needs: python3 with redis, GNU time, redis-server, redis-cli. Run from a built tree.
set -eu
top=$(pwd)
RUNS=${RUNS:-5}
COPIES=${COPIES:-130}
THREADS=${THREADS:-0}
WORK=${WORK:-/tmp/megacache-fleet}
SHARED=${SHARED:-$top/../shared}
PY=${PY:-/usr/bin/python3}
TIME=${TIME:-/usr/bin/time}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for tool in $PY $TIME redis-server redis-cli; do
	command -v "$tool" >/dev/null 2>&1 || { echo "fleet: $tool is needed" >&2; exit 2; }
done
$PY -c 'import redis' 2>/dev/null || { echo "fleet: python3's redis module is needed" >&2; exit 2; }
PUB="$top/format/vectors/keys/test.pub"
KEY="$top/format/vectors/keys/test.key"
CAP="--max-manifest-bytes 1073741824"

mkdir -p "$WORK"
C="$WORK/cache-$COPIES"
if [ ! -d "$C" ]; then
	rm -rf "$WORK/src"
	mkdir -p "$WORK/src"
	tar -xzf "$top/tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
	$PY "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C.tmp" "$COPIES"
	# torch names FX-graph and AOTAutograd entries after their content: base32 of the SHA-256, 51 characters
	$PY - "$C.tmp" <<'EOF'
import base64, hashlib, os, sys
for top in ("fxgraph", "aotautograd"):
    for root, _, names in os.walk(os.path.join(sys.argv[1], top)):
        for name in names:
            p = os.path.join(root, name)
            with open(p, "rb") as fh:
                h = base64.b32encode(hashlib.sha256(fh.read()).digest()).decode().lower()[:51]
            os.rename(p, os.path.join(root, h))
EOF
	mv "$C.tmp" "$C"
fi
B="$WORK/corpus-$COPIES.mcache"
[ -f "$B" ] || "$M" pack $CAP -q -o "$B" -s "$KEY" --from-dir "$C"

PORT=${PORT:-$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
R="redis://127.0.0.1:$PORT/0"
rm -rf "$WORK/redis"
mkdir -p "$WORK/redis"
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --maxmemory 0 \
	--dir "$WORK/redis" --daemonize yes --pidfile "$WORK/redis/pid" --logfile "$WORK/redis/log"
stop() { [ -f "$WORK/redis/pid" ] && kill "$(cat "$WORK/redis/pid")" 2>/dev/null || :; }
trap stop EXIT
trap 'exit 1' INT TERM
n=0
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do
	n=$((n + 1))
	[ "$n" -lt 50 ] || { echo "fleet: redis-server did not start" >&2; exit 1; }
	sleep 0.1
done
rc() { redis-cli -p "$PORT" "$@" >/dev/null; }

# t NAME CMD...: runs CMD under GNU time, appends "wall rss_kb" to $WORK/NAME.times.
t() {
	name=$1
	shift
	$TIME -f "%e %M" -o "$WORK/.t" "$@" >"$WORK/.out" 2>"$WORK/.err" || {
		echo "fleet: $name failed: $(tail -3 "$WORK/.err")" >&2
		exit 1
	}
	cat "$WORK/.t" >> "$WORK/$name.times"
}
median() { # median COLUMN FILE
	cut -d' ' -f"$1" "$2" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

push() { cat "$B" > /dev/null; t "$1" "$M" push $CAP -q "$B" -p "$PUB" --redis "$R" --threads "$THREADS"; }
raw() {
	t "$1" redis-cli -p "$PORT" --pipe < "$2"
	grep -q 'errors: 0,' "$WORK/.out" || { echo "fleet: $1: $(tail -1 "$WORK/.out")" >&2; exit 1; }
}
pull() { rm -f "$WORK/pull.mcache"; t pull "$M" pull $CAP -q --redis "$R" -o "$WORK/pull.mcache" --threads "$THREADS"; }

# The baselines' commands: the store after one push, as RESP.
rc FLUSHALL
"$M" push $CAP -q "$B" -p "$PUB" --redis "$R"
$PY - "$PORT" "$WORK" > "$WORK/values" <<'EOF'
import redis, sys
r = redis.Redis(port=int(sys.argv[1]))
keys = sorted(r.scan_iter(match="pt2:*", count=1000))
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
total = 0
with open(sys.argv[2] + "/set.resp", "wb") as s, open(sys.argv[2] + "/setget.resp", "wb") as sg, \
        open(sys.argv[2] + "/get.resp", "wb") as g:
    for i in range(0, len(keys), 256):
        batch = keys[i:i + 256]
        for k, v in zip(batch, r.mget(batch)):
            total += len(v)
            s.write(cmd(b"SET", k, v))
            sg.write(cmd(b"SET", k, v, b"GET"))
            g.write(cmd(b"GET", k))
print(len(keys), total)
EOF
read -r nkeys vbytes < "$WORK/values"
arts=$("$M" list $CAP "$B" | awk '$1 == "inductor" || $1 == "aot_autograd" || $1 == "pgo" { n++ } END { print n + 0 }')

rm -f "$WORK"/*.times
i=0
while [ "$i" -lt "$RUNS" ]; do
	i=$((i + 1))
	if [ $((i % 2)) -eq 1 ]; then
		rc FLUSHALL; raw raw-set "$WORK/set.resp"; rc FLUSHALL; push push-empty
		raw raw-setget "$WORK/setget.resp"; push push-full
		raw raw-get "$WORK/get.resp"; pull
	else
		rc FLUSHALL; push push-empty; rc FLUSHALL; raw raw-set "$WORK/set.resp"
		push push-full; raw raw-setget "$WORK/setget.resp"
		pull; raw raw-get "$WORK/get.resp"
	fi
done
for f in "$WORK"/*.times; do # every run, for the record
	echo "fleet: $(basename "$f" .times) (s): $(cut -d' ' -f1 "$f" | tr '\n' ' ')" >&2
done

echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), $(uname -sr);" \
	"$(redis-server --version | cut -d' ' -f1-3); megacache --threads $THREADS"
echo "corpus: $COPIES copies, bundle $(stat -c %s "$B" | awk '{ printf "%.1f MB", $1 / 1e6 }'), $arts FX-graph/AOTAutograd/PGO artifacts;" \
	"pushed $nkeys keys, $(echo "$vbytes" | awk '{ printf "%.1f MB", $1 / 1e6 }') of values"
echo
echo "| operation | raw (s) | megacache (s) | raw (MB/s) | megacache (MB/s) | megacache RSS (KB) | throughput megacache/raw |"
echo "|---|---|---|---|---|---|---|"
row() { # row LABEL MC RAW
	mw=$(median 1 "$WORK/$2.times")
	bw=$(median 1 "$WORK/$3.times")
	mr=$(median 2 "$WORK/$2.times")
	awk -v l="$1" -v mw="$mw" -v bw="$bw" -v mr="$mr" -v b="$vbytes" \
		'BEGIN { printf "| %s | %.2f | %.2f | %.0f | %.0f | %d | %.2f |\n", l, bw, mw, b / 1e6 / bw, b / 1e6 / mw, mr, bw / mw }'
}
row "push, empty store (raw: SET)" push-empty raw-set
row "push, full store, unchanged (raw: SET ... GET)" push-full raw-setget
row "pull, full store (raw: GET)" pull raw-get
echo
echo "medians of $RUNS alternating runs; raw is \`redis-cli --pipe\` of the RESP commands (replies read, discarded)"
