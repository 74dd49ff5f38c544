"""megacache: torch.compile caches in one signed bundle, from inside the Python process.

A thin layer over libmegacache (ctypes, no compiler needed). The calls:

- :func:`save` records what torch, Triton and vLLM left in their cache folders into a
  signed bundle; :func:`load` verifies a bundle and installs it into those folders.
- :func:`warm` does both around a block: load before, save what is new after.
- :func:`pack_torch_artifacts` and :func:`torch_artifacts` take and give the bytes of
  ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``.
- :func:`verify` checks a bundle without installing; :func:`list` shows one, unverified.
- :func:`copy` copies a bundle's bytes between files and registries.

A bundle may be stored in an OCI registry: wherever a call reads or writes one, a str
"oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]" names it there (registry_ca, plain_http,
registry_user, registry_password and timeout: how to reach it; see :func:`copy`).

Keys are minisign keys: a path, or the text of a key file (anything with a line break
or starting "untrusted comment:"), or for public keys the bare base64 key. Paths may be
``str``, ``bytes`` or ``os.PathLike``. Every failure of the library, and every bad
argument, raises :class:`Error`: a :class:`VerificationError` when the bundle must not
be trusted, a :class:`UsageError` otherwise; nothing is installed or written then.

Callbacks (progress, password, on_skip) cannot stop a library call: an exception one
raises is raised again once the call has returned, with the call's effects kept.
"""

from __future__ import annotations

# Dict, List and Optional: the public classes' annotations name them, and are read in
# this namespace, the classes' module (typing.get_type_hints).
from typing import Dict, List, Optional  # noqa: F401

from ._args import AOT_REMOTE_LABEL
from ._copy import copy
from ._errors import (DigestMismatchError, Error, GpuMismatchError, LibraryError,
                      NotSeenError, UnsupportedVersionError, UsageError, VerificationError)
from ._load import GpuTargetsNotChecked, gpu_targets, list_bundle, load, torch_artifacts, verify
from ._reports import (Artifact, BundleInfo, Change, CopyReport, Folder, LoadedArtifact,
                       LoadReport, RegistryArtifact, SaveReport, Signature, Used, Warm)
from ._save import keygen, pack_torch_artifacts, save
from ._session import library_version
from ._version import __version__
from ._warm import warm

# The names the package held before its code was in modules, kept as attributes (not
# in __all__ or dir()): the argument types its signatures name, and its tables.
from ._args import KeyArg, Keys, Password, PathArg, Progress, ProgressFn  # noqa: F401,E402
from ._load import ACTIONS, TORCH_FORMATS  # noqa: F401,E402
from ._progress import TerminalBar  # noqa: F401,E402
from ._reports import UNSEEN_WORDS  # noqa: F401,E402
from ._save import SAVE_TIERS  # noqa: F401,E402
from ._session import ROOT_TIERS, U64  # noqa: F401,E402

# list() is left out of __all__: a star import would hide the builtin.
__all__ = [
    "Artifact", "BundleInfo", "Change", "CopyReport", "DigestMismatchError", "Error", "Folder",
    "GpuMismatchError", "GpuTargetsNotChecked", "LibraryError", "LoadReport",
    "LoadedArtifact", "NotSeenError", "RegistryArtifact", "SaveReport", "Signature",
    "UnsupportedVersionError",
    "UsageError", "Used", "VerificationError", "Warm", "copy", "keygen",
    "gpu_targets", "library_version", "load", "pack_torch_artifacts", "save", "torch_artifacts",
    "verify", "warm", "AOT_REMOTE_LABEL", "__version__",
]


def __dir__() -> List[str]:
    """The package's API: what __all__ names, and list(); not the typing names and
    modules the code imports, nor its own constants."""
    return sorted({*__all__, "list", "list_bundle"} |
                  {n for n in globals() if n.startswith("__") and n.endswith("__")})


# What the modules above define is megacache's, as users name it: in reprs, pickles and
# help(). The exceptions have always been megacache._errors'.
for _name in (*__all__, "list_bundle"):
    _obj = globals()[_name]
    if getattr(_obj, "__module__", None) in {"%s.%s" % (__name__, m) for m in
                                             ("_copy", "_load", "_reports", "_save", "_session",
                                              "_warm")}:
        _obj.__module__ = __name__
del _name, _obj

# Last, so that the code above never calls it by mistake for the builtin.
list = list_bundle  # noqa: A001 - megacache.list(bundle), as the command is named
