# pipes.sh - bundles through pipes: `load -`, `verify -`, `list -`, /dev/stdin and
# /dev/fd/N read a bundle from a pipe with every promise of a file (signatures before
# any object, each object checked, all or nothing, memory bounded); `pack -o -`, `save
# -o -` and `export --torch -` write to standard output; a cut stream gets one message
# and exit 1 wherever it was cut, and leaves nothing; terminals are refused.
. "$(dirname "$0")/lib.sh"
export SOURCE_DATE_EPOCH=1700000000 # bundles written twice compare byte for byte
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
SRC="$T/src/$(ls "$T/src")"
run 0 "" keygen -q -W -p "$T/k.pub" -s "$T/k.key"
run 0 "" keygen -q -W -p "$T/other.pub" -s "$T/other.key"
run 0 "" pack -q -o "$T/b.mcache" -s "$T/k.key" --from-dir "$SRC"
B="$T/b.mcache"
SIZE=$(stat -c %s "$B")
same_tree() { [ "$(tree_sum "$1")" = "$(tree_sum "$2")" ]; }

# pipe IN... : runs megacache with standard input from the shell command IN, like run.
pipe() {
	want=$1; text=$2; in=$3; shift 3
	sh -c "$in" | "$MEGACACHE" "$@" >"$T/out" 2>"$T/err"
	got=$?
	where="$T/err"
	[ "$want" = 0 ] && where="$T/out"
	if [ "$got" != "$want" ]; then
		bad "$in | megacache $* exited $got, expected $want: $(head -c 400 "$T/err")"
	elif [ -n "$text" ] && ! grep -qF -- "$text" "$where"; then
		bad "$in | megacache $*: output lacks '$text': $(head -c 400 "$where")"
	else
		ok
	fi
}

# ---- reading from a pipe gives what reading the file gives ----
run 0 "" load -q "$B" -p "$T/k.pub" --cache-dir "$T/from-file"
pipe 0 "warmed standard input into $T/from-pipe" "cat '$B'" load - -p "$T/k.pub" --cache-dir "$T/from-pipe"
check "a load from a pipe installs what a load from the file does" same_tree "$T/from-file" "$T/from-pipe"
check "and what the cache held" test "$(src_sum "$SRC")" = "$(tree_sum "$T/from-pipe")"
pipe 0 '"installed":' "cat '$B'" load - -p "$T/k.pub" --cache-dir "$T/json" --json
pipe 0 "standard input: OK (154 artifacts" "cat '$B'" verify - -p "$T/k.pub"
pipe 0 "bundle standard input (format 2" "cat '$B'" list -
pipe 0 '"artifacts":' "cat '$B'" list - --json
pipe 0 "exported standard input" "cat '$B'" export - -p "$T/k.pub" --torch "$T/pipe.blob"
run 0 "" export -q "$B" -p "$T/k.pub" --torch "$T/file.blob"
check "export from a pipe writes the blob export from the file writes" cmp -s "$T/pipe.blob" "$T/file.blob"
# Named pipes and descriptors: /dev/stdin, /dev/fd/N (what <(...) gives), a FIFO.
run 0 "OK" verify /dev/stdin -p "$T/k.pub" <"$B"
cat "$B" | "$MEGACACHE" verify /dev/stdin -p "$T/k.pub" >"$T/out" 2>&1 &&
	grep -qF "/dev/stdin: OK" "$T/out" && ok || bad "verify /dev/stdin on a pipe: $(cat "$T/out")"
bash -c '"$1" load -q <(cat "$2") -p "$3" --cache-dir "$4"' _ "$MEGACACHE" "$B" "$T/k.pub" "$T/subst" &&
	same_tree "$T/from-file" "$T/subst" && ok || bad "load <(cat BUNDLE) failed"
mkfifo "$T/fifo"
cat "$B" >"$T/fifo" &
run 0 "$T/fifo: OK" verify "$T/fifo" -p "$T/k.pub"
# A writer already waiting at the FIFO, with a bundle small enough to fit the pipe: it
# writes all and leaves at once; what it wrote is read, no second writer awaited.
SMALL="$MC_SRCDIR/format/vectors/valid-signed.mcache"
cat "$SMALL" >"$T/fifo" &
sleep 1
timeout 10 "$MEGACACHE" verify "$T/fifo" -p "$KEYS/test.pub" >"$T/out" 2>"$T/err"
got=$?
[ "$got" = 0 ] && ok || bad "a small bundle from a FIFO whose writer came first: exit $got: $(cat "$T/err")"
wait
wait

