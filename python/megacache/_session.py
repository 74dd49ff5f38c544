"""One library context and the handles made from it (keys, bundles, writers, usage),
freed together; Python callbacks guarded so that their exceptions outlive the C call."""

from __future__ import annotations

import ctypes
import getpass
import os
import sys
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _ffi
from ._args import (AOT_REMOTE_LABEL, KeyArg, Keys, PathArg, Password, Progress, _aot_remote,
                    _created, _int, _is_key_text, _key_list, _labels, _path, _progress_fn, _str,
                    _text)
from ._errors import Error, UsageError
from ._reports import Artifact, BundleInfo, RegistryArtifact, SaveReport, Signature

ROOT_TIERS = ("inductor", "triton", "triton_home", "vllm")

_MC_ERR_PASSWORD = -19
U64 = (1 << 64) - 1


def library_version() -> str:
    """The version of the libmegacache this package loaded."""
    return _ffi.lib().mc_version().decode()


class _Session:
    """One library context and everything made from it, freed together on close.

    Also carries the progress callback and the exception a Python callback raised,
    which is raised again once the library call returns.
    """

    def __init__(self, cache_dir: Optional[PathArg] = None, triton_dir: Optional[PathArg] = None,
                 progress: Progress = False, vllm_dir: Optional[PathArg] = None,
                 registry: Sequence[Tuple[int, bytes]] = ()):
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
            if vllm_dir is not None:
                self.lib.mc_ctx_set_tier_root(self.ctx, b"vllm", _path(vllm_dir, "vllm_dir"))
            fn = _progress_fn(progress)
            if fn is not None:
                cb = self.callback(_ffi.PROGRESS_FN,
                                   lambda ud, phase, done, total: fn(phase.decode(), done, total))
                self.lib.mc_ctx_set_progress(self.ctx, cb, None)
            for which, value in registry:
                self.lib.mc_ctx_set_registry(self.ctx, which, value)
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
                          [*sigs], [*folders], skipped, [*changes],
                          None if dry_run else self.registry_artifact(path))

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
                          arts, verified, self.bundle_gpus(b), self.registry_artifact(path))

    def registry_artifact(self, path: PathArg) -> Optional[RegistryArtifact]:
        """What the last push or read of the reference path went through; None when path
        is a file's."""
        lib, ref = self.lib, _path(path)
        digest = lib.mc_ctx_registry_digest(self.ctx, 0)
        if not lib.mc_is_reference(ref) or digest is None:
            return None
        return RegistryArtifact(_pinned(_str(ref), _str(digest)),
                                _str(digest), _str(lib.mc_ctx_registry_digest(self.ctx, 1)),
                                lib.mc_ctx_registry_size(self.ctx))

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


def _pinned(ref: str, digest: str) -> str:
    """The reference oci://HOST[:PORT]/REPO[:TAG][@DIGEST] as oci://HOST[:PORT]/REPO@digest."""
    ref = ref.split("@", 1)[0]
    slash = ref.rfind("/")
    colon = ref.find(":", slash)
    return (ref if colon < 0 else ref[:colon]) + "@" + digest


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
