"""The browser layer: the app through ``scripts/serve.sh``, driven in Debian's Chromium by Playwright.

Chromium is the one at ``$CHROMIUM`` or ``/usr/bin/chromium`` (``scripts/setup.sh`` installs
Debian's package), launched through ``executable_path``: Playwright never downloads a browser
here. Without it every browser test skips, except under ``CI=true`` or ``REQUIRE_BROWSER=1``
(``.ci/run`` sets it), where a missing browser fails them. Each test gets a fresh context (its own sessionStorage) and a
``page`` whose console errors, page errors and CSP violations fail the test.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.browser.harness import BrowserErrors, shots_folder
from tests.serving import ROOT, Serving, serving

# Headless comes from Playwright's headless=True (it passes --headless itself).
CHROMIUM_FLAGS = [
    "--no-sandbox",  # root in CI containers: Chromium's sandbox refuses to start as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no calls home, no component or sync traffic
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
ERRORS = pytest.StashKey[BrowserErrors]()


def chromium_path() -> Path:
    return Path(os.environ.get("CHROMIUM") or "/usr/bin/chromium")


def browser_required() -> bool:
    """Under CI=true (most CI services) or REQUIRE_BROWSER=1 (.ci/run), a missing Chromium fails."""
    return any(os.environ.get(name, "").lower() in {"1", "true", "yes"} for name in ("CI", "REQUIRE_BROWSER"))


# Module scope, not session: while the sync API's driver is up, its event loop counts as running
# in this thread, and an async test the same worker runs next (pytest-asyncio) fails with "cannot
# be called from a running event loop". Module fixtures end before a worker moves to another
# file; a start costs about 0.4 s (the driver and Chromium).
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    executable = chromium_path()
    if not os.access(executable, os.X_OK):
        reason = f"no Chromium at {executable}: run scripts/setup.sh as root, or set CHROMIUM"
        if browser_required():
            pytest.fail(f"{reason} (CI=true or REQUIRE_BROWSER=1: the browser tests must run)")
        pytest.skip(reason)
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """One headless Chromium per test file (per worker); each test opens a context of its own."""
    chromium = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """``scripts/serve.sh`` with the sample settings and the console on; ``.base`` ends in ``/api``."""
    tmp = tmp_path_factory.mktemp("console")
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"]["CONSOLE_ENABLED"] = "true"
    (tmp / "local.settings.json").write_text(json.dumps(settings, indent=2))
    with serving(tmp) as server:
        yield server


@pytest.fixture(scope="module")
def console_url(console_server: Serving) -> str:
    return f"{console_server.base}/console"


@pytest.fixture
def browser_errors() -> BrowserErrors:
    """The ``page``'s recorder: ``take(pattern)`` an error provoked on purpose, or ``clear()``."""
    return BrowserErrors()


@pytest.fixture
def page(browser: Browser, browser_errors: BrowserErrors, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context, its errors recorded; any left when the test ends fails it.

    The test's screenshot folder is emptied first, so it holds only this run's states."""
    folder = shots_folder(request.node.name)
    for old in folder.glob("*.png"):
        old.unlink()
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    browser_errors.watch(tab)
    request.node.stash[ERRORS] = browser_errors
    yield tab
    _settle(tab)
    context.close()
    if browser_errors.entries:  # recorded after the test's own check (closing, late callbacks)
        pytest.fail("browser errors after the test ended:\n" + browser_errors.report(), pytrace=False)


def _settle(tab: Page) -> None:
    """A round trip to the page, so the events it sent before are delivered to the recorder."""
    if not tab.is_closed():
        with contextlib.suppress(PlaywrightError):  # navigating or crashed (a crash is recorded)
            tab.evaluate("0")


def _collect(item: pytest.Item) -> str:
    """The errors the test's page recorded, as report text (added to the test's report), cleared."""
    errors = item.stash.get(ERRORS, None)
    if errors is None:
        return ""
    tab = item.funcargs.get("page")
    if isinstance(tab, Page):
        _settle(tab)
    found = errors.report()
    errors.clear()
    if found:
        item.add_report_section("call", "browser errors", found)
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test itself, not its teardown, when its page recorded errors; a test that
    failed anyway keeps its own traceback and gets them as a report section."""
    try:
        result = yield
    except BaseException:
        _collect(item)
        raise
    found = _collect(item)
    if found:
        pytest.fail(f"the browser recorded errors:\n{found}", pytrace=False)
    return result
