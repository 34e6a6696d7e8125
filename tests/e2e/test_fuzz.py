"""Fuzz the request surface: never a 500, never a stack trace, nothing written when rejected.

``FUZZ_EXAMPLES`` sets how many requests are generated (default 2000).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from functions_adapter import signatures as webhook_signature
from functions_adapter import wiring as composition
from functions_adapter.settings import Settings

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000"))
OUTCOMES: Counter[int] = Counter()

# Text that JSON can carry but UTF-8 cannot: lone surrogates are in the alphabet.
any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=40)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    any_text,
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

tricky_id = st.one_of(
    st.sampled_from(
        ["../x", "..", "a/b", "a\\b", "%2e%2e", ".hidden", "x" * 129, "", "nul\x00", "ünï", "con", "a b", "-dash"]
    ),
    st.text(max_size=140),
    st.uuids().map(str),
)

message_item = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "assistant", "tool", ""]),
            "content": st.one_of(st.text(max_size=60), any_text),
        }
    ),
    json_value,
)

near_valid = st.fixed_dictionaries(
    {},
    optional={
        "checkpoint_id": st.one_of(st.none(), tricky_id, json_value),
        "messages": st.one_of(st.text(max_size=80), st.lists(message_item, max_size=4), json_value),
        "responses": st.one_of(st.dictionaries(tricky_id, json_value, max_size=3), json_value),
        "stream": st.one_of(st.booleans(), json_value),
        "multitask": st.one_of(st.sampled_from(["reject", "enqueue"]), json_value),
        "extra": json_value,
    },
)

valid = st.fixed_dictionaries(
    {"messages": st.one_of(st.text(min_size=1, max_size=200), any_text).filter(str.strip)},
    optional={"stream": st.booleans(), "multitask": st.sampled_from(["reject", "enqueue"])},
)

raw_body = st.one_of(
    valid.map(lambda d: json.dumps(d).encode()),
    near_valid.map(lambda d: json.dumps(d).encode()),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=60_000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=1, max_value=60_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.sampled_from([b"1e999999", b"9" * 5000, b'{"messages": 1e400}', b'{"messages": "\\ud800"}', b"\xef\xbb\xbf{}"]),
)

# Header values reach a function as latin-1 bytes, so generate only what HTTP can carry:
# Latin-1 letters, digits like '²' that str.isdigit() accepts, and plain ASCII.
header_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=300)
number_text = st.one_of(
    st.sampled_from(["-1", "abc", "99999999999", "\u00b2", "1\u00b2", "\u00b9\u00b2\u00b3", " 7", "0x10", "1e3"]),
    st.text(alphabet="0123456789\u00b2\u00b3\u00b9 +-", max_size=14),
)
# Mostly JSON, so that most requests reach the body checks; the rest must be 415.
content_types = st.sampled_from(
    ["application/json"] * 6
    + ["application/json; charset=utf-8", "text/plain", "", "application/x-www-form-urlencoded"]
)
header_sets = st.fixed_dictionaries(
    {"content-type": content_types},
    optional={
        "accept": st.sampled_from(["text/event-stream", "application/json", "*/*", "text/event-stream;q=0.1, x"]),
        "idempotency-key": header_text,
        "content-length": number_text,
        "webhook-id": header_text,
        "webhook-timestamp": number_text,
        "webhook-signature": header_text,
    },
)
# The only error a stream may end in under fuzzing is a documented run outcome; the
# default workflow never fails, so anything else is a bug reported as a 200.
DOCUMENTED_STREAM_ERRORS = {"thread_busy"}

target = st.one_of(
    st.just(("POST", "/api/runs")),
    st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=20).map(lambda t: ("POST", f"/api/threads/{t}/runs")),
    tricky_id.filter(lambda t: t and "/" not in t).map(lambda t: ("GET", f"/api/checkpoints/{t}")),
    tricky_id.filter(lambda t: t and "/" not in t).map(lambda t: ("GET", f"/api/threads/{t}")),
)


async def blob_names() -> list[str]:
    container = composition.build_service(Settings.from_env()).store.container
    try:
        return [b.name async for b in container.list_blobs()]
    except Exception:
        return []


@pytest.fixture(scope="module", autouse=True)
def _report() -> Any:
    OUTCOMES.clear()
    yield
    print(f"\n[fuzz] {sum(OUTCOMES.values())} requests, status counts: {dict(sorted(OUTCOMES.items()))}")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(route=target, body=raw_body, headers=header_sets)
async def test_no_input_causes_a_500_or_writes_when_rejected(
    host: FunctionHost, route: tuple[str, str], body: bytes, headers: dict[str, str]
) -> None:
    method, path = route
    if host.match(method, path) is None:
        return
    await check_one(host, method, path, body, headers)


async def check_one(host: FunctionHost, method: str, path: str, body: bytes, headers: dict[str, str]) -> None:
    before = await blob_names()
    response = await host.request(method, path, body=body, headers=headers)
    raw = await response.body()
    OUTCOMES[response.status] += 1
    assert response.status < 500, raw[:300]
    assert b"Traceback" not in raw
    if response.status >= 400:
        assert json.loads(raw)["error"]["code"]
        if method == "POST":
            assert await blob_names() == before
    elif response.is_stream:
        assert raw.endswith(b"\n\n")
        assert b"event: done" in raw or b"event: error" in raw
        if b"event: error" in raw:
            code = json.loads(raw.split(b"event: error\ndata: ", 1)[1].split(b"\n", 1)[0])["error"]["code"]
            assert code in DOCUMENTED_STREAM_ERRORS, raw[-300:]


SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@settings(
    max_examples=max(50, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(route=target, body=raw_body, headers=header_sets, sign_it=st.booleans(), skew=st.integers(-400, 400))
async def test_the_signed_path_never_500s_either(
    host: FunctionHost,
    monkeypatch: pytest.MonkeyPatch,
    route: tuple[str, str],
    body: bytes,
    headers: dict[str, str],
    sign_it: bool,
    skew: int,
) -> None:
    """With WEBHOOK_SECRET set: half the requests carry a valid signature (with clock skew)."""
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    method, path = route
    if host.match(method, path) is None:
        return
    if sign_it:
        headers = _signed(headers, body, skew)
    await check_one(host, method, path, body, headers)


def _signed(headers: dict[str, str], body: bytes, skew: int) -> dict[str, str]:
    """``headers`` with a Standard Webhooks signature of ``body`` (the fuzzed ``webhook-id`` kept),
    dated ``skew`` seconds off now."""
    message_id = headers.get("webhook-id", "") or "msg_fuzz"
    timestamp = int(time.time()) + skew
    return {
        **headers,
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": webhook_signature.sign(SECRET, message_id, timestamp, body),
    }


# -- A2A: hostile JSON-RPC on POST /api/a2a/{workflow} ------------------------------------------
# Every answer is 200 with a JSON-RPC response (or an SSE stream of them for the streaming
# methods), or a 4xx refused before the body is parsed (Content-Length, signature, content
# type, size); a JSON-RPC error, like a 4xx, leaves storage as it was.

A2A_METHODS = ["SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "SubscribeToTask"]
A2A_STREAMS = {"SendStreamingMessage", "SubscribeToTask"}
A2A_ERRORS = {-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32004}
A2A_FINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}

rpc_id = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40), st.text(max_size=300), any_text, st.none(), json_value
)
a2a_part = st.one_of(
    st.fixed_dictionaries({"text": st.one_of(st.text(min_size=1, max_size=60), any_text, json_value)}),
    st.fixed_dictionaries(
        {
            "data": st.one_of(
                st.fixed_dictionaries({"responses": st.one_of(st.dictionaries(tricky_id, json_value), json_value)}),
                json_value,
            )
        }
    ),
    json_value,
)
a2a_message = st.fixed_dictionaries(
    {},
    optional={
        "messageId": st.one_of(st.uuids().map(str), tricky_id, json_value),
        "role": st.one_of(st.sampled_from(["ROLE_USER", "user", "ROLE_AGENT", "agent", ""]), json_value),
        "parts": st.one_of(st.lists(a2a_part, max_size=4), json_value),
        "contextId": st.one_of(tricky_id, json_value),
        "taskId": st.one_of(tricky_id, json_value),
        "metadata": json_value,
    },
)
a2a_configuration = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "returnImmediately": st.one_of(st.booleans(), json_value),
            "taskPushNotificationConfig": json_value,
            "historyLength": json_value,
            "acceptedOutputModes": json_value,
        },
    ),
    json_value,
)
a2a_params = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "message": st.one_of(a2a_message, json_value),
            "configuration": a2a_configuration,
            "id": st.one_of(tricky_id, st.uuids().map(lambda u: u.hex), json_value),
            "metadata": json_value,
        },
    ),
    json_value,
)
a2a_call = st.fixed_dictionaries(
    {"jsonrpc": st.one_of(st.just("2.0"), st.just("2.0"), json_value)},
    optional={
        "id": rpc_id,
        "method": st.one_of(
            st.sampled_from([*A2A_METHODS, *A2A_METHODS, "message/send", "tasks/get", "", "sendmessage"]), json_value
        ),
        "params": a2a_params,
    },
)
# A well-formed envelope around hostile params: what reaches each method's own checks.
a2a_method_call = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.one_of(st.integers(min_value=-(10**40), max_value=10**40), st.text(max_size=300)),
        "method": st.sampled_from(A2A_METHODS),
        "params": a2a_params,
    }
)
# A message the endpoint takes, on a new context or a named one, with hostile configuration
# and metadata: accepted sends run (the queue is served), refused ones must write nothing.
a2a_send = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": st.integers(min_value=0, max_value=10**6),
        "method": st.sampled_from(["SendStreamingMessage", "SendMessage"]),
        "params": st.fixed_dictionaries(
            {
                "message": st.fixed_dictionaries(
                    {
                        "messageId": st.uuids().map(str),
                        "role": st.just("ROLE_USER"),
                        "parts": st.lists(
                            st.fixed_dictionaries({"text": st.text(min_size=1, max_size=60)}), min_size=1, max_size=3
                        ),
                    },
                    optional={
                        "contextId": st.one_of(st.text(alphabet="abcXYZ019-_", min_size=1, max_size=20), tricky_id),
                        "metadata": json_value,
                    },
                )
            },
            optional={"configuration": a2a_configuration, "metadata": json_value},
        ),
    }
)
a2a_body = st.one_of(
    a2a_send.map(lambda call: json.dumps(call).encode()),
    a2a_method_call.map(lambda call: json.dumps(call).encode()),
    a2a_method_call.map(lambda call: json.dumps(call).encode()),
    a2a_method_call.map(lambda call: json.dumps(call).encode()),
    a2a_call.map(lambda call: json.dumps(call).encode()),
    st.lists(a2a_call, max_size=3).map(lambda batch: json.dumps(batch).encode()),  # batches are not served
    raw_body,  # not JSON, not UTF-8, nested too deep, numbers JSON cannot hold
    st.sampled_from(
        [
            b'{"jsonrpc": "2.0", "id": 1e999, "method": "GetTask"}',
            b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b', "method": "GetTask"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "Get\\ud800Task"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\\u0000"}}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "method": "SendMessage"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": '
            + b'{"a":' * 5000
            + b"1"
            + b"}" * 5000
            + b"}",
            b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}',
            b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\xff\xfe"}}',
        ]
    ),
)
# Mostly plain JSON, so that most bodies are parsed; the rest as the other routes get them.
a2a_headers = st.one_of(st.just({"content-type": "application/json"}), header_sets)
a2a_workflow = st.sampled_from(["default"] * 6 + ["no-such-workflow", "..", "x" * 300, "\u00fcn\u00ef", "a b"])
A2A_OUTCOMES: Counter[str] = Counter()


def _sent(body: bytes) -> dict[str, Any]:
    """The JSON-RPC request object the fuzzer sent, or {} when it sent something else."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's parser goes
        return {}
    return payload if isinstance(payload, dict) else {}


