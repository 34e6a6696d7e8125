"""A2A at its edges, against real Azurite: the server never imports ``a2a-sdk`` (its cold start
pays for none of it), a signed call, and refusals that must leave storage as it was.

Three of them pin bugs the fuzzer found (tests/e2e/test_fuzz.py), each failing before its fix:
a signed SendMessage answered 500, a send refused for its ``configuration`` after its turn was
queued, an invalid ``id`` echoed back instead of null.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter import signatures as webhook_signature
from functions_adapter import wiring as composition
from functions_adapter.service_info import DOCUMENT
from functions_adapter.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT = "/api/a2a/default"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
DOC: dict[str, Any] = json.loads(DOCUMENT.read_text())

# In a fresh interpreter: import the app, then drive both A2A routes in-process (the card, a
# non-blocking SendMessage, GetTask on its task, a refused call), then list what got imported.
_DRIVE_A2A = """
import asyncio, json, sys, uuid
import function_app
from devtools.function_host import FunctionHost
from resumable.storage import clients, run_queue

async def main():
    host = FunctionHost(function_app.app)
    statuses = []
    card = await host.request("GET", "/api/a2a/default/.well-known/agent-card.json")
    statuses.append((card.status, (await card.json())["name"]))
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "cold"}]}
    send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": True}}}
    sent = await (await host.request("POST", "/api/a2a/default", json_body=send)).json()
    task = sent["result"]["task"]
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
    got = await (await host.request("POST", "/api/a2a/default", json_body=get)).json()
    statuses.append(got["result"]["id"] == task["id"])
    bad = await (await host.request("POST", "/api/a2a/default", json_body={"jsonrpc": "2.0", "id": 3})).json()
    statuses.append(bad["error"]["code"])
    await clients.close_all()
    await run_queue.close_all()
    return statuses

statuses = asyncio.run(main())
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("a2a", "agent_framework_a2a"))
print(json.dumps({"statuses": statuses, "loaded": loaded}))
"""


async def _blob_names() -> list[str]:
    container = composition.build_service(Settings.from_env()).store.container
    try:
        return sorted([blob.name async for blob in container.list_blobs()])
    except Exception:  # no container yet: nothing written
        return []


def _message(**fields: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hello"}], **fields}


def _call(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "c1", "method": method, "params": params}


async def _post(host: FunctionHost, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    response = await host.request(
        "POST", ENDPOINT, body=body, headers={"Content-Type": "application/json", **(headers or {})}
    )
    raw = await response.body()
    assert b"Traceback" not in raw
    return response.status, json.loads(raw)


def test_serving_a2a_never_imports_the_a2a_sdk(queue_env: str) -> None:
    """The JSON-RPC envelopes are hand-written (functions_adapter/a2a/jsonrpc.py), so the SDK's
    protobuf and google-api-core stay out of the worker; the SDK is a test dependency only."""
    done = subprocess.run(
        [sys.executable, "-c", _DRIVE_A2A], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["statuses"] == [[200, "default"], True, -32600]  # the routes did run
    assert seen["loaded"] == []
    installed = subprocess.run([sys.executable, "-c", "import a2a"], capture_output=True, check=False)
    assert installed.returncode == 0, "a2a-sdk is in the dev lock: the check above must be able to fail"


async def test_a_signed_send_message_is_answered_not_a_500(
    host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    params = {"message": _message(), "configuration": {"returnImmediately": True}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}).encode()
    timestamp = int(time.time())
    signed = {
        "webhook-id": "msg_a2a_signed",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": webhook_signature.sign(SECRET, "msg_a2a_signed", timestamp, body),
    }
    status, answer = await _post(host, body, signed)
    assert status == 200, answer
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


async def test_an_unsigned_call_is_refused_before_parsing_when_signatures_are_on(
    host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    before = await _blob_names()
    status, answer = await _post(host, b"{not even json")
    assert status == 401 and answer["error"]["code"]
    assert await _blob_names() == before


async def test_a_send_refused_for_its_configuration_writes_nothing(host: FunctionHost, queue_env: str) -> None:
    before = await _blob_names()
    params = {"message": _message(), "configuration": ["not", "an", "object"]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}).encode()
    status, answer = await _post(host, body)
    assert status == 200 and answer["error"]["code"] == -32602
    assert await _blob_names() == before


@pytest.mark.parametrize("bad_id", [{"a": 1}, 1.5, True, ["x"]], ids=["object", "float", "bool", "array"])
async def test_an_invalid_id_is_answered_with_a_null_id(host: FunctionHost, queue_env: str, bad_id: Any) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "GetTask", "params": {"id": "x"}}).encode()
    status, answer = await _post(host, body)
    assert status == 200 and answer["error"]["code"] == -32600
    assert answer["id"] is None


def _validator(schema_name: str) -> Draft202012Validator:
    """The OpenAPI document's schema ``schema_name``, its references resolved in the document."""
    return Draft202012Validator({"$ref": f"#/components/schemas/{schema_name}", "components": DOC["components"]})


async def test_answers_match_the_openapi_document(host: FunctionHost, queue_env: str) -> None:
    """The card, a result, an error and each frame of a stream, as the document describes them
    (tests/e2e/test_openapi_fuzz.py holds the same against scripts/serve.sh with generated bodies)."""
    card = await host.request("GET", f"{ENDPOINT}/.well-known/agent-card.json")
    _validator("A2aAgentCard").validate(await card.json())
    rpc = _validator("JsonRpcResponse")
    send = {"message": _message(), "configuration": {"returnImmediately": True}}
    answers = [(await _post(host, json.dumps(_call("SendMessage", send)).encode()))[1]]
    task = answers[0]["result"]["task"]
    async with QueueRunner(host):
        body = json.dumps(_call("SubscribeToTask", {"id": task["id"]})).encode()
        response = await host.request("POST", ENDPOINT, body=body, headers={"Content-Type": "application/json"})
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = (await response.body()).decode()
    frames = [json.loads(line[len("data: ") :]) for line in raw.splitlines() if line.startswith("data: ")]
    assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", frames
    answers += frames
    answers.append((await _post(host, json.dumps(_call("GetTask", {"id": task["id"]})).encode()))[1])
    for hostile in (b"{", b"[]", json.dumps(_call("NoSuchMethod", {})).encode()):
        answers.append((await _post(host, hostile))[1])
    assert [answer["error"]["code"] for answer in answers[-3:]] == [-32700, -32600, -32601]
    for answer in answers:
        rpc.validate(answer)
    for broken in ({**answers[-1], "result": {}}, {"jsonrpc": "2.0", "result": {}}, {**answers[-1], "error": {}}):
        assert not rpc.is_valid(broken), broken  # the schema can fail
    for status in ("401", "413", "415"):  # the refusals before parsing are documented
        assert status in DOC["paths"]["/api/a2a/{workflow}"]["post"]["responses"]
