"""The console as a new user drives it, in Chromium, through ``scripts/serve.sh``: a conversation
typed into the page with streamed replies, an approval answered by a click, a fork drawn as a
branch, a background run followed to ``succeeded``, a thread deleted, markup shown as text.

Every test fails on any browser console error, page error or CSP violation (the ``page``
fixture), and saves a screenshot of each state under ``test-results/console/<test>/``. What the
page shows is checked against what the API says, read separately over HTTP.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

from playwright.sync_api import Page, Request, Route, expect

from tests.browser.harness import BrowserErrors, shot
from tests.serving import Serving

TIMEOUT = 15_000  # ms: a turn, or a background run through the queue, on a busy machine


def api(server: Serving, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"{server.base}{path}", timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def open_thread(page: Page, console_url: str, prefix: str) -> str:
    thread_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    page.goto(console_url)
    expect(page.locator("#new-thread select[name=workflow] option")).not_to_have_count(0)
    page.fill("#new-thread input[name=thread_id]", thread_id)
    page.click("#new-thread button[type=submit]")
    expect(page.locator("#thread-title")).to_have_text(thread_id)
    return thread_id


def say(page: Page, text: str) -> None:
    """Type a message and send it; returns once the turn's reply is on the page."""
    replies = page.locator("#conversation .message[data-role=assistant]")
    before = replies.count()
    page.fill("#composer textarea[name=message]", text)
    page.click("#composer button[type=submit]")
    expect(replies).to_have_count(before + 1, timeout=TIMEOUT)
    settled(page)


def settled(page: Page) -> None:
    """The turn committed and the page drew the thread again (the composer is free)."""
    expect(page.locator("#composer")).not_to_have_class(re.compile(r"\bbusy\b"), timeout=TIMEOUT)


def assistant_texts(page: Page) -> list[str]:
    return page.locator("#conversation .message[data-role=assistant] .text").all_inner_texts()


def test_a_three_turn_conversation_streams_each_reply(page: Page, console_url: str, console_server: Serving) -> None:
    streamed: list[str] = []
    page.on("request", lambda r: streamed.append(r.url) if r.headers.get("accept") == "text/event-stream" else None)
    thread_id = open_thread(page, console_url, "chat")
    shot(page, "empty-thread")
    for text in ("My name is Ada.", "What is my name?", "Thanks"):
        say(page, text)
    assert [t.split(":")[0] for t in assistant_texts(page)] == ["turn 1", "turn 2", "turn 3"]
    assert 'Earlier you said: "My name is Ada.", "What is my name?"' in assistant_texts(page)[2]
    assert page.locator("#conversation .message[data-role=user] .text").all_inner_texts() == [
        "My name is Ada.",
        "What is my name?",
        "Thanks",
    ]
    # Each turn was a server-sent-event stream, and the call log says so.
    assert len([u for u in streamed if u.endswith(f"/api/threads/{thread_id}/runs")]) == 3
    posts = page.locator("#calls li", has_text=f"/api/threads/{thread_id}/runs")
    expect(posts.first.locator(".ops")).to_contain_text("events")
    # The lineage holds three checkpoints, the newest the head, as the API says.
    status, thread = api(console_server, f"/threads/{thread_id}")
    assert status == 200 and thread["turns"] == 3
    nodes = page.locator("#lineage g.node")
    expect(nodes).to_have_count(3)
    expect(page.locator("#lineage g.node.head")).to_have_attribute("data-checkpoint-id", thread["checkpoint_id"])
    expect(page.locator("#workflow svg g.node[data-executor-id=memory]")).to_have_count(1)
    expect(page.locator("#workflow .signature")).to_contain_text(re.compile(r"[0-9a-f]{16}"))
    expect(page.locator("#threads li").first).to_have_attribute("data-thread-id", thread_id)  # newest first
    shot(page, "three-turns")


