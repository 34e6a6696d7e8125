"""GitHub and Slack signatures (with their documented examples), and delivery IDs as
idempotency keys: a sender's retry replays instead of running again."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest

from devtools.function_host import FunctionHost
from devtools.op_counter import OperationCounter
from functions_adapter.errors import InvalidSignature
from functions_adapter.signatures import verify

# GitHub's documented example ("Validating webhook deliveries", testing the signature).
GITHUB_SECRET = "It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

# Slack's documented example ("Verifying requests from Slack").
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TIMESTAMP = 1531420618
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_github_s_documented_example_verifies() -> None:
    verify(
        {"x-hub-signature-256": GITHUB_SIGNATURE}, GITHUB_BODY, [GITHUB_SECRET], tolerance_seconds=300, scheme="github"
    )
    for bad_headers, body in (
        ({"x-hub-signature-256": GITHUB_SIGNATURE}, GITHUB_BODY + b"!"),
        ({"x-hub-signature-256": GITHUB_SIGNATURE.replace("sha256=", "sha1=")}, GITHUB_BODY),
        ({}, GITHUB_BODY),
    ):
        with pytest.raises(InvalidSignature):
            verify(bad_headers, body, [GITHUB_SECRET], tolerance_seconds=300, scheme="github")


def _slack_headers(signature: str = SLACK_SIGNATURE, timestamp: int = SLACK_TIMESTAMP) -> dict[str, str]:
    return {"x-slack-signature": signature, "x-slack-request-timestamp": str(timestamp)}


def test_slack_s_documented_example_verifies_within_five_minutes() -> None:
    verify(
        _slack_headers(), SLACK_BODY, [SLACK_SECRET], tolerance_seconds=300, now=SLACK_TIMESTAMP + 299, scheme="slack"
    )
    with pytest.raises(InvalidSignature, match="window"):
        verify(
            _slack_headers(),
            SLACK_BODY,
            [SLACK_SECRET],
            tolerance_seconds=300,
            now=SLACK_TIMESTAMP + 301,
            scheme="slack",
        )
    with pytest.raises(InvalidSignature):
        verify(
            _slack_headers(),
            SLACK_BODY + b"&x=1",
            [SLACK_SECRET],
            tolerance_seconds=300,
            now=SLACK_TIMESTAMP,
            scheme="slack",
        )
    # The timestamp is signed: moving it breaks the signature.
    with pytest.raises(InvalidSignature):
        verify(
            _slack_headers(timestamp=SLACK_TIMESTAMP + 1),
            SLACK_BODY,
            [SLACK_SECRET],
            tolerance_seconds=300,
            now=SLACK_TIMESTAMP,
            scheme="slack",
        )


def _github_signed(body: bytes, secret: str) -> dict[str, str]:
    return {"X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


GITHUB_APP_SECRET = "a-github-webhook-secret-of-32-by"


async def test_a_github_retry_with_the_same_delivery_id_replays(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, ops: OperationCounter
) -> None:
    monkeypatch.setenv("WEBHOOK_SCHEME", "github")
    monkeypatch.setenv("WEBHOOK_SECRET", GITHUB_APP_SECRET)
    monkeypatch.setenv("IDEMPOTENCY_HEADERS", "X-GitHub-Delivery")
    body = json.dumps({"messages": "Issue comment: please summarise"}).encode()
    headers = {
        "content-type": "application/json",
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        **_github_signed(body, GITHUB_APP_SECRET),
    }
    first = await host.request("POST", "/api/threads/issue-1347/runs", body=body, headers=headers)
    retry = await host.request("POST", "/api/threads/issue-1347/runs", body=body, headers=headers)
    assert (first.status, retry.status) == (200, 200)
    assert await first.body() == await retry.body()
    thread = await (await host.request("GET", "/api/threads/issue-1347")).json()
    assert thread["turns"] == 1
    # Unsigned, or signed with another secret: 401 before any storage request.
    ops.reset()
    forged = {**headers, **_github_signed(body, "another-secret-of-32-bytes-00000")}
    for bad in (forged, {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}):
        response = await host.request("POST", "/api/threads/issue-1347/runs", body=body, headers=bad)
        assert (response.status, (await response.json())["error"]["code"]) == (401, "invalid_signature")
    assert ops.total == 0


async def test_with_the_github_scheme_x_github_delivery_dedupes_by_default(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, queue_env: str
) -> None:
    # GitHub signs no timestamp, so a captured delivery verifies forever: without dedupe on
    # its delivery ID, every replay would run again. No IDEMPOTENCY_HEADERS is set here.
    monkeypatch.setenv("WEBHOOK_SCHEME", "github")
    monkeypatch.setenv("WEBHOOK_SECRET", GITHUB_APP_SECRET)
    monkeypatch.delenv("IDEMPOTENCY_HEADERS", raising=False)
    body = json.dumps({"messages": "Issue comment: please summarise"}).encode()
    headers = {
        "content-type": "application/json",
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        **_github_signed(body, GITHUB_APP_SECRET),
    }
    first = await host.request("POST", "/api/threads/issue-7/runs", body=body, headers=headers)
    replayed = await host.request("POST", "/api/threads/issue-7/runs", body=body, headers=headers)
    assert (first.status, replayed.status) == (200, 200)
    assert await first.body() == await replayed.body()
    assert (await (await host.request("GET", "/api/threads/issue-7")).json())["turns"] == 1
    # An Idempotency-Key added to the replay does not make it a new request: the delivery ID comes first.
    keyed = await host.request(
        "POST", "/api/threads/issue-7/runs", body=body, headers={**headers, "Idempotency-Key": "k-1"}
    )
    assert await keyed.body() == await first.body()
    # The same in the background: one run for the delivery, whatever the replay asks.
    background = {**headers, "Prefer": "respond-async", "X-GitHub-Delivery": "a0b1c2d3"}
    accepted = await host.request("POST", "/api/threads/issue-7/runs", body=body, headers=background)
    again = await host.request("POST", "/api/threads/issue-7/runs", body=body, headers=background)
    assert (accepted.status, again.status) == (202, 202)
    assert (await accepted.json())["run_id"] == (await again.json())["run_id"]


async def test_an_operator_s_idempotency_headers_win_over_the_github_default(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEBHOOK_SCHEME", "github")
    monkeypatch.setenv("WEBHOOK_SECRET", GITHUB_APP_SECRET)
    monkeypatch.setenv("IDEMPOTENCY_HEADERS", "Idempotency-Key")
    body = json.dumps({"messages": "hello"}).encode()
    headers = {
        "content-type": "application/json",
        "X-GitHub-Delivery": "d-9",
        **_github_signed(body, GITHUB_APP_SECRET),
    }
    for _ in range(2):
        assert (await host.request("POST", "/api/threads/issue-8/runs", body=body, headers=headers)).status == 200
    assert (await (await host.request("GET", "/api/threads/issue-8")).json())["turns"] == 2


async def test_a_signed_slack_request_runs(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBHOOK_SCHEME", "slack")
    monkeypatch.setenv("WEBHOOK_SECRET", SLACK_SECRET)
    body = json.dumps({"messages": "hello from a channel"}).encode()
    timestamp = str(int(time.time()))
    signature = "v0=" + hmac.new(SLACK_SECRET.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": "application/json",
        "X-Slack-Signature": signature,
        "X-Slack-Request-Timestamp": timestamp,
    }
    response = await host.request("POST", "/api/threads/C024BE91L/runs", body=body, headers=headers)
    assert response.status == 200, await response.body()
    stale = {**headers, "X-Slack-Request-Timestamp": str(int(timestamp) - 600)}
    assert (await host.request("POST", "/api/threads/C024BE91L/runs", body=body, headers=stale)).status == 401


async def test_an_unsigned_webhook_id_is_an_idempotency_key_by_default(host: FunctionHost) -> None:
    headers = {"webhook-id": "msg_2Lh9"}
    first = await host.request("POST", "/api/runs", json_body={"messages": "once"}, headers=headers)
    retry = await host.request("POST", "/api/runs", json_body={"messages": "once"}, headers=headers)
    assert await first.body() == await retry.body()
    # Each header is a namespace of its own: the same text as an Idempotency-Key is another request.
    other = await host.request(
        "POST", "/api/runs", json_body={"messages": "once"}, headers={"Idempotency-Key": "msg_2Lh9"}
    )
    assert (await other.json())["checkpoint_id"] != (await first.json())["checkpoint_id"]


async def test_bad_scheme_or_header_list_is_a_server_misconfiguration(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("WEBHOOK_SCHEME", "stripe"), ("IDEMPOTENCY_HEADERS", "X Bad Header")):
        with monkeypatch.context() as patch:
            patch.setenv(name, value)
            response = await host.request("POST", "/api/runs", json_body={"messages": "x"})
            assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")


@pytest.mark.parametrize("scheme", ["github", "slack"])
async def test_github_or_slack_without_a_secret_is_a_server_misconfiguration(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, ops: OperationCounter, scheme: str
) -> None:
    # Naming a sender's scheme says its deliveries are signed: with no secret to check
    # them, an unsigned turn must not run (standard, the default, with no secret is "off").
    monkeypatch.setenv("WEBHOOK_SCHEME", scheme)
    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    ops.reset()
    response = await host.request("POST", "/api/threads/issue-1/runs", json_body={"messages": "unsigned"})
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")
    assert ops.total == 0


def test_the_shipped_settings_leave_the_github_default_in_force() -> None:
    """The sample settings and Bicep leave IDEMPOTENCY_HEADERS empty, so turning on the
    GitHub scheme there dedupes on X-GitHub-Delivery without a second change."""
    import re
    from pathlib import Path

    from functions_adapter.settings import Settings

    root = Path(__file__).resolve().parents[2]
    values = json.loads((root / "local.settings.sample.json").read_text())["Values"]
    env = {**values, "WEBHOOK_SCHEME": "github", "WEBHOOK_SECRET": "a-github-webhook-secret"}
    assert Settings.from_env(env).idempotency_headers[0] == "x-github-delivery"
    bicep = (root / "infra" / "app" / "function-app.bicep").read_text()
    assert re.search(r"param idempotencyHeaders string = ''", bicep)
