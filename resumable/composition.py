"""The composition root: settings → workflow spec, codec, store, service.

Built per request from the current settings (cheap); what is expensive, the storage
client and the imported workflow module, is shared per process.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from .blob_store import BlobCheckpointStorage
from .checkpoint_codec import CheckpointCodec
from .checkpoint_mac import CheckpointMac
from .errors import ServerMisconfigured
from .pickle_guard import UnsafeAllowlist
from .run_service import RunService
from .settings import Settings, SettingsError
from .storage_client import container_client
from .threads import ThreadPointers

logger = logging.getLogger(__name__)
MISCONFIGURED = "The function app is not configured correctly; see its logs."


def load_settings() -> Settings:
    """The settings, or ``ServerMisconfigured`` (500) with the reason only in the logs."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        logger.error("Configuration error: %s", exc)
        raise ServerMisconfigured(MISCONFIGURED) from exc


@lru_cache(maxsize=8)
def workflow_spec(name: str) -> Any:
    """The ``WorkflowSpec`` registered as ``name``, imported on first use."""
    from workflows import load_spec  # noqa: PLC0415 - workflows are an app concern, loaded on demand

    try:
        return load_spec(name)
    except (KeyError, TypeError) as exc:
        raise SettingsError(str(exc)) from exc


def build_service(settings: Settings) -> RunService:
    spec = workflow_spec(settings.workflow)
    try:
        codec = CheckpointCodec(
            allowed_types=(*settings.allowed_types, *spec.allowed_type_keys),
            max_bytes=settings.max_checkpoint_bytes,
        )
    except UnsafeAllowlist as exc:  # CHECKPOINT_ALLOWED_TYPES or checkpoint_types names a non-data class
        raise SettingsError(f"checkpoint allowlist: {exc}") from exc
    container = container_client(settings)
    store = BlobCheckpointStorage(container, codec, CheckpointMac(settings.checkpoint_mac_keys))
    return RunService(store, spec, ThreadPointers(container))
