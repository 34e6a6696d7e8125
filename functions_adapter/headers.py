"""Request headers the background routes read: RFC 7240 ``Prefer`` and SSE ``Last-Event-ID``.

Numbers are read by the one bounded parser (``params``). A value that is not
well formed is 400 ``invalid_request``, not silently ignored, so that a typo such as
``Prefer: wait=30s`` does not quietly answer at once, and ``Last-Event-ID: garbage`` does
not quietly replay a run from its start. (RFC 7240 lets a server ignore a preference it
cannot honour; this one chooses to say so instead.)
"""

from __future__ import annotations

from functions_adapter.params import whole_number
from resumable.base import InvalidRequest

MAX_WAIT_SECONDS = 60
# Bounds far above any real value: a wait is capped at 60 s anyway, and an event ID is
# ``<attempt>.<n>`` with both parts small.
_MAX_WAIT = 10**10 - 1
_MAX_EVENT_ID_PART = 10**12 - 1


def preferences(prefer: str | None) -> dict[str, str]:
    """RFC 7240 ``Prefer`` tokens (``respond-async``, ``wait=10``): names lower-cased, values
    unquoted, parameters after ``;`` dropped; only a token's first instance counts (§2)."""
    found: dict[str, str] = {}
    for part in (prefer or "").split(","):
        token = part.split(";", 1)[0].strip()
        if token:
            name, _, value = token.partition("=")
            found.setdefault(name.strip().lower(), value.strip().strip('"'))
    return found


def wait_seconds(prefer: str | None) -> float:
    """``Prefer: wait=N`` as seconds, capped at ``MAX_WAIT_SECONDS``; 0 without a ``wait``.

    N is delta-seconds (ASCII digits, at most 10 of them); anything else is 400.
    """
    found = preferences(prefer)
    if "wait" not in found:
        return 0.0
    try:
        seconds = whole_number(found["wait"], "wait", low=0, high=_MAX_WAIT, default=0, padded=True)
    except InvalidRequest:
        raise InvalidRequest("'Prefer: wait=N' takes N as a whole number of seconds.") from None
    return float(min(seconds, MAX_WAIT_SECONDS))


def last_event_id(value: str | None) -> tuple[int, int]:
    """``Last-Event-ID: <attempt>.<n>`` as (attempt, n); (0, 0), from the start, when absent
    or empty. Anything else is 400: it is not an ID this app sent."""
    text = (value or "").strip()
    if not text:
        return 0, 0
    attempt, dot, seq = text.partition(".")
    try:
        if not dot:
            raise InvalidRequest("no dot")
        parts = [whole_number(p, "Last-Event-ID", low=0, high=_MAX_EVENT_ID_PART, default=0) for p in (attempt, seq)]
    except InvalidRequest:
        raise InvalidRequest("'Last-Event-ID' must be an event ID this stream sent (<attempt>.<n>).") from None
    return parts[0], parts[1]
