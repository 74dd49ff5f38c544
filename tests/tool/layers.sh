# layers.sh - the library's parts depend one way, as lib/README.md draws them: each
# source file includes only its own part's header, each header only the headers of the
# parts its part may use, a function is named only where its part may be used, and the
# table has no circle. Inside the parts and in bin/, no circle of files either. Also: no
# part over 5,000 lines, every declaration of a part's header under a label naming the
# file that defines it, no function over 80 lines, and no type or tier name compared
# outside tiers/.
. "$MC_SRCDIR/tests/tool/lib.sh"
export LC_ALL=C # sort and join agree on the order
LIB="$MC_SRCDIR/lib"

# The table between the two marker lines of lib/README.md: "part  may-use...".
sed -n '/^<!-- layers -->$/,/^<!-- end layers -->$/p' "$LIB/README.md" |
	grep -E '^[a-z]+( |$)' >"$T/table"
[ -s "$T/table" ] && ok || bad "lib/README.md has no layer table"

uses() { awk -v p="$1" '$1 == p { for (i = 2; i <= NF; i++) if ($i != "-") print $i }' "$T/table"; }

# Every part a folder of lib/, every folder a part; a part uses only parts above it in
# the table (so there is no circle).
for d in "$LIB"/*/; do
	ls "$d"*.c >/dev/null 2>&1 || continue # a build's leftovers
	p=$(basename "$d")
	grep -q "^$p\b" "$T/table" && ok || bad "lib/$p/ is not in lib/README.md's layer table"
done
seen=""
while read -r p rest; do
	[ -d "$LIB/$p" ] && ok || bad "layer table: lib/$p/ does not exist"
	for u in $(uses "$p"); do
		case " $seen " in
		*" $u "*) ok ;;
		*) bad "layer table: $p uses $u, which is not listed before it" ;;
		esac
	done
	seen="$seen $p"
done <"$T/table"

# The includes themselves.
for f in "$LIB"/*/*.c "$LIB"/*/*.h; do
	p=$(basename "$(dirname "$f")")
	rel=${f#"$LIB"/}
	allowed=" $(uses "$p" | tr '\n' ' ') "
	grep -oE '^#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" | sed -E 's/.*"(.*)"/\1/' >"$T/inc"
	while read -r inc; do
		case "$inc" in
		config.h | megacache.h) ok; continue ;;
		esac
		q=${inc%%/*}
		if [ "$inc" != "$q/$q.h" ]; then
			bad "$rel includes \"$inc\": only a part's one header may be included"
		elif [ "$q" = "$p" ]; then
			case "$f" in
			*.c) ok ;;
			*) bad "$rel includes its own part's header" ;;
			esac
		else
			case "$f" in
			*.c) bad "$rel includes \"$inc\": a source file includes only $p/$p.h" ;;
			*) case "$allowed" in
			   *" $q "*) ok ;;
			   *) bad "$rel includes \"$inc\": $p may not use $q" ;;
			   esac ;;
			esac
		fi
	done <"$T/inc"
done

# The calls, too (a public function is declared to every part by megacache.h): a
# function defined in one part is named only in that part and in the parts that use it.
# One call runs up, as lib/README.md says: mc_ctx_new() in core/context.c registers the
# built-in types through tiers/, by this one function of tiers/builtin.c.
UP_CALL="core/context.c mc__register_builtin tiers"
for f in "$LIB"/*/*.c; do
	p=$(basename "$(dirname "$f")")
	grep -oE '^mc_[a-z0-9_]+\(' "$f" | tr -d '(' | sed "s/\$/ $p/"
done | sort -u >"$T/defs"
for f in "$LIB"/*/*.c; do
	p=$(basename "$(dirname "$f")")
	allowed=" $p $(uses "$p" | tr '\n' ' ') "
	grep -oE '\bmc_[a-z0-9_]+' "$f" | sort -u | join - "$T/defs" | while read -r sym q; do
		case "$allowed" in
		*" $q "*) ;;
		*) [ "${f#"$LIB"/} $sym $q" = "$UP_CALL" ] ||
			echo "${f#"$LIB"/} names $sym, defined in $q/" ;;
		esac
	done
done >"$T/calls"
[ -s "$T/calls" ] && bad "calls against the layers: $(cat "$T/calls")" || ok

# The tool sees the public header only.
for f in "$MC_SRCDIR"/bin/*.c "$MC_SRCDIR"/bin/*.h; do
	[ -e "$f" ] || continue
	grep -oE '^#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" | sed -E 's/.*"(.*)"/\1/' |
	while read -r inc; do
		case "$inc" in
		*/*) echo "bin/$(basename "$f") includes \"$inc\"" ;;
		esac
	done >"$T/binc"
	[ -s "$T/binc" ] && bad "$(cat "$T/binc")" || ok
done

