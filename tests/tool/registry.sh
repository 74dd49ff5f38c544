# registry.sh - bundles in a real OCI registry (CNCF distribution, Debian's
# docker-registry, started by registry_lib.sh) on 127.0.0.1: written by every writer and
# read by every reader as oci:// references, by tag and by digest, copied between files,
# standard input and output and references, the artifact as skopeo reads it and writes
# it, and the registry's ways in: anonymous plain HTTP on loopback, TLS with a CA made
# here, htpasswd Basic auth and the Bearer token flow with a token service of this
# test's own (passwords and identity tokens); credentials from the options, the
# environment, the auth files in podman's order and credential helpers, never shown.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
PY=/usr/bin/python3
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
# No auth file of whoever runs the tests is read: each case names its own.
export HOME="$T/home" XDG_RUNTIME_DIR="$T/run"
unset REGISTRY_AUTH_FILE MEGACACHE_REGISTRY_USER MEGACACHE_REGISTRY_PASSWORD
mkdir -p "$HOME" "$XDG_RUNTIME_DIR"

if ! "$MEGACACHE" --version --json | grep -q '"registry":[[:space:]]*true'; then
	echo "SKIP: megacache built without registry support (libcurl)"
	exit 77
fi
. "$MC_SRCDIR/tests/tool/registry_lib.sh"
SECRET=$REG_PASSWORD
# keep: what the last run printed goes where the password is looked for at the end.
keep() { cat "$T/out" "$T/err" >>"$T/all-output"; }

