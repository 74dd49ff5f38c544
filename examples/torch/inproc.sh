#!/bin/sh
# inproc.sh - on a GPU machine, the megacache Python package inside training processes
# (examples/torch/inproc.py): a cold job that saves in-process from its cache dirs and
# from torch's save_cache_artifacts() bytes, then fresh processes with empty cache dirs
# warmed by megacache.load(), by torch's load_cache_artifacts() of the bytes
# megacache.torch_artifacts() gives back, and by megacache.load() of the bytes bundle;
# two rounds, alternating; then megacache.warm() around a job that grew. Run from the
# top of a built tree with .gpu-libs/ (see examples/torch/proof.sh); results and
# summary.md go to $OUT (default ./run/inproc).
set -eu
top=$(pwd)
W=${WORK:-/tmp/megacache-inproc}
R=${OUT:-$top/run/inproc}
export LD_LIBRARY_PATH="$top/.gpu-libs:$top/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MEGACACHE_LIBRARY="$top/lib/.libs/libmegacache.so.0"
PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export MEGACACHE_LIBRARY PYTHONPATH
PY=${PYTHON:-python3}
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR TRITON_HOME || true
rm -rf "$W"
mkdir -p "$W" "$R"
"$PY" -m megacache keygen -W -f -p "$W/k.pub" -s "$W/k.key"
for round in 1 2; do
	for phase in cold load torch-load bytes-load; do
		echo "== round $round: $phase"
		"$PY" "$top/examples/torch/inproc.py" "$phase" --work "$W" --out "$R/$round-$phase.json"
		# The cold job's folders go, as on a machine that is gone.
		[ "$phase" != cold ] || rm -rf "$W"/cache-cold-* "$W"/home-cold-*
	done
done
echo "== megacache.warm() around a job that grew"
"$PY" "$top/examples/torch/inproc.py" warm --work "$W" --out "$R/1-warm.json"
"$PY" -m megacache list "$W/next.mcache" > "$R/next-list.txt"
"$PY" "$top/examples/torch/inproc_summary.py" "$R"
