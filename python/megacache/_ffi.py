"""The C interface of libmegacache, declared for ctypes.

Every function the package calls is declared here once, with its argument types,
its result type and, for the calls that return a status, an errcheck that turns a
negative status into a :class:`megacache.Error` carrying the library's message.
The library is found on first use (see :func:`lib`), not at import.
"""

import ctypes
import os
import threading
import warnings
from ctypes import (CFUNCTYPE, POINTER, c_char, c_char_p, c_int, c_int64, c_size_t,
                    c_uint, c_uint64, c_void_p)

from ._errors import LibraryError, error_for
from ._version import __version__

SONAME = "libmegacache.so.0"
ENV_LIBRARY = "MEGACACHE_LIBRARY"

# Status codes and flags of megacache.h.
MC_OK = 0
MC_LOAD_INSTALLED, MC_LOAD_UNCHANGED, MC_LOAD_PLANNED = 0, 1, 2
MC_LOAD_REPLACED, MC_LOAD_WOULD_REPLACE, MC_LOAD_SKIPPED = 3, 4, 5
MC_LOAD_DRY_RUN, MC_LOAD_SYNC, MC_LOAD_SKIP_OTHER_GPUS = 0x1, 0x2, 0x8
MC_GPU_UNKNOWN = 0
MC_SCAN_RECORDED, MC_SCAN_SKIPPED = 0, 1
MC_DIFF_ADDED, MC_DIFF_REMOVED, MC_DIFF_CHANGED = 0, 1, 2
MC_TORCH_FORMAT_CURRENT, MC_TORCH_FORMAT_2_7 = 1, 2
MC_USED_INSTALLED, MC_USED_READ, MC_USED_NEW, MC_USED_NOT_SEEN = 0, 1, 2, 3
MC_UNSEEN_KINDS = 6
MC_USED_KEEP_UNSEEN = 1
MC_REGISTRY_CA, MC_REGISTRY_PLAIN_HTTP, MC_REGISTRY_USER = 0, 1, 2
MC_REGISTRY_PASSWORD, MC_REGISTRY_TIMEOUT = 3, 4

# Callback types.
PROGRESS_FN = CFUNCTYPE(None, c_void_p, c_char_p, c_uint64, c_uint64)
ARTIFACT_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p, c_char_p, c_uint64)
SCAN_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p)
DIFF_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p, c_uint64, c_uint64)
PASSWORD_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_char), c_size_t)

# Opaque handles: mc_ctx *, mc_writer *, mc_bundle *, mc_pubkey *, mc_seckey *, mc_usage *.
c_handle = c_void_p

_lock = threading.Lock()
_lib = None
# The context each writer and bundle was made from, for the error text of a failure
# reported through the handle (handle address -> context address).
_owner = {}


def owner_set(handle, ctx):
    _owner[handle] = ctx


def owner_drop(handle):
    _owner.pop(handle, None)


def _message(ctx, status):
    if ctx:
        text = _lib.mc_ctx_error(ctx)
        if text:
            return text.decode("utf-8", "replace")
    return _lib.mc_strerror(status).decode("utf-8", "replace")


def _error(status, ctx):
    return error_for(status, _message(ctx, status),
                     _lib.mc_status_is_verification_failure(status) != 0,
                     _lib.mc_status_code(status).decode("ascii"))


def status_error(status):
    """The exception for a status that came with no context to read a message from."""
    return _error(status, None)


def _check_ctx(status, func, args):
    """errcheck of the calls whose first argument is the context."""
    if status >= 0:
        return status
    raise _error(status, args[0])


def _check_handle(status, func, args):
    """errcheck of the calls whose first argument is a writer or a bundle."""
    if status >= 0:
        return status
    h = args[0]
    raise _error(status, _owner.get(getattr(h, "value", h)))


