# modes.sh - a bundle keeps the owner's execute bit of each file it records and nothing
# else of its mode (SPEC.md section 3.2); a load creates files with 0666, or 0777 when
# executable, and folders with 0777, less the umask (section 6). Bundles made before the
# bit load as not executable; its refused forms fail with exit status 1.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
V="$MC_SRCDIR/format/vectors"
unset TRITON_CACHE_DIR TRITON_HOME
H=VTAVU5NVGPUS2EEVSN5YOQWW4UFVBQ6S7FGQEU5QNIQFJ3KQL6GQ

# A cache dir: a Triton kernel with a launcher .so (0755), its json (0644), a setuid file
# (04755) and a group-writable executable (0775); generated code beside it (0644).
S="$T/src"
K="$S/triton/0/$H"
mkdir -p "$K" "$S/ab"
printf '\177ELF launcher\n' > "$K/__triton_launcher.so"
printf '\177ELF utils\n' > "$K/cuda_utils.so"
printf '{"name": "k"}' > "$K/k.json"
printf 'setuid\n' > "$K/s.bin"
printf 'group\n' > "$K/g.bin"
printf 'print(1)\n' > "$S/ab/cxyz.py"
chmod 0755 "$K/__triton_launcher.so" "$K/cuda_utils.so"
chmod 0644 "$K/k.json" "$S/ab/cxyz.py"
chmod 04755 "$K/s.bin"
chmod 0775 "$K/g.bin"
[ "$(stat -c %a "$K/s.bin")" = 4755 ] && ok || bad "cannot make a setuid file here"
run 0 "" pack -q -o "$T/b.mcache" -s "$SEC" --from-dir "$S"

# list --json: the flag per artifact; plain list marks the executable ones.
run 0 "" list "$T/b.mcache" --json
"$MC_BUILDDIR/tests/jsoncheck" < "$T/out" && ok || bad "list --json is not JSON"
/usr/bin/python3 - "$T/out" > "$T/flags" <<'EOF'
import json, sys
for a in json.load(open(sys.argv[1]))["artifacts"]:
    print(a["key"].split("/")[-1], json.dumps(a["executable"]))
EOF
printf '%s\n' "cxyz.py false" "__triton_launcher.so true" "cuda_utils.so true" "g.bin true" \
	"k.json false" "s.bin true" > "$T/want"
cmp -s "$T/want" "$T/flags" && ok || bad "list --json flags: $(cat "$T/flags")"
run 0 "" list "$T/b.mcache"
[ "$(grep -c '(executable)$' "$T/out")" = 4 ] && ok || bad "list marks: $(cat "$T/out")"
grep -q 'cxyz.py$' "$T/out" && ok || bad "list marks a file that is not executable"

# modes DIR: every file and folder of DIR as "mode path", sorted.
modes() {
	(cd "$1" && find . -exec stat -c '%a %n' {} + | sort -k2)
}
# want FILE DIRMODE EXECMODE FILEMODE: the tree the load makes from b.mcache.
want() {
	{
		echo "$2 ."
		echo "$2 ./ab"
		echo "$4 ./ab/cxyz.py"
		echo "$2 ./triton"
		echo "$2 ./triton/0"
		echo "$2 ./triton/0/$H"
		echo "$3 ./triton/0/$H/__triton_launcher.so"
		echo "$3 ./triton/0/$H/cuda_utils.so"
		echo "$3 ./triton/0/$H/g.bin"
		echo "$4 ./triton/0/$H/k.json"
		echo "$3 ./triton/0/$H/s.bin"
	} | sort -k2 > "$1"
}
for m in "022 755 755 644" "002 775 775 664" "077 700 700 600" "027 750 750 640"; do
	set -- $m
	D="$T/c$1"
	(umask "$1" && "$MEGACACHE" load "$T/b.mcache" -p "$PUB" --cache-dir "$D" >"$T/out" 2>"$T/err") &&
		ok || bad "load under umask $1: $(cat "$T/err")"
	want "$T/want" "$2" "$3" "$4"
	modes "$D" > "$T/got"
	cmp -s "$T/want" "$T/got" && ok || bad "umask $1: $(diff "$T/want" "$T/got" | tr '\n' ' ')"
done

# A cache folder that does not exist yet is made whole in a private folder beside it and
# renamed once: in a set-group-ID parent it takes the parent's group and bit, as a folder
# made there does, and so do the folders in it.
G="$T/sgid"
mkdir "$G" && chmod 2775 "$G" && { chgrp 1 "$G" 2>/dev/null || :; } && mkdir "$G/ref"
(umask 022 && "$MEGACACHE" load -q "$T/b.mcache" -p "$PUB" --cache-dir "$G/cache" 2>"$T/err") &&
	ok || bad "load into a set-group-ID parent: $(cat "$T/err")"
