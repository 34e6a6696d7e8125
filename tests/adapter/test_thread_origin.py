"""A thread remembers who made it (its origin), and every route and adapter checks it:
an API caller can neither use a Slack channel's thread nor have the bot post into a
channel, whatever the thread is called; principals keep to their own threads."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter.wiring import build_service, load_settings
from tests.adapter.test_webhook_adapters import CALLBACK_SECRET, MENTION, SLACK_SECRET, SLACK_THREAD, _slack, fresh_app

ANSWER_ROUTE = "/api/adapters/slack/answer"
# The same channel, another Slack thread: a name the Slack adapter would give, no turn yet.
NEW_SLACK_THREAD = "slack.T0001.C2147483705.1999999999_2e000001"


@pytest.fixture
async def app(queue_env: str, monkeypatch: pytest.MonkeyPatch) -> FunctionHost:
    """The app with the Slack adapter on and callbacks allowed to loopback."""
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    monkeypatch.setenv("CALLBACK_SECRET", CALLBACK_SECRET)
    monkeypatch.setenv("CALLBACK_ALLOW_LOCAL_HTTP", "true")
    for name in (
        "WEBHOOK_SECRET",
        "WEBHOOK_SCHEME",
        "IDEMPOTENCY_HEADERS",
        "ADAPTER_ANSWER_URL",
        "GITHUB_WEBHOOK_SECRET",
    ):
        monkeypatch.delenv(name, raising=False)
    return FunctionHost(fresh_app())


@pytest.fixture
async def slack_api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[WebhookReceiver]:
    """A stand-in for Slack's Web API: every ``chat.postMessage`` it gets is a post."""
    api = WebhookReceiver(CALLBACK_SECRET, reply={"ok": True, "ts": "1355517524.000001"})
    await api.start()
    monkeypatch.setenv("SLACK_API_URL", api.url.rsplit("/hooks", 1)[0])
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    yield api
    await api.stop()


@asynccontextmanager
async def served(host: FunctionHost, route: str) -> AsyncIterator[str]:
    """``route`` of the in-process app on a loopback socket, so a callback can reach it."""

    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        answered = await host.request("POST", route, body=body, headers=dict(request.headers))
        return web.Response(status=answered.status, body=await answered.body())

    server = web.Application()
    server.router.add_post(route, forward)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}{route}"
    finally:
        await runner.cleanup()


async def _turns(thread: str) -> int:
    return (await build_service(load_settings()).pointers.read(thread)).turns


async def test_an_api_caller_cannot_have_the_bot_post_into_a_slack_channel(
    app: FunctionHost, slack_api: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with served(app, ANSWER_ROUTE) as answer_url:
        monkeypatch.setenv("ADAPTER_ANSWER_URL", answer_url)
        # The channel's own user mentions the bot: the reply is posted (the path works).
        mention = json.dumps(MENTION).encode()
        assert (await app.request("POST", "/api/adapters/slack/events", body=mention, headers=_slack(mention))).status
        await QueueRunner(app).run_until_idle()
        assert len(slack_api.deliveries) == 1 and await _turns(SLACK_THREAD) == 1
        # An API caller runs background turns on that thread and on a new one named like
        # the channel's, each with the answer route as its callback.
        attack = {"messages": "ATTACKER TEXT", "background": True, "callback_url": answer_url}
        for thread in (SLACK_THREAD, NEW_SLACK_THREAD):
            accepted = await app.request("POST", f"/api/threads/{thread}/runs", json_body=attack)
            assert accepted.status in (202, 403), await accepted.body()
        await QueueRunner(app).run_until_idle()
        # Nothing more reached the channel, and the channel's thread kept its one turn.
        assert len(slack_api.deliveries) == 1
        assert not any(b"ATTACKER" in delivery.body for delivery in slack_api.deliveries)
        assert await _turns(SLACK_THREAD) == 1


async def test_the_thread_routes_answer_only_the_thread_s_origin(app: FunctionHost) -> None:
    mention = json.dumps(MENTION).encode()
    await app.request("POST", "/api/adapters/slack/events", body=mention, headers=_slack(mention))
    await QueueRunner(app).run_until_idle()
    assert await _turns(SLACK_THREAD) == 1
    # An API caller (a function key, no principal) is another origin than the channel.
    for method, path in (
        ("GET", f"/api/threads/{SLACK_THREAD}"),
        ("GET", f"/api/threads/{SLACK_THREAD}/history"),
        ("DELETE", f"/api/threads/{SLACK_THREAD}"),
        ("POST", f"/api/threads/{SLACK_THREAD}/runs"),
        ("PUT", f"/api/threads/{SLACK_THREAD}/metadata"),
    ):
        answered = await app.request(method, path, json_body={"messages": "hi"} if method == "POST" else {})
        assert (answered.status, (await answered.json())["error"]["code"]) == (403, "forbidden"), (method, path)
    assert await _turns(SLACK_THREAD) == 1


def _principal(oid: str) -> dict[str, str]:
    claims = {"claims": [{"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": oid}]}
    return {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(claims).encode()).decode()}