# name, argument types, result type, errcheck
_SIGNATURES = [
    ("mc_version", [], c_char_p, None),
    ("mc_strerror", [c_int], c_char_p, None),
    ("mc_status_is_verification_failure", [c_int], c_int, None),
    ("mc_status_code", [c_int], c_char_p, None),
    ("mc_ctx_new", [POINTER(c_handle)], c_int, None),
    ("mc_ctx_free", [c_handle], None, None),
    ("mc_ctx_error", [c_handle], c_char_p, None),
    ("mc_ctx_set_tier_root", [c_handle, c_char_p, c_char_p], c_int, _check_ctx),
    ("mc_ctx_tier_root", [c_handle, c_char_p, POINTER(c_char_p)], c_int, _check_ctx),
    ("mc_ctx_type_tier", [c_handle, c_char_p], c_char_p, None),
    ("mc_ctx_set_progress", [c_handle, PROGRESS_FN, c_void_p], None, None),
    ("mc_ctx_set_threads", [c_handle, c_uint], c_int, _check_ctx),
    ("mc_is_reference", [c_char_p], c_int, None),
    ("mc_ctx_set_registry", [c_handle, c_int, c_char_p], c_int, _check_ctx),
    ("mc_copy", [c_handle, c_char_p, c_char_p], c_int, _check_ctx),
    # which: 0 the manifest's digest, 1 the layer's
    ("mc_ctx_registry_digest", [c_handle, c_int], c_char_p, None),
    ("mc_ctx_registry_size", [c_handle], c_uint64, None),
    ("mc_keygen", [c_handle, POINTER(c_handle), POINTER(c_handle)], c_int, _check_ctx),
    ("mc_keypair_save", [c_handle, c_handle, c_handle, c_char_p, c_char_p, c_char_p, c_int],
     c_int, _check_ctx),
    ("mc_pubkey_load", [c_handle, c_char_p, POINTER(c_handle)], c_int, _check_ctx),
    ("mc_pubkey_from_text", [c_handle, c_char_p, POINTER(c_handle)], c_int, _check_ctx),
    ("mc_seckey_load", [c_handle, c_char_p, PASSWORD_FN, c_void_p, POINTER(c_handle)],
     c_int, _check_ctx),
    ("mc_seckey_from_text", [c_handle, c_char_p, PASSWORD_FN, c_void_p, POINTER(c_handle)],
     c_int, _check_ctx),
    ("mc_pubkey_free", [c_handle], None, None),
    ("mc_seckey_free", [c_handle], None, None),
    ("mc_pubkey_id", [c_handle], c_char_p, None),
    ("mc_pubkey_equal", [c_handle, c_handle], c_int, None),
    ("mc_seckey_id", [c_handle], c_char_p, None),
    ("mc_writer_new", [c_handle, POINTER(c_handle)], c_int, _check_ctx),
    ("mc_writer_free", [c_handle], None, None),
    ("mc_writer_add_cache_dir", [c_handle, c_char_p, SCAN_FN, c_void_p], c_int, _check_handle),
    ("mc_writer_add_triton_cache", [c_handle, c_char_p, SCAN_FN, c_void_p], c_int,
     _check_handle),
    ("mc_writer_add_vllm_dir", [c_handle, c_char_p, SCAN_FN, c_void_p], c_int, _check_handle),
    ("mc_writer_add_torch_blob_memory", [c_handle, c_char_p, c_size_t], c_int, _check_handle),
    ("mc_writer_set_keep_unknown", [c_handle, c_int], c_int, _check_handle),
    ("mc_writer_set_label", [c_handle, c_char_p, c_char_p], c_int, _check_handle),
    ("mc_writer_set_bundle_version", [c_handle, c_uint64], c_int, _check_handle),
    ("mc_writer_set_expires", [c_handle, c_int64], c_int, _check_handle),
    ("mc_writer_set_created", [c_handle, c_int64], c_int, _check_handle),
    ("mc_writer_set_compression", [c_handle, c_int], c_int, _check_handle),
    ("mc_writer_add_signer", [c_handle, c_handle], c_int, _check_handle),
    ("mc_writer_save", [c_handle, c_char_p], c_int, _check_handle),
    ("mc_writer_artifact_count", [c_handle], c_size_t, None),
    ("mc_writer_total_bytes", [c_handle], c_uint64, None),
    ("mc_writer_saved_count", [c_handle], c_size_t, None),
    ("mc_writer_saved_bytes", [c_handle], c_uint64, None),
    ("mc_writer_drop_known", [c_handle, POINTER(c_handle), c_size_t, DIFF_FN, c_void_p], c_int,
     _check_handle),
    ("mc_bundle_open", [c_handle, c_char_p, POINTER(c_handle)], c_int, _check_ctx),
    ("mc_bundle_free", [c_handle], None, None),
    ("mc_bundle_trust", [c_handle, c_handle], c_int, _check_handle),
    ("mc_bundle_set_threshold", [c_handle, c_uint], c_int, _check_handle),
    ("mc_bundle_set_min_version", [c_handle, c_uint64], c_int, _check_handle),
    ("mc_bundle_require_label", [c_handle, c_char_p, c_char_p], c_int, _check_handle),
    ("mc_bundle_check_signatures", [c_handle], c_int, _check_handle),
    ("mc_bundle_verify", [c_handle], c_int, _check_handle),
    ("mc_bundle_created", [c_handle], c_int64, None),
    ("mc_bundle_version", [c_handle], c_uint64, None),
    ("mc_bundle_expires", [c_handle], c_int64, None),
    ("mc_bundle_label_count", [c_handle], c_size_t, None),
    ("mc_bundle_label", [c_handle, c_size_t, POINTER(c_char_p), POINTER(c_char_p)], c_int,
     _check_handle),
    ("mc_bundle_signature_count", [c_handle], c_size_t, None),
    ("mc_bundle_signature_key_id", [c_handle, c_size_t], c_char_p, None),
    ("mc_bundle_signature_state", [c_handle, c_size_t], c_int, _check_handle),
    ("mc_sig_state_name", [c_int], c_char_p, None),
    ("mc_bundle_artifact_count", [c_handle], c_size_t, None),
    ("mc_bundle_artifact", [c_handle, c_size_t, POINTER(c_char_p), POINTER(c_char_p),
                            POINTER(c_uint64), POINTER(c_char_p)], c_int, _check_handle),
    ("mc_bundle_artifact_executable", [c_handle, c_size_t], c_int, _check_handle),
    ("mc_bundle_find_artifact", [c_handle, c_char_p, c_char_p, POINTER(c_size_t)], c_int,
     _check_handle),
    ("mc_bundle_select_type", [c_handle, c_char_p], c_int, _check_handle),
    ("mc_gpu_detect", [c_handle, POINTER(POINTER(c_char_p)), POINTER(c_size_t)], c_int,
     _check_ctx),
    ("mc_gpu_targets_free", [POINTER(c_char_p), c_size_t], None, None),
    ("mc_gpu_target_ok", [c_char_p], c_int, None),
    ("mc_bundle_gpu_targets_known", [c_handle], c_int, None),
    ("mc_bundle_gpu_target_count", [c_handle], c_size_t, None),
    ("mc_bundle_gpu_target", [c_handle, c_size_t], c_char_p, None),
    ("mc_bundle_set_host_gpus", [c_handle, POINTER(c_char_p), c_size_t], c_int, _check_handle),
    ("mc_bundle_load", [c_handle, c_uint, ARTIFACT_FN, c_void_p], c_int, _check_handle),
    ("mc_bundle_export_torch_memory", [c_handle, c_int, POINTER(c_void_p), POINTER(c_size_t),
                                       ARTIFACT_FN, c_void_p], c_int, _check_handle),
    ("mc_usage_new", [c_handle, POINTER(c_handle)], c_int, _check_ctx),
    ("mc_usage_free", [c_handle], None, None),
    # told from a load's callback: a failure is kept and raised by mc_usage_start
    ("mc_usage_add", [c_handle, c_int, c_char_p, c_char_p], c_int, None),
    ("mc_usage_start", [c_handle], c_int, _check_handle),
    ("mc_usage_finish", [c_handle], c_int, _check_handle),
    ("mc_usage_type", [c_handle, c_size_t], c_char_p, None),
    ("mc_usage_count", [c_handle, c_size_t, c_int], c_size_t, None),
    ("mc_usage_not_seen", [c_handle, c_int], c_size_t, None),
    ("mc_unseen_name", [c_int], c_char_p, None),
    ("mc_usage_watch_all", [c_handle], c_int, _check_handle),
    ("mc_usage_record", [c_handle, c_handle, c_uint, POINTER(c_size_t), POINTER(c_size_t)],
     c_int, _check_handle),
]


