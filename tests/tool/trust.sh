# trust.sh - no silent loss of trust: export hands torch a blob it unpickles only from a
# verified bundle (or with --insecure-no-verify); verify names the trusted signers and the
# others; merge keeps its inputs' bundle version and does not drop their signatures
# unasked.
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
export SOURCE_DATE_EPOCH=1700000000
BLOB="$DATA/mlp-cuda.megacache"

run 0 "" pack -q -o "$T/a.mcache" -s "$SEC" --from-torch "$BLOB"

# 1. export without -p is refused, writing nothing; --insecure-no-verify exports and warns.
run 2 "torch unpickles the blob" export "$T/a.mcache" --torch "$T/x.blob"
grep -qF -- "--insecure-no-verify" "$T/err" && ok || bad "the refusal does not name the opt-out: $(cat "$T/err")"
[ "$(grep -c "^megacache:" "$T/err")" = 1 ] && ok || bad "the refusal is not one message: $(cat "$T/err")"
[ ! -e "$T/x.blob" ] && ok || bad "a refused export wrote its blob"
run 2 "do not go together" export "$T/a.mcache" --torch "$T/x.blob" -p "$PUB" --insecure-no-verify
run 0 "exported" export "$T/a.mcache" --torch "$T/x.blob" --insecure-no-verify
grep -qF "signatures were not checked" "$T/err" && ok || bad "an unchecked export does not warn"
check "the unchecked export gives the blob back" cmp -s "$T/x.blob" "$BLOB"
run 0 "exported" export "$T/a.mcache" --torch "$T/y.blob" -p "$PUB"
[ ! -s "$T/err" ] && ok || bad "a verified export warns: $(cat "$T/err")"
run 1 "no signature by a trusted key" export "$T/a.mcache" --torch "$T/z.blob" -p "$KEYS/test2.pub"

# 2. verify tells trusted signatures from the others, in text and JSON.
cp "$T/a.mcache" "$T/two.mcache"
run 0 "" sign -q "$T/two.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub"
ID1=$(key_id "$PUB")
ID2=$(key_id "$KEYS/test2.pub")
[ -n "$ID1" ] && [ -n "$ID2" ] && ok || bad "no key ids in the public keys"
run 0 "1 signature verified ($ID1), 1 not checked: key not trusted ($ID2), created " verify "$T/two.mcache" -p "$PUB"
run 0 "2 signatures verified (" verify "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub"
# A key's whole text, as a CI variable holds it, is a key too.
run 0 "1 signature verified ($ID1), 1 not checked" verify "$T/two.mcache" -p "$(cat "$PUB")"
run 0 "2 signatures verified (" verify "$T/two.mcache" -p "$(cat "$PUB")" -p "$(sed -n 2p "$KEYS/test2.pub")"
run 2 "public key text: not a minisign Ed25519 public key" verify "$T/two.mcache" \
	-p "$(sed 's/^RW./RW!/' "$PUB")"
grep -qF "not trusted" "$T/out" && bad "all trusted, yet: $(cat "$T/out")" || ok
run 0 "2 signatures not checked" verify "$T/two.mcache" --insecure-no-verify
run 0 "" verify "$T/two.mcache" -p "$PUB" --json
/usr/bin/python3 - "$T/out" "$ID1" "$ID2" <<'PY' && ok || bad "verify --json signers: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["trusted_signers"] == [sys.argv[2]], j
assert j["untrusted_signers"] == [sys.argv[3]], j
assert j["signatures_checked"] is True, j
assert sorted(j["signatures"], key=str) == sorted([{"key_id": sys.argv[2], "state": "verified"},
                           {"key_id": sys.argv[3], "state": "not_checked"}], key=str), j
PY
# A signature by a trusted key that does not verify is broken: verify and load fail and
# say which, list tells all three states apart, without refusing anything.
cp "$T/two.mcache" "$T/broken.mcache"
/usr/bin/python3 - "$T/broken.mcache" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.index(b'"created":')  # a byte of the signed manifest, the JSON kept valid
d[i + 11] = ord("9") if d[i + 11] != ord("9") else ord("8")
open(sys.argv[1], "wb").write(bytes(d))
PY
run 1 "the signature by trusted key $ID1 does not verify" verify "$T/broken.mcache" -p "$PUB"
grep -qxF "  signature by key $ID1: broken: it does not verify under the trusted key" "$T/err" &&
	grep -qxF "  signature by key $ID2: not checked: key not trusted" "$T/err" && ok ||
	bad "verify of a broken signature does not tell each signature: $(cat "$T/err")"
