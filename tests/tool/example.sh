# example.sh - the application-type example builds against the public header only,
# runs, and leaves the files its handler describes.
. "$(dirname "$0")/lib.sh"
EX="$MC_BUILDDIR/examples/custom_type"
"$EX" "$T" > "$T/out" 2>&1 && ok || bad "custom_type failed: $(cat "$T/out")"
check "gelu kernel installed" grep -qx '.version 8.4' "$T/ptx-tier/ptx/sm_90/gelu.ptx"
check "layer_norm kernel installed" test -f "$T/ptx-tier/ptx/sm_90/layer_norm.ptx"
n=$(find "$T/ptx-tier" -type f | wc -l)
[ "$n" = 2 ] && ok || bad "expected 2 files in the tier, found $n"
finish
