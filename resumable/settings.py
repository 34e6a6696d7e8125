"""Every app setting the code reads, in one place.

``tests/test_settings_parity.py`` checks this list against
``local.settings.sample.json`` and the Bicep app settings, so the three cannot drift.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .checkpoint_codec import DEFAULT_MAX_CHECKPOINT_BYTES
from .webhook_signature import secret_bytes

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
    "MAX_MESSAGES",
    "MAX_MESSAGE_CHARS",
    "MAX_RESPONSES",
    "STORAGE_TIMEOUT_SECONDS",
    "IDEMPOTENCY_TTL_SECONDS",
    "WEBHOOK_SECRET",
    "WEBHOOK_TOLERANCE_SECONDS",
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
class InputLimits:
    """Caps on what one request may carry, beyond the body size."""

    max_messages: int = 100
    max_message_chars: int = 32_000
    max_responses: int = 100


_DEFAULT_LIMITS = InputLimits()


@dataclass(frozen=True, slots=True)
class Settings:
    storage: StorageTarget
    container: str
    allowed_types: tuple[str, ...]
    max_request_bytes: int
    max_checkpoint_bytes: int
    limits: InputLimits
    storage_timeout_seconds: float
    idempotency_ttl_seconds: int
    webhook_secrets: tuple[str, ...]
    webhook_tolerance_seconds: int
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
            limits=InputLimits(
                max_messages=_positive_int(env, "MAX_MESSAGES", _DEFAULT_LIMITS.max_messages),
                max_message_chars=_positive_int(env, "MAX_MESSAGE_CHARS", _DEFAULT_LIMITS.max_message_chars),
                max_responses=_positive_int(env, "MAX_RESPONSES", _DEFAULT_LIMITS.max_responses),
            ),
            storage_timeout_seconds=float(_positive_int(env, "STORAGE_TIMEOUT_SECONDS", 10)),
            idempotency_ttl_seconds=_positive_int(env, "IDEMPOTENCY_TTL_SECONDS", 24 * 3600),
            # Several secrets, space- or comma-separated, so a secret can be rotated.
            webhook_secrets=_webhook_secrets(env),
            webhook_tolerance_seconds=_positive_int(env, "WEBHOOK_TOLERANCE_SECONDS", 300),
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


def _webhook_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    # Several secrets, space- or comma-separated, so a secret can be rotated.
    secrets = tuple(s for s in env.get("WEBHOOK_SECRET", "").replace(",", " ").split() if s)
    for secret in secrets:
        try:
            secret_bytes(secret)
        except ValueError as exc:
            raise SettingsError(f"WEBHOOK_SECRET: {exc}") from None
    return secrets


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