run 1 "does not verify" load "$T/broken.mcache" -p "$PUB" --cache-dir "$T/lb" --dry-run
grep -qxF "  signature by key $ID1: broken: it does not verify under the trusted key" "$T/err" && ok ||
	bad "load of a broken signature does not say which: $(cat "$T/err")"
run 0 "signature by key $ID1: broken: it does not verify under the trusted key" list "$T/broken.mcache" -p "$PUB"
grep -qxF "signature by key $ID2: not checked: key not trusted" "$T/out" && ok ||
	bad "list -p: $(cat "$T/out")"
run 0 "signature by key $ID1: not checked: no key given" list "$T/broken.mcache"
run 0 "signature by key $ID1: verified" list "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub"
grep -qxF "signature by key $ID2: verified" "$T/out" && ok || bad "list -p of two keys: $(cat "$T/out")"

# 3. merge: the highest input version is kept unless --bundle-version; signed with -s;
# signed inputs make no unsigned bundle unless --unsigned.
version() { # version BUNDLE: its bundle version, as verify --json reports it
	"$MEGACACHE" verify "$1" --insecure-no-verify --json |
		/usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["bundle_version"])'
}
run 0 "" pack -q -o "$T/v42.mcache" -s "$SEC" --bundle-version 42 --from-torch "$BLOB"
run 0 "" pack -q -o "$T/v40.mcache" -s "$SEC" --bundle-version 40 \
	--from-torch "$DATA/mlp-cuda-precompile.megacache"
run 0 "merged 2 bundles" merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" "$T/v40.mcache" "$T/v42.mcache"
[ "$(version "$T/m.mcache")" = 42 ] && ok || bad "merge wrote version $(version "$T/m.mcache"), not 42"
run 0 "1 signature verified ($ID1), created " verify "$T/m.mcache" -p "$PUB" --min-version 42
run 0 "" merge -q -o "$T/m7.mcache" -p "$PUB" -s "$SEC" --bundle-version 7 "$T/v42.mcache"
[ "$(version "$T/m7.mcache")" = 7 ] && ok || bad "--bundle-version 7 wrote $(version "$T/m7.mcache")"
run 2 "is signed, and the merged bundle would not be" merge -o "$T/u.mcache" -p "$PUB" \
	"$T/v40.mcache" "$T/v42.mcache"
grep -qF -- "-s SECFILE" "$T/err" && grep -qF -- "--unsigned" "$T/err" && ok ||
	bad "the refusal does not say what to do: $(cat "$T/err")"
[ "$(wc -l < "$T/err")" = 1 ] && ok || bad "the refusal is not one line: $(cat "$T/err")"
[ ! -e "$T/u.mcache" ] && ok || bad "a refused merge wrote its bundle"
[ -z "$(find "$T" -maxdepth 1 -name '.megacache-merge-*')" ] && ok || bad "a refused merge left temp folders"
run 0 "merged 2 bundles" merge -o "$T/u.mcache" -p "$PUB" --unsigned "$T/v40.mcache" "$T/v42.mcache"
grep -qF "warning: writing an unsigned bundle" "$T/err" && ok || bad "an unsigned merge does not warn"
run 1 "not signed" verify "$T/u.mcache" -p "$PUB"
[ "$(version "$T/u.mcache")" = 42 ] && ok || bad "the unsigned merge wrote version $(version "$T/u.mcache")"
run 2 "do not go together" merge -o "$T/x.mcache" -p "$PUB" -s "$SEC" --unsigned "$T/v42.mcache"
# Unsigned inputs merge into an unsigned bundle without --unsigned, with the warning.
run 0 "" pack -q -o "$T/plain.mcache" --from-torch "$BLOB"
run 0 "merged 1 bundles" merge -o "$T/p.mcache" --insecure-no-verify "$T/plain.mcache"
grep -qF "warning: writing an unsigned bundle" "$T/err" && ok || bad "an unsigned merge does not warn"

