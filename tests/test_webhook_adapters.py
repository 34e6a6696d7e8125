"""examples/webhook_adapters.py: Slack and GitHub deliveries become background thread turns,
answered within the sender's deadline, with the reply pushed back through a callback."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator

import azure.functions as func
import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from examples import webhook_adapters
from functions_adapter.callbacks import signed_headers

GITHUB_SECRET = "github-webhook-secret-0123456789"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CALLBACK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
async def adapters(host: FunctionHost, queue_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FunctionHost]:
    """The function app plus the example's blueprint, with a queue and callbacks configured."""
    import function_app

    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", GITHUB_SECRET)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    app = func.FunctionApp()
    app.register_functions(webhook_adapters.bp)
    combined = FunctionHost(app)
    # The example's routes, and the app's queue trigger that runs the turns.
    combined.triggers = FunctionHost(function_app.app).triggers
    yield combined


def _github(body: bytes, delivery: str) -> dict[str, str]:
    signature = "sha256=" + hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "content-type": "application/json",
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature,
    }


async def test_a_github_issue_comment_becomes_a_background_turn_with_a_callback(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = WebhookReceiver(CALLBACK_SECRET)
    monkeypatch.setenv("ADAPTER_ANSWER_URL", await receiver.start())
    try:
        event = {
            "action": "created",
            "issue": {"number": 1347},
            "comment": {"body": "Can you summarise this issue?"},
            "repository": {"full_name": "octo-org/hello.world"},
        }
        body = json.dumps(event).encode()
        first = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "d-1"))
        retry = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "d-1"))
        assert (first.status, retry.status) == (202, 202)
        assert await first.body() == await retry.body()  # GitHub's redelivery replays
        forged = {**_github(body, "d-2"), "X-Hub-Signature-256": "sha256=" + "0" * 64}
        assert (await adapters.request("POST", "/api/adapters/github", body=body, headers=forged)).status == 401
        assert await QueueRunner(adapters).run_until_idle() >= 1
        [delivery] = receiver.deliveries
        payload = delivery.json()
        assert delivery.verified and payload["status"] == "succeeded"
        assert payload["thread_id"] == "github-octo-org-hello-world-1347"
        assert "summarise this issue" in payload["result"]["messages"][0]["content"]
    finally:
        await receiver.stop()


async def test_a_github_delivery_without_its_delivery_id_is_refused(adapters: FunctionHost) -> None:
    # The delivery ID is what a replay is recognised by (GitHub signs no timestamp), so a
    # signed delivery without one is refused rather than run unkeyed.
    event = {
        "action": "created",
        "issue": {"number": 7},
        "comment": {"body": "hello"},
        "repository": {"full_name": "octo-org/hello"},
    }
    body = json.dumps(event).encode()
    headers = {k: v for k, v in _github(body, "unused").items() if k != "X-GitHub-Delivery"}
    response = await adapters.request("POST", "/api/adapters/github", body=body, headers=headers)
    assert response.status == 400
    assert "X-GitHub-Delivery" in (await response.json())["error"]["message"]
    assert await QueueRunner(adapters).run_until_idle() == 0


def _slack(body: bytes) -> dict[str, str]:
    stamp = str(int(time.time()))
    signature = "v0=" + hmac.new(SLACK_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"content-type": "application/json", "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}


async def test_slack_events_answer_within_the_deadline_and_replies_go_to_the_thread(
    adapters: FunctionHost, host: FunctionHost
) -> None:
    challenge = json.dumps(
        {"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    )
    answer = await adapters.request(
        "POST", "/api/adapters/slack/events", body=challenge.encode(), headers=_slack(challenge.encode())
    )
    assert (await answer.json())["challenge"].startswith("3eZbrw1")
    envelope = {
        "type": "event_callback",
        "event_id": "Ev0PV52K21",
        "team_id": "T0001",
        "event": {"type": "app_mention", "channel": "C2147483705", "ts": "1355517523.000005", "text": "status?"},
    }
    body = json.dumps(envelope).encode()
    started = time.monotonic()
    response = await adapters.request("POST", "/api/adapters/slack/events", body=body, headers=_slack(body))
    assert response.status == 200 and time.monotonic() - started < 3
    await QueueRunner(adapters).run_until_idle()
    thread = await (await host.request("GET", "/api/threads/slack-T0001-C2147483705-1355517523-000005")).json()
    assert thread["turns"] == 1
    # Slack's retry of the same event (X-Slack-Retry-Num) replays: still one turn.
    retried = await adapters.request(
        "POST", "/api/adapters/slack/events", body=body, headers={**_slack(body), "X-Slack-Retry-Num": "1"}
    )
    assert retried.status == 200
    await QueueRunner(adapters).run_until_idle()
    again = await (await host.request("GET", "/api/threads/slack-T0001-C2147483705-1355517523-000005")).json()
    assert again["turns"] == 1


async def test_the_answer_route_posts_the_reply_into_the_slack_thread(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    slack_api = WebhookReceiver(CALLBACK_SECRET)
    await slack_api.start()
    monkeypatch.setenv("SLACK_API_URL", slack_api.url.rsplit("/hooks", 1)[0])
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    try:
        payload = {
            "type": "run.completed",
            "run_id": "r1",
            "status": "succeeded",
            "thread_id": "slack-T0001-C2147483705-1355517523-000005",
            "result": {"messages": [{"role": "assistant", "content": "All green."}]},
        }
        body = json.dumps(payload).encode()
        posted = await adapters.request(
            "POST", "/api/adapters/slack/answer", body=body, headers=signed_headers(CALLBACK_SECRET, "msg_r1", body)
        )
        assert posted.status == 200
        [message] = slack_api.deliveries
        assert message.json() == {"channel": "C2147483705", "thread_ts": "1355517523.000005", "text": "All green."}
        assert message.headers["authorization"] == "Bearer xoxb-test"
        unsigned = await adapters.request(
            "POST", "/api/adapters/slack/answer", body=body, headers={"content-type": "application/json"}
        )
        assert unsigned.status == 401
    finally:
        await slack_api.stop()
