"""Slack's Events API in, replies out: ``/api/adapters/slack/events`` and ``.../answer``.

Registered when ``SLACK_SIGNING_SECRET`` is set.

* ``POST /api/adapters/slack/events``: answers Slack's URL check, then turns a user's
  ``app_mention`` or ``message`` into a background turn on
  ``slack.<team>.<channel>.<thread ts>``, keyed by its ``event_id`` (Slack's retries carry
  the same one, with ``X-Slack-Retry-Num``), and answers 200 at once, inside Slack's 3 s.
* ``POST /api/adapters/slack/answer``: the completion callback (signed with
  ``CALLBACK_SECRET``); it posts the reply into the Slack thread with ``chat.postMessage``
  as the bot (``SLACK_BOT_TOKEN``), once per callback (``slack_answer``).

Both routes are anonymous (no function key): Slack's signature and the callback's are
their authentication, checked before the body is parsed or storage is touched.
"""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response

from functions_adapter.request_trace import traced
from functions_adapter.thread_names import derived_thread_id
from functions_adapter.webhooks import slack_answer as slack_answer_route
from functions_adapter.webhooks.common import Delivery, parsed, start_turn, verified_body
from resumable.base import InvalidRequest

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
    origin = slack_answer_route.channel_origin(team, channel)
    return Delivery(derived_thread_id("slack", team, channel, ts), str(event.get("text", "")), origin)


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
    started = await start_turn(turn, key=event_id)
    # Slack only needs a 200 within 3 s; the answer comes through the callback.
    return Response(status_code=200) if started.status_code == 202 else started


@bp.route(route="adapters/slack/events", methods=["POST"], auth_level=func.AuthLevel.ANONYMOUS)
async def slack_events(req: Request) -> Response:
    """Slack's Events API: the URL check, then messages as background turns."""
    return await traced(req, "adapters/slack/events", lambda: _event(req))


@bp.route(route="adapters/slack/answer", methods=["POST"], auth_level=func.AuthLevel.ANONYMOUS)
async def slack_answer(req: Request) -> Response:
    """The completion callback: post the agent's reply into the Slack thread it came from."""
    return await traced(req, "adapters/slack/answer", lambda: slack_answer_route.answer(req))
