"""The parallel run reports what a serial one does: a failing Schemathesis operation fails it.

``scripts/test.sh`` runs pytest under pytest-xdist, and ``test_openapi_fuzz.py`` reports each
Schemathesis operation as a subtest of one test. With some distribution modes (``loadfile``,
``loadscope``, ``loadgroup`` in xdist 3.8) an operation that failed was reported as passed,
and the fuzzing passed whatever the app answered.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAILING_OPERATION = """
import schemathesis
from hypothesis import HealthCheck, settings

OPERATION = {"responses": {"200": {"description": "ok"}}}
SCHEMA = schemathesis.openapi.from_dict(
    {
        "openapi": "3.1.0",
        "info": {"title": "two operations", "version": "1"},
        "paths": {"/fine": {"get": OPERATION}, "/broken": {"get": OPERATION}},
    }
)


@SCHEMA.parametrize()
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
def test_each_operation(case):
    assert case.operation.path != "/broken"
"""


def _dist_mode() -> str:
    found = re.search(r"pytest .*--dist (\w+)", (ROOT / "scripts" / "test.sh").read_text())
    assert found, "scripts/test.sh no longer names a --dist mode"
    return found.group(1)


def test_a_failing_schemathesis_operation_fails_the_parallel_run(tmp_path: Path) -> None:
    (tmp_path / "test_operations.py").write_text(FAILING_OPERATION)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", _dist_mode()]
    done = subprocess.run(
        [*command, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed" in done.stdout, done.stdout[-2000:]
