"""The calls that write: save (record the cache folders into a bundle), a bundle of
torch's own bytes, and a key pair."""

from __future__ import annotations

import ctypes
import os
from typing import Callable, Iterable, Mapping, Optional, Sequence, Union

from . import _ffi
from ._args import Keys, PathArg, Password, Progress, _path, _registry, _str, _text
from ._errors import UsageError
from ._reports import Folder, SaveReport
from ._session import _Session

# The folders save reads and load writes by default, in save's order.
SAVE_TIERS = (("inductor", "torch's cache dir"), ("triton_home", "Triton's own cache"),
              ("vllm", "vLLM's cache"))


def _record(s: _Session, w, keep_unknown: bool, on_skip) -> tuple:
    """Records the folders torch, Triton and vLLM use: (folders, [skipped file count]).
    The count is a list: the save adds graph files it finds misnamed as it reads them."""
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
            f = {"inductor": s.lib.mc_writer_add_cache_dir,
                 "triton_home": s.lib.mc_writer_add_triton_cache,
                 "vllm": s.lib.mc_writer_add_vllm_dir}[tier]
            s.call(f, w, os.fsencode(path), cb, None)
        folders.append(Folder(tier, path, exists, s.lib.mc_writer_artifact_count(w) - before))
    return folders, skipped


def _nothing(folders: Sequence[Folder]) -> UsageError:
    parts = ["%s (%s)" % (f.path, "empty" if f.exists else "not there") for f in folders]
    return UsageError("nothing to save: no artifacts in %s or %s"
                      % (", ".join(parts[:-1]), parts[-1]), "no_artifacts")


def save(path: PathArg, secret_key: Optional[Keys], *, cache_dir: Optional[PathArg] = None,
         triton_dir: Optional[PathArg] = None, vllm_dir: Optional[PathArg] = None,
         labels: Union[Mapping[str, str], Iterable[str], None] = None, bundle_version: int = 0,
         expires: int = 0, level: int = 3, keep_unknown: bool = False,
         password: Password = None, dry_run: bool = False,
         on_skip: Optional[Callable[[str, str], None]] = None,
         progress: Progress = None, registry_ca: Optional[PathArg] = None,
         plain_http: bool = False, registry_user: Optional[str] = None,
         registry_password: Optional[str] = None, timeout: Optional[int] = None) -> SaveReport:
    """Records everything torch, Triton and vLLM left in their cache folders (the ones
    :func:`load` installs into, or cache_dir / triton_dir / vllm_dir) into a new bundle
    at path, signed by secret_key (one key, several, or None for an unsigned bundle).
    vLLM's is $VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else ~/.cache/vllm; a folder
    that is not there is skipped, and said so in the report's folders.

    The bundle is written to a temp file renamed into place. Finding nothing raises
    UsageError naming the three folders. password: for an encrypted secret key (text, or a
    callable(prompt)); asked on the terminal when None and there is one. created is
    $SOURCE_DATE_EPOCH when set, else now. on_skip(relpath, reason) hears of each file
    not recorded.

    path may be a registry reference, "oci://HOST[:PORT]/REPO[:TAG]" (a str): the bundle
    is pushed there, and the report's registry gives its digests (registry_ca,
    plain_http, registry_user, registry_password and timeout: as :func:`copy` takes them).
    """
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(cache_dir, triton_dir, progress, vllm_dir, reg) as s:
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
                         password: Password = None, progress: Progress = None,
                         registry_ca: Optional[PathArg] = None, plain_http: bool = False,
                         registry_user: Optional[str] = None,
                         registry_password: Optional[str] = None,
                         timeout: Optional[int] = None) -> SaveReport:
    """Makes a bundle at out of the bytes torch.compiler.save_cache_artifacts()[0]
    returned, signed by secret_key. :func:`torch_artifacts` of it gives those bytes back
    (for torch 2.8 and later blobs, byte for byte). out and the registry settings: as
    :func:`save` takes them."""
    data = bytes(blob)
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    with _Session(progress=progress, registry=reg) as s:
        w = s.writer()
        sigs = s.writer_setup(w, secret_key, password, labels, bundle_version, expires, level)
        s.lib.mc_writer_add_torch_blob_memory(w, data, len(data))
        s.call(s.lib.mc_writer_save, w, _path(out, "bundle path"))
        return s.report(w, out, False, sigs)


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