# The bundle: the real CUDA MLP cache, signed, with a label.
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
C="$T/src/cache_mlp_cold"
B="$T/b.mcache"
"$MEGACACHE" pack -q -o "$B" -s "$SEC" --from-dir "$C" --label team=infra || { echo "FAIL: pack"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
LAYER="sha256:$(sha "$B")"
# load_into DIR REF-OR-FILE [args]: a load into DIR's three tier folders.
load_into() {
	dir=$1; shift
	"$MEGACACHE" load -q "$@" -p "$PUB" --cache-dir "$dir/inductor" --triton-dir "$dir/triton" \
		--vllm-dir "$dir/vllm"
}
load_into "$T/want" "$B" 2>/dev/null || { echo "FAIL: load of the file"; exit 1; }
WANT=$(tree_sum "$T/want")

# ---- plain HTTP, anonymous, on loopback (bound to every address, for the rule below)
registry_start plain plain 0.0.0.0
P=$REG_PORT
R="oci://127.0.0.1:$P"
manifest_sha() { # manifest_sha HOSTPORT/REPO:TAG [skopeo args]: sha256 of the manifest skopeo reads
	ref=$1; shift
	skopeo inspect --raw --tls-verify=false "$@" "docker://$ref" | sha256sum | cut -d' ' -f1
}

# save pushes, and says so with the manifest's digest
run 0 "pushed $R/caches/mlp:v1@sha256:" save -o "$R/caches/mlp:v1" -s "$SEC" --cache-dir "$C" \
	--triton-dir "$T/none" --vllm-dir "$T/none"
d=$(manifest_sha "127.0.0.1:$P/caches/mlp:v1")
grep -qF "pushed $R/caches/mlp:v1@sha256:$d" "$T/out" && ok ||
	bad "save's pushed line does not name the manifest skopeo reads ($d): $(cat "$T/out")"

# pack --json: the registry object
run 0 '"registry"' pack --json -o "$R/caches/mlp:packed" -s "$SEC" --from-dir "$C"
$PY - "$T/out" "$P" <<'PY' && ok || bad "pack --json's registry object is wrong: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))["registry"]
assert j["reference"] == "oci://127.0.0.1:%s/caches/mlp:packed@%s" % (sys.argv[2], j["digest"]), j
assert j["digest"].startswith("sha256:") and len(j["digest"]) == 71, j
assert j["layer_digest"].startswith("sha256:") and j["size"] > 100000, j
PY
skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$P/caches/mlp:packed" >"$T/packed.json"
$PY - "$T/out" "$T/packed.json" <<'PY' && ok || bad "pack --json's digests are not the manifest's skopeo reads: $(cat "$T/packed.json")"
import hashlib, json, sys
j = json.load(open(sys.argv[1]))["registry"]
raw = open(sys.argv[2], "rb").read()
(l,) = json.loads(raw)["layers"]
assert j["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest(), j
assert j["layer_digest"] == l["digest"] and j["size"] == l["size"], (j, l)
PY

# copy file -> registry: the digest printed is the manifest's, the layer the file's bytes
run 0 "sha256:" copy "$B" "$R/caches/mlp:b"
d=$(manifest_sha "127.0.0.1:$P/caches/mlp:b")
[ "$(cat "$T/out")" = "sha256:$d" ] && ok || bad "copy printed $(cat "$T/out"), the manifest is sha256:$d"
run 0 "" copy --json "$B" "$R/caches/mlp:b"
$PY - "$T/out" "$d" "$LAYER" "$(wc -c <"$B")" <<'PY' && ok || bad "copy --json is wrong: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["command"] == "copy" and j["ok"] is True and j["exit"] == 0, j
assert j["digest"] == "sha256:" + sys.argv[2] and j["layer_digest"] == sys.argv[3], j
assert j["size"] == int(sys.argv[4]), j
PY

# the artifact, as skopeo reads it
skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$P/caches/mlp:b" >"$T/manifest.json"
$PY - "$T/manifest.json" "$LAYER" "$(wc -c <"$B")" <<'PY' && ok || bad "the manifest is not the artifact's: $(cat "$T/manifest.json")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["schemaVersion"] == 2 and m["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
assert m["artifactType"] == "application/vnd.megacache.bundle.v2"
assert m["config"] == {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2, "data": "e30=",
    "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
(l,) = m["layers"]
assert l["mediaType"] == "application/vnd.megacache.bundle.v2" and l["digest"] == sys.argv[2]
assert l["size"] == int(sys.argv[3]) and l["annotations"]["org.opencontainers.image.title"] == "bundle.mcache"
a = m["annotations"]
assert a["vnd.megacache.artifacts"] == "154" and a["vnd.megacache.label.team"] == "infra", a
assert a["vnd.megacache.format"] == "2" and a["vnd.megacache.gpu-targets"] == "cuda:90", a
assert a["org.opencontainers.image.created"].endswith("Z"), a
PY
# skopeo copies it to an OCI layout: the layer there is the bundle, byte for byte
skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:$P/caches/mlp:b" "oci:$T/layout:b" 2>"$T/err" &&
	cmp -s "$T/layout/blobs/sha256/${LAYER#sha256:}" "$B" && ok ||
	bad "skopeo's copy of the layer is not the bundle: $(cat "$T/err")"

# every reader
rm -rf "$T/got"
load_into "$T/got" "$R/caches/mlp:v1" 2>"$T/err" && [ "$(tree_sum "$T/got")" = "$WANT" ] && ok ||
	bad "the load from the registry is not the load from the file: $(cat "$T/err")"
run 0 "$R/caches/mlp:b: OK (154 artifacts" verify "$R/caches/mlp:b" -p "$PUB"
run 0 "154 artifacts" list "$R/caches/mlp:b"
run 0 "0 added, 0 removed, 0 changed" diff "$R/caches/mlp:b" "$B"
run 0 "exported $R/caches/mlp:b" export "$R/caches/mlp:b" -p "$PUB" --torch "$T/blob.bin"
TORCHINDUCTOR_CACHE_DIR="$T/run-cache" run 0 "" run -b "$R/caches/mlp:b" -p "$PUB" -q -- \
	sh -c 'test -d "$TORCHINDUCTOR_CACHE_DIR/fxgraph"'
run 0 "pushed $R/caches/merged:v1@sha256:" merge "$R/caches/mlp:b" "$B" -p "$PUB" -s "$SEC" \
	-o "$R/caches/merged:v1"
grep -qF "pushed $R/caches/merged:v1@sha256:$(manifest_sha "127.0.0.1:$P/caches/merged:v1")" "$T/out" && ok ||
	bad "merge's pushed line does not name the manifest skopeo reads: $(cat "$T/out")"
run 0 "signed $R/caches/mlp:b with key" sign "$R/caches/mlp:b" -s "$KEYS/test2.key" -p "$PUB"
run 0 "2 signatures verified" verify "$R/caches/mlp:b" -p "$PUB" -p "$KEYS/test2.pub" --threshold 2
run 0 "signed $T/signed.mcache" sign "$R/caches/mlp:packed" -s "$KEYS/test2.key" -p "$PUB" \
	-o "$T/signed.mcache"
# sign's output a reference: pushed, and the input reference left as it was
before=$(manifest_sha "127.0.0.1:$P/caches/mlp:packed")
run 0 "pushed $R/caches/cosigned:v1@sha256:" sign "$R/caches/mlp:packed" -s "$KEYS/test2.key" -p "$PUB" \
	-o "$R/caches/cosigned:v1"
grep -qF "signed $R/caches/cosigned:v1 with key" "$T/out" && ok || bad "sign -o REF's line: $(cat "$T/out")"
run 0 "2 signatures verified" verify "$R/caches/cosigned:v1" -p "$PUB" -p "$KEYS/test2.pub" --threshold 2
[ "$(manifest_sha "127.0.0.1:$P/caches/mlp:packed")" = "$before" ] && ok ||
	bad "sign -o REF changed its input reference"
run 0 "1 signature verified" verify "$R/caches/mlp:packed" -p "$PUB"
TORCHINDUCTOR_CACHE_DIR="$T/run2-cache" run 0 "" run -q -b "$B" -p "$PUB" \
	--save-to "$R/caches/run:v1" -s "$SEC" -- sh -c 'mkdir -p "$TORCHINDUCTOR_CACHE_DIR/zz" &&
		echo "print(1)" > "$TORCHINDUCTOR_CACHE_DIR/zz/cnew.py"'
run 0 "1 artifact" list "$R/caches/run:v1"

# by digest; unknown tags and digests
d=$(manifest_sha "127.0.0.1:$P/caches/mlp:v1")
run 0 "OK (154 artifacts" verify "$R/caches/mlp@sha256:$d" -p "$PUB"
run 2 "$R/caches/mlp:nope: manifest not found" verify "$R/caches/mlp:nope" -p "$PUB"
run 2 "$R/caches/mlp@sha256:0000" verify "$R/caches/mlp@sha256:$(printf '0%.0s' $(seq 64))" -p "$PUB"
run 2 "not a registry reference" verify "$R/Caches/MLP:v1" -p "$PUB"
grep -qF "$R/Caches/MLP:v1" "$T/err" && ok || bad "a bad reference's error does not name it: $(cat "$T/err")"
run 2 "not a registry reference" verify "$R/caches/mlp:bad tag" -p "$PUB"
# a tag and a digest: the digest wins, the tag (unknown here) is only informative
run 0 "OK (154 artifacts" verify "$R/caches/mlp:no-such-tag@sha256:$d" -p "$PUB"

# copy every way: registry -> file, registry -> registry, - -> registry, registry -> -
run 0 "sha256:" copy "$R/caches/mlp:v1" "$T/back.mcache"
rm -rf "$T/got2"
load_into "$T/got2" "$T/back.mcache" 2>/dev/null && [ "$(tree_sum "$T/got2")" = "$WANT" ] && ok ||
	bad "a bundle copied back from the registry does not load as the original"
run 0 "sha256:" copy "$R/caches/mlp:b" "$R/other/repo:b"
[ "$(manifest_sha "127.0.0.1:$P/other/repo:b")" = "$(manifest_sha "127.0.0.1:$P/caches/mlp:b")" ] && ok ||
	bad "copy between repositories changed the manifest"
"$MEGACACHE" copy -q - "$R/caches/stdin:v1" <"$B" 2>"$T/err" && ok || bad "copy - REF: $(cat "$T/err")"
"$MEGACACHE" copy "$R/caches/stdin:v1" - >"$T/stdout.mcache" 2>"$T/err" && cmp -s "$T/stdout.mcache" "$B" &&
	grep -q '^sha256:' "$T/err" && ok || bad "copy REF - is not the bundle: $(cat "$T/err")"
run 2 "cannot be both" copy - -
# registry -> file: the very bytes; an existing file is replaced, no temp file left
echo "old" >"$T/back-b.mcache"
run 0 "sha256:" copy "$R/caches/stdin:v1" "$T/back-b.mcache"
[ "$(cat "$T/out")" = "sha256:$(manifest_sha "127.0.0.1:$P/caches/stdin:v1")" ] && ok ||
	bad "copy REF FILE printed $(cat "$T/out"), not the manifest's digest"
cmp -s "$T/back-b.mcache" "$B" && ok || bad "copy REF FILE did not write the bundle's bytes"
[ "$(ls -A "$T" | grep -c back-b)" = 1 ] && [ -z "$(ls -A "$TMPDIR")" ] && ok ||
	bad "copy REF FILE left a temp file: $(ls -A "$T" "$TMPDIR")"
# file -> file: the bytes' own sha256, in --json both digests
run 0 "sha256:" copy "$B" "$T/copied.mcache"
[ "$(cat "$T/out")" = "$LAYER" ] && cmp -s "$T/copied.mcache" "$B" && ok ||
	bad "copy FILE FILE printed $(cat "$T/out"), the file's sha256 is $LAYER"
run 0 "" copy --json "$B" "$T/copied.mcache"
$PY - "$T/out" "$LAYER" "$(wc -c <"$B")" "$B" "$T/copied.mcache" <<'PY' && ok || bad "copy --json FILE FILE: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["source"] == sys.argv[4] and j["destination"] == sys.argv[5], j
assert j["digest"] == j["layer_digest"] == sys.argv[2] and j["size"] == int(sys.argv[3]), j
assert "registry" not in j, j
PY
# a digest as the destination: the manifest's own is taken; another is a usage error
db=$(manifest_sha "127.0.0.1:$P/caches/stdin:v1")
run 0 "sha256:$db" copy "$B" "$R/pinned/mlp@sha256:$db"
run 0 "OK (154 artifacts" verify "$R/pinned/mlp@sha256:$db" -p "$PUB"
run 2 "$R/pinned/other@sha256:1111" copy "$B" "$R/pinned/other@sha256:$(printf '1%.0s' $(seq 64))"
grep -qF "sha256:$db" "$T/err" && ok || bad "the wrong digest's error does not say the manifest's: $(cat "$T/err")"
skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$P/pinned/other@sha256:$db" >/dev/null 2>&1 &&
	bad "a push to a wrong digest sent its manifest" || ok

# The fleet's commands: push reads a reference, pull writes one, audit trusts one.
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
	RP=$(free_port)
	mkdir -p "$T/redis"
	redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--dir "$T/redis" >"$T/redis/log" 2>&1 &
	REG_PIDS="$REG_PIDS $!"
	for _ in $(seq 200); do
		redis-cli -p "$RP" ping 2>/dev/null | grep -q PONG && break
		sleep 0.05
	done
	REDIS="redis://127.0.0.1:$RP"
	run 0 "pushed $R/caches/stdin:v1 into $REDIS/0: 6 written" push "$R/caches/stdin:v1" -p "$PUB" \
		--redis "$REDIS"
	run 0 "pushed $R/caches/pulled:v1@sha256:" pull --redis "$REDIS" -o "$R/caches/pulled:v1" -s "$SEC"
	grep -qF "pulled 6 entries from $REDIS/0 into $R/caches/pulled:v1" "$T/out" && ok ||
		bad "pull -o REF's line: $(cat "$T/out")"
	run 0 "6 artifacts" verify "$R/caches/pulled:v1" -p "$PUB"
	run 0 "6 vouched for by a trusted bundle, 0 not" audit --redis "$REDIS" -p "$PUB" "$R/caches/stdin:v1"
else
	echo "note: no redis-server here; push, pull and audit of references left untried"
fi

# An artifact written by another client: an OCI layout made here, pushed by skopeo.
$PY - "$B" "$T/hand" <<'PY'
import hashlib, json, os, shutil, sys
bundle, lay = sys.argv[1:]
os.makedirs(os.path.join(lay, "blobs", "sha256"))
def put(data):
    d = hashlib.sha256(data).hexdigest()
    open(os.path.join(lay, "blobs", "sha256", d), "wb").write(data)
    return "sha256:" + d, len(data)
ld, ls = put(open(bundle, "rb").read())
cd, cs = put(b"{}")
m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "artifactType": "application/vnd.megacache.bundle.v2",
    "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": cd, "size": cs},
    "layers": [{"mediaType": "application/vnd.megacache.bundle.v2", "digest": ld, "size": ls}]}).encode()