def _check_rpc_response(answer: Any, call: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", answer
    assert ("result" in answer) != ("error" in answer), answer
    sent_id = call.get("id")
    # A body a strict parser refuses (-32700: duplicate keys, depth, lone surrogates) has no id
    # to answer with, even where Python's lenient json.loads reads one.
    parsed = answer.get("error", {}).get("code") != -32700
    if parsed and isinstance(sent_id, (str, int)) and not isinstance(sent_id, bool):
        assert answer["id"] == sent_id, (answer["id"], sent_id)
    if "error" in answer:
        error = answer["error"]
        assert error["code"] in A2A_ERRORS and isinstance(error["message"], str), error
        assert "Traceback" not in error["message"]


def _stream_answers(raw: bytes) -> list[Any]:
    """The JSON-RPC responses of an SSE body (keep-alive comments skipped)."""
    assert raw.endswith(b"\n\n"), raw[-300:]
    frames = [frame for frame in raw.split(b"\n\n") if frame and not frame.startswith(b":")]
    assert all(frame.startswith(b"data: ") for frame in frames), raw[:300]
    return [json.loads(frame[len(b"data: ") :]) for frame in frames]


def _final(answer: dict[str, Any]) -> bool:
    """Whether a stream's last response ends the task's story: an error, or a final state."""
    if "error" in answer:
        return True
    result = answer["result"]
    status = (result.get("statusUpdate") or result.get("task") or {}).get("status", {})
    return status.get("state") in A2A_FINAL


async def _pumped(runner: QueueRunner, work: Any) -> Any:
    """``work`` with the run queue served meanwhile, as the host serves it: a blocking send
    or a stream follows its task to the end, which needs the background run to execute."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await runner.run_once()
        await asyncio.wait({task}, timeout=0.02)
    return task.result()


async def check_a2a(
    host: FunctionHost, runner: QueueRunner, workflow: str, body: bytes, headers: dict[str, str], *, signed: bool
) -> None:
    call = _sent(body)
    before = await blob_names()

    async def exchange() -> tuple[int, bytes, bool]:
        response = await host.request("POST", f"/api/a2a/{workflow}", body=body, headers=headers)
        return response.status, await response.body(), response.is_stream

    status, raw, is_stream = await _pumped(runner, exchange())
    after = await blob_names()
    await runner.run_until_idle(timeout=60)  # a non-blocking send's run ends before the next example
    assert b"Traceback" not in raw
    assert status < 500, raw[:300]
    if status != 200:
        A2A_OUTCOMES[str(status)] += 1
        assert status in (400, 401, 413, 415), (status, raw[:300])
        assert json.loads(raw)["error"]["code"]
        assert after == before
        return
    answers = _stream_answers(raw) if is_stream else [json.loads(raw)]
    assert answers, raw[:300]
    for answer in answers:
        _check_rpc_response(answer, call)
    if is_stream:
        assert call.get("method") in A2A_STREAMS, call.get("method")
        assert _final(answers[-1]), answers[-1]
        assert all("result" in answer for answer in answers[:-1]), answers
    (last,) = answers[-1:]
    if "error" in last and not is_stream:
        code = last["error"]["code"]
        A2A_OUTCOMES[f"error {code}"] += 1
        assert after == before, (last, sorted(set(after) - set(before)))
    else:
        A2A_OUTCOMES["stream" if is_stream else "result"] += 1


@pytest.fixture
async def a2a_runner(host: FunctionHost, queue_env: str) -> Any:
    A2A_OUTCOMES.clear()
    yield QueueRunner(host)
    print(f"\n[fuzz a2a] outcomes: {dict(sorted(A2A_OUTCOMES.items()))}")


@settings(
    max_examples=max(50, EXAMPLES // 4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(workflow=a2a_workflow, body=a2a_body, headers=a2a_headers)
async def test_the_a2a_endpoint_answers_json_rpc_and_writes_nothing_it_refuses(
    host: FunctionHost, a2a_runner: QueueRunner, workflow: str, body: bytes, headers: dict[str, str]
) -> None:
    await check_a2a(host, a2a_runner, workflow, body, headers, signed=False)


@settings(
    max_examples=max(50, EXAMPLES // 10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(
    workflow=a2a_workflow,
    body=a2a_body,
    headers=a2a_headers,
    sign_it=st.booleans(),
    skew=st.one_of(st.just(0), st.integers(-400, 400)),  # mostly in the tolerance window, to reach the body
)
async def test_the_signed_a2a_endpoint_refuses_before_parsing_and_never_500s(
    host: FunctionHost,
    a2a_runner: QueueRunner,
    monkeypatch: pytest.MonkeyPatch,
    workflow: str,
    body: bytes,
    headers: dict[str, str],
    sign_it: bool,
    skew: int,
) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)
    if sign_it:
        headers = _signed(headers, body, skew)
    await check_a2a(host, a2a_runner, workflow, body, headers, signed=sign_it)
