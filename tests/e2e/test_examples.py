"""The examples work: the demo end to end, the signing script, the library on its own."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.azurite import Azurite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(azurite: Azurite) -> str:
    """What `scripts/demo.sh` prints after setup (examples/three_turns.py), run once."""
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
    return done.stdout


LIBRARY_ONLY = ROOT / "examples" / "library_only.py"


def test_three_turn_demo_prints_a_checkpoint_chain(demo: str) -> None:
    out = demo
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


def test_the_demo_heads_each_section_with_its_call_and_shows_what_a_turn_costs(demo: str) -> None:
    """Every section names the HTTP call it makes; every turn prints its storage operations and
    workflow runs, and next to each resume what the two-step pattern cost on the same turn."""
    out = demo
    calls = [line.split("  {")[0] for line in out.splitlines() if re.match(r"(GET|POST) /api/", line)]
    run = r"GET /api/runs/[0-9a-f]{32}"
    expected = [
        *[re.escape("POST /api/runs")] * 4,
        re.escape("GET /api/checkpoints/{checkpoint_id}, from the newest back (read from Blob metadata):"),
        re.escape("POST /api/runs  Accept: text/event-stream"),
        re.escape("POST /api/threads/ticket-42/runs  Idempotency-Key: delivery-7f3a"),
        re.escape("GET /api/threads/ticket-42"),
        re.escape("POST /api/threads/ticket-42/runs  Prefer: respond-async"),
        run + "/stream",
        run,
    ]
    assert len(calls) == len(expected) and all(re.fullmatch(e, c) for e, c in zip(expected, calls, strict=True)), calls
    # This app: one run per call; a new conversation writes 1 blob, a resume reads 1 and writes 1.
    costs = re.findall(r"^ +this call: (.*)$", out, re.MULTILINE)
    one_run = "1 workflow run (1 `started` event), blob storage "
    assert costs[:5] == [one_run + "1 PUT"] + [one_run + "1 GET + 1 PUT"] * 4, costs
    # The webhook's retry is a replay: no run, the key's record read (and its claim refused).
    assert costs[-1] == "0 workflow runs (0 `started` events), blob storage 1 GET + 1 PUT"
    # The two-step pattern on the same three resumes: two runs, and a write per superstep.
    two_steps = re.findall(
        r"^  two-step pattern, same turn: 2 workflow runs \(2 `started` events\), checkpoint storage 1 GET \+ (\d+) PUT"
        r" \(the restore run writes (\d+), the message run N \+ 1 = (\d+) for its N = (\d+) supersteps\)$",
        out,
        re.MULTILINE,
    )
    assert len(two_steps) == 3, out
    for writes, restore, message, supersteps in two_steps:
        assert int(message) == int(supersteps) + 1 and int(writes) == int(restore) + int(message) >= 3


# -- examples/sign_request.py (examples/*.http run in tests/e2e/test_requests_http.py) ------------

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks test vector's secret


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
    """examples/library_only.py resumes a conversation with nothing but ``resumable``, run
    exactly as its docstring says (from the repository root, by its path)."""
    documented = next(line.strip() for line in LIBRARY_ONLY.read_text().splitlines() if "python " in line)
    assert documented == 'CHECKPOINT_STORAGE="<connection string>" python examples/library_only.py'
    command = shlex.split(documented)[1:]  # after the variable: ["python", "examples/library_only.py"]
    # PYTHONPROFILEIMPORTTIME lists every module imported on stderr; the command is unchanged.
    env = {**os.environ, "CHECKPOINT_STORAGE": azurite.connection_string, "PYTHONPROFILEIMPORTTIME": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # "python" is the venv's
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'turn 2: you said "and again". Earlier you said: "hello"' in done.stdout
    assert re.search(r"checkpoints: [0-9a-f-]{36} -> [0-9a-f-]{36}", done.stdout)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "resumable" in imported
    assert not imported & {"fastapi", "starlette", "azure.functions", "functions_adapter"}  # no web framework


def test_importing_the_library_loads_no_web_framework_or_functions() -> None:
    code = "import resumable, sys; assert not {'fastapi', 'starlette', 'azure.functions'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
