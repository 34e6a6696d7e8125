"""Cold start: ``import function_app`` loads the synchronous HTTP path and nothing else.

Background runs (records, event log, queue client), callbacks and housekeeping are
imported by their first trigger or route, and the Azure SDK (the Blob Storage client,
aiohttp, its transport, and ``azure.core``) by the first storage client: the start-up check
of ``WORKFLOW`` needs none of it.
Timings are measured in ``bench/``; this pins which modules a cold start loads, so a new
feature cannot quietly move back into it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFERRED = (
    "azure.core",
    "azure.storage.blob",
    "azure.storage.blob.aio",
    "aiohttp",
    "azure.storage.queue",
    "resumable.background",
    "resumable.background.events",
    "resumable.background.accept",
    "resumable.background.executor",
    "resumable.background.callbacks",
    "resumable.threads.sweep",
    "functions_adapter.api.background_api",
    "functions_adapter.background_submit",
    "functions_adapter.openai.responses_api",
    "functions_adapter.queue_triggers",
    "functions_adapter.callbacks",
    "functions_adapter.housekeeping",
)


def _loaded_after(code: str) -> list[str]:
    probe = f"{code}; import json, sys; print(json.dumps(sorted(m for m in {list(DEFERRED)!r} if m in sys.modules)))"
    command = [sys.executable, "-c", probe]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_function_app_defers_background_runs_and_housekeeping() -> None:
    assert _loaded_after("import function_app") == []


def test_the_library_package_imports_its_parts_on_first_use() -> None:
    assert _loaded_after("import resumable; from resumable.base.ids import validate_id") == []
    assert "resumable.background" in _loaded_after("from resumable import BackgroundRuns")
