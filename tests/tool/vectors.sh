# vectors.sh - every bundle of format/vectors/ gives the exit status and error text
# expected.tsv names, a refused bundle leaves the cache dir untouched, and each vLLM
# handle file loaded names where its handles landed.
. "$(dirname "$0")/lib.sh"
V="$MC_SRCDIR/format/vectors"
# Something beside the cache dirs, to show that no case touches it.
mkdir -p "$T/beside"
echo keep > "$T/beside/file"
touch -d 2001-01-01 "$T/beside/file" "$T/beside"
# handles_at DEST: each handle of each vLLM handle file beneath DEST names where it landed:
# its artifact beside it, there, or a file in its rank folder's inductor_cache/.
handles_at() {
	/usr/bin/python3 - "$1" <<'EOF'
import ast, glob, os, sys
files = glob.glob(sys.argv[1] + "/torch_compile_cache/*/rank_*/*/vllm_compile_cache.py")
assert files, "no handle file"
for f in files:
    d = os.path.dirname(f)
    for key, h in ast.literal_eval(open(f).read()).items():
        h = h["graph_handle"] if isinstance(h, dict) else h
        if not isinstance(h, tuple):
            continue
        if key[2] == "inductor_standalone":
            assert h[1] == os.path.join(d, h[0]) and os.path.exists(h[1]), (f, h)
        else:
            assert h[1].startswith(os.path.dirname(d) + "/inductor_cache/"), (f, h)
EOF
}
n=0
while IFS="$(printf '\t')" read -r file cmd code text; do
	case "$file" in ''|'#'*) continue ;; esac
	n=$((n + 1))
	dest="$T/cache$n"
	set -- load "$V/$file" --cache-dir "$dest"
	case "$cmd" in
	load) set -- "$@" -p "$KEYS/test.pub" ;;
	load-insecure) set -- "$@" --insecure-no-verify ;;
	load-threshold2) set -- "$@" -p "$KEYS/test.pub" -p "$KEYS/test2.pub" --threshold 2 ;;
	load-threshold2-same) set -- "$@" -p "$KEYS/test.pub" -p "$KEYS/test.pub" --threshold 2 ;;
	load-threshold2-alias) set -- "$@" -p "$KEYS/test.pub" -p "$KEYS/test-alias.pub" --threshold 2 ;;
	load-threshold2-alias-test2)
		set -- "$@" -p "$KEYS/test.pub" -p "$KEYS/test-alias.pub" -p "$KEYS/test2.pub" --threshold 2 ;;
	load-min-version-*) set -- "$@" -p "$KEYS/test.pub" --min-version "${cmd#load-min-version-}" ;;
	load-max-artifacts-*) set -- "$@" -p "$KEYS/test.pub" --max-artifacts "${cmd#load-max-artifacts-}" ;;
	load-max-artifact-bytes-*)
		set -- "$@" -p "$KEYS/test.pub" --max-artifact-bytes "${cmd#load-max-artifact-bytes-}" ;;
	load-max-manifest-bytes-*)
		set -- "$@" -p "$KEYS/test.pub" --max-manifest-bytes "${cmd#load-max-manifest-bytes-}" ;;
	load-size-caps-max) # the byte caps at 2^64 - 1
		set -- "$@" -p "$KEYS/test.pub" --max-artifact-bytes 18446744073709551615 \
			--max-total-bytes 18446744073709551615 ;;
	load-types-*) set -- "$@" -p "$KEYS/test.pub" --types "${cmd#load-types-}" ;;
	load-triton-dir-cache) set -- "$@" -p "$KEYS/test.pub" --triton-dir "$dest" ;;
	load-gpu-skip-*) # the host's GPU targets, comma-separated; kernels for others left out
		set -- "$@" -p "$KEYS/test.pub" --skip-other-gpus
		for g in $(echo "${cmd#load-gpu-skip-}" | tr , ' '); do set -- "$@" --gpu-target "$g"; done ;;
	load-gpu-*)
		set -- "$@" -p "$KEYS/test.pub"
		for g in $(echo "${cmd#load-gpu-}" | tr , ' '); do set -- "$@" --gpu-target "$g"; done ;;
	load-vllm) set -- "$@" -p "$KEYS/test.pub" --vllm-dir "$dest" ;;
	export) set -- export "$V/$file" --torch "$dest" -p "$KEYS/test.pub" ;;
	*) bad "unknown command $cmd in expected.tsv"; continue ;;
	esac
	run "$code" "$text" "$@" || continue
	if [ "$code" = 0 ]; then
		files=$(find "$dest" -type f | wc -l)
		[ "$files" -gt 0 ] && ok || bad "$file: nothing installed"
		# Nothing but final files: no temp file left behind.
		[ -z "$(find "$dest" -name '*.tmp')" ] && ok || bad "$file: temp files left"
		if [ "$cmd" = load-vllm ]; then
			check "$file: handles not written for $dest" handles_at "$dest"
		fi
	else
		[ ! -e "$dest" ] && ok || bad "$file: refused bundle left $(find "$dest" | head -5)"
	fi
done < "$V/expected.tsv"
[ "$n" -ge 60 ] && ok || bad "only $n vectors read"
# Nothing outside the cache dirs was touched.
[ -z "$(find "$T/beside" -newermt 2002-01-01)" ] && [ "$(cat "$T/beside/file")" = keep ] && ok \
	|| bad "a case touched a file beside the cache dir"
extra=$(cd "$T" && ls -A | grep -vE '^(cache[0-9]+|beside|out|err)$')
[ -z "$extra" ] && ok || bad "cases left files beside the cache dirs: $extra"
[ ! -e /tmp/megacache-evil ] && ok || bad "an archive member escaped to /tmp"
echo "vectors: $n cases"
finish
