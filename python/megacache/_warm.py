"""warm(): the loads before a block, what it used, and the save of what it left new."""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Union

from . import _ffi
from ._args import (AOT_REMOTE_LABEL, USED_LABEL, Keys, PathArg, Password, Progress, _aot_remote, _key_list,
                    _labels, _path, _registry, _str)
from ._errors import Error, VerificationError
from ._load import _load_in
from ._reports import Change, SaveReport, Signature, Used, Warm
from ._save import _record
from ._session import _Session

_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT")


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
         skip_other_gpus: bool = False, vllm_dir: Optional[PathArg] = None,
         registry_ca: Optional[PathArg] = None, plain_http: bool = False,
         registry_user: Optional[str] = None, registry_password: Optional[str] = None,
         timeout: Optional[int] = None, save_used: Optional[PathArg] = None,
         save_used_keep_unseen: bool = False) -> Iterator[Warm]:
    """Loads bundles before the block and saves what is new in the caches after it::

        with megacache.warm("job.mcache", "k.pub", save_to="next.mcache",
                            secret_key="k.key") as w:
            train()

    Before the block: the signing keys are read (a password is asked for now, not after
    hours of training) and each bundle is verified and installed; a bundle that is
    missing or fails verification raises, or with allow_cold=True is noted in w.cold and
    skipped (a wrong argument, such as no trusted key, raises either way). cache_dir,
    triton_dir and vllm_dir (made absolute) are set as $TORCHINDUCTOR_CACHE_DIR,
    $TRITON_CACHE_DIR and $VLLM_CACHE_ROOT for the block, so torch and vLLM in this
    process use them, and restored after.

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

    save_used: after the block (and after save_to), a bundle of what it used of the
    caches is saved there (w.saved_used): the files it read, of those loaded and of those
    the folders held already (watched the same way), and the files it wrote, each with
    the rest of its unit (a Triton kernel's folder, the kernel code an FX graph entry
    names), labelled megacache.contents=used; nothing when it used nothing. It is for the
    same job on the same GPU and torch; not after a block that raised, which used part of
    what the job needs. When the reads of some files could not be seen it is not written
    and NotSeenError is raised (and kept in w.save_used_error), unless
    save_used_keep_unseen=True keeps those files.

    Each bundle, save_to and save_used may be a registry reference, "oci://HOST[:PORT]/REPO[:TAG]"
    (a str), as :func:`load` and :func:`save` take them, with their registry settings
    (registry_ca, plain_http, registry_user, registry_password, timeout); with
    allow_cold=True, a reference the registry does not have (error "remote") goes in
    w.cold: the first run of a job whose tag is not pushed yet starts cold.

    It changes this process's environment: do not run two warm() blocks at once, or
    library calls in other threads during one.
    """
    paths = [] if bundles is None else _key_list(bundles)
    cache_dir, triton_dir = _abs(cache_dir, "cache_dir"), _abs(triton_dir, "triton_dir")
    vllm_dir = _abs(vllm_dir, "vllm_dir")
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    w = Warm()
    with _Session(cache_dir, triton_dir, progress, vllm_dir, reg) as s:
        w.roots = s.roots()
        usage = s.usage()
        if len(paths) == 1:
            w._bundle = os.fsdecode(_path(paths[0]))
        # Read now: a bad key file is the caller's mistake, never a cold start.
        pubs = s.trusted(trusted_keys) if paths else []
        wr, sigs, aot_label = _save_setup(s, w, save_to, secret_key, password, labels)
        uw, usigs = _used_setup(s, w, save_used, secret_key, password, labels, usage)
        host = s.host_gpus(gpu_targets) if paths else []
        bases = _load_all(s, w, paths, pubs, types, sync, host, skip_other_gpus, allow_cold,
                          usage)
        saved_env = _env_set(cache_dir, triton_dir, vllm_dir)
        usage = _used_start(s, w, usage)
        try:
            yield w
        except BaseException as body:
            _warm_used(s, w, usage)
            _warm_save(s, w, wr, sigs, bases, save_to, body, aot_label)
            _warm_save_used(s, w, uw, usigs, usage, save_used, save_used_keep_unseen, body)
            raise
        else:
            _warm_used(s, w, usage)
            _warm_save(s, w, wr, sigs, bases, save_to, None, aot_label)
            _warm_save_used(s, w, uw, usigs, usage, save_used, save_used_keep_unseen, None)
        finally:
            _env_restore(saved_env)


