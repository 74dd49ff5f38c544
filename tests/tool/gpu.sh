# gpu.sh - the GPU targets of a bundle's Triton kernels (SPEC.md section 12.6): recorded
# by save and pack, shown by list and verify, checked by load, run and list --explain
# against the host's (--gpu-target here: this machine has no GPU), refused with nothing
# installed, or left out kernel by kernel with --skip-other-gpus; older bundles are
# checked from their kernels.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
tar xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
SRC="$T/cache_mlp_cold"
K=$(find "$SRC/triton/0" -mindepth 1 -maxdepth 1 -type d | wc -l)
TF=$(find "$SRC/triton" -type f | wc -l)
ALL=$(find "$SRC" -type f | wc -l)
[ "$K" = 16 ] && [ "$TF" = 128 ] && [ "$ALL" = 154 ] && ok ||
	bad "the fixture has $K kernels, $TF kernel files, $ALL files"

run 0 "" pack -q -o "$T/a.mcache" -s "$SEC" --from-dir "$SRC"
run 0 "" pack -q -o "$T/a1.mcache" -s "$SEC" --format-version 1 --from-dir "$SRC"
# jsget FILE EXPR: Python's value of EXPR over the JSON object j read from FILE.
jsget() {
	/usr/bin/python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(*(v if isinstance(v, tuple) else (v,)))' "$@"
}

# Recorded in format 2, in the signed manifest; format 1 records none.
tar xOf "$T/a.mcache" manifest.json | grep -qF '"labels":{},"gpu_targets":["cuda:90"],"index":' &&
	ok || bad "the manifest records no gpu_targets: $(tar xOf "$T/a.mcache" manifest.json | head -c 300)"
if tar xOf "$T/a1.mcache" manifest.json | grep -qF gpu_targets; then bad "format 1 records gpu_targets"; else ok; fi
run 0 "GPU targets cuda:90" list "$T/a.mcache"
run 0 "GPU targets not recorded (format 1, or an older bundle): load and verify read them from its kernels" \
	list "$T/a1.mcache"
"$MEGACACHE" list --json "$T/a.mcache" >"$T/l.json" && [ "$(jsget "$T/l.json" 'j["gpu_targets"], j["gpu_targets_recorded"]')" = "['cuda:90'] True" ] &&
	ok || bad "list --json: $(grep gpu "$T/l.json")"
"$MEGACACHE" list --json "$T/a1.mcache" >"$T/l1.json" && [ "$(jsget "$T/l1.json" 'j["gpu_targets"], j["gpu_targets_recorded"]')" = "None False" ] &&
	ok || bad "list --json of format 1: $(grep gpu "$T/l1.json")"
run 0 "GPU targets cuda:90 (recorded, matching its kernels)" verify "$T/a.mcache" -p "$PUB"
run 0 "GPU targets cuda:90 (read from its kernels: format 1, or an older bundle, records none)" \
	verify "$T/a1.mcache" -p "$PUB"
"$MEGACACHE" verify --json "$T/a1.mcache" -p "$PUB" >"$T/v1.json" && [ "$(jsget "$T/v1.json" 'j["gpu_targets"], j["gpu_targets_recorded"]')" = "['cuda:90'] False" ] &&
	ok || bad "verify --json of format 1: $(grep gpu "$T/v1.json")"
# A bundle without kernels records none and says nothing of them.
"$MEGACACHE" pack -q -o "$T/nok.mcache" -s "$SEC" --from-torch "$DATA/mlp-cpu-pgo.megacache" 2>/dev/null
run 0 "" list "$T/nok.mcache"
if grep -q GPU "$T/out"; then bad "list of a bundle without kernels speaks of GPUs: $(cat "$T/out")"; else ok; fi

# A wrong form of --gpu-target is the caller's mistake.
run 2 "--gpu-target takes BACKEND:ARCH as Triton names a kernel's target (cuda:90 for compute capability 9.0, hip:gfx942), not 'sm90'" \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/x" --gpu-target sm90
run 2 "--gpu-target and --skip-other-gpus go with --explain" list "$T/a.mcache" --gpu-target cuda:90

