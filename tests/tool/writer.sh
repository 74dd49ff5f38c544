# writer.sh - the bundle writer gives the same bytes however the build frames its ustar
# members (through libarchive, or itself when configured --without-libarchive): the
# bundles of format/vectors/ come out of this build's library byte for byte, a packed
# bundle is a plain ustar file another tar reads, and the library loads libarchive only
# to write a bundle, when the build asked for it.
. "$(dirname "$0")/lib.sh"
V="$MC_SRCDIR/format/vectors"
MKVECTORS="$MC_BUILDDIR/tests/mkvectors"

if grep -q '^#define MC_WITH_LIBARCHIVE 1' "$MC_BUILDDIR/config.h"; then
	framing=libarchive
else
	framing="the writer itself"
fi
echo "writer: ustar members framed by $framing"

# The committed vectors (the valid ones made by the writer) from this build.
mkdir -p "$T/vectors"
check "mkvectors runs" "$MKVECTORS" "$MC_SRCDIR" "$T/vectors"
n=0
for f in "$T/vectors"/*; do
	n=$((n + 1))
	cmp -s "$f" "$V/$(basename "$f")" && ok || bad "$(basename "$f") differs from format/vectors/"
done
[ "$n" -ge 100 ] && ok || bad "only $n vectors written"
ls "$T/vectors"/valid-*.mcache >/dev/null 2>&1 && ok || bad "no valid vector written"

# A pack of a real cache dir: every member in the one header form, data padded to a
# block, two zero blocks and nothing after them, readable by Python's tarfile.
mkdir -p "$T/src"
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T/src"
SOURCE_DATE_EPOCH=1700000000 run 0 "" pack -q -o "$T/b.mcache" -s "$KEYS/test.key" \
	--from-dir "$T/src/cache_mlp_cold"
/usr/bin/python3 - "$T/b.mcache" >"$T/tar.out" 2>&1 <<'EOF'
import os, sys, tarfile
path = sys.argv[1]
with tarfile.open(path, "r:", format=tarfile.USTAR_FORMAT) as t:
    members = t.getmembers()
    end = 0
    for m in members:
        assert m.isreg() and m.mode == 0o644 and m.uid == 0 and m.gid == 0 and m.mtime == 0, m.name
        assert m.uname == "" and m.gname == "", m.name
        end = m.offset_data + (m.size + 511) // 512 * 512
names = [m.name for m in members]
assert names[0] == "manifest.json", names[:2]
assert names[1].startswith("signatures/"), names[:2]
assert names[2] == "index.json.zst", names[:3]
assert names[3:] == ["blocks/%d" % i for i in range(len(names) - 3)], names
size = os.path.getsize(path)
assert size == end + 1024, (size, end)
with open(path, "rb") as f:
    f.seek(end)
    assert f.read() == bytes(1024)
print(len(names), "members")
EOF
if [ $? -eq 0 ]; then ok; else bad "tarfile: $(tail -n 3 "$T/tar.out")"; fi
grep -qE '^[0-9]+ members$' "$T/tar.out" && ok || bad "no members: $(cat "$T/tar.out")"

# The shared library never links libarchive: a build configured with it loads it when
# it writes a bundle (pack), and a verify or a load starts without it and its closure.
so="$MC_BUILDDIR/lib/.libs/libmegacache.so"
if [ -e "$so" ]; then
	needed=$(objdump -p "$so" | awk '$1 == "NEEDED" { print $2 }')
	case "$needed" in
	*libarchive*) bad "libmegacache.so links libarchive: $needed" ;;
	*) ok ;;
	esac
	echo "libmegacache.so needs:" $needed
fi
# loaded OP ARGS...: the libraries megacache loaded (glibc's LD_DEBUG=libs), in $T/libs.OP
loaded() {
	op=$1
	shift
	LD_DEBUG=libs LD_DEBUG_OUTPUT="$T/libs.$op" "$MEGACACHE" "$@" >/dev/null 2>"$T/err" ||
		bad "$op: $(cat "$T/err")"
	cat "$T"/libs."$op".* > "$T/libs.$op" 2>/dev/null
	rm -f "$T"/libs."$op".*
}
loaded pack pack -q -o "$T/c.mcache" -s "$KEYS/test.key" --from-dir "$T/src/cache_mlp_cold"
loaded verify verify -q "$T/c.mcache" -p "$KEYS/test.pub"
loaded load load -q "$T/c.mcache" -p "$KEYS/test.pub" --cache-dir "$T/c-out"
# run without a save: it loads, runs the job and tells what it used (a scan of the
# folders), writing no bundle.
loaded run run -q -b "$T/c.mcache" -p "$KEYS/test.pub" --cache-dir "$T/r-out/inductor" \
	--triton-dir "$T/r-out/triton" -- true
if [ -s "$T/libs.verify" ]; then
	for op in verify load run; do
		grep -qE "libarchive|libxml2|libicu" "$T/libs.$op" &&
			bad "$op loaded libarchive or its closure: $(grep -E 'calling init: .*(libarchive|libxml2|libicu)' "$T/libs.$op" | head -3)" || ok
	done
	if [ "$framing" = libarchive ]; then
		grep -q "calling init: .*libarchive" "$T/libs.pack" && ok || bad "pack did not load libarchive"
	else
		grep -q "libarchive" "$T/libs.pack" && bad "a --without-libarchive build loaded libarchive" || ok
	fi
else
	echo "writer: LD_DEBUG gives nothing here: the libraries loaded are not checked"
fi
finish
