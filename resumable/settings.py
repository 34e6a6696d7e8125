"""Every app setting the code reads, in one place.

``tests/test_settings_parity.py`` checks this list against
``local.settings.sample.json`` and the Bicep app settings, so the three cannot drift.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .checkpoint_codec import DEFAULT_MAX_CHECKPOINT_BYTES

# The two places checkpoint storage can be configured, in order of precedence. Each
# is either a connection string (PREFIX) or a service URI for managed identity
# (PREFIX__blobServiceUri, optionally PREFIX__clientId); the URI form wins.
STORAGE_PREFIXES = ("CHECKPOINT_STORAGE", "AzureWebJobsStorage")
STORAGE_SETTINGS = tuple(
    name for prefix in STORAGE_PREFIXES for name in (prefix, f"{prefix}__blobServiceUri", f"{prefix}__clientId")
)
TUNING_SETTINGS = (
    "CHECKPOINT_CONTAINER",
    "CHECKPOINT_ALLOWED_TYPES",
    "MAX_REQUEST_BYTES",
    "MAX_CHECKPOINT_BYTES",
    "STORAGE_TIMEOUT_SECONDS",
    "WORKFLOW",
)
# Every setting this package reads.
CODE_SETTINGS = STORAGE_SETTINGS + TUNING_SETTINGS

# Settings the platform reads, not this package; allowed in local.settings and Bicep.
PLATFORM_SETTINGS = (
    "FUNCTIONS_WORKER_RUNTIME",  # local only: Flex Consumption sets the runtime in the site config
    "PYTHON_ENABLE_INIT_INDEXING",  # required by the HTTP streaming extension
    "AzureWebJobsStorage__credential",  # host storage via managed identity
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
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
    for prefix in STORAGE_PREFIXES:
        uri = env.get(f"{prefix}__blobServiceUri", "").strip()
        if uri:
            return StorageTarget(blob_service_uri=uri, client_id=env.get(f"{prefix}__clientId", "").strip() or None)
        connection_string = env.get(prefix, "").strip()
        if connection_string:
            return StorageTarget(connection_string=connection_string)
    raise SettingsError(
        "No checkpoint storage configured: set CHECKPOINT_STORAGE (a connection string) or "
        "CHECKPOINT_STORAGE__blobServiceUri (managed identity); AzureWebJobsStorage is the fallback."
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
