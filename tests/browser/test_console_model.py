"""The console with a model that streams token by token and can be held mid-reply
(``WORKFLOW``'s catalog with ``chat-agents`` against the fake OpenAI endpoint, through
``scripts/serve.sh``): a reply shown while it is still being written, and a background run
followed while it runs, then cancelled from the page.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.harness import shot
from tests.model_thread import ModelThread, model_fixture, settings_with_model  # noqa: F401 - the fixture
from tests.serving import Serving, serving

TIMEOUT = 15_000


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory, model: ModelThread) -> Iterator[Serving]:
    """The harness's server, with the fake model behind the ``chat-agents`` workflow."""
    tmp = tmp_path_factory.mktemp("console-model")
    with serving(tmp, settings=settings_with_model(tmp, model, CONSOLE_ENABLED="true")) as server:
        yield server


def test_a_reply_shows_while_the_model_writes_it_and_a_running_run_is_cancelled(
    page: Page, console_url: str, model: ModelThread
) -> None:
    thread_id = f"agents-{uuid.uuid4().hex[:8]}"
    page.goto(console_url)
    page.select_option("#new-thread select[name=workflow]", "chat-agents")
    page.fill("#new-thread input[name=thread_id]", thread_id)
    page.click("#new-thread button[type=submit]")
    expect(page.locator("#thread-title")).to_have_text(thread_id)
    model.hold()  # the reviewer's reply stops after its first token until released
    try:
        page.fill("#composer textarea[name=message]", "Tell me a story")
        page.click("#composer button[type=submit]")
        streaming = page.locator("#conversation .message.streaming")
        expect(streaming).to_have_text("assistantreviewer:", timeout=TIMEOUT)  # the first token, live
        shot(page, "reply-being-written")
        model.release()
        expect(streaming).to_have_count(0, timeout=TIMEOUT)
        expect(page.locator("#conversation .message[data-role=assistant] .text")).to_have_text(
            ["reviewer: reply; user said: Tell me a story"]
        )
        expect(page.locator("#workflow .signature")).not_to_contain_text("unavailable")
        expect(page.locator("#composer")).not_to_have_class(re.compile(r"\bbusy\b"))  # the thread is drawn again

        model.hold()
        page.fill("#composer textarea[name=message]", "And another one")
        page.check("#composer input[name=background]")
        page.click("#composer button[type=submit]")
        run = page.locator("#runs .run")
        expect(run).to_have_attribute("data-status", "running", timeout=TIMEOUT)
        expect(run.locator(".events")).to_contain_text("reviewer:", timeout=TIMEOUT)  # followed live
        shot(page, "background-running")
        run.locator("button[data-action=cancel]").click()
        expect(run).to_have_attribute("data-status", "cancelled", timeout=TIMEOUT)
        expect(run.locator("button[data-action=cancel]")).to_be_hidden()
        shot(page, "background-cancelled")
    finally:
        model.release()
    # The cancelled run committed nothing: the thread still has its one turn.
    page.click("[data-action=refresh]")
    expect(page.locator("#conversation .message[data-role=user] .text")).to_have_text(["Tell me a story"])
