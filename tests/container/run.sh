# run.sh - examples/container/Containerfile built for real with buildah (no daemon,
# chroot isolation, nothing pulled: the base image is made here by mmdebstrap), from a
# bundle of a real torch cache with a 755 .so beside it. In each image: every file of the
# cache holds the bundle's bytes, every file and folder under ~torch/.cache is owned by
# uid 1000, the exec bit came back, the image's ENV names the roots megacache loaded and
# a dry run there finds the cache warm, and neither the bundle, curl nor a compiler is
# left. The bundle comes from the build context, or from a local HTTP server: through a
# pipe, or with BUNDLE_SHA256 checked first; or from a local registry (docker-registry)
# by digest, BUNDLE_REF with BUNDLE_DIGEST, where a tag alone is refused. A tampered bundle, a cut download and a
# BUNDLE_SHA256 that does not match (the context's bundle, or the download) fail the
# build at the load step (exit 1) with nothing installed. With BASE naming a stand-in
# for a torch image (the base image with a file and torch images' ENV PATH and WORKDIR),
# both stages start from it and the image passes the same checks. The first stage's
# build (without libarchive) writes the committed format/vectors/ byte for byte. Prints
# the images' sizes, with and without libarchive.
# Slow (minutes), so not part of make check: sh tests/container/run.sh, as root, from a
# built tree. The images live in a container storage of their own, kept between runs
# as the build cache ($MC_CONTAINER_STORAGE, else /var/cache/megacache-test): the base
# image and the first stages stay; the rest is removed at the end.
set -u
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (buildah with chroot isolation)"
	exit 77
fi
for tool in buildah mmdebstrap git; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed (setup.sh installs it)"
		exit 77
	fi
done
MC_SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
: "${MC_BUILDDIR:=$MC_SRCDIR}" "${MEGACACHE:=$MC_BUILDDIR/bin/megacache}"
export MC_SRCDIR MC_BUILDDIR MEGACACHE
. "$MC_SRCDIR/tests/tool/lib.sh"
rm -rf "$T"
T="$MC_BUILDDIR/tests/tmp/container" # lib.sh names it after this file, as tests/tool/run.sh's
rm -rf "$T"
mkdir -p "$T"

BASE=docker.io/library/debian:bookworm-slim
TORCH_BASE=localhost/megacache-test-torch-base # made from BASE here: see make_torch_base
MARK=/etc/torch-base-stand-in # the file that tells TORCH_BASE apart
CF="$MC_SRCDIR/examples/container/Containerfile"
IMG=localhost/megacache-test
HOME_CACHE=/home/torch/.cache
KERNEL=ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRST # a Triton kernel folder name
SO=cuda_utils.cpython-312-x86_64-linux-gnu.so
START=$(date +%s)
HTTP_PID=

STORE=${MC_CONTAINER_STORAGE:-/var/cache/megacache-test}
B() { buildah --root "$STORE/storage" --runroot "$STORE/run" "$@"; }
B rm -a >/dev/null 2>&1 # containers an interrupted run left

# At the end: the final images go, and the layers no tagged image needs (the first
# stages stay tagged, as the cache of the next run).
cleanup() {
	[ -z "$HTTP_PID" ] || kill "$HTTP_PID" 2>/dev/null
	for tag in file url url-sha256 torch libarchive; do B rmi "$IMG:$tag" >/dev/null 2>&1; done
	B rmi --prune >/dev/null 2>&1
}
trap cleanup EXIT