# No GPU seen and no --gpu-target: everything is installed, with a warning. (Only where
# no GPU is: this machine and CI.)
if [ -e /sys/class/kfd ] || ldconfig -p 2>/dev/null | grep -q libnvidia-ml.so.1; then
	echo "gpu.sh: a GPU driver is present: the no-GPU cases are skipped"
else
	run 0 "" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/nogpu"
	grep -qF "megacache: warning: GPU targets not checked: no GPU seen (the bundle's kernels are for cuda:90; --gpu-target T names this host's)" "$T/err" &&
		ok || bad "load with no GPU: no warning: $(cat "$T/err")"
	[ "$(find "$T/nogpu" -type f | wc -l)" = 154 ] && ok || bad "load with no GPU installed $(find "$T/nogpu" -type f | wc -l) files"
	"$MEGACACHE" load --json "$T/a.mcache" -p "$PUB" --cache-dir "$T/nogpu2" >"$T/n.json" &&
		[ "$(jsget "$T/n.json" 'j["gpu_targets"], j["host_gpu_targets"], j["gpu_targets_checked"], j["skipped"]')" = "['cuda:90'] [] False 0" ] &&
		ok || bad "load --json with no GPU: $(grep -i gpu "$T/n.json")"
fi

# The host's targets given: the same target loads.
run 0 "GPU targets cuda:90: this host has them (cuda:90, as given)" \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/same" --gpu-target cuda:90
[ "$(find "$T/same" -type f | wc -l)" = 154 ] && ok || bad "load for cuda:90 installed $(find "$T/same" -type f | wc -l) files"

# Another target: refused before anything is written, from a file or a pipe, format 2
# (by the recorded targets) or 1 (by the kernels, once read).
MSG2="a.mcache: holds Triton kernels for cuda:90, a GPU target this host lacks (this host: cuda:80)"
MSG1="a1.mcache: holds 16 Triton kernels for cuda:90, a GPU target this host lacks (this host: cuda:80)"
run 1 "$MSG2" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/r2" --gpu-target cuda:80
grep -qF "nothing was installed; --skip-other-gpus installs the rest without those kernels" "$T/err" &&
	ok || bad "the refusal does not say the way on: $(cat "$T/err")"
run 1 "$MSG1" load "$T/a1.mcache" -p "$PUB" --cache-dir "$T/r1" --gpu-target cuda:80
cat "$T/a.mcache" | "$MEGACACHE" load - -p "$PUB" --cache-dir "$T/rp2" --gpu-target cuda:80 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "holds Triton kernels for cuda:90" "$T/err" && ok || bad "pipe, format 2: exit $r: $(cat "$T/err")"
cat "$T/a1.mcache" | "$MEGACACHE" load - -p "$PUB" --cache-dir "$T/rp1" --gpu-target cuda:80 2>"$T/err"
r=$?
[ "$r" = 1 ] && grep -qF "holds 16 Triton kernels for cuda:90" "$T/err" && ok || bad "pipe, format 1: exit $r: $(cat "$T/err")"
for d in r2 r1 rp2 rp1; do
	[ ! -e "$T/$d" ] && ok || bad "a refused load ($d) left $(find "$T/$d" | head -3)"
done
# Into a cache that holds files already: they stay as they were. Format 2 is refused
# before anything is staged, so not even a folder's time changes; format 1 once its
# kernels were read, its staged files removed again.
mkdir -p "$T/kept/fxgraph" && echo old > "$T/kept/fxgraph/x" && touch -d 2001-01-01 "$T/kept/fxgraph/x" "$T/kept/fxgraph" "$T/kept"
run 1 "$MSG2" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/kept" --gpu-target cuda:80
[ -z "$(find "$T/kept" -newermt 2002-01-01)" ] && ok || bad "a refused load touched the cache: $(find "$T/kept" -newermt 2002-01-01)"
run 1 "$MSG1" load "$T/a1.mcache" -p "$PUB" --cache-dir "$T/kept" --gpu-target cuda:80
[ "$(cd "$T/kept" && find . | sort | tr '\n' ' ')" = ". ./fxgraph ./fxgraph/x " ] && [ "$(cat "$T/kept/fxgraph/x")" = old ] &&
	ok || bad "a refused load changed the cache: $(find "$T/kept")"
