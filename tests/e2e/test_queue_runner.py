"""The dev queue runner does what the host's queue listener does, against real Azurite."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import azure.functions as func
import pytest
from azure.core.exceptions import ResourceExistsError
from azure.functions.queue import QueueMessage
from azure.storage.queue import BinaryBase64EncodePolicy, TextBase64DecodePolicy, TextBase64EncodePolicy
from azure.storage.queue.aio import QueueClient

from devtools.azurite import ACCOUNT, Azurite, start_azurite
from devtools.function_host import FunctionHost, resolve_setting_expressions
from devtools.queue_runner import QueueRunner
from resumable.storage import run_queue

SEEN: list[tuple[str, bytes, int]] = []
MESSAGES: list[func.QueueMessage] = []
WHEN: list[float] = []
FAIL_FIRST: dict[bytes, int] = {}


def _app(*, poison_trigger: bool = True) -> func.FunctionApp:
    app = func.FunctionApp()

    @app.queue_trigger(arg_name="message", queue_name="%TEST_QUEUE%", connection="AzureWebJobsStorage")
    async def work(message: func.QueueMessage) -> None:
        SEEN.append(("work", message.get_body(), message.dequeue_count))
        MESSAGES.append(message)
        WHEN.append(time.monotonic())
        if FAIL_FIRST.get(message.get_body(), 0) > 0:
            FAIL_FIRST[message.get_body()] -= 1
            raise RuntimeError("not yet")

    if poison_trigger:

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
    MESSAGES.clear()
    WHEN.clear()
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


async def _count(azurite: Azurite, queue: str) -> int:
    """Messages in the queue, visible or not (Azurite counts both)."""
    async with QueueClient.from_connection_string(azurite.connection_string, queue) as client:
        return (await client.get_queue_properties()).approximate_message_count


async def _raw(azurite: Azurite, queue: str) -> list[str]:
    """The queue's message texts as stored, undecoded."""
    async with QueueClient.from_connection_string(azurite.connection_string, queue) as client:
        return [str(m.content) for m in await client.peek_messages(max_messages=32)]


async def test_a_message_is_delivered_once_and_deleted(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path))
    await _send(azurite, queue, b"run-1")
    assert await runner.run_until_idle() == 1
    assert SEEN == [("work", b"run-1", 1)]
    [message] = MESSAGES
    assert message.id and message.pop_receipt and message.insertion_time and message.expiration_time
    assert await _count(azurite, queue) == 0  # deleted, not merely invisible
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
    assert await _count(azurite, queue) == 0
    assert await _count(azurite, f"{queue}-poison") == 0  # the poison trigger succeeded


async def test_the_poison_queue_holds_the_same_base64_text(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    host_json = _host_json(tmp_path, visibilityTimeout="00:00:00", maxDequeueCount=2)
    runner = QueueRunner(FunctionHost(_app(poison_trigger=False)), host_json=host_json)
    FAIL_FIRST[b"\x00binary\xff"] = 99
    await _send(azurite, queue, b"\x00binary\xff")
    assert await runner.run_until_idle() == 2
    assert await _count(azurite, queue) == 0
    assert await _raw(azurite, f"{queue}-poison") == [base64.b64encode(b"\x00binary\xff").decode()]


async def test_an_over_delivered_message_is_poisoned_without_running(
    azurite: Azurite, queue: str, tmp_path: Path
) -> None:
    """As after a crash mid-run: more deliveries than maxDequeueCount and no verdict."""
    await _send(azurite, queue, b"crashed")
    async with QueueClient.from_connection_string(azurite.connection_string, queue) as client:
        for _ in range(3):  # three deliveries that never finished
            [message] = [m async for m in client.receive_messages(max_messages=1, visibility_timeout=60)]
            await client.update_message(message, visibility_timeout=0)
    runner = QueueRunner(
        FunctionHost(_app()), host_json=_host_json(tmp_path, visibilityTimeout="00:00:00", maxDequeueCount=2)
    )
    await runner.run_until_idle()
    assert SEEN == [("poisoned", b"crashed", 1)]


async def test_a_failed_delivery_waits_for_the_visibility_timeout(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path, visibilityTimeout="00:00:30"))
    FAIL_FIRST[b"later"] = 1
    await _send(azurite, queue, b"later")
    assert await runner.run_until_idle() == 1  # failed once; invisible for 30 s now
    assert SEEN == [("work", b"later", 1)]
    assert await _count(azurite, queue) == 1  # still there, waiting