[ "$(stat -c '%a %g' "$G/cache")" = "$(stat -c '%a %g' "$G/ref")" ] &&
	[ "$(stat -c '%a %g' "$G/cache/triton/0")" = "$(stat -c '%a %g' "$G/ref")" ] && ok ||
	bad "set-group-ID parent: the root $(stat -c '%a %g' "$G/cache"), a folder made there $(stat -c '%a %g' "$G/ref")"
[ "$(ls -A "$G" | tr '\n' ' ')" = "cache ref " ] && ok || bad "left beside the root: $(ls -A "$G")"
# Roots whose nesting their names do not tell plainly (a ".." in one) are made folder by
# folder, as into folders that exist.
P="$T/dots"
mkdir "$P"
(umask 022 && "$MEGACACHE" load -q "$T/b.mcache" -p "$PUB" --cache-dir "$P/cache" \
	--triton-dir "$P/cache/../triton" 2>"$T/err") && ok || bad "load with a '..' root: $(cat "$T/err")"
[ "$(ls -A "$P" | tr '\n' ' ')" = "cache triton " ] && [ -f "$P/triton/$H/k.json" ] && ok ||
	bad "load with a '..' root: $(cd "$P" && find . | sort | tr '\n' ' ')"

# An identical file whose execute bit differs is replaced; the others stay untouched.
D="$T/c022"
chmod 0644 "$D/triton/0/$H/cuda_utils.so"
chmod 0755 "$D/ab/cxyz.py"
touch -d 2001-01-01 "$D/triton/0/$H/k.json"
(umask 022 && "$MEGACACHE" load "$T/b.mcache" -p "$PUB" --cache-dir "$D" --json >"$T/out" 2>"$T/err") &&
	ok || bad "load again: $(cat "$T/err")"
"$MC_BUILDDIR/tests/jsoncheck" < "$T/out" && ok || bad "load --json is not JSON"
/usr/bin/python3 - "$T/out" > "$T/acts" <<'EOF'
import json, sys
for a in sorted(json.load(open(sys.argv[1]))["artifacts"], key=lambda a: a["key"]):
    print(a["key"].split("/")[-1], a["action"], json.dumps(a["executable"]))
EOF
printf '%s\n' "__triton_launcher.so unchanged true" "cuda_utils.so replaced true" \
	"g.bin unchanged true" "k.json unchanged false" "s.bin unchanged true" \
	"cxyz.py replaced false" | sort > "$T/want"
sort "$T/acts" > "$T/got"
cmp -s "$T/want" "$T/got" && ok || bad "load --json: $(tr '\n' ' ' < "$T/acts")"
want "$T/want" 755 755 644
modes "$D" > "$T/got"
cmp -s "$T/want" "$T/got" && ok || bad "after the reload: $(diff "$T/want" "$T/got" | tr '\n' ' ')"
[ -z "$(find "$D/triton/0/$H/k.json" -newermt 2002-01-01)" ] && ok || bad "an unchanged file was rewritten"

# The vector: one content, executable as the Triton .so only.
D="$T/vec"
(umask 002 && "$MEGACACHE" load "$V/valid-executable.mcache" -p "$PUB" --cache-dir "$D" >"$T/out" 2>"$T/err") &&
	ok || bad "valid-executable: $(cat "$T/err")"
printf '%s\n' "775 ." "775 ./bin" "664 ./bin/copy.so" "775 ./triton" "775 ./triton/0" \
	"775 ./triton/0/kern" "664 ./triton/0/kern/k.json" "775 ./triton/0/kern/k.so" | sort -k2 > "$T/want"
modes "$D" > "$T/got"
cmp -s "$T/want" "$T/got" && ok || bad "valid-executable: $(diff "$T/want" "$T/got" | tr '\n' ' ')"

# A bundle made before the bit: every file loads as not executable.
D="$T/old"
(umask 022 && "$MEGACACHE" load "$V/valid-signed.mcache" -p "$PUB" --cache-dir "$D" --json >"$T/out" 2>"$T/err") &&
	ok || bad "valid-signed: $(cat "$T/err")"
[ -n "$(find "$D" -type f)" ] && ok || bad "valid-signed installed nothing"
[ -z "$(find "$D" -type f ! -perm 0644)" ] && ok || bad "old bundle: $(modes "$D" | tr '\n' ' ')"
[ -z "$(find "$D" -type d ! -perm 0755)" ] && ok || bad "old bundle folders: $(modes "$D" | tr '\n' ' ')"
grep -q '"executable":	true' "$T/out" && bad "old bundle: load --json says executable" || ok
[ "$(grep -c '"executable":	false' "$T/out")" = 3 ] && ok || bad "old bundle: load --json: $(cat "$T/out")"

# The refused forms of the member.
run 1 "artifacts[0].executable is false (a writer leaves the member out instead)" \
	load "$V/manifest-executable-false.mcache" -p "$PUB" --cache-dir "$T/no1"
run 1 "artifacts[0].executable is not a boolean" \
	load "$V/manifest-executable-number.mcache" -p "$PUB" --cache-dir "$T/no2"
[ ! -e "$T/no1" ] && [ ! -e "$T/no2" ] && ok || bad "a refused bundle left files"
finish
