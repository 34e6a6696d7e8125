"""One app instance whose wall clock is wrong: how the tests make the clock-skew cases.

Every library module's ``time.time`` and Agent Framework's checkpoint timestamps run
``seconds`` off; monotonic clocks and the storage service's clock are untouched, as they
are on a real instance whose wall clock drifted.
"""

from __future__ import annotations

import sys
import time
import types
from datetime import datetime, timedelta

import pytest
from agent_framework._workflows import _checkpoint as af_checkpoint


def skew_clocks(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """This process's wall clock runs ``seconds`` ahead (negative: behind) until undone."""
    skewed = types.SimpleNamespace(**{name: getattr(time, name) for name in dir(time) if not name.startswith("_")})
    skewed.time = lambda: time.time() + seconds
    for name, module in list(sys.modules.items()):
        if name.startswith("resumable.") and getattr(module, "time", None) is time:
            monkeypatch.setattr(module, "time", skewed)

    class SkewedDatetime(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return datetime.now(tz) + timedelta(seconds=seconds)

    monkeypatch.setattr(af_checkpoint, "datetime", SkewedDatetime)
