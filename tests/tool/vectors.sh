# vectors.sh - every bundle of format/vectors/ gives the exit status and error text
# expected.tsv names, and a refused bundle leaves the cache dir untouched.
. "$(dirname "$0")/lib.sh"
V="$MC_SRCDIR/format/vectors"
# Something beside the cache dirs, to show that no case touches it.
mkdir -p "$T/beside"
echo keep > "$T/beside/file"
touch -d 2001-01-01 "$T/beside/file" "$T/beside"
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
	export) set -- export "$V/$file" --torch "$dest" -p "$KEYS/test.pub" ;;
	*) bad "unknown command $cmd in expected.tsv"; continue ;;
	esac
	run "$code" "$text" "$@" || continue
	if [ "$code" = 0 ]; then
		files=$(find "$dest" -type f | wc -l)
		[ "$files" -gt 0 ] && ok || bad "$file: nothing installed"
		# Nothing but final files: no temp file left behind.
		[ -z "$(find "$dest" -name '*.tmp')" ] && ok || bad "$file: temp files left"
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
