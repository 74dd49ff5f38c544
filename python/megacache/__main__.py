"""python -m megacache: the megacache tool itself, run in place of this process.

The package does not carry a second implementation of the commands: it finds the tool
that belongs to the library it loads and execs it with the arguments given, so output,
--json, error codes, exit statuses and signals are the tool's own. Where it looks, in
order: $MEGACACHE_TOOL; the bin/ of the prefix the library was loaded from (beside
lib/, or two folders up for a multiarch lib/<triplet>/); each folder of $PATH. When none
holds it, exit status 2 and one line naming every place looked in."""

import ctypes
import os
import signal
import sys

from . import _ffi
from ._errors import Error

ENV_TOOL = "MEGACACHE_TOOL"
TOOL = "megacache"
EXIT_USAGE = 2


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_path():
    """The file the library was loaded from (dladdr of one of its functions)."""
    dll = _ffi.lib()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if dladdr(ctypes.cast(dll.mc_version, ctypes.c_void_p), ctypes.byref(info)) == 0:
        raise OSError("dladdr cannot tell where %s was loaded from" % _ffi.SONAME)
    return os.fsdecode(info.dli_fname)


def _candidates():
    """(path, where it came from) of each place the tool may be, in order."""
    given = os.environ.get(ENV_TOOL)
    if given:
        return [(given, "$" + ENV_TOOL)]
    out = []
    try:
        libdir = os.path.dirname(_library_path())
    except (Error, OSError, AttributeError) as e:
        out.append((None, "the library's bin/ (%s)" % e))
    else:
        for up in ("..", os.path.join("..", "..")):
            p = os.path.normpath(os.path.join(libdir, up, "bin", TOOL))
            out.append((p, "beside the library"))
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        out.append((os.path.join(d or ".", TOOL), "$PATH"))
    return out


def find_tool():
    """The path of the megacache tool to run; OSError naming every place looked in."""
    looked = []
    for path, where in _candidates():
        if path is not None and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        looked.append(path or where)
    raise OSError("no megacache tool found; looked in %s. Install it (make install puts it "
                  "in the library's prefix), or set %s to its path"
                  % (", ".join(looked), ENV_TOOL))


def main(argv=None):
    """Replaces this process with the tool, run with argv (default: sys.argv[1:]);
    returns only when the tool is missing (2)."""
    args = sys.argv[1:] if argv is None else [*argv]
    try:
        path = find_tool()
    except OSError as e:
        print("megacache: %s" % e, file=sys.stderr, flush=True)
        return EXIT_USAGE
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores these at start-up, and an ignored signal stays ignored across exec:
    # the tool is to die of a closed pipe as it does when run from a shell.
    for n in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(n, signal.SIG_DFL)
    try:
        os.execv(path, [TOOL, *args])
    except OSError as e:
        print("megacache: %s: %s" % (path, e.strerror), file=sys.stderr, flush=True)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
