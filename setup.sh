#!/bin/sh
# setup.sh - installs what megacache needs on Debian 12, builds it, and runs the demo:
# a real torch cache packed into a signed bundle, verified, and loaded into an empty
# cache dir. Run as root (or with sudo available). buildah and mmdebstrap are for
# tests/container/run.sh, which builds examples/container/Containerfile (buildah needs
# no daemon, nor runc or fuse-overlayfs, with chroot isolation as root). hiredis is the
# Redis client of push, pull and audit; redis-server, redis-tools and python3-redis are
# for their tests (a real server started by tests/tool/fleet.sh, values read back in
# Python as torch reads them). libssl-dev: OpenSSL's libcrypto, whose SHA-256 uses the
# CPU's SHA extensions (the FX-graph and AOTAutograd files' hashes). python3-pip,
# python3-setuptools and python3-wheel: the Python package's offline pip install test.
# libcurl4-openssl-dev: the HTTP client of oci:// registry references; docker-registry
# (the CNCF distribution registry), skopeo, apache2-utils (htpasswd) and openssl: a real
# registry with TLS and authentication for their tests, and the other client; curl asks
# the test servers whether they are up.
set -eu
cd "$(dirname "$0")"
if [ "$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
	build-essential autoconf automake libtool pkg-config \
	libarchive-dev libsodium-dev libcjson-dev libzstd-dev check minisign valgrind strace python3 \
	python3-pytest python3-pytest-forked python3-venv python3-jsonschema \
	python3-pip python3-setuptools python3-wheel \
	clang libclang-rt-14-dev buildah mmdebstrap \
	libhiredis-dev redis-server redis-tools python3-redis libssl-dev zstd procps \
	libcurl4-openssl-dev curl docker-registry skopeo apache2-utils openssl >/dev/null
autoreconf -fi
./configure --enable-werror --with-hiredis --with-openssl --with-curl
make -j"$(nproc)"
sh examples/demo.sh
