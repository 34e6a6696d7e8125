"""Example: Slack and GitHub in front of the thread API (an example, not part of the app).

Slack and GitHub do not speak this app's body shape and will not wait for an agent
(Slack: 3 s, GitHub: 10 s). These functions translate one of their deliveries into a
background thread turn, answer at once, and get the answer back through a completion
callback:

* ``POST /api/adapters/github``: an ``issue_comment`` (action ``created``) becomes a turn
  on the thread ``github-<owner>-<repo>-<issue number>``, keyed by ``X-GitHub-Delivery``
  (refused without one). GitHub signs the body only: no timestamp, and not that header.
  A captured delivery therefore verifies forever; sent again as it was, within the
  dedupe window, it replays the first 202, but with a new delivery ID it is a new turn.
  The signature (over the body) and the dedupe window are the whole protection.
* ``POST /api/adapters/slack/events``: a ``message`` or ``app_mention`` event becomes a
  turn on ``slack-<team>-<channel>-<thread ts>``, keyed by its ``event_id`` (Slack's
  retries carry the same one, with ``X-Slack-Retry-Num``).
* ``POST /api/adapters/slack/answer``: the completion callback (signed with
  ``CALLBACK_SECRET``); it posts the reply into the Slack thread with ``chat.postMessage``.

Each verifies its sender's signature first (``GITHUB_WEBHOOK_SECRET``,
``SLACK_SIGNING_SECRET``) and then calls the app's own thread route in-process, so the
turn gets the same validation, deduplication and background execution as any other.
To use it, register the blueprint in ``function_app.py``
(``app.register_functions(webhook_adapters.bp)``) and deploy this file with the app.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import aiohttp
import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response
from starlette.requests import Request as StarletteRequest

from functions_adapter import routes, signatures
from functions_adapter.responses import error_response
from resumable.errors import InvalidRequest, InvalidSignature

bp = func.Blueprint()
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _thread_id(*parts: object) -> str:
    """Thread IDs are letters, digits, '-' and '_' here (dots and slashes become '-')."""
    return "-".join(_UNSAFE.sub("-", str(part)).strip("-") for part in parts)[:128]


def github_turn(event: dict[str, Any]) -> tuple[str, str] | None:
    """An issue comment as (thread ID, message), or None for anything else."""
    if event.get("action") != "created" or "comment" not in event or "issue" not in event:
        return None
    repository = event["repository"]["full_name"]
    return _thread_id("github", repository, event["issue"]["number"]), str(event["comment"]["body"])


def slack_turn(envelope: dict[str, Any]) -> tuple[str, str] | None:
    """A user's message or mention as (thread ID, message); bots (ourselves too) are ignored."""
    event = envelope.get("event") or {}
    if event.get("type") not in ("message", "app_mention") or event.get("bot_id") or event.get("subtype"):
        return None
    thread = event.get("thread_ts") or event["ts"]
    return _thread_id("slack", envelope["team_id"], event["channel"], thread), str(event.get("text", ""))


async def _start_turn(thread_id: str, text: str, key: str) -> Response:
    """Call the app's thread route in-process: a background turn with a callback."""
    body: dict[str, Any] = {"messages": text or "(empty message)", "background": True}
    answer_url = os.environ.get("ADAPTER_ANSWER_URL", "").strip()
    if answer_url:
        body["callback_url"] = answer_url
    raw = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"idempotency-key", key.encode())]
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/api/threads/{thread_id}/runs",
        "headers": headers,
        "query_string": b"",
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return await routes.handle_thread_run(StarletteRequest(scope, receive), thread_id)


def _verified(request: Request, body: bytes, scheme: str, secret_setting: str) -> bool:
    secret = os.environ.get(secret_setting, "")
    try:
        signatures.verify(dict(request.headers), body, [secret], tolerance_seconds=300, scheme=scheme)
    except InvalidSignature:
        return False
    return bool(secret)


@bp.route(route="adapters/github", methods=["POST"])
async def github_adapter(req: Request) -> Response:
    """A GitHub webhook (issue comments) becomes a background turn; 202 within the deadline."""
    body = await req.body()
    if not _verified(req, body, "github", "GITHUB_WEBHOOK_SECRET"):
        return Response(status_code=401)
    turn = github_turn(json.loads(body)) if req.headers.get("x-github-event") == "issue_comment" else None
    if turn is None:
        return Response(status_code=204)  # not a new comment: nothing to do
    delivery = req.headers.get("x-github-delivery", "").strip()
    if not delivery:  # the only thing a replay is recognised by
        return error_response(InvalidRequest("A GitHub delivery must carry X-GitHub-Delivery."))
    return await _start_turn(*turn, key=delivery)


@bp.route(route="adapters/slack/events", methods=["POST"])
async def slack_events(req: Request) -> Response:
    """Slack's Events API: the URL check, then messages as background turns."""
    body = await req.body()
    if not _verified(req, body, "slack", "SLACK_SIGNING_SECRET"):
        return Response(status_code=401)
    envelope = json.loads(body)
    if envelope.get("type") == "url_verification":
        return Response(json.dumps({"challenge": envelope["challenge"]}), media_type="application/json")
    turn = slack_turn(envelope)
    if turn is None:
        return Response(status_code=200)
    started = await _start_turn(*turn, key=str(envelope["event_id"]))
    # Slack only needs a 2xx within 3 s; the answer comes through the callback.
    return Response(status_code=200 if started.status_code == 202 else started.status_code)


@bp.route(route="adapters/slack/answer", methods=["POST"])
async def slack_answer(req: Request) -> Response:
    """The completion callback: post the agent's reply into the Slack thread it came from."""
    body = await req.body()
    secrets = os.environ.get("CALLBACK_SECRET", "").split()
    try:
        signatures.verify(dict(req.headers), body, secrets, tolerance_seconds=300)
    except InvalidSignature:
        return Response(status_code=401)
    payload = json.loads(body)
    _, _team, channel, *thread = str(payload["thread_id"]).split("-")
    reply = "Sorry, that failed." if payload["status"] != "succeeded" else _reply_text(payload["result"])
    message = {"channel": channel, "thread_ts": ".".join(thread), "text": reply}
    api = os.environ.get("SLACK_API_URL", "https://slack.com/api").rstrip("/")
    token = os.environ.get("SLACK_BOT_TOKEN", "")
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{api}/chat.postMessage", json=message, headers={"authorization": f"Bearer {token}"}) as posted,
    ):
        return Response(status_code=200 if posted.status < 300 else 502)


def _reply_text(result: dict[str, Any] | None) -> str:
    messages = (result or {}).get("messages") or []
    return "\n".join(m["content"] for m in messages) or "(no reply)"
