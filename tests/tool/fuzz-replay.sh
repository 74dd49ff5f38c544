# fuzz-replay.sh - every fuzz target runs over its seed corpus, every crash kept as a
# regression case, and (for the bundle reader) every format vector, without libFuzzer.
. "$(dirname "$0")/lib.sh"
F="$MC_SRCDIR/tests/fuzz"
export TMPDIR="$T"
for t in bundle manifest torchblob keys pylit; do
	set -- "$F/corpus/$t"
	for c in "$F/crashes/$t"/*; do
		case "$c" in */README) ;; *) [ -f "$c" ] && set -- "$@" "$c" ;; esac
	done
	[ "$t" = bundle ] && set -- "$@" "$MC_SRCDIR/format/vectors"
	if "$MC_BUILDDIR/tests/fuzz/replay_$t" "$@" > "$T/$t.out" 2>&1; then
		ok
	else
		bad "replay_$t failed: $(tail -5 "$T/$t.out")"
	fi
done
finish
