# escape.sh - nothing a bundle, a file name or an argument carries reaches a terminal
# raw. Every command that reads a bundle runs on each print-* vector and on a valid
# bundle under a hostile file name, and with hostile arguments, on a pipe and on a
# pseudo-terminal. Its output must hold no C0 control but tab and line feed, no DEL,
# no C1 control, no bidirectional control or line separator and no forged line; it
# must show the hostile text escaped (so a command that printed nothing cannot pass);
# --json output must be one JSON text.
. "$(dirname "$0")/lib.sh"
V="$MC_SRCDIR/format/vectors"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
VALID="$V/valid-signed.mcache"
JSONCHECK="$MC_BUILDDIR/tests/jsoncheck"
CR=$(printf '\r')
ESC=$(printf '\033')

# The bytes no output may hold, for grep -E in the C locale: C0 controls but tab and
# line feed, DEL; C1 controls in UTF-8 (c2 80-9f); U+061C (d8 9c); U+200E, U+200F,
# U+2028-U+202E (e2 80 8e-8f, a8-ae); U+2066-U+2069 (e2 81 a6-a9).
RAW=$(printf '[\001-\010\013-\037\177]|\302[\200-\237]|\330\234|\342\200[\216\217\250-\256]|\342\201[\246-\251]')

# clean FILE WHAT: FILE holds none of those bytes, no NUL and no line a key forged.
clean() {
	if ! tr -d '\000' < "$1" | cmp -s - "$1" || LC_ALL=C grep -aEq "$RAW" "$1"; then
		bad "$2: raw control characters in the output: $(LC_ALL=C od -c "$1" | head -6)"
	elif grep -aq '^megacache: OK' "$1"; then
		bad "$2: the output has a forged line: $(head -c 400 "$1" | cat -v)"
	else
		ok
	fi
}

# shows FILE WHAT MARK: the hostile text is there escaped, as the tool writes it
# (\x1b) or as JSON does (\u001b).
shows() {
	json=$(printf '%s' "$3" | sed 's/\\x/\\u00/g')
	if grep -aqF -e "$3" -e "$json" "$1"; then
		ok
	else
		bad "$2: output lacks '$3': $(head -c 400 "$1" | cat -v)"
	fi
}

# A pseudo-terminal through script(1) (util-linux), where there is one.
PTY=
if command -v script >/dev/null 2>&1 &&
   SHELL=/bin/sh script -qec true /dev/null < /dev/null > /dev/null 2>&1; then
	PTY=1
else
	echo "escape: no script(1) with a pseudo-terminal here: pipe runs only"
fi

# try TEXT SHOWN megacache-args...: runs the command on a pipe, then on a
# pseudo-terminal, each time with an empty $T/out for what it writes; checks both
# outputs, that TEXT shows when SHOWN is 1, and that the exit status is one of the
# tool's and the same on both.
try() {
	want_text=$1; shown=$2; shift 2
	# The command as failures name it: this log must not carry what it tests for.
	what=$(printf '%s' "$*" | cat -v | tr '\n' ' ')
	rm -rf "$T/out"; mkdir "$T/out"
	"$MEGACACHE" "$@" > "$T/o" 2> "$T/e"
	code=$?
	cat "$T/o" "$T/e" > "$T/all"
	case $code in 0|1|2) ok ;; *) bad "$what: exit status $code" ;; esac
	clean "$T/all" "$what"
	[ "$shown" = 1 ] && shows "$T/all" "$what" "$want_text"
	case " $* " in *" --json "*)
		# A command that fails may print only its error, on stderr.
		if [ -s "$T/o" ] || [ "$code" = 0 ]; then
			"$JSONCHECK" < "$T/o" 2> "$T/jerr" && ok ||
				bad "$what: --json output is not JSON ($(cat "$T/jerr")): $(head -c 400 "$T/o" | cat -v)"
		fi ;;
	esac
	[ -n "$PTY" ] || return 0
	rm -rf "$T/out"; mkdir "$T/out"
	# script(1) runs a command line: each argument single-quoted (none holds a quote).
	{ printf 'exec'; for a in "$MEGACACHE" "$@"; do printf " '%s'" "$a"; done; } > "$T/cmd"
	SHELL=/bin/sh script -qec "sh '$T/cmd'" /dev/null < /dev/null > "$T/pty" 2>&1
	pcode=$?
	[ "$pcode" = "$code" ] && ok || bad "$what: exit status $pcode on a terminal, $code on a pipe"
	# The terminal turns each line feed into CR LF, and there the tool draws its
	# progress as "\r<phase>: NN%" and clears it with "\r\033[K": exactly those are
	# taken out before the same checks.
	LC_ALL=C sed -e "s/$CR[a-z]*: *[0-9]*%//g" -e "s/$CR$ESC\\[K//g" -e "s/$CR\$//" \
		"$T/pty" > "$T/all"
	clean "$T/all" "$what (terminal)"
	[ "$shown" = 1 ] && shows "$T/all" "$what (terminal)" "$want_text"
	return 0
}

# Whether a command shows a vector's text: 0 for the commands named in $quiet (those
# that succeed on that vector without printing that part of it).
want() {
	case " $quiet " in *" $1 "*) echo 0 ;; *) echo 1 ;; esac
}

