"""The Slack and GitHub adapters (functions_adapter/webhooks/): registered only when their
secret is set, and through the registered functions, deliveries become background thread
turns answered within the sender's deadline, with the reply pushed back through a callback."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter.callbacks import signed_headers
from functions_adapter.wiring import build_service, container_for, load_settings
from resumable.background.records import RunRecords

ROOT = Path(__file__).resolve().parents[2]
GITHUB_SECRET = "github-webhook-secret-0123456789"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CALLBACK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ADAPTER_FUNCTIONS = {"github_adapter", "slack_events", "slack_answer"}


def fresh_app() -> func.FunctionApp:
    """function_app.py imported anew, as the host imports it with the current settings."""
    spec = importlib.util.spec_from_file_location(f"function_app_{uuid.uuid4().hex}", ROOT / "function_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


@pytest.fixture
async def adapters(queue_env: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FunctionHost]:
    """The function app indexed with both adapters' secrets set, a queue and callbacks."""
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", GITHUB_SECRET)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    for name in ("WEBHOOK_SECRET", "WEBHOOK_SCHEME", "IDEMPOTENCY_HEADERS", "ADAPTER_ANSWER_URL"):
        monkeypatch.delenv(name, raising=False)
    yield FunctionHost(fresh_app())


async def _turns(thread: str) -> int:
    """The thread's turns, from its pointer (the thread routes answer only its origin)."""
    return (await build_service(load_settings()).pointers.read(thread)).turns


# -- registration ----------------------------------------------------------------------