md, ms = put(m)
json.dump({"imageLayoutVersion": "1.0.0"}, open(os.path.join(lay, "oci-layout"), "w"))
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": md, "size": ms, "annotations": {"org.opencontainers.image.ref.name": "hand"}}]},
    open(os.path.join(lay, "index.json"), "w"))
PY
skopeo copy -q --dest-tls-verify=false "oci:$T/hand:hand" "docker://127.0.0.1:$P/from/skopeo:hand" 2>"$T/err" &&
	ok || bad "skopeo could not push the hand-made layout: $(cat "$T/err")"
rm -rf "$T/got3"
load_into "$T/got3" "$R/from/skopeo:hand" 2>"$T/err" && [ "$(tree_sum "$T/got3")" = "$WANT" ] && ok ||
	bad "the artifact skopeo pushed does not load as the bundle: $(cat "$T/err")"

# Plain HTTP beyond loopback only when asked for.
IP=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.' | grep -v '^127\.' | head -n 1)
if [ -n "$IP" ]; then
	run 2 "oci://$IP:$P/caches/mlp:b" verify "oci://$IP:$P/caches/mlp:b" -p "$PUB" --timeout 5
	grep -qF "https://$IP:$P/" "$T/err" && ok || bad "megacache did not ask $IP in HTTPS: $(cat "$T/err")"
	run 0 "OK (154 artifacts" verify "oci://$IP:$P/caches/mlp:b" -p "$PUB" --plain-http
