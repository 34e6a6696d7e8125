"""The examples work: the demo end to end, requests.http top to bottom, the signing script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from devtools.azurite import Azurite
from devtools.function_host import FunctionHost

ROOT = Path(__file__).resolve().parent.parent


def test_three_turn_demo_prints_a_checkpoint_chain(azurite: Azurite) -> None:
    env = {**os.environ, "CHECKPOINT_STORAGE": azurite.connection_string, "CHECKPOINT_CONTAINER": "demo"}
    done = subprocess.run(
        [sys.executable, "examples/three_turns.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for n in (1, 2, 3, 4):
        assert f"turn {n}:" in out
    assert 'Approval answer: "approved"' in out
    chain = re.findall(r"^  ([0-9a-f-]{36})  status=(\w+)", out, re.MULTILINE)
    assert [status for _, status in chain] == ["idle", "pending_requests", "idle", "idle"]
    assert "Three turns, four checkpoints" in out and "the approval was a run of its own" in out
    assert "event: done" in out
    # The pending request is printed as JSON (indented under its heading), not as a Python dict.
    pending = re.search(r"as JSON:\)\n(    \{\n.*?\n    \})\n", out, re.DOTALL)
    assert pending, out
    request = json.loads(pending.group(1))
    assert request["data"]["text"] == "Book it, pending approval." and request["request_id"]
    # Streamed events are JSON too.
    for line in re.findall(r"^  event: \w+\s+(.*)$", out, re.MULTILINE):
        json.loads(line)
    retried = re.findall(
        r"^  (?:first delivery|retry)\s+HTTP 200  checkpoint (\S+)  new blobs: (\d+)", out, re.MULTILINE
    )
    assert len(retried) == 2
    (first_id, first_new), (retry_id, retry_new) = retried
    assert first_id == retry_id
    assert int(first_new) >= 1 and int(retry_new) == 0
    assert "the same checkpoint ID and created no blob" in out
    assert "after 1 turn(s)" in out
    # The background turn: 202 at once, the queue runner ran it, the stream and status agree.
    accepted = re.search(r"^  HTTP 202 in \d+ ms  Location: /api/runs/(\w+)  status=queued$", out, re.MULTILINE)
    assert accepted, out
    assert "processed 1 message(s)" in out
    assert f"GET /api/runs/{accepted.group(1)}: status=succeeded attempts=1" in out
    assert re.search(r"^  bot > turn \d+: .*charged twice", out, re.MULTILINE), out


# -- examples/requests.http and examples/sign_request.py -------------------------------------

LOCAL = "localhost:7071"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks test vector's secret


@dataclass
class HttpFileRequest:
    name: str | None
    method: str
    url: str
    headers: dict[str, str]
    body: str


def parse_http_file(text: str) -> tuple[dict[str, str], list[HttpFileRequest]]:
    """File variables and requests, as VS Code REST Client reads them (`###` separates requests)."""
    variables: dict[str, str] = {}
    requests: list[HttpFileRequest] = []
    for block in re.split(r"^###.*\n?", text, flags=re.MULTILINE):
        name, request_line, headers, body_lines = None, None, {}, []
        lines = iter(block.splitlines())
        for line in lines:
            if named := re.match(r"#\s*@name\s+(\w+)", line):
                name = named[1]
            elif variable := re.match(r"@(\w+)\s*=\s*(.*)", line):
                variables[variable[1]] = variable[2].strip()
            elif line.strip() and not line.startswith(("#", "//")):
                request_line = line
                break
        if request_line is None:
            continue
        for line in lines:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            headers[key.strip()] = value.strip()
        body_lines = list(lines)
        method, url = request_line.split(maxsplit=1)
        requests.append(HttpFileRequest(name, method, url, headers, "\n".join(body_lines).strip()))
    return variables, requests


def _resolve(text: str, variables: dict[str, str], replies: dict[str, Any]) -> str:
    """Expand `{{var}}` and `{{name.response.body.$.a.b[0].c}}`."""

    def expand(match: re.Match[str]) -> str:
        ref = match[1].strip()
        if ref in variables:
            return _resolve(variables[ref], variables, replies)
        name, _, path = ref.partition(".response.body.$")
        value = replies[name]
        for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
            value = value[key] if key else value[int(index)]
        return str(value)

    return re.sub(r"\{\{(.*?)\}\}", expand, text)


def _sign(body: str, secret: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "examples/sign_request.py", body],
        cwd=ROOT,
        env={**os.environ, "WEBHOOK_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


async def test_requests_http_runs_top_to_bottom_and_covers_every_route(
    host: FunctionHost, azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AzureWebJobsStorage", azurite.connection_string)  # the run queue
    monkeypatch.setenv("RUNS_QUEUE", "requests-http")
    variables, requests = parse_http_file((ROOT / "examples" / "requests.http").read_text())
    replies: dict[str, Any] = {}
    bodies: list[tuple[str, bytes]] = []
    covered: set[str] = set()
    remote: list[HttpFileRequest] = []
    for request in requests:
        url = urlsplit(_resolve(request.url, variables, replies))
        if url.netloc != LOCAL:
            remote.append(request)
            continue
        headers = {k: _resolve(v, variables, replies) for k, v in request.headers.items()}
        body = _resolve(request.body, variables, replies)
        if any(v.startswith("PASTE") for v in headers.values()):
            # The slot for examples/sign_request.py: fill it with the script's output, and make
            # the app require signatures for this request.
            monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
            headers.update(_sign(body, SECRET))
        else:
            monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
        matched = host.match(request.method, url.path)
        assert matched is not None, f"{request.method} {url.path} matches no function"
        covered.add(matched[0].name)
        resp = await host.request(request.method, url.path, body=body.encode(), headers=headers, query=url.query)
        raw = await resp.body()
        expected = 202 if headers.get("Prefer") == "respond-async" else 204 if request.method == "DELETE" else 200
        assert resp.status == expected, (request.method, url.path, raw)
        bodies.append((f"{request.method} {url.path}", raw))
        if request.name:
            replies[request.name] = json.loads(raw)
        if request.method == "DELETE":
            gone = await host.request("GET", url.path)
            assert gone.status == 404
        if headers.get("Accept") == "text/event-stream":
            assert b"event: done" in raw

    assert covered == {route.name for route in host.routes}
    # The replayed delivery got the first reply's exact bytes, and the thread ran once.
    deliveries = [raw for label, raw in bodies if label == "POST /api/threads/ticket-42/runs"]
    assert len(deliveries) == 2 and deliveries[0] == deliveries[1]
    thread = json.loads(dict(bodies)["GET /api/threads/ticket-42"])
    assert thread["turns"] == 1
    assert replies["pause"]["status"] == "pending_requests"
    # Nothing ran the background run: it was cancelled while queued, and its stream says so.
    run_id = replies["background"]["run_id"]
    assert json.loads(dict(bodies)[f"POST /api/runs/{run_id}/cancel"])["status"] == "cancelled"
    assert b"event: cancelled" in dict(bodies)[f"GET /api/runs/{run_id}/stream"]
    # The Azure requests send the function key.
    assert remote and all("x-functions-key" in r.headers for r in remote if "health" not in r.url)


VECTOR_ID_AND_TIME = ["--id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "--timestamp", "1614265330"]


def test_sign_request_matches_the_standard_webhooks_test_vector() -> None:
    done = subprocess.run(
        [sys.executable, "examples/sign_request.py", '{"test": 2432232314}', *VECTOR_ID_AND_TIME],
        cwd=ROOT,
        env={**os.environ, "WEBHOOK_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp: 1614265330",
        "webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    ]


def test_sign_request_without_a_secret_says_what_to_set() -> None:
    env = {k: v for k, v in os.environ.items() if k != "WEBHOOK_SECRET"}
    done = subprocess.run(
        [sys.executable, "examples/sign_request.py", "{}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "set WEBHOOK_SECRET" in done.stderr


def test_the_library_runs_without_functions(azurite: Azurite) -> None:
    """examples/library_only.py resumes a conversation with nothing but ``resumable``."""
    code = (
        "import runpy, sys; runpy.run_path('examples/library_only.py', run_name='__main__'); "
        "print(sorted(m for m in ('fastapi', 'starlette', 'azure.functions', 'functions_adapter') if m in sys.modules))"
    )
    env = {**os.environ, "CHECKPOINT_STORAGE": azurite.connection_string}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert 'turn 2: you said "and again". Earlier you said: "hello"' in done.stdout
    assert re.search(r"checkpoints: [0-9a-f-]{36} -> [0-9a-f-]{36}", done.stdout)
    assert done.stdout.strip().endswith("[]")  # no web framework and no Functions were imported


def test_importing_the_library_loads_no_web_framework_or_functions() -> None:
    code = "import resumable, sys; assert not {'fastapi', 'starlette', 'azure.functions'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
