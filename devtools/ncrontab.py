"""NCRONTAB schedules, the six-field form timer triggers use: ``sec min hour day month dow``.

Enough of the host's syntax for a local server to fire a timer when the host would:
numbers, ``*``, lists (``1,15``), ranges (``1-5``) and steps (``*/10``, ``0-30/5``).
Day of month and day of week must both match, as in NCrontab (classic cron ORs them).
Days of week run 0 (Sunday) to 6; 7 is Sunday too. Names (``Mon``, ``Jan``) and
``TimeSpan`` schedules (``00:05:00``) are refused with a message rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

# (lowest, highest) for each field, in the order they are written.
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("second", "minute", "hour", "day", "month", "day of week")
# A schedule that matches nothing (day 31 of February only) gives up after this many years.
_HORIZON_DAYS = 366 * 5


def _field(text: str, position: int) -> frozenset[int]:
    low, high = _BOUNDS[position]
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if span == "*":
                first, last = low, high
            elif "-" in span:
                first_text, last_text = span.split("-", 1)
                first, last = int(first_text), int(last_text)
            else:
                first = int(span)
                last = high if step_text else first  # "5/15" means 5, 20, 35, 50
        except ValueError:
            raise ValueError(f"{_NAMES[position]} field {text!r}: only numbers, *, lists, ranges and /n") from None
        if not (low <= first <= last <= high) or step < 1:
            raise ValueError(f"{_NAMES[position]} field {text!r}: values run {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; ``next_after`` is the first matching second after a time."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]

    @classmethod
    def parse(cls, expression: str) -> Schedule:
        fields = expression.split()
        if len(fields) != 6:
            raise ValueError(f"NCRONTAB {expression!r}: six fields expected (second minute hour day month day-of-week)")
        parsed = [_field(text, position) for position, text in enumerate(fields)]
        weekdays = frozenset(day % 7 for day in parsed[5])  # 7 is Sunday, as 0 is
        return cls(*parsed[:5], weekdays)

    def _runs_on(self, day: date) -> bool:
        sunday_first = (day.weekday() + 1) % 7  # Python counts from Monday = 0
        return day.month in self.months and day.day in self.days and sunday_first in self.weekdays

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after ``moment`` (whole seconds, ``moment``'s tzinfo)."""
        start = moment.replace(microsecond=0)
        hours, minutes, seconds = sorted(self.hours), sorted(self.minutes), sorted(self.seconds)
        for offset in range(_HORIZON_DAYS):
            day = start.date() + timedelta(days=offset)
            if not self._runs_on(day):
                continue
            # On the first day only, skip what is already past (whole hours, then minutes).
            floor = (start.hour, start.minute, start.second) if offset == 0 else (0, 0, 0)
            for hour in (h for h in hours if h >= floor[0]):
                for minute in (m for m in minutes if (hour, m) >= floor[:2]):
                    for second in seconds:
                        if (hour, minute, second) > floor or offset > 0:
                            return datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=moment.tzinfo)
        raise ValueError("this schedule never fires within five years")
