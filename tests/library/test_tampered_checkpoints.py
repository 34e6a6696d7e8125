"""Checkpoints tampered with by someone who can write to the container, through POST /api/runs.

The attacker copies a genuine checkpoint blob, swaps one value for a hostile pickle and
uploads it under a new name with the storage SDK, exactly as anyone holding a SAS or a
storage role could. The app must answer 422 without running the pickle (a marker file
the gadget would create stays absent), within bounded time and memory.
"""

from __future__ import annotations

import contextlib
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from tests import pickle_gadgets as gadgets
from tests.pickle_gadgets import BOMBS, GADGETS
from tests.tamper import envelope, first_turn, plant, with_state_value

# Generous: these catch a hang or a blow-up, not a slow machine. The seconds are this
# process's CPU time, not the wall clock: the work the refusal took, which other processes
# loading the machine (a parallel test run) do not add to.
MAX_SECONDS = 2.0
MAX_PEAK_BYTES = 50 * 1024 * 1024


async def resume_measured(host: FunctionHost, body: dict[str, Any]) -> tuple[int, dict[str, Any], float, int]:
    """Status, body, CPU seconds and peak traced bytes of one POST /api/runs."""
    tracemalloc.start()
    started = time.process_time()
    try:
        response = await host.request("POST", "/api/runs", json_body=body)
        payload = await response.json()
        elapsed = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return response.status, payload, elapsed, peak


@pytest.mark.parametrize("name", list(GADGETS))
def test_each_gadget_is_live(name: str, tmp_path: Path) -> None:
    """Without a guard the gadget runs: the tests below refuse working exploits."""
    marker = tmp_path / "marker"
    with contextlib.suppress(Exception):  # some gadgets fail after their code has run
        gadgets.unguarded_loads(GADGETS[name](marker))
    assert marker.exists()


@pytest.mark.parametrize("name", list(GADGETS))
async def test_gadget_in_a_checkpoint_is_refused_without_running(
    host: FunctionHost, storage_env: str, tmp_path: Path, name: str
) -> None:
    marker = tmp_path / "marker"
    genuine = await first_turn(host)
    tampered = await plant(storage_env, genuine["checkpoint_id"], with_state_value(envelope(GADGETS[name](marker))))
    status, body, elapsed, peak = await resume_measured(host, {"checkpoint_id": tampered, "messages": "again"})
    assert not marker.exists(), "the gadget's code ran"
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")
    assert elapsed < MAX_SECONDS and peak < MAX_PEAK_BYTES, (elapsed, peak)


@pytest.mark.parametrize("name", list(BOMBS))
async def test_pickle_bomb_is_refused_in_bounded_time_and_memory(
    host: FunctionHost, storage_env: str, name: str
) -> None:
    genuine = await first_turn(host)
    bomb = BOMBS[name]()
    tampered = await plant(storage_env, genuine["checkpoint_id"], with_state_value(envelope(bomb, "builtins:list")))
    status, body, elapsed, peak = await resume_measured(host, {"checkpoint_id": tampered, "messages": "again"})
    print(f"{name}: {len(bomb)}-byte pickle: ({status}), {elapsed * 1000:.1f} ms CPU, peak {peak / 1e6:.2f} MB")
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")
    assert elapsed < MAX_SECONDS and peak < MAX_PEAK_BYTES, (elapsed, peak)


@pytest.mark.parametrize(
    "forged",
    [
        "not an event",
        {"type": "request_info", "request_id": "x"},
        7,
        envelope(gadgets.pickle_of_output_event(), "agent_framework._workflows._events:WorkflowEvent"),
    ],
    ids=["a-string", "a-json-object", "a-number", "an-output-event"],
)
async def test_a_forged_pending_request_is_refused_at_load(host: FunctionHost, storage_env: str, forged: Any) -> None:
    paused = await first_turn(host, "this needs approval")
    (request_id,) = [r["request_id"] for r in paused["pending_requests"]]

    def mutate(raw: dict[str, Any]) -> None:
        raw["pending_request_info_events"][request_id] = forged

    tampered = await plant(storage_env, paused["checkpoint_id"], mutate)
    response = await host.request(
        "POST", "/api/runs", json_body={"checkpoint_id": tampered, "responses": {request_id: "yes"}}
    )
    assert response.status == 422, await response.body()
    assert (await response.json())["error"]["code"] == "checkpoint_unreadable"


@pytest.mark.parametrize("key", ["builtins:type", "functools:partial", "os:system"])
async def test_allowlisting_a_tool_instead_of_a_data_class_is_misconfigured(
    host: FunctionHost, storage_env: str, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("CHECKPOINT_ALLOWED_TYPES", key)
    response = await host.request("POST", "/api/runs", json_body={"messages": "hello"})
    body = await response.json()
    assert (response.status, body["error"]["code"]) == (500, "server_misconfigured")
    assert key not in json.dumps(body)
