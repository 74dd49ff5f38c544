# completion.sh - the bash completion (doc/completion.bash): sourced in bash, COMPREPLY
# for commands, a command's options, files, --types (the types the tool itself names),
# and its install by make install.
. "$(dirname "$0")/lib.sh"
COMP="$MC_SRCDIR/doc/completion.bash"
if ! command -v bash >/dev/null 2>&1; then
	echo "SKIP: no bash"
	exit 77
fi

# complete WORD...: COMPREPLY, sorted, one a line, for the last word at the cursor.
complete_words() {
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_megacache; printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort' _ "$COMP" "$@"
}
expect() { # expect "WANT LINES" WORD...
	want=$1; shift
	got=$(cd "$T" && complete_words "$@")
	[ "$got" = "$want" ] && ok || bad "completion of '$*': got '$got', expected '$want'"
}

expect "load" megacache lo
expect "--types" megacache load --ty
expect "--progress" megacache verify --prog
expect "plain" megacache verify --progress pl
expect "inductor" megacache load --types ind
expect "inductor,triton
inductor,triton_home" megacache load --types inductor,tri
expect "2.7" megacache export --torch-format 2
expect "load" megacache help lo
expect "--force" megacache keygen --fo
expect "" megacache diff --types
expect "--json" megacache --version --
mkdir -p "$T/bundles" && : >"$T/bundles/a.mcache" && : >"$T/bundles/b.mcache"
expect "bundles/a.mcache" megacache load bundles/a
expect "bundles/b.mcache" megacache verify x -p bundles/b
expect "bundles/a.mcache" megacache pack -o bundles/a
expect "bundles/b.mcache" megacache sign bundles/a.mcache -s bundles/b

# Every option a command's help names is completed for it, and the other way round.
for c in keygen save run pack sign verify list load export merge diff push pull audit; do
	"$MEGACACHE" "$c" --help | grep -oE '(^|[ ,[(])--?[a-zA-Z][a-z-]*' |
		sed 's/^[ ,[(]//' | sort -u >"$T/help-$c"
	complete_words megacache "$c" - | grep -vE '^--max-' | sort -u >"$T/comp-$c"
	extra=$(comm -23 "$T/help-$c" "$T/comp-$c" | grep -vE '^--max-' | tr '\n' ' ')
	[ -z "$extra" ] && ok || bad "$c --help names options the completion lacks: $extra"
done

# The types are those the tool names.
"$MEGACACHE" pack -q -o "$T/a.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache" 2>/dev/null ||
	bad "pack of a.mcache"
"$MEGACACHE" load "$T/a.mcache" --insecure-no-verify --types bogus >/dev/null 2>"$T/err"
tool=$(sed -n 's/.*the types are: //p' "$T/err" | tr -d ',' | tr ' ' '\n' | sort)
comp=$(complete_words megacache load --types "" | tr ',' '\n' | sort)
[ -n "$tool" ] && [ "$tool" = "$comp" ] && ok || bad "--types completion: '$comp', the tool's: '$tool'"

# make install puts it where bash-completion loads it.
if [ -f "$MC_BUILDDIR/Makefile" ]; then
	make -C "$MC_BUILDDIR" install-data-local DESTDIR="$T/dest" >/dev/null 2>&1
	f=$(find "$T/dest" -path '*/share/bash-completion/completions/megacache' -type f)
	[ -n "$f" ] && cmp -s "$f" "$COMP" && ok || bad "make install did not install the completion"
fi

finish
