"""Which chat model ``chat-agents`` calls, read from its own settings.

Workflows read their settings here, not from the Functions adapter, so the registry
(``workflows``) and the library (``resumable``) never import each other's hosts.
A missing or malformed setting is ``ConfigurationError``: the host reports it as 500
``server_misconfigured``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from resumable.base.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Which chat model the agent workflow calls, and how it authenticates."""

    provider: str  # "azure-openai" or "openai-compatible"
    model: str
    endpoint: str
    api_key: str | None = None
    api_version: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ModelSettings:
        env = os.environ if env is None else env
        azure_endpoint = env.get("AZURE_OPENAI_ENDPOINT", "").strip()
        if azure_endpoint:
            deployment = env.get("AZURE_OPENAI_DEPLOYMENT", "").strip()
            if not deployment:
                raise ConfigurationError("AZURE_OPENAI_DEPLOYMENT is required with AZURE_OPENAI_ENDPOINT.")
            return cls(
                provider="azure-openai",
                model=deployment,
                endpoint=azure_endpoint,
                api_version=env.get("AZURE_OPENAI_API_VERSION", "").strip() or None,
            )
        base_url = env.get("OPENAI_BASE_URL", "").strip()
        api_key = env.get("OPENAI_API_KEY", "").strip()
        model = env.get("OPENAI_MODEL", "").strip()
        if base_url and api_key and model:
            return cls(provider="openai-compatible", model=model, endpoint=base_url, api_key=api_key)
        raise ConfigurationError(
            "WORKFLOW=chat-agents needs a model: set AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_DEPLOYMENT "
            "(Entra ID), or OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL."
        )
