"""Every app setting: the name of each one the code reads (and of those the platform reads),
and their values, parsed and checked in one place.

``tests/infra/test_infra.py::test_settings_parity_code_local_and_bicep`` checks the lists of
names against ``local.settings.sample.json`` and the Bicep app settings, so the three cannot
drift.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from functions_adapter.signatures import SCHEMES, secret_bytes
from resumable.base import ConfigurationError
from resumable.checkpoints.cache import DEFAULT_CACHE_BYTES
from resumable.checkpoints.codec import DEFAULT_MAX_CHECKPOINT_BYTES
from resumable.checkpoints.mac import MacConfigError, MacKey, parse_mac_keys
from resumable.storage.clients import StorageTarget
from resumable.storage.run_queue import QueueTarget, validate_queue_name

# The two places checkpoint storage can be configured, in order of precedence. Each
# is either a connection string (PREFIX) or a service URI for managed identity
# (PREFIX__blobServiceUri, optionally PREFIX__clientId); the URI form wins.
STORAGE_PREFIXES = ("CHECKPOINT_STORAGE", "AzureWebJobsStorage")
STORAGE_SETTINGS = tuple(
    name for prefix in STORAGE_PREFIXES for name in (prefix, f"{prefix}__blobServiceUri", f"{prefix}__clientId")
)
# The run queue lives in the Functions host's storage (the queue trigger's connection,
# ``AzureWebJobsStorage``): a connection string locally, the queue service URI plus the
# managed identity (``AzureWebJobsStorage__clientId``) in Azure.
QUEUE_SETTINGS = ("AzureWebJobsStorage__queueServiceUri",)
TUNING_SETTINGS = (
    "CHECKPOINT_CONTAINER",
    "CHECKPOINT_ALLOWED_TYPES",
    "CHECKPOINT_MAC_KEYS",
    "MAX_REQUEST_BYTES",
    "MAX_CHECKPOINT_BYTES",
    "CHECKPOINT_CACHE_BYTES",
    "MAX_MESSAGES",
    "MAX_MESSAGE_CHARS",
    "MAX_RESPONSES",
    "STORAGE_TIMEOUT_SECONDS",
    "IDEMPOTENCY_TTL_SECONDS",
    "WEBHOOK_SECRET",
    "WEBHOOK_TOLERANCE_SECONDS",
    "WEBHOOK_SCHEME",
    "IDEMPOTENCY_HEADERS",
    "THREAD_LOCK_WAIT_SECONDS",
    "SSE_KEEPALIVE_SECONDS",
    "RUNS_QUEUE",
    "RUN_BUDGET_SECONDS",
    "THREAD_AUTHORIZER",
    "THREAD_PRINCIPAL_HEADER",
    "THREAD_PRINCIPAL_CLAIM",
    "EASY_AUTH_ISSUER",
    "THREAD_DELETE_SECONDS",
    "THREAD_EXPIRED",
    "MAINTENANCE_SECONDS",
    "CALLBACK_SECRET",
    "CALLBACK_URL",
    "CALLBACK_ALLOWED_HOSTS",
    "CALLBACK_ALLOW_LOCAL_HTTP",
    "CALLBACK_MAX_ATTEMPTS",
    "CALLBACK_MAX_SECONDS",
    "CALLBACK_RETRY_SCHEDULE",
    "CONSOLE_ENABLED",
    "WORKFLOW",
)
# The model behind WORKFLOW=chat-agents: Azure OpenAI (or Foundry) with Entra ID, or an
# OpenAI-compatible endpoint with a key.
MODEL_SETTINGS = (
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_DEPLOYMENT",
    "AZURE_OPENAI_API_VERSION",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
)
# Application Insights; nothing is exported (or imported) without the connection string.
TELEMETRY_SETTINGS = ("APPLICATIONINSIGHTS_CONNECTION_STRING", "APPLICATIONINSIGHTS_AUTHENTICATION_STRING")
# The Slack and GitHub adapters (functions_adapter/webhooks/): each is registered only when
# its signing secret is set. The secrets are Key Vault references in Azure.
ADAPTER_SECRETS = ("GITHUB_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN")
ADAPTER_SETTINGS = (*ADAPTER_SECRETS, "ADAPTER_ANSWER_URL", "SLACK_API_URL")
# Every setting this package reads.
CODE_SETTINGS = (
    STORAGE_SETTINGS + QUEUE_SETTINGS + TUNING_SETTINGS + MODEL_SETTINGS + TELEMETRY_SETTINGS + ADAPTER_SETTINGS
)

# Settings the platform reads, not this package; allowed in local.settings and Bicep.
PLATFORM_SETTINGS = (
    "FUNCTIONS_WORKER_RUNTIME",  # local only: Flex Consumption sets the runtime in the site config
    "PYTHON_ENABLE_INIT_INDEXING",  # HTTP streaming on the 3.11/3.12 worker; the 3.13+ worker ignores it
    # Local only: under `func start` the 3.11/3.12 worker then imports the venv's (locked) azure-functions
    # instead of its own bundled copy; in Azure the app's packages already come first, and 3.13+ ignores it.
    "PYTHON_ISOLATE_WORKER_DEPENDENCIES",
    "AzureWebJobsStorage__credential",  # host storage via managed identity
    "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY",  # lets the worker join the host's OpenTelemetry traces
    "AZURE_CLIENT_ID",  # DefaultAzureCredential's choice of user-assigned identity (model calls)
    "ENABLE_SENSITIVE_DATA",  # Agent Framework's switch for message content in its spans (we never log it)
)

DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
# Callback retries: about 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h (the
# last entry repeats) until CALLBACK_MAX_ATTEMPTS or CALLBACK_MAX_SECONDS.
DEFAULT_RETRY_SCHEDULE = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 7200.0)


# A setting is missing or malformed: the library's ConfigurationError, which workflow
# factories raise too (they read their own settings and never import this adapter).
SettingsError = ConfigurationError


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
    # How long an ``enqueue`` turn waits for a turn ahead of it on this worker (409 after).
    thread_lock_wait_seconds: float = 30.0
    sse_keepalive_seconds: float = 15.0
    # HMAC keys for checkpoint blobs (``kid:base64key``, comma-separated; the first signs).
    checkpoint_mac_keys: tuple[MacKey, ...] = ()
    # Which signature scheme WEBHOOK_SECRET verifies: standard (Standard Webhooks), github, slack.
    webhook_scheme: str = "standard"
    # Headers whose value names a request for deduplication, first present wins.
    idempotency_headers: tuple[str, ...] = ("idempotency-key", "webhook-id")
    # Background runs: the queue (RUNS_QUEUE) and where it lives (AzureWebJobsStorage).
    runs_queue: str = "runs"
    queue: QueueTarget | None = None
    # How long one invocation runs a ``superstep`` background turn before handing it on at a
    # superstep boundary: under host.json's functionTimeout (30 min), with room for the last superstep.
    run_budget_seconds: float = 1500.0
    # Who may touch a thread: ``module:function`` (functions_adapter/callers.py).
    thread_authorizer: str | None = None
    # How long a DELETE /api/threads/{id} or a housekeeping run works before it stops (202, or a mark).
    thread_delete_seconds: float = 20.0
    housekeeping_seconds: float = 300.0
    # A turn on an expired thread: "refuse" (410 once) or "restart" ("thread_created": true).
    thread_expired: str = "refuse"
    # Completion callbacks (functions_adapter/callbacks.py).
    callback_secrets: tuple[str, ...] = ()
    callback_url: str | None = None
    callback_allowed_hosts: tuple[str, ...] = ()
    callback_allow_local_http: bool = False
    callback_max_attempts: int = 20
    callback_max_seconds: int = 86_400
    callback_retry_schedule: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE
    console_enabled: bool = False  # GET /api/console: off unless set, so off in Azure
    # Bytes of recently written or read checkpoints kept per instance (0: no cache).
    checkpoint_cache_bytes: int = DEFAULT_CACHE_BYTES

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
            webhook_secrets=_secrets(env, "WEBHOOK_SECRET"),
            webhook_tolerance_seconds=_positive_int(env, "WEBHOOK_TOLERANCE_SECONDS", 300),
            workflow=env.get("WORKFLOW", "").strip() or "default",
            thread_lock_wait_seconds=float(_positive_int(env, "THREAD_LOCK_WAIT_SECONDS", 30)),
            sse_keepalive_seconds=_positive_float(env, "SSE_KEEPALIVE_SECONDS", 15.0),
            checkpoint_mac_keys=_checkpoint_mac_keys(env),
            webhook_scheme=_webhook_scheme(env),
            idempotency_headers=_idempotency_headers(env),
            runs_queue=_runs_queue(env),
            queue=_queue_target(env),
            run_budget_seconds=_positive_float(env, "RUN_BUDGET_SECONDS", 1500.0),
            thread_authorizer=env.get("THREAD_AUTHORIZER", "").strip() or None,
            thread_delete_seconds=_positive_float(env, "THREAD_DELETE_SECONDS", 20.0),
            thread_expired=_choice(env, "THREAD_EXPIRED", ("refuse", "restart")),
            housekeeping_seconds=_positive_float(env, "MAINTENANCE_SECONDS", 300.0),
            callback_secrets=_secrets(env, "CALLBACK_SECRET"),
            callback_url=env.get("CALLBACK_URL", "").strip() or None,
            callback_allowed_hosts=tuple(
                h.strip().lower() for h in env.get("CALLBACK_ALLOWED_HOSTS", "").split(",") if h.strip()
            ),
            callback_allow_local_http=_flag(env, "CALLBACK_ALLOW_LOCAL_HTTP"),
            console_enabled=_flag(env, "CONSOLE_ENABLED"),
            callback_max_attempts=_positive_int(env, "CALLBACK_MAX_ATTEMPTS", 20),
            callback_max_seconds=_positive_int(env, "CALLBACK_MAX_SECONDS", 86_400),
            callback_retry_schedule=_schedule(env),
            checkpoint_cache_bytes=_positive_int(env, "CHECKPOINT_CACHE_BYTES", DEFAULT_CACHE_BYTES, minimum=0),
        )


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """Where traces and logs go. ``Authorization=AAD`` means: send as the managed identity."""

    connection_string: str | None
    aad_client_id: str | None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TelemetrySettings:
        env = os.environ if env is None else env
        auth = dict(
            part.split("=", 1)
            for part in env.get("APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "").split(";")
            if "=" in part
        )
        aad = auth.get("Authorization", "").upper() == "AAD"
        return cls(
            connection_string=env.get("APPLICATIONINSIGHTS_CONNECTION_STRING", "").strip() or None,
            aad_client_id=auth.get("ClientId", "") if aad else None,
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


_HEADER_NAME = re.compile(r"[A-Za-z0-9-]+")
# GitHub signs no timestamp: a captured delivery verifies forever, so its ID dedupes first.
_GITHUB_IDEMPOTENCY_HEADERS = "X-GitHub-Delivery,Idempotency-Key,webhook-id"


def _idempotency_headers(env: Mapping[str, str]) -> tuple[str, ...]:
    github = env.get("WEBHOOK_SCHEME", "").strip().lower() == "github"
    default = _GITHUB_IDEMPOTENCY_HEADERS if github else "Idempotency-Key,webhook-id"
    raw = env.get("IDEMPOTENCY_HEADERS", "").strip() or default
    names = tuple(name.strip().lower() for name in raw.split(",") if name.strip())
    bad = [name for name in names if not _HEADER_NAME.fullmatch(name)]
    if bad or not names:
        raise SettingsError(f"IDEMPOTENCY_HEADERS must list header names, comma-separated; not {bad or raw!r}.")
    return names


def _runs_queue(env: Mapping[str, str]) -> str:
    return validate_queue_name(env.get("RUNS_QUEUE", "").strip() or "runs")


def _queue_target(env: Mapping[str, str]) -> QueueTarget | None:
    """The queue trigger's own connection (``AzureWebJobsStorage``), so the app enqueues
    where the host listens; None when unset (background runs then answer 500)."""
    uri = env.get("AzureWebJobsStorage__queueServiceUri", "").strip()
    if uri:
        client_id = env.get("AzureWebJobsStorage__clientId", "").strip() or None
        return QueueTarget(queue_service_uri=uri, client_id=client_id)
    connection_string = env.get("AzureWebJobsStorage", "").strip()
    return QueueTarget(connection_string=connection_string) if connection_string else None


def _checkpoint_mac_keys(env: Mapping[str, str]) -> tuple[MacKey, ...]:
    try:
        return parse_mac_keys(env.get("CHECKPOINT_MAC_KEYS", ""))
    except MacConfigError as exc:
        raise SettingsError(f"CHECKPOINT_MAC_KEYS: {exc}") from None


def _webhook_scheme(env: Mapping[str, str]) -> str:
    """``standard`` without a secret means "signatures off"; naming GitHub or Slack says the
    deliveries are signed, so without a secret to check them nothing may run unsigned."""
    scheme = _choice(env, "WEBHOOK_SCHEME", SCHEMES)
    if scheme != "standard" and not _secrets(env, "WEBHOOK_SECRET"):
        raise SettingsError(f"WEBHOOK_SCHEME={scheme} needs WEBHOOK_SECRET (the sender's signing secret).")
    return scheme


def _secrets(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    # Several secrets, space- or comma-separated, so a secret can be rotated (the first signs).
    secrets = tuple(s for s in env.get(name, "").replace(",", " ").split() if s)
    for secret in secrets:
        try:
            key = secret_bytes(secret)
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None
        check_key_length(name, key)
    return secrets


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = env.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}.")
    return value


# An on/off setting's spellings (any case); docs/configuration.md names the same ones.
FLAG_ON = ("true", "1")
FLAG_OFF = ("false", "0", "")


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "")
    value = raw.strip().lower()
    if value not in FLAG_ON + FLAG_OFF:
        raise SettingsError(f"{name} must be true or false (or 1 or 0; empty means false), not {raw.strip()!r}.")
    return value in FLAG_ON


def _schedule(env: Mapping[str, str]) -> tuple[float, ...]:
    raw = env.get("CALLBACK_RETRY_SCHEDULE", "").strip()
    if not raw:
        return DEFAULT_RETRY_SCHEDULE
    try:
        delays = tuple(float(part) for part in raw.split(","))
    except ValueError:
        raise SettingsError("CALLBACK_RETRY_SCHEDULE must be seconds, comma-separated.") from None
    if not delays or any(not 0 <= d <= 7 * 86_400 for d in delays):
        raise SettingsError("CALLBACK_RETRY_SCHEDULE delays must be between 0 and 7 days (the queue's limit).")
    return delays


# An HMAC key shorter than this can be guessed; an empty one (``whsec_``) signs with
# nothing at all. Every secret setting is held to the same floor.
MIN_SECRET_BYTES = 16


def check_key_length(setting: str, key: bytes) -> bytes:
    """``SettingsError`` (500 ``server_misconfigured``) for a key under ``MIN_SECRET_BYTES``."""
    if len(key) < MIN_SECRET_BYTES:
        raise SettingsError(f"{setting}: a secret must be at least {MIN_SECRET_BYTES} bytes, not {len(key)}.")
    return key


def _positive_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, not {raw!r}.") from None
    if not 0 < value < 86_400:
        raise SettingsError(f"{name} must be more than 0 and less than a day.")
    return value


def _positive_int(env: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, not {raw!r}.") from None
    if value < minimum:
        raise SettingsError(f"{name} must be positive." if minimum == 1 else f"{name} must be at least {minimum}.")
    return value
