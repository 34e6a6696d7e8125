"""Background runs (202 + queue): accept, status, join, cancel, and each run committed once.

Everything runs against real Azurite (blob + queue) through the registered functions:
the HTTP routes through ``FunctionHost``, the queue trigger through ``QueueRunner``
(the host's listener) or, where a test must control deliveries, by invoking the
registered queue function with the message the host would build.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import types
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.functions.queue import QueueMessage
from azure.storage.queue import TextBase64DecodePolicy
from azure.storage.queue.aio import QueueClient

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from devtools.queue_runner import QueueRunner
from functions_adapter import wiring
from resumable import background
from resumable.background import control as run_control
from resumable.background import executor as run_executor
from resumable.background.records import Lease, RunRecords
from resumable.base.tracing import is_workflow_run_span
from tests import recording_workflow

ASYNC = {"Prefer": "respond-async"}


@pytest.fixture
def runner(recording: FunctionHost, queue_env: str) -> QueueRunner:
    return QueueRunner(recording)


async def _accept(host: FunctionHost, path: str = "/api/runs", **body: Any) -> dict[str, Any]:
    response = await host.request("POST", path, json_body=body, headers=ASYNC)
    assert response.status == 202, await response.body()
    return await response.json()


async def _status(host: FunctionHost, run_id: str, **headers: str) -> dict[str, Any]:
    response = await host.request("GET", f"/api/runs/{run_id}", headers=headers)
    assert response.status == 200
    return await response.json()


async def _records() -> RunRecords:
    return RunRecords(wiring.container_for(wiring.load_settings()))


async def _lapse_lease(records: RunRecords, run_id: str) -> None:
    """What time does to a dead or stalled holder: its lease lapses."""
    await records.update(run_id, lambda r: dataclasses.replace(r, lease=Lease(r.lease.token, 0)))


async def _until_claimed(records: RunRecords, run_id: str, attempts: int) -> None:
    """Wait until an attempt numbered ``attempts`` holds the run's lease."""
    for _ in range(200):
        stored = await records.get(run_id)
        if stored is not None and stored.value.attempts >= attempts:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no attempt {attempts} claimed {run_id}")


async def _blob_names(prefix: str) -> list[str]:
    container = wiring.container_for(wiring.load_settings())
    try:
        return [b.name async for b in container.list_blobs(name_starts_with=prefix)]
    except ResourceNotFoundError:  # no container yet: nothing was written
        return []


async def _checkpoint_ids() -> list[str]:
    return await _blob_names("checkpoints/")


async def _take_message(queue: str, azurite: Azurite) -> QueueMessage:
    """Receive the run's message as the host would, and build what the function gets."""
    client = QueueClient.from_connection_string(
        azurite.connection_string, queue, message_decode_policy=TextBase64DecodePolicy()
    )
    async with client:
        async for message in client.receive_messages(visibility_timeout=600):
            return QueueMessage(id=message.id, body=message.content.encode(), dequeue_count=message.dequeue_count)
    raise AssertionError("no message on the run queue")


def _deliver(host: FunctionHost, message: QueueMessage, trigger: str = "run_in_background") -> Any:
    return host.triggers[trigger].handler(message)


async def _running(
    host: FunctionHost, queue: str, azurite: Azurite, text: str
) -> tuple[str, QueueMessage, asyncio.Future[Any]]:
    """Accept a run whose last executor blocks, deliver it, and wait until it is blocked."""
    run_id = (await _accept(host, messages=text))["run_id"]
    message = await _take_message(queue, azurite)
    delivery = asyncio.ensure_future(_deliver(host, message))
    await asyncio.wait_for(recording_workflow.WAITING.wait(), 10)
    return run_id, message, delivery


# -- accept ---------------------------------------------------------------------------------


