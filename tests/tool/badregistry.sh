# badregistry.sh - registries that misbehave (tests/tool/badregistry.py): a manifest too
# big, a layer longer or shorter than its descriptor or of other bytes, a manifest not
# the digest asked for, the wrong media or artifact type, redirect and 401 loops, a
# server that stalls, a blob cut short, a tag that moves between the manifest and the
# blob. Each is one clear error naming the reference, its exit status and error code,
# nothing installed and no file left, in bounded time and memory.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
PY=/usr/bin/python3
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
export HOME="$T/home"
unset REGISTRY_AUTH_FILE MEGACACHE_REGISTRY_USER MEGACACHE_REGISTRY_PASSWORD XDG_RUNTIME_DIR
mkdir -p "$HOME"
if ! "$MEGACACHE" --version --json | grep -q '"registry":[[:space:]]*true'; then
	echo "SKIP: megacache built without registry support (libcurl)"
	exit 77
fi

mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
"$MEGACACHE" pack -q -o "$T/a.mcache" -s "$SEC" --from-dir "$T/src/cache_mlp_cold" --label which=a &&
	"$MEGACACHE" pack -q -o "$T/b.mcache" -s "$SEC" --from-dir "$T/src/cache_mlp_cold" --label which=b ||
	{ echo "FAIL: pack"; exit 1; }
$PY "$MC_SRCDIR/tests/tool/badregistry.py" "$T/a.mcache" "$T/b.mcache" "$T/port" "$T/requests.log" \
	2>"$T/server.err" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 200); do
	[ -s "$T/port" ] && break
	sleep 0.05
done
[ -s "$T/port" ] || { echo "FAIL: badregistry.py did not start: $(cat "$T/server.err")"; exit 1; }
R="oci://127.0.0.1:$(cat "$T/port")"

# bad MODE EXIT ERROR TEXT [megacache args]: a load of MODE's bundle into an empty folder
# fails with EXIT, --json's ERROR, a message that starts with the reference and holds
# TEXT; nothing is installed, no temp file is left, and it ends within 20 s.
bad_load() {
	mode=$1 want=$2 code=$3 text=$4
	shift 4
	ref="$R/$mode:t"
	dest="$T/dest-$mode"
	start=$(date +%s)
	"$MEGACACHE" load --json "$ref" -p "$PUB" --cache-dir "$dest/inductor" \
		--triton-dir "$dest/triton" --vllm-dir "$dest/vllm" "$@" >"$T/out" 2>"$T/err"
	got=$?
	took=$(($(date +%s) - start))
	[ "$got" = "$want" ] && ok || bad "$mode: load exited $got, expected $want: $(cat "$T/err")"
	$PY - "$T/out" "$code" "$ref" "$text" <<'PY' && ok || bad "$mode: --json is not error $code with '$text' after $ref: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ok"] is False and j["error"] == sys.argv[2], j
assert j["message"].startswith("megacache: " + sys.argv[3]) and sys.argv[4] in j["message"], j
PY
	[ -z "$(find "$dest" -type f 2>/dev/null)" ] && ok || bad "$mode: files were installed: $(find "$dest" -type f | head -3)"
	[ -z "$(ls -A "$TMPDIR")" ] && ok || bad "$mode: files left in TMPDIR: $(ls -A "$TMPDIR")"
	[ "$took" -le 20 ] && ok || bad "$mode: took $took s"
}

# the control
"$MEGACACHE" load -q "$R/good:t" -p "$PUB" --cache-dir "$T/good/inductor" --triton-dir "$T/good/triton" \
	--vllm-dir "$T/good/vllm" 2>"$T/err" && [ "$(find "$T/good" -type f | wc -l)" = 154 ] && ok ||
	bad "the good mode did not load: $(cat "$T/err")"

