"""What a background execution costs in blob operations, counted where requests leave the
storage client, through the registered queue trigger: 5 for ``/api/runs`` and 8 for a
thread turn, the figures docs/background-runs.md, docs/performance.md and bench/results.md
state (issue 24 asked for at most 5 and 8; 8, 9 and 19 before the typed-record redesign,
then 5 and 9 until the run message carried its pending list's ETag).

The floor under the commit-once protocol is: read the record, claim it, write the commit
intent, commit (create-only save, plus the pointer's CAS on a thread), write the outcome.
A resume adds its checkpoint read; a thread turn adds its pointer's read and its pending
list's pop: the list's read is saved when the accept left the turn alone in it (the
message carries the list's ETag, ``RunMessage``), and the last two tests show that a list
changed since costs a conflict, never the order. The head checkpoint is read only by an instance that does not have it
cached: one GET more (``thread-cold``); bench/ counts, like ``thread``, on the instance that
committed the head. The event log of a run that ends within one flush period rides in the
outcome write.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost
from tests import recording_workflow
from tests.adapter.test_background_runs import _accept, _blob_names, _deliver, _status, _take_message


async def _execution(host: FunctionHost, queue: str, azurite: Azurite, ops: Any, path: str, **body: Any) -> Any:
    run_id = (await _accept(host, path, **body))["run_id"]
    message = await _take_message(queue, azurite)
    ops.reset()
    await _deliver(host, message)
    counts, log = dict(ops.counts), [(method, url.rsplit("/", 2)[-2:]) for method, url in ops.log]
    assert (await _status(host, run_id))["status"] == "succeeded"
    return counts, log


@pytest.mark.parametrize(
    ("kind", "most"),
    [
        ("fresh", {"GET": 1, "PUT": 4}),  # record; claim, intent, checkpoint, outcome
        ("resume", {"GET": 2, "PUT": 4}),  # + the checkpoint it resumes
        ("thread", {"GET": 2, "PUT": 5, "DELETE": 1}),  # + pointer; pointer CAS; pop
        ("thread-cold", {"GET": 3, "PUT": 5, "DELETE": 1}),  # + the head checkpoint
    ],
)
async def test_a_background_execution_costs_at_most(
    recording: FunctionHost,
    queue_env: str,
    azurite: Azurite,
    ops: Any,
    kind: str,
    most: dict[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind == "thread-cold":
        monkeypatch.setenv("CHECKPOINT_CACHE_BYTES", "0")  # no instance has the head cached
    first = await recording.request("POST", "/api/runs", json_body={"messages": "warm up"})
    await recording.request("POST", "/api/threads/costed/runs", json_body={"messages": "warm up"})
    path, body = {
        "fresh": ("/api/runs", {"messages": "x"}),
        "resume": ("/api/runs", {"messages": "x", "checkpoint_id": (await first.json())["checkpoint_id"]}),
        "thread": ("/api/threads/costed/runs", {"messages": "x"}),
        "thread-cold": ("/api/threads/costed/runs", {"messages": "x"}),
    }[kind]
    counts, log = await _execution(recording, queue_env, azurite, ops, path, **body)
    assert all(counts.get(method, 0) <= limit for method, limit in most.items()), log
    assert set(counts) <= set(most), log
    assert sum(counts.values()) <= {"fresh": 5, "resume": 6, "thread": 8, "thread-cold": 9}[kind], log


async def _thread_messages(host: FunctionHost, queue: str, azurite: Azurite, count: int) -> list[Any]:
    runs = [(await _accept(host, "/api/threads/hinted/runs", messages=f"turn {i}"))["run_id"] for i in range(count)]
    messages = [await _take_message(queue, azurite) for _ in runs]
    by_run = {message.get_body().decode().split(" ")[0]: message for message in messages}
    return [by_run[run_id] for run_id in runs]


async def test_a_turn_appended_behind_a_hinted_one_runs_after_it(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    first, second = await _thread_messages(recording, queue_env, azurite, 2)
    assert len(first.get_body().decode().split(" ")) == 2  # alone at accept: the list's ETag rides along
    assert len(second.get_body().decode().split(" ")) == 1  # behind another: the drain reads the list
    await _deliver(recording, first)  # its list changed since: the pop conflicts, reads, and drains on
    heads = [call[1] for call in recording_workflow.CALLS if call[0] == "head"]
    assert heads == ["turn 0", "turn 1"]
    for message in (first, second):
        run_id = message.get_body().decode().split(" ")[0]
        assert (await _status(recording, run_id))["status"] == "succeeded"
    assert await _blob_names("run-order/") == []


async def test_a_hinted_message_delivered_twice_at_once_runs_its_turn_once(
    recording: FunctionHost, queue_env: str, azurite: Azurite
) -> None:
    [message] = await _thread_messages(recording, queue_env, azurite, 1)
    await asyncio.gather(_deliver(recording, message), _deliver(recording, message))
    await _deliver(recording, message)  # and once more, after it finished
    assert [call[1] for call in recording_workflow.CALLS if call[0] == "head"] == ["turn 0"]
    assert (await _status(recording, message.get_body().decode().split(" ")[0]))["status"] == "succeeded"
    assert await _blob_names("run-order/") == []
