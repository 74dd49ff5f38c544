# resolve.sh - the default cache folders are the ones torch 2.11 and Triton 3.6 would
# use: megacache's roots (load --dry-run --json, field roots) against what Python
# itself computes with tempfile, getpass, re and os.path under the same environment.
# The reference is Debian's /usr/bin/python3 (python3 on PATH may be another one);
# setup.sh installs it.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	echo "SKIP: $PY is missing (setup.sh installs it)"
	exit 77
fi
chmod 755 "$T"
run 0 "" pack -q -o "$T/cpu.mcache" --from-torch "$DATA/mlp-cpu-pgo.megacache"
B="$T/cpu.mcache"
chmod 644 "$B"

# What torch's cache_dir() and triton_cache_dir() (less the device folder) and
# Triton's knobs.cache.dir give. triton 3.6's getenv() keeps a value as it is, white
# space and all; megacache refuses (null here) an empty value and one that starts with
# white space, and a home folder that is not absolute: Triton would fail on the first
# and write into the working folder with the others.
cat > "$T/ref.py" <<'EOF'
import getpass, os, re, tempfile

def refused(v):
    return v == "" or v[:1].isspace()

def inductor():
    d = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if d is None:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
        d = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    return d

def triton(ind):
    d = os.getenv("TRITON_CACHE_DIR")
    if d is not None:
        return None if refused(d) else d
    return os.path.join(ind, "triton")

def triton_home():
    d = os.environ.get("TRITON_CACHE_DIR")
    if d is not None:
        return None if refused(d) else d
    home = os.environ.get("TRITON_HOME")
    if home is None:
        home = os.path.expanduser("~/")
        if not home.startswith("/"):
            return None
    elif refused(home):
        return None
    return os.path.join(home, ".triton", "cache")

ind = inductor()
print(repr(ind)); print(repr(triton(ind))); print(repr(triton_home()))
EOF
cat > "$T/got.py" <<'EOF'
import json, sys
r = json.load(sys.stdin)["roots"]
print(repr(r["inductor"])); print(repr(r["triton"])); print(repr(r["triton_home"]))
EOF
chmod 644 "$T/ref.py" "$T/got.py"

mkdir -p "$T/cwd/x/y" "$T/tmpa" "$T/tmpb" "$T/ro"
: > "$T/afile"
CWD="$T/cwd"
AS=  # a command to run both as (another user)

# same DESCRIPTION VAR=VALUE...: megacache and Python, in folder $CWD with only PATH
# and these variables set, give the same three roots.
same() {
	desc=$1; shift
	(cd "$CWD" && $AS env -i PATH="$PATH" "$@" "$MEGACACHE" load --insecure-no-verify \
		--dry-run --json "$B") >"$T/out" 2>"$T/err"
	rc=$?
	if [ "$rc" != 0 ]; then
		bad "$desc: megacache exited $rc: $(head -c 400 "$T/err")"
		return
	fi
	(cd "$CWD" && $AS env -i PATH="$PATH" "$@" "$PY" "$T/ref.py") >"$T/want" 2>&1
	"$PY" "$T/got.py" <"$T/out" >"$T/got" 2>&1
	if cmp -s "$T/want" "$T/got"; then
		ok
	else
		bad "$desc: megacache $(tr '\n' ' ' <"$T/got"); Python $(tr '\n' ' ' <"$T/want")"
	fi
}

# Where tempfile.gettempdir() looks.
same "nothing set"
same "TMPDIR an existing folder" TMPDIR="$T/tmpa"
same "TMPDIR a missing folder" TMPDIR="$T/missing"
[ ! -e "$T/missing" ] && ok || bad "the missing \$TMPDIR was created"
same "TMPDIR a file" TMPDIR="$T/afile"
same "TMPDIR relative, with .. . and //" TMPDIR="./x/../x//y/./"
same "TMPDIR relative, climbing past the root" TMPDIR="../../../../../../../../../../../../tmp/.."
same "TMPDIR with a trailing slash" TMPDIR="$T/tmpa/"
same "TMPDIR with two leading slashes" TMPDIR="/$T/tmpa"
same "TMPDIR with three leading slashes" TMPDIR="//$T/tmpa"
same "TEMP, TMPDIR unset" TEMP="$T/tmpa" TMP="$T/tmpb"
same "TEMP, TMPDIR empty" TMPDIR= TEMP="$T/tmpa"
same "TMP, TMPDIR and TEMP empty" TMPDIR= TEMP= TMP="$T/tmpb"
same "TMP, TMPDIR and TEMP missing" TMPDIR="$T/missing" TEMP="$T/missing2" TMP="$T/tmpb"
[ ! -e "$T/missing" ] && [ ! -e "$T/missing2" ] && ok || bad "a missing candidate folder was created"
[ -z "$(find "$T/tmpa" "$T/tmpb" "$T/cwd/x/y" -mindepth 1)" ] && ok || bad "a probe file was left behind"

