"""Standard Webhooks signatures: verification rules, rotation, and the HTTP gate."""

from __future__ import annotations

import base64
import json
import time

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from resumable.errors import InvalidSignature
from resumable.webhook_signature import sign, verify

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
NEW_SECRET = "whsec_" + base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()
BODY = b'{"messages":"hi"}'
NOW = 1_800_000_000


def headers(secret: str = SECRET, body: bytes = BODY, timestamp: int = NOW, message_id: str = "msg_1") -> dict:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def test_a_correct_signature_passes() -> None:
    verify(headers(), BODY, [SECRET], tolerance_seconds=300, now=NOW + 299)


def test_known_answer() -> None:
    """Pins the signed content format (id.timestamp.body) against an independent HMAC."""
    import hashlib
    import hmac

    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, b"msg_1.1800000000." + BODY, hashlib.sha256).digest()).decode()
    assert sign(SECRET, "msg_1", NOW, BODY) == f"v1,{expected}"


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
    response = await signed_host.request("POST", "/api/runs", body=BODY)
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
    response = await host.request("POST", "/api/runs", body=BODY)
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")