async def test_a_principal_s_thread_is_that_principal_s_alone(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No authorizer at all: the origin alone keeps principals apart, whatever the names.
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    alice, bob = _principal("a11ce"), _principal("b0b")
    made = await host.request("POST", "/api/threads/chat/runs", json_body={"messages": "hi"}, headers=alice)
    assert made.status == 200
    again = await host.request("POST", "/api/threads/chat/runs", json_body={"messages": "again"}, headers=alice)
    assert again.status == 200
    assert (await host.request("GET", "/api/threads/chat", headers=alice)).status == 200
    for headers in (bob, {}):  # another principal, and a caller with none
        turn = await host.request("POST", "/api/threads/chat/runs", json_body={"messages": "x"}, headers=headers)
        assert turn.status == 403
        assert (await host.request("GET", "/api/threads/chat", headers=headers)).status == 403
        assert (await host.request("DELETE", "/api/threads/chat", headers=headers)).status == 403
    assert await _turns("chat") == 2
    assert (await host.request("DELETE", "/api/threads/chat", headers=alice)).status == 204


async def test_adapter_turns_need_no_rule_by_name_in_the_authorizer(
    app: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ready authorizer allows no thread without a principal; an adapter's turn is
    # authenticated by its sender's signature and confined by its origin instead, so it runs,
    # while an API caller on a thread of that name is still refused by the authorizer.
    monkeypatch.setenv("THREAD_AUTHORIZER", "functions_adapter.authorizers:thread_prefix_of_principal")
    mention = json.dumps(MENTION).encode()
    assert (
        await app.request("POST", "/api/adapters/slack/events", body=mention, headers=_slack(mention))
    ).status == 200
    await QueueRunner(app).run_until_idle()
    assert await _turns(SLACK_THREAD) == 1
    direct = await app.request("POST", f"/api/threads/{SLACK_THREAD}/runs", json_body={"messages": "hi"})
    assert direct.status == 403


async def test_a_background_run_answers_only_its_origin(app: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    alice, bob = _principal("a11ce"), _principal("b0b")
    for thread in ("bg", None):  # a thread turn, and a run without a thread
        path = "/api/runs" if thread is None else f"/api/threads/{thread}/runs"
        accepted = await app.request("POST", path, json_body={"messages": "hi", "background": True}, headers=alice)
        assert accepted.status == 202
        run = f"/api/runs/{(await accepted.json())['run_id']}"
        for route, method in ((run, "GET"), (f"{run}/stream", "GET"), (f"{run}/cancel", "POST")):
            refused = await app.request(method, route, headers=bob)
            assert refused.status == 403, route
        assert (await app.request("GET", run, headers=alice)).status == 200


async def test_a_response_answers_only_its_origin(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    alice, bob = _principal("a11ce"), _principal("b0b")
    created = await host.request("POST", "/api/responses", json_body={"input": "mine"}, headers=alice)
    assert created.status == 200, await created.body()
    response_id = (await created.json())["id"]
    assert (await host.request("GET", f"/api/responses/{response_id}", headers=alice)).status == 200
    for route in (f"/api/responses/{response_id}", f"/api/responses/{response_id}/input_items"):
        assert (await host.request("GET", route, headers=bob)).status == 403, route
    assert (await host.request("DELETE", f"/api/responses/{response_id}", headers=bob)).status == 403
    continued = {"input": "and then?", "previous_response_id": response_id}
    assert (await host.request("POST", "/api/responses", json_body=continued, headers=bob)).status == 403
    assert (await host.request("POST", "/api/responses", json_body=continued, headers=alice)).status == 200


async def test_an_idempotency_key_is_its_origin_s_alone(app: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    # Bob sends Alice's key with her exact body: he gets his own outcome (403 on her thread,
    # a run of his own elsewhere), never the stored response of her turn.
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    alice, bob = _principal("a11ce"), _principal("b0b")
    calls = [
        ("/api/threads/keyed/runs", {"messages": "secret plan"}),
        ("/api/threads/keyed-bg/runs", {"messages": "secret plan", "background": True}),
        ("/api/runs", {"messages": "secret plan"}),
        ("/api/responses", {"input": "secret plan"}),
    ]
    for number, (route, body) in enumerate(calls):
        key = {"Idempotency-Key": f"shared-{number}"}
        first = await app.request("POST", route, json_body=body, headers={**alice, **key})
        assert first.status in (200, 202), await first.body()
        replayed = await app.request("POST", route, json_body=body, headers={**alice, **key})
        assert await replayed.body() == await first.body(), route  # her own retry replays
        await QueueRunner(app).run_until_idle()  # her background turn made its thread
        other = await app.request("POST", route, json_body=body, headers={**bob, **key})
        if "/threads/" in route:
            assert other.status == 403, route
        else:
            assert other.status == 200, route
            assert await other.body() != await first.body(), route
        assert (await app.request("POST", route, json_body=body, headers={**bob, **key})).status == other.status
    assert await _turns("keyed") == 1
