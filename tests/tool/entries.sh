# entries.sh - torch keeps one compiled entry per set of guards under one FX graph key
# and under one AOTAutograd key, and tries each: every entry comes back, byte for byte,
# through save -> load, pack --from-dir -> load and a torch blob (pack --from-torch,
# export, load); bundles that keyed an entry by torch's key alone still load, and compare
# equal to the new form (diff, merge, the drop-known step of run).
. "$(dirname "$0")/lib.sh"
PUB="$KEYS/test.pub"
SEC="$KEYS/test.key"
PY=/usr/bin/python3
export SOURCE_DATE_EPOCH=1700000000
VEC="$MC_SRCDIR/format/vectors"
FXK=fotplswjlgcwpirmz5wx3c4gqnemeggfl5ggjfy5fj5qy464qo4i
AOTK=a6evpaswaarnhf33j2qsuxec7uuoia36amih7yie4paqkd47g7sl

# A real cache dir, with a second entry under one FX graph key and under one AOTAutograd
# key: another key's entry, a real compiled graph, named (as torch names each entry)
# after its content's hash.
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
C="$T/src/cache_mlp_cold"
cp "$C"/fxgraph/ko/*/* "$C/fxgraph/ot/$FXK/"
cp "$C"/aotautograd/axw*/* "$C/aotautograd/$AOTK/"
[ "$(ls "$C/fxgraph/ot/$FXK" | wc -l)" = 2 ] && [ "$(ls "$C/aotautograd/$AOTK" | wc -l)" = 2 ] &&
	ok || bad "the cache dir lacks its two entries per key"

# Every file of a cache dir, with its bytes' hash; a Triton group file, whose absolute
# paths a load writes for where it lands, by its names only.
snapshot() {
	(cd "$1" && find . -type f | sort | while read -r f; do
		case "$f" in
		*/__grp__*.json) printf '%s group %s\n' "$f" \
			"$($PY -c 'import json,sys; print(sorted(json.load(open(sys.argv[1]))["child_paths"]))' "$f")" ;;
		*) printf '%s %s\n' "$f" "$(sha256sum <"$f" | cut -c1-64)" ;;
		esac
	done)
}
snapshot "$C" >"$T/want"

# save -> load (HOME: an empty Triton home, so the save reads the cache dir alone)
mkdir -p "$T/home"
HOME="$T/home" TORCHINDUCTOR_CACHE_DIR="$C" run 0 "" save -o "$T/save.mcache" -s "$SEC"
grep -q "recorded twice" "$T/err" && bad "save dropped an entry: $(cat "$T/err")" || ok
run 0 "" list "$T/save.mcache"
[ "$(grep -c "^inductor .* $FXK/" "$T/out")" = 2 ] && [ "$(grep -c "^aot_autograd .* $AOTK/" "$T/out")" = 2 ] &&
	ok || bad "save's bundle lacks an entry: $(grep -E '^(inductor|aot)' "$T/out")"
HOME="$T/home" run 0 "" load "$T/save.mcache" -p "$PUB" --cache-dir "$T/l-save"
snapshot "$T/l-save" >"$T/got"
check "save -> load gives every file of the cache dir back" cmp -s "$T/want" "$T/got"

# pack --from-dir -> load, in both format versions
for v in 1 2; do
	run 0 "" pack -q -o "$T/dir$v.mcache" -s "$SEC" --from-dir "$C" --format-version "$v"
	run 0 "" load "$T/dir$v.mcache" -p "$PUB" --cache-dir "$T/l-dir$v"
	snapshot "$T/l-dir$v" >"$T/got"
	check "pack --from-dir (format $v) -> load gives every file back" cmp -s "$T/want" "$T/got"
done

# diff of save's and pack's bundles: the same entries (across format versions, where
# only a version 1 artifact's sha256 compares, the graph entries are still the same);
# save's label of torch's AOTAutograd setting the one difference
run 1 "" diff "$T/save.mcache" "$T/dir2.mcache"
grep -qx "0 added, 0 removed, 0 changed" "$T/out" &&
	[ "$(grep -v '^[0-9]' "$T/out")" = "~ label TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE: 'unset' -> none" ] &&
	ok || bad "diff of save's and pack's bundles: $(cat "$T/out")"