async def test_the_background_loop_retries_after_the_visibility_timeout(
    azurite: Azurite, queue: str, tmp_path: Path
) -> None:
    host_json = _host_json(tmp_path, visibilityTimeout="00:00:01", maxPollingInterval="00:00:02")
    FAIL_FIRST[b"soon"] = 1
    async with QueueRunner(FunctionHost(_app()), host_json=host_json, poll_seconds=0.05) as runner:
        await _send(azurite, queue, b"soon")
        assert runner.running
        for _ in range(300):  # up to 15 s
            if len(SEEN) >= 2 and not await _count(azurite, queue):
                break
            await asyncio.sleep(0.05)
    assert not runner.running
    assert SEEN == [("work", b"soon", 1), ("work", b"soon", 2)]
    assert WHEN[1] - WHEN[0] >= 0.9  # waited out visibilityTimeout, no sooner


async def test_the_app_s_encoding_is_what_the_runner_decodes(azurite: Azurite, queue: str, tmp_path: Path) -> None:
    """resumable.storage.run_queue enqueues base64 text; the trigger gets the run ID back as bytes."""
    try:
        await run_queue.RunQueue(run_queue.QueueTarget(connection_string=azurite.connection_string), queue).enqueue(
            "run-0123"
        )
        assert await _raw(azurite, queue) == [base64.b64encode(b"run-0123").decode()]
    finally:
        await run_queue.close_all()
    assert await QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path)).run_until_idle() == 1
    assert SEEN == [("work", b"run-0123", 1)]


async def test_the_connection_string_reaches_the_queue_service(azurite: Azurite, queue: str) -> None:
    assert azurite.queue_port and azurite.queue_port != azurite.port
    assert f"QueueEndpoint=http://127.0.0.1:{azurite.queue_port}/{ACCOUNT};" in azurite.connection_string
    client = QueueClient.from_connection_string(
        azurite.connection_string,
        queue,
        message_encode_policy=TextBase64EncodePolicy(),
        message_decode_policy=TextBase64DecodePolicy(),
    )
    async with client:
        await client.create_queue()
        await client.send_message("héllo")
        [message] = [m async for m in client.receive_messages(max_messages=1)]
        assert (message.content, message.dequeue_count) == ("héllo", 1)
        await client.delete_message(message)


def test_a_restart_on_the_same_ports_finds_queued_messages(tmp_path: Path) -> None:
    """Like blobs: with ``location``, the queue service keeps its messages across a restart."""

    async def send(emulator: Azurite) -> None:
        await _send(emulator, "kept", b"survivor")

    first = start_azurite(location=tmp_path / "azurite")
    try:
        asyncio.run(send(first))
    finally:
        first.stop()
    assert (tmp_path / "azurite" / "queue").is_dir()
    again = start_azurite(port=first.port, queue_port=first.queue_port or 0, location=tmp_path / "azurite")
    try:
        assert again.queue_port == first.queue_port
        assert asyncio.run(_raw(again, "kept")) == [base64.b64encode(b"survivor").decode()]
    finally:
        again.stop()


async def test_invoke_queue_trigger_calls_the_function(queue: str) -> None:
    host = FunctionHost(_app())
    # func.QueueMessage takes no dequeue_count; the worker builds this subclass, as the runner does.
    await host.invoke_queue_trigger("work", QueueMessage(id="m1", body=b"direct", dequeue_count=2))
    assert SEEN == [("work", b"direct", 2)]
    with pytest.raises(LookupError, match="nope"):
        await host.invoke_queue_trigger("nope", QueueMessage(body=b""))


async def test_a_missing_setting_in_a_queue_name_is_a_clear_error(
    queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path))
    monkeypatch.delenv("TEST_QUEUE")
    with pytest.raises(LookupError, match="%TEST_QUEUE%"):
        await runner.run_once()


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
    assert options.max_polling_interval == 2.0


def test_host_defaults_apply_when_host_json_is_silent(tmp_path: Path) -> None:
    options = QueueRunner(FunctionHost(_app()), host_json=_host_json(tmp_path)).options
    assert (options.max_dequeue_count, options.visibility_timeout, options.batch_size) == (5, 0.0, 16)
    assert options.max_polling_interval == 60.0
