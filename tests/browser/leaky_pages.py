"""Not collected on its own (no ``test_`` prefix): ``test_harness.py`` runs it in a pytest of its
own to see the ``page`` fixture fail tests whose page recorded errors."""

from __future__ import annotations

from playwright.sync_api import Page

from tests.browser.harness import BrowserErrors


def test_leaves_a_console_error(page: Page) -> None:
    page.set_content("<p>x</p>")
    page.evaluate("console.error('left behind')")


def test_leaves_an_uncaught_exception(page: Page) -> None:
    page.set_content("<p>x</p>")
    with page.expect_event("pageerror"):
        page.evaluate("setTimeout(() => { throw new Error('thrown later') })")


def test_takes_the_error_it_provoked(page: Page, browser_errors: BrowserErrors) -> None:
    page.set_content("<p>x</p>")
    page.evaluate("console.error('provoked on purpose')")
    page.evaluate("0")
    browser_errors.take("provoked on purpose")


def test_fails_on_its_own_and_shows_the_errors(page: Page) -> None:
    page.set_content("<p>x</p>")
    page.evaluate("console.error('seen on the way')")
    raise AssertionError("its own failure")