# ---- writing to standard output ----
"$MEGACACHE" pack -o - -s "$T/k.key" --from-dir "$SRC" >"$T/stdout.mcache" 2>"$T/err"
[ $? = 0 ] && ok || bad "pack -o - failed: $(cat "$T/err")"
check "pack -o - writes the bytes pack -o FILE writes" cmp -s "$T/stdout.mcache" "$B"
check "pack -o - reports on standard error" grep -qF "into standard output" "$T/err"
"$MEGACACHE" pack -q -o - -s "$T/k.key" --from-dir "$SRC" |
	"$MEGACACHE" load -q - -p "$T/k.pub" --cache-dir "$T/chain" && same_tree "$T/from-file" "$T/chain" &&
	ok || bad "pack -o - | load - did not install the cache"
TORCHINDUCTOR_CACHE_DIR="$SRC" TRITON_CACHE_DIR="$T/no-triton" \
	"$MEGACACHE" save -q -o - -s "$T/k.key" >"$T/saved-stdout.mcache" 2>"$T/err"
[ $? = 0 ] && ok || bad "save -o - failed: $(cat "$T/err")"
TORCHINDUCTOR_CACHE_DIR="$SRC" TRITON_CACHE_DIR="$T/no-triton" \
	run 0 "" save -q -o "$T/saved.mcache" -s "$T/k.key"
check "save -o - writes the bytes save -o FILE writes" cmp -s "$T/saved-stdout.mcache" "$T/saved.mcache"
"$MEGACACHE" export -q "$B" -p "$T/k.pub" --torch - >"$T/stdout.blob" 2>"$T/err"
[ $? = 0 ] && ok || bad "export --torch - failed: $(cat "$T/err")"
check "export --torch - writes the blob export --torch FILE writes" cmp -s "$T/stdout.blob" "$T/file.blob"
run 2 "--json cannot be used when a bundle goes to standard output" \
	pack -o - --json -s "$T/k.key" --from-dir "$SRC"

# ---- terminals are refused: one line, exit 2, nothing read or written ----
if command -v script >/dev/null 2>&1; then
	script -qec "'$MEGACACHE' pack -o - -s '$T/k.key' --from-dir '$SRC'" /dev/null >"$T/tty" 2>&1
	[ $? = 2 ] && grep -qF "refusing to write a bundle to a terminal" "$T/tty" && ok ||
		bad "pack -o - on a terminal: $(cat "$T/tty")"
	script -qec "'$MEGACACHE' export '$B' --torch - -p '$T/k.pub'" /dev/null >"$T/tty" 2>&1
	[ $? = 2 ] && grep -qF "refusing to write a torch blob to a terminal" "$T/tty" && ok ||
		bad "export --torch - on a terminal: $(cat "$T/tty")"
	script -qec "'$MEGACACHE' load - -p '$T/k.pub' --cache-dir '$T/tty-load'" /dev/null >"$T/tty" 2>&1
	[ $? = 2 ] && grep -qF "standard input: is a terminal" "$T/tty" && [ ! -e "$T/tty-load" ] && ok ||
		bad "load - on a terminal: $(cat "$T/tty")"
else
	bad "script(1) is missing: terminals not tested"
fi

# ---- a stream cut short: one message, exit 1, nothing installed or left staged ----
# The cut points: in the first header, in the manifest, in the signature, in the index,
# in a block, in the end blocks, one byte short. Until the index is read the bundle's size
# is known only as at least what its members so far imply.
mlen=$(dd if="$B" bs=1 skip=124 count=11 2>/dev/null)
mlen=$((0$mlen))
sigat=$((512 + (mlen + 511) / 512 * 512))
ilen=$(dd if="$B" bs=1 skip=$((sigat + 1024 + 124)) count=11 2>/dev/null)
ilen=$((0$ilen))
blocksat=$((sigat + 1536 + (ilen + 511) / 512 * 512))
mkdir -p "$T/warm"
echo "kept" >"$T/warm/mine"
for cut in 100 700 $((sigat + 600)) $((sigat + 2048 + 700)) 200000 $((SIZE - 600)) $((SIZE - 1)); do
	head -c "$cut" "$B" >"$T/cut.mcache"
	if [ "$cut" -lt "$blocksat" ]; then
		says="truncated at byte $cut of a bundle that declares at least"
	else
		says="truncated at byte $cut of a bundle that declares $SIZE bytes; download it again"
	fi
	pipe 1 "standard input: $says" "cat '$T/cut.mcache'" load - -p "$T/k.pub" --cache-dir "$T/warm"
	check "a stream cut at byte $cut left nothing" test "$(ls -A "$T/warm")" = mine
	run 1 "$T/cut.mcache: $says" load "$T/cut.mcache" -p "$T/k.pub" --cache-dir "$T/warm"
	check "a file cut at byte $cut left nothing" test "$(ls -A "$T/warm")" = mine
	pipe 1 "$says" "cat '$T/cut.mcache'" verify - -p "$T/k.pub"