# Who getpass.getuser() says is running.
same "LOGNAME with \\ / : * ? \" < > |" TMPDIR="$T/tmpa" LOGNAME='a\b/c:d*e?f"g<h>i|j'
same "LOGNAME empty, USER" TMPDIR="$T/tmpa" LOGNAME= USER='u:v/w'
same "LNAME" TMPDIR="$T/tmpa" LOGNAME= USER= LNAME='l|n'
same "USERNAME" TMPDIR="$T/tmpa" USERNAME='x<y>'
same "all empty: the password entry" TMPDIR="$T/tmpa" LOGNAME= USER= LNAME= USERNAME=

# TORCHINDUCTOR_CACHE_DIR is taken as it is; empty, torch fails on it, and so does load.
same "TORCHINDUCTOR_CACHE_DIR" TORCHINDUCTOR_CACHE_DIR="$T/ind/"
same "TORCHINDUCTOR_CACHE_DIR relative" TORCHINDUCTOR_CACHE_DIR="rel/../ind"
TORCHINDUCTOR_CACHE_DIR= run 2 "TORCHINDUCTOR_CACHE_DIR is set but empty" \
	load --insecure-no-verify --dry-run --json "$B"

# Triton's roots.
same "HOME" HOME=/home/h
same "HOME with trailing slashes" HOME=/home/h///
same "HOME empty: Triton takes /" HOME=
same "HOME /" HOME=/
same "HOME relative: refused" HOME=rel
same "HOME starting with white space: refused" HOME=' /home/h'
same "TRITON_HOME" HOME=/home/h TRITON_HOME=/th
same "TRITON_HOME with a trailing slash" TRITON_HOME=/th/
same "TRITON_HOME relative" TRITON_HOME=th
same "TRITON_HOME empty: refused" HOME=/home/h TRITON_HOME=
same "TRITON_HOME white space: refused" TRITON_HOME='  '
same "TRITON_CACHE_DIR" TRITON_CACHE_DIR="$T/tc" TRITON_HOME=/th
same "TRITON_CACHE_DIR with a trailing space" TRITON_CACHE_DIR="$T/tc "
same "TRITON_CACHE_DIR relative" TRITON_CACHE_DIR=tc
same "TRITON_CACHE_DIR empty: refused" TRITON_CACHE_DIR=
same "TRITON_CACHE_DIR white space first: refused" TRITON_CACHE_DIR=" $T/tc"
same "TORCHINDUCTOR_CACHE_DIR ending in /: the Triton root joined as os.path.join does" \
	TORCHINDUCTOR_CACHE_DIR=/ind/

# A load that needs the Triton root refuses such a value and makes nothing.
tar -xzf "$DATA/mlp-cuda-cachedir.tar.gz" -C "$T"
run 0 "" pack -q -o "$T/kern.mcache" --from-triton-dir "$T/cache_mlp_cold/triton/0"
for v in "" " tc"; do
	(cd "$CWD" && TRITON_CACHE_DIR="$v" "$MEGACACHE" load --insecure-no-verify \
		"$T/kern.mcache" --cache-dir "$T/w") >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" = 2 ] && ok || bad "TRITON_CACHE_DIR='$v': exit $rc, expected 2: $(cat "$T/out")"
	grep -q "TRITON_CACHE_DIR" "$T/err" && ok || bad "TRITON_CACHE_DIR='$v': error does not name it: $(cat "$T/err")"
done
[ ! -e "$T/w" ] && [ ! -e "$CWD/ tc" ] && ok || bad "a refused load made a folder"
(cd "$CWD" && env -u TRITON_CACHE_DIR "$MEGACACHE" load --insecure-no-verify "$T/kern.mcache" \
	--cache-dir "$T/w") >"$T/out" 2>"$T/err"
[ -d "$T/w/triton/0/5R467APMN4NBYYOOQVSRYSCYJWWLZWXLOLQGVNQZHQXVOTJYWSOA" ] && ok \
	|| bad "kernels not beneath <cache dir>/triton/0: $(cat "$T/err")"

# A $TMPDIR the user cannot write is passed over. root writes anywhere, so that case
# runs as nobody (setpriv); without setpriv, a root run cannot show it and is skipped.
chmod 555 "$T/ro"
if [ "$(id -u)" != 0 ]; then
	same "TMPDIR not writable" TMPDIR="$T/ro"
elif command -v setpriv >/dev/null 2>&1 &&
	setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$B" -a -x "$MEGACACHE"; then
	AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
	same "TMPDIR not writable by nobody" TMPDIR="$T/ro"
	grep -q "'$T/ro/" "$T/got" && bad "nobody's root lies in the folder it cannot write" || ok
	same "TMPDIR not writable by nobody, TEMP writable" TMPDIR="$T/ro" TEMP=/var/tmp
	AS=
	same "TMPDIR read-only, but root may write" TMPDIR="$T/ro"
	grep -q "'$T/ro/torchinductor_" "$T/got" && ok || bad "root's root is not in \$TMPDIR"
else
	echo "SKIP: not-writable TMPDIR: running as root without setpriv, or nobody cannot" \
		"reach the build tree"
fi
[ -z "$(ls -A "$T/ro")" ] && ok || bad "a probe file was left in the read-only folder"
finish