# The base image the Containerfile's FROM names, made once: Debian 12 minbase, with the
# documentation left out as in Debian's own slim image. The mirror may be a snapshot,
# so its Release files are taken without a date check.
make_base() {
	ctr=$(B from scratch) || return 1
	mnt=$(B mount "$ctr") &&
		mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
			--aptopt='Acquire::Check-Valid-Until "false"' \
			--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
			bookworm "$T/base.tar" "deb http://deb.debian.org/debian bookworm main" \
			"deb http://deb.debian.org/debian bookworm-updates main" \
			"deb http://deb.debian.org/debian-security bookworm-security main" \
			</dev/null >"$T/mmdebstrap.log" 2>&1 &&
		tar -x -C "$mnt" --numeric-owner -f "$T/base.tar" &&
		B umount "$ctr" >/dev/null &&
		B config --cmd bash \
			--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr" &&
		B commit -q "$ctr" "$BASE" >/dev/null
	rc=$?
	B rm "$ctr" >/dev/null 2>&1
	rm -f "$T/base.tar"
	[ $rc -eq 0 ] || tail -n 5 "$T/mmdebstrap.log"
	return $rc
}
if B inspect --type image "$BASE" >/dev/null 2>&1; then
	echo "base image: $BASE (there already)"
else
	t0=$(date +%s)
	B rmi "$TORCH_BASE" >/dev/null 2>&1 # made from the old one
	check "mmdebstrap makes the base image $BASE" make_base
	echo "base image: $BASE made in $(($(date +%s) - t0)) s"
fi

# The stand-in for a torch image (pytorch/pytorch's set PATH and WORKDIR so), made once
# from BASE: what tells it apart is the file $MARK.
make_torch_base() {
	ctr=$(B from --pull-never "$BASE") || return 1
	echo "a stand-in for a torch image" >"$T/mark"
	B copy "$ctr" "$T/mark" "$MARK" >/dev/null &&
		B config --workingdir /workspace \
			--env PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			"$ctr" &&
		B commit -q "$ctr" "$TORCH_BASE" >/dev/null
	rc=$?
	B rm "$ctr" >/dev/null 2>&1
	return $rc
}
B inspect --type image "$TORCH_BASE" >/dev/null 2>&1 ||
	check "the stand-in for a torch image is made" make_torch_base

# on_torch_base TAG: the image TAG has the stand-in's file.
on_torch_base() {
	ctr=$(B from --pull-never "$IMG:$1" 2>/dev/null) || return 1
	mnt=$(B mount "$ctr") && [ -f "$mnt$MARK" ]
	rc=$?
	B umount "$ctr" >/dev/null 2>&1
	B rm "$ctr" >/dev/null 2>&1
	return $rc
}

# The bundle: a real torch cache, and a Triton kernel folder holding a 755 .so.
mkdir -p "$T/cache" "$T/triton/$KERNEL" "$T/ctx/src" "$T/www"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/cache"
head -c 40000 "$DATA/mlp-cuda.megacache" >"$T/triton/$KERNEL/$SO"
chmod 755 "$T/triton/$KERNEL/$SO"
SOURCE_DATE_EPOCH=1700000000 run 0 "" pack -q -o "$T/ctx/bundle.mcache" -s "$KEYS/test.key" \
	--from-dir "$T/cache/cache_mlp_cold" --from-triton-dir "$T/triton"
cp "$KEYS/test.pub" "$T/ctx/megacache.pub"
sha() { sha256sum <"$1" | cut -c1-64; }
SHA=$(sha "$T/ctx/bundle.mcache")

# The same load on this machine, to compare with: the image's roots under $T/ref.
run 0 "" load "$T/ctx/bundle.mcache" -p "$KEYS/test.pub" \
	--cache-dir "$T/ref$HOME_CACHE/torchinductor" --triton-dir "$T/ref$HOME_CACHE/triton"

# The build context: the source tree as git has it (with files not yet committed), the key
# and the bundle. The tampered context links the same files but the bundle, which has one
# byte of a block's data flipped.
(cd "$MC_SRCDIR" && { git ls-files && git ls-files --others --exclude-standard; } | sort -u |
	while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done | tar -cf - -T -) |
	tar -xf - -C "$T/ctx/src"
check "the context holds the source" test -f "$T/ctx/src/configure.ac"
cp -al "$T/ctx" "$T/ctx-bad"
rm "$T/ctx-bad/bundle.mcache"
/usr/bin/python3 - "$T/ctx/bundle.mcache" "$T/ctx-bad/bundle.mcache" <<'EOF'
import sys, tarfile
src, dst = sys.argv[1:]
data = bytearray(open(src, "rb").read())
with tarfile.open(src, "r:") as t:
    m = next(m for m in t.getmembers() if m.name.startswith("blocks/"))