def _indexed(settings: dict[str, str]) -> dict[str, str]:
    """Import function_app in a fresh interpreter with ``settings``; each HTTP function's
    name and auth level, as the host indexes them."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET")}
    code = (
        "import json, function_app\n"
        "print(json.dumps({f.get_function_name(): json.loads(f.get_raw_bindings()[0]).get('authLevel', '')"
        " for f in function_app.app.get_functions()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, **settings},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, set()),
        ({"GITHUB_WEBHOOK_SECRET": "  ", "SLACK_SIGNING_SECRET": ""}, set()),
        ({"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET}, {"github_adapter"}),
        ({"SLACK_SIGNING_SECRET": SLACK_SECRET}, {"slack_events", "slack_answer"}),
        ({"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "SLACK_SIGNING_SECRET": SLACK_SECRET}, ADAPTER_FUNCTIONS),
    ],
    ids=["none", "blank", "github", "slack", "both"],
)
def test_an_adapter_is_registered_only_when_its_secret_is_set(settings: dict[str, str], expected: set[str]) -> None:
    functions = _indexed(settings)
    assert {"runs", "thread_runs", "health"} <= set(functions)  # the app itself, every time
    assert set(functions) & ADAPTER_FUNCTIONS == expected
    # The sender's signature is the adapters' authentication: no function key in their URLs.
    assert {functions[name] for name in expected} <= {"ANONYMOUS"}
    assert functions["runs"] == "FUNCTION"


# -- GitHub ------------------------------------------------------------------------------


def _github(body: bytes, delivery: str, event: str = "issue_comment") -> dict[str, str]:
    signature = "sha256=" + hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "content-type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature,
    }


def _comment(number: int = 1347, text: str = "Can you summarise this issue?") -> bytes:
    event = {
        "action": "created",
        "issue": {"number": number},
        "comment": {"body": text, "user": {"login": "octocat", "type": "User"}},
        "repository": {"full_name": "octo-org/hello.world", "id": 1296269},
    }
    return json.dumps(event).encode()


async def test_a_github_issue_comment_becomes_a_background_turn_with_a_callback(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = WebhookReceiver(CALLBACK_SECRET)
    monkeypatch.setenv("ADAPTER_ANSWER_URL", await receiver.start())
    try:
        body = _comment()
        first = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "d-1"))
        # GitHub's 10 s are met by answering before the turn runs: it is only queued (its
        # run record, read below, says so).
        assert first.status == 202
        accepted = await first.json()
        assert accepted["status"] == "queued" and accepted["thread_id"] == "github.octo-org.hello_2eworld.1347"
        # The run is the repository's: the API's caller (another origin) may not see it.
        assert (await adapters.request("GET", f"/api/runs/{accepted['run_id']}")).status == 403
        record = await RunRecords(container_for(load_settings())).get(accepted["run_id"])
        assert record is not None and record.value.status == "queued" and record.value.origin == "github:1296269"
        retry = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "d-1"))
        assert retry.status == 202
        assert await first.body() == await retry.body()  # GitHub's redelivery replays
        forged = {**_github(body, "d-2"), "X-Hub-Signature-256": "sha256=" + "0" * 64}
        refused = await adapters.request("POST", "/api/adapters/github", body=body, headers=forged)
        assert refused.status == 401 and (await refused.json())["error"]["code"] == "invalid_signature"
        assert await QueueRunner(adapters).run_until_idle() >= 1
        [delivery] = receiver.deliveries
        payload = delivery.json()
        assert delivery.verified and payload["status"] == "succeeded"
        assert payload["thread_id"] == "github.octo-org.hello_2eworld.1347"
        assert payload["origin"] == "github:1296269"  # what a receiver commenting on GitHub checks
        assert "summarise this issue" in payload["result"]["messages"][0]["content"]
    finally:
        await receiver.stop()


async def test_a_github_delivery_without_its_delivery_id_is_refused(adapters: FunctionHost) -> None:
    # The delivery ID is what a replay is recognised by (GitHub signs no timestamp), so a
    # signed delivery without one is refused rather than run unkeyed.
    body = _comment(7, "hello")
    headers = {k: v for k, v in _github(body, "unused").items() if k != "X-GitHub-Delivery"}
    response = await adapters.request("POST", "/api/adapters/github", body=body, headers=headers)
    assert response.status == 400
    assert "X-GitHub-Delivery" in (await response.json())["error"]["message"]
    assert await QueueRunner(adapters).run_until_idle() == 0


async def test_an_anonymous_route_reads_no_more_than_max_request_bytes(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No function key guards these routes, so the body cap applies before the signature.
    monkeypatch.setenv("MAX_REQUEST_BYTES", "1024")
    body = _comment(text="x" * 2048)
    answered = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "big"))
    assert answered.status == 413 and (await answered.json())["error"]["code"] == "payload_too_large"
    assert await QueueRunner(adapters).run_until_idle() == 0


async def test_github_pings_and_other_events_start_nothing(adapters: FunctionHost) -> None:
    ping = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    answered = await adapters.request("POST", "/api/adapters/github", body=ping, headers=_github(ping, "p", "ping"))
    assert answered.status == 204
    edited = json.dumps({**json.loads(_comment()), "action": "edited"}).encode()
    assert (
        await adapters.request("POST", "/api/adapters/github", body=edited, headers=_github(edited, "e"))
    ).status == 204
    assert await QueueRunner(adapters).run_until_idle() == 0


@pytest.mark.parametrize(
    "author",
    [
        {"comment": {"user": {"login": "answer-bot[bot]", "type": "Bot"}}},
        {"comment": {"user": {"login": "octocat", "type": "User"}, "performed_via_github_app": {"id": 1, "slug": "a"}}},
        {"sender": {"login": "answer-bot[bot]", "type": "Bot"}},
    ],
    ids=["bot-user", "via-github-app", "bot-sender"],
)
async def test_comments_by_bots_and_github_apps_start_nothing(adapters: FunctionHost, author: dict[str, Any]) -> None:
    # A receiver that replies as a GitHub App (the documented way) would otherwise have its
    # own reply start the next turn, and so on forever.
    event = json.loads(_comment())
    for field, value in author.items():
        event[field] = {**event.get(field, {}), **value}
    body = json.dumps(event).encode()
    answered = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, "bot-1"))
    assert answered.status == 204
    assert await QueueRunner(adapters).run_until_idle() == 0


# -- Slack -------------------------------------------------------------------------------


def _slack(body: bytes, stamp: int | None = None) -> dict[str, str]:
    timestamp = str(int(time.time()) if stamp is None else stamp)
    signed = f"v0:{timestamp}:".encode() + body
    signature = "v0=" + hmac.new(SLACK_SECRET.encode(), signed, hashlib.sha256).hexdigest()
    return {"content-type": "application/json", "X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}


MENTION = {
    "type": "event_callback",
    "event_id": "Ev0PV52K21",
    "team_id": "T0001",
    "event": {"type": "app_mention", "channel": "C2147483705", "ts": "1355517523.000005", "text": "status?"},
}
SLACK_THREAD = "slack.T0001.C2147483705.1355517523_2e000005"


async def test_slack_events_answer_within_the_deadline_and_replies_go_to_the_thread(adapters: FunctionHost) -> None:
    challenge = json.dumps(
        {"type": "url_verification", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    )
    answer = await adapters.request(
        "POST", "/api/adapters/slack/events", body=challenge.encode(), headers=_slack(challenge.encode())
    )
    assert (await answer.json())["challenge"].startswith("3eZbrw1")
    body = json.dumps(MENTION).encode()
    response = await adapters.request("POST", "/api/adapters/slack/events", body=body, headers=_slack(body))
    # Slack's 3 s are met by answering before the turn runs: it is only queued.
    assert response.status == 200
    assert await _turns(SLACK_THREAD) == 0
    await QueueRunner(adapters).run_until_idle()
    assert await _turns(SLACK_THREAD) == 1
    # Slack's retry of the same event (X-Slack-Retry-Num) replays: still one turn.
    retried = await adapters.request(
        "POST", "/api/adapters/slack/events", body=body, headers={**_slack(body), "X-Slack-Retry-Num": "1"}
    )
    assert retried.status == 200
    await QueueRunner(adapters).run_until_idle()
    assert await _turns(SLACK_THREAD) == 1


async def test_slack_events_refuse_stale_or_forged_signatures_and_ignore_bots(adapters: FunctionHost) -> None:
    body = json.dumps(MENTION).encode()
    stale = await adapters.request(
        "POST", "/api/adapters/slack/events", body=body, headers=_slack(body, int(time.time()) - 3600)
    )
    assert stale.status == 401
    forged = {**_slack(body), "X-Slack-Signature": "v0=" + "0" * 64}
    assert (await adapters.request("POST", "/api/adapters/slack/events", body=body, headers=forged)).status == 401
    own_reply = {**MENTION, "event": {**MENTION["event"], "type": "message", "bot_id": "B1"}}  # type: ignore[dict-item]
    bot = json.dumps(own_reply).encode()
    assert (await adapters.request("POST", "/api/adapters/slack/events", body=bot, headers=_slack(bot))).status == 200
    assert await QueueRunner(adapters).run_until_idle() == 0


@pytest.fixture
async def slack_callback(adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[bytes, str]]:
    """A Slack mention run as a turn, and the completion callback the app sent for it (its
    body and ``webhook-id``), caught on its way to the answer route."""
    catcher = WebhookReceiver(CALLBACK_SECRET)
    monkeypatch.setenv("ADAPTER_ANSWER_URL", await catcher.start())
    try:
        body = json.dumps(MENTION).encode()
        started = await adapters.request("POST", "/api/adapters/slack/events", body=body, headers=_slack(body))
        assert started.status == 200
        await QueueRunner(adapters).run_until_idle()
        [delivery] = catcher.deliveries
        assert delivery.json()["thread_id"] == SLACK_THREAD
        yield delivery.body, delivery.headers["webhook-id"]
    finally:
        await catcher.stop()


@pytest.fixture
async def slack_api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[WebhookReceiver]:
    """A stand-in for Slack's Web API that posts (``"ok": true``)."""
    api = WebhookReceiver(CALLBACK_SECRET, reply={"ok": True, "ts": "1355517524.000001"})
    await api.start()
    monkeypatch.setenv("SLACK_API_URL", api.url.rsplit("/hooks", 1)[0])
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    yield api
    await api.stop()


