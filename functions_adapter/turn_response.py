"""A turn's outcome as HTTP answers it, for the runs routes and the webhook adapters (whose
senders get the runs route's answer): a replay, a 202 with its links (or its replay), a
stream of server-sent events, or the result's JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Response

from functions_adapter.http_responses import JSON_MEDIA_TYPE, event_stream, replay
from functions_adapter.turn_call import Outcome, Queued, Replayed

if TYPE_CHECKING:  # the background modules load on a background run's first use (cold start)
    from resumable.background import Accepted


def render_outcome(outcome: Outcome, *, async_preferred: bool) -> Response:
    """A turn's outcome as the runs routes answer it: a replay, a 202 (or its replay), a
    stream or the result's JSON."""
    if isinstance(outcome, Replayed):
        return replay(outcome.stored, stream=outcome.stream)
    if isinstance(outcome, Queued):
        return accepted_response(outcome.accepted, async_preferred=async_preferred)
    if outcome.events is not None:
        return event_stream(outcome.events)
    return Response(outcome.result, media_type=JSON_MEDIA_TYPE)


def accepted_response(accepted: Accepted, *, async_preferred: bool) -> Response:
    """A 202 with its links (first or replayed), or a synchronous call's replayed answer."""
    if accepted.status != 202 or accepted.run_id is None:
        return Response(accepted.body, status_code=accepted.status, media_type=JSON_MEDIA_TYPE)
    headers = {"Location": f"/api/runs/{accepted.run_id}", "Retry-After": "1"}
    if async_preferred:
        headers["Preference-Applied"] = "respond-async"
    return Response(accepted.body, status_code=202, media_type=JSON_MEDIA_TYPE, headers=headers)
