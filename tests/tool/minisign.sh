# minisign.sh - interop with stock minisign in both directions: minisign verifies the
# manifest signature of a bundle, and keys made by minisign -G -W sign and verify
# bundles; megacache keys sign files that minisign verifies.
. "$(dirname "$0")/lib.sh"
if [ -z "${MINISIGN:-}" ] || ! command -v "$MINISIGN" >/dev/null; then
	echo "minisign is not installed; the interop test needs it"
	exit 1
fi
export SOURCE_DATE_EPOCH=1700000000

# 1. A megacache bundle's manifest signature, checked by minisign.
run 0 "" keygen -q -W -p "$T/mc.pub" -s "$T/mc.key"
run 0 "" pack -q -o "$T/b.mcache" -s "$T/mc.key" --from-torch "$DATA/mlp-cuda.megacache"
mkdir -p "$T/x"
tar -xf "$T/b.mcache" -C "$T/x"
id=$(sed -n '1s/.*public key //p' "$T/mc.pub")
sig="$T/x/signatures/$id.minisig"
[ -f "$sig" ] && ok || bad "no signature member signatures/$id.minisig"
check "minisign verifies the manifest signature" \
	"$MINISIGN" -q -V -p "$T/mc.pub" -m "$T/x/manifest.json" -x "$sig"
echo ' ' >> "$T/x/manifest.json"
"$MINISIGN" -q -V -p "$T/mc.pub" -m "$T/x/manifest.json" -x "$sig" 2>/dev/null \
	&& bad "minisign accepted a changed manifest" || ok

# 2. Keys made by minisign work with megacache.
"$MINISIGN" -G -W -p "$T/ms.pub" -s "$T/ms.key" >/dev/null 2>&1 || bad "minisign -G -W failed"
run 0 "" pack -q -o "$T/m.mcache" -s "$T/ms.key" --from-torch "$DATA/mlp-cpu-pgo.megacache"
run 0 "OK" verify "$T/m.mcache" -p "$T/ms.pub"
run 0 "" verify "$T/m.mcache" -p "$(sed -n 2p "$T/ms.pub")"
run 1 "no signature by a trusted key" verify "$T/m.mcache" -p "$T/mc.pub"

# 3. A megacache secret key signs a file with minisign; minisign and the key agree.
echo "payload" > "$T/f"
check "minisign signs with a megacache key" "$MINISIGN" -S -s "$T/mc.key" -m "$T/f" -x "$T/f.sig"
check "minisign verifies it with the megacache public key" "$MINISIGN" -q -V -p "$T/mc.pub" -m "$T/f" -x "$T/f.sig"

# 4. Encrypted keys: megacache's, with a password file.
printf 'correct horse\n' > "$T/pw"
printf 'wrong\n' > "$T/pw-bad"
run 0 "" keygen -q -p "$T/enc.pub" -s "$T/enc.key" --password-file "$T/pw"
grep -q '^RWRTY' "$T/enc.key" && ok || bad "encrypted key does not record the scrypt algorithm"
run 0 "" pack -q -o "$T/e.mcache" -s "$T/enc.key" --password-file "$T/pw" --from-torch "$DATA/mlp-cuda.megacache"
run 0 "OK" verify "$T/e.mcache" -p "$T/enc.pub"
run 2 "wrong password" pack -o "$T/e2.mcache" -s "$T/enc.key" --password-file "$T/pw-bad" --from-torch "$DATA/mlp-cuda.megacache"
[ ! -e "$T/e2.mcache" ] && ok || bad "a failed pack left a bundle"
run 2 "file exists" keygen -W -p "$T/mc.pub" -s "$T/new.key"

# 5. The longest trusted comment megacache reads, 8,173 bytes, verifies with minisign; one
# byte more does not fit minisign's line buffer (megacache refuses it too: vectors.sh).
for n in 8173 8174; do
	mkdir -p "$T/c$n"
	tar -xf "$MC_SRCDIR/format/vectors/sig-comment-$n.mcache" -C "$T/c$n" manifest.json signatures/
done
check "minisign verifies a trusted comment of 8,173 bytes" "$MINISIGN" -q -V -p "$KEYS/test.pub" \
	-m "$T/c8173/manifest.json" -x "$T/c8173/signatures/FA362A8E2758DAEC.minisig"
"$MINISIGN" -q -V -p "$KEYS/test.pub" -m "$T/c8174/manifest.json" \
	-x "$T/c8174/signatures/FA362A8E2758DAEC.minisig" 2>"$T/err" && bad "minisign read 8,174 bytes" ||
	{ grep -q "Trusted comment too long" "$T/err" && ok || bad "minisign: $(cat "$T/err")"; }
finish
