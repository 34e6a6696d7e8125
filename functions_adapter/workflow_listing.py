"""The hosted workflows and their versions with the live threads each holds: the listing
``GET /api/workflows`` answers, and what the version check and the housekeeping pass read
(which versions still hold threads that no hosted code can resume)."""

from __future__ import annotations

from typing import Any

from resumable import WorkflowCatalog


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
