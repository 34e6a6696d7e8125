"""The name of every app setting the code reads, and of those the platform reads.

``tests/infra/test_infra.py::test_settings_parity_code_local_and_bicep`` checks these lists against
``local.settings.sample.json`` and the Bicep app settings, so the three cannot drift.
``settings.py`` parses the values.
"""

from __future__ import annotations

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