"$MEGACACHE" load --json "$T/a1.mcache" -p "$PUB" --cache-dir "$T/rj" --gpu-target cuda:80 >"$T/f.json"
r=$?
[ "$r" = 1 ] && [ "$(jsget "$T/f.json" 'j["ok"], j["error"], j["exit"], j["gpu_targets"], j["host_gpu_targets"]')" = "False gpu_mismatch 1 ['cuda:90'] ['cuda:80']" ] &&
	ok || bad "load --json refused: exit $r: $(cat "$T/f.json")"

# --skip-other-gpus: everything but the kernels, which are left out whole (group files
# too), and said so.
for b in a a1; do
	run 0 "left out 128 files of 16 kernels for cuda:90, which this host lacks (this host: cuda:80, as given)" \
		load "$T/$b.mcache" -p "$PUB" --cache-dir "$T/skip-$b" --gpu-target cuda:80 --skip-other-gpus
	# Nothing of the kernels: not even the folders made for them alone.
	[ ! -e "$T/skip-$b/triton" ] && ok ||
		bad "--skip-other-gpus ($b) left $(find "$T/skip-$b/triton" | head -3)"
	[ "$(cd "$T/skip-$b" && tree_sum . | grep -v ' ./triton/')" = "$(cd "$SRC" && src_sum . | grep -v ' ./triton/')" ] &&
		ok || bad "--skip-other-gpus ($b): the other files differ from the cache's"
done
"$MEGACACHE" load --json "$T/a.mcache" -p "$PUB" --cache-dir "$T/skipj" --gpu-target cuda:80 --skip-other-gpus >"$T/s.json"
[ "$(jsget "$T/s.json" 'j["installed"], j["skipped"], j["skipped_kernels"], j["types"]["triton"]["skipped"], sorted(set(a["type"] for a in j["artifacts"] if a["action"] == "skipped"))')" = "26 128 16 128 ['triton']" ] &&
	ok || bad "load --json --skip-other-gpus: $(head -c 600 "$T/s.json")"

# Kernel files already in place (one identical, one not): still 16 kernels left out, and
# the files there are left as they were.
K1=$(find "$SRC/triton/0" -mindepth 1 -maxdepth 1 -type d | sort | head -1 | xargs basename)
mkdir -p "$T/part/triton/0/$K1"
f1=$(cd "$SRC/triton/0/$K1" && ls | grep -v '^__grp__' | sort | head -1)
f2=$(cd "$SRC/triton/0/$K1" && ls | grep -v '^__grp__' | sort | sed -n 2p)
cp "$SRC/triton/0/$K1/$f1" "$T/part/triton/0/$K1/$f1"
echo other >"$T/part/triton/0/$K1/$f2"
run 0 "left out 128 files of 16 kernels for cuda:90" \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/part" --gpu-target cuda:80 --skip-other-gpus
[ "$(cat "$T/part/triton/0/$K1/$f2")" = other ] && cmp -s "$SRC/triton/0/$K1/$f1" "$T/part/triton/0/$K1/$f1" &&
	[ "$(find "$T/part/triton" -type f | wc -l)" = 2 ] && ok ||
	bad "--skip-other-gpus changed the kernel files there: $(find "$T/part/triton" -type f)"
# A load of some types is checked once their kernels were read, format 2 too.
run 1 "a.mcache: holds 16 Triton kernels for cuda:90" \
	load "$T/a.mcache" -p "$PUB" --cache-dir "$T/types-t2" --gpu-target cuda:80 --types triton
[ ! -e "$T/types-t2" ] && ok || bad "a refused load of some types left $(find "$T/types-t2" | head -3)"