data[m.offset_data + m.size // 2] ^= 0x01
open(dst, "wb").write(data)
EOF
SHA_BAD=$(sha "$T/ctx-bad/bundle.mcache")

# The HTTP server of the URL variants, on a free port: the bundle (twice: digest- is
# asked for with a digest that does not match), and a copy cut in half.
cp "$T/ctx/bundle.mcache" "$T/www/bundle-$SHA.mcache"
cp "$T/ctx/bundle.mcache" "$T/www/digest-$SHA.mcache"
size=$(stat -c %s "$T/ctx/bundle.mcache")
head -c $((size / 2)) "$T/ctx/bundle.mcache" >"$T/www/cut-$SHA.mcache"
/usr/bin/python3 -c 'import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
__import__("os").rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()' "$T/www" "$T/port" 2>"$T/http.log" &
HTTP_PID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
URL="http://127.0.0.1:$(cat "$T/port" 2>/dev/null)"

# bud LABEL CONTEXT ARGS...: builds the recipe; the log is $T/LABEL.log, the time is printed.
bud() {
	label=$1 ctx=$2
	shift 2
	t0=$(date +%s)
	B containers -q >"$T/containers.before"
	B bud --isolation chroot --pull-never --layers -f "$CF" "$@" "$ctx" >"$T/$label.log" 2>&1
	rc=$?
	echo "build $label: exit $rc, $(($(date +%s) - t0)) s"
	return $rc
}

# left_behind: the containers the last build left (buildah keeps a failed one).
left_behind() { B containers -q | grep -vxF -f "$T/containers.before"; }

# why LABEL: what megacache, curl and the digest check said in a build's log, and the
# exit status of its failed step.
why() {
	grep -E '^(megacache|curl|BUNDLE_SHA256)' "$T/$1.log" | tail -n 2 | tr '\n' ' '
	sed -n 's/^Error: building at STEP "\([A-Z]*\) .*: \(exit status [0-9]*\)$/(\1 step: \2)/p' "$T/$1.log"
}

# check_image TAG: the checks of a built image (see the top of this file).
check_image() {
	tag=$1
	ctr=$(B from --pull-never "$IMG:$tag" 2>>"$T/$tag.log") || { bad "$tag: no image"; return; }
	mnt=$(B mount "$ctr")
	# The same files with the same bytes as the load here; the group files name their
	# folders, which differ by the $T/ref in front.
	/usr/bin/python3 - "$T/ref" "$mnt" "$HOME_CACHE" >"$T/$tag.cmp" 2>&1 <<'EOF'
import os, sys
ref, img, rel = sys.argv[1:]
def tree(root):
    out = {}
    for dp, dns, fns in os.walk(root + rel):
        for n in dns + fns:
            p = os.path.join(dp, n)
            out[p[len(root):]] = p
    return out
a, b = tree(ref), tree(img)
bad = sorted(set(a) ^ set(b))
for p in bad:
    print("only in", "reference:" if p in a else "image:", p)
for p in sorted(set(a) & set(b)):
    if os.path.isdir(a[p]) != os.path.isdir(b[p]):
        print("not the same kind:", p)
    elif not os.path.isdir(a[p]):
        want = open(a[p], "rb").read()
        if os.path.basename(p).startswith("__grp__"):
            want = want.replace(ref.encode(), b"")
        if open(b[p], "rb").read() != want:
            print("bytes differ:", p)
files = sum(1 for p in b.values() if not os.path.isdir(p))
print(files, "files")
EOF
	if grep -qE '^(only in|not the same|bytes differ)' "$T/$tag.cmp"; then
		bad "$tag: the cache differs from a load of the bundle: $(head -n 5 "$T/$tag.cmp")"
	else
		ok
	fi
	grep -qE '^1[0-9]{2} files$' "$T/$tag.cmp" && ok || bad "$tag: $(tail -n 1 "$T/$tag.cmp")"
	# Owners: uid and gid 1000 for every file and folder from ~/.cache down.
	others=$(find "$mnt$HOME_CACHE" \( ! -uid 1000 -o ! -gid 1000 \) -printf '%U:%G %P\n' 2>&1 | head -n 5)
	[ -d "$mnt$HOME_CACHE" ] && [ -z "$others" ] && ok ||
		bad "$tag: not owned by torch (uid 1000) under $HOME_CACHE: $others"
	# Modes: the .so came back executable, everything else as the load here made it.
	so="$mnt$HOME_CACHE/triton/$KERNEL/$SO"
	[ "$(stat -c %a "$so" 2>&1)" = 755 ] && ok || bad "$tag: $SO has mode $(stat -c %a "$so" 2>&1), not 755"
	(cd "$T/ref$HOME_CACHE" && find . -printf '%m %p\n' | sort) >"$T/$tag.modes.ref"
	(cd "$mnt$HOME_CACHE" 2>/dev/null && find . -printf '%m %p\n' | sort) >"$T/$tag.modes"
	cmp -s "$T/$tag.modes.ref" "$T/$tag.modes" && ok ||
		bad "$tag: modes differ: $(diff "$T/$tag.modes.ref" "$T/$tag.modes" | head -n 4)"
	# Nothing else left behind: no bundle, no curl, no compiler, nothing in root's home.
	left=$(find "$mnt" -xdev -name '*.mcache' 2>/dev/null | head -n 3)
	[ -z "$left" ] && ok || bad "$tag: a bundle is left in the image: $left"
	for f in /usr/bin/curl /usr/bin/gcc /usr/bin/make /root/.triton; do
		[ ! -e "$mnt$f" ] && ok || bad "$tag: the image has $f"
	done
	B umount "$ctr" >/dev/null
	# As torch, with the image's ENV: the roots a load finds are those ENV names, and
	# every artifact of the bundle is already there.
	B copy "$ctr" "$T/ctx/bundle.mcache" /tmp/check.mcache >/dev/null
	B run --isolation chroot --user torch "$ctr" -- sh -c 'env; megacache load /tmp/check.mcache -p /etc/megacache/megacache.pub --dry-run --json' \
		>"$T/$tag.dry" 2>&1
	/usr/bin/python3 - "$T/$tag.dry" >"$T/$tag.roots" 2>&1 <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
env = dict(l.split("=", 1) for l in text[:text.index("{")].splitlines() if "=" in l)
d = json.loads(text[text.index("{"):])
r = d["roots"]
assert r["inductor"] == env["TORCHINDUCTOR_CACHE_DIR"], (r, env.get("TORCHINDUCTOR_CACHE_DIR"))
assert r["triton"] == r["triton_home"] == env["TRITON_CACHE_DIR"], (r, env.get("TRITON_CACHE_DIR"))
assert d["would_install"] == 0 and d["unchanged"] == len(d["artifacts"]), (d["would_install"], d["unchanged"])
print("roots", r["inductor"], r["triton"], "warm:", d["unchanged"], "artifacts")
EOF
	if [ $? -eq 0 ]; then ok; else bad "$tag: dry run in the image: $(tail -n 2 "$T/$tag.roots")"; fi
	B rm "$ctr" >/dev/null
	echo "$tag: $(tail -n 1 "$T/$tag.cmp"), $(cat "$T/$tag.roots")"
}

# refused LABEL CONTEXT LINE BUD-ARGS...: the build fails at the load step (exit 1) with
# a line of its log matching the regular expression LINE (what megacache, or the digest
# check, said), and the container it leaves has no cache.
refused() {
	label=$1 ctx=$2 line=$3
	shift 3
	if bud "$label" "$ctx" -t "$IMG:$label" "$@"; then
		bad "$label: the bundle was installed"
		B rmi "$IMG:$label" >/dev/null 2>&1
		return
	fi
	grep -q 'building at STEP "RUN --mount=type=bind,target=/run/megacache' "$T/$label.log" &&
		grep -q 'exit status 1$' "$T/$label.log" && ok ||
		bad "$label: not refused at the load step with exit 1: $(why "$label")"
	grep -qE "$line" "$T/$label.log" && ok ||
		bad "$label: no line of the log matches '$line': $(why "$label")"
	n=0
	for ctr in $(left_behind); do
		n=$((n + 1))
		mnt=$(B mount "$ctr")
		[ ! -e "$mnt$HOME_CACHE" ] && ok || bad "$label: the failed build left $(find "$mnt$HOME_CACHE" | head -n 3)"
		B umount "$ctr" >/dev/null
		B rm "$ctr" >/dev/null
	done
	[ "$n" -ge 1 ] && ok || bad "$label: no container left to look into"
}

# built TAG WHAT BUD-ARGS...: the build succeeds, and its image passes check_image.
built() {
	tag=$1 what=$2
	shift 2
	if bud "$tag" "$T/ctx" -t "$IMG:$tag" "$@"; then
		ok
		check_image "$tag"
	else
		bad "$what failed: $(why "$tag")"
		for ctr in $(left_behind); do B rm "$ctr" >/dev/null; done
	fi
}

# The first stages, tagged: the layer cache of the next run.
bud build "$T/ctx" --target build -t "$IMG:build" && ok || bad "the first stage failed: $(why build)"
bud build-libarchive "$T/ctx" --target build --build-arg WITH_LIBARCHIVE=yes -t "$IMG:build-libarchive" &&
	ok || bad "the first stage with libarchive failed: $(why build-libarchive)"
bud build-torch "$T/ctx" --target build --build-arg BASE="$TORCH_BASE" -t "$IMG:build-torch" &&
	ok || bad "the first stage on $TORCH_BASE failed: $(why build-torch)"
on_torch_base build-torch && ok || bad "the first stage did not start from BASE=$TORCH_BASE"

# The first stage's build, without libarchive, writes format/vectors/ byte for byte (the
# committed ones were written through libarchive).
ctr=$(B from --pull-never "$IMG:build" 2>/dev/null) &&
	B run --isolation chroot "$ctr" -- sh -c 'make -s tests/mkvectors >/dev/null &&
		mkdir /tmp/v && tests/mkvectors . /tmp/v && for f in /tmp/v/*; do
		cmp -s "$f" "format/vectors/${f##*/}" || echo "differs: ${f##*/}"; done
		echo "$(ls /tmp/v | wc -l) vectors"' >"$T/slim-vectors" 2>&1
[ -n "$ctr" ] && B rm "$ctr" >/dev/null
grep -qE '^[0-9]{3,} vectors$' "$T/slim-vectors" && ! grep -q differs "$T/slim-vectors" && ok ||
	bad "the build without libarchive wrote other vectors: $(head -n 3 "$T/slim-vectors")"
echo "without libarchive: $(tail -n 1 "$T/slim-vectors"), the same bytes"

built file "the build from the context" --build-arg BUNDLE_SHA256="$SHA"
built url "the build through the pipe" --build-arg BUNDLE_URL="$URL/bundle-$SHA.mcache"
grep -q "GET /bundle-$SHA.mcache HTTP/1.1\" 200" "$T/http.log" && ok || bad "the server sent no bundle"
built url-sha256 "the build from a URL with BUNDLE_SHA256, for the bundle's GPU" \
	--build-arg BUNDLE_URL="$URL/bundle-$SHA.mcache" --build-arg BUNDLE_SHA256="$SHA" \
	--build-arg GPU_TARGET=cuda:90

# From a registry: docker-registry on a free loopback port, the bundle pushed there by
# this build's megacache; the recipe loads it by digest, and refuses a tag alone.
REG_PID=
if command -v docker-registry >/dev/null 2>&1; then
	RP=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
		"$T/registry" "$RP" >"$T/registry.yml"
	docker-registry serve "$T/registry.yml" >"$T/registry.log" 2>&1 &
	REG_PID=$!
	i=0
	until curl -s -o /dev/null "http://127.0.0.1:$RP/v2/" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
	REF="oci://127.0.0.1:$RP/caches/mlp:v1"
	if DIGEST=$("$MEGACACHE" copy "$T/ctx/bundle.mcache" "$REF" 2>"$T/push.err"); then
		ok
		built ref "the build from a registry" --build-arg BUNDLE_REF="$REF" \
			--build-arg BUNDLE_DIGEST="$DIGEST"
		refused ref-tag "$T/ctx" "^BUNDLE_REF $REF names no digest" --build-arg BUNDLE_REF="$REF"
	else
		bad "the bundle could not be pushed to the registry: $(cat "$T/push.err")"
	fi
	kill "$REG_PID" 2>/dev/null
else
	echo "note: no docker-registry here; the build from a registry left untried"
fi

refused tampered "$T/ctx-bad" "^megacache.*do not match their hash" --build-arg BUNDLE_SHA256="$SHA_BAD"
# An image for another GPU: the bundle's cuda:90 kernels refuse the build.
refused gpu "$T/ctx" "^megacache: .*holds Triton kernels for cuda:90, a GPU target this host lacks \(this host: cuda:80\)$" \
	--build-arg BUNDLE_SHA256="$SHA" --build-arg GPU_TARGET=cuda:80
refused cut "$T/ctx" "^megacache.*truncated" --build-arg BUNDLE_URL="$URL/cut-$SHA.mcache"
# A digest that is not the bundle's: the context's, and the download's.
refused digest "$T/ctx" \
	"^BUNDLE_SHA256 mismatch: bundle.mcache has SHA-256 $SHA, not $SHA_BAD; nothing installed$" \
	--build-arg BUNDLE_SHA256="$SHA_BAD"
refused url-digest "$T/ctx" \
	"^BUNDLE_SHA256 mismatch: $URL/digest-$SHA.mcache has SHA-256 $SHA, not $SHA_BAD; nothing installed$" \
	--build-arg BUNDLE_URL="$URL/digest-$SHA.mcache" --build-arg BUNDLE_SHA256="$SHA_BAD"
grep -q "GET /digest-$SHA.mcache HTTP/1.1\" 200" "$T/http.log" && ok ||
	bad "url-digest: the server sent no bundle"

# On another base: both stages start from it, and the image is as the others.
built torch "the build with BASE=$TORCH_BASE" --build-arg BASE="$TORCH_BASE" \
	--build-arg BUNDLE_SHA256="$SHA"
on_torch_base torch && ok || bad "the image did not start from BASE=$TORCH_BASE"

# The recipe with libarchive, for its size; megacache loads libarchive only to write a
# bundle, and the image has it: a pack there works.
built libarchive "the build with libarchive" --build-arg WITH_LIBARCHIVE=yes \
	--build-arg BUNDLE_SHA256="$SHA"
ctr=$(B from --pull-never "$IMG:libarchive" 2>/dev/null) &&
	B run --isolation chroot --user torch "$ctr" -- sh -c 'megacache pack -q -o /tmp/again.mcache \
		--from-dir "$TORCHINDUCTOR_CACHE_DIR" && megacache list /tmp/again.mcache | tail -n 1' \
		>"$T/la-pack" 2>&1
[ -n "$ctr" ] && B rm "$ctr" >/dev/null
grep -qE '^[0-9]+ artifacts' "$T/la-pack" && ok ||
	bad "the image with libarchive cannot write a bundle: $(head -n 3 "$T/la-pack")"
echo "image sizes:"
B images --format '{{.Name}}:{{.Tag}} {{.Size}}' |
	grep -E "^($BASE|$IMG:(file|url|url-sha256|libarchive)) " | sed 's/^/  /'
echo "container storage: $(du -sh "$STORE" | cut -f1) in $STORE"
echo "container test: $(($(date +%s) - START)) s"
finish
