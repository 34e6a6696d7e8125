"""A workflow's graph as data: its executors, its edges and its signature, from Agent
Framework's public description (``Workflow.to_dict``, ``graph_signature_hash``).

A resume refuses a checkpoint whose graph signature differs from the workflow's, so the
signature shown beside the graph is the one that decides. Edges the framework adds for its
own delivery (sources named ``internal:...``) are left out: they are not the user's graph.
"""

from __future__ import annotations

from typing import Any

from agent_framework import Workflow

_INTERNAL = "internal:"


def describe_graph(workflow: Workflow) -> dict[str, Any]:
    """``{"workflow_name", "signature", "graph": {"start", "executors", "edges"}}``."""
    described = workflow.to_dict()
    executors = [
        {"id": str(executor_id), "type": str(spec.get("type", "")) if isinstance(spec, dict) else ""}
        for executor_id, spec in (described.get("executors") or {}).items()
    ]
    edges = [
        {"source": str(edge.get("source_id")), "target": str(edge.get("target_id")), "kind": str(group.get("type", ""))}
        for group in described.get("edge_groups") or []
        for edge in group.get("edges") or []
        if not str(edge.get("source_id", "")).startswith(_INTERNAL)
    ]
    return {
        "workflow_name": str(described.get("name") or ""),
        "signature": workflow.graph_signature_hash,
        "graph": {"start": str(described.get("start_executor_id", "")), "executors": executors, "edges": edges},
    }