else
	echo "note: no address but loopback here; plain HTTP beyond loopback left untried"
fi

# ---- TLS, with a CA made here, and htpasswd Basic auth
registry_start basic basic
S=$REG_PORT
CA=$REG_CA
RS="oci://127.0.0.1:$S/secure/mlp"
printf '%s\nnot the password: only the first line is\n' "$SECRET" >"$T/pw"
echo "wrong-$SECRET" >"$T/wrongpw"
run 2 "certificate cannot be trusted" copy "$B" "$RS:v1"
grep -qF -- "--registry-ca" "$T/err" && ok || bad "the TLS error does not name --registry-ca: $(cat "$T/err")"
grep -qF -- "$RS:v1" "$T/err" && ok || bad "the TLS error does not name the reference: $(cat "$T/err")"
run 2 "asks for a user and password" copy --registry-ca "$CA" "$B" "$RS:v1"
run 0 "sha256:" copy --registry-ca "$CA" --registry-user alice --registry-password-file "$T/pw" \
	"$B" "$RS:v1"
keep
# another client reads what megacache pushed through the same TLS and Basic auth
mkdir -p "$T/certs.d"
cp "$CA" "$T/certs.d/ca.crt"
[ "sha256:$(manifest_sha "127.0.0.1:$S/secure/mlp:v1" --tls-verify=true --cert-dir "$T/certs.d" \
	--creds "alice:$SECRET")" = "$(cat "$T/out")" ] && ok ||
	bad "skopeo, through TLS and Basic auth, reads another manifest than copy printed"
