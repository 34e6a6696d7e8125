"""The write-site registry (``resumable/storage/write_sites.py``) holds every raw storage write.

A static scan of ``resumable/`` and ``functions_adapter/`` finds each call of a storage SDK
write method and requires its module to be registered as a writer of a site of that kind;
a registered writer that no longer makes such a call fails too, so the table cannot go
stale. The run-time half (every write request that leaves the client matches a site) is
checked by the fault matrix, ``tests/adapter/test_fault_matrix.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from resumable.storage import layout
from resumable.storage.write_sites import BY_NAME, SDK_CALLS, SITES, Kind, site_for, writers_of

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("resumable", "functions_adapter")


def raw_write_calls() -> set[tuple[str, str]]:
    """(module path, SDK method) for every call of a storage write method in the app."""
    found: set[tuple[str, str]] = set()
    files = [p for folder in SCANNED for p in (ROOT / folder).rglob("*.py")] + [ROOT / "function_app.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SDK_CALLS:
                found.add((path.relative_to(ROOT).as_posix(), node.func.attr))
    return found


def test_every_raw_storage_write_is_made_by_a_registered_writer() -> None:
    calls = raw_write_calls()
    assert calls, "the scan found no storage writes at all: it is not looking in the right place"
    unregistered = sorted((module, call) for module, call in calls if module not in writers_of(call))
    assert not unregistered, (
        f"storage writes outside a registered writer: {unregistered}. Register the write in "
        "resumable/storage/write_sites.py (then the fault matrix runs it under every fault), "
        "or make it through the registered helper."
    )


def test_every_registered_writer_still_makes_its_write() -> None:
    calls = raw_write_calls()
    stale = [
        (site.name, module)
        for site in SITES
        for module in site.writers
        if not any(m == module and site.kind in SDK_CALLS[call] for m, call in calls)
    ]
    assert not stale, f"registered writers that no longer make the write: {stale}"


def test_the_scan_would_catch_a_new_write(tmp_path: Path) -> None:
    """The scanner's own check: a raw write in a module nobody registered is found."""
    source = "async def f(c):\n    await c.get_blob_client('x').set_blob_metadata({})\n    await c.upload_blob(b'')\n"
    tree = ast.parse(source)
    seen = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert {"set_blob_metadata", "upload_blob"} <= seen & set(SDK_CALLS)
    assert not writers_of("set_blob_metadata")  # no site takes metadata writes
    assert "resumable/new_module.py" not in writers_of("upload_blob")


def test_sites_use_layout_prefixes_and_do_not_overlap() -> None:
    assert len(BY_NAME) == len(SITES)
    for site in SITES:
        assert site.prefix in (*layout.ALL, ""), site
        assert site.writers and site.during, site
    samples = {
        "checkpoints/c1.json": "checkpoint",
        "threads/t.json": "thread.pointer",
        "thread-meta/t.json": "thread.metadata",
        "idempotency/abc.json": "idempotency",
        "runs/r1.json": "run.record",
        "runs/r1/events-1.jsonl": "run.events",
        "run-order/t.json": "run.order",
        "callbacks/r1.json": "callback",
        "maintenance/state.json": "maintenance.state",
        "maintenance/references-0a1b.bin": "maintenance.references",
    }
    for blob, family in samples.items():
        for kind in Kind:
            site = site_for(kind, blob)
            assert site is None or site.name.startswith(family + "."), (blob, kind, site)
        assert site_for(Kind.DELETE, blob) is not None, blob
    assert site_for(Kind.REPLACE, "checkpoints/c1.json") is None  # checkpoints are never replaced
    assert site_for(Kind.CREATE, "runs/r1/events-1.jsonl") is None  # event logs are append blobs