# 4. pack and save without -s warn on stderr (not under -q) and say "signed": false in JSON.
run 0 "packed" pack -o "$T/p1.mcache" --from-torch "$BLOB"
grep -qF "warning: writing an unsigned bundle: loads will need --insecure-no-verify" "$T/err" &&
	ok || bad "an unsigned pack does not warn: $(cat "$T/err")"
run 0 "" pack -q -o "$T/p2.mcache" --from-torch "$BLOB"
[ ! -s "$T/err" ] && ok || bad "pack -q warns: $(cat "$T/err")"
run 0 "" pack -o "$T/p3.mcache" --from-torch "$BLOB" --json
/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["signed"] is False' \
	"$T/out" && ok || bad "pack --json of an unsigned bundle: $(cat "$T/out")"
grep -qF "warning: writing an unsigned bundle" "$T/err" && ok || bad "pack --json does not warn"
run 0 "" pack -o "$T/p4.mcache" -s "$SEC" --from-torch "$BLOB" --json
/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["signed"] is True' \
	"$T/out" && ok || bad "pack --json of a signed bundle: $(cat "$T/out")"
[ ! -s "$T/err" ] && ok || bad "a signed pack warns: $(cat "$T/err")"
mkdir -p "$T/cache" "$T/triton"
tar -xzf "$DATA/mlp-cpu-cachedir.tar.gz" -C "$T"
C=$(find "$T" -maxdepth 1 -name 'cache_*' | head -n 1)
run 0 "saved" save -o "$T/s1.mcache" --cache-dir "$C" --triton-dir "$T/triton"
grep -qF "warning: writing an unsigned bundle" "$T/err" && ok || bad "an unsigned save does not warn"
run 0 "" save -o "$T/s2.mcache" --cache-dir "$C" --triton-dir "$T/triton" --json
/usr/bin/python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["signed"] is False' \
	"$T/out" && ok || bad "save --json of an unsigned bundle: $(cat "$T/out")"
run 0 "" save -o "$T/s3.mcache" --cache-dir "$C" --triton-dir "$T/triton" -s "$SEC"
[ ! -s "$T/err" ] && ok || bad "a signed save warns: $(cat "$T/err")"
# run --save-to without -s: the warning before the command runs, and its bundle unsigned
run 0 "" run --save-to "$T/r1.mcache" --cache-dir "$T/rc" --triton-dir "$T/triton" -- \
	sh -c 'echo ran >&2; mkdir -p "$0/zz" && echo "print(1)" > "$0/zz/ctrustnew.py"' "$T/rc"
[ "$(sed -n 1p "$T/err" | grep -c "warning: $T/r1.mcache will be unsigned: loads will need --insecure-no-verify")" = 1 ] &&
	grep -qx ran "$T/err" && ok || bad "an unsigned run --save-to does not warn first: $(cat "$T/err")"
run 1 "" verify "$T/r1.mcache" -p "$PUB"
run 0 "" save -o "$T/s4.mcache" --cache-dir "$C" --triton-dir "$T/triton" --dry-run
[ ! -s "$T/err" ] && ok || bad "a dry run warns: $(cat "$T/err")"

# 5. Outputs are written through a symbolic link, and keep the mode of the file replaced.
mkdir -p "$T/real" "$T/links"
cp "$T/a.mcache" "$T/real/b.mcache"
ln -s ../real/b.mcache "$T/links/b.mcache"
run 0 "" sign -q "$T/links/b.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub"
[ -L "$T/links/b.mcache" ] && ok || bad "sign in place replaced the symbolic link with a file"
run 0 "2 signatures verified" verify "$T/real/b.mcache" -p "$PUB" -p "$KEYS/test2.pub"
[ -z "$(find "$T/real" "$T/links" -name '*.tmp')" ] && ok || bad "a temp file was left"
cp "$T/a.mcache" "$T/m600.mcache"
chmod 0600 "$T/m600.mcache"
run 0 "" sign -q "$T/m600.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub"
[ "$(stat -c %a "$T/m600.mcache")" = 600 ] && ok ||
	bad "sign made a 0600 bundle $(stat -c %a "$T/m600.mcache")"
