"""The calls that read bundles: load (verify and install), verify, list, the host's
GPU targets, and torch's own bytes out of a bundle."""

from __future__ import annotations

import ctypes
import os
import warnings
from typing import Iterable, List, Mapping, Optional, Union

from . import _ffi
from ._args import Keys, PathArg, Progress, _key_list, _path, _registry, _str, _text
from ._errors import Error, UsageError
from ._reports import BundleInfo, LoadedArtifact, LoadReport
from ._session import _Session

ACTIONS = {_ffi.MC_LOAD_INSTALLED: "installed", _ffi.MC_LOAD_REPLACED: "replaced",
           _ffi.MC_LOAD_UNCHANGED: "unchanged", _ffi.MC_LOAD_PLANNED: "would_install",
           _ffi.MC_LOAD_WOULD_REPLACE: "would_replace", _ffi.MC_LOAD_SKIPPED: "skipped"}
TORCH_FORMATS = {"current": _ffi.MC_TORCH_FORMAT_CURRENT, "2.7": _ffi.MC_TORCH_FORMAT_2_7}


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
             skip_other_gpus: bool = False, usage=None, stacklevel: int = 3) -> LoadReport:
    """Loads the opened bundle b (opened from the path bundle); host: the host's GPU
    targets (none: not checked); usage (an mc_usage) is told of each artifact loaded;
    stacklevel: the frame the GpuTargetsNotChecked warning names (3: the caller's
    caller)."""
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
                      GpuTargetsNotChecked, stacklevel=stacklevel)
    return LoadReport(os.fsdecode(_path(bundle)), bool(dry_run), bool(sync) and not dry_run,
                      count["installed"], count["replaced"], count["unchanged"],
                      count["would_install"], count["would_replace"], nbytes, s.roots(), done,
                      gpus, [*host], bool(host), count["skipped"], s.registry_artifact(bundle))


def load(bundle: PathArg, trusted_keys: Keys, cache_dir: Optional[PathArg] = None,
         triton_dir: Optional[PathArg] = None, types: Union[str, Iterable[str], None] = None,
         require: Union[Mapping[str, str], Iterable[str], None] = None, threshold: int = 1,
         min_version: int = 0, dry_run: bool = False, sync: bool = False,
         progress: Progress = None, gpu_targets: Optional[Iterable[str]] = None,
         skip_other_gpus: bool = False, vllm_dir: Optional[PathArg] = None, *,
         registry_ca: Optional[PathArg] = None, plain_http: bool = False,
         registry_user: Optional[str] = None, registry_password: Optional[str] = None,
         timeout: Optional[int] = None) -> LoadReport:
    """Verifies a bundle and installs its artifacts into the cache folders.

    The folders are those torch, Triton and vLLM use here ($TORCHINDUCTOR_CACHE_DIR,
    else torch's default under the temp dir; $TRITON_CACHE_DIR, else ~/.triton/cache;
    $VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else ~/.cache/vllm), or cache_dir
    (torch's), triton_dir (Triton's) and vllm_dir (vLLM's) when given. All or nothing:
    on any failure nothing is installed and Error is raised.

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

    bundle may be a registry reference, "oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]" (a
    str), read as it streams; registry_ca, plain_http, registry_user, registry_password
    and timeout are as :func:`copy` takes them.
    """
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(cache_dir, triton_dir, progress, vllm_dir, reg) as s:
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
           signatures_only: bool = False, progress: Progress = None, *,
           registry_ca: Optional[PathArg] = None, plain_http: bool = False,
           registry_user: Optional[str] = None, registry_password: Optional[str] = None,
           timeout: Optional[int] = None) -> BundleInfo:
    """Checks a bundle's signatures, policy and (unless signatures_only) every byte of
    it; writes nothing. Returns its manifest, marked verified; raises on any failure.
    bundle and the registry settings: as :func:`load` takes them."""
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(progress=progress, registry=reg) as s:
        b = s.bundle(bundle)
        s.policy(b, s.trusted(trusted_keys), threshold, min_version, require)
        f = s.lib.mc_bundle_check_signatures if signatures_only else s.lib.mc_bundle_verify
        s.call(f, b)
        return s.info(b, bundle, True)


def list_bundle(bundle: PathArg, trusted_keys: Optional[Keys] = None, *,
                registry_ca: Optional[PathArg] = None, plain_http: bool = False,
                registry_user: Optional[str] = None, registry_password: Optional[str] = None,
                timeout: Optional[int] = None) -> BundleInfo:
    """A bundle's labels, signatures and artifacts, read from its manifest. Nothing is
    verified (verified is False): use :func:`verify` before trusting any of it. With
    trusted_keys, each signature's state says whether it verifies under them (nothing
    is refused); without, every one is "not_checked". bundle and the registry settings:
    as :func:`load` takes them."""
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(registry=reg) as s:
        b = s.bundle(bundle)
        keys = _key_list(trusted_keys)
        for pk in (s.trusted(keys) if keys else ()):
            s.lib.mc_bundle_trust(b, pk)
        return s.info(b, bundle, False)


def torch_artifacts(bundle: PathArg, trusted_keys: Keys, threshold: int = 1,
                    min_version: int = 0,
                    require: Union[Mapping[str, str], Iterable[str], None] = None,
                    torch_format: str = "current", progress: Progress = None, *,
                    registry_ca: Optional[PathArg] = None, plain_http: bool = False,
                    registry_user: Optional[str] = None,
                    registry_password: Optional[str] = None,
                    timeout: Optional[int] = None) -> bytes:
    """Verifies a bundle and returns its torch artifacts as the bytes
    torch.compiler.load_cache_artifacts() takes. torch_format "2.7" writes torch 2.7's
    format. Types torch's format cannot hold (Triton's own cache, for one) are left out.
    bundle and the registry settings: as :func:`load` takes them."""
    if torch_format not in TORCH_FORMATS:
        raise UsageError("torch_format must be one of %s, not %r"
                         % (", ".join(TORCH_FORMATS), torch_format))
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(progress=progress, registry=reg) as s:
        b = s.bundle(bundle)
        s.policy(b, s.trusted(trusted_keys), threshold, min_version, require)
        data, n = ctypes.c_void_p(), ctypes.c_size_t()
        s.call(s.lib.mc_bundle_export_torch_memory, b, TORCH_FORMATS[torch_format],
               ctypes.byref(data), ctypes.byref(n), _ffi.ARTIFACT_FN(), None)
        return ctypes.string_at(data, n.value)