run 2 "authentication failed (401" verify --registry-ca "$CA" --registry-user alice \
	--registry-password-file "$T/wrongpw" "$RS:v1" -p "$PUB"
keep
"$MEGACACHE" verify --json --registry-ca "$CA" --registry-user alice --registry-password-file "$T/wrongpw" \
	"$RS:v1" -p "$PUB" >"$T/out" 2>"$T/err"
$PY - "$T/out" "$?" "$RS:v1" <<'PY' && ok || bad "a wrong password's --json: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert sys.argv[2] == "2" and j["ok"] is False and j["exit"] == 2 and j["error"] == "remote", j
assert sys.argv[3] + ": authentication failed (401" in j["message"], j
PY
keep
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="$SECRET" \
	run 0 "OK (154 artifacts" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
# the flags win over the environment
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="wrong-$SECRET" \
	run 0 "OK (154 artifacts" verify --registry-ca "$CA" --registry-password-file "$T/pw" "$RS:v1" -p "$PUB"
keep
rm -rf "$T/got4"
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="$SECRET" load_into "$T/got4" "$RS:v1" \
	--registry-ca "$CA" 2>"$T/err" && [ "$(tree_sum "$T/got4")" = "$WANT" ] && ok ||
	bad "the load through TLS and Basic auth is not the file's: $(cat "$T/err")"
