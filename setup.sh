#!/bin/sh
# setup.sh - installs what megacache needs on Debian 12, builds it, and runs the demo:
# a real torch cache packed into a signed bundle, verified, and loaded into an empty
# cache dir. Run as root (or with sudo available).
set -eu
cd "$(dirname "$0")"
if [ "$(id -u)" -eq 0 ]; then SUDO=; else SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
	build-essential autoconf automake libtool pkg-config \
	libarchive-dev libsodium-dev libcjson-dev libzstd-dev check minisign valgrind strace python3 \
	python3-pytest python3-pytest-forked python3-venv \
	clang libclang-rt-14-dev >/dev/null
autoreconf -fi
./configure --enable-werror
make -j"$(nproc)"
sh examples/demo.sh
