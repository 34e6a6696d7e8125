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
from functions_adapter.settings import SettingsError
from functions_adapter.wiring import container_for, load_settings, workflow_catalog
from functions_adapter.workflow_listing import describe
from resumable import WorkflowCatalog, WorkflowRef
from resumable.base import InvalidRequest
from resumable.core.graph import describe_graph
from resumable.threads.pass_state import live_threads

# (workflow, version) → its graph: a deploy's workflows do not change while it runs.
_GRAPHS: dict[tuple[str, str], dict[str, Any]] = {}


async def handle_workflows(request: Request) -> Response:
    return await traced(request, "workflows", _workflows)


async def handle_workflow(request: Request, name: str) -> Response:
    return await traced(request, "workflows/{name}", lambda: _workflow(name))


async def _workflow(name: str) -> Response:
    """One workflow: its policy and each version's graph and signature (built once per
    process; a version that cannot be built here says why instead of failing the route)."""
    ref = WorkflowRef.parse(name)
    if ref.version is not None:
        raise InvalidRequest("Name a workflow without a version: every version is listed.")
    catalog = workflow_catalog(load_settings())
    entry = catalog.entry(ref.name)
    versions = [
        {"version": label, "newest": label == entry.newest, **_graph(catalog, ref.name, label)}
        for label in entry.labels
    ]
    body = {"name": ref.name, "default": ref.name == catalog.default, "policy": entry.policy, "versions": versions}
    return json_response(body)


def _graph(catalog: WorkflowCatalog, name: str, label: str) -> dict[str, Any]:
    if (name, label) not in _GRAPHS:
        try:
            _GRAPHS[name, label] = describe_graph(catalog.load(name, label).build())
        except SettingsError as exc:  # e.g. a model workflow without its endpoint settings
            return {"workflow_name": None, "signature": None, "graph": None, "graph_unavailable": str(exc)}
    return _GRAPHS[name, label]


async def _workflows() -> Response:
    settings = load_settings()
    catalog = workflow_catalog(settings)
    counted = await live_threads(container_for(settings))
    return json_response(describe(catalog, *(counted or (None, None))))