def _save_setup(s: _Session, w: Warm, save_to, secret_key: Optional[Keys],
                password: Password, labels) -> tuple:
    """Before the block, the save after it: (writer, signatures, whether the AOT label
    is to be taken at the save); (None, [], False) without save_to. The secret keys are
    read now: a password is asked for before the block, not after hours of training."""
    if save_to is None:
        return None, [], False
    w._save_to = os.fsdecode(_path(save_to, "save_to"))
    wr = s.writer()
    sigs = s.writer_setup(wr, secret_key, password, labels, 0, 0, 3)
    # taken at the save, after the block: its code may set torch's config
    aot_label = not any(k == AOT_REMOTE_LABEL for k, _ in _labels(labels))
    return wr, sigs, aot_label


def _used_setup(s: _Session, w: Warm, save_used, secret_key: Optional[Keys],
                password: Password, labels, usage) -> tuple:
    """Before the block, the bundle of what it used: (writer, signatures), (None, [])
    without save_used. The folders' files are watched as well as those loaded."""
    if save_used is None:
        return None, []
    w._save_used = os.fsdecode(_path(save_used, "save_used"))
    uw = s.writer()
    sigs = s.writer_setup(uw, secret_key, password, labels, 0, 0, 3)
    s.lib.mc_writer_set_label(uw, USED_LABEL.encode(), b"used")
    s.call(s.lib.mc_usage_watch_all, usage)
    return uw, sigs


def _load_all(s: _Session, w: Warm, paths: List[PathArg], pubs: list, types, sync: bool,
              host: List[str], skip_other_gpus: bool, allow_cold: bool, usage) -> list:
    """Loads each bundle into w.loaded, or, allow_cold, one at fault into w.cold: the
    handles of those loaded, whose artifacts the save after the block leaves out."""
    bases = []
    for p in paths:
        try:
            b = s.bundle(p)
            # stacklevel=4: one past this function, the frame that entered the block
            w.loaded.append(_load_in(s, b, p, pubs, types, None, 1, 0, False, sync, host,
                                     skip_other_gpus, usage, stacklevel=4))
            bases.append(b)
        except Error as e:
            # Only the bundle's own fault goes cold: missing (a file, or a registry's
            # reference), unreadable, untrusted.
            bundle_fault = isinstance(e, VerificationError) or e.name in (
                "MC_ERR_IO", "MC_ERR_NOT_BUNDLE", "MC_ERR_REMOTE")
            if not (allow_cold and bundle_fault):
                raise
            w.cold.append((os.fsdecode(_path(p)), str(e)))
    return bases


def _env_set(cache_dir: Optional[str], triton_dir: Optional[str],
             vllm_dir: Optional[str]) -> Dict[str, Optional[str]]:
    """Points $TORCHINDUCTOR_CACHE_DIR, $TRITON_CACHE_DIR and $VLLM_CACHE_ROOT at the
    folders given, for the block; what they were, for _env_restore()."""
    saved_env = {var: os.environ.get(var) for var in _ENV}
    for var, val in zip(_ENV, (cache_dir, triton_dir, vllm_dir)):
        if val is not None:
            os.environ[var] = val
    return saved_env


def _env_restore(saved_env: Dict[str, Optional[str]]) -> None:
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


def _warm_save_used(s: _Session, w: Warm, uw, sigs: List[Signature], usage, save_used,
                    keep_unseen: bool, body: Optional[BaseException]) -> None:
    """After the block and its save: the bundle of what it used, into w.saved_used; a
    failure raises. Not after a block that raised: it used part of what the job needs."""
    w._raised = body is not None
    if uw is None or body is not None:
        return
    try:
        if usage is None:
            raise w.used_error or Error("what the block used could not be told")
        left, unseen = ctypes.c_size_t(), ctypes.c_size_t()
        s.call(s.lib.mc_usage_record, usage, uw, _ffi.MC_USED_KEEP_UNSEEN if keep_unseen else 0,
               ctypes.byref(left), ctypes.byref(unseen))
        w.used_left_out, w.used_kept_unseen = left.value, unseen.value
        if s.lib.mc_writer_artifact_count(uw) > 0:
            s.call(s.lib.mc_writer_save, uw, _path(save_used, "save_used"))
            w.saved_used = s.report(uw, save_used, False, sigs)
    except Exception as e:  # noqa: B902 - kept for repr(w), and raised
        w.save_used_error = e
        raise


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