# 1. The print-* vectors: every command that takes a bundle.
n=0
for v in "$V"/print-*.mcache; do
	name=$(basename "$v" .mcache)
	B="$T/$name.mcache"
	cp "$v" "$B"
	n=$((n + 1))
	quiet=
	req=
	case $name in
	print-key-*) mark='\x1b]52;c;'; quiet="sign" ;;
	print-sig-member) mark='\x1b]52;c;' ;;
	print-type) mark='\x1b[31m' ;;
	print-label-name) mark='\x1b]0;' ;;
	print-unknown-member) mark='\x1b[2J' ;;
	# A label value with controls is refused; the error names the first one.
	print-label-value) mark='U+009B' ;;
	*) bad "$name: no expected text"; continue ;;
	esac
	try "$mark" "$(want list)" list "$B"
	try "$mark" "$(want list)" list "$B" --json
	try "$mark" "$(want explain)" list "$B" --explain --cache-dir "$T/out/c"
	try "$mark" "$(want verify)" verify "$B" -p "$PUB" $req
	try "$mark" "$(want verify)" verify "$B" -p "$PUB" $req --json
	try "$mark" "$(want load)" load "$B" -p "$PUB" --cache-dir "$T/out/c" $req
	try "$mark" "$(want load)" load "$B" -p "$PUB" --cache-dir "$T/out/c" $req --dry-run
	try "$mark" "$(want load)" load "$B" -p "$PUB" --cache-dir "$T/out/c" $req --json
	try "$mark" "$(want export)" export "$B" --torch "$T/out/t.blob" -p "$PUB"
	try "$mark" "$(want merge)" merge -o "$T/out/m.mcache" "$VALID" "$B" -p "$PUB" --unsigned
	try "$mark" "$(want diff)" diff "$VALID" "$B"
	try "$mark" "$(want diff)" diff "$VALID" "$B" --json
	try "$mark" "$(want sign)" sign "$B" -s "$SEC" -p "$PUB" -o "$T/out/s.mcache"
done
[ "$n" -ge 7 ] && ok || bad "only $n print-* vectors"

# 2. A valid bundle under a file name with an OSC 52 sequence, a forged line, a C1
# control in UTF-8, a lone C1 byte (not UTF-8) and U+202E; outputs under such names.
evil=$(printf 'x\033]52;c;cm0gLXJmIH4=\007\nmegacache: OK\302\23331m\233\342\200\256')
E="$T/$evil.mcache"
O="$T/out/$evil"
cp "$VALID" "$E"
mark='\x1b]52;c;'
try "$mark" 1 list "$E"
try "$mark" 1 list "$E" --json
try "$mark" 1 list "$E" --explain --cache-dir "$O"
try "$mark" 1 list "$E" --explain --cache-dir "$O" --json
try "$mark" 1 list "$T/$evil-absent.mcache"
try "$mark" 1 verify "$E" -p "$PUB"
try "$mark" 1 verify "$E" -p "$PUB" --json
try "$mark" 1 verify "$E" -p "$KEYS/other.pub"
try "$mark" 1 load "$E" -p "$PUB" --cache-dir "$O"
try "$mark" 1 load "$E" -p "$PUB" --cache-dir "$O" --dry-run
try "$mark" 1 load "$E" -p "$PUB" --cache-dir "$O" --json
try "$mark" 1 export "$E" --torch "$O.blob" -p "$PUB"
try "$mark" 1 merge -o "$O.mcache" "$VALID" "$E" -p "$PUB" --unsigned
# Plain diff names keys only.
try "$mark" 0 diff "$VALID" "$E"
try "$mark" 1 diff "$VALID" "$E" --json
try "$mark" 1 sign "$E" -s "$SEC" -p "$PUB" -o "$O.mcache"
try "$mark" 1 pack -o "$O.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache" -s "$SEC"
try "$mark" 1 pack -o "$O.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache" -s "$SEC" --json

# 3. Arguments: an unknown command, and options getopt would complain of itself.
try "$mark" 1 "$evil"
try "$mark" 1 list "$E" "--$evil"
try "$mark" 1 verify "$E" -p "$PUB" "--json=$evil"
try "invalid option -- '\x1b'" 1 load "$E" -p "$PUB" "-$ESC"

# 4. A torch blob (SPEC.md section 10) whose one group's type carries an OSC 52
# sequence: CRC-32 of the rest (big-endian; gzip's trailer holds it little-endian),
# version 1, the type as a base64 string, one entry.
u64() { # a u64 below 256
	printf '\0\0\0\0\0\0\0'
	printf "\\$(printf '%03o' "$1")"
}
str() { # a torch str: its format argument, printf-expanded, in base64
	s=$(printf "$1" | base64 | tr -d '\n')
	u64 ${#s}
	printf '%s' "$s"
}
{ u64 1; str 'auto\033]52;c;cm0gLXJmIH4=\007tune'; u64 1; str k; u64 1; printf v; } > "$T/body"
set -- $(gzip -c < "$T/body" | tail -c 8 | head -c 4 | od -An -to1)
{ printf "\\$4\\$3\\$2\\$1"; cat "$T/body"; } > "$T/type.blob"
try "$mark" 1 pack -o "$T/out/p.mcache" --from-torch "$T/type.blob" -s "$SEC"
try "$mark" 1 pack -o "$T/out/p.mcache" --from-torch "$T/type.blob" -s "$SEC" --json
finish