run 1 "" diff "$T/save.mcache" "$T/dir1.mcache"
grep -q "^triton .* 128 changed" "$T/out" && ! grep -Eq "^([~+-] )?(inductor|aot_autograd) " "$T/out" &&
	ok || bad "diff across format versions: $(grep -v '^[~+-]' "$T/out")"

# A torch blob with several entries under one key, as save_cache_artifacts() writes one
# for a job that recompiled under new guards (torch 2.11: CRC-32, version 1, groups).
$PY - "$T/blob.bin" "$FXK" "$AOTK" <<'PY'
import base64, struct, sys, zlib
out, fx, aot = sys.argv[1:]
def s(t): # str: length, then base64 of the text
    b = base64.b64encode(t.encode())
    return struct.pack(">Q", len(b)) + b
def by(b):
    return struct.pack(">Q", len(b)) + b
groups = [("inductor", [(fx, b"graph for x.shape[0] > 32 " * 40), (fx, b"graph for x.shape[0] <= 32 " * 40),
                        ("f" + "b" * 51, b"another graph " * 40)]),
          ("aot_autograd", [(aot, b"aot entry one " * 30), (aot, b"aot entry two " * 30)])]
body = struct.pack(">Q", 1)
for t, ents in groups:
    body += s(t) + struct.pack(">Q", len(ents))
    for k, c in ents:
        body += s(k) + by(c)
open(out, "wb").write(struct.pack(">I", zlib.crc32(body)) + body)
PY
for v in 1 2; do
	run 0 "packed 5 artifacts" pack -o "$T/blob$v.mcache" -s "$SEC" --from-torch "$T/blob.bin" \
		--format-version "$v"
	run 0 "" export "$T/blob$v.mcache" --torch "$T/blob$v.out" -p "$PUB"
	check "format $v: a blob with several entries per key exports byte for byte" \
		cmp -s "$T/blob.bin" "$T/blob$v.out"
	run 0 "5 files installed" load "$T/blob$v.mcache" -p "$PUB" --cache-dir "$T/l-blob$v"
	$PY - "$T/blob.bin" "$T/l-blob$v" <<'PY' && ok || bad "format $v: load of the blob lacks an entry"
import base64, hashlib, os, struct, sys
blob, root = sys.argv[1:]
d = open(blob, "rb").read()[12:]
h = lambda c: base64.b32encode(hashlib.sha256(c).digest()).decode().lower()[:51]
want = set()
while d:
    n = struct.unpack(">Q", d[:8])[0]; t = base64.b64decode(d[8:8 + n]).decode(); d = d[8 + n:]
    cnt = struct.unpack(">Q", d[:8])[0]; d = d[8:]
    for _ in range(cnt):
        n = struct.unpack(">Q", d[:8])[0]; k = base64.b64decode(d[8:8 + n]).decode(); d = d[8 + n:]
        n = struct.unpack(">Q", d[:8])[0]; c = d[8:8 + n]; d = d[8 + n:]
        p = ("fxgraph/%s/%s/%s" % (k[1:3], k, h(c)) if t == "inductor" else
             "aotautograd/%s/%s" % (k, h(c)))
        assert open(os.path.join(root, p), "rb").read() == c, p
        want.add(p)
got = {os.path.relpath(os.path.join(a, f), root) for a, _, fs in os.walk(root) for f in fs}
assert got == want, (sorted(got), sorted(want))
PY
done

# A bundle without a blob's layout (save's) exports torch's keys, the entries of one key
# side by side; packed again from that blob it loads the same graph files.
run 0 "" export "$T/save.mcache" --torch "$T/save.blob" -p "$PUB"
$PY - "$T/save.blob" "$FXK" "$AOTK" <<'PY' && ok || bad "export of save's bundle: keys not torch's"
import base64, struct, sys
d = open(sys.argv[1], "rb").read()[12:]
seen = []
while d:
    n = struct.unpack(">Q", d[:8])[0]; t = base64.b64decode(d[8:8 + n]).decode(); d = d[8 + n:]
    cnt = struct.unpack(">Q", d[:8])[0]; d = d[8:]
    for _ in range(cnt):
        n = struct.unpack(">Q", d[:8])[0]; k = base64.b64decode(d[8:8 + n]).decode(); d = d[8 + n:]
        n = struct.unpack(">Q", d[:8])[0]; d = d[8 + n:]
        seen.append((t, k))
