"""One thread turn, whatever protocol asked for it: plain values in, a plain outcome out.

Each protocol reads its input at its edge (an HTTP body, MCP arguments, a Slack or GitHub
delivery) into a ``TurnCall`` and calls ``call_turn``; the authorizer gate, the turn
factory, the keyed call, the background accept and the run's owner are then the same for
all of them, so a turn commits, refuses, replays and costs the same whichever way it came.
The protocol renders the ``Outcome`` in its own shape. Nothing here takes a request object.

Order, cheapest and least revealing first (the edge has already read the body under its
size cap and checked its signature and media type): authorizer → body shape → idempotency
record → checkpoint → run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_framework import Message

from functions_adapter import keyed_call, thread_access
from functions_adapter.keyed_call import DedupeKey
from functions_adapter.settings import Settings
from functions_adapter.turns import Turn, build_turn
from functions_adapter.wiring import build_service
from resumable.base import validate_id
from resumable.core.claim import Claim
from resumable.core.event_pump import IdleTick
from resumable.core.held_claim import HeldClaim
from resumable.core.idempotency import StoredResponse
from resumable.core.run_owner import RunOwner
from resumable.core.runs import Event

if TYPE_CHECKING:  # the background modules load on a background run's first use (cold start)
    from resumable.background import Accepted, RenderAccepted

# What a protocol that answers from its own record settles instead of the key's claim (None
# without a key): given the turn and that claim, the ``Claim`` the run's owner settles.
ClaimFor = Callable[[Turn, HeldClaim | None], Claim]


@dataclass(frozen=True, slots=True)
class TurnCall:
    """A turn as a protocol hands it over.

    ``body``: the turn in the runs routes' JSON shape (messages, responses, workflow,
    stream/background, callback): what the one parser checks and a background run's record
    keeps. ``origin``: who sends it (``callers.origin_of``): the thread records it and
    a key is scoped to it. ``authorizer_headers``: what the thread authorizer sees; None for
    an adapter's turn, whose sender's signature authenticated it and whose origin confines
    it. ``fingerprint``: what a retry under ``dedupe``'s key must match (needed with a key).
    ``async_preferred``: the caller asked for a background run outside the body (HTTP's
    ``Prefer: respond-async``). ``checkpoint_id``: the ID the turn's checkpoint is saved
    under, chosen at the edge (AG-UI names its reply's messages by it). ``resent``: messages
    the client sends again with its whole history; only those the thread has not seen run.

    Two hooks for a protocol whose answers are its own objects (the Responses API's
    ``resp_`` records): ``render_accepted``, a background accept's body (default: the runs
    routes'), and ``claim_for``, what the run's owner settles around the key's claim (it
    renders and records the answer at the commit point). A ``claim_for`` caller commits
    through its own record, so no checkpoint ID is planned in the key's record. A turn the
    edge already authorized (the Responses route gates its conversation before it reads the
    previous response) passes ``authorizer_headers=None`` too.

    ``callback_format`` and ``callback_params``: who renders the callback of the body's
    ``callback_url`` and what it needs (A2A's push notifications, ``callback_formats``);
    they rest in the run's record beside the URL.
    """

    thread_id: str | None
    origin: str
    body: bytes
    route: str
    authorizer_headers: Mapping[str, str] | None
    dedupe: DedupeKey | None = None
    fingerprint: str = ""
    accept: str | None = None
    async_preferred: bool = False
    checkpoint_id: str | None = None
    resent: tuple[Message, ...] | None = None
    render_accepted: RenderAccepted | None = None
    claim_for: ClaimFor | None = None
    callback_format: str | None = None
    callback_params: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.dedupe is not None and not self.fingerprint:  # a key without it would match any body
            raise ValueError("A keyed TurnCall needs the fingerprint of what the caller sent.")


@dataclass(frozen=True, slots=True)
class Replayed:
    """An earlier identical call's stored answer; nothing ran."""

    stored: StoredResponse
    stream: bool


@dataclass(frozen=True, slots=True)
class Queued:
    """Accepted as a background run (or a replay of the first accept)."""

    accepted: Accepted


@dataclass(frozen=True, slots=True)
class Ran:
    """The turn, owned by its ``RunOwner``: its events (``stream``) or its result's JSON, and
    the claim the owner settles (``TurnCall.claim_for``'s, when given)."""

    events: AsyncIterator[Event | IdleTick] | None = None
    result: bytes | None = None
    claim: Claim | None = None


Outcome = Replayed | Queued | Ran


async def call_turn(call: TurnCall, settings: Settings) -> Outcome:
    """Gate, parse, then queue, replay or run ``call`` (see the module's order)."""
    if call.thread_id is not None:
        if call.authorizer_headers is None:
            validate_id(call.thread_id, kind="thread_id")
        else:
            await thread_access.gate(call.authorizer_headers, settings, call.route, call.thread_id)
    service = build_service(settings)
    turn = build_turn(settings, service, call.body, thread_id=call.thread_id, origin=call.origin, accept=call.accept)
    run_request, runner = turn.request, turn.runner
    if call.checkpoint_id is not None:
        run_request = dataclasses.replace(run_request, final_checkpoint_id=call.checkpoint_id)
    if call.resent is not None:
        run_request = dataclasses.replace(run_request, resent=call.resent)
    if run_request.background or call.async_preferred:
        from functions_adapter import background_submit  # noqa: PLC0415 - on first use (cold start)

        accepted = await background_submit.submit(
            turn,
            record_body=call.body,
            request_fingerprint=call.fingerprint,
            settings=settings,
            dedupe=call.dedupe,
            render=call.render_accepted or background_submit.queued_renderer(turn),
            callback_format=call.callback_format,
            callback_params=call.callback_params,
        )
        return Queued(accepted)
    if run_request.callback_url is not None:
        from functions_adapter.background_submit import refuse_synchronous_callback  # noqa: PLC0415 - on first use

        refuse_synchronous_callback(run_request)
    plan = call.thread_id is None and call.claim_for is None
    keyed = await keyed_call.begin(
        call.fingerprint, settings=settings, service=service, dedupe=call.dedupe, plan_checkpoint=plan
    )
    if isinstance(keyed, StoredResponse):
        return Replayed(keyed, stream=run_request.stream)
    if keyed is not None and keyed.planned_checkpoint_id is not None:  # the checkpoint this call commits
        run_request = dataclasses.replace(run_request, final_checkpoint_id=keyed.planned_checkpoint_id)
    key_claim = None if keyed is None else keyed.claim
    claim = (
        key_claim
        if call.claim_for is None
        else call.claim_for(dataclasses.replace(turn, request=run_request), key_claim)
    )
    owner = RunOwner(runner, run_request, claim=claim)
    if run_request.stream:
        return Ran(events=await owner.stream(keepalive_seconds=settings.sse_keepalive_seconds), claim=claim)
    return Ran(result=await owner.result(), claim=claim)
