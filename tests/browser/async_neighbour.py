"""Not collected on its own: ``test_harness.py`` runs it right after ``leaky_pages.py`` in one
pytest, as a worker may, to see an async test run once a browser file is done."""

from __future__ import annotations

import asyncio


async def test_an_async_test_after_a_browser_file() -> None:
    assert await asyncio.sleep(0, result="ran") == "ran"
