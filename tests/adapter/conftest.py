"""Fixtures shared by the adapter tests of ownership."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring


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


# The versions of ``default`` a test hosts (tests/versioned_workflow.py), and the fixture that hosts them.
V1 = "workflows.default_conversation:SPEC"
V2 = "tests.versioned_workflow:SPEC_V2"
V3 = "tests.versioned_workflow:SPEC_V3"
Register = Callable[..., None]


@pytest.fixture
def register(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[Register]:
    """``register(policy, v1=..., v2=...)``: what the next request's app hosts as ``default``
    (a redeploy: the catalog is read per request); ``notes`` is hosted beside it."""

    def apply(policy: str = "pinned", **specs: str) -> None:
        monkeypatch.setitem(workflows.REGISTRY, "default", workflows.Versions(specs, policy=policy))
        wiring.workflow_spec.cache_clear()

    monkeypatch.setitem(workflows.REGISTRY, "notes", "tests.versioned_workflow:NOTES")
    wiring.workflow_spec.cache_clear()
    yield apply
    wiring.workflow_spec.cache_clear()
