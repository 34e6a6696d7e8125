"""The composition root: settings → workflow spec, codec, store, service.

Built per request from the current settings (cheap); what is expensive, the storage
client and the imported workflow module, is shared per process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from functions_adapter.settings import Settings, SettingsError
from resumable import BlobCheckpointStorage, CheckpointCodec, IdempotencyStore, RunService
from resumable.base import ResumeError, ServerMisconfigured
from resumable.checkpoints import cache as checkpoint_cache
from resumable.checkpoints.mac import CheckpointMac
from resumable.checkpoints.pickle_guard import UnsafeAllowlist
from resumable.core.catalog import CatalogEntry, LoadedVersion, WorkflowCatalog, WorkflowRef
from resumable.storage.clients import container_client
from resumable.threads import ThreadPointers

if TYPE_CHECKING:  # the storage SDK loads on first use, not at import (cold start)
    from azure.storage.blob.aio import ContainerClient

logger = logging.getLogger(__name__)
MISCONFIGURED = "The function app is not configured correctly; see its logs."


def load_settings() -> Settings:
    """The settings, or ``ServerMisconfigured`` (500) with the reason only in the logs."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        logger.error("Configuration error: %s", exc)
        raise ServerMisconfigured(MISCONFIGURED) from exc


@lru_cache(maxsize=32)
def workflow_spec(name: str, version: str | None = None) -> Any:
    """The ``WorkflowSpec`` registered as ``name`` at ``version`` (None: the newest),
    imported on first use."""
    from workflows import load_spec  # noqa: PLC0415 - workflows are an app concern, loaded on demand

    try:
        return load_spec(name, version)
    except (KeyError, TypeError) as exc:
        raise SettingsError(str(exc)) from exc


def workflow_catalog(settings: Settings) -> WorkflowCatalog:
    """Every registered workflow by name and version, ``WORKFLOW`` the default; a version's
    spec is imported and its codec built only when a turn needs it.

    ``SettingsError`` if ``WORKFLOW`` names no registered workflow, as before versions.
    """
    from workflows import REGISTRY, versions_of  # noqa: PLC0415 - as in workflow_spec

    entries = {name: CatalogEntry(tuple(versions_of(name).specs), versions_of(name).policy) for name in REGISTRY}
    if settings.workflow not in entries:
        raise SettingsError(f"Unknown WORKFLOW {settings.workflow!r}; expected one of {sorted(entries)}")

    def load(name: str, label: str) -> LoadedVersion:
        spec = workflow_spec(name, label)
        return LoadedVersion(name, label, spec, _codec(settings, spec), spec.migrate)

    return WorkflowCatalog(entries, settings.workflow, load)


def hosts(settings: Settings) -> Callable[[str], bool]:
    """Whether a ``name`` or ``name@version`` names a hosted workflow (the Responses ``model``)."""
    catalog = workflow_catalog(settings)

    def hosted(text: str) -> bool:
        try:
            catalog.check(WorkflowRef.parse(text))
        except ResumeError:
            return False
        return True

    return hosted


def _codec(settings: Settings, spec: Any) -> CheckpointCodec:
    try:
        return CheckpointCodec(
            allowed_types=(*settings.allowed_types, *spec.allowed_type_keys),
            max_bytes=settings.max_checkpoint_bytes,
        )
    except UnsafeAllowlist as exc:  # CHECKPOINT_ALLOWED_TYPES or checkpoint_types names a non-data class
        raise SettingsError(f"checkpoint allowlist: {exc}") from exc


def container_for(settings: Settings) -> ContainerClient:
    """The checkpoint container these settings name, on the process-wide client."""
    return container_client(settings.storage, settings.container, timeout=settings.storage_timeout_seconds)


def build_service(settings: Settings) -> RunService:
    """One service for every hosted workflow and version (``WorkflowCatalog``); the store's
    default codec is the ``WORKFLOW``'s newest version's, as before versions."""
    catalog = workflow_catalog(settings)
    codec = catalog.load(catalog.default, catalog.entry(catalog.default).newest).codec
    container = container_for(settings)
    checkpoints, heads = checkpoint_cache.shared(settings.checkpoint_cache_bytes)
    mac = CheckpointMac(settings.checkpoint_mac_keys)
    store = BlobCheckpointStorage(container, codec, mac, checkpoints, codec_for=catalog.codec_for)
    return RunService(store, catalog, ThreadPointers(container, heads))


def idempotency_store(
    settings: Settings, service: RunService, *, ttl_seconds: int, scope: str | None = None
) -> IdempotencyStore:
    """Records beside the checkpoints; a claim's commit is checked against this service.
    ``scope``: whose keys (``keyed_call.DedupeKey.scope``)."""
    return IdempotencyStore(
        container_for(settings),
        ttl_seconds=ttl_seconds,
        ledger=service.ledger,
        scope=scope,
    )