def test_an_approval_is_answered_by_a_click(page: Page, console_url: str, console_server: Serving) -> None:
    thread_id = open_thread(page, console_url, "approve")
    page.fill("#composer textarea[name=message]", "Ship it, pending approval")
    page.click("#composer button[type=submit]")
    request = page.locator("#pending .request")
    expect(request).to_have_count(1, timeout=TIMEOUT)
    settled(page)
    expect(request.locator(".request-data")).to_contain_text("Ship it, pending approval")
    expect(page.locator("#composer button[type=submit]")).to_be_disabled()  # an answer is due first
    _, history = api(console_server, f"/threads/{thread_id}/history")
    assert request.get_attribute("data-request-id") == history["checkpoints"][0]["pending_request_ids"][0]
    shot(page, "waiting-for-approval")
    request.locator("button[data-action=approve]").click()
    expect(page.locator("#pending .request")).to_have_count(0, timeout=TIMEOUT)
    settled(page)
    expect(page.locator("#conversation .message[data-role=assistant]").last).to_contain_text(
        'Approval answer: "approved"'
    )
    _, history = api(console_server, f"/threads/{thread_id}/history")
    assert history["checkpoints"][0]["status"] == "idle"
    shot(page, "approved")


def test_a_fork_from_an_older_checkpoint_is_drawn_as_a_branch(
    page: Page, console_url: str, console_server: Serving
) -> None:
    thread_id = open_thread(page, console_url, "fork")
    for text in ("first", "second", "third"):
        say(page, text)
    _, before = api(console_server, f"/threads/{thread_id}/history")
    first, replaced = before["checkpoints"][-1]["checkpoint_id"], before["checkpoints"][0]["checkpoint_id"]
    page.locator(f"#lineage g.node[data-checkpoint-id='{first}']").click()
    detail = page.locator("#checkpoint-detail")
    expect(detail).to_contain_text("first")
    shot(page, "older-checkpoint-selected")
    detail.locator("button[data-action=fork]").click()
    expect(page.locator("#composer")).to_have_attribute("data-fork", first)
    say(page, "a different second")
    # The head's line is first → the fork; the old second and third are a branch beside it.
    _, after = api(console_server, f"/threads/{thread_id}/history")
    head = after["checkpoints"][0]
    assert head["previous_checkpoint_id"] == first and head["replaced_head_id"] == replaced
    expect(page.locator("#lineage g.node.head")).to_have_attribute("data-checkpoint-id", head["checkpoint_id"])
    branch = page.locator("#lineage g.node.branch")
    expect(branch).to_have_count(2)
    assert {branch.nth(i).get_attribute("data-checkpoint-id") for i in range(2)} == {
        c["checkpoint_id"] for c in before["checkpoints"][:2]
    }
    assert assistant_texts(page) == [
        'turn 1: you said "first". Earlier you said: nothing yet',
        'turn 2: you said "a different second". Earlier you said: "first"',
    ]
    expect(page.locator("#composer")).not_to_have_attribute("data-fork", re.compile(".*"))
    shot(page, "forked")


def test_a_background_run_is_followed_to_succeeded(page: Page, console_url: str, console_server: Serving) -> None:
    thread_id = open_thread(page, console_url, "later")
    page.fill("#composer textarea[name=message]", "do this later")
    page.check("#composer input[name=background]")
    page.click("#composer button[type=submit]")
    run = page.locator("#runs .run")
    expect(run).to_have_count(1)
    expect(run).to_have_attribute("data-status", "succeeded", timeout=TIMEOUT)
    status = run.locator(".status").inner_text()
    assert status.startswith("queued") and status.endswith("succeeded")
    expect(run.locator(".events li[data-event=output]")).to_contain_text('turn 1: you said "do this later"')
    expect(run.locator("button[data-action=cancel]")).to_be_hidden()
    _, record = api(console_server, f"/runs/{run.get_attribute('data-run-id')}")
    assert record["status"] == "succeeded" and record["thread_id"] == thread_id
    # The thread shows the turn the run committed.
    expect(page.locator("#conversation .message[data-role=assistant]")).to_contain_text(
        ['turn 1: you said "do this later"']
    )
    shot(page, "background-succeeded")