async def test_accept_answers_202_and_runs_nothing_yet(recording: FunctionHost, queue_env: str) -> None:
    response = await recording.request("POST", "/api/runs", json_body={"messages": "hello"}, headers=ASYNC)
    assert response.status == 202
    body = await response.json()
    run_id = body["run_id"]
    assert response.headers["location"] == f"/api/runs/{run_id}"
    assert response.headers["retry-after"] == "1"
    assert response.headers["preference-applied"] == "respond-async"
    assert body == {
        "run_id": run_id,
        "status": "queued",
        "thread_id": None,
        "checkpoint_id": None,
        "created_at": body["created_at"],
        "links": {
            "self": f"/api/runs/{run_id}",
            "stream": f"/api/runs/{run_id}/stream",
            "cancel": f"/api/runs/{run_id}/cancel",
        },
    }
    assert body["created_at"].endswith("Z")
    assert recording_workflow.CALLS == []
    status = await _status(recording, run_id)
    assert status["status"] == "queued" and status["attempts"] == 0 and status["result"] is None


async def test_background_field_also_starts_a_background_run(recording: FunctionHost, queue_env: str) -> None:
    response = await recording.request("POST", "/api/runs", json_body={"messages": "hi", "background": True})
    assert response.status == 202
    assert "preference-applied" not in response.headers
    bad = await recording.request("POST", "/api/runs", json_body={"messages": "hi", "background": "yes"})
    assert bad.status == 400


async def test_what_can_be_refused_is_refused_before_the_202(recording: FunctionHost, queue_env: str) -> None:
    missing = await recording.request(
        "POST", "/api/runs", json_body={"checkpoint_id": "nope", "messages": "x"}, headers=ASYNC
    )
    assert (missing.status, (await missing.json())["error"]["code"]) == (404, "checkpoint_not_found")
    shape = await recording.request("POST", "/api/runs", json_body={"messages": 3}, headers=ASYNC)
    assert shape.status == 400
    media = await recording.request(
        "POST", "/api/runs", body=b'{"messages":"x"}', headers={**ASYNC, "content-type": "text/plain"}
    )
    assert media.status == 415
    thread = await recording.request("POST", "/api/threads/a..b/runs", json_body={"messages": "x"}, headers=ASYNC)
    assert thread.status == 400
    assert await _checkpoint_ids() == []
    assert await _blob_names("runs/") == []