keep
# localhost is the same registry, by name
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="$SECRET" \
	run 0 "OK (154 artifacts" verify --registry-ca "$CA" "oci://localhost:$S/secure/mlp:v1" -p "$PUB"
keep

# The auth files, in podman's order: $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/
# auth.json, ~/.docker/config.json; the first that speaks of the host is the one used.
auth_json() { # auth_json FILE PASSWORD [KEY]
	mkdir -p "$(dirname "$1")"
	printf '{"auths": {"%s": {"auth": "%s"}}}\n' "${3:-127.0.0.1:$S}" \
		"$(printf 'alice:%s' "$2" | base64 -w0)" >"$1"
}
PODMAN="$XDG_RUNTIME_DIR/containers/auth.json"
DOCKER="$HOME/.docker/config.json"
auth_json "$DOCKER" "$SECRET" "https://127.0.0.1:$S/v1/"
run 0 "OK (154" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
# the environment wins over the files
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="wrong-$SECRET" \
	run 2 "authentication failed" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
auth_json "$PODMAN" "wrong-$SECRET"
run 2 "authentication failed" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
auth_json "$T/authfile.json" "$SECRET"
REGISTRY_AUTH_FILE="$T/authfile.json" run 0 "OK (154" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
auth_json "$PODMAN" "$SECRET"
auth_json "$T/authfile.json" "wrong-$SECRET"
REGISTRY_AUTH_FILE="$T/authfile.json" run 2 "authentication failed" verify --registry-ca "$CA" \
	"$RS:v1" -p "$PUB"
keep
# a file that does not speak of the host is passed by
auth_json "$T/authfile.json" "wrong-$SECRET" "other.example.com"
REGISTRY_AUTH_FILE="$T/authfile.json" run 0 "OK (154" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
rm -f "$PODMAN" "$DOCKER" "$T/authfile.json"

# Credential helpers, run as docker runs them: "get", the host on standard input.
mkdir -p "$T/bin"
cat >"$T/bin/docker-credential-mctest" <<HELPER
#!/bin/sh
echo "argv: \$*" >>"$T/helper.log"
read -r host
echo "host: \$host" >>"$T/helper.log"
[ "\$host" = "127.0.0.1:$S" ] || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL": "%s", "Username": "alice", "Secret": "%s"}\n' "\$host" "\$(head -n 1 "$T/pw")"
HELPER
chmod +x "$T/bin/docker-credential-mctest"
mkdir -p "$HOME/.docker"
printf '{"credHelpers": {"127.0.0.1:%s": "mctest"}}\n' "$S" >"$DOCKER"
PATH="$T/bin:$PATH" run 0 "OK (154" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
[ "$(grep -c '^argv: get$' "$T/helper.log")" -ge 1 ] && ! grep -v '^argv: get$' "$T/helper.log" | grep -q '^argv' &&
	grep -qx "host: 127.0.0.1:$S" "$T/helper.log" && ok ||
	bad "the credential helper was not run as docker runs it: $(cat "$T/helper.log")"
: >"$T/helper.log"
printf '{"auths": {"127.0.0.1:%s": {}}, "credsStore": "mctest"}\n' "$S" >"$DOCKER"
PATH="$T/bin:$PATH" run 0 "OK (154" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
keep
grep -qx "host: 127.0.0.1:$S" "$T/helper.log" && ok || bad "credsStore's helper was not asked"
printf '{"credHelpers": {"127.0.0.1:%s": "mcnosuch"}}\n' "$S" >"$DOCKER"
run 2 "docker-credential-mcnosuch" verify --registry-ca "$CA" "$RS:v1" -p "$PUB"
grep -qF "$DOCKER" "$T/err" && ok || bad "the missing helper's error does not name the file: $(cat "$T/err")"
rm -f "$DOCKER"

# ---- TLS and the Bearer token flow, with a token service of this test's own
registry_start token token
K=$REG_PORT
TOKENS=$REG_TOKEN_LOG
RK="oci://127.0.0.1:$K/tokened/mlp"
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="$SECRET" \
	run 0 "sha256:" copy --registry-ca "$CA" "$B" "$RK:v1"
