"""Play the host's timer listener for the app's timer triggers, in-process.

Each timer function fires on its NCRONTAB schedule in UTC (the host's default without
``WEBSITE_TIME_ZONE``), and at start-up if its binding says ``runOnStartup``. A failed
run is logged and the schedule goes on, as in the host. Catch-up of runs missed while
the process was down (the host's ``useMonitor`` schedule status) is not played.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from datetime import UTC, datetime

from azure.functions.timer import TimerRequest

from devtools.function_host import FunctionHost, Trigger
from devtools.ncrontab import Schedule

logger = logging.getLogger(__name__)


def timer_triggers(host: FunctionHost) -> list[Trigger]:
    """The app's timerTrigger functions, in registration order."""
    return [t for t in host.triggers.values() if t.binding.get("type") == "timerTrigger"]


async def invoke_timer(host: FunctionHost, name: str, *, past_due: bool = False) -> None:
    """Call the timer function ``name`` once, as the host does when its time comes."""
    trigger = host.triggers.get(name)
    if trigger is None or trigger.binding.get("type") != "timerTrigger":
        raise LookupError(f"{name!r} is not a timer-triggered function of this app.")
    result = trigger.handler(TimerRequest(past_due=past_due))
    if inspect.isawaitable(result):
        await result


class TimerRunner:
    """Fires every timer trigger of ``host`` on its schedule until ``stop``."""

    def __init__(self, host: FunctionHost) -> None:
        self._host = host
        # Parsed up front, so a schedule this runner cannot read stops start-up, as in the host.
        self.schedules = {t.name: Schedule.parse(str(t.binding["schedule"])) for t in timer_triggers(host)}
        self._tasks: list[asyncio.Task[None]] = []

    def next_runs(self, now: datetime | None = None) -> dict[str, datetime]:
        """When each timer fires next (UTC)."""
        moment = now or datetime.now(UTC)
        return {name: schedule.next_after(moment) for name, schedule in self.schedules.items()}

    async def _fire(self, name: str) -> None:
        try:
            await invoke_timer(self._host, name)
        except Exception:  # the host logs a failed timer run; the next one still comes
            logger.exception("Timer function %s failed", name)

    async def _loop(self, name: str, schedule: Schedule) -> None:
        if self._host.triggers[name].binding.get("runOnStartup"):
            await self._fire(name)
        while True:
            due = schedule.next_after(datetime.now(UTC))
            # Sleep in short steps: a long sleep would drift if the clock moves.
            while (left := (due - datetime.now(UTC)).total_seconds()) > 0:  # noqa: ASYNC110 - a clock, not an event
                await asyncio.sleep(min(left, 30.0))
            await self._fire(name)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._loop(name, s)) for name, s in self.schedules.items()]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