async def test_without_a_queue_connection_it_is_a_server_misconfiguration(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AzureWebJobsStorage")
    response = await recording.request("POST", "/api/runs", json_body={"messages": "x"}, headers=ASYNC)
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")


async def test_idempotency_key_retry_replays_the_202_byte_for_byte(
    recording: FunctionHost, runner: QueueRunner
) -> None:
    headers = {**ASYNC, "Idempotency-Key": "delivery-1"}
    first = await recording.request("POST", "/api/runs", json_body={"messages": "once"}, headers=headers)
    second = await recording.request("POST", "/api/runs", json_body={"messages": "once"}, headers=headers)
    assert (first.status, second.status) == (202, 202)
    assert await first.body() == await second.body()
    await runner.run_until_idle()
    third = await recording.request("POST", "/api/runs", json_body={"messages": "once"}, headers=headers)
    assert await third.body() == await first.body()
    await runner.run_until_idle()
    assert [c for c in recording_workflow.CALLS if c[0] == "head"] == [("head", "once")]
    other = await recording.request("POST", "/api/runs", json_body={"messages": "other"}, headers=headers)
    assert (other.status, (await other.json())["error"]["code"]) == (422, "idempotency_key_reused")


async def test_an_accept_costs_one_enqueue_and_one_or_three_blob_operations(
    recording: FunctionHost, queue_env: str, ops: Any, runner: QueueRunner
) -> None:
    await _accept(recording, messages="warm up: creates the queue and the container")
    await _accept(recording, "/api/threads/counted/runs", messages="warm up the thread")
    ops.reset()
    await _accept(recording, messages="counted")
    assert dict(ops.counts) == {"POST": 1, "PUT": 1}  # the message, the record
    ops.reset()
    await _accept(recording, "/api/threads/counted/runs", messages="counted")
    # + the thread's pointer, read to refuse now what the turn would be refused for (the
    # thread has no turns yet, so no checkpoint is read), its metadata (a thread with no turn
    # yet is its metadata's origin's: threads/ownership.py), and the pending list's read and CAS.
    assert dict(ops.counts) == {"POST": 1, "GET": 3, "PUT": 2}
    await runner.run_until_idle()
    ops.reset()
    await _accept(recording, "/api/threads/counted/runs", messages="counted again")
    # Once the thread has a turn, its pointer alone says whose it is: the pointer, its head
    # checkpoint (now there is one), and the pending list's read and CAS; no metadata read.
    assert dict(ops.counts) == {"POST": 1, "GET": 3, "PUT": 2}


# -- execution ------------------------------------------------------------------------------


async def test_a_background_run_gives_the_synchronous_result(recording: FunctionHost, runner: QueueRunner) -> None:
    run_id = (await _accept(recording, messages="hello"))["run_id"]
    await runner.run_until_idle()
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded", status
    assert status["attempts"] == 1 and status["error"] is None
    assert status["started_at"] and status["finished_at"]
    result = status["result"]
    # The checkpoint is named after the run: two attempts could never both save one.
    assert result["checkpoint_id"] == run_id
    sync = await recording.request("POST", "/api/runs", json_body={"messages": "hello"})
    assert set(result) == set(await sync.json())
    resumed = await recording.request(
        "POST", "/api/runs", json_body={"checkpoint_id": result["checkpoint_id"], "messages": "again"}
    )
    assert resumed.status == 200


async def test_a_failing_workflow_fails_the_run_with_the_synchronous_code(
    recording: FunctionHost, runner: QueueRunner
) -> None:
    run_id = (await _accept(recording, messages="fail please"))["run_id"]
    await runner.run_until_idle()
    status = await _status(recording, run_id)
    assert status["status"] == "failed"
    assert status["error"]["code"] == "workflow_failed"
    assert "secret" not in json.dumps(status)
    assert await _checkpoint_ids() == []


async def test_unknown_run_is_404_and_a_bad_id_400(recording: FunctionHost, queue_env: str) -> None:
    missing = await recording.request("GET", "/api/runs/0123abc")
    assert (missing.status, (await missing.json())["error"]["code"]) == (404, "run_not_found")
    assert (await recording.request("GET", "/api/runs/a..b")).status == 400
    assert (await recording.request("POST", "/api/runs/0123abc/cancel")).status == 404
    assert (await recording.request("GET", "/api/runs/0123abc/stream")).status == 404


async def test_status_long_polls_with_prefer_wait(
    recording: FunctionHost, runner: QueueRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = (await _accept(recording, messages="slow wait"))["run_id"]

    async def release_later() -> None:
        await recording_workflow.WAITING.wait()
        await asyncio.sleep(0.3)
        recording_workflow.RELEASE.set()

    # The long poll's clock stands still, so its wait never runs out: it answers only
    # because it saw the run finish (one that missed it would wait forever: the timeout
    # turns that hang into a failure; it bounds nothing a working poll comes near).
    with monkeypatch.context() as patch:
        patch.setattr(run_control, "time", types.SimpleNamespace(monotonic=lambda: 0.0))
        async with asyncio.timeout(120):
            status, *_ = await asyncio.gather(
                _status(recording, run_id, Prefer="wait=20"), runner.run_until_idle(), release_later()
            )
    assert status["status"] == "succeeded"
    quick = await recording.request("GET", f"/api/runs/{run_id}", headers={"Prefer": "wait=60"})
    assert (await quick.json())["status"] == "succeeded"


# -- commit once ----------------------------------------------------------------------------


async def test_the_same_message_delivered_twice_at_once_runs_once(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    run_id = (await _accept(recording, messages="twice"))["run_id"]
    message = await _take_message(queue_env, azurite)
    await asyncio.gather(_deliver(recording, message), _deliver(recording, message))
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 1
    assert [c for c in recording_workflow.CALLS if c[0] == "head"] == [("head", "twice")]
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]


async def test_redelivery_after_a_crash_between_save_and_result_reports_the_saved_result(
    recording: FunctionHost, queue_env: str, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = (await _accept(recording, messages="crash after save"))["run_id"]
    message = await _take_message(queue_env, azurite)

    async def crash(self: background.RunLease, body: bytes) -> None:
        self.state = background.LeaseState.SETTLED  # the instance dies here: no outcome is written
        self.settled.set()

    with monkeypatch.context() as patch:
        patch.setattr(background.RunLease, "succeeded", crash)
        # The outcome was never written, so the message is not acknowledged either.
        with pytest.raises(background.RecordNotReady):
            await _deliver(recording, message)
    records = await _records()
    stored = await records.get(run_id)
    assert stored is not None
    record = stored.value
    assert record.status == "running" and len(record.commits) == 1
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]
    # Time passes: the dead instance's lease lapses; the message comes back.
    await _lapse_lease(records, run_id)
    await _deliver(recording, message)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 1
    assert status["result"] == json.loads(record.commits[0].body)
    assert [c for c in recording_workflow.CALLS if c[0] == "head"] == [("head", "crash after save")]
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]


async def test_redelivery_after_a_crash_mid_run_runs_it_again_once(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    run_id = (await _accept(recording, messages="crash mid run"))["run_id"]
    message = await _take_message(queue_env, azurite)
    records = await _records()
    # What an instance that died mid-run leaves: running, one attempt, a lapsed lease.
    await records.update(run_id, lambda r: dataclasses.replace(r, status="running", attempts=1, lease=Lease("dead", 0)))
    await _deliver(recording, message)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 2
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]
    events = await _join(recording, run_id)
    assert events[0][:2] == ("2.0", "restarted")
    assert events[-1][1] == "done" and events[-1][0].startswith("2.")


async def test_a_stalled_attempt_that_lost_its_lease_commits_nothing(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    run_id, message, first = await _running(recording, queue_env, azurite, "stall wait")
    records = await _records()
    stored = await records.get(run_id)
    assert stored is not None and stored.value.status == "running"
    # The first attempt stalls past its lease; the message comes back to another instance.
    await _lapse_lease(records, run_id)
    second = asyncio.ensure_future(_deliver(recording, message))
    # Only once the second attempt holds the lease may the first wake: released any earlier, the
    # first would commit under a lapsed lease nobody had taken over, which is its right.
    await _until_claimed(records, run_id, attempts=2)
    recording_workflow.RELEASE.set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    status = await _status(recording, run_id)
    assert status["status"] == "succeeded" and status["attempts"] == 2
    assert await _checkpoint_ids() == [f"checkpoints/{run_id}.json"]
    final = await records.get(run_id)
    assert final is not None and len(final.value.commits) == 1


# -- nothing stuck --------------------------------------------------------------------------


async def test_a_poisoned_message_fails_the_run(recording: FunctionHost, queue_env: str, azurite: Azurite) -> None:
    run_id = (await _accept(recording, messages="never"))["run_id"]
    message = await _take_message(queue_env, azurite)
    await _deliver(recording, message, "fail_poisoned_run")
    status = await _status(recording, run_id)
    assert status["status"] == "failed"
    assert status["error"]["code"] == "delivery_attempts_exhausted"
    assert recording_workflow.CALLS == []


async def test_a_message_without_a_record_goes_back_to_the_queue(
    recording: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_executor, "RECORD_WAIT_SECONDS", 0.2)
    message = QueueMessage(id="m1", body=b"0123456789abcdef", dequeue_count=1)
    with pytest.raises(background.RecordNotReady):
        await _deliver(recording, message)


# -- cancel ---------------------------------------------------------------------------------


async def test_cancel_a_queued_run_and_it_never_starts(recording: FunctionHost, runner: QueueRunner) -> None:
    run_id = (await _accept(recording, messages="no"))["run_id"]
    cancelled = await recording.request("POST", f"/api/runs/{run_id}/cancel")
    assert cancelled.status == 200 and (await cancelled.json())["status"] == "cancelled"
    await runner.run_until_idle()
    assert recording_workflow.CALLS == []
    # A cancel sent again (its first answer lost) gets the same answer, not an error.
    again = await recording.request("POST", f"/api/runs/{run_id}/cancel")
    assert (again.status, await again.body()) == (200, await cancelled.body())


async def test_cancel_a_running_run_stops_it_at_its_next_look_and_commits_nothing(
    ops: OperationCounter, recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    run_id, _, delivery = await _running(recording, queue_env, azurite, "long wait")
    answer = await recording.request("POST", f"/api/runs/{run_id}/cancel")
    assert answer.status == 200 and (await answer.json())["status"] == "running"
    ops.reset()
    await delivery
    # Stopped while it waited (the tail gives up by itself only after 10 s, and then fails
    # the run), at the attempt's first look at its record after the cancel landed: one read,
    # or two if a read was on its way when the cancel was written.
    assert recording_workflow.GAVE_UP == []
    looks = [url for method, url in ops.log if method == "GET" and url.endswith(f"/runs/{run_id}.json")]
    print(f"\n[cancel] record reads between the cancel and the stop: {len(looks)}")
    assert 1 <= len(looks) <= 2, ops.log
    status = await _status(recording, run_id)
    assert status["status"] == "cancelled"
    assert status["result"] is None
    assert await _checkpoint_ids() == []
    events = await _join(recording, run_id)
    assert events[-1][1] == "cancelled"


# -- join -----------------------------------------------------------------------------------


async def _join(host: FunctionHost, run_id: str, **headers: str) -> list[tuple[str, str, Any]]:
    response = await host.request("GET", f"/api/runs/{run_id}/stream", headers=headers)
    assert response.status == 200
    frames: list[tuple[str, str, Any]] = []
    buffer = b""
    async for chunk in response.chunks():
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            if frame.startswith(b":"):
                continue
            fields = dict(line.split(": ", 1) for line in frame.decode().splitlines())
            frames.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return frames


async def test_join_a_finished_run_then_resume_from_last_event_id(recording: FunctionHost, runner: QueueRunner) -> None:
    run_id = (await _accept(recording, messages="join me"))["run_id"]
    await runner.run_until_idle()
    events = await _join(recording, run_id)
    names = [name for _, name, _ in events]
    assert names[0] == "output" and names[-1] == "done"
    assert [event_id for event_id, _, _ in events] == [f"1.{n}" for n in range(1, len(events) + 1)]
    assert events[-1][2] == (await _status(recording, run_id))["result"]
    later = await _join(recording, run_id, **{"Last-Event-ID": events[1][0]})
    assert later == events[2:]


async def test_join_a_queued_run_and_follow_it_live(recording: FunctionHost, runner: QueueRunner) -> None:
    run_id = (await _accept(recording, messages="live"))["run_id"]
    joined = asyncio.ensure_future(_join(recording, run_id))
    await asyncio.sleep(0.3)
    assert not joined.done()
    await runner.run_until_idle()
    events = await asyncio.wait_for(joined, 10)
    assert events[0][1] == "output" and events[-1][1] == "done"


# -- order on a thread ----------------------------------------------------------------------


async def test_twenty_background_turns_apply_in_the_order_accepted(
    recording: FunctionHost, runner: QueueRunner
) -> None:
    runs = [
        (await _accept(recording, "/api/threads/ordered/runs", messages=f"turn {i:02}"))["run_id"] for i in range(20)
    ]
    await runner.run_until_idle(limit_seconds=120)
    results = [(await _status(recording, run_id)) for run_id in runs]
    assert [r["status"] for r in results] == ["succeeded"] * 20
    heads = [call[1] for call in recording_workflow.CALLS if call[0] == "head"]
    assert heads == [f"turn {i:02}" for i in range(20)]
    checkpoint_ids = [r["result"]["checkpoint_id"] for r in results]
    for previous, current in itertools.pairwise(checkpoint_ids):
        info = await (await recording.request("GET", f"/api/checkpoints/{current}")).json()
        assert info["previous_checkpoint_id"] == previous
    thread = await (await recording.request("GET", "/api/threads/ordered")).json()
    assert thread["checkpoint_id"] == checkpoint_ids[-1] and thread["turns"] == 20
    assert await _blob_names("run-order/") == []


# -- tracing --------------------------------------------------------------------------------


async def test_the_background_span_links_to_the_request_that_accepted_it(
    recording: FunctionHost, queue_env: str, azurite: Azurite, spans: Any
) -> None:
    run_id = (await _accept(recording, messages="traced"))["run_id"]
    await _deliver(recording, await _take_message(queue_env, azurite))
    finished = spans.get_finished_spans()
    accepted = next(s for s in finished if s.name == "POST /api/runs")
    run = next(s for s in finished if s.name == "background run")
    assert accepted.attributes["run_id"] == run_id and run.attributes["run_id"] == run_id
    assert [link.context.span_id for link in run.links] == [accepted.context.span_id]
    [workflow_run] = [s for s in finished if is_workflow_run_span(s.name)]
    assert workflow_run.context.trace_id == run.context.trace_id