@pytest.fixture
async def slack_refuses(slack_api: WebhookReceiver) -> WebhookReceiver:
    """Slack's Web API refusing the post the way Slack does: HTTP 200 with ``"ok": false``."""
    slack_api.reply = {"ok": False, "error": "not_in_channel"}
    return slack_api


async def _post_answer(adapters: FunctionHost, body: bytes, webhook_id: str) -> int:
    headers = signed_headers(CALLBACK_SECRET, webhook_id, body)
    return (await adapters.request("POST", "/api/adapters/slack/answer", body=body, headers=headers)).status


async def test_the_answer_route_posts_the_reply_into_the_slack_thread(
    adapters: FunctionHost, slack_callback: tuple[bytes, str], slack_api: WebhookReceiver
) -> None:
    body, webhook_id = slack_callback
    assert await _post_answer(adapters, body, webhook_id) == 200
    [message] = slack_api.deliveries
    reply = json.loads(body)["result"]["messages"][0]["content"]
    assert "status?" in reply
    assert message.json() == {"channel": "C2147483705", "thread_ts": "1355517523.000005", "text": reply}
    assert message.headers["authorization"] == "Bearer xoxb-test"
    unsigned = await adapters.request(
        "POST", "/api/adapters/slack/answer", body=body, headers={"content-type": "application/json"}
    )
    assert unsigned.status == 401


async def test_a_redelivered_answer_is_posted_once(
    adapters: FunctionHost, slack_callback: tuple[bytes, str], slack_api: WebhookReceiver
) -> None:
    # The callback's webhook-id is the same on every attempt; a redelivery (our answer was
    # lost, the sender retried) must replay, not post the reply into the channel again.
    body, webhook_id = slack_callback
    assert [await _post_answer(adapters, body, webhook_id) for _ in range(2)] == [200, 200]
    assert len(slack_api.deliveries) == 1


async def test_an_answer_slack_refused_is_posted_again_on_redelivery(
    adapters: FunctionHost, slack_callback: tuple[bytes, str], slack_refuses: WebhookReceiver
) -> None:
    # The dedupe remembers only posts that happened: a 502 leaves the webhook-id free.
    body, webhook_id = slack_callback
    assert [await _post_answer(adapters, body, webhook_id) for _ in range(2)] == [502, 502]
    assert len(slack_refuses.deliveries) == 2


