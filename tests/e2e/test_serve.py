"""scripts/serve.sh: the app over real HTTP without Core Tools, driven as a user would drive it.

One server for the module's first tests (setup, Azurite and the app's import cost seconds);
the tests that stop a server start their own, so no test depends on which ran before it on
its worker. The timer schedule is checked on its own, in-process.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import azure.functions as func
import pytest
from azure.storage.blob import BlobServiceClient

from devtools.azurite import Azurite
from devtools.fake_openai import start_fake_openai
from devtools.function_host import FunctionHost
from devtools.ncrontab import Schedule
from devtools.timers import TimerRunner
from tests.serving import ROOT, Serving, serving, session_processes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("serve")) as server:
        yield server


def test_it_prints_the_url_and_a_curl_line_that_works(served: Serving) -> None:
    out = served.output()
    assert "Created " in out  # the --settings file did not exist: copied from the sample
    (curl,) = re.findall(r"^Try: (curl -s .*)$", out, re.MULTILINE)
    assert served.base in curl
    done = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60, check=True)
    reply = json.loads(done.stdout)
    assert reply["status"] == "idle" and reply["checkpoint_id"]
    # Every function is listed, as func start lists them; no key check locally.
    for name in ("runs", "thread_runs", "run_in_background", "fail_poisoned_run", "sweep_orphan_checkpoints"):
        assert f"  {name}: " in out
    assert re.search(r"sweep_orphan_checkpoints: timerTrigger \(0 17 \* \* \* \*, next \S+T\d\d:17:00Z\)", out)


async def test_a_run_then_a_resume_from_its_checkpoint(served: Serving) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{served.base}/runs", json={"messages": "hello"}) as response:
            assert response.status == 200
            first = await response.json()
        body = {"checkpoint_id": first["checkpoint_id"], "messages": "and again"}
        async with session.post(f"{served.base}/runs", json=body) as response:
            assert response.status == 200
            second = await response.json()
    assert second["previous_checkpoint_id"] == first["checkpoint_id"]
    assert 'Earlier you said: "hello"' in second["messages"][0]["content"]


async def test_a_streamed_turn_arrives_as_sse_frames(served: Serving) -> None:
    headers = {"Accept": "text/event-stream"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{served.base}/runs", json={"messages": "stream"}, headers=headers) as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers.get("Content-Length") is None  # streamed, not buffered
        frames = [frame async for frame in _frames(response)]
    events = [re.search(r"^event: (\w+)$", frame, re.MULTILINE)[1] for frame in frames]  # type: ignore[index]
    assert events[-1] == "done" and len(events) >= 2, events


async def _frames(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    while frame := (await response.content.readuntil(b"\n\n")).decode():
        if not frame.startswith(":"):  # a keep-alive comment is not an event
            yield frame


async def test_a_background_run_is_executed_by_the_queue_runner(served: Serving) -> None:
    async with aiohttp.ClientSession() as session:
        headers = {"Prefer": "respond-async"}
        async with session.post(f"{served.base}/runs", json={"messages": "later"}, headers=headers) as response:
            assert response.status == 202
            run_id = (await response.json())["run_id"]
        deadline = time.monotonic() + 30
        while True:
            async with session.get(f"{served.base}/runs/{run_id}") as response:
                run = await response.json()
            if run["status"] == "succeeded" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
    assert run["status"] == "succeeded", run


async def test_the_admin_endpoint_invokes_the_timer_now(served: Serving) -> None:
    root = served.base.removesuffix("/api")
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{root}/admin/functions/sweep_orphan_checkpoints", json={"input": ""}) as response:
            assert response.status == 202
        async with session.post(f"{root}/admin/functions/no_such_function", json={"input": ""}) as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == "function_not_found"
    deadline = time.monotonic() + 30
    while "Executed 'sweep_orphan_checkpoints' (admin invocation)" not in served.output():
        assert time.monotonic() < deadline, served.output()[-3000:]
        await asyncio.sleep(0.1)
    assert "Admin invocation of sweep_orphan_checkpoints failed" not in served.output()


async def test_unknown_routes_and_wrong_methods_answer_the_documented_error_shape(served: Serving) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{served.base}/no/such/route") as response:
            assert response.status == 404
            assert (await response.json()) == {
                "error": {"code": "not_found", "message": "No function of this app answers GET /api/no/such/route."}
            }
        # GET and DELETE are two functions on one route: Allow names both.
        async with session.put(f"{served.base}/threads/t1") as response:
            assert response.status == 405
            assert response.headers["Allow"] == "DELETE, GET"
            error = (await response.json())["error"]
            assert error["code"] == "method_not_allowed" and set(error) == {"code", "message"}


async def _logged_run(served: Serving) -> str:
    """The server's output once a run of this test's own is logged (a parallel worker may not
    have run the module's other tests on this server)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{served.base}/runs", json={"messages": "log me"}) as response,
    ):
        assert response.status == 200
    for _ in range(200):
        if "POST runs -> 200" in served.output():
            break
        await asyncio.sleep(0.05)
    return served.output()