keep
# (the registry names the actions in either order)
PUSH_SCOPE='repository:tokened/mlp:(pull,push|push,pull)$'
grep -qE "^GET /token granted basic $PUSH_SCOPE" "$TOKENS" && ok ||
	bad "no push token was granted: $(cat "$TOKENS")"
# one token per scope for the whole run: the push's many requests asked for it once
[ "$(grep -cE "granted basic $PUSH_SCOPE" "$TOKENS")" = 1 ] && ok ||
	bad "the push token was asked for more than once: $(cat "$TOKENS")"
[ "sha256:$(manifest_sha "127.0.0.1:$K/tokened/mlp:v1" --tls-verify=true --cert-dir "$T/certs.d" \
	--creds "alice:$SECRET")" = "$(cat "$T/out")" ] && ok ||
	bad "skopeo, through a token, reads another manifest than copy printed"
: >"$TOKENS"
rm -rf "$T/got5"
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="$SECRET" load_into "$T/got5" "$RK:v1" \
	--registry-ca "$CA" 2>"$T/err" && [ "$(tree_sum "$T/got5")" = "$WANT" ] && ok ||
	bad "the load through a token is not the file's: $(cat "$T/err")"
keep
grep -q "^GET /token granted basic repository:tokened/mlp:pull$" "$TOKENS" && ok ||
	bad "no pull token was granted: $(cat "$TOKENS")"
[ "$(grep -c . "$TOKENS")" = 1 ] && ok || bad "the load asked for a token more than once: $(cat "$TOKENS")"
MEGACACHE_REGISTRY_USER=alice MEGACACHE_REGISTRY_PASSWORD="wrong" \
	run 2 "authentication failed: the token service answered 401" verify --registry-ca "$CA" \
	"$RK:v1" -p "$PUB"
keep
run 2 "authentication failed" verify --registry-ca "$CA" "$RK:v1" -p "$PUB"
# an identity token (docker's OAuth2 refresh token) goes as a POST; its answer holds
# access_token alone
: >"$TOKENS"
printf '{"auths": {"127.0.0.1:%s": {"identitytoken": "%s"}}}\n' "$K" "$REG_REFRESH" >"$DOCKER"
run 0 "OK (154" verify --registry-ca "$CA" "$RK:v1" -p "$PUB"
keep
grep -q "^POST /token granted refresh repository:tokened/mlp:pull$" "$TOKENS" && ok ||
	bad "the identity token was not sent as a refresh token: $(cat "$TOKENS")"
# ... and from a credential helper, as Username "<token>"
: >"$TOKENS"
cat >"$T/bin/docker-credential-mctoken" <<HELPER
#!/bin/sh
echo "argv: \$*" >>"$T/helper.log"
printf '{"Username": "<token>", "Secret": "%s"}\n' "\$(sed -n 2p "$T/token/secrets")"
HELPER
chmod +x "$T/bin/docker-credential-mctoken"
printf '{"credHelpers": {"127.0.0.1:%s": "mctoken"}}\n' "$K" >"$DOCKER"
PATH="$T/bin:$PATH" run 0 "OK (154" verify --registry-ca "$CA" "$RK:v1" -p "$PUB"
keep
grep -q "^POST /token granted refresh repository:tokened/mlp:pull$" "$TOKENS" && ok ||
	bad "the helper's identity token was not sent as a refresh token: $(cat "$TOKENS")"
! grep -v '^argv: get$' "$T/helper.log" | grep -q '^argv' && ok ||
	bad "a credential helper was run with more than get: $(cat "$T/helper.log")"
rm -f "$DOCKER"

# The password and the identity token were never shown, in any form.
B64=$(printf 'alice:%s' "$SECRET" | base64 -w0)
if grep -qF -e "$SECRET" -e "$B64" -e "$REG_REFRESH" "$T/all-output" "$T"/*.log "$TOKENS" 2>/dev/null; then
	bad "a secret appears in megacache's output or a server's log"
else
	ok
fi
[ -s "$T/all-output" ] && ok || bad "no output was kept to look for secrets in"

finish
