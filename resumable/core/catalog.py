"""Several workflows per app, several versions per workflow: which one runs a turn.

Design (issue 31)
-----------------
* **What a checkpoint records.** Every checkpoint saved names its workflow (the registry
  name, ``default`` for the sample) and the version label that wrote it, twice: in its
  body's ``metadata`` and in its blob's metadata (``workflow``, ``workflow_version``),
  beside the graph signature the framework records anyway. A checkpoint with neither was
  written before versions existed: it belongs to the catalog's default workflow (the
  ``WORKFLOW`` setting) at version ``v1`` (what an unversioned entry is), so an app with one unversioned workflow
  resumes its old checkpoints unchanged.
* **No extra storage operation.** The resume downloads the checkpoint anyway, and the
  blob's metadata arrives with its body. The store asks ``codec_for`` with that metadata
  which allowlist decodes the body (each workflow version has its own), then checks that
  the body's own workflow and version (none: the default's ``v1``) pick that same codec
  (``blob_metadata.same_workflow``; blob metadata is not signed): a checkpoint of workflow A
  is never decoded under B's allowlist nor restored into B.
* **Which version runs a turn** (``choose``): a new run starts on the requested workflow
  (default: the catalog's default) at the requested version (default: the newest). A
  resume stays on its checkpoint's workflow (naming another is ``WorkflowMismatch``), on
  the version the policy says: ``pinned`` keeps the checkpoint's; ``upgrade`` moves to the
  newest. A request may also name a newer version itself: the explicit move. An older
  version than the checkpoint's is refused: a thread never moves back.
* **Migrations.** Moving from v1 to v3 runs v2's ``migrate`` then v3's on the loaded
  checkpoint (an in-memory copy of the blob, never saved as such), then stamps it with the
  target's workflow name and graph signature. The run's own final checkpoint is what is
  saved, as for any turn, so a migration that raises (``MigrationFailed``) commits nothing
  and the thread stays where it was.
* **Lazy.** Each (workflow, version) is loaded (imported, its codec built) on first use
  and kept by the catalog.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_framework import Workflow, WorkflowCheckpoint

from ..base.errors import CheckpointIncompatible, InvalidRequest, MigrationFailed, WorkflowMismatch, WorkflowNotFound
from ..checkpoints import af_internals
from ..checkpoints.codec import CheckpointCodec
from ..checkpoints.info import VERSION_KEY, WORKFLOW_KEY

logger = logging.getLogger(__name__)

FIRST_VERSION = "v1"
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# For migrations: each executor's saved state by executor ID, editable in place.
executor_states = af_internals.executor_states

Migration = Callable[[WorkflowCheckpoint], "WorkflowCheckpoint | None"]


class Buildable(Protocol):
    def build(self) -> Workflow: ...


@dataclass(frozen=True, slots=True)
class WorkflowRef:
    """A workflow as a request names it: ``name`` or ``name@version``."""

    name: str
    version: str | None = None

    @classmethod
    def parse(cls, text: str) -> WorkflowRef:
        name, _, version = text.partition("@")
        if not _TOKEN.fullmatch(name) or (version and not _TOKEN.fullmatch(version)) or text.endswith("@"):
            raise InvalidRequest(f"{text!r} names no workflow: expected a name or name@version.")
        return cls(name, version or None)

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"


@dataclass(frozen=True, slots=True)
class LoadedVersion:
    """One version of one workflow, ready to build: its source, its codec, its migration
    from the version before it (None: compatible, or the first)."""

    workflow: str
    label: str
    source: Buildable
    codec: CheckpointCodec
    migrate: Migration | None = None

    def build(self) -> Workflow:
        return self.source.build()

    @property
    def durability(self) -> str:
        """The spec's default durability for background turns (``turn`` for a plain source)."""
        return str(getattr(self.source, "durability", "turn"))

    @property
    def stamp(self) -> dict[str, str]:
        """What a checkpoint this version writes records in its metadata."""
        return {WORKFLOW_KEY: self.workflow, VERSION_KEY: self.label}


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A workflow's version labels, oldest first, and its policy."""

    labels: tuple[str, ...]
    policy: str = "pinned"

    @property
    def newest(self) -> str:
        return self.labels[-1]


Loader = Callable[[str, str], LoadedVersion]


