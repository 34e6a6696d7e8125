"""The scale-out drill's workload: which turns are keyed or in the background, which threads
are deleted mid-way, and what each turn says (its thread's ID and its index, so a turn's text
names its thread and the verdict can search every blob for a deleted thread)."""

from __future__ import annotations

import random
from dataclasses import dataclass


def text(thread: str, turn: int) -> str:
    return f"{thread} turn {turn}"


@dataclass(frozen=True)
class Turn:
    keyed: bool
    background: bool
    retry: str  # for a keyed turn: "again" (resent after the answer) or "concurrent" (two at once)


@dataclass(frozen=True)
class ThreadPlan:
    thread: str
    turns: tuple[Turn, ...]
    delete_after: int | None  # the turn after which the thread is deleted (None: it stays)

    @property
    def expected(self) -> list[str]:
        return [text(self.thread, i) for i in range(len(self.turns))]


def plan(
    threads: int, turns: int, *, keyed: float, background: float, deletes: int, seed: int, tag: str
) -> list[ThreadPlan]:
    """Which turns are keyed or in the background, and which threads are deleted, seeded."""
    rng = random.Random(seed)  # a workload mix, not a secret
    doomed = set(rng.sample(range(threads), min(deletes, threads)))
    plans = []
    for n in range(threads):
        kinds = [
            Turn(rng.random() < keyed, rng.random() < background, rng.choice(("again", "concurrent")))
            for _ in range(turns)
        ]
        at = None
        if n in doomed:  # deleted right after a background turn, while it may still run
            at = rng.randrange(max(turns - 1, 1))
            kinds[at] = Turn(kinds[at].keyed, True, kinds[at].retry)
        plans.append(ThreadPlan(f"so-{tag}-{n:05d}", tuple(kinds), at))
    return plans


__all__ = ["ThreadPlan", "Turn", "plan", "text"]