# No part over 5,000 lines: a part a newcomer reads whole.
for d in "$LIB"/*/; do
	ls "$d"*.c >/dev/null 2>&1 || continue # a build's leftovers
	n=$(cat "$d"*.c "$d"*.h | wc -l)
	[ "$n" -le 5000 ] && ok || bad "lib/$(basename "$d")/ is $n lines, over 5,000"
done

# Every declaration of a part's header stands under a label naming the file that
# defines it: "/* ---- what (file.c) ---- */".
for h in "$LIB"/*/*.h; do
	d=$(dirname "$h")
	awk '
	/^\/\* ----/ { lab = ""; inlab = 1 }
	inlab { lab = lab " " $0
		if ($0 ~ /\*\//) { inlab = 0; cur = ""; s = lab
			while (match(s, /[a-z0-9_]+\.c/)) {
				cur = cur " " substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
			}
		}
		next }
	/MC_HIDDEN/ && match($0, /mc_[a-z0-9_]+\(/) {
		print substr($0, RSTART, RLENGTH - 1), (cur == "" ? "-" : cur) }
	' "$h" | while read -r name files; do
		def=$(grep -l "^$name(" "$d"/*.c "$LIB"/*/*.c | head -n 1) # its own part's first
		case " $files " in
		*" ${def##*/} "*) ;;
		*) echo "${h#"$LIB"/}: $name (defined in ${def:-no file of its part}) is under no label naming its file" | sed "s|$LIB/||" ;;
		esac
	done
done >"$T/labels"
[ -s "$T/labels" ] && bad "$(cat "$T/labels")" || ok

# No circle of files: file A names a function (or, in bin/, a variable) defined in
# file B, B in C, ..., and one of them in A again. tsort(1) finds the circles.
# defs FILES...: "NAME FILE" for what each file defines for the others (not static).
defs() {
	awk '
	FNR == 1 { prev = "" }
	/^[A-Za-z_][A-Za-z0-9_]*\(/ && prev !~ /^static/ && prev !~ /^#/ {
		n = $0; sub(/\(.*/, "", n); print n, FILENAME }
	/^(const |unsigned |volatile )*((struct|enum|union) )?[a-z_][a-z0-9_]*[ *]+[a-z_][a-z0-9_]*(\[[^]]*\])*( =.*|;)$/ &&
	    !/^(static|extern|typedef|return|struct [a-z_]+ \{) / {
		n = $0; sub(/(\[[^]]*\])*( =.*|;)$/, "", n); sub(/.*[ *]/, "", n); print n, FILENAME }
	{ prev = $0 }
	' "$@" | sort -u -k1,1
}
# code FILE: its text without comments, string and character literals.
code() {
	perl -0777 -pe '
	s{("(?:\\.|[^"\\\n])*")|('"'"'(?:\\.|[^'"'"'\\\n])*'"'"')|(/\*.*?\*/)|(//[^\n]*)}
	 {defined $1 ? q("") : defined $2 ? 0 : q( )}gse' "$1"
}
# circles DEFS FILES...: each pair "A B" of a file naming what another defines, to tsort.
circles() {
	defs=$1
	shift
	for f in "$@"; do
		code "$f" | grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u | join - "$defs" |
		awk -v f="$f" '$2 != f { print f, $2 }'
	done | sort -u >"$T/edges"
	tsort <"$T/edges" 2>&1 >/dev/null | sed "s|$MC_SRCDIR/||g" | head -n 30
}
defs "$LIB"/*/*.c | grep '^mc_' >"$T/ldefs"
circles "$T/ldefs" "$LIB"/*/*.c >"$T/lcircles"
[ -s "$T/lcircles" ] && bad "a circle of files in lib/: $(cat "$T/lcircles")" || ok
defs "$MC_SRCDIR"/bin/*.c >"$T/bdefs"
circles "$T/bdefs" "$MC_SRCDIR"/bin/*.c >"$T/bcircles"
[ -s "$T/bcircles" ] && bad "a circle of files in bin/: $(cat "$T/bcircles")" || ok

# No function over 80 lines: from the line that names it to its closing brace.
awk '
/^[A-Za-z_].*\(/ && !/;[ \t]*$/ { cand = $0; line = FNR }
/^\{/ { if (cand != "") { start = line; name = cand; body = 1 } }
/^\}/ { if (body) { n = FNR - start + 1; sub(/\(.*/, "", name); k = split(name, w, /[ *]+/)
		if (n > 80) print FILENAME ": " w[k] "() is " n " lines"; body = 0; cand = "" } }
' "$LIB"/*/*.c "$MC_SRCDIR"/bin/*.c "$MC_SRCDIR"/tests/mkvectors*.c >"$T/long"
[ -s "$T/long" ] && bad "functions over 80 lines: $(sed "s|$MC_SRCDIR/||" "$T/long")" || ok

# Only tiers/ knows the built-in types and tiers by name.
grep -nE 'str(n)?cmp\([^;]*"(inductor|triton)"' "$LIB"/*/*.c | grep -v "^$LIB/tiers/" >"$T/names"
[ -s "$T/names" ] && bad "a tier or type name compared outside tiers/: $(cat "$T/names")" || ok

finish
