"""The loop-lag measurement shared by ``loop_lag.py`` (4b) and ``sustained.py`` (4c).

``Ticker`` sleeps ``TICK_S`` at a time and records how late each wake-up is: the worst
gap is how long ``/api/health`` (or any other request on the worker) would have waited.
``GcPauses`` times the collector's passes. ``StallSampler`` (``--stalls``) says *why* the
loop was late: a watchdog thread that, while the ticker's last wake-up is older than a
threshold, samples the loop thread's stack (``sys._current_frames``) and reads each
thread's CPU clock, so a stall splits into CPU the loop itself spent (and where), CPU
other threads of the process spent (the codec thread holding the GIL), collector time,
and time nobody here ran (the process waiting for a core). The stacks are a biased sample:
the watchdog needs the GIL to take one, so it lands more often where the loop thread let go
of it (a syscall such as ``os.urandom``, a socket send); the CPU split is exact. For where
the loop's CPU goes, a sampling profiler from outside (py-spy) is the unbiased view.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

TICK_S = 0.005


def status_mib(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process. Not ``ru_maxrss``: Linux keeps
    that across ``execve``, so a child would report its parent's peak if it was higher."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Ticker:
    """Sleeps ``TICK_S`` in a loop; the worst lateness of a wake-up is the loop lag.

    ``on_tick`` runs at each wake-up (an RSS sample, the stall sampler's heartbeat).
    """

    def __init__(self, on_tick: Callable[[], None] | None = None) -> None:
        self.worst_ms = 0.0
        self.ticks = 0
        self._on_tick = on_tick
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - started - TICK_S) * 1000)
            self.ticks += 1
            if self._on_tick is not None:
                self._on_tick()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class GcPauses:
    """The longest garbage-collector pause while attached (``gc.callbacks``): a pause holds
    the GIL, so it shows up as loop lag that no callback accounts for."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self.total_ms = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            pause = (time.perf_counter() - self._started) * 1000
            self.longest_ms = max(self.longest_ms, pause)
            self.total_ms += pause

    def detach(self) -> None:
        gc.callbacks.remove(self._callback)


def _thread_cpu_s() -> dict[int, float]:
    """Each live thread's CPU time, by ident (Linux: one CPU clock per thread)."""
    times = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        with contextlib.suppress(OSError, AttributeError):
            times[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return times


def _where(frame: Any, depth: int = 40) -> tuple[str, ...]:
    stack = []
    while frame is not None and len(stack) < depth:
        code = frame.f_code
        stack.append(f"{code.co_filename.rsplit('site-packages/', 1)[-1]}:{code.co_name}")
        frame = frame.f_back
    return tuple(stack)


class StallSampler:
    """While the loop's heartbeat is older than ``threshold_s``, sample the loop thread.

    Call ``beat`` from the loop (the ticker's ``on_tick``). Each stall (a gap between beats
    over the threshold) records its length, the CPU each thread spent in it, and the loop
    thread's stacks sampled every ``interval_s``.
    """

    def __init__(self, threshold_s: float = 0.02, interval_s: float = 0.001) -> None:
        self.threshold_s = threshold_s
        self.interval_s = interval_s
        self.stalls: list[dict[str, Any]] = []
        self._loop_ident = threading.get_ident()
        self._last = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-sampler", daemon=True)
        self._gc: GcPauses | None = None

    def beat(self) -> None:
        self._last = time.perf_counter()

    def start(self) -> None:
        self._gc = GcPauses()
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._gc is not None:
            self._gc.detach()

    def _watch(self) -> None:
        assert self._gc is not None
        me = threading.get_ident()
        while not self._stop.wait(self.interval_s):
            beat = self._last
            if time.perf_counter() - beat < self.threshold_s:
                continue
            cpu_before, gc_before = _thread_cpu_s(), self._gc.total_ms
            samples: Counter[tuple[str, ...]] = Counter()
            while self._last == beat and not self._stop.wait(self.interval_s):
                frame = sys._current_frames().get(self._loop_ident)
                if frame is not None:
                    samples[_where(frame)] += 1
            cpu_after = _thread_cpu_s()
            spent = {
                ident: cpu_after[ident] - cpu_before.get(ident, cpu_after[ident]) for ident in cpu_after if ident != me
            }
            names = {t.ident: t.name for t in threading.enumerate()}
            self.stalls.append(
                {
                    "ms": (self._last - beat) * 1000,
                    "loop_cpu_ms": spent.pop(self._loop_ident, 0.0) * 1000,
                    "other_cpu_ms": {names.get(i, str(i)): s * 1000 for i, s in spent.items() if s > 0},
                    "gc_ms": self._gc.total_ms - gc_before,
                    "samples": samples,
                }
            )


def summarize(stalls: list[dict[str, Any]], over_ms: float = 0.0, top: int = 12) -> dict[str, Any]:
    """Stalls longer than ``over_ms``: their CPU split and the loop's hottest frames (by
    leaf, and by ``_owner``: the innermost frame of the framework, the SDK or this repo)."""
    stalls = [s for s in stalls if s["ms"] > over_ms]
    leaves: Counter[str] = Counter()
    owners: Counter[str] = Counter()
    for stall in stalls:
        for stack, count in stall["samples"].items():
            leaves[stack[0]] += count
            owners[_owner(stack)] += count
    total = sum(leaves.values()) or 1
    return {
        "stalls": len(stalls),
        "wall_ms": round(sum(s["ms"] for s in stalls), 1),
        "loop_cpu_ms": round(sum(s["loop_cpu_ms"] for s in stalls), 1),
        "other_cpu_ms": round(sum(sum(s["other_cpu_ms"].values()) for s in stalls), 1),
        "gc_ms": round(sum(s["gc_ms"] for s in stalls), 1),
        "leaves": [(name, round(100 * n / total)) for name, n in leaves.most_common(top)],
        "owners": [(name, round(100 * n / total)) for name, n in owners.most_common(top)],
    }


_OURS = ("/resumable/", "/functions_adapter/", "/bench/", "/devtools/", "function_app.py")


def _owner(stack: tuple[str, ...]) -> str:
    """The innermost frame that names whose work it is: the framework's, the storage SDK's,
    or this repository's (its modules and the benchmark's workflow)."""
    for frame in stack:
        if frame.startswith(("agent_framework/", "azure/", "aiohttp/", "starlette/", "json/")):
            return frame
        if any(part in frame for part in _OURS):
            return frame
    return stack[0] if stack else "?"
