#!/bin/sh
# registry.sh - bundles through a registry against bundles from a file: load of the same
# bundle from a local registry over loopback (oci://) and from its file, and, for the
# memory a stream needs, from a pipe; then copy of the bundle file into an empty
# registry, against skopeo copy of the same bytes from an OCI layout. Each pair
# alternates which side goes first (it flips every run); the table gives medians of wall
# time, peak RSS and CPU-seconds (user and system) of each side, and the ratios.
#   sh tests/bench/registry.sh [COPIES]
# COPIES: copies of the real CUDA MLP cache dir (default 130: about 510 MB in 20,000
# files), scaled as bench.sh scales them, packed once (signed, level 3).
# Environment: RUNS (default 5), WORK (/tmp/megacache-registry-bench), SHARED
# (../shared), THREADS (megacache's --threads, default 0: one per CPU). Needs:
# docker-registry, skopeo, python3, GNU time (/usr/bin/time), tar. Run from a built tree.
#
# Before each step the page cache is written back and dropped (as root) and the step's
# input read once: the bundle file, or the registry's copy of its blob.
set -eu
top=$(pwd)
RUNS=${RUNS:-5}
THREADS=${THREADS:-0}
WORK=${WORK:-/tmp/megacache-registry-bench}
SHARED=${SHARED:-$top/../shared}
M="$top/bin/.libs/megacache"
[ -x "$M" ] || M="$top/bin/megacache"
export LD_LIBRARY_PATH="$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR VLLM_CACHE_ROOT # the options alone name the roots
copies=${1:-130}
for tool in docker-registry skopeo python3 /usr/bin/time tar; do
	command -v "$tool" >/dev/null 2>&1 || { echo "registry bench: $tool is needed" >&2; exit 2; }
done
mkdir -p "$WORK"
rm -rf "$WORK/src" "$WORK"/out-* "$WORK"/reg-* "$WORK/layout" "$WORK/empty"
mkdir -p "$WORK/src" "$WORK/empty"
tar -xzf "$top/tests/data/torch-2.11/mlp-cuda-cachedir.tar.gz" -C "$WORK/src"
[ -f "$WORK/k.key" ] || "$M" keygen -q -W -p "$WORK/k.pub" -s "$WORK/k.key"
C="$WORK/cache-$copies"
[ -d "$C" ] || python3 "$SHARED/bench/scale_cache.py" "$WORK/src/cache_mlp_cold" "$C" "$copies"
B="$WORK/bundle-$copies.mcache"
CAP="--max-manifest-bytes 1073741824"
[ -f "$B" ] || "$M" pack -q $CAP -o "$B" -s "$WORK/k.key" --from-dir "$C" --level 3

# The registries: CNCF distribution on free loopback ports, plain HTTP (as on localhost):
# one holds the bundle the loads read; the other, made anew before each copy, receives
# the copies, so that neither client finds the blob there already (skopeo remembers
# where it saw a blob, and would mount it from there rather than send it).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
start_registry() { # start_registry NAME PORT: its pid in $pid
	rm -rf "$WORK/reg-$1"
	cat > "$WORK/registry-$1.yml" <<CFG
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $WORK/reg-$1
http:
  addr: 127.0.0.1:$2
CFG
	docker-registry serve "$WORK/registry-$1.yml" > "$WORK/registry-$1.log" 2>&1 &
	pid=$!
	n=0
	until python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$2/v2/')" 2>/dev/null; do
		n=$((n + 1))
		[ "$n" -lt 100 ] || { echo "registry bench: a registry did not start" >&2; exit 1; }
		sleep 0.1
	done
}
port=$(free_port)
cport=$(free_port)
start_registry loads "$port"
reg_pid=$pid
copy_pid=
trap 'kill $reg_pid $copy_pid 2>/dev/null || :' EXIT INT TERM
fresh_copies() { # the registry the copies go to, made anew
	[ -z "$copy_pid" ] || { kill "$copy_pid"; wait "$copy_pid" 2>/dev/null || :; }
	start_registry copies "$cport"
	copy_pid=$pid
}
R="oci://127.0.0.1:$port/bench/cache:v1"
"$M" copy -q "$B" "$R"

