"""``GET /api/workflows``: each hosted workflow, its versions and policy, and how many live
threads each version holds, so an operator knows when old code can go.

The counts are those of the last housekeeping pass that finished (it visits every thread and
reads each head's metadata anyway: ``resumable/threads/pass_state.py``), as of
``counted_at``; null before one has. A version that still has threads but is no longer
registered is listed under ``unhosted``: a turn on those threads would be refused.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from functions_adapter.http_responses import json_response
from functions_adapter.request_trace import traced
from functions_adapter.wiring import container_for, load_settings, workflow_catalog
from resumable.core.catalog import WorkflowCatalog
from resumable.threads.pass_state import live_threads


async def handle_workflows(request: Request) -> Response:
    return await traced(request, "workflows", _workflows)


async def _workflows() -> Response:
    settings = load_settings()
    catalog = workflow_catalog(settings)
    counted = await live_threads(container_for(settings))
    return json_response(describe(catalog, *(counted or (None, None))))


def by_version(catalog: WorkflowCatalog, counts: dict[str, int]) -> dict[tuple[str, str], int]:
    """Counts keyed by (workflow, version), a head from before versions as the default's v1."""
    found: dict[tuple[str, str], int] = {}
    for key, count in counts.items():
        workflow, _, version = key.rpartition("@")  # a label holds no "@"; a name might
        named = catalog.of_metadata({"workflow": workflow, "workflow_version": version})
        found[named] = found.get(named, 0) + count
    return found


def describe(catalog: WorkflowCatalog, counts: dict[str, int] | None, counted_at: float | None) -> dict[str, Any]:
    found = by_version(catalog, counts) if counts is not None else None
    workflows = []
    for name, entry in sorted(catalog.entries.items()):
        versions = [
            {
                "version": label,
                "newest": label == entry.newest,
                "live_threads": None if found is None else found.pop((name, label), 0),
            }
            for label in entry.labels
        ]
        workflows.append(
            {"name": name, "default": name == catalog.default, "policy": entry.policy, "versions": versions}
        )
    unhosted = [
        {"workflow": workflow, "version": version, "live_threads": count}
        for (workflow, version), count in sorted((found or {}).items())
        if count
    ]
    return {"workflows": workflows, "counted_at": counted_at, "unhosted": unhosted}
