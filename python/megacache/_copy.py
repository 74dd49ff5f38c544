"""copy(): a bundle's bytes from a file or a registry to a file or a registry."""

from __future__ import annotations

import os
from typing import Optional

from ._args import PathArg, Progress, _path, _registry, _str
from ._reports import CopyReport
from ._session import _Session


def copy(src: PathArg, dst: PathArg, *, registry_ca: Optional[PathArg] = None,
         plain_http: bool = False, registry_user: Optional[str] = None,
         registry_password: Optional[str] = None, timeout: Optional[int] = None,
         progress: Progress = None) -> CopyReport:
    """Copies the bundle at src to dst, its bytes unchanged, as the tool's copy does:
    each a file's path or a registry reference, "oci://HOST[:PORT]/REPO[:TAG]" (a str;
    src may also name a manifest, "oci://HOST/REPO@sha256:HEX"). Signatures are not
    checked, only that src is a bundle by its first bytes and, from a registry, the
    registry's digests; a file dst is written whole or not at all, replacing one there.
    Returns the digests (:class:`CopyReport`).

    The registry settings, which every call that takes a reference takes too:
    registry_ca, a PEM file of the CAs to trust instead of the system's; plain_http=True
    allows plain HTTP to any registry (without it, only to localhost, 127.0.0.0/8 and
    ::1); registry_user and registry_password (str, never shown in an error) log in,
    else $MEGACACHE_REGISTRY_USER and $MEGACACHE_REGISTRY_PASSWORD, else the auth files
    podman and docker write; timeout: the seconds a registry may send nothing, or take
    to connect, before the call gives up (default 30).
    """
    reg = _registry(registry_ca, plain_http, registry_user, registry_password, timeout)
    a, b = _path(src, "source"), _path(dst, "destination")
    with _Session(progress=progress, registry=reg) as s:
        s.call(s.lib.mc_copy, s.ctx, a, b)
        manifest = s.lib.mc_ctx_registry_digest(s.ctx, 0)
        layer = _str(s.lib.mc_ctx_registry_digest(s.ctx, 1))
        return CopyReport(os.fsdecode(a), os.fsdecode(b), _str(manifest) if manifest else layer,
                          layer, s.lib.mc_ctx_registry_size(s.ctx))