def test_a_thread_is_deleted(page: Page, console_url: str, console_server: Serving) -> None:
    thread_id = open_thread(page, console_url, "gone")
    say(page, "forget me")
    expect(page.locator(f"#threads li[data-thread-id='{thread_id}']")).to_have_count(1)
    page.click("button[data-action=delete-thread]")
    shot(page, "confirm-delete")
    page.click("button[data-action=confirm-delete]")
    expect(page.locator("#thread-pane")).to_be_hidden(timeout=TIMEOUT)
    expect(page.locator("#notice")).to_contain_text("deleted")
    expect(page.locator(f"#threads li[data-thread-id='{thread_id}']")).to_have_count(0)
    assert api(console_server, f"/threads/{thread_id}")[0] == 404
    shot(page, "deleted")


def test_markup_in_a_message_is_shown_as_text_and_runs_nothing(page: Page, console_url: str) -> None:
    hostile = "<img src=x onerror=\"window.pwned='img'\"><script>window.pwned='script'</script><b>bold</b>"
    open_thread(page, console_url, "xss")
    say(page, hostile)
    assert page.locator("#conversation .message[data-role=user] .text").inner_text() == hostile
    assert hostile in assistant_texts(page)[0]  # the reply quotes it, as text too
    page.locator("#lineage g.node").first.click()  # the lineage label and the detail pane too
    expect(page.locator("#checkpoint-detail")).to_contain_text("<script>")
    assert page.locator("#thread-pane img, #thread-pane script, #thread-pane b").count() == 0
    assert page.evaluate("window.pwned") is None
    shot(page, "markup-as-text")


def test_a_link_opens_its_thread_and_the_key_stays_in_the_tab(page: Page, console_url: str) -> None:
    thread_id = open_thread(page, console_url, "link")
    say(page, "remember this")
    sent: list[Request] = []

    def record(request: Request) -> None:  # Playwright keeps state on a handler: not a bound builtin
        sent.append(request)

    page.on("request", record)
    page.click("#key-button")
    page.fill("#key-dialog input[name=key]", "secret-key-123")
    page.click("#key-dialog button[type=submit]")
    expect(page.locator("#key-dialog")).to_be_hidden()
    page.goto(f"{console_url}?thread={thread_id}")
    expect(page.locator("#conversation .message[data-role=user] .text")).to_have_text(["remember this"])
    api_calls = [r for r in sent if "/api/" in r.url and "/api/console" not in r.url]
    assert api_calls and all(r.headers.get("x-functions-key") == "secret-key-123" for r in api_calls)
    assert not any("secret-key-123" in r.url for r in sent)
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("Object.keys(sessionStorage)") == ["workflow-console.function-key"]
    # A new tab (a new context) does not have it.
    other = page.context.browser.new_context().new_page() if page.context.browser else None
    assert other is not None
    other.goto(console_url)
    assert other.evaluate("sessionStorage.length") == 0
    other.context.close()
    shot(page, "opened-by-link")


def test_a_401_asks_for_the_key_and_the_next_call_carries_it(
    page: Page, console_url: str, browser_errors: BrowserErrors
) -> None:
    """In Azure the API answers 401 without a function key: the page asks for one (it is
    anonymous itself), keeps it for the tab and sends it. The host's 401 is played here by
    routing the first listing call; everything else reaches the app."""
    keys: list[str | None] = []
    refused: list[bool] = []

    def host(route: Route) -> None:
        keys.append(route.request.headers.get("x-functions-key"))
        if not refused:
            refused.append(True)
            route.fulfill(status=401, body="")  # what the Functions host sends: no body
        else:
            route.continue_()

    page.route("**/api/workflows", host)
    with browser_errors.provoked(page, "401"):
        page.goto(console_url)
    dialog = page.locator("#key-dialog")
    expect(dialog).to_be_visible()
    shot(page, "asks-for-the-key")
    page.fill("#key-dialog input[name=key]", "the-function-key")
    page.click("#key-dialog button[type=submit]")
    expect(dialog).to_be_hidden()
    expect(page.locator("#new-thread select[name=workflow] option")).not_to_have_count(0)
    assert keys == [None, "the-function-key"]
    assert "the-function-key" not in page.url
