"""What a failure after a turn's commit point turned out to be: decided once, by the turn
pipeline (``RunOwner``), for every protocol that runs a call to its answer (the runs
routes, the Responses routes, MCP tools).

Before the commit point nothing committed; a refusal the library reports as such (a lost
race, a refused save) committed nothing either. A storage failure, or anything
unexpected, after the commit point may hide a commit (a pointer swap whose answer was lost
while storage kept failing): the one answer to "did it commit?" (``Runner.is_committed``)
is asked, and

* committed: the call succeeded after all, and its claim settles with the response;
* not committed: the error stands (a retry is safe, and says so);
* unknown (the check failed too): ``OutcomeUnknown``, which no client retries on its own,
  since a blind retry could apply the turn twice; unless the call holds an Idempotency-Key,
  whose retry is safe: it resolves the outcome and replays.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..base.errors import OutcomeUnknown, ResumeError, StorageUnavailable
from .claim import Claim, TaskOwner

logger = logging.getLogger(__name__)
COMMITTED, NOT_COMMITTED, UNKNOWN = "committed", "not_committed", "unknown"
# Failures after the commit point that may hide a commit (the rest are refusals).
_CHECKED = frozenset({StorageUnavailable.code, ResumeError.code})
IsCommitted = Callable[[str, str | None], Awaitable[bool]]


class CommitOutcome:
    """A ``Claim`` around the call's own claim (or none): it notes what the call is about
    to commit, and on failure resolves whether it did before the claim settles.

    The inner claim settles with the response when the call committed after all, else with
    the error (``OutcomeUnknown`` when nobody can tell). A claim may shape that error itself
    (``unknown()``: the Responses routes name the response and its conversation) and say
    whether it holds an Idempotency-Key (``keyed``).
    """

    def __init__(self, claim: Claim | None, is_committed: IsCommitted) -> None:
        self.inner = claim
        self._is_committed = is_committed
        self.intent: tuple[str, str | None, bytes] | None = None  # checkpoint, thread, response
        self.outcome: str | None = None  # after a failure: COMMITTED, NOT_COMMITTED or UNKNOWN
        self._withdrawn = False  # a thread turn's save failed: its pointer swap never ran

    @property
    def keyed(self) -> bool:
        return bool(getattr(self.inner, "keyed", False))

    def start(self, tasks: TaskOwner) -> None:
        if self.inner is not None:
            self.inner.start(tasks)

    async def before_commit(
        self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = ""
    ) -> Mapping[str, object] | None:
        carried = None
        if self.inner is not None:  # raising refuses the commit: no intent, nothing committed
            carried = await self.inner.before_commit(checkpoint_id, thread_id, body, stamp=stamp)
        self.intent = (checkpoint_id, thread_id, body)
        return carried

    # The run's commit hook (``runs.CommitHook``) is this object.
    __call__ = before_commit

    def not_committed(self) -> None:
        """The runner knows nothing committed (a thread turn's save failed, or no write of the
        commit reached storage: ``storage.failures.never_sent``)."""
        self._withdrawn = True

    async def succeeded(self, body: bytes) -> None:
        if self.inner is not None:
            await self.inner.succeeded(body)

    async def failed(self, error: BaseException | None = None) -> None:
        self.outcome = await self._resolve(error)
        if self.inner is None:
            return
        if self.outcome == COMMITTED and self.intent is not None:
            await self.inner.succeeded(self.intent[2])
        else:
            await self.inner.failed(self.unknown() if self.outcome == UNKNOWN else error)

    async def _resolve(self, error: BaseException | None) -> str:
        if self.intent is None or self._withdrawn:
            return NOT_COMMITTED
        code = getattr(error, "code", None)  # a ResumeError's, or a stream's error event's
        if isinstance(code, str) and code not in _CHECKED:
            return NOT_COMMITTED
        try:
            committed = await self._is_committed(self.intent[0], self.intent[1])
        except Exception:  # whatever stopped the check, the outcome is not known
            logger.warning("Storage failed at the commit of %s, and whether it committed is unknown", self.intent[0])
            return UNKNOWN
        return COMMITTED if committed else NOT_COMMITTED

    def reported(self, error: BaseException) -> BaseException | None:
        """What a failed call is answered with: None when it committed after all (answer
        ``response``); ``OutcomeUnknown`` when nobody can tell and no key makes a retry safe."""
        if self.outcome == COMMITTED and self.intent is not None:
            return None
        if self.outcome == UNKNOWN and not self.keyed:
            return self.unknown()
        return error

    @property
    def response(self) -> bytes:
        """The response of a call that committed after all."""
        assert self.intent is not None  # only after ``reported`` returned None
        return self.intent[2]

    def unknown(self) -> ResumeError:
        shaped = getattr(self.inner, "unknown", None)
        if callable(shaped):
            return shaped()  # type: ignore[no-any-return]
        checkpoint_id, thread_id, _ = self.intent or ("", None, b"")
        details: dict[str, Any] = {"checkpoint_id": checkpoint_id, "thread_id": thread_id}
        return OutcomeUnknown(
            "Storage failed while this turn was being committed, and whether it was applied cannot be"
            " told yet. Do not send it again blindly: once storage answers, it was applied if"
            " details.checkpoint_id is the thread's checkpoint or in its lineage (GET"
            " /api/threads/{id}/history), or, without a thread, if GET /api/checkpoints/{id} finds it."
            " Send an Idempotency-Key to make such a retry safe.",
            details=details,
        )


__all__ = ["COMMITTED", "NOT_COMMITTED", "UNKNOWN", "CommitOutcome"]
