# trust.sh - no silent loss of trust: export hands torch a blob it unpickles only from a
# verified bundle (or with --insecure-no-verify).
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
run 0 "" sign -q "$T/two.mcache" -s "$KEYS/test2.key"
ID1=$(sed -n 's/^untrusted comment: minisign public key \([0-9A-F]*\).*/\1/p' "$PUB")
ID2=$(sed -n 's/^untrusted comment: minisign public key \([0-9A-F]*\).*/\1/p' "$KEYS/test2.pub")
[ -n "$ID1" ] && [ -n "$ID2" ] && ok || bad "no key ids in the public keys"
run 0 "1 trusted signature ($ID1), 1 by a key not trusted ($ID2))" verify "$T/two.mcache" -p "$PUB"
run 0 "2 trusted signatures (" verify "$T/two.mcache" -p "$PUB" -p "$KEYS/test2.pub"
grep -qF "not trusted" "$T/out" && bad "all trusted, yet: $(cat "$T/out")" || ok
run 0 "2 signatures not checked" verify "$T/two.mcache" --insecure-no-verify
run 0 "" verify "$T/two.mcache" -p "$PUB" --json
/usr/bin/python3 - "$T/out" "$ID1" "$ID2" <<'PY' && ok || bad "verify --json signers: $(cat "$T/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["trusted_signers"] == [sys.argv[2]], j
assert j["untrusted_signers"] == [sys.argv[3]], j
assert j["signatures_checked"] is True, j
PY

finish
