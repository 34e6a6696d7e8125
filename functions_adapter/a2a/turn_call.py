"""The seam: every A2A call that runs, reads or stops a turn goes through these functions.

``send_turn`` (a blocking or streamed message: the turn itself, synchronously) and
``start_turn`` (``returnImmediately``: a background run) hand the shared turn call
(``turn_call.call_turn``) plain values, as MCP does, so the authorizer gate, the owner
check, the idempotency scope, the run and the background accept are the same as on every
other entry point; the messageId is the turn's Idempotency-Key. A message without a context
starts a new thread, a random one each time it is sent: what a retry must match then names
no thread (``NEW_CONTEXT``), so the retry finds the first answer by its key alone. ``run_status`` and
``cancel_run`` read and stop a background run through the shared run access
(``background_submit.authorized_run``), which refuses another origin's run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions_adapter import keyed_call
from functions_adapter.a2a import push_format
from functions_adapter.a2a.push_format import Push
from functions_adapter.callers import caller_origin
from functions_adapter.errors import PayloadTooLarge
from functions_adapter.settings import Settings
from functions_adapter.sse import MEDIA_TYPE
from functions_adapter.turn_call import Outcome, Queued, Ran, Replayed, TurnCall, call_turn
from functions_adapter.wiring import build_service, idempotency_store, load_settings
from resumable.base import strict_json
from resumable.core.idempotency import StoredResponse, fingerprint
from resumable.threads.ownership import Caller

_ROUTE = "threads/{thread_id}/runs"
# What a context-less message's fingerprint names in place of its thread's runs route: each
# try draws a thread of its own, so a retry is the same request whichever thread it drew.
NEW_CONTEXT = "a2a:new-context"


@dataclass(frozen=True, slots=True)
class TurnInput:
    """One message's turn as the seam takes it: its thread, workflow, text, answers to pending
    requests, and ``key`` (the messageId), its Idempotency-Key. ``new_context``: the message
    named no context (nor task), so ``thread_id`` is a new thread drawn for this try."""

    thread_id: str
    workflow: str
    message: str | None
    responses: dict[str, Any] | None
    key: str
    new_context: bool = False


def _call(
    headers: Mapping[str, str],
    settings: Settings,
    turn: TurnInput,
    *,
    answers: str | None = None,
    background: bool = False,
    callback_url: str | None = None,
    **options: Any,
) -> TurnCall:
    """The turn in the runs routes' shape, its key scoped to the caller's origin; what a retry
    must match names the task it answers (``answers``), if any, and the thread only if the
    message named one (``TurnInput.new_context``)."""
    fields = {
        "messages": turn.message,
        "responses": turn.responses,
        "background": background or None,
        "workflow": turn.workflow,
        "callback_url": callback_url,
    }
    body = strict_json.dumps({k: v for k, v in fields.items() if v is not None})
    if len(body) > settings.max_request_bytes:
        raise PayloadTooLarge(f"The message is over the {settings.max_request_bytes}-byte limit.")
    origin = caller_origin(headers)
    path = NEW_CONTEXT if turn.new_context else f"/api/threads/{turn.thread_id}/runs"
    path += "" if answers is None else f"#task={answers}"
    return TurnCall(
        thread_id=turn.thread_id,
        origin=origin,
        body=body,
        route=_ROUTE,
        authorizer_headers=headers,
        dedupe=_dedupe(headers, turn.key, origin, settings),
        fingerprint=fingerprint("POST", path, body),
        **options,
    )


def _dedupe(
    headers: Mapping[str, str], message_id: str, origin: str, settings: Settings
) -> keyed_call.DedupeKey | None:
    """The messageId as the Idempotency-Key, whatever else the request carries: the headers
    ``IDEMPOTENCY_HEADERS`` lists key the other routes only (a proxy's fresh request ID would
    run a retried message again, a client's constant header replay one message for another).
    A deployment that keys a signed delivery by its verified webhook-id keys it so here too,
    as on every route: a captured delivery replays."""
    signed = settings.webhook_secrets and settings.webhook_scheme == "standard"
    only_key = headers if signed else {keyed_call.IDEMPOTENCY_KEY: message_id}
    return keyed_call.dedupe_key(only_key, origin, settings, always_key=True)


async def send_turn(
    headers: Mapping[str, str], turn: TurnInput, *, checkpoint_id: str, answers: str | None, stream: bool
) -> Ran | Replayed:
    """Run the turn now, as ``POST /api/threads/{id}/runs`` with an Idempotency-Key does (the
    same operations), saved as ``checkpoint_id``; ``answers``: the task this turn continues.
    A retried message replays the first answer and runs nothing."""
    settings = load_settings()
    accept = MEDIA_TYPE if stream else None  # not in the body: a retry of either kind is the same request
    call = _call(headers, settings, turn, answers=answers, accept=accept, checkpoint_id=checkpoint_id)
    outcome: Outcome = await call_turn(call, settings)
    if isinstance(outcome, Queued):  # the body asks for no background run
        raise TypeError("A synchronous A2A turn was queued.")
    return outcome


async def replayed(headers: Mapping[str, str], turn: TurnInput, *, answers: str) -> StoredResponse | None:
    """The stored answer of an earlier identical message (``send_turn``'s), if there is one:
    read before a refusal, so a retried answer replays even once its task moved on. Writes nothing."""
    settings = load_settings()
    call = _call(headers, settings, turn, answers=answers)
    dedupe = call.dedupe
    if dedupe is None:  # never: an A2A turn is always keyed
        return None
    store = idempotency_store(settings, build_service(settings), ttl_seconds=dedupe.ttl_seconds, scope=dedupe.scope)
    return await store.peek(dedupe.key, call.fingerprint, kind=dedupe.kind)


async def start_turn(headers: Mapping[str, str], turn: TurnInput, *, push: Push | None = None) -> dict[str, Any]:
    """Queue the turn as a background run; a retried message answers the first run instead of
    running again. ``push`` (a push config's URL and parameters, ``push_format``) is the run's callback."""
    settings = load_settings()
    call = _call(
        headers,
        settings,
        turn,
        background=True,
        callback_url=None if push is None else push[0],
        callback_format=None if push is None else push_format.FORMAT,
        callback_params={} if push is None else push[1],
    )
    outcome = await call_turn(call, settings)
    if not isinstance(outcome, Queued):  # the body asks for a background run: never a synchronous one
        raise TypeError("A2A background turns run in the background.")
    return json.loads(outcome.accepted.body)


def _background() -> Any:
    """The background-run modules, on first use (cold start: a synchronous task never loads them)."""
    from functions_adapter import background_submit  # noqa: PLC0415

    return background_submit


async def run_status(headers: Mapping[str, str], run_id: str, *, wait_seconds: int = 0) -> dict[str, Any]:
    """``GET /api/runs/{id}``'s document, after up to ``wait_seconds`` for the run to change
    (another origin's run: ``Forbidden``, as on that route)."""
    settings = load_settings()
    runs = _background()
    found = await runs.authorized_run(settings, run_id, Caller(caller_origin(headers)), headers, "runs/{run_id}")
    return await runs.status_json(settings, await runs.run_control(settings).wait(found, wait_seconds))


async def cancel_run(headers: Mapping[str, str], run_id: str) -> dict[str, Any]:
    """``POST /api/runs/{id}/cancel``'s document."""
    settings = load_settings()
    runs = _background()
    found = await runs.authorized_run(settings, run_id, Caller(caller_origin(headers)), headers, "runs/{run_id}/cancel")
    return await runs.status_json(settings, await runs.run_control(settings).cancel(found))