bad_load wrongdigest 1 digest_mismatch "the layer's bytes are sha256:"
# bytes the bundle's own checks find wrong first: the registry's digest is named the cause
bad_load corrupt 1 digest_mismatch "the layer's bytes are sha256:"
# (the bundle's end comes before the end the descriptor promises: not waited for)
bad_load shortlayer 1 digest_mismatch "but the bundle in it ends at"
bad_load longlayer 1 digest_mismatch "longer than the"
bad_load mediatype 2 not_bundle "application/vnd.docker.distribution.manifest.v2+json"
bad_load artifacttype 2 not_bundle "application/vnd.cncf.helm.config.v1+json"
bad_load twolayers 2 not_bundle "it has 2 layers, not 1"
bad_load index 2 not_bundle "application/vnd.oci.image.index.v1+json"
bad_load redirectloop 2 remote "too many redirects"
bad_load unauthloop 2 remote "authentication failed"
bad_load badtoken 2 remote "holds a character a header cannot carry"
bad_load stall 2 remote "no data for 2 s" --timeout 2
bad_load stallheaders 2 remote "no data for 2 s" --timeout 2
bad_load truncated 2 remote "the registry ended the transfer early"
bad_load hugeredirect 2 remote "the registry's Location is longer than 8191 bytes"

# A manifest over 4 MiB: refused, without reading the 64 MiB that come, in little memory.
/usr/bin/time -f "%M" -o "$T/rss" "$MEGACACHE" verify "$R/bigmanifest:t" -p "$PUB" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && grep -qF "$R/bigmanifest:t: the manifest is over 4 MiB" "$T/err" && ok ||
	bad "bigmanifest: exited $rc: $(cat "$T/err")"
# (sanitizers' shadow memory makes the size of a sanitized build's no measure)
[ -n "${MC_SANITIZED:-}" ] || { [ "$(tail -n 1 "$T/rss")" -lt 65536 ] && ok ||
	bad "bigmanifest: the client grew to $(tail -n 1 "$T/rss") KiB"; }
grep -q '^GET /v2/bigmanifest/manifests/t client went away' "$T/requests.log" && ok ||
	bad "bigmanifest: the client read the whole manifest"

# Pulled by digest, a manifest that is not that digest.
"$MEGACACHE" copy --json "$R/good:t" "$T/a-copy.mcache" >"$T/out" 2>"$T/err" &&
	cmp -s "$T/a-copy.mcache" "$T/a.mcache" && ok || bad "copy of the good mode: $(cat "$T/err")"
d=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["digest"])' "$T/out")
"$MEGACACHE" verify "$R/manifestdigest@$d" -p "$PUB" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && grep -qF "$R/manifestdigest@$d: the manifest the registry sent is sha256:" "$T/err" &&
	ok || bad "manifestdigest: exited $rc: $(cat "$T/err")"

# A redirect to blob storage is followed.
"$MEGACACHE" load -q "$R/redirectok:t" -p "$PUB" --cache-dir "$T/redir/inductor" \
	--triton-dir "$T/redir/triton" --vllm-dir "$T/redir/vllm" 2>"$T/err" &&
	[ "$(find "$T/redir" -type f | wc -l)" = 154 ] && ok || bad "redirectok did not load: $(cat "$T/err")"
grep -q '^GET /storage/sha256:[0-9a-f]* ' "$T/requests.log" && ok || bad "the storage was not asked"
# A signed storage URL of a few thousand bytes is followed whole; one past 8 KiB is refused.
"$MEGACACHE" load -q "$R/longredirect:t" -p "$PUB" --cache-dir "$T/longredir/inductor" \
	--triton-dir "$T/longredir/triton" --vllm-dir "$T/longredir/vllm" 2>"$T/err" &&
	[ "$(find "$T/longredir" -type f | wc -l)" = 154 ] && ok || bad "longredirect did not load: $(cat "$T/err")"
grep -q '^GET /storage/p\{3000\}/sha256:[0-9a-f]* ' "$T/requests.log" && ok ||
	bad "the long storage URL was not asked whole"

# A tag that moves between the manifest's read and the blob's: the bundle the manifest
# named, whole (A, not B, nor a mix).
"$MEGACACHE" copy -q "$R/movingtag:t" "$T/moved.mcache" 2>"$T/err" && cmp -s "$T/moved.mcache" "$T/a.mcache" &&
	ok || bad "movingtag did not give A: $(cat "$T/err")"

# copy from a failing registry leaves no file
"$MEGACACHE" copy "$R/wrongdigest:t" "$T/nothing.mcache" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] && [ ! -e "$T/nothing.mcache" ] && [ -z "$(ls -A "$T" | grep '^\.nothing\|nothing.mcache')" ] &&
	ok || bad "copy of wrongdigest exited $rc or left a file: $(ls -A "$T")"

finish
