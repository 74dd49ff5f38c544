"""The arguments callers give, checked and converted for the library: paths (or registry
references), text, keys, labels, integers in range, the progress display, registry
settings, and the facts a save records from the environment."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Iterable, List, Mapping, Optional, Tuple, Union

from . import _ffi
from ._errors import UsageError
from ._progress import TerminalBar

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
KeyArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Keys = Union[KeyArg, Iterable[KeyArg]]
Password = Union[str, bytes, Callable[[str], Union[str, bytes]], None]
ProgressFn = Callable[[str, int, int], None]
Progress = Union[ProgressFn, bool, None]
# The longest --timeout the tool takes, in seconds.
TIMEOUT_MAX = 86400


def _path(p: PathArg, what: str = "path") -> bytes:
    if p is None:
        raise UsageError("no %s given" % what)
    b = os.fsencode(os.fspath(p))
    if not b:
        raise UsageError("an empty %s" % what)
    if b"\0" in b:
        raise UsageError("a %s with a NUL byte: %r" % (what, p))
    return b


def _text(s: Union[str, bytes], what: str) -> bytes:
    if isinstance(s, str):
        b = s.encode("utf-8", "surrogateescape")
    elif isinstance(s, (bytes, bytearray)):
        b = bytes(s)
    else:
        raise UsageError("%s must be str or bytes, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise UsageError("%s holds a NUL byte: %r" % (what, s))
    return b


def _str(b: Optional[bytes]) -> Optional[str]:
    return None if b is None else b.decode("utf-8", "surrogateescape")


def _is_key_text(k: KeyArg) -> bool:
    if isinstance(k, (str, bytes)):
        b = k.encode("utf-8", "surrogateescape") if isinstance(k, str) else k
        return b"\n" in b or b.startswith(b"untrusted comment:")
    return False


def _key_list(keys: Optional[Keys]) -> List[KeyArg]:
    if keys is None:
        return []
    if isinstance(keys, (str, bytes, os.PathLike)):
        return [keys]
    return [*keys]


def _progress_fn(progress: Progress) -> Optional[ProgressFn]:
    if progress is None:
        return TerminalBar(sys.stderr) if TerminalBar.wanted(sys.stderr) else None
    if progress is False:
        return None
    if progress is True:
        return TerminalBar(sys.stderr)
    if not callable(progress):
        raise UsageError("progress must be a callable(phase, done, total), True, False or None")
    return progress


def _int(value, what: str, lo: int, hi: int) -> int:
    """value as an int in lo..hi, else UsageError naming what."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UsageError("%s must be an integer from %d to %d, not %r" % (what, lo, hi, value))
    return value


def _registry(ca: Optional[PathArg], plain_http: bool, user: Optional[Union[str, bytes]],
              password: Optional[Union[str, bytes]],
              timeout: Optional[int]) -> List[Tuple[int, bytes]]:
    """The registry settings given, as (MC_REGISTRY_*, value) pairs for
    mc_ctx_set_registry(). The password is never shown, not even in an error about it."""
    out = []
    if ca is not None:
        out.append((_ffi.MC_REGISTRY_CA, _path(ca, "registry_ca")))
    if plain_http not in (True, False):
        raise UsageError("plain_http must be True or False, not %r" % (plain_http,))
    if plain_http:
        out.append((_ffi.MC_REGISTRY_PLAIN_HTTP, b"1"))
    if user is not None:
        out.append((_ffi.MC_REGISTRY_USER, _text(user, "registry_user")))
    if password is not None:
        if not isinstance(password, (str, bytes)):
            raise UsageError("registry_password must be str or bytes, not %s"
                             % type(password).__name__)
        b = password.encode("utf-8", "surrogateescape") if isinstance(password, str) else password
        if b"\0" in b:
            raise UsageError("registry_password holds a NUL byte")
        out.append((_ffi.MC_REGISTRY_PASSWORD, b))
    if timeout is not None:
        out.append((_ffi.MC_REGISTRY_TIMEOUT,
                    b"%d" % _int(timeout, "timeout", 1, TIMEOUT_MAX)))
    return out


def _created() -> int:
    sde = os.environ.get("SOURCE_DATE_EPOCH", "")
    if sde == "":
        return int(time.time())
    if not (sde.isascii() and sde.isdigit()) or int(sde) >= 1 << 63:
        raise UsageError("SOURCE_DATE_EPOCH is not a Unix time: '%s'" % sde)
    return int(sde)


#: The label save() and warm() record: torch 2.11 keys AOTAutograd entries by this setting
#: (its functorch config's enable_remote_autograd_cache), so `megacache push` can tell
#: whether workers with torch's remote caches on will find them.
AOT_REMOTE_LABEL = "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"

# The label of a bundle of what a job used (run --save-used, warm(save_used=...)).
USED_LABEL = "megacache.contents"


def _aot_remote() -> str:
    """TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE as torch keys entries by it: "1", "0" or "unset".
    From torch's own config where this process imported torch (code may have set it), else
    from the environment, as torch reads it."""
    cfg = sys.modules.get("torch._functorch.config")
    v = getattr(cfg, "enable_remote_autograd_cache", None) if cfg is not None else None
    if cfg is not None:
        return "unset" if v is None else "1" if v else "0"
    e = os.environ.get(AOT_REMOTE_LABEL)
    return e if e in ("1", "0") else "unset"


def _labels(labels: Union[Mapping[str, str], Iterable[str], None]) -> List[tuple]:
    """Labels as (key, value) pairs from a mapping or "KEY=VALUE" strings."""
    if labels is None:
        return []
    if isinstance(labels, Mapping):
        return [(k, v) for k, v in labels.items()]
    out = []
    for item in labels:
        if "=" not in item:
            raise UsageError("'%s' is not KEY=VALUE" % item)
        k, v = item.split("=", 1)
        out.append((k, v))
    return out
