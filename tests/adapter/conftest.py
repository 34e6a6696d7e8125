"""Fixtures shared by the adapter tests of ownership."""

from __future__ import annotations

import pytest

from devtools.function_host import FunctionHost


@pytest.fixture
async def two_origins(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    """The app with a gateway's principal header (``x-caller``) trusted, so Alice and Bob are two
    origins, and nothing else that would refuse a call first (no authorizer, no signatures)."""
    monkeypatch.setenv("THREAD_PRINCIPAL_HEADER", "x-caller")
    for name in (
        "CONSOLE_ENABLED",
        "SLACK_SIGNING_SECRET",
        "GITHUB_WEBHOOK_SECRET",
        "WEBHOOK_SECRET",
        "THREAD_AUTHORIZER",
    ):
        monkeypatch.delenv(name, raising=False)
    return host
