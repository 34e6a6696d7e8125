"""Refuse a deploy that removes a workflow version live threads are still on, unless forced.

``python -m functions_adapter.version_check [--force]`` with the app's settings (the same
environment the app reads): it compares the registry about to be deployed with the live
threads per version the last housekeeping pass counted (``GET /api/workflows``' figures), and
exits 1 naming every version that still has threads but is no longer registered. Run it
before the deploy (for instance as an ``azd`` predeploy hook). ``--force`` reports the same
and exits 0: those threads' next turns are then 409 ``checkpoint_incompatible``.

It runs before the deploy, not inside the app: the app's start-up (the worker indexing it)
touches no storage, and a read on every cold start would cost every instance an operation.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from functions_adapter.settings import Settings
from functions_adapter.wiring import container_for, workflow_catalog
from functions_adapter.workflow_listing import describe
from resumable.threads.pass_state import live_threads


async def removed_with_threads(settings: Settings) -> tuple[list[str], float | None]:
    """``workflow@version`` (with its count) for each unregistered version with live threads,
    and when they were counted (None: no pass has finished, nothing is known)."""
    counted = await live_threads(container_for(settings))
    if counted is None:
        return [], None
    listing = describe(workflow_catalog(settings), *counted)
    return [f"{u['workflow']}@{u['version']} ({u['live_threads']} threads)" for u in listing["unhosted"]], counted[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="report removed versions with threads, but exit 0")
    args = parser.parse_args(argv)
    removed, counted_at = asyncio.run(removed_with_threads(Settings.from_env()))
    return verdict(removed, counted_at, force=args.force)


def verdict(removed: list[str], counted_at: float | None, *, force: bool) -> int:
    """The exit status, with the reasons on stderr."""
    if counted_at is None:
        print("No housekeeping pass has finished yet: live threads per version are unknown.", file=sys.stderr)
    if not removed:
        return 0
    print(f"Versions removed while threads are on them: {', '.join(removed)}.", file=sys.stderr)
    if force:
        print("--force: deploying anyway; those threads' next turns will be refused.", file=sys.stderr)
        return 0
    print(
        "Keep them registered (or move the threads: a turn naming a newer version), or pass --force.", file=sys.stderr
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
