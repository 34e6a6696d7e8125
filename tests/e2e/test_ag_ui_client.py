"""The unmodified ``@ag-ui/client`` 1.0 ``HttpAgent`` (npm, pinned in package.json), from Node,
against ``scripts/serve.sh``: two turns, a reload snapshot, an approval interrupt resumed, a
refused run (``tests/e2e/ag_ui_client.mjs`` drives it and prints what it saw)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serving import ROOT, serving


def test_the_ag_ui_http_agent_drives_a_thread(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed (scripts/setup.sh checks for it).")
    with serving(tmp_path) as served:
        done = subprocess.run(
            [node, str(ROOT / "tests/e2e/ag_ui_client.mjs"), served.base],
            cwd=ROOT,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["firstReply"].startswith('turn 1: you said "hello"')
    assert seen["secondReply"].startswith('turn 2: you said "again"') and '"hello"' in seen["secondReply"]
    assert seen["reloadEvents"] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert seen["sameHistory"] and seen["reloadCount"] == 4
    (interrupt,) = seen["interrupts"]
    assert interrupt["reason"] == "request_info"
    assert 'Approval answer: "yes"' in seen["approvedReply"] and seen["pendingAfter"] == 0
    assert seen["refusedEvents"] == ["RUN_STARTED", "RUN_ERROR"]
    assert seen["errorCode"] == "invalid_request"  # the client ends the run on it, without throwing