async def test_a_reply_slack_refused_is_not_reported_delivered(
    adapters: FunctionHost, slack_callback: tuple[bytes, str], slack_refuses: WebhookReceiver
) -> None:
    # Slack's Web API answers HTTP 200 with "ok": false when it did not post (the bot is not
    # in the channel, a bad token, ...). A 2xx here would mark the callback delivered and
    # lose the reply; a 502 has the callback retried and shows in GET /api/runs/{id}.
    body, webhook_id = slack_callback
    answered = await adapters.request(
        "POST", "/api/adapters/slack/answer", body=body, headers=signed_headers(CALLBACK_SECRET, webhook_id, body)
    )
    assert len(slack_refuses.deliveries) == 1
    assert answered.status == 502
    assert "not_in_channel" in (await answered.json())["error"]["message"]


def _answer(thread: str) -> tuple[bytes, dict[str, str]]:
    payload = {
        "type": "run.completed",
        "run_id": "r2",
        "status": "succeeded",
        "thread_id": thread,
        "result": {"messages": [{"role": "assistant", "content": "Done."}]},
    }
    body = json.dumps(payload).encode()
    return body, signed_headers(CALLBACK_SECRET, "msg_r2", body)


@pytest.mark.parametrize(
    "thread",
    [
        "github.octo-org.hello_2eworld.1347",
        "",
        "slack.T0001",
        "slack-T0001-C2147483705-1355517523-000005",
        SLACK_THREAD,
    ],
    ids=["github", "none", "short", "old-name", "no-such-run"],
)
async def test_an_answer_for_a_thread_slack_did_not_start_is_not_posted(
    adapters: FunctionHost, slack_api: WebhookReceiver, thread: str
) -> None:
    # ADAPTER_ANSWER_URL serves both adapters: a GitHub turn's callback reaching the Slack
    # route must not be posted into a channel named after the repository, nor a run without
    # a thread be an error, nor a run the channel did not start be posted. 410 stops the
    # callback's retries.
    body, headers = _answer(thread)
    answered = await adapters.request("POST", "/api/adapters/slack/answer", body=body, headers=headers)
    assert answered.status == 410
    assert slack_api.deliveries == []


async def test_the_answer_route_without_a_bot_token_is_a_configuration_error(
    adapters: FunctionHost,
    slack_callback: tuple[bytes, str],
    slack_api: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLACK_BOT_TOKEN")
    body, webhook_id = slack_callback
    answered = await adapters.request(
        "POST", "/api/adapters/slack/answer", body=body, headers=signed_headers(CALLBACK_SECRET, webhook_id, body)
    )
    assert answered.status == 500
    assert (await answered.json())["error"]["code"] == "server_misconfigured"
    assert slack_api.deliveries == []  # nothing sent with an empty token


async def test_an_unresolved_key_vault_reference_is_a_configuration_error(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When App Service cannot read the vault it leaves the reference text in the setting;
    # that text is known to whoever knows the secret's URI, so it must never verify anything.
    reference = "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/github)"
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", reference)
    body = _comment()
    signature = "sha256=" + hmac.new(reference.encode(), body, hashlib.sha256).hexdigest()
    headers = {**_github(body, "kv-1"), "X-Hub-Signature-256": signature}
    answered = await adapters.request("POST", "/api/adapters/github", body=body, headers=headers)
    assert answered.status == 500
    assert (await answered.json())["error"]["code"] == "server_misconfigured"
    assert await QueueRunner(adapters).run_until_idle() == 0


@pytest.mark.parametrize("scheme", ["standard", "github", "slack"])
async def test_adapters_work_when_the_app_s_own_routes_require_signatures(
    adapters: FunctionHost, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    # WEBHOOK_SECRET signs direct calls to the thread route; the adapter has verified its
    # sender already, and its turn (a TurnCall, below that route's edge) needs no other signature.
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
    monkeypatch.setenv("WEBHOOK_SCHEME", scheme)
    body = _comment(99)
    first = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, f"s-{scheme}"))
    assert first.status == 202, await first.body()
    again = await adapters.request("POST", "/api/adapters/github", body=body, headers=_github(body, f"s-{scheme}"))
    assert await again.body() == await first.body()  # still keyed by the delivery ID
    await QueueRunner(adapters).run_until_idle()
    assert await _turns("github.octo-org.hello_2eworld.99") == 1
    # A direct, unsigned call is still refused.
    direct = await adapters.request("POST", "/api/threads/t1/runs", json_body={"messages": "hi"})
    assert direct.status == 401
