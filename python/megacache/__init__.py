"""megacache: torch.compile caches in one signed bundle, from inside the Python process.

A thin layer over libmegacache (ctypes, no compiler needed). The calls:

- :func:`save` records what torch and Triton left in their cache folders into a
  signed bundle; :func:`load` verifies a bundle and installs it into those folders.
- :func:`warm` does both around a block: load before, save what is new after.
- :func:`pack_torch_artifacts` and :func:`torch_artifacts` take and give the bytes of
  ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``.
- :func:`verify` checks a bundle without installing; :func:`list` shows one, unverified.

Keys are minisign keys: a path, or the text of a key file (anything with a line break
or starting "untrusted comment:"), or for public keys the bare base64 key. Paths may be
``str``, ``bytes`` or ``os.PathLike``. Every failure of the library, and every bad
argument, raises :class:`Error`: a :class:`VerificationError` when the bundle must not
be trusted, a :class:`UsageError` otherwise; nothing is installed or written then.

Callbacks (progress, password, on_skip) cannot stop a library call: an exception one
raises is raised again once the call has returned, with the call's effects kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import getpass
import os
import sys
import time
import warnings
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _ffi
from ._errors import (Error, GpuMismatchError, LibraryError, UnsupportedVersionError, UsageError,
                      VerificationError)
from ._progress import TerminalBar
from ._version import __version__

# list() is left out of __all__: a star import would hide the builtin.
__all__ = [
    "Artifact", "BundleInfo", "Change", "Error", "Folder", "GpuMismatchError",
    "GpuTargetsNotChecked", "LibraryError", "LoadReport",
    "LoadedArtifact", "SaveReport", "Signature", "UnsupportedVersionError", "UsageError",
    "Used", "VerificationError", "Warm", "keygen",
    "gpu_targets", "library_version", "load", "pack_torch_artifacts", "save", "torch_artifacts",
    "verify", "warm", "AOT_REMOTE_LABEL", "__version__",
]


def __dir__() -> List[str]:
    """The package's API: what __all__ names, and list(); not the typing names and
    modules the code imports, nor its own constants."""
    return sorted({*__all__, "list", "list_bundle"} |
                  {n for n in globals() if n.startswith("__") and n.endswith("__")})


PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
KeyArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
Keys = Union[KeyArg, Iterable[KeyArg]]
Password = Union[str, bytes, Callable[[str], Union[str, bytes]], None]
ProgressFn = Callable[[str, int, int], None]
Progress = Union[ProgressFn, bool, None]

ACTIONS = {_ffi.MC_LOAD_INSTALLED: "installed", _ffi.MC_LOAD_REPLACED: "replaced",
           _ffi.MC_LOAD_UNCHANGED: "unchanged", _ffi.MC_LOAD_PLANNED: "would_install",
           _ffi.MC_LOAD_WOULD_REPLACE: "would_replace", _ffi.MC_LOAD_SKIPPED: "skipped"}
TORCH_FORMATS = {"current": _ffi.MC_TORCH_FORMAT_CURRENT, "2.7": _ffi.MC_TORCH_FORMAT_2_7}
# The folders save reads and load writes by default, in save's order.
SAVE_TIERS = (("inductor", "torch's cache dir"), ("triton_home", "Triton's own cache"))
ROOT_TIERS = ("inductor", "triton", "triton_home")
# How Warm's repr tells each reason a loaded file's reads could not be seen (MC_UNSEEN_*),
# after their count; its keys are the names of Warm.used_not_seen.
UNSEEN_WORDS = {"noatime": "on a noatime mount", "not_owner": "owned by another user",
                "read_only": "on a read-only mount", "overlayfs": "found in place on overlayfs",
                "gone": "removed or replaced during the block", "other": "other"}


@dataclasses.dataclass(frozen=True)
class Artifact:
    """An artifact of a bundle's manifest; hash is its content hash in hex (SHA-256 in
    bundle format 2, BLAKE2b-256 in format 1); executable: load makes it executable (its
    file had the owner's execute bit when recorded)."""
    type: str
    key: str
    size: int
    hash: str
    executable: bool


@dataclasses.dataclass(frozen=True)
class Signature:
    """One signature of a bundle. state is "verified" (by a trusted key, and it
    verifies), "not_checked" (its key is not among the trusted keys given, or none were:
    it vouches for nothing) or "broken" (its key id is a trusted key's and it does not
    verify: the manifest changed after signing)."""
    key_id: str
    state: str


@dataclasses.dataclass(frozen=True)
class BundleInfo:
    """A bundle's manifest. verified is True only when :func:`verify` returned it; even
    then only signatures whose state is "verified" vouch for it. gpu_targets: the GPU
    targets of its Triton kernels ("cuda:90", "hip:gfx942"), as its manifest records
    them or, for a bundle that records none (format 1, an older one), as :func:`verify`
    read them from the kernels; None when not known (such a bundle listed)."""
    bundle: str
    created: int
    bundle_version: int
    expires: int
    labels: Dict[str, str]
    signatures: List[Signature]
    artifacts: List[Artifact]
    verified: bool
    gpu_targets: Optional[List[str]] = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class LoadedArtifact:
    """What load did with one artifact: action is "installed" (no file was there),
    "replaced" (a file that differed was), "unchanged" (an identical file was there), or
    in a dry run "would_install" or "would_replace"; "skipped": a file of a Triton
    kernel for a GPU target the host lacks, left out (skip_other_gpus); dest is the full
    path; executable: the file is (or would be) made executable."""
    action: str
    type: str
    key: str
    size: int
    dest: str
    executable: bool


@dataclasses.dataclass(frozen=True)
class LoadReport:
    """What :func:`load` did: the artifacts installed where no file was, replaced (a file
    that differed was there), unchanged (an identical file was there); in a dry run,
    would_install and would_replace. bytes counts what was (or would be) written.
    gpu_targets: the targets of the bundle's Triton kernels; host_gpu_targets: the ones
    the host was taken to have (given, or detected); gpu_targets_checked: False when
    none was (no GPU seen); skipped: the kernel files left out (skip_other_gpus)."""
    bundle: str
    dry_run: bool
    synced: bool
    installed: int
    replaced: int
    unchanged: int
    would_install: int
    would_replace: int
    bytes: int
    roots: Dict[str, Optional[str]]
    artifacts: List[LoadedArtifact]
    gpu_targets: Optional[List[str]] = None
    host_gpu_targets: List[str] = dataclasses.field(default_factory=lambda: [])
    gpu_targets_checked: bool = False
    skipped: int = 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Folder:
    """A folder save read: its tier, path, whether it exists, and the number of artifacts
    it gave (the names of the tool's --json)."""
    tier: str
    path: str
    exists: bool
    artifact_count: int


@dataclasses.dataclass(frozen=True)
class Change:
    """An artifact a warm block added ("added") or rewrote ("changed")."""
    what: str
    type: str
    key: str
    size: int


@dataclasses.dataclass(frozen=True)
class SaveReport:
    """What :func:`save` or :func:`pack_torch_artifacts` wrote (dry_run: would write);
    artifact_count is a number, as in the tool's --json. signatures: a list of
    :class:`Signature`, as :attr:`BundleInfo.signatures` is (earlier versions of this
    package gave a number): one per secret key, in state "not_checked", as :func:`list`
    of the bundle gives them with no trusted key; none in a dry run. signature_count:
    their number (the tool's --json name)."""
    bundle: str
    dry_run: bool
    artifact_count: int
    bytes: int
    signatures: List[Signature]
    folders: List[Folder]
    skipped_files: int
    changes: List[Change] = dataclasses.field(default_factory=lambda: [])

    @property
    def signature_count(self) -> int:
        return len(self.signatures)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Used:
    """What a :func:`warm` block used of one artifact type. installed: the loaded files
    (installed, replaced or found identical in place; once per file, however many bundles
    hold it); read: those read during the block, by any process; new: files of the type
    written during the block that were not loaded; not_seen: loaded files whose reads
    could not be seen (:attr:`Warm.used_not_seen` says why), counted neither read nor
    unread."""
    installed: int
    read: int
    new: int
    not_seen: int


def library_version() -> str:
    """The version of the libmegacache this package loaded."""
    return _ffi.lib().mc_version().decode()


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


_MC_ERR_PASSWORD = -19
U64 = (1 << 64) - 1


def _int(value, what: str, lo: int, hi: int) -> int:
    """value as an int in lo..hi, else UsageError naming what."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UsageError("%s must be an integer from %d to %d, not %r" % (what, lo, hi, value))
    return value


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


class _Session:
    """One library context and everything made from it, freed together on close.

    Also carries the progress callback and the exception a Python callback raised,
    which is raised again once the library call returns.
    """

    def __init__(self, cache_dir: Optional[PathArg] = None, triton_dir: Optional[PathArg] = None,
                 progress: Progress = False):
        self.lib = _ffi.lib()
        self.ctx = _ffi.c_handle()
        self._free: List[tuple] = []
        self._pending: Optional[BaseException] = None
        self._callbacks: List[object] = []
        status = self.lib.mc_ctx_new(ctypes.byref(self.ctx))
        if status != 0 or not self.ctx.value:
            raise _ffi.status_error(status or -1)
        try:
            if cache_dir is not None:
                self.lib.mc_ctx_set_tier_root(self.ctx, b"inductor", _path(cache_dir, "cache_dir"))
            if triton_dir is not None:
                t = _path(triton_dir, "triton_dir")
                self.lib.mc_ctx_set_tier_root(self.ctx, b"triton", t)
                self.lib.mc_ctx_set_tier_root(self.ctx, b"triton_home", t)
            fn = _progress_fn(progress)
            if fn is not None:
                cb = self.callback(_ffi.PROGRESS_FN,
                                   lambda ud, phase, done, total: fn(phase.decode(), done, total))
                self.lib.mc_ctx_set_progress(self.ctx, cb, None)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "_Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for free, h in reversed(self._free):
            _ffi.owner_drop(h.value)
            free(h)
        self._free.clear()
        if self.ctx is not None and self.ctx.value:
            self.lib.mc_ctx_free(self.ctx)
        self.ctx = None

    def _guard(self, fn, failed):
        """Wraps a Python callback: an exception in it is kept, not lost in ctypes, and
        the callback returns failed to the library instead."""
        def call(*args):
            if self._pending is not None:
                return failed
            try:
                return fn(*args)
            except BaseException as e:  # noqa: B902 - raised again after the C call
                self._pending = e
                return failed
        return call

    def callback(self, ctype, fn, failed=None):
        cb = ctype(self._guard(fn, failed))
        self._callbacks.append(cb)
        return cb

    def reraise(self) -> None:
        e, self._pending = self._pending, None
        if e is not None:
            raise e

    def call(self, f, *args):
        """Calls a library function; a callback's exception wins over the status."""
        try:
            f(*args)
        except Error:
            self.reraise()
            raise
        self.reraise()

    def _keep(self, free, h) -> None:
        self._free.append((free, h))
        _ffi.owner_set(h.value, self.ctx.value)

    def tier_root(self, tier: str) -> str:
        p = ctypes.c_char_p()
        self.lib.mc_ctx_tier_root(self.ctx, tier.encode(), ctypes.byref(p))
        return os.fsdecode(p.value)

    # Keys.

    def pubkey(self, k: KeyArg):
        h = _ffi.c_handle()
        if _is_key_text(k):
            self.lib.mc_pubkey_from_text(self.ctx, _text(k, "public key text"), ctypes.byref(h))
        else:
            self.lib.mc_pubkey_load(self.ctx, _path(k, "public key"), ctypes.byref(h))
        self._keep(self.lib.mc_pubkey_free, h)
        return h

    def seckey(self, k: KeyArg, password: Password):
        h = _ffi.c_handle()
        cb = self.callback(_ffi.PASSWORD_FN, _password_fn(password), _MC_ERR_PASSWORD)
        if _is_key_text(k):
            f, arg = self.lib.mc_seckey_from_text, _text(k, "secret key text")
        else:
            f, arg = self.lib.mc_seckey_load, _path(k, "secret key")
        self.call(f, self.ctx, arg, cb, None, ctypes.byref(h))
        self._keep(self.lib.mc_seckey_free, h)
        return h

    # Bundles and writers.

    def bundle(self, path: PathArg):
        h = _ffi.c_handle()
        self.lib.mc_bundle_open(self.ctx, _path(path, "bundle path"), ctypes.byref(h))
        self._keep(self.lib.mc_bundle_free, h)
        return h

    def trusted(self, trusted_keys: Optional[Keys]) -> list:
        """The public keys, read once; at least one."""
        keys = _key_list(trusted_keys)
        if not keys:
            raise UsageError("no trusted public key given (trusted_keys)")
        return [self.pubkey(k) for k in keys]

    def policy(self, b, pubs: list, threshold: int, min_version: int,
               require: Union[Mapping[str, str], Iterable[str], None]) -> None:
        for pk in pubs:
            self.lib.mc_bundle_trust(b, pk)
        # A key given twice is one key (the library counts it once): a threshold above
        # the distinct keys is no bundle's failure but the caller's, as in the tool.
        distinct = sum(1 for i, pk in enumerate(pubs)
                       if not any(self.lib.mc_pubkey_equal(q, pk) for q in pubs[:i]))
        if type(threshold) is int and threshold > distinct:
            again = ("" if distinct == len(pubs) else ", %d distinct (a key given again, under "
                     "any key id, counts once)" % distinct)
            raise UsageError("threshold=%d needs at least %d trusted keys; %d given%s"
                             % (threshold, threshold, len(pubs), again))
        self.lib.mc_bundle_set_threshold(b, _int(threshold, "threshold", 1, distinct))
        self.lib.mc_bundle_set_min_version(b, _int(min_version, "min_version", 0, U64))
        for k, v in _labels(require):
            self.lib.mc_bundle_require_label(b, _text(k, "label key"), _text(v, "label value"))

    def writer(self):
        h = _ffi.c_handle()
        self.lib.mc_writer_new(self.ctx, ctypes.byref(h))
        self._keep(self.lib.mc_writer_free, h)
        return h

    def usage(self):
        h = _ffi.c_handle()
        self.lib.mc_usage_new(self.ctx, ctypes.byref(h))
        self._keep(self.lib.mc_usage_free, h)
        return h

    def writer_setup(self, w, secret_keys: Optional[Keys], password: Password, labels,
                     bundle_version: int, expires: int, level: int,
                     env_facts: bool = False) -> List[Signature]:
        self.lib.mc_writer_set_created(w, _created())
        self.lib.mc_writer_set_bundle_version(w, _int(bundle_version, "bundle_version", 0, U64))
        self.lib.mc_writer_set_expires(w, _int(expires, "expires", 0, (1 << 63) - 1))
        self.lib.mc_writer_set_compression(w, _int(level, "level", 0, 19))
        if env_facts:  # a caller's label of the same name, set after, wins
            self.lib.mc_writer_set_label(w, AOT_REMOTE_LABEL.encode(), _aot_remote().encode())
        for k, v in _labels(labels):
            self.lib.mc_writer_set_label(w, _text(k, "label key"), _text(v, "label value"))
        sigs = []
        for k in _key_list(secret_keys):
            sk = self.seckey(k, password)
            self.lib.mc_writer_add_signer(w, sk)
            sigs.append(Signature(_str(self.lib.mc_seckey_id(sk)), "not_checked"))
        return sigs

    def report(self, w, path: PathArg, dry_run: bool, sigs: List[Signature], folders=(),
               skipped: int = 0, changes=()) -> SaveReport:
        """What the writer w holds, as saved (or, dry_run, as it would be) to path: once
        saved, what the bundle holds (a type and key recorded again, the last kept)."""
        lib = self.lib
        count, size = ((lib.mc_writer_artifact_count, lib.mc_writer_total_bytes) if dry_run
                       else (lib.mc_writer_saved_count, lib.mc_writer_saved_bytes))
        return SaveReport(os.fsdecode(_path(path)), bool(dry_run), count(w), size(w),
                          [*sigs], [*folders], skipped, [*changes])

    def info(self, b, path: PathArg, verified: bool) -> BundleInfo:
        lib = self.lib
        labels = {}
        for i in range(lib.mc_bundle_label_count(b)):
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            lib.mc_bundle_label(b, i, ctypes.byref(k), ctypes.byref(v))
            labels[_str(k.value)] = _str(v.value)
        sigs = [Signature(_str(lib.mc_bundle_signature_key_id(b, i)),
                          _str(lib.mc_sig_state_name(lib.mc_bundle_signature_state(b, i))))
                for i in range(lib.mc_bundle_signature_count(b))]
        arts = []
        for i in range(lib.mc_bundle_artifact_count(b)):
            t, k, h = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
            size = ctypes.c_uint64()
            lib.mc_bundle_artifact(b, i, ctypes.byref(t), ctypes.byref(k), ctypes.byref(size),
                                   ctypes.byref(h))
            x = lib.mc_bundle_artifact_executable(b, i)
            arts.append(Artifact(_str(t.value), _str(k.value), size.value, _str(h.value),
                                 x == 1))
        return BundleInfo(os.fsdecode(_path(path)), lib.mc_bundle_created(b),
                          lib.mc_bundle_version(b), lib.mc_bundle_expires(b), labels, sigs,
                          arts, verified, self.bundle_gpus(b))

    def bundle_gpus(self, b) -> Optional[List[str]]:
        """The targets of b's kernels, or None when they are not known."""
        lib = self.lib
        if lib.mc_bundle_gpu_targets_known(b) == _ffi.MC_GPU_UNKNOWN:
            return None
        return [_str(lib.mc_bundle_gpu_target(b, i))
                for i in range(lib.mc_bundle_gpu_target_count(b))]

    def host_gpus(self, given: Optional[Iterable[str]]) -> List[str]:
        """The host's GPU targets: those given (checked), else those detected."""
        if given is not None:
            out = [given] if isinstance(given, str) else [*given]
            for t in out:
                if not isinstance(t, str) or self.lib.mc_gpu_target_ok(t.encode()) != 1:
                    raise UsageError("gpu_targets: %r is not a GPU target (backend:arch as "
                                     "Triton names a kernel's target: cuda:90, hip:gfx942)"
                                     % (t,), "usage", -2)
            return out
        arr = ctypes.POINTER(ctypes.c_char_p)()
        n = ctypes.c_size_t()
        self.lib.mc_gpu_detect(self.ctx, ctypes.byref(arr), ctypes.byref(n))
        try:
            return [_str(arr[i]) for i in range(n.value)]
        finally:
            self.lib.mc_gpu_targets_free(arr, n.value)

    def roots(self) -> Dict[str, Optional[str]]:
        out: Dict[str, Optional[str]] = {}
        for tier in ROOT_TIERS:
            try:
                out[tier] = self.tier_root(tier)
            except Error:
                out[tier] = None
        return out

    def full_dest(self, type_: bytes, dest: Optional[bytes]) -> str:
        if dest is None:
            return ""
        tier = self.lib.mc_ctx_type_tier(self.ctx, type_)
        if tier is None:
            return os.fsdecode(dest)
        return os.path.join(self.tier_root(tier.decode()), os.fsdecode(dest))


def _password_fn(password: Password):
    """The mc_password_fn for a password given as text, a callable, or asked on the
    terminal when there is one."""
    def ask(ud, prompt, buf, buflen):
        p = _str(prompt) or "password: "
        if password is None:
            if not sys.stdin.isatty():
                return _MC_ERR_PASSWORD
            got: Union[str, bytes] = getpass.getpass(p)
        elif callable(password):
            got = password(p)
        else:
            got = password
        b = _text(got, "the password")
        if len(b) >= buflen:
            key = p[len("Password for "):-2] if p.startswith("Password for ") else "the key"
            raise UsageError("%s: the password given is %d bytes, over the %d a password "
                             "may have" % (key, len(b), buflen - 1), "password",
                             _MC_ERR_PASSWORD)
        ctypes.memmove(buf, b + b"\0", len(b) + 1)
        return 0
    return ask


def _types(types: Union[str, Iterable[str], None]) -> List[str]:
    if types is None:
        return []
    if isinstance(types, str):
        return [t for t in types.split(",") if t]
    return [*types]


def _select(s: _Session, b, types) -> None:
    for t in _types(types):
        try:
            s.lib.mc_bundle_select_type(b, _text(t, "type"))
        except Error as e:
            raise UsageError(e.message, "usage", -2) from None


def _load_in(s: _Session, b, bundle: PathArg, pubs: list, types, require, threshold: int,
             min_version: int, dry_run: bool, sync: bool, host: List[str] = (),
             skip_other_gpus: bool = False, usage=None) -> LoadReport:
    """Loads the opened bundle b (opened from the path bundle); host: the host's GPU
    targets (none: not checked); usage (an mc_usage) is told of each artifact loaded."""
    s.policy(b, pubs, threshold, min_version, require)
    _select(s, b, types)
    arr = (ctypes.c_char_p * max(1, len(host)))(*[t.encode() for t in host])
    s.lib.mc_bundle_set_host_gpus(b, arr, len(host))
    done: List[LoadedArtifact] = []

    def on_artifact(ud, what, type_, key, dest, size):
        if usage is not None and dest is not None and what != _ffi.MC_LOAD_SKIPPED:
            s.lib.mc_usage_add(usage, what, type_, dest)  # a failure: at mc_usage_start
        i = ctypes.c_size_t()
        s.lib.mc_bundle_find_artifact(b, type_, key, ctypes.byref(i))
        done.append(LoadedArtifact(ACTIONS.get(what, str(what)), _str(type_), _str(key), size,
                                   s.full_dest(type_, dest),
                                   s.lib.mc_bundle_artifact_executable(b, i.value) == 1))

    flags = ((_ffi.MC_LOAD_DRY_RUN if dry_run else 0) | (_ffi.MC_LOAD_SYNC if sync else 0) |
             (_ffi.MC_LOAD_SKIP_OTHER_GPUS if skip_other_gpus else 0))
    s.call(s.lib.mc_bundle_load, b, flags, s.callback(_ffi.ARTIFACT_FN, on_artifact), None)
    count = {a: sum(1 for d in done if d.action == a) for a in ACTIONS.values()}
    nbytes = sum(d.size for d in done if d.action not in ("unchanged", "skipped"))
    gpus = s.bundle_gpus(b)
    if gpus and not host:
        warnings.warn("megacache: %s: GPU targets not checked: no GPU seen (the bundle's "
                      "kernels are for %s; give this host's targets to check them)"
                      % (os.fsdecode(_path(bundle)), ", ".join(gpus)),
                      GpuTargetsNotChecked, stacklevel=3)
    return LoadReport(os.fsdecode(_path(bundle)), bool(dry_run), bool(sync) and not dry_run,
                      count["installed"], count["replaced"], count["unchanged"],
                      count["would_install"], count["would_replace"], nbytes, s.roots(), done,
                      gpus, [*host], bool(host), count["skipped"])


def load(bundle: PathArg, trusted_keys: Keys, cache_dir: Optional[PathArg] = None,
         triton_dir: Optional[PathArg] = None, types: Union[str, Iterable[str], None] = None,
         require: Union[Mapping[str, str], Iterable[str], None] = None, threshold: int = 1,
         min_version: int = 0, dry_run: bool = False, sync: bool = False,
         progress: Progress = None, gpu_targets: Optional[Iterable[str]] = None,
         skip_other_gpus: bool = False) -> LoadReport:
    """Verifies a bundle and installs its artifacts into the cache folders.

    The folders are those torch and Triton use here ($TORCHINDUCTOR_CACHE_DIR, else
    torch's default under the temp dir; $TRITON_CACHE_DIR, else ~/.triton/cache), or
    cache_dir (torch's) and triton_dir (Triton's) when given. All or nothing: on any
    failure nothing is installed and Error is raised.

    trusted_keys: one public key or several; threshold: how many of them must have
    signed; min_version: the lowest bundle version accepted; require: labels the bundle
    must carry ({"key": "value"} or ["key=value"]); types: install only these types
    ("inductor,autotune" or a list); dry_run: verify and report, write nothing; sync:
    flush the written files to disk before returning; progress: a callable(phase,
    done_bytes, total_bytes), False for none, None for a bar on a terminal.

    The bundle's Triton kernels are checked against this host's GPU targets, detected
    (:func:`gpu_targets`) or given as gpu_targets (["cuda:90"]: an image built on a
    machine without the GPU). A kernel for a target the host lacks raises
    GpuMismatchError with nothing installed, or with skip_other_gpus=True its kernel
    folder is left out (action "skipped") and the rest installed. With no GPU seen and
    no gpu_targets, everything is installed and a GpuTargetsNotChecked warning says so.
    """
    with _Session(cache_dir, triton_dir, progress) as s:
        return _load_in(s, s.bundle(bundle), bundle, s.trusted(trusted_keys), types, require,
                        threshold, min_version, dry_run, sync, s.host_gpus(gpu_targets),
                        skip_other_gpus)


class GpuTargetsNotChecked(UserWarning):
    """A load installed Triton kernels without checking them against the host's GPUs: no
    GPU was seen and no gpu_targets given."""


def gpu_targets() -> List[str]:
    """This host's GPU targets as Triton names them, sorted: "cuda:<major*10+minor>" per
    NVIDIA GPU (NVML, loaded at run time), "hip:<gfx name>" per AMD GPU (KFD); [] when
    none is seen."""
    with _Session(progress=False) as s:
        return s.host_gpus(None)


def verify(bundle: PathArg, trusted_keys: Keys, threshold: int = 1, min_version: int = 0,
           require: Union[Mapping[str, str], Iterable[str], None] = None,
           signatures_only: bool = False, progress: Progress = None) -> BundleInfo:
    """Checks a bundle's signatures, policy and (unless signatures_only) every byte of
    it; writes nothing. Returns its manifest, marked verified; raises on any failure."""
    with _Session(progress=progress) as s:
        b = s.bundle(bundle)
        s.policy(b, s.trusted(trusted_keys), threshold, min_version, require)
        f = s.lib.mc_bundle_check_signatures if signatures_only else s.lib.mc_bundle_verify
        s.call(f, b)
        return s.info(b, bundle, True)


def list_bundle(bundle: PathArg, trusted_keys: Optional[Keys] = None) -> BundleInfo:
    """A bundle's labels, signatures and artifacts, read from its manifest. Nothing is
    verified (verified is False): use :func:`verify` before trusting any of it. With
    trusted_keys, each signature's state says whether it verifies under them (nothing
    is refused); without, every one is "not_checked"."""
    with _Session() as s:
        b = s.bundle(bundle)
        keys = _key_list(trusted_keys)
        for pk in (s.trusted(keys) if keys else ()):
            s.lib.mc_bundle_trust(b, pk)
        return s.info(b, bundle, False)


def _record(s: _Session, w, keep_unknown: bool, on_skip) -> tuple:
    """Records the folders torch and Triton use: (folders, [skipped file count]). The
    count is a list: the save adds graph files it finds misnamed as it reads them."""
    s.lib.mc_writer_set_keep_unknown(w, 1 if keep_unknown else 0)
    skipped = [0]

    def on_scan(ud, what, rel, why):
        if what == _ffi.MC_SCAN_SKIPPED:
            skipped[0] += 1
            if on_skip is not None:
                on_skip(os.fsdecode(rel), _str(why))

    cb = s.callback(_ffi.SCAN_FN, on_scan)
    folders = []
    for tier, _ in SAVE_TIERS:
        path = s.tier_root(tier)
        before = s.lib.mc_writer_artifact_count(w)
        exists = os.path.isdir(path)
        if exists:
            f = (s.lib.mc_writer_add_cache_dir if tier == "inductor"
                 else s.lib.mc_writer_add_triton_cache)
            s.call(f, w, os.fsencode(path), cb, None)
        folders.append(Folder(tier, path, exists, s.lib.mc_writer_artifact_count(w) - before))
    return folders, skipped


def _nothing(folders: Sequence[Folder]) -> UsageError:
    parts = ["%s (%s)" % (f.path, "empty" if f.exists else "not there") for f in folders]
    return UsageError("nothing to save: no artifacts in " + " or ".join(parts), "no_artifacts")


def save(path: PathArg, secret_key: Optional[Keys], *, cache_dir: Optional[PathArg] = None,
         triton_dir: Optional[PathArg] = None,
         labels: Union[Mapping[str, str], Iterable[str], None] = None, bundle_version: int = 0,
         expires: int = 0, level: int = 3, keep_unknown: bool = False,
         password: Password = None, dry_run: bool = False,
         on_skip: Optional[Callable[[str, str], None]] = None,
         progress: Progress = None) -> SaveReport:
    """Records everything torch and Triton left in their cache folders (the ones
    :func:`load` installs into, or cache_dir / triton_dir) into a new bundle at path,
    signed by secret_key (one key, several, or None for an unsigned bundle).

    The bundle is written to a temp file renamed into place. Finding nothing raises
    UsageError naming both folders. password: for an encrypted secret key (text, or a
    callable(prompt)); asked on the terminal when None and there is one. created is
    $SOURCE_DATE_EPOCH when set, else now. on_skip(relpath, reason) hears of each file
    not recorded.
    """
    with _Session(cache_dir, triton_dir, progress) as s:
        w = s.writer()
        sigs = [] if dry_run else s.writer_setup(w, secret_key, password, labels, bundle_version,
                                                expires, level, env_facts=True)
        folders, skipped = _record(s, w, keep_unknown, on_skip)
        if s.lib.mc_writer_artifact_count(w) == 0:
            raise _nothing(folders)
        if not dry_run:
            s.call(s.lib.mc_writer_save, w, _path(path, "bundle path"))
        return s.report(w, path, dry_run, sigs, folders, skipped[0])


def pack_torch_artifacts(blob: Union[bytes, bytearray, memoryview], out: PathArg,
                         secret_key: Optional[Keys], *,
                         labels: Union[Mapping[str, str], Iterable[str], None] = None,
                         bundle_version: int = 0, expires: int = 0, level: int = 3,
                         password: Password = None, progress: Progress = None) -> SaveReport:
    """Makes a bundle at out of the bytes torch.compiler.save_cache_artifacts()[0]
    returned, signed by secret_key. :func:`torch_artifacts` of it gives those bytes back
    (for torch 2.8 and later blobs, byte for byte)."""
    data = bytes(blob)
    with _Session(progress=progress) as s:
        w = s.writer()
        sigs = s.writer_setup(w, secret_key, password, labels, bundle_version, expires, level)
        s.lib.mc_writer_add_torch_blob_memory(w, data, len(data))
        s.call(s.lib.mc_writer_save, w, _path(out, "bundle path"))
        return s.report(w, out, False, sigs)


def torch_artifacts(bundle: PathArg, trusted_keys: Keys, threshold: int = 1,
                    min_version: int = 0,
                    require: Union[Mapping[str, str], Iterable[str], None] = None,
                    torch_format: str = "current", progress: Progress = None) -> bytes:
    """Verifies a bundle and returns its torch artifacts as the bytes
    torch.compiler.load_cache_artifacts() takes. torch_format "2.7" writes torch 2.7's
    format. Types torch's format cannot hold (Triton's own cache, for one) are left out."""
    if torch_format not in TORCH_FORMATS:
        raise UsageError("torch_format must be one of %s, not %r"
                         % (", ".join(TORCH_FORMATS), torch_format))
    with _Session(progress=progress) as s:
        b = s.bundle(bundle)
        s.policy(b, s.trusted(trusted_keys), threshold, min_version, require)
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        s.call(s.lib.mc_bundle_export_torch_memory, b, TORCH_FORMATS[torch_format],
               ctypes.byref(data), ctypes.byref(n), _ffi.ARTIFACT_FN(), None)
        return ctypes.string_at(data, n.value)


def keygen(pub_path: PathArg, sec_path: PathArg, password: Optional[Union[str, bytes]] = None,
           overwrite: bool = False) -> str:
    """Makes a minisign key pair: the public key at pub_path, the secret key at sec_path
    (mode 0600), encrypted with password unless it is None. Returns the key id."""
    with _Session() as s:
        sk, pk = _ffi.c_handle(), _ffi.c_handle()
        s.lib.mc_keygen(s.ctx, ctypes.byref(sk), ctypes.byref(pk))
        s._keep(s.lib.mc_seckey_free, sk)
        s._keep(s.lib.mc_pubkey_free, pk)
        pw = None if password is None else _text(password, "password")
        s.lib.mc_keypair_save(s.ctx, sk, pk, _path(pub_path, "public key path"),
                              _path(sec_path, "secret key path"), pw, 1 if overwrite else 0)
        return _str(s.lib.mc_pubkey_id(pk))


class Warm:
    """What a :func:`warm` block did: the loads before it (loaded), the bundles that
    could not be used (cold: (path, error) pairs, with allow_cold), the save after it
    (saved: None when nothing was new or no save_to was given), and the cache folders
    loaded into and recorded from (roots, as :attr:`LoadReport.roots`).

    Once the block has ended, what it used: used, per artifact type, a :class:`Used`
    (the loaded files, how many of them were read, how many files were new), and
    used_not_seen, per reason, the loaded files whose reads could not be seen:
    "noatime" (a noatime mount), "not_owner" (another user's file), "read_only",
    "overlayfs" (found in place on overlayfs, maybe in an image's lower layer), "gone"
    (removed or replaced during the block), "other". Where that could not be told,
    both stay empty and used_error says why."""

    def __init__(self) -> None:
        self.loaded: List[LoadReport] = []
        self.cold: List[tuple] = []
        self.saved: Optional[SaveReport] = None
        self.save_error: Optional[Exception] = None
        self.roots: Dict[str, Optional[str]] = {}
        self.used: Dict[str, Used] = {}
        self.used_not_seen: Dict[str, int] = {}
        self.used_error: Optional[Exception] = None
        self._save_to: Optional[str] = None
        self._bundle = "BUNDLE"  # what `megacache list` is to be run on, to see its labels
        self._ended = False

    def __repr__(self) -> str:
        # One line of counts: the reports' own reprs list every artifact.
        parts = ["loaded %r: %d installed, %d replaced, %d unchanged"
                 % (r.bundle, r.installed, r.replaced, r.unchanged) for r in self.loaded]
        parts += ["cold %r: %s" % (path, why) for path, why in self.cold]
        if not self.loaded and not self.cold:
            parts.append("no bundle loaded")
        parts += self._used_lines()
        parts.append(self._save_repr())
        parts.append("roots " + ", ".join("%s=%r" % kv for kv in self.roots.items()))
        return "<megacache.Warm %s>" % "; ".join(parts)

    def _used_lines(self) -> List[str]:
        """What the block used, as `megacache run` tells it: a line, and a warning for
        the types it read nothing of; none before the block ended, or when nothing was
        loaded or new."""
        if self.used_error is not None:
            return ["what the block used cannot be told: %s" % self.used_error]
        sums = {f: sum(getattr(u, f) for u in self.used.values())
                for f in ("installed", "read", "new", "not_seen")}
        if sums["installed"] == 0 and sums["new"] == 0:
            return []
        line = "the block read %d of %d loaded artifact%s" % (
            sums["read"], sums["installed"], "" if sums["installed"] == 1 else "s")
        per = ["%s %d of %d" % (t, u.read, u.installed) for t, u in self.used.items()
               if u.installed]
        line += (" (%s)" % ", ".join(per) if per else "") + "; %d new" % sums["new"]
        if sums["not_seen"]:
            line += "; %d not seen (%s)" % (sums["not_seen"], ", ".join(
                "%d %s" % (n, UNSEEN_WORDS.get(why, why)) for why, n in self.used_not_seen.items()))
        # Types torch reads only to compile are not needed once FX graphs were read.
        fx_read = self.used["inductor"].read if "inductor" in self.used else 0
        unread = ["%s (%d)" % (t, u.installed - u.not_seen) for t, u in self.used.items()
                  if u.installed > u.not_seen and u.read == 0 and
                  not (fx_read and t in _READ_ON_MISS)]
        if not unread:
            return [line]
        return [line, "read none of the loaded %s artifacts; the likely cause is a torch, "
                "Triton or config mismatch: compare the bundle's labels (megacache list %s) "
                "with this host's" % (", ".join(unread), self._bundle)]

    def _save_repr(self) -> str:
        if self.saved is not None:
            s = self.saved
            added = sum(1 for c in s.changes if c.what == "added")
            return "saved %r: %d artifact%s (%d added, %d changed)" % (
                s.bundle, s.artifact_count, "" if s.artifact_count == 1 else "s", added,
                len(s.changes) - added)
        if self._save_to is None:
            return "no save_to"
        if not self._ended:
            return "saves new artifacts to %r after the block" % self._save_to
        if self.save_error is not None:
            return "the save to %r failed: %s" % (self._save_to, self.save_error)
        return "nothing new, %r not written" % self._save_to


# The types torch reads only to compile (the autotuning results, the generated code,
# the kernels an FX graph entry does not carry): unread after FX graph hits.
_READ_ON_MISS = ("autotune", "gemm_timing", "kernel_code", "triton")

_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _abs(p: Optional[PathArg], what: str) -> Optional[str]:
    return None if p is None else os.path.abspath(os.fsdecode(_path(p, what)))


@contextlib.contextmanager
def warm(bundles: Union[PathArg, Iterable[PathArg], None], trusted_keys: Optional[Keys],
         save_to: Optional[PathArg] = None, secret_key: Optional[Keys] = None, *,
         cache_dir: Optional[PathArg] = None, triton_dir: Optional[PathArg] = None,
         types: Union[str, Iterable[str], None] = None, allow_cold: bool = False,
         labels: Union[Mapping[str, str], Iterable[str], None] = None,
         password: Password = None, sync: bool = False,
         progress: Progress = None, gpu_targets: Optional[Iterable[str]] = None,
         skip_other_gpus: bool = False) -> Iterator[Warm]:
    """Loads bundles before the block and saves what is new in the caches after it::

        with megacache.warm("job.mcache", "k.pub", save_to="next.mcache",
                            secret_key="k.key") as w:
            train()

    Before the block: the signing keys are read (a password is asked for now, not after
    hours of training) and each bundle is verified and installed; a bundle that is
    missing or fails verification raises, or with allow_cold=True is noted in w.cold and
    skipped (a wrong argument, such as no trusted key, raises either way). cache_dir
    and triton_dir (made absolute) are set as $TORCHINDUCTOR_CACHE_DIR and
    $TRITON_CACHE_DIR for the block, so torch in this process uses them, and restored
    after.

    After the block, also when it raised: the cache folders are recorded, everything the
    loaded bundles hold already is dropped, and the rest (what the block compiled, and
    whatever else the folders held that the bundles lack) is saved to save_to, only when
    something is left (w.saved). The block's exception is never swallowed: a save that
    fails after it is kept in w.save_error (and, on Python 3.11 and later, added to it
    as a note).

    Each bundle's Triton kernels are checked against the host's GPU targets as by
    :func:`load` (gpu_targets, skip_other_gpus); a bundle for another GPU raises
    GpuMismatchError, or with allow_cold=True goes in w.cold.

    After the block, also when it raised, and before the save: what it used (w.used,
    per artifact type: how many files the loads put or found in place, how many of them
    were read during the block, how many files it wrote that were not loaded). Just
    before the block, each loaded file's access time is set to a mark in the past (its
    change time moves to now), and a file whose access time differs after the block was
    read, by this process or any other: under the default relatime mounts a read updates
    it then. No hook in torch is needed, nor any privilege, but a file on a noatime or
    read-only mount, another user's file, and one found in place on overlayfs (perhaps in
    an image's lower layer) cannot be seen: those are counted in w.used_not_seen, never as
    read or unread. repr(w) says it in a line; a type of which nothing was read is said
    plainly: the likely cause is a torch, Triton or config mismatch, and `megacache list`
    of the bundle shows the labels to compare with this host's.

    It changes this process's environment: do not run two warm() blocks at once, or
    library calls in other threads during one.
    """
    paths = [] if bundles is None else _key_list(bundles)
    cache_dir, triton_dir = _abs(cache_dir, "cache_dir"), _abs(triton_dir, "triton_dir")
    w = Warm()
    with _Session(cache_dir, triton_dir, progress) as s:
        w.roots = s.roots()
        usage = s.usage()
        if len(paths) == 1:
            w._bundle = os.fsdecode(_path(paths[0]))
        # Read now: a bad key file is the caller's mistake, never a cold start.
        pubs = s.trusted(trusted_keys) if paths else []
        wr, sigs, aot_label = None, [], False
        if save_to is not None:
            w._save_to = os.fsdecode(_path(save_to, "save_to"))
            wr = s.writer()
            sigs = s.writer_setup(wr, secret_key, password, labels, 0, 0, 3)
            # taken at the save, after the block: its code may set torch's config
            aot_label = not any(k == AOT_REMOTE_LABEL for k, _ in _labels(labels))
        bases = []
        host = s.host_gpus(gpu_targets) if paths else []
        for p in paths:
            try:
                b = s.bundle(p)
                w.loaded.append(_load_in(s, b, p, pubs, types, None, 1, 0, False, sync, host,
                                         skip_other_gpus, usage))
                bases.append(b)
            except Error as e:
                # Only the bundle's own fault goes cold: missing, unreadable, untrusted.
                bundle_fault = isinstance(e, VerificationError) or e.name in (
                    "MC_ERR_IO", "MC_ERR_NOT_BUNDLE")
                if not (allow_cold and bundle_fault):
                    raise
                w.cold.append((os.fsdecode(_path(p)), str(e)))
        saved_env = {var: os.environ.get(var) for var in _ENV}
        for var, val in zip(_ENV, (cache_dir, triton_dir)):
            if val is not None:
                os.environ[var] = val
        usage = _used_start(s, w, usage)
        try:
            yield w
        except BaseException as body:
            _warm_used(s, w, usage)
            _warm_save(s, w, wr, sigs, bases, save_to, body, aot_label)
            raise
        else:
            _warm_used(s, w, usage)
            _warm_save(s, w, wr, sigs, bases, save_to, None, aot_label)
        finally:
            for var, old in saved_env.items():
                if old is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = old


def _used_start(s: _Session, w: Warm, usage):
    """Sets the marks on the loaded files just before the block: usage, or None (with
    w.used_error) when what the block uses cannot be told."""
    try:
        s.call(s.lib.mc_usage_start, usage)
    except Error as e:
        w.used_error = e
        return None
    return usage


def _warm_used(s: _Session, w: Warm, usage) -> None:
    """After the block: what it used, into w.used and w.used_not_seen. A failure is kept
    in w.used_error, never raised: it is a report, not the block's work."""
    if usage is None:
        return
    try:
        s.call(s.lib.mc_usage_finish, usage)
    except Error as e:
        w.used_error = e
        return
    lib, i = s.lib, 0
    while lib.mc_usage_type(usage, i) is not None:
        counts = [lib.mc_usage_count(usage, i, k) for k in range(4)]  # MC_USED_* order
        w.used[_str(lib.mc_usage_type(usage, i))] = Used(*counts)
        i += 1
    for why in range(_ffi.MC_UNSEEN_KINDS):
        n = lib.mc_usage_not_seen(usage, why)
        if n:
            w.used_not_seen[_str(lib.mc_unseen_name(why))] = n


def _warm_save(s: _Session, w: Warm, wr, sigs: List[Signature], bases, save_to,
               body: Optional[BaseException], aot_label: bool) -> None:
    w._ended = True
    if wr is None:
        return
    try:
        if aot_label:
            s.lib.mc_writer_set_label(wr, AOT_REMOTE_LABEL.encode(), _aot_remote().encode())
        w.saved = _save_new(s, wr, sigs, bases, save_to)
    except Exception as e:  # noqa: B902 - the block's exception goes on instead
        if body is None:
            raise
        w.save_error = e
        if hasattr(body, "add_note"):  # Python 3.11
            body.add_note("megacache: the save after this block failed: %s" % e)
        return
    w.save_error = None


def _save_new(s: _Session, wr, sigs: List[Signature], bases,
              save_to) -> Optional[SaveReport]:
    folders, skipped = _record(s, wr, False, None)
    changes: List[Change] = []

    def on_diff(ud, what, type_, key, size_a, size_b):
        changes.append(Change("added" if what == _ffi.MC_DIFF_ADDED else "changed", _str(type_),
                              _str(key), size_b))

    arr = (_ffi.c_handle * max(1, len(bases)))(*[b.value for b in bases])
    s.call(s.lib.mc_writer_drop_known, wr, arr, len(bases), s.callback(_ffi.DIFF_FN, on_diff),
           None)
    if s.lib.mc_writer_artifact_count(wr) == 0:
        return None
    s.call(s.lib.mc_writer_save, wr, _path(save_to, "save_to"))
    return s.report(wr, save_to, False, sigs, folders, skipped[0], changes)


# Last, so that the code above never calls it by mistake for the builtin.
list = list_bundle  # noqa: A001 - megacache.list(bundle), as the command is named
