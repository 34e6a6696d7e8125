"""Slack's Events API in, replies out: ``/api/adapters/slack/events`` and ``.../answer``.

Registered when ``SLACK_SIGNING_SECRET`` is set.

* ``POST /api/adapters/slack/events``: answers Slack's URL check, then turns a user's
  ``app_mention`` or ``message`` into a background turn on
  ``slack-<team>-<channel>-<thread ts>``, keyed by its ``event_id`` (Slack's retries carry
  the same one, with ``X-Slack-Retry-Num``), and answers 200 at once, inside Slack's 3 s.
* ``POST /api/adapters/slack/answer``: the completion callback (signed with
  ``CALLBACK_SECRET``); it posts the reply into the Slack thread with ``chat.postMessage``
  as the bot (``SLACK_BOT_TOKEN``).

Both routes are anonymous (no function key): Slack's signature and the callback's are
their authentication, checked before the body is parsed or storage is touched.
"""

from __future__ import annotations

import json
import os
from typing import Any

import aiohttp
import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response

from resumable.base.errors import InvalidRequest

from ..request_trace import traced
from ..responses import json_response
from ..thread_names import derived_thread_id, escape, parts_of
from .common import Delivery, parsed, secrets, start_turn, verified_body

bp = func.Blueprint()


def slack_turn(envelope: dict[str, Any]) -> Delivery | None:
    """A user's message or mention as a turn on ``slack.<team>.<channel>.<thread ts>``
    (``thread_names``: injective), from ``slack:<team>:<channel>``; bots (ourselves too)
    are ignored."""
    event = envelope.get("event") or {}
    if not isinstance(event, dict):
        return None
    if event.get("type") not in ("message", "app_mention") or event.get("bot_id") or event.get("subtype"):
        return None
    try:
        team, channel, ts = envelope["team_id"], event["channel"], event.get("thread_ts") or event["ts"]
    except KeyError:
        raise InvalidRequest("A Slack message event needs team_id, channel and ts.") from None
    if not all(isinstance(value, str) for value in (team, channel, ts)):
        raise InvalidRequest("A Slack message event's team_id, channel and ts must be strings.")
    text = str(event.get("text", ""))
    return Delivery(derived_thread_id("slack", team, channel, ts), text, origin(team, channel))


def origin(team: str, channel: str) -> str:
    """Who a Slack turn is from: the channel (its workspace's), the only place its reply goes."""
    return f"slack:{escape(team)}:{escape(channel)}"


async def _event(req: Request) -> Response:
    body = await verified_body(req, "SLACK_SIGNING_SECRET", "slack")
    envelope = parsed(body)
    if envelope.get("type") == "url_verification":
        return Response(json.dumps({"challenge": envelope.get("challenge")}), media_type="application/json")
    turn = slack_turn(envelope)
    if turn is None:
        return Response(status_code=200)
    event_id = str(envelope.get("event_id") or "")
    if not event_id:
        raise InvalidRequest("A Slack event must carry its event_id.")
    started = await start_turn(turn.thread, turn.text, key=event_id)
    # Slack only needs a 200 within 3 s; the answer comes through the callback.
    return Response(status_code=200) if started.status_code == 202 else started


@bp.route(route="adapters/slack/events", methods=["POST"], auth_level=func.AuthLevel.ANONYMOUS)
async def slack_events(req: Request) -> Response:
    """Slack's Events API: the URL check, then messages as background turns."""
    return await traced(req, "adapters/slack/events", lambda: _event(req))


async def _answer(req: Request) -> Response:
    body = await verified_body(req, "CALLBACK_SECRET", "standard")
    payload = parsed(body)
    thread = payload.get("thread_id")
    parts = parts_of(thread, "slack") if isinstance(thread, str) else None
    if parts is None or len(parts) != 3:
        # Another adapter's turn (ADAPTER_ANSWER_URL serves both): 410 stops its retries.
        return _error(410, "not_a_slack_thread", "This route answers turns that Slack started.")
    _team, channel, thread_ts = parts
    token = secrets("SLACK_BOT_TOKEN")[0]
    reply = "Sorry, that failed." if payload.get("status") != "succeeded" else _reply_text(payload.get("result"))
    message = {"channel": channel, "thread_ts": thread_ts, "text": reply}
    api = os.environ.get("SLACK_API_URL", "").strip().rstrip("/") or "https://slack.com/api"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=8)) as session,
            session.post(
                f"{api}/chat.postMessage", json=message, headers={"authorization": f"Bearer {token}"}
            ) as posted,
        ):
            answer = await posted.json(content_type=None) if posted.status < 300 else None
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return _error(502, "slack_unreachable", f"Slack's API did not answer: {type(exc).__name__}.")
    # Slack answers 200 with "ok": false when it did not post; anything but a 2xx here
    # has the callback retried (and shows in GET /api/runs/{id}).
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        refused = answer.get("error") if isinstance(answer, dict) else f"HTTP {posted.status}"
        return _error(502, "slack_refused", f"Slack did not post the reply: {refused}.")
    return Response(status_code=200)


def _error(status: int, code: str, message: str) -> Response:
    return json_response({"error": {"code": code, "message": message}}, status)


@bp.route(route="adapters/slack/answer", methods=["POST"], auth_level=func.AuthLevel.ANONYMOUS)
async def slack_answer(req: Request) -> Response:
    """The completion callback: post the agent's reply into the Slack thread it came from."""
    return await traced(req, "adapters/slack/answer", lambda: _answer(req))


def _reply_text(result: dict[str, Any] | None) -> str:
    messages = (result or {}).get("messages") or []
    return "\n".join(m["content"] for m in messages) or "(no reply)"