async def test_the_request_log_line_names_route_status_and_duration(served: Serving) -> None:
    """After a run: one line per request, with what an operator reads first."""
    out = await _logged_run(served)
    assert re.search(r"request completed: POST runs -> 200 in \d+(\.\d+)? ms", out), out[-3000:]


async def test_agent_framework_logs_nothing_per_request_at_info(served: Serving) -> None:
    """After a run: no per-superstep or per-build framework lines."""
    out = await _logged_run(served)
    assert "POST runs -> 200" in out
    assert "Dead-end executors detected" not in out
    assert "Created checkpoint" not in out


async def test_ctrl_c_during_a_stream_prints_no_traceback(tmp_path: Path) -> None:
    """Through a real socket: a turn streams and its model is still answering when Ctrl+C comes."""
    model = await start_fake_openai()
    model.hold_role = "reviewer:"  # the second agent's reply pauses after its first chunk
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"].update(
        WORKFLOW="chat-agents",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-fake",
        OPENAI_MODEL="fake",
        SSE_KEEPALIVE_SECONDS="0.2",
    )
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    try:
        with serving(tmp_path, settings=tmp_path / "settings.json") as server:
            headers = {"Accept": "text/event-stream"}
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{server.base}/runs", json={"messages": "hi"}, headers=headers) as response,
            ):
                assert response.status == 200
                while model.requests == [] or len(model.requests) < 2:  # the reviewer is answering
                    await response.content.readuntil(b"\n\n")
                await asyncio.to_thread(server.stop, signal.SIGINT)
            assert server.process.returncode == 0, server.output()[-3000:]
            assert session_processes(server.process.pid) == []
    finally:
        model.release.set()
        await model.close()
    assert "Traceback" not in server.output(), server.output()[-3000:]
    assert "CancelledError" not in server.output(), server.output()[-3000:]


async def test_ctrl_c_stops_everything_it_started(tmp_path: Path) -> None:
    """A server that has answered a run stops, with all it started, on Ctrl+C."""
    with serving(tmp_path) as server:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{server.base}/runs", json={"messages": "hello"}) as response,
        ):
            assert response.status == 200
        assert len(session_processes(server.process.pid)) >= 3  # the server and Azurite's two services
        server.stop(signal.SIGINT)  # waits for the exit (a hang fails it)
        assert server.process.returncode == 0, server.output()[-3000:]
        assert session_processes(server.process.pid) == []
        assert "Traceback" not in server.output(), server.output()[-3000:]