# Two targets: one kernel's metadata made to name cuda:80. For a cuda:90 host that kernel
# alone is left out.
cp -a "$SRC" "$T/mixed"
KD=$(find "$T/mixed/triton/0" -mindepth 1 -maxdepth 1 -type d | sort | head -1)
KN=$(basename "$KD")
for f in "$KD"/*.json; do
	case "$(basename "$f")" in __grp__*) continue ;; esac
	sed -i 's/"arch": 90/"arch": 80/' "$f"
done
run 0 "" pack -q -o "$T/m.mcache" -s "$SEC" --from-dir "$T/mixed"
run 0 "GPU targets cuda:80, cuda:90" list "$T/m.mcache"
run 1 "m.mcache: holds Triton kernels for cuda:80, a GPU target this host lacks (this host: cuda:90)" \
	load "$T/m.mcache" -p "$PUB" --cache-dir "$T/m1" --gpu-target cuda:90
run 0 "left out 8 files of 1 kernel for cuda:80, which this host lacks (this host: cuda:90, as given)" \
	load "$T/m.mcache" -p "$PUB" --cache-dir "$T/m2" --gpu-target cuda:90 --skip-other-gpus
[ ! -e "$T/m2/triton/0/$KN" ] && [ "$(find "$T/m2/triton" -type f | wc -l)" = 120 ] &&
	[ "$(find "$T/m2/triton" -name '__grp__*' | wc -l)" = 15 ] && ok ||
	bad "--skip-other-gpus with two targets: $(find "$T/m2/triton" -type f | wc -l) kernel files"
run 0 "" load "$T/m.mcache" -p "$PUB" --cache-dir "$T/m3" --gpu-target cuda:90 --gpu-target cuda:80
[ "$(find "$T/m3" -type f | wc -l)" = 154 ] && ok || bad "a host of both targets did not get every file"

# A load of types without kernels installs no kernel: nothing to refuse, from the
# recorded targets or from the kernels read.
for b in a a1; do
	run 0 "GPU targets cuda:90: no kernel selected (--types), none checked (this host: cuda:80)" \
		load "$T/$b.mcache" -p "$PUB" --cache-dir "$T/types-$b" --gpu-target cuda:80 --types inductor,autotune
done
run 1 "$MSG1" load "$T/a1.mcache" -p "$PUB" --cache-dir "$T/types-t" --gpu-target cuda:80 --types autotune,triton

# list --explain says what a load here would do.
run 1 "megacache: a load on this host would refuse it:" list --explain "$T/a.mcache" --gpu-target cuda:80
grep -qF "$MSG2" "$T/err" && ok || bad "list --explain: $(cat "$T/err")"
run 0 "left out 128 files of 16 kernels for cuda:90" list --explain "$T/a.mcache" --gpu-target cuda:80 --skip-other-gpus
[ "$(grep -c '^triton .* skipped (GPU) ' "$T/out")" = 128 ] && ok || bad "list --explain: $(grep -c 'skipped' "$T/out") lines of skipped kernel files"
run 0 "would warm" load "$T/a.mcache" -p "$PUB" --cache-dir "$T/dry" --gpu-target cuda:80 --skip-other-gpus --dry-run
[ ! -e "$T/dry" ] && ok || bad "a dry run wrote $(find "$T/dry" | head -3)"

# run: the command does not start after a refusal; with --skip-other-gpus it does.
run 1 "$MSG2" run -b "$T/a.mcache" -p "$PUB" --cache-dir "$T/run1" --gpu-target cuda:80 -- touch "$T/ran1"
[ ! -e "$T/ran1" ] && [ ! -e "$T/run1" ] && ok || bad "run went on after a refusal"
run 0 "" run -b "$T/a.mcache" -p "$PUB" --cache-dir "$T/run2" --gpu-target cuda:80 --skip-other-gpus -- touch "$T/ran2"
[ -e "$T/ran2" ] && grep -qF "megacache: left out 128 files of 16 kernels for cuda:90" "$T/err" && ok ||
	bad "run --skip-other-gpus: $(cat "$T/err")"
run 2 "apply to bundles given with -b; none given" run --gpu-target cuda:90 -- true
finish
