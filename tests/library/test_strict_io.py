"""Strict JSON on both sides of the wire, and odd input that must be a 4xx, never a 500.

Outputs JSON cannot spell (NaN, the infinities, lone surrogates) are written in the
documented way in JSON bodies, SSE data and stored replays alike; inputs that two
parsers could read differently, or that UTF-8 cannot hold, are refused before anything
runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import signatures as webhook_signature
from functions_adapter import wiring as composition
from tests import recording_workflow


def strict_parse(raw: bytes) -> Any:
    """What a strict client does: UTF-8 only, no NaN/Infinity tokens."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(raw.decode("utf-8"), parse_constant=refuse)


@pytest.fixture
def odd(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> Iterator[FunctionHost]:
    monkeypatch.setitem(workflows.REGISTRY, "odd", "tests.odd_output_workflow:SPEC")
    monkeypatch.setenv("WORKFLOW", "odd")
    composition.workflow_spec.cache_clear()
    yield host
    composition.workflow_spec.cache_clear()


async def test_non_finite_numbers_are_written_as_null_everywhere(odd: FunctionHost) -> None:
    first = await odd.request("POST", "/api/runs", json_body={"messages": "nan"}, headers={"Idempotency-Key": "n1"})
    raw = await first.body()
    assert first.status == 200
    output = strict_parse(raw)["outputs"][0]
    assert output == {"nan": None, "inf": None, "neg": None, "ok": 1.5}
    replay = await odd.request("POST", "/api/runs", json_body={"messages": "nan"}, headers={"Idempotency-Key": "n1"})
    assert await replay.body() == raw
    streamed = await odd.request("POST", "/api/runs", json_body={"messages": "nan", "stream": True})
    frames = (await streamed.body()).split(b"\n\n")
    data = [
        strict_parse(line.split(b"data: ", 1)[1])
        for f in frames
        for line in f.split(b"\n")
        if line.startswith(b"data: ")
    ]
    assert {"executor_id": "odd", "output": output} in data
    assert data[-1]["outputs"] == [output]


async def test_a_lone_surrogate_in_an_output_is_written_as_the_replacement_character(odd: FunctionHost) -> None:
    response = await odd.request("POST", "/api/runs", json_body={"messages": "surrogate"})
    assert response.status == 200
    assert strict_parse(await response.body())["outputs"] == ["half a pair: \ufffd end"]
    streamed = await odd.request("POST", "/api/runs", json_body={"messages": "surrogate", "stream": True})
    raw = await streamed.body()
    assert b"event: done" in raw
    assert "half a pair: \ufffd end" in raw.decode("utf-8")


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages": "\\ud800"}',
        b'{"messages": [{"role": "user", "content": "ok \\udfff"}]}',
        b'{"checkpoint_id": "c1", "responses": {"r1": "\\ud800"}}',
        b'{"messages": "ok", "\\ud800": 1}',
    ],
)
@pytest.mark.parametrize("route", ["/api/runs", "/api/threads/t1/runs"])
async def test_lone_surrogates_in_input_are_400_before_anything_runs(
    recording: FunctionHost, body: bytes, route: str
) -> None:
    if route != "/api/runs":
        body = body.replace(b'"checkpoint_id": "c1", ', b"")
    response = await recording.request("POST", route, body=body, headers={"content-type": "application/json"})
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_request"
    assert recording_workflow.CALLS == []


async def test_duplicate_keys_are_400(recording: FunctionHost) -> None:
    body = b'{"messages": "first", "messages": "second"}'
    response = await recording.request("POST", "/api/runs", body=body, headers={"content-type": "application/json"})
    assert response.status == 400
    assert "twice" in (await response.json())["error"]["message"]
    assert recording_workflow.CALLS == []


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx"])
async def test_json_routes_need_a_json_content_type(recording: FunctionHost, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = await recording.request("POST", "/api/runs", body=b'{"messages": "hi"}', headers=headers)
    assert response.status == 415
    assert (await response.json())["error"]["code"] == "unsupported_media_type"
    assert recording_workflow.CALLS == []


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"])
async def test_a_charset_parameter_is_allowed(recording: FunctionHost, content_type: str) -> None:
    response = await recording.request(
        "POST", "/api/runs", body=b'{"messages": "hi"}', headers={"content-type": content_type}
    )
    assert response.status == 200


@pytest.mark.parametrize("value", ["\u00b2", "1\u00b2", "1e3", " 12", "+5", "1_0"])
async def test_content_length_takes_ascii_digits_only(recording: FunctionHost, value: str) -> None:
    headers = {"content-type": "application/json", "content-length": value}
    try:
        response = await recording.request("POST", "/api/runs", body=b'{"messages": "hi"}', headers=headers)
    except UnicodeEncodeError:
        pytest.skip("not a latin-1 header value; HTTP cannot carry it")
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("value", ["\u00b2", "\u00b9\u00b2\u00b3", "16142653\u00b3"])
async def test_webhook_timestamp_takes_ascii_digits_only(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    body = b'{"messages": "hi"}'
    headers = {
        "content-type": "application/json",
        "webhook-id": "msg_1",
        "webhook-timestamp": value,
        "webhook-signature": webhook_signature.sign(secret, "msg_1", 1, body),
    }
    response = await recording.request("POST", "/api/runs", body=body, headers=headers)
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid_signature"
