"""``python -m devtools.webhook_receiver``: the callback worked example of docs/webhooks-and-callbacks.md, runnable.

The receiver runs as a user starts it (a subprocess on a free port), gets signed callbacks
from the app, prints each one, and stops on Ctrl+C. The worked example's ``X-GitHub-Delivery``
dedupes only with the setting the docs name."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from devtools.azurite import free_port
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter.callbacks import signed_headers

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text()

    def wait_for(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output(), re.MULTILINE)
            if found:
                return found
            assert self.process.poll() is None, self.output()
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not printed:\n{self.output()}")


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Running]:
    """The receiver as the docs start it, with --port and --secret."""
    port = free_port()
    log = tmp_path / "receiver.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.webhook_receiver", "--port", str(port), "--secret", SECRET],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    running = Running(process, f"http://127.0.0.1:{port}", log)
    try:
        running.wait_for(rf"^Receiving callbacks on http://127\.0\.0\.1:{port}/")
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def test_the_receiver_prints_each_delivery_notes_repeats_and_stops_on_ctrl_c(receiver: Running) -> None:
    body = json.dumps({"type": "run.completed", "run_id": "r1", "status": "succeeded"}).encode()
    async with aiohttp.ClientSession() as session:
        for headers in (signed_headers(SECRET, "msg_1", body), signed_headers(SECRET, "msg_1", body)):
            async with session.post(f"{receiver.url}/hooks/done", data=body, headers=headers) as answered:
                assert answered.status == 200
        forged = {**signed_headers(SECRET, "msg_2", body), "webhook-signature": "v1,AAAA"}
        async with session.post(f"{receiver.url}/hooks/done", data=body, headers=forged) as answered:
            assert answered.status == 401
    receiver.wait_for(r"^delivery 3: NOT verified")
    receiver.process.send_signal(signal.SIGINT)
    assert receiver.process.wait(timeout=10) == 0
    out = receiver.output()
    assert "delivery 1: verified, answered 200, POST /hooks/done\n  webhook-id: msg_1\n" in out
    assert '  {"type": "run.completed", "run_id": "r1", "status": "succeeded"}\n' in out
    assert "delivery 2: verified" in out and "msg_1 (a repeat of delivery 1: deduplicate on webhook-id)" in out
    assert "delivery 3: NOT verified (wrong secret?), answered 401" in out
    assert out.rstrip().endswith("Stopped after 3 deliveries.")


def test_the_receiver_without_a_secret_says_how_to_give_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CALLBACK_SECRET"}
    done = subprocess.run(
        [sys.executable, "-m", "devtools.webhook_receiver", "--settings", str(tmp_path / "none.json")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--secret" in done.stderr and "CALLBACK_SECRET" in done.stderr


async def _worked_example(host: FunctionHost, receiver: Running) -> list[str]:
    """The docs' worked example: the same delivery twice, then the queue drained; the run IDs."""
    run_ids = []
    for _ in range(2):
        answered = await host.request(
            "POST",
            "/api/threads/ticket-42/runs",
            json_body={"messages": "summarise", "callback_url": f"{receiver.url}/hooks/done"},
            headers={"Prefer": "respond-async", "X-GitHub-Delivery": "72d3162e"},
        )
        assert answered.status == 202, await answered.body()
        run_ids.append((await answered.json())["run_id"])
    await QueueRunner(host).run_until_idle()
    return run_ids


@pytest.mark.parametrize("setting", ["X-GitHub-Delivery,Idempotency-Key,webhook-id", ""], ids=["set", "unset"])
async def test_the_worked_example_runs_once_with_the_delivery_header_setting(
    host: FunctionHost, queue_env: str, receiver: Running, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv("CALLBACK_SECRET", SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    monkeypatch.setenv("IDEMPOTENCY_HEADERS", setting)
    for name in ("WEBHOOK_SECRET", "WEBHOOK_SCHEME"):
        monkeypatch.delenv(name, raising=False)
    first, second = await _worked_example(host, receiver)
    receiver.wait_for(r"^delivery 1: verified, answered 200, POST /hooks/done$")
    if setting:  # GitHub's redelivery replays the first 202: one run, one callback
        assert first == second
        await asyncio.sleep(0.3)
        assert "delivery 2:" not in receiver.output()
    else:  # without it the header means nothing: a second run, a second callback
        assert first != second
        receiver.wait_for(r"^delivery 2: verified")
    assert f'"run_id": "{first}"' in receiver.output() and '"status": "succeeded"' in receiver.output()