assert all(len(k) == 52 for t, k in seen if t in ("inductor", "aot_autograd")), seen
assert seen.count(("inductor", sys.argv[2])) == 2 and seen.count(("aot_autograd", sys.argv[3])) == 2, seen
PY
run 0 "" pack -q -o "$T/again.mcache" -s "$SEC" --from-torch "$T/save.blob"
run 0 "" load "$T/again.mcache" -p "$PUB" --cache-dir "$T/l-again"
check "save -> export -> pack --from-torch -> load gives the graph files back" \
	diff -r "$C/fxgraph" "$T/l-again/fxgraph"
check "... and the AOTAutograd files" diff -r "$C/aotautograd" "$T/l-again/aotautograd"

# Bundles made before entries were kept: torch's key alone. The vector's one artifact
# loads where it always did, and compares equal to the same entry keyed with its entry.
run 0 "1 file installed" load "$VEC/valid-graph-key-alone.mcache" -p "$PUB" --cache-dir "$T/l-old"
E=$($PY -c 'import base64,hashlib,sys; print(base64.b32encode(hashlib.sha256(open(sys.argv[1],"rb").read()).digest()).decode().lower()[:51])' \
	"$MC_SRCDIR/tests/data/small/vu.best_config")
check "the older form lands at fxgraph/ot/<key>/<entry>" \
	cmp -s "$T/l-old/fxgraph/ot/$FXK/$E" "$MC_SRCDIR/tests/data/small/vu.best_config"
mkdir -p "$T/new/fxgraph/ot/$FXK"
cp "$MC_SRCDIR/tests/data/small/vu.best_config" "$T/new/fxgraph/ot/$FXK/$E"
run 0 "" pack -q -o "$T/new.mcache" -s "$SEC" --from-dir "$T/new"
run 0 "" list "$T/new.mcache"
grep -Eq "^inductor +259 B +$FXK/$E\$" "$T/out" && ok || bad "new form not listed: $(cat "$T/out")"
run 1 "" diff "$VEC/valid-graph-key-alone.mcache" "$T/new.mcache"
grep -qx "0 added, 0 removed, 0 changed" "$T/out" && grep -qx "~ format version: 1 -> 2" "$T/out" &&
	ok || bad "the older form and the new diffed: $(cat "$T/out")"
run 0 "1 artifacts, 0 conflicts" merge -o "$T/m.mcache" -p "$PUB" -s "$SEC" \
	"$VEC/valid-graph-key-alone.mcache" "$T/new.mcache"
run 0 "" list "$T/m.mcache"
grep -Eq "^inductor +259 B +$FXK/$E\$" "$T/out" && ok || bad "merge kept the older form: $(cat "$T/out")"
# run's drop-known: the cache loaded from the older bundle holds nothing new
run 0 "" run -b "$VEC/valid-graph-key-alone.mcache" -p "$PUB" --cache-dir "$T/r-old" \
	--save-to "$T/r-new.mcache" -s "$SEC" -- true
grep -q "nothing new" "$T/out" "$T/err" && ok || bad "run saved an entry its base has: $(cat "$T/out" "$T/err")"

# torch's blob keys name no entry: a blob whose key does is refused, nothing written.
$PY - "$T/blob-entry.bin" "$FXK" <<'PY'
import base64, struct, sys, zlib
out, fx = sys.argv[1:]
s = lambda t: struct.pack(">Q", len(base64.b64encode(t.encode()))) + base64.b64encode(t.encode())
c = b"a graph"
body = struct.pack(">Q", 1) + s("inductor") + struct.pack(">Q", 1) + s(fx + "/" + "a" * 51) + \
    struct.pack(">Q", len(c)) + c
open(out, "wb").write(struct.pack(">I", zlib.crc32(body)) + body)
PY
run 1 "names an entry, which torch's keys do not" pack -o "$T/blob-entry.mcache" -s "$SEC" \
	--from-torch "$T/blob-entry.bin"
[ ! -e "$T/blob-entry.mcache" ] && ok || bad "a refused blob left a bundle"

# A key whose entry is not its content's hash is refused, nothing installed.
run 1 "its entry is not named after its content's hash" load "$VEC/manifest-entry-false.mcache" \
	-p "$PUB" --cache-dir "$T/l-false"
[ ! -e "$T/l-false" ] && ok || bad "a refused bundle left $T/l-false"

finish
