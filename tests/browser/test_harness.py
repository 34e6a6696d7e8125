"""The browser harness itself: what the ``page`` fixture records and fails on, and screenshots.

The console's scenario tests rely on it: a harness that missed an error would let every one
of them pass with a broken page. Through ``scripts/serve.sh`` (``/api/health``), with routes
of the test's own for pages the app does not serve.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from playwright.sync_api import Page, Route

from tests.browser.conftest import browser_required
from tests.browser.harness import ROOT, SHOTS, BrowserErrors, shot
from tests.serving import Serving

# The console's policy (docs/console.md): the probe page is held to the same one.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PROBE = """<!doctype html><title>probe</title>
<p id=text>hello</p>
<script>window.inlineRan = true</script>
<img src="data:," onerror="window.handlerRan = true">"""
# Browser tests, then an async test, in one pytest (files not collected on their own).
NEIGHBOURS = ["tests/browser/leaky_pages.py", "tests/browser/async_neighbour.py"]


@pytest.fixture
def page(page: Page) -> Page:
    """The harness's page, with Chromium's own /favicon.ico probe answered: /api/health has no icon
    (the console declares its own), and a 404 there would be recorded at a moment of its choosing."""
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    return page


def run_pytest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A pytest of its own on files of this folder, outside this run's CI and worker settings."""
    ours = ("CI", "REQUIRE_BROWSER")  # .ci/run sets both; each case sets what it tests
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_")) and k not in ours}
    clean |= {"COLUMNS": "300", **env}  # COLUMNS: the summary lines whole
    command = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-rA", "-q"]
    return subprocess.run(command, cwd=ROOT, env=clean, capture_output=True, text=True, timeout=300, check=False)


def test_a_console_error_on_an_app_page_is_recorded(
    page: Page, browser_errors: BrowserErrors, console_server: Serving
) -> None:
    answer = page.goto(f"{console_server.base}/health")
    assert answer is not None and answer.status == 200
    assert browser_errors.entries == []
    with page.expect_console_message():
        page.evaluate("console.error('injected by the harness test')")
    assert browser_errors.entries == ["console error: injected by the harness test"]
    browser_errors.take("injected by the harness test")
    assert browser_errors.entries == []


def test_an_uncaught_exception_is_recorded(page: Page, browser_errors: BrowserErrors, console_server: Serving) -> None:
    page.goto(f"{console_server.base}/health")
    with page.expect_event("pageerror"):
        page.evaluate("setTimeout(() => { throw new TypeError('thrown in a callback') })")
    assert browser_errors.take("thrown in a callback") == "page error: TypeError: thrown in a callback"


def test_csp_violations_are_recorded_and_nothing_inline_runs(
    page: Page, browser_errors: BrowserErrors, console_server: Serving
) -> None:
    def probe(route: Route) -> None:
        headers = {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": CSP}
        route.fulfill(status=200, headers=headers, body=PROBE)

    page.route(f"{console_server.base}/harness-probe", probe)
    with page.expect_console_message(lambda m: "inline event handler" in m.text):
        page.goto(f"{console_server.base}/harness-probe")
    assert page.text_content("#text") == "hello"
    assert page.evaluate("[window.inlineRan, window.handlerRan]") == [None, None]
    assert len(browser_errors.entries) == 2, browser_errors.entries
    browser_errors.take(r"^CSP violation: Executing inline script violates .*\(.*/api/harness-probe\)$")
    browser_errors.take(r"^CSP violation: Executing inline event handler violates")


def test_a_fetch_answered_404_is_recorded(page: Page, browser_errors: BrowserErrors, console_server: Serving) -> None:
    """Chromium logs a failed load as a console error: a page that calls a missing route fails its test."""
    page.goto(f"{console_server.base}/health")
    with page.expect_console_message(lambda m: "Failed to load resource" in m.text):
        assert page.evaluate("fetch('/api/no-such-route').then(r => r.status)") == 404
    browser_errors.take(r"^console error: Failed to load resource: .* 404 .*/api/no-such-route\)$")


def test_an_error_provoked_on_purpose_is_taken(
    page: Page, browser_errors: BrowserErrors, console_server: Serving
) -> None:
    """``provoked``: how a scenario expects an error (a 401 before the key is entered) without failing."""
    page.goto(f"{console_server.base}/health")
    with browser_errors.provoked(page, r"status of 404"):
        page.evaluate("fetch('/api/no-such-route')")
    assert browser_errors.entries == []


def test_shot_saves_a_png_in_the_tests_folder(page: Page, console_server: Serving) -> None:
    page.goto(f"{console_server.base}/health")
    path = shot(page, "health")
    assert path == SHOTS / "test_shot_saves_a_png_in_the_tests_folder" / "health.png"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_page_fixture_fails_a_test_whose_page_recorded_errors() -> None:
    """In a pytest of its own: errors left fail the test (not its teardown), taken ones do not,
    and a test failing on its own keeps its failure with the errors beside it. An async test
    the same process runs next still gets its event loop (Playwright's sync API is done)."""
    done = run_pytest(*NEIGHBOURS)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    summary = out.split("short test summary info")[-1]
    leaky = "tests/browser/leaky_pages.py::test_"
    for line in (
        f"FAILED {leaky}leaves_a_console_error - Failed: the browser recorded errors:",
        f"FAILED {leaky}leaves_an_uncaught_exception - Failed: the browser recorded errors:",
        f"PASSED {leaky}takes_the_error_it_provoked",
        "PASSED tests/browser/async_neighbour.py::test_an_async_test_after_a_browser_file",
        f"FAILED {leaky}fails_on_its_own_and_shows_the_errors - AssertionError: its own failure",
    ):
        assert f"\n{line}\n" in summary, out
    assert "console error: seen on the way" in out  # the failing test's report section
    assert "\n3 failed, 2 passed in " in summary  # failures of the tests, no teardown errors


MISSING = "no Chromium at /nonexistent/chromium: run scripts/setup.sh as root, or set CHROMIUM"


@pytest.mark.parametrize(
    ("required", "outcome"),
    [
        ({}, rf"SKIPPED \[1\] tests/browser/leaky_pages.py:\d+: {MISSING}"),
        ({"REQUIRE_BROWSER": "1"}, r"ERROR tests/browser/leaky_pages.py::test_takes_the_error_it_provoked - Failed: "),
    ],
)
def test_without_chromium_the_tests_skip_except_where_they_are_required(required: dict, outcome: str) -> None:
    leaky = "tests/browser/leaky_pages.py"
    done = run_pytest(leaky, "-k", "takes_the_error", CHROMIUM="/nonexistent/chromium", **required)
    assert re.search(f"^{outcome}", done.stdout, re.MULTILINE), done.stdout
    if required:
        assert f"{MISSING} (CI=true or REQUIRE_BROWSER=1: the browser tests must run)" in done.stdout


@pytest.mark.parametrize(
    ("env", "required"),
    [({}, False), ({"CI": "true"}, True), ({"REQUIRE_BROWSER": "1"}, True), ({"CI": "false"}, False)],
)
def test_ci_or_require_browser_makes_chromium_required(
    env: dict, required: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("CI", "REQUIRE_BROWSER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert browser_required() is required
