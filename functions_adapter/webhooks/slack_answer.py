"""``POST /api/adapters/slack/answer``: a Slack turn's completion callback, posted once.

The callback is signed with ``CALLBACK_SECRET`` and carries the same ``webhook-id`` on
every attempt. A redelivery (our answer was lost, the sender retried) must not post the
reply twice, so the route claims that ``webhook-id`` in the app's idempotency records
(``IdempotencyStore``, as the thread routes do) and remembers only a post Slack accepted:
a refused or failed post releases the claim, and the callback's retry posts again.

It posts only the reply of a run that the Slack channel itself started: the run's record
(written when the run was accepted) must name this thread and the channel's origin
(``slack:<team>:<channel>``). A thread's name proves nothing: any API caller may run a turn
on a thread called ``slack.<team>.<channel>.<ts>`` with this route as its callback.
"""

from __future__ import annotations

import os
from typing import Any

import aiohttp
from fastapi import Request, Response

from functions_adapter.http_responses import json_response
from functions_adapter.thread_names import origin_for, parts_of
from functions_adapter.webhooks.common import parsed, secrets, verified_body
from functions_adapter.wiring import build_service, container_for, idempotency_store, load_settings
from resumable.background import RunRecords
from resumable.base import InvalidRequest, validate_id
from resumable.base.cancel_safe import finish_even_if_cancelled
from resumable.core.idempotency import StoredResponse, fingerprint

ROUTE = "/api/adapters/slack/answer"
# The namespace of this route's webhook-ids: a webhook-id sent to the thread routes never
# matches a callback's.
KEY_KIND = "slack-answer"


async def answer(req: Request) -> Response:
    body = await verified_body(req, "CALLBACK_SECRET", "standard")
    payload = parsed(body)
    thread = payload.get("thread_id")
    parts = parts_of(thread, "slack") if isinstance(thread, str) else None
    if parts is None or len(parts) != 3:
        # Another adapter's turn (ADAPTER_ANSWER_URL serves both): 410 stops its retries.
        return _error(410, "not_a_slack_thread", "This route answers turns that Slack started.")
    team, channel, thread_ts = parts
    if not await _started_there(payload.get("run_id"), thread, channel_origin(team, channel)):
        # Not a turn that channel started (an API caller's run on a thread named like one,
        # say): nothing is posted, and 410 stops the callback's retries.
        return _error(410, "not_a_slack_turn", "This route answers only turns the Slack channel started.")
    token = secrets("SLACK_BOT_TOKEN")[0]
    reply = "Sorry, that failed." if payload.get("status") != "succeeded" else _reply_text(payload.get("result"))
    settings = load_settings()
    ttl = max(settings.idempotency_ttl_seconds, settings.callback_max_seconds)
    store = idempotency_store(settings, build_service(settings), ttl_seconds=ttl)
    begun = await store.begin(req.headers["webhook-id"], fingerprint("POST", ROUTE, body), kind=KEY_KIND)
    if isinstance(begun, StoredResponse):
        return Response(status_code=begun.status)  # posted already: a redelivery
    try:
        posted = await _post(token, {"channel": channel, "thread_ts": thread_ts, "text": reply})
    except BaseException:
        await finish_even_if_cancelled(store.release(begun))
        raise
    if posted.status_code == 200:
        await finish_even_if_cancelled(store.complete(begun, 200, b""))
    else:
        await finish_even_if_cancelled(store.release(begun))
    return posted


def channel_origin(team: str, channel: str) -> str:
    """Who a Slack turn is from: its channel (in its workspace), the only place its reply goes."""
    return origin_for("slack", team, channel)


async def _started_there(run_id: object, thread_id: str, origin: str) -> bool:
    """Whether run ``run_id`` on ``thread_id`` was started from ``origin``, as its record
    (written at the accept, never from the payload) says."""
    if not isinstance(run_id, str):
        return False
    try:
        validate_id(run_id, kind="run_id")
    except InvalidRequest:
        return False
    found = await RunRecords(container_for(load_settings())).get(run_id)
    return found is not None and found.value.thread_id == thread_id and found.value.origin == origin


async def _post(token: str, message: dict[str, str]) -> Response:
    """``chat.postMessage`` as the bot: 200 once Slack posted, else 502 (the callback retries)."""
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


def _reply_text(result: dict[str, Any] | None) -> str:
    messages = (result or {}).get("messages") or []
    return "\n".join(m["content"] for m in messages) or "(no reply)"
