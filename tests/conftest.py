"""Shared fixtures: one real Azurite per test session, a fresh container per test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import workflows
from devtools.azurite import Azurite, start_azurite
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import wiring as composition
from resumable.storage import clients as storage_client
from resumable.storage import run_queue
from tests import recording_workflow

_EXPORTER = InMemorySpanExporter()
# Signs completion callbacks in the callback tests (the Standard Webhooks test secret).
CALLBACK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def pytest_configure(config: pytest.Config) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Finished OpenTelemetry spans recorded during the test."""
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


# On a machine with every core busy the emulator and the test process get a sliver of CPU each:
# Azurite took 46-49 s to start at load 15 on 2 cores (8-25 s at load 9-13), and a storage call
# may wait seconds for it. Production's 10 s per attempt (STORAGE_TIMEOUT_SECONDS) exists to fail
# fast on a real outage; here a slow emulator is not an outage, so the tests give it longer. A
# test about timeouts sets its own value after this fixture, which wins.
TEST_STORAGE_TIMEOUT_SECONDS = "60"


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    emulator = start_azurite()
    yield emulator
    emulator.stop()


@pytest.fixture
async def storage_env(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """Point the app at Azurite with a container of its own; yields the container name."""
    container = f"t{uuid.uuid4().hex[:20]}"
    monkeypatch.setenv("CHECKPOINT_STORAGE", azurite.connection_string)
    monkeypatch.setenv("CHECKPOINT_CONTAINER", container)
    monkeypatch.setenv("STORAGE_TIMEOUT_SECONDS", TEST_STORAGE_TIMEOUT_SECONDS)
    for name in ("MAX_REQUEST_BYTES", "MAX_CHECKPOINT_BYTES", "CHECKPOINT_ALLOWED_TYPES", "WORKFLOW"):
        monkeypatch.delenv(name, raising=False)
    yield container
    await storage_client.close_all()


@pytest.fixture
async def queue_env(azurite: Azurite, storage_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """The run queue on Azurite (the host's AzureWebJobsStorage), a fresh one per test; yields its name."""
    name = f"runs-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("AzureWebJobsStorage", azurite.connection_string)
    monkeypatch.setenv("RUNS_QUEUE", name)
    yield name
    await run_queue.close_all()


@pytest.fixture
def ops(monkeypatch: pytest.MonkeyPatch) -> OperationCounter:
    """Counts every storage request made by clients built after this fixture."""
    counter = OperationCounter()
    monkeypatch.setattr(storage_client, "request_hook", counter)
    return counter


@pytest.fixture
def host(storage_env: str) -> FunctionHost:
    import function_app

    return FunctionHost(function_app.app)


@pytest.fixture
def recording(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    """The function app hosting the call-recording workflow instead of the default."""
    monkeypatch.setitem(workflows.REGISTRY, "recording", "tests.recording_workflow:SPEC")
    monkeypatch.setenv("WORKFLOW", "recording")
    recording_workflow.CALLS.clear()
    # Fresh events per test: an asyncio.Event binds to the loop of its first waiter.
    monkeypatch.setattr(recording_workflow, "RELEASE", asyncio.Event())
    monkeypatch.setattr(recording_workflow, "WAITING", asyncio.Event())
    recording_workflow.ON_TAIL.clear()
    recording_workflow.GAVE_UP.clear()
    composition.workflow_spec.cache_clear()
    yield host
    composition.workflow_spec.cache_clear()


@pytest.fixture
async def callback_env(
    queue_env: str, recording: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FunctionHost]:
    """Callbacks on, signed with ``CALLBACK_SECRET``, to loopback, retried at once."""
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setenv("CALLBACK_RETRY_SCHEDULE", "0")  # the shortened schedule: retry at once
    yield recording


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    """A loopback webhook receiver that verifies with ``CALLBACK_SECRET``."""
    hook = WebhookReceiver(CALLBACK_SECRET)
    await hook.start()
    yield hook
    await hook.stop()


LAYERS = ("library", "adapter", "infra", "e2e", "browser")
# The few tests that take tens of seconds (a 20,000-blob pass, 2,000 fuzzed requests):
# the fast inner loop leaves them out.
SLOW = {"test_housekeeping_scale.py", "test_fuzz.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test is marked with its layer, the folder it lives in, and ``slow`` where it is."""
    for item in items:
        layer = item.path.parent.name
        if layer in LAYERS:
            item.add_marker(getattr(pytest.mark, layer))
        if item.path.name in SLOW:
            item.add_marker(pytest.mark.slow)
