"""The dev queue runner does what the host's queue listener does, against real Azurite."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import azure.functions as func
import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.queue import BinaryBase64EncodePolicy
from azure.storage.queue.aio import QueueClient

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost, resolve_setting_expressions
from devtools.queue_runner import QueueRunner

SEEN: list[tuple[str, bytes, int]] = []
FAIL_FIRST: dict[bytes, int] = {}


def _app() -> func.FunctionApp:
    app = func.FunctionApp()

    @app.queue_trigger(arg_name="message", queue_name="%TEST_QUEUE%", connection="AzureWebJobsStorage")
    async def work(message: func.QueueMessage) -> None:
        SEEN.append(("work", message.get_body(), message.dequeue_count))
        if FAIL_FIRST.get(message.get_body(), 0) > 0:
            FAIL_FIRST[message.get_body()] -= 1
            raise RuntimeError("not yet")

    @app.queue_trigger(arg_name="message", queue_name="%TEST_QUEUE%-poison", connection="AzureWebJobsStorage")
    async def poisoned(message: func.QueueMessage) -> None:
        SEEN.append(("poisoned", message.get_body(), message.dequeue_count))

    return app


@pytest.fixture
async def queue(azurite: Azurite, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    name = f"q-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("TEST_QUEUE", name)
    monkeypatch.setenv("AzureWebJobsStorage", azurite.connection_string)
    SEEN.clear()
    FAIL_FIRST.clear()
    yield name


def _host_json(tmp_path: Path, **queues: object) -> Path:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"version": "2.0", "extensions": {"queues": queues}}))
    return path


async def _send(azurite: Azurite, queue: str, body: bytes) -> None:
    client = QueueClient.from_connection_string(
        azurite.connection_string, queue, message_encode_policy=BinaryBase64EncodePolicy()
    )
    async with client:
        with contextlib.suppress(ResourceExistsError):
            await client.create_queue()
        await client.send_message(body)


async def test_a_message_is_delivered_once_and_deleted(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path))
    await _send(azurite, queue, b"run-1")
    assert await runner.run_until_idle() == 1
    assert SEEN == [("work", b"run-1", 1)]
    assert await runner.run_until_idle() == 0


async def test_a_failing_message_is_retried_with_its_dequeue_count(
    azurite: Azurite, queue: str, tmp_path: Path
) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path, visibilityTimeout="00:00:00"))
    FAIL_FIRST[b"flaky"] = 2
    await _send(azurite, queue, b"flaky")
    assert await runner.run_until_idle() == 3
    assert SEEN == [("work", b"flaky", 1), ("work", b"flaky", 2), ("work", b"flaky", 3)]


async def test_after_max_dequeue_count_the_message_goes_to_the_poison_queue(
    azurite: Azurite, queue: str, tmp_path: Path
) -> None:
    runner = QueueRunner(
        FunctionHost(_app()), host_json=_host_json(tmp_path, visibilityTimeout="00:00:00", maxDequeueCount=3)
    )
    FAIL_FIRST[b"doomed"] = 99
    await _send(azurite, queue, b"doomed")
    await runner.run_until_idle()
    assert SEEN == [
        ("work", b"doomed", 1),
        ("work", b"doomed", 2),
        ("work", b"doomed", 3),
        ("poisoned", b"doomed", 1),
    ]


async def test_a_failed_delivery_waits_for_the_visibility_timeout(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path, visibilityTimeout="00:00:30"))
    FAIL_FIRST[b"later"] = 1
    await _send(azurite, queue, b"later")
    assert await runner.run_until_idle() == 1  # failed once; invisible for 30 s now
    assert SEEN == [("work", b"later", 1)]


def test_setting_expressions_resolve_like_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_setting_expressions("%A%-poison", {"A": "runs"}) == "runs-poison"
    with pytest.raises(LookupError, match="MISSING"):
        resolve_setting_expressions("%MISSING%", {})


def test_the_app_s_host_json_options_are_what_the_runner_reads() -> None:
    options = QueueRunner(FunctionHost(_app())).options
    assert (options.max_dequeue_count, options.visibility_timeout, options.batch_size, options.base64) == (
        5,
        5.0,
        8,
        True,
    )
