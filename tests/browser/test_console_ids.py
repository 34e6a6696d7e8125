"""Thread IDs the console takes from a link or the form, checked with the API's own rule.

``encodeURIComponent`` keeps dots, so a thread ``..`` would make ``/api/threads/../runs``,
which the browser resolves to ``/api/runs``: a message typed "in thread .." would go to a
thread-less run, and Delete would send ``DELETE /api/``. The page refuses any ID the API
would refuse (``resumable/base/ids.py``) before it sends anything about it, and its URL
builder refuses a dot segment whatever asks for one.
"""

from __future__ import annotations

import urllib.parse

import pytest
from playwright.sync_api import Page, Request, expect

from tests.browser.harness import shot

# Each refused by resumable.base.ids.validate_id.
REFUSED = ["..", ".", "...", ".hidden", "a..b", "a/b", "%2e%2e", "a b", "x" * 129]


def _calls(page: Page) -> list[tuple[str, str]]:
    sent: list[tuple[str, str]] = []

    def note(request: Request) -> None:
        if request.resource_type in ("fetch", "xhr"):
            sent.append((request.method, urllib.parse.urlsplit(request.url).path))

    page.on("request", note)
    return sent


def _only_listing_reads(sent: list[tuple[str, str]]) -> None:
    """The start-up reads (workflows, the thread listing) and nothing about the refused ID."""
    assert sent, "the page made no call at all"
    for method, path in sent:
        assert method == "GET", (method, path)
        assert path == "/api/threads" or path.startswith("/api/workflows"), path


@pytest.mark.parametrize("thread", REFUSED, ids=[t[:12] for t in REFUSED])
def test_a_link_with_an_id_the_api_refuses_opens_nothing_and_sends_nothing(
    page: Page, console_url: str, thread: str
) -> None:
    sent = _calls(page)
    page.goto(f"{console_url}?{urllib.parse.urlencode({'thread': thread})}")
    notice = page.locator("#notice")
    expect(notice).to_have_class("error")
    expect(notice).to_contain_text("invalid_request: thread_id ")
    expect(page.locator("#threads-note")).not_to_be_empty()  # the listing was read and drawn
    expect(page.locator("#thread-pane")).to_be_hidden()
    shot(page, "refused")
    _only_listing_reads(sent)


def test_the_new_thread_form_refuses_a_dot_segment(page: Page, console_url: str) -> None:
    sent = _calls(page)
    page.goto(console_url)
    expect(page.locator("#new-thread select[name=workflow] option")).not_to_have_count(0)
    page.fill("#new-thread input[name=thread_id]", "..")
    page.click("#new-thread button[type=submit]")
    expect(page.locator("#notice")).to_contain_text("invalid_request: thread_id ")
    expect(page.locator("#thread-pane")).to_be_hidden()
    _only_listing_reads(sent)


def test_an_id_the_api_takes_still_opens(page: Page, console_url: str) -> None:
    page.goto(f"{console_url}?thread=v1.2_ok-thread")
    expect(page.locator("#thread-title")).to_have_text("v1.2_ok-thread")
    expect(page.locator("#thread-pane")).to_be_visible()


@pytest.mark.parametrize("path", ["/threads/../runs", "/threads/./x", "/threads/%2E%2e", "/threads/%2e/runs", "/.."])
def test_the_url_builder_refuses_a_dot_segment(page: Page, console_url: str, path: str) -> None:
    page.goto(console_url)
    refused = page.evaluate(
        """async (path) => {
            const { Api } = await import("/api/console/api.js");
            try { return `built ${new Api("/api", () => {}).url(path)}`; }
            catch (error) { return `${error.code}: ${error.message}`; }
        }""",
        path,
    )
    assert refused.startswith("invalid_request: "), refused
    # A path without one is built as before.
    built = page.evaluate(
        """async () => {
            const { Api } = await import("/api/console/api.js");
            return new Api("/api", () => {}).url("/threads/a.b/runs");
        }"""
    )
    assert built == "/api/threads/a.b/runs"
