"""Standard Webhooks signatures: verification rules, rotation, and the HTTP gate."""

from __future__ import annotations

import base64
import json
import time

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter.errors import InvalidSignature
from functions_adapter.signatures import sign, verify

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
NEW_SECRET = "whsec_" + base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()
BODY = b'{"messages":"hi"}'
NOW = 1_800_000_000


def headers(secret: str = SECRET, body: bytes = BODY, timestamp: int = NOW, message_id: str = "msg_1") -> dict:
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def test_a_correct_signature_passes() -> None:
    verify(headers(), BODY, [SECRET], tolerance_seconds=300, now=NOW + 299)


# The Standard Webhooks specification's published test vector (its reference libraries
# test against the same values).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_official_test_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    vector_headers = {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": str(VECTOR_TIMESTAMP),
        "webhook-signature": VECTOR_SIGNATURE,
    }
    verify(vector_headers, VECTOR_BODY, [VECTOR_SECRET], tolerance_seconds=300, now=VECTOR_TIMESTAMP + 10)
    with pytest.raises(InvalidSignature):
        verify(vector_headers, VECTOR_BODY + b" ", [VECTOR_SECRET], tolerance_seconds=300, now=VECTOR_TIMESTAMP)


@pytest.mark.parametrize(
    ("hdrs", "body", "now"),
    [
        (headers(), BODY + b" ", NOW),
        (headers(secret=NEW_SECRET), BODY, NOW),
        (headers(), BODY, NOW + 301),
        (headers(), BODY, NOW - 301),
        ({**headers(), "webhook-id": "msg_2"}, BODY, NOW),
        ({**headers(), "webhook-signature": "v1,AAAA"}, BODY, NOW),
        ({**headers(), "webhook-signature": "v2," + headers()["webhook-signature"][3:]}, BODY, NOW),
        ({k: v for k, v in headers().items() if k != "webhook-id"}, BODY, NOW),
        ({**headers(), "webhook-timestamp": "soon"}, BODY, NOW),
    ],
    ids=["body", "secret", "late", "early", "id", "garbage", "version", "missing", "timestamp"],
)
def test_anything_else_is_refused(hdrs: dict, body: bytes, now: int) -> None:
    with pytest.raises(InvalidSignature):
        verify(hdrs, body, [SECRET], tolerance_seconds=300, now=now)


def test_rotation_accepts_any_current_secret_and_any_offered_signature() -> None:
    new = headers(secret=NEW_SECRET)
    verify(new, BODY, [SECRET, NEW_SECRET], tolerance_seconds=300, now=NOW)
    both = {**new, "webhook-signature": f"{headers()['webhook-signature']} {new['webhook-signature']}"}
    verify(both, BODY, [NEW_SECRET], tolerance_seconds=300, now=NOW)


@pytest.fixture
def signed_host(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    monkeypatch.setenv("WEBHOOK_SECRET", f"{SECRET} {NEW_SECRET}")
    return host


async def test_unsigned_requests_are_401_before_any_storage_access(
    signed_host: FunctionHost, ops: OperationCounter
) -> None:
    response = await signed_host.request("POST", "/api/runs", body=BODY, headers={"content-type": "application/json"})
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid_signature"
    stale = headers(timestamp=int(time.time()) - 3600)
    assert (await signed_host.request("POST", "/api/runs", body=BODY, headers=stale)).status == 401
    assert ops.total == 0


async def test_signed_requests_run(signed_host: FunctionHost) -> None:
    body = json.dumps({"messages": "signed hello"}).encode()
    hdrs = headers(secret=NEW_SECRET, body=body, timestamp=int(time.time()))
    response = await signed_host.request("POST", "/api/threads/signed/runs", body=body, headers=hdrs)
    assert response.status == 200
    assert "signed hello" in (await response.json())["messages"][0]["content"]


async def test_a_malformed_secret_is_a_configuration_error(host: FunctionHost, monkeypatch) -> None:
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_!!!not-base64")
    response = await host.request("POST", "/api/runs", body=BODY, headers={"content-type": "application/json"})
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")


@pytest.mark.parametrize("secret", ["whsec_", "whsec_" + base64.b64encode(b"short key").decode(), "tiny"])
async def test_a_secret_under_16_bytes_is_a_configuration_error(
    recording: FunctionHost, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    """A request signed with an empty key used to get 200: refuse the setting instead."""
    from tests import recording_workflow

    monkeypatch.setenv("WEBHOOK_SECRET", f"{SECRET} {secret}")
    hdrs = headers(secret=secret, timestamp=int(time.time()))
    response = await recording.request("POST", "/api/runs", body=BODY, headers=hdrs)
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")
    assert "retry-after" not in response.headers
    assert recording_workflow.CALLS == []


async def _signed(host: FunctionHost, path: str, body: bytes, message_id: str, **extra: str):
    hdrs = {**headers(body=body, timestamp=int(time.time()), message_id=message_id), **extra}
    return await host.request("POST", path, body=body, headers=hdrs)


async def test_a_captured_delivery_sent_again_replays_whatever_its_idempotency_key(
    signed_host: FunctionHost,
) -> None:
    body = json.dumps({"messages": "pay invoice 7"}).encode()
    first = await _signed(signed_host, "/api/threads/payer/runs", body, "msg_capture", **{"Idempotency-Key": "a"})
    assert first.status == 200
    again = await _signed(signed_host, "/api/threads/payer/runs", body, "msg_capture", **{"Idempotency-Key": "b"})
    assert again.status == 200
    assert await again.body() == await first.body()
    unkeyed = await _signed(signed_host, "/api/threads/payer/runs", body, "msg_capture")
    assert await unkeyed.body() == await first.body()
    thread = await (await signed_host.request("GET", "/api/threads/payer")).json()
    assert thread["turns"] == 1


async def test_a_captured_delivery_sent_to_another_route_is_refused(signed_host: FunctionHost) -> None:
    body = json.dumps({"messages": "pay invoice 8"}).encode()
    assert (await _signed(signed_host, "/api/threads/payer/runs", body, "msg_moved")).status == 200
    moved = await _signed(signed_host, "/api/threads/other/runs", body, "msg_moved")
    assert (moved.status, (await moved.json())["error"]["code"]) == (409, "webhook_id_reused")
    assert (await signed_host.request("GET", "/api/threads/other")).status == 404
    other_body = json.dumps({"messages": "pay invoice 9"}).encode()
    changed = await _signed(signed_host, "/api/threads/payer/runs", other_body, "msg_moved")
    assert (changed.status, (await changed.json())["error"]["code"]) == (409, "webhook_id_reused")
