"""Every app setting the code reads, in one place.

``tests/test_settings_parity.py`` checks this list against
``local.settings.sample.json`` and the Bicep app settings, so the three cannot drift.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .checkpoint_codec import DEFAULT_MAX_CHECKPOINT_BYTES

# Names of the settings this package reads. Connection settings are listed separately
# because only one of their two forms (connection string or identity) is set.
CONNECTION_STRING_SETTINGS = ("CHECKPOINT_STORAGE", "AzureWebJobsStorage")
IDENTITY_SETTINGS = ("CHECKPOINT_STORAGE__blobServiceUri", "CHECKPOINT_STORAGE__clientId")
TUNING_SETTINGS = (
    "CHECKPOINT_CONTAINER",
    "CHECKPOINT_ALLOWED_TYPES",
    "MAX_REQUEST_BYTES",
    "MAX_CHECKPOINT_BYTES",
    "STORAGE_TIMEOUT_SECONDS",
    "WORKFLOW",
)

DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024


class SettingsError(ValueError):
    """A setting is missing or malformed: a deployment problem, reported at first use."""


@dataclass(frozen=True, slots=True)
class StorageTarget:
    """Where checkpoints live: a connection string, or a service URI plus identity."""

    connection_string: str | None = None
    blob_service_uri: str | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    storage: StorageTarget
    container: str
    allowed_types: tuple[str, ...]
    max_request_bytes: int
    max_checkpoint_bytes: int
    storage_timeout_seconds: float
    workflow: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        return cls(
            storage=_storage_target(env),
            container=env.get("CHECKPOINT_CONTAINER", "").strip() or "checkpoints",
            allowed_types=tuple(t.strip() for t in env.get("CHECKPOINT_ALLOWED_TYPES", "").split(",") if t.strip()),
            max_request_bytes=_positive_int(env, "MAX_REQUEST_BYTES", DEFAULT_MAX_REQUEST_BYTES),
            max_checkpoint_bytes=_positive_int(env, "MAX_CHECKPOINT_BYTES", DEFAULT_MAX_CHECKPOINT_BYTES),
            storage_timeout_seconds=float(_positive_int(env, "STORAGE_TIMEOUT_SECONDS", 10)),
            workflow=env.get("WORKFLOW", "").strip() or "default",
        )


def _storage_target(env: Mapping[str, str]) -> StorageTarget:
    uri = env.get("CHECKPOINT_STORAGE__blobServiceUri", "").strip()
    if uri:
        return StorageTarget(
            blob_service_uri=uri, client_id=env.get("CHECKPOINT_STORAGE__clientId", "").strip() or None
        )
    for name in CONNECTION_STRING_SETTINGS:
        value = env.get(name, "").strip()
        if value:
            return StorageTarget(connection_string=value)
    raise SettingsError(
        "No checkpoint storage configured: set CHECKPOINT_STORAGE (a connection string), "
        "CHECKPOINT_STORAGE__blobServiceUri (managed identity), or AzureWebJobsStorage."
    )


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, not {raw!r}.") from None
    if value <= 0:
        raise SettingsError(f"{name} must be positive.")
    return value
