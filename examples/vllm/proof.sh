#!/bin/sh
# proof.sh - proves on a GPU machine whether a megacache bundle of vLLM's compile cache
# (tier vllm) gives a fresh process a warm start, with vllm_cache_probe.py (torch 2.11
# alone, no vLLM):
#  1. build: a vLLM-shaped root A=$WORK/a/vllm (JIT artifacts in both formats, two
#     ranks, AOT models);
#  2. a key pair, `megacache save --vllm-dir A` (torch's and Triton's folders pointed at
#     empty ones, so that only vLLM's is saved), `megacache list --json` of the bundle;
#  3. three cases, each checked in fresh processes with empty Inductor caches:
#     same-root   A moved away (A.orig), the bundle loaded into A;
#     other-root  the bundle loaded into B=$WORK/b/vllm, with A and A.orig gone;
#     copy        `cp -a` of the built tree to C=$WORK/c/vllm, with the original gone
#                 (its handles name A, which no longer exists);
#  4. proof_summary.py: OUT/table.md (one row per case) and OUT/report.json.
#
#   sh examples/vllm/proof.sh OUT
#
# megacache: $MEGACACHE, else megacache on PATH, else this tree's bin/.libs/megacache
# (with .gpu-libs/ and lib/.libs on LD_LIBRARY_PATH: see examples/torch/proof.sh).
# python: $PYTHON (default python3). Works in $WORK (default /tmp/vllm-proof), which it
# empties first, unless it holds files that this script did not leave there. What each
# step said goes to OUT/logs/<step>.log, its exit status and seconds to OUT/steps.tsv; a
# step that fails is recorded there and in the table, and the rest still runs. Exits 0 once the table is written (the table says what passed),
# 2 when it cannot run at all, else the summary's status.
set -eu
if [ $# -ne 1 ]; then
	echo "usage: sh examples/vllm/proof.sh OUT" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
mkdir -p "$1"
R=$(cd "$1" && pwd)
W=${WORK:-/tmp/vllm-proof}
case $W in
/?*) ;;
*)
	echo "proof.sh: WORK must be an absolute path other than /: $W" >&2
	exit 2
	;;
esac
case $R/ in
"$W"/*)
	echo "proof.sh: OUT ($R) lies inside WORK ($W), which is emptied first" >&2
	exit 2
	;;
esac
PY=${PYTHON:-python3}
PROBE="$here/vllm_cache_probe.py"
export LD_LIBRARY_PATH="$top/.gpu-libs:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
M=${MEGACACHE:-$(command -v megacache || true)}
for m in "$top/bin/.libs/megacache" "$top/bin/megacache"; do
	if [ -z "$M" ] && [ -x "$m" ]; then M=$m; fi
done
if [ -z "$M" ] || ! "$M" --version > /dev/null 2>&1; then
	echo "proof.sh: no megacache that runs (set MEGACACHE): '$M'" >&2
	exit 2
fi
if ! command -v "$PY" > /dev/null; then
	echo "proof.sh: no $PY (set PYTHON)" >&2
	exit 2
fi

# The probe's steps get their own empty Inductor cache under $TMPDIR; Triton's and
# vLLM's variables are unset, as vLLM leaves the first and as the folders are named here.
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR VLLM_CACHE_ROOT || true
if [ -d "$W" ] && [ ! -f "$W/.vllm-proof" ] && [ -n "$(ls -A "$W")" ]; then
	echo "proof.sh: WORK ($W) holds files of something else; it would be emptied" >&2
	exit 2
fi
rm -rf "$W" "$R/logs"
for f in steps.tsv table.md report.json build.json save.json list.json; do rm -f "$R/$f"; done
for c in same-root other-root copy; do rm -f "$R/$c.load.json" "$R/$c.check.json"; done
mkdir -p "$W/tmp" "$W/empty/inductor" "$W/empty/triton" "$R/logs"
: > "$W/.vllm-proof"
export TMPDIR="$W/tmp"
A="$W/a/vllm"
B="$W/b/vllm"
C="$W/c/vllm"
KEEP="$W/keep/vllm"
BUNDLE="$W/cache.mcache"

now() { date +%s.%N; }
# step NAME CMD...: CMD, what it says in logs/NAME.log, NAME, its exit status and its
# seconds in steps.tsv; returns that status (the script goes on).
step() {
	name=$1
	shift
	echo "== $name: $*"
	t0=$(now)
	rc=0
	"$@" > "$R/logs/$name.log" 2>&1 || rc=$?
	t1=$(now)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >> "$R/steps.tsv"
	if [ "$rc" -ne 0 ]; then
		echo "   exited $rc: $(tail -n 1 "$R/logs/$name.log")"
	fi
	return "$rc"
}
# to FILE CMD...: CMD with its standard output in FILE.
# shellcheck disable=SC2317  # called through step
to() {
	f=$1
	shift
	"$@" > "$f"
}
# load CASE DIR: the bundle loaded into vLLM folder DIR (torch's and Triton's folders
# new and empty), its report CASE.load.json.
load() {
	step "$1-load" to "$R/$1.load.json" "$M" load "$BUNDLE" -p "$W/proof.pub" \
		--vllm-dir "$2" --cache-dir "$W/empty/$1-inductor" --triton-dir "$W/empty/$1-triton" \
		--json
}
# check CASE DIR: the tree's listing and one index file kept, then the probe's check of
# DIR (every JIT hash folder in one process, the AOT models in another), CASE.check.json.
check() {
	find "$2" -printf '%y %s %P\n' 2> /dev/null | sort -k3 > "$R/logs/$1-tree.txt" || true
	vcc=$(find "$2" -name vllm_compile_cache.py 2> /dev/null | sort | head -n 1)
	if [ -n "$vcc" ]; then cp "$vcc" "$R/logs/$1-vllm_compile_cache.py"; fi
	step "$1-check" "$PY" "$PROBE" check "$2" --together --json "$R/$1.check.json" || true
}

step version "$M" --version || true
echo "== 1. build $A"
step build "$PY" "$PROBE" build "$A" --json "$R/build.json" || true

echo "== 2. key pair, megacache save of $A alone, list"
step keygen "$M" keygen -q -W -f -p "$W/proof.pub" -s "$W/proof.key" || true
step save to "$R/save.json" "$M" save -o "$BUNDLE" -s "$W/proof.key" --vllm-dir "$A" \
	--cache-dir "$W/empty/inductor" --triton-dir "$W/empty/triton" --json || true
step list to "$R/list.json" "$M" list "$BUNDLE" -p "$W/proof.pub" --json || true

echo "== 3a. same root: $A moved away, the bundle loaded into it"
step same-root-move mv "$A" "$A.orig" || true
if load same-root "$A"; then check same-root "$A"; fi
# shellcheck disable=SC2016  # expanded by that sh
step same-root-away sh -c 'rm -rf "$1" && mkdir -p "$(dirname "$3")" && mv "$2" "$3"' \
	sh "$A" "$A.orig" "$KEEP" || true

echo "== 3b. another root: the bundle loaded into $B, $A gone"
if load other-root "$B"; then check other-root "$B"; fi

echo "== 3c. cp -a of the built tree to $C, the original gone"
# shellcheck disable=SC2016  # expanded by that sh
step copy-cp sh -c 'mkdir -p "$(dirname "$2")" && cp -a "$1" "$2" && rm -rf "$1"' \
	sh "$KEEP" "$C" || true
if [ -d "$C" ]; then check copy "$C"; fi

echo "== 4. table"
status=0
"$PY" "$here/proof_summary.py" "$R" || status=$?
exit "$status"
