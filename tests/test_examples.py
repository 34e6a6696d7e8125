"""The README's demo runs end to end against Azurite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from devtools.azurite import Azurite

ROOT = Path(__file__).resolve().parent.parent


def test_three_turn_demo_prints_a_checkpoint_chain(azurite: Azurite) -> None:
    env = {**os.environ, "CHECKPOINT_STORAGE": azurite.connection_string, "CHECKPOINT_CONTAINER": "demo"}
    done = subprocess.run(
        [sys.executable, "examples/three_turns.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for n in (1, 2, 3, 4):
        assert f"turn {n}:" in out
    assert 'Approval answer: "approved"' in out
    chain = re.findall(r"^  ([0-9a-f-]{36})  status=(\w+)", out, re.MULTILINE)
    assert [status for _, status in chain] == ["idle", "pending_requests", "idle", "idle"]
    assert "event: done" in out
    retried = re.findall(r"^  (?:first delivery|retry)\s+HTTP 200  checkpoint (\S+)", out, re.MULTILINE)
    assert len(retried) == 2 and retried[0] == retried[1]
    assert "after 1 turn(s)" in out