printf 'old\n' > "$T/m640.mcache"
chmod 0640 "$T/m640.mcache"
run 0 "" pack -q -o "$T/m640.mcache" -s "$SEC" --from-torch "$BLOB"
[ "$(stat -c %a "$T/m640.mcache")" = 640 ] && ok ||
	bad "pack -o over a 0640 file left it $(stat -c %a "$T/m640.mcache")"
run 0 "OK" verify "$T/m640.mcache" -p "$PUB"
# A dangling link: the bundle is made where it points, and the link stays.
ln -s ../real/new.mcache "$T/links/new.mcache"
run 0 "" pack -q -o "$T/links/new.mcache" -s "$SEC" --from-torch "$BLOB"
[ -L "$T/links/new.mcache" ] && [ -f "$T/real/new.mcache" ] && ok ||
	bad "pack -o through a dangling link: $(ls -l "$T/links" "$T/real")"
# merge -o, sign -o and export --torch through links; export keeps a 0600 blob's mode.
ln -s ../real/m.mcache "$T/links/m.mcache"
run 0 "" merge -q -o "$T/links/m.mcache" -p "$PUB" -s "$SEC" "$T/a.mcache"
[ -L "$T/links/m.mcache" ] && [ -f "$T/real/m.mcache" ] && ok || bad "merge -o replaced the link"
ln -s ../real/s.mcache "$T/links/s.mcache"
run 0 "" sign -q "$T/a.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub" -o "$T/links/s.mcache"
[ -L "$T/links/s.mcache" ] && [ -f "$T/real/s.mcache" ] && ok || bad "sign -o replaced the link"
printf 'old\n' > "$T/real/t.blob"
chmod 0600 "$T/real/t.blob"
ln -s ../real/t.blob "$T/links/t.blob"
run 0 "" export -q "$T/a.mcache" --torch "$T/links/t.blob" -p "$PUB"
[ -L "$T/links/t.blob" ] && cmp -s "$T/real/t.blob" "$BLOB" && ok || bad "export --torch replaced the link"
[ "$(stat -c %a "$T/real/t.blob")" = 600 ] && ok || bad "export made a 0600 blob $(stat -c %a "$T/real/t.blob")"
# Run as root, the file replaced keeps its owner.
if [ "$(id -u)" = 0 ]; then
	cp "$T/a.mcache" "$T/owned.mcache"
	chown 65534:65534 "$T/owned.mcache"
	run 0 "" sign -q "$T/owned.mcache" -s "$KEYS/test2.key" -p "$KEYS/test.pub"
	[ "$(stat -c %u:%g "$T/owned.mcache")" = 65534:65534 ] && ok ||
		bad "sign as root gave the bundle to $(stat -c %u:%g "$T/owned.mcache")"
	# A link another user left in a shared folder (sticky, writable by all, as /tmp) is
	# not written through: it could aim the output at any file of root's.
	mkdir -p "$T/shared"
	chmod 1777 "$T/shared"
	echo "root's file" >"$T/victim"
	setpriv --reuid=65534 --regid=65534 --clear-groups ln -s "$T/victim" "$T/shared/out.mcache"
	run 2 "$T/shared/out.mcache: a symbolic link another user owns in a shared folder; refusing" \
		pack -q -o "$T/shared/out.mcache" -s "$KEYS/test.key" --from-torch "$BLOB"
	[ "$(cat "$T/victim")" = "root's file" ] && [ -L "$T/shared/out.mcache" ] && ok ||
		bad "pack wrote through another user's link in a shared folder"
	# One of root's own there is followed.
	ln -s "$T/real/own.mcache" "$T/shared/mine.mcache"
	run 0 "" pack -q -o "$T/shared/mine.mcache" -s "$KEYS/test.key" --from-torch "$BLOB"
	[ -L "$T/shared/mine.mcache" ] && [ -f "$T/real/own.mcache" ] && ok ||
		bad "pack did not write through root's own link in a shared folder"
fi

finish
