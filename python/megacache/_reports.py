"""What the calls return: a bundle's manifest, what a load installed, what a save
wrote, and what a warm() block did and used."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

# How Warm's repr tells each reason a loaded file's reads could not be seen (MC_UNSEEN_*),
# after their count; its keys are the names of Warm.used_not_seen.
UNSEEN_WORDS = {"noatime": "on a noatime mount", "not_owner": "owned by another user",
                "read_only": "on a read-only mount", "overlayfs": "found in place on overlayfs",
                "gone": "removed or replaced during the block", "other": "other"}


@dataclasses.dataclass(frozen=True)
class RegistryArtifact:
    """A bundle as a registry holds it, pushed or read through an ``oci://`` reference:
    reference, the repository pinned to the manifest's digest
    ("oci://HOST/REPO@sha256:..."), which names these bytes however the tag moves;
    digest, the manifest's; layer_digest, the sha256 of the bundle's bytes; size, their
    length. The names of the tool's --json "registry"."""
    reference: str
    digest: str
    layer_digest: str
    size: int


@dataclasses.dataclass(frozen=True)
class CopyReport:
    """What :func:`copy` did: source and destination as given; layer_digest, the sha256
    of the bundle's bytes, size their length; digest, the manifest's where a registry
    was involved, else the same as layer_digest. The names of the tool's copy --json."""
    source: str
    destination: str
    digest: str
    layer_digest: str
    size: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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
    read them from the kernels; None when not known (such a bundle listed). registry:
    for a bundle read through an ``oci://`` reference, the :class:`RegistryArtifact`
    read; else None."""
    bundle: str
    created: int
    bundle_version: int
    expires: int
    labels: Dict[str, str]
    signatures: List[Signature]
    artifacts: List[Artifact]
    verified: bool
    gpu_targets: Optional[List[str]] = None
    registry: Optional[RegistryArtifact] = None

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
    none was (no GPU seen); skipped: the kernel files left out (skip_other_gpus).
    registry: for a bundle read through an ``oci://`` reference, the
    :class:`RegistryArtifact` loaded (its digest pins what a tag named); else None."""
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
    registry: Optional[RegistryArtifact] = None

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
    their number (the tool's --json name). registry: for a bundle pushed to an ``oci://``
    reference, the :class:`RegistryArtifact` pushed; else None."""
    bundle: str
    dry_run: bool
    artifact_count: int
    bytes: int
    signatures: List[Signature]
    folders: List[Folder]
    skipped_files: int
    changes: List[Change] = dataclasses.field(default_factory=lambda: [])
    registry: Optional[RegistryArtifact] = None

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
    both stay empty and used_error says why.

    With save_used, the bundle of what the block used: saved_used (None when it used
    nothing, or the save failed: save_used_error), used_left_out (the files of the
    caches left out) and used_kept_unseen (those kept whose reads could not be seen)."""

    def __init__(self) -> None:
        self.loaded: List[LoadReport] = []
        self.cold: List[tuple] = []
        self.saved: Optional[SaveReport] = None
        self.save_error: Optional[Exception] = None
        self.roots: Dict[str, Optional[str]] = {}
        self.used: Dict[str, Used] = {}
        self.used_not_seen: Dict[str, int] = {}
        self.used_error: Optional[Exception] = None
        self.saved_used: Optional[SaveReport] = None
        self.save_used_error: Optional[Exception] = None
        self.used_left_out = 0
        self.used_kept_unseen = 0
        self._save_to: Optional[str] = None
        self._save_used: Optional[str] = None
        self._bundle = "BUNDLE"  # what `megacache list` is to be run on, to see its labels
        self._ended = False
        self._raised = False  # the block raised: what it used is not saved

    def __repr__(self) -> str:
        # One line of counts: the reports' own reprs list every artifact.
        parts = ["loaded %r: %d installed, %d replaced, %d unchanged"
                 % (r.bundle, r.installed, r.replaced, r.unchanged) for r in self.loaded]
        parts += ["cold %r: %s" % (path, why) for path, why in self.cold]
        if not self.loaded and not self.cold:
            parts.append("no bundle loaded")
        parts += self._used_lines()
        parts.append(self._save_repr())
        if self._save_used is not None:
            parts.append(self._save_used_repr())
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
        # A precompile entry read (dynamo's whole frame) needs no FX or AOT entry either.
        pre_read = self.used["precompile"].read if "precompile" in self.used else 0
        unread = ["%s (%d)" % (t, u.installed - u.not_seen) for t, u in self.used.items()
                  if u.installed > u.not_seen and u.read == 0 and
                  not ((fx_read or pre_read) and t in _READ_ON_MISS) and
                  not (pre_read and t in ("inductor", "aot_autograd"))]
        if not unread:
            return [line]
        return [line, "read none of the loaded %s artifacts; the likely cause is a torch, "
                "Triton or config mismatch: compare the bundle's labels (megacache list %s) "
                "with this host's" % (", ".join(unread), self._bundle)]

    def _save_used_repr(self) -> str:
        if self.saved_used is not None:
            return "saved what it used to %r: %d artifact%s, %d in the caches left out" % (
                self.saved_used.bundle, self.saved_used.artifact_count,
                "" if self.saved_used.artifact_count == 1 else "s", self.used_left_out)
        if not self._ended:
            return "saves what it uses to %r after the block" % self._save_used
        if self._raised:
            return "the block raised, %r not written" % self._save_used
        if self.save_used_error is not None:
            return "the save of what it used to %r failed: %s" % (self._save_used,
                                                                  self.save_used_error)
        return "used nothing, %r not written" % self._save_used

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
