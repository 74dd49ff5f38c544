# vectors.sh - every bundle of format/vectors/ gives the exit status and error text
# expected.tsv names, and a refused bundle leaves the cache dir untouched.
. "$(dirname "$0")/lib.sh"
V="$MC_SRCDIR/format/vectors"
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
	load-min-version-*) set -- "$@" -p "$KEYS/test.pub" --min-version "${cmd#load-min-version-}" ;;
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
finish