@dataclass
class WorkflowCatalog:
    """The workflows a service can run, by name, each by version (see the module's design)."""

    entries: Mapping[str, CatalogEntry]
    default: str
    loader: Loader
    _loaded: dict[tuple[str, str], LoadedVersion] = field(default_factory=dict)

    @classmethod
    def single(cls, source: Buildable, codec: CheckpointCodec, name: str = "default") -> WorkflowCatalog:
        """One unversioned workflow (a library user's, or a test's): everything is its ``v1``."""
        version = LoadedVersion(name, FIRST_VERSION, source, codec)
        return cls({name: CatalogEntry((FIRST_VERSION,))}, name, lambda _n, _l: version)

    def build(self) -> Workflow:
        """The default workflow's newest version (the catalog is a ``WorkflowSource`` too)."""
        return self.load(self.default, self.entry(self.default).newest).build()

    def entry(self, name: str) -> CatalogEntry:
        try:
            return self.entries[name]
        except KeyError:
            raise WorkflowNotFound(
                f"No workflow named {name!r} is hosted here.", details={"workflows": sorted(self.entries)}
            ) from None

    def load(self, name: str, label: str) -> LoadedVersion:
        key = (name, label)
        if key not in self._loaded:
            self._loaded[key] = self.loader(name, label)
        return self._loaded[key]

    def check(self, ref: WorkflowRef) -> None:
        """``WorkflowNotFound`` (listing what is hosted) unless ``ref`` names a hosted version."""
        entry = self.entry(ref.name)
        if ref.version is not None and ref.version not in entry.labels:
            raise WorkflowNotFound(
                f"Workflow {ref.name!r} has no version {ref.version!r}.",
                details={"workflows": sorted(self.entries), "versions": list(entry.labels)},
            )

    def of_metadata(self, metadata: Mapping[str, Any]) -> tuple[str, str]:
        """The (workflow, version) a checkpoint's metadata names; the default workflow's
        ``v1`` for a checkpoint written before versions existed (an unversioned registry
        entry is ``v1``: so is what it wrote, even once ``v1`` is retired and it is refused)."""
        return str(metadata.get(WORKFLOW_KEY) or self.default), str(metadata.get(VERSION_KEY) or FIRST_VERSION)

    def codec_for(self, blob_metadata: Mapping[str, Any]) -> CheckpointCodec:
        """The codec whose allowlist decodes this blob: its own workflow version's."""
        name, label = self.of_metadata(blob_metadata)
        entry = self.entries.get(name)
        if entry is None or label not in entry.labels:
            logger.warning("Checkpoint of workflow %r version %r: not registered here", name, label)
            raise CheckpointIncompatible(
                f"The checkpoint was written by workflow {name!r} version {label!r}, which this app does not host "
                "(retired, or not deployed to this instance yet).",
                details={"workflow": name, "version": label},
            )
        return self.load(name, label).codec

    def choose(
        self, requested: WorkflowRef | None, checkpoint: WorkflowCheckpoint | None
    ) -> tuple[LoadedVersion, tuple[LoadedVersion, ...]]:
        """The version a run runs on, and the versions whose migrations lead there from the
        checkpoint's (oldest first; empty when it stays). Raises before anything runs."""
        if checkpoint is None:
            ref = requested or WorkflowRef(self.default)
            self.check(ref)
            return self.load(ref.name, ref.version or self.entry(ref.name).newest), ()
        name, current = self.of_metadata(checkpoint.metadata)
        if requested is not None and requested.name != name:
            raise WorkflowMismatch(
                f"This thread (or checkpoint) runs workflow {name!r}, not {requested.name!r}.",
                details={"workflow": name, "requested": requested.name},
            )
        entry = self.entry(name)
        if current not in entry.labels:
            raise CheckpointIncompatible(f"Workflow {name!r} no longer hosts version {current!r}.")
        if requested is not None and requested.version is not None:
            self.check(requested)
            target = requested.version
        else:
            target = entry.newest if entry.policy == "upgrade" else current
        start, end = entry.labels.index(current), entry.labels.index(target)
        if end < start:
            raise WorkflowMismatch(
                f"This thread is on version {current!r} of {name!r}; it cannot move back to {target!r}.",
                details={"workflow": name, "version": current, "requested": target},
            )
        path = tuple(self.load(name, label) for label in entry.labels[start + 1 : end + 1])
        return self.load(name, target), path


def migrate(
    checkpoint: WorkflowCheckpoint, path: tuple[LoadedVersion, ...], target: Workflow, *, from_version: str
) -> WorkflowCheckpoint:
    """Run each version's migration in turn; ``MigrationFailed`` if one raises (nothing is
    saved: the checkpoint is the resume's own decoded copy)."""
    if not path:
        return checkpoint
    origin, migrated = checkpoint.checkpoint_id, False
    for step in path:
        if step.migrate is None:
            continue
        try:
            result = step.migrate(checkpoint)
            if result is not None and not isinstance(result, WorkflowCheckpoint):
                raise TypeError(f"a migration returns a WorkflowCheckpoint or None, not {type(result).__name__}")
            checkpoint = result or checkpoint
        except Exception as exc:
            logger.exception("Migration of workflow %r to version %r failed", step.workflow, step.label)
            raise MigrationFailed(
                f"Migrating the thread's checkpoint to version {step.label!r} of {step.workflow!r} failed; "
                "nothing ran and nothing was saved: the thread stays on its version.",
                details={"workflow": step.workflow, "from_version": from_version, "to_version": step.label},
            ) from exc
        migrated = True
    if migrated:  # the migrations mapped the state onto the target's graph: it now belongs there
        checkpoint.workflow_name = target.name
        checkpoint.graph_signature_hash = target.graph_signature_hash
    checkpoint.metadata = {**checkpoint.metadata, **path[-1].stamp}
    # It is still the checkpoint the thread resumes from, whatever copy a migration returned:
    # the turn's checkpoint follows it (lineage: forks, sweeps and the ledger walk it).
    checkpoint.checkpoint_id = origin
    return checkpoint