def test_sigterm_stops_everything_it_started(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        server.stop(signal.SIGTERM, group=False)  # waits for the exit (a hang fails it)
        assert server.process.returncode == 0, server.output()[-3000:]
        assert session_processes(server.process.pid) == []


def test_closing_the_terminal_stops_everything_it_started(tmp_path: Path) -> None:
    """A closed terminal sends SIGHUP to the session's leader: Azurite must not outlive it."""
    with serving(tmp_path) as server:
        server.stop(signal.SIGHUP, group=False)
        assert session_processes(server.process.pid) == [], server.output()[-3000:]
        assert server.process.returncode == 0, server.output()[-3000:]


# -- the timer: NCRONTAB schedules, fired in-process ------------------------------------------


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 17 3 * * *", "2026-12-04T15:30:12", "2026-12-05T03:17:00"),
        ("*/10 * * * * *", "2026-12-04T15:30:12", "2026-12-04T15:30:20"),
        ("0 */5 * * * *", "2026-12-04T15:35:00", "2026-12-04T15:40:00"),
        ("0 0 12 * * 1-5", "2026-12-04T15:30:00", "2026-12-07T12:00:00"),  # Friday afternoon → Monday
        ("0 30 9 13 * 5", "2026-12-04T00:00:00", "2027-08-13T09:30:00"),  # both day fields must match
        ("0 0 0,12 1 1,7 *", "2026-12-04T00:00:00", "2027-01-01T00:00:00"),
        ("0 0 0 * * 7", "2026-12-04T00:00:00", "2026-12-06T00:00:00"),  # 7 is Sunday
    ],
)
def test_ncrontab_next_run(expression: str, after: str, expected: str) -> None:
    moment = datetime.fromisoformat(after).replace(tzinfo=UTC)
    assert Schedule.parse(expression).next_after(moment) == datetime.fromisoformat(expected).replace(tzinfo=UTC)


@pytest.mark.parametrize("expression", ["0 17 3 * *", "0 0 24 * * *", "0 0 0 * Jan *", "00:05:00", "0 0 0 31 2 *"])
def test_ncrontab_refuses_what_it_cannot_read_or_never_fires(expression: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        Schedule.parse(expression).next_after(datetime(2026, 1, 1, tzinfo=UTC))


async def test_a_timer_fires_on_its_schedule() -> None:
    app = func.FunctionApp()
    fired: list[bool] = []

    @app.timer_trigger(schedule="* * * * * *", arg_name="timer", run_on_startup=True)
    async def every_second(timer: func.TimerRequest) -> None:
        fired.append(timer.past_due)

    runner = TimerRunner(FunctionHost(app))
    runner.start()
    await asyncio.sleep(2.2)
    await runner.stop()
    assert 2 <= len(fired) <= 4, fired  # at start-up, then once a second


# -- options and refusals -----------------------------------------------------------------------


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            ["bash", "scripts/serve.sh", "--port", str(port), "--settings", str(tmp_path / "settings.json")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,
            check=False,
        )
    assert done.returncode == 1
    assert f"Port {port} is taken" in done.stderr and "pass --port" in done.stderr
    assert "Azurite" not in done.stdout.split(".venv is up to date.")[-1]  # nothing was started
    assert not (tmp_path / "settings.json").exists()


async def test_no_azurite_uses_the_storage_the_settings_name(tmp_path: Path, azurite: Azurite) -> None:
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"].update(
        AzureWebJobsStorage=azurite.connection_string, CHECKPOINT_STORAGE=azurite.connection_string
    )
    (tmp_path / "mine.json").write_text(json.dumps(settings))
    with serving(tmp_path, "--no-azurite", settings=tmp_path / "mine.json") as server:
        assert "Azurite (" not in server.output()
        assert not any(".bin/azurite-" in line for line in session_processes(server.process.pid))
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{server.base}/runs", json={"messages": "hello"}) as response,
        ):
            assert response.status == 200
            checkpoint_id = (await response.json())["checkpoint_id"]
    # The checkpoint is in the Azurite the settings named.
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client("checkpoints")
    assert any(checkpoint_id in blob.name for blob in blobs.list_blobs())
