"""What the browser tests share besides fixtures: the error recorder and screenshots.

A scenario test imports ``shot`` from here and takes the ``page`` fixture
(``tests/browser/conftest.py``); the recorder behind ``page`` is the ``browser_errors`` fixture.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import ConsoleMessage, Error, Page

ROOT = Path(__file__).resolve().parents[2]
# Screenshots: test-results/console/<test name>/<state>.png (gitignored; CI may keep it as an artifact).
SHOTS = ROOT / "test-results" / "console"
STATE = re.compile(r"[a-z0-9][a-z0-9-]*")


def shots_folder(test_name: str) -> Path:
    """Where one test's screenshots go; a parametrized name's brackets become underscores."""
    return SHOTS / re.sub(r"[^A-Za-z0-9._-]", "_", test_name)


def current_test() -> str:
    """The running test's name, from pytest's ``PYTEST_CURRENT_TEST`` ("path::name (call)")."""
    return os.environ["PYTEST_CURRENT_TEST"].rsplit("::", 1)[-1].rsplit(" ", 1)[0]


def shot(page: Page, state: str) -> Path:
    """Save a full-page PNG of ``page`` as ``test-results/console/<test name>/<state>.png``."""
    if not STATE.fullmatch(state):
        raise ValueError(f"state {state!r}: lower-case letters, digits and dashes")
    path = shots_folder(current_test()) / f"{state}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=path, full_page=True)
    return path


@dataclass
class BrowserErrors:
    """Every console error, uncaught page error and crash of a page, in order.

    Chromium reports a Content-Security-Policy violation (a blocked inline script, handler,
    style or load) and a fetch answered 4xx/5xx ("Failed to load resource") as console errors,
    so they land here too. The ``page`` fixture fails its test when any is left."""

    entries: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", self._page_error)
        page.on("crash", lambda _: self.entries.append("the page crashed"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        kind = "CSP violation" if "Content Security Policy" in message.text else "console error"
        where = message.location.get("url")  # none for a script the test evaluated
        self.entries.append(f"{kind}: {message.text}" + (f" ({where})" if where else ""))

    def _page_error(self, error: Error) -> None:
        self.entries.append(f"page error: {error.name}: {error.message}")

    def take(self, pattern: str) -> str:
        """Remove and return the first entry matching the regular expression ``pattern``: for an
        error a test provokes on purpose (a 401 that opens the key dialog). Fails if none does."""
        for index, entry in enumerate(self.entries):
            if re.search(pattern, entry):
                return self.entries.pop(index)
        raise AssertionError(f"no browser error matches {pattern!r}; recorded: {self.entries}")

    @contextmanager
    def provoked(self, page: Page, pattern: str) -> Iterator[None]:
        """Around an action that must log a console error whose text matches ``pattern``: waits
        for it (Chromium logs a failed load when it likes) and takes it, so it fails nothing."""
        with page.expect_console_message(lambda m: m.type == "error" and re.search(pattern, m.text)) as seen:
            yield
        self.take(re.escape(seen.value.text))

    def clear(self) -> None:
        self.entries.clear()

    def report(self) -> str:
        return "\n".join(f"  {entry}" for entry in self.entries)