# The OCI layout skopeo copies from: the same bundle bytes as the layer of the same
# manifest (its digest is the one megacache pushed, which checks the layout is the same).
python3 - "$B" "$WORK/layout" "$port" <<'PY'
import hashlib, json, os, shutil, sys, urllib.request
bundle, layout, port = sys.argv[1:]
req = urllib.request.Request("http://127.0.0.1:%s/v2/bench/cache/manifests/v1" % port,
                             headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
manifest = urllib.request.urlopen(req).read()
blobs = os.path.join(layout, "blobs", "sha256")
os.makedirs(blobs)
def put(data=None, path=None):
    h = hashlib.sha256()
    if data is None:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        shutil.copyfile(path, os.path.join(blobs, h.hexdigest()))
    else:
        h.update(data)
        with open(os.path.join(blobs, h.hexdigest()), "wb") as f:
            f.write(data)
    return "sha256:" + h.hexdigest()
put(path=bundle)
put(b"{}")
digest = put(manifest)
with open(os.path.join(layout, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
with open(os.path.join(layout, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
        "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "v1"}}]}, f)
PY

BENCH="registry bench"
. "$top/tests/bench/timing.sh"
COMMON="$CAP -q --threads $THREADS"
blob="$WORK/reg-loads/docker/registry/v2/blobs"
load_file() {
	settle "$B"
	t load-file "$M" load $COMMON "$B" -p "$WORK/k.pub" --max-expansion 0 \
		--cache-dir "$WORK/out-file-$i" --triton-dir "$WORK/empty/t" --vllm-dir "$WORK/empty/v"
}
load_registry() {
	settle "$blob"
	t load-registry "$M" load $COMMON "$R" -p "$WORK/k.pub" --max-expansion 0 \
		--cache-dir "$WORK/out-registry-$i" --triton-dir "$WORK/empty/t" --vllm-dir "$WORK/empty/v"
}
load_pipe() {
	settle "$B"
	t load-pipe sh -c '"$1" load $2 - -p "$3" --max-expansion 0 --cache-dir "$4" \
		--triton-dir "$5/t" --vllm-dir "$5/v" < "$6"' _ "$M" "$COMMON" "$WORK/k.pub" \
		"$WORK/out-pipe-$i" "$WORK/empty" "$B"
}
# same MANIFEST-DIGEST: the manifest the copies' registry holds is the one pushed first.
same() {
	got=$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$cport/bench/copy:v1" | sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ] || { echo "registry bench: a copy made another manifest" >&2; exit 1; }
}
copy_megacache() {
	fresh_copies
	settle "$B"
	t copy-megacache "$M" copy -q "$B" "oci://127.0.0.1:$cport/bench/copy:v1"
	same
}
copy_skopeo() {
	fresh_copies
	settle "$WORK/layout"
	t copy-skopeo skopeo copy -q --dest-tls-verify=false "oci:$WORK/layout:v1" \
		"docker://127.0.0.1:$cport/bench/copy:v1"
	same
}

want=$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$port/bench/cache:v1" | sha256sum | cut -d' ' -f1)
rm -f "$WORK"/*.times
i=0
while [ "$i" -lt "$RUNS" ]; do
	i=$((i + 1))
	if [ $((i % 2)) -eq 1 ]; then
		load_file; load_registry; load_pipe; copy_megacache; copy_skopeo
	else
		load_pipe; load_registry; load_file; copy_skopeo; copy_megacache
	fi
done

# The registry's load is the file's: the same files, the same bytes.
diff -r "$WORK/out-file-$RUNS" "$WORK/out-registry-$RUNS" >/dev/null ||
	{ echo "registry bench: the registry's load differs from the file's" >&2; exit 1; }

row() { # row NAME A B: the medians of A and B, and B/A
	a=$(median 1 "$WORK/$2.times"); b=$(median 1 "$WORK/$3.times")
	ra=$(median 2 "$WORK/$2.times"); rb=$(median 2 "$WORK/$3.times")
	ca=$(median 0 "$WORK/$2.times"); cb=$(median 0 "$WORK/$3.times")
	awk -v n="$1" -v a="$a" -v b="$b" -v ra="$ra" -v rb="$rb" -v ca="$ca" -v cb="$cb" 'BEGIN {
		printf "| %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.2f |\n", n, a, b, b / a,
		       ra / 1024, rb / 1024, ca, cb }'
}
echo "registry bench: $(du -m "$B" | cut -f1) MB bundle ($copies copies), $RUNS runs, $(nproc) CPUs"
echo "| pair (A, B) | A (s) | B (s) | B/A | A RSS (MiB) | B RSS (MiB) | A CPU (s) | B CPU (s) |"
echo "|---|---|---|---|---|---|---|---|"
row "load: file, registry" load-file load-registry
row "load: pipe, registry" load-pipe load-registry
row "copy into a registry: skopeo, megacache" copy-skopeo copy-megacache
rm -rf "$WORK"/out-* "$WORK"/reg-*
