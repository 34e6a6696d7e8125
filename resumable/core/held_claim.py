"""An Idempotency-Key claim held for one run: renewed while the run lives, settled once.

A ``Claim`` (``claim.py``): its renewer is a task of the call's owner, stopped when the
claim settles. Settling (storing the response, or releasing the key) runs in a task of its
own, so a caller cancelled meanwhile (a dropped stream) cannot leave the key locked.
"""

from __future__ import annotations

import asyncio
import logging

from ..base.cancel_safe import finish_even_if_cancelled
from ..base.errors import ClaimLost, ResumeError
from . import idempotency
from .claim import TaskOwner
from .idempotency import IdempotencyStore, KeyClaim

logger = logging.getLogger(__name__)


class HeldClaim:
    """A claim held for one run: renewed while it runs, settled exactly once.

    The run owner calls ``before_commit`` from the save step, then ``succeeded`` or
    ``failed``. Settling runs to its end even if the caller is cancelled meanwhile
    (a client that drops a stream must not leave its key locked).
    """

    # A retry with the key is safe: it resolves an unknown outcome and replays (``commit_outcome``).
    keyed = True

    def __init__(self, store: IdempotencyStore, claim: KeyClaim) -> None:
        self._store = store
        self._claim = claim
        self._lock = asyncio.Lock()  # renewals and the commit write never interleave
        self._renewer: asyncio.Task[None] | None = None
        self._settled = False
        self._saving_planned = False  # the commit is saving the claim's planned checkpoint

    def start(self, tasks: TaskOwner) -> None:
        self._renewer = tasks.create_task(self._renew(), name="idempotency renewer")

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(idempotency.RENEW_SECONDS)
            async with self._lock:
                try:
                    await self._store.renew(self._claim)
                except ClaimLost:
                    logger.error("An Idempotency-Key claim was taken over while its request ran")
                    return
                except ResumeError:
                    logger.warning("Could not renew an Idempotency-Key claim; will try again")

    async def _stop_renewing(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None and renewer is not asyncio.current_task():
            renewer.cancel()
            await asyncio.wait({renewer})

    async def before_commit(
        self, checkpoint_id: str, thread_id: str | None, body: bytes, *, stamp: str = ""
    ) -> dict[str, object] | None:
        """Record what is about to be committed: in the checkpoint itself (the metadata
        returned, to save with it) when the claim planned it, else by a ``committing`` write."""
        carried = self._claim.carries_response(checkpoint_id, thread_id, body)
        if carried is not None:
            self._saving_planned = True
            return carried
        async with self._lock:
            await self._store.committing(self._claim, checkpoint_id, thread_id, body)
        return None

    async def succeeded(self, body: bytes) -> None:
        await finish_even_if_cancelled(self._settle(body))

    async def failed(self, error: BaseException | None = None) -> None:
        await finish_even_if_cancelled(self._settle(None))

    async def _settle(self, body: bytes | None) -> None:
        if self._settled:
            return
        self._settled = True
        await self._stop_renewing()
        if body is not None:
            await self._store.complete(self._claim, 200, body)
        else:
            await self._store.abandon(self._claim, committing=self._saving_planned)
