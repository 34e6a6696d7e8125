"""Count Blob Storage operations where they leave the client, not by guessing."""

from __future__ import annotations

from collections import Counter
from typing import Any


class OperationCounter:
    """A ``raw_request_hook`` for the storage SDK: tallies each request sent, by method.

    The hook runs inside the retry loop, so a retried operation counts once per
    attempt, as storage bills it.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []

    def __call__(self, request: Any) -> None:
        method = request.http_request.method
        self.counts[method] += 1
        self.log.append((method, request.http_request.url.split("?")[0]))

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        self.counts.clear()
        self.log.clear()
