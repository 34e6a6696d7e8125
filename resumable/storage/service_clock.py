""" "Has this lapsed?", on the storage service's clock alone.

Instances' wall clocks disagree (by seconds, sometimes by minutes), so a time one instance
wrote is never compared with another instance's ``time.time()``. A record's age is read
from the service instead: its Last-Modified against the Date of the answer that carried it
(``Stored.age``). Both have whole seconds, so an age is off by up to ``CLOCK_RESOLUTION``;
a hold is judged lapsed only once it is older than its time plus that.
"""

from __future__ import annotations

from typing import Any

from .record_store import CLOCK_RESOLUTION, Stored


def lapsed(stored: Stored[Any], seconds: float) -> bool | None:
    """Whether the record has been left unchanged for longer than ``seconds`` (plus the
    clock's resolution), by the service's clock; None when the answer carried no dates."""
    age = stored.age
    if age is None:
        return None
    return age > seconds + CLOCK_RESOLUTION


__all__ = ["lapsed"]