done
pipe 1 "data after the end of the archive" "cat '$B'; echo x" load - -p "$T/k.pub" --cache-dir "$T/warm"
check "a stream with bytes after its end left nothing" test "$(ls -A "$T/warm")" = mine

# ---- a pipe that is not a bundle ----
pipe 2 "standard input: not a megacache bundle" "echo hello" load - -p "$T/k.pub" --cache-dir "$T/warm"
pipe 2 "standard input: empty; not a megacache bundle" "true" load - -p "$T/k.pub" --cache-dir "$T/warm"
check "no input installed nothing" test "$(ls -A "$T/warm")" = mine

# ---- checked before anything is staged, and as it streams ----
# Signatures and policy come before any object: with an untrusted key the load fails
# while the stream still has only its head and is held open.
# The head: the manifest, the signature (one block of text), the first object's header.
head -c $((sigat + 1536)) "$B" >"$T/head"
{ cat "$T/head"; sleep 6; } | {
	timeout 5 "$MEGACACHE" load - -p "$T/other.pub" --cache-dir "$T/warm" >"$T/out" 2>"$T/err"
	echo $? >"$T/rc"
}
got=$(cat "$T/rc")
[ "$got" = 1 ] && grep -qF "no signature by a trusted key" "$T/err" && ok ||
	bad "an untrusted stream held open after its head: exit $got (124: still reading): $(cat "$T/err")"
check "and installed nothing" test "$(ls -A "$T/warm")" = mine
# One flipped byte in the last object's content: every object before it has streamed
# (and been staged); nothing is committed.
cp "$B" "$T/flip.mcache"
at=$(/usr/bin/python3 -c 'import sys, tarfile
print(tarfile.open(sys.argv[1]).getmembers()[-1].offset_data + 10)' "$B")
printf '\377' | dd of="$T/flip.mcache" bs=1 seek="$at" conv=notrunc 2>/dev/null
cmp -s "$B" "$T/flip.mcache" && bad "the flip changed nothing" || ok
pipe 1 "do not match their hash" "cat '$T/flip.mcache'" load - -p "$T/k.pub" --cache-dir "$T/warm"
check "a stream with a bad object installed nothing" test "$(ls -A "$T/warm")" = mine
rm -rf "$T/warm"
pipe 1 "do not match their hash" "cat '$T/flip.mcache'" load - -p "$T/k.pub" --cache-dir "$T/warm"
check "and made no folder" test ! -e "$T/warm"

# ---- one pass only ----
pipe 2 "sign reads the bundle twice" "cat '$B'" sign - -s "$T/other.key"
pipe 2 "standard input (-) can be only one" "cat '$B'" diff - -

# ---- memory stays bounded: 160 MB through a pipe under a 100 MB address-space cap ----
if [ -z "${MC_SANITIZED:-}" ]; then
	mkdir -p "$T/big/dynamo"
	head -c 160000000 /dev/urandom >"$T/big/dynamo/code_state_noise_0_.pkl"
	run 0 "" pack -q -o "$T/big.mcache" -s "$T/k.key" --from-dir "$T/big"
	cat "$T/big.mcache" | sh -c 'ulimit -v 100000; exec "$@"' _ \
		"$MEGACACHE" load -q - -p "$T/k.pub" --cache-dir "$T/big-out" 2>"$T/err"
	[ $? = 0 ] && ok || bad "a 160 MB stream under a 100 MB cap: $(cat "$T/err")"
	check "the 160 MB stream installed byte for byte" \
		cmp -s "$T/big/dynamo/code_state_noise_0_.pkl" "$T/big-out/dynamo/code_state_noise_0_.pkl"
	sh -c 'ulimit -v 100000; dd if=/dev/zero bs=160M count=1 of=/dev/null' 2>/dev/null &&
		bad "ulimit -v did not limit memory" || ok
	rm -rf "$T/big" "$T/big-out" "$T/big.mcache"
fi
# A file cut short fails list and diff too (their tables read, not its contents), with
# the same line, exit 1, in both format versions; whole ones pass.
run 0 "" pack -q -o "$T/b1.mcache" -s "$T/k.key" --from-dir "$SRC" --format-version 1
for f in "$B" "$T/b1.mcache"; do
	sz=$(stat -c %s "$f")
	head -c $((sz / 2)) "$f" >"$T/half.mcache"
	says="truncated at byte $((sz / 2)) of a bundle that declares $sz bytes; download it again"
	run 1 "$says" list "$T/half.mcache"
	run 1 "$says" diff "$T/half.mcache" "$f"
	run 1 "$says" diff "$f" "$T/half.mcache"
	run 0 "" list "$f"
	run 0 "0 added, 0 removed, 0 changed" diff "$f" "$f"
done

finish