def _declare(dll):
    for name, argtypes, restype, errcheck in _SIGNATURES:
        try:
            f = getattr(dll, name)
        except AttributeError:
            raise LibraryError("%s has no function %s: it is older than this package (%s)"
                               % (dll._name, name, __version__)) from None
        f.argtypes = argtypes
        f.restype = restype
        if errcheck is not None:
            f.errcheck = errcheck


def _open():
    override = os.environ.get(ENV_LIBRARY)
    tried = []
    if override:
        try:
            return ctypes.CDLL(override)
        except OSError as e:
            tried.append("%s=%s (%s)" % (ENV_LIBRARY, override, e))
    else:
        tried.append("%s (not set)" % ENV_LIBRARY)
    try:
        dll = ctypes.CDLL(SONAME)
    except OSError as e:
        tried.append("%s (%s)" % (SONAME, e))
    else:
        if override:
            warnings.warn("megacache: %s; using the installed %s" % (tried[0], SONAME),
                          RuntimeWarning, stacklevel=4)
        return dll
    raise LibraryError("cannot load libmegacache: tried " + "; then ".join(tried) +
                       ". Install the library, or set %s to its path" % ENV_LIBRARY)


def lib():
    """The loaded library: $MEGACACHE_LIBRARY if set, else the installed soname.

    Raises LibraryError naming what was tried when neither loads, or when the library
    is not the version of this package.
    """
    global _lib
    with _lock:
        if _lib is None:
            dll = _open()
            _declare(dll)
            have = dll.mc_version().decode()
            if have.split(".")[:2] != __version__.split(".")[:2]:
                raise LibraryError("%s is libmegacache %s; this package is %s"
                                   % (dll._name, have, __version__))
            _lib = dll
    return _lib
