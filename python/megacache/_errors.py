"""The exceptions of the package: one base class, split as the library splits its
status codes (mc_status_is_verification_failure)."""

# The status codes of megacache.h, by number. Append only, like the header's enum.
CODES = {
    -1: "MC_ERR_NOMEM", -2: "MC_ERR_INVALID", -3: "MC_ERR_IO", -4: "MC_ERR_NOT_BUNDLE",
    -5: "MC_ERR_MALFORMED", -6: "MC_ERR_MANIFEST", -7: "MC_ERR_INTEGRITY",
    -8: "MC_ERR_NO_SIGNATURE", -9: "MC_ERR_BAD_SIGNATURE", -10: "MC_ERR_THRESHOLD",
    -11: "MC_ERR_EXPIRED", -12: "MC_ERR_ROLLBACK", -13: "MC_ERR_LIMIT",
    -14: "MC_ERR_UNKNOWN_TYPE", -15: "MC_ERR_BAD_KEY", -16: "MC_ERR_CONFLICT",
    -17: "MC_ERR_UNSAFE_DEST", -18: "MC_ERR_KEYFILE", -19: "MC_ERR_PASSWORD",
    -20: "MC_ERR_TORCH_FORMAT", -21: "MC_ERR_CRYPTO", -22: "MC_ERR_EXISTS",
    -23: "MC_ERR_LABEL", -24: "MC_ERR_REMOTE", -25: "MC_ERR_UNSUPPORTED",
    -26: "MC_ERR_UNSUPPORTED_VERSION", -27: "MC_ERR_GPU_MISMATCH", -28: "MC_ERR_CANCELLED",
    -29: "MC_ERR_DIGEST_MISMATCH", -30: "MC_ERR_NOT_SEEN",
}


class Error(Exception):
    """A megacache failure.

    code: what failed, by the name the tool's --json gives as "error", never None: for a
    library status its stable snake_case name (mc_status_code(): "untrusted_signature",
    "expired", "io", ...); for a failure found by this package, the tool's name for it
    ("usage" for a bad argument, "no_artifacts" for nothing to save; "failed" when the
    library cannot be loaded). status: the same, under its earlier name.
    number: the library's status (a negative MC_ERR_* number), or None when the failure
    was found by this package; name: "MC_ERR_..." for it, else None.
    message: the library's text, naming the file and the reason.
    """

    _code = "failed"

    def __init__(self, message, code=None, number=None):
        super().__init__(message)
        self.message = message
        self.code = code or self._code
        self.number = number
        self.name = CODES.get(number, "MC_ERR_%d" % number) if number is not None else None

    @property
    def status(self):
        return self.code

    def __str__(self):
        if self.name is None:
            return self.message
        return "%s [%s]" % (self.message, self.name)


class VerificationError(Error):
    """The bundle must not be trusted: a signature, its integrity, its structure, or the
    policy (threshold, minimum version, expiry, required labels) failed."""


class UnsupportedVersionError(VerificationError):
    """The bundle's format version is newer than this megacache reads: upgrade megacache
    (status "unsupported_version"). Refused like any bundle that cannot be verified."""


class GpuMismatchError(VerificationError):
    """The bundle holds Triton kernels for a GPU target this host lacks (status
    "gpu_mismatch"); nothing was installed. skip_other_gpus=True installs the rest and
    leaves those kernels out."""


class DigestMismatchError(VerificationError):
    """A registry sent a manifest or a bundle that is not the digest or size it was
    named by (status "digest_mismatch"): corrupted, or changed, on the way or in the
    registry; nothing was installed or written."""


class UsageError(Error):
    """Not a verdict on a bundle: a bad argument, a missing or unwritable file, a key
    file or password, or a system or resource error."""

    _code = "usage"


class NotSeenError(UsageError):
    """A bundle of what a block used was not written: the reads of some files in the
    caches could not be seen (status "not_seen"; a noatime or read-only mount, overlayfs
    lower files, another user's files), and leaving them out could leave out what the
    block read. save_used_keep_unseen=True keeps them instead."""

    _code = "not_seen"


class LibraryError(UsageError):
    """libmegacache could not be loaded, or is not the version of this package."""

    _code = "failed"


def error_for(number, message, verification, code):
    """The exception for a library status and its message; verification: what
    mc_status_is_verification_failure() says of it; code: its mc_status_code()."""
    cls = (UnsupportedVersionError if code == "unsupported_version" else
           GpuMismatchError if code == "gpu_mismatch" else
           DigestMismatchError if code == "digest_mismatch" else
           NotSeenError if code == "not_seen" else
           VerificationError if verification else UsageError)
    return cls(message, code, number)
