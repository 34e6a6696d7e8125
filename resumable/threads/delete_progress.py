"""Where a thread deletion stands, kept in its deleting pointer so a repeat call goes on.

A delete scans the container (checkpoints, then idempotency records, background runs and
callback records) a listing page at a time; after each page it writes the page's continuation token
here by compare-and-swap. A later call resumes from it instead of starting over, so a
short budget still finishes in a bounded number of calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# In order; ``finish`` removes the pending list, the metadata and, last, the pointer.
PHASES = ("checkpoints", "idempotency", "runs", "callbacks", "finish")
# Azure's continuation tokens (NextMarker) are short opaque ASCII strings; anything else
# in a pointer was not written by this app.
MAX_TOKEN_CHARS = 4096


class BadProgress(ValueError):
    """The pointer's ``deletion`` is not a progress record this app wrote."""


@dataclass(frozen=True, slots=True)
class DeleteProgress:
    phase: str = PHASES[0]
    # The listing's continuation token within the phase (None: its first page).
    token: str | None = None
    # Whether the thread had anything at all; a delete that found nothing ends 404.
    found: bool = False

    def after_page(self, next_token: str | None, *, found: bool) -> DeleteProgress:
        """The progress once a page is done: the next page, or the next phase's first."""
        found = self.found or found
        if next_token is not None:
            return DeleteProgress(self.phase, next_token, found)
        return DeleteProgress(PHASES[PHASES.index(self.phase) + 1], None, found)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "token": self.token, "found": self.found}

    @classmethod
    def parse(cls, data: object) -> DeleteProgress:
        """Strictly: exactly the three keys, a known phase, a printable ASCII token or null."""
        if not isinstance(data, Mapping) or set(data) != {"phase", "token", "found"}:
            raise BadProgress("deletion is not an object of phase, token and found")
        phase, token, found = data["phase"], data["token"], data["found"]
        if phase not in PHASES:
            raise BadProgress("deletion.phase is not a known phase")
        if token is not None and not (
            isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS and token.isascii() and token.isprintable()
        ):
            raise BadProgress("deletion.token is not a continuation token")
        if type(found) is not bool:
            raise BadProgress("deletion.found is not true or false")
        return cls(phase, token, found)
