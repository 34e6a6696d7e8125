"""The console as a debugger, in Chromium through ``scripts/serve.sh``: a ten-superstep run seen
live executor by executor (the graph's marks and the turn's timeline), a checkpoint's state
edited and a turn forked from it whose reply reflects the edit, and an edit of pickled state
refused with its reason. What the page shows is checked against the API, read over HTTP;
each state is a screenshot under ``test-results/console/<test>/``.
"""

from __future__ import annotations

import json
import re
import uuid

from playwright.sync_api import Page, expect

from tests.browser.harness import BrowserErrors, shot
from tests.browser.test_console import TIMEOUT, api, say, settled
from tests.serving import Serving

STEPS = [f"step-{n}" for n in range(1, 11)]

# Records, in order, each executor the graph marks as running (a MutationObserver on the
# graph's nodes): what a person watching the page would have seen, however fast it went. A
# record holds the class before its change; the class after it is the next record's "before"
# on that node, or the node's class when the batch is delivered (right after the task).
WATCH_GRAPH = """() => {
  window.seenRunning = [];
  const running = (value) => /\\brunning\\b/.test(value || "");
  new MutationObserver((records) => {
    records.forEach((record, index) => {
      const later = records.slice(index + 1).find((r) => r.target === record.target);
      const after = later ? later.oldValue : record.target.getAttribute("class");
      if (running(after) && !running(record.oldValue)) window.seenRunning.push(record.target.dataset.executorId);
    });
  }).observe(document.querySelector("#workflow"),
    { subtree: true, attributes: true, attributeOldValue: true, attributeFilter: ["class"] });
}"""


def open_on(page: Page, console_url: str, prefix: str, workflow: str) -> str:
    thread_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    page.goto(console_url)
    expect(page.locator(f"#new-thread select[name=workflow] option[value={workflow}]")).to_have_count(1)
    page.select_option("#new-thread select[name=workflow]", workflow)
    page.fill("#new-thread input[name=thread_id]", thread_id)
    page.click("#new-thread button[type=submit]")
    expect(page.locator("#thread-title")).to_have_text(thread_id)
    return thread_id


def test_a_ten_superstep_run_is_seen_live_executor_by_executor(
    page: Page, console_url: str, console_server: Serving
) -> None:
    thread_id = open_on(page, console_url, "live", "step-pipeline")
    expect(page.locator("#workflow svg g.node")).to_have_count(10, timeout=TIMEOUT)
    page.evaluate(WATCH_GRAPH)
    page.fill("#composer textarea[name=message]", "run slowly please")
    page.click("#composer button[type=submit]")
    # Mid-run: one executor running, those before it done, Send off until the turn is in.
    running = page.locator("#workflow svg g.node.running")
    expect(page.locator("#workflow svg g.node.done")).not_to_have_count(0, timeout=TIMEOUT)
    expect(running).to_have_count(1, timeout=TIMEOUT)
    expect(page.locator("#composer button[type=submit]")).to_be_disabled()
    expect(page.locator("#timeline .invocation.running")).to_have_count(1)
    shot(page, "running")
    settled(page)
    expect(page.locator("#composer button[type=submit]")).to_be_enabled()
    # Seen executor by executor, in the graph's order, each once; all done now.
    assert page.evaluate("window.seenRunning") == STEPS
    expect(page.locator("#workflow svg g.node.done")).to_have_count(10)
    expect(running).to_have_count(0)
    # The timeline: ten supersteps, each one invocation, done, with its duration and outputs.
    timeline = page.locator("#timeline .timeline").first
    expect(timeline.locator(".superstep.done")).to_have_count(10)
    invocations = timeline.locator(".invocation.done")
    expect(invocations).to_have_count(10)
    assert invocations.locator(".executor").all_inner_texts() == STEPS
    for duration in invocations.locator(".duration").all_inner_texts():
        assert re.fullmatch(r"\d+(\.\d)? ms", duration), duration
    last = invocations.nth(9)
    last.locator("details.payload", has_text="outputs").locator("summary").click()
    expect(last.locator("details.payload[open] pre")).to_contain_text("went through steps 1 2 3 4 5 6 7 8 9 10")
    reply = page.locator("#conversation .message[data-role=assistant] .text").last
    expect(reply).to_have_text('turn 1: "run slowly please" went through steps 1 2 3 4 5 6 7 8 9 10')
    # The call list: the turn's POST with its time, its request body and the events it carried.
    call = page.locator("#calls li", has_text=f"/api/threads/{thread_id}/runs").first
    expect(call.locator(".at")).to_have_text(re.compile(r"\d\d:\d\d:\d\d\.\d{3}"))
    call.locator("summary").click()
    expect(call.locator(".call-request")).to_contain_text('"events": "all"')
    expect(call.locator(".call-response")).to_contain_text("event: executor_completed")
    _, thread = api(console_server, f"/threads/{thread_id}")
    assert thread["turns"] == 1
    shot(page, "done")


def test_a_state_edit_forks_a_turn_whose_reply_reflects_it(
    page: Page, console_url: str, console_server: Serving
) -> None:
    thread_id = open_on(page, console_url, "edit", "default")
    for text in ("one", "two"):
        say(page, text)
    _, before = api(console_server, f"/threads/{thread_id}/history")
    first = before["checkpoints"][-1]["checkpoint_id"]
    page.locator(f"#lineage g.node[data-checkpoint-id='{first}']").click()
    editor = page.locator("#checkpoint-state textarea[data-executor-id=memory]")
    expect(editor).to_have_count(1, timeout=TIMEOUT)
    assert json.loads(editor.input_value()) == {"user_texts": ["one"], "turn": 1}
    shot(page, "state-of-the-first-turn")
    editor.fill(json.dumps({"user_texts": ["edited in the page"], "turn": 41}, indent=2))
    page.fill("#checkpoint-state input[name=fork-message]", "three")
    shot(page, "state-edited")
    page.click("#checkpoint-state button[data-action=fork-edited]")
    reply = page.locator("#conversation .message[data-role=assistant] .text").last
    expect(reply).to_have_text('turn 42: you said "three". Earlier you said: "edited in the page"', timeout=TIMEOUT)
    settled(page)
    # The API agrees: the fork is the head, parented on the first turn, marked edited.
    _, after = api(console_server, f"/threads/{thread_id}/history?include=turn")
    head = after["checkpoints"][0]
    assert head["previous_checkpoint_id"] == first
    assert head["turn"]["edited"] == {"from_checkpoint_id": first, "executors": ["memory"]}
    expect(page.locator("#lineage g.node.head")).to_have_attribute("data-checkpoint-id", head["checkpoint_id"])
    expect(page.locator("#lineage g.node.head text")).to_contain_text("edited")
    # The head's line is two turns; the abandoned "two" is a branch, counted apart.
    expect(page.locator("#thread-meta")).to_contain_text("2 turns (3 in all, forks included)")
    # The edited turn's own timeline: two supersteps, memory then responder.
    timeline = page.locator("#timeline .timeline").first
    expect(timeline.locator(".invocation.done .executor")).to_have_text(["memory", "responder"])
    shot(page, "forked-from-the-edit")


def test_an_edit_of_pickled_state_is_refused_with_its_reason(
    page: Page, console_url: str, console_server: Serving, browser_errors: BrowserErrors
) -> None:
    thread_id = open_on(page, console_url, "refuse", "step-pipeline")
    say(page, "count me")
    _, thread = api(console_server, f"/threads/{thread_id}")
    page.locator(f"#lineage g.node[data-checkpoint-id='{thread['checkpoint_id']}']").click()
    locked = page.locator("#checkpoint-state .executor-state.locked")
    expect(locked).to_have_count(1, timeout=TIMEOUT)
    expect(locked).to_have_attribute("data-executor-id", "step-10")
    expect(locked).to_contain_text("workflows.step_pipeline.Stamp")
    editor = locked.locator("textarea")
    assert json.loads(editor.input_value()) == {"last": {"turn": 1, "text": "count me"}}
    editor.fill('{"last": {"turn": 7, "text": "forged"}}')
    page.fill("#checkpoint-state input[name=fork-message]", "again")
    with browser_errors.provoked(page, "422"):
        page.click("#checkpoint-state button[data-action=fork-edited]")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("422 state_not_editable", timeout=TIMEOUT)
    expect(notice).to_contain_text("Executor 'step-10' keeps state JSON cannot hold")
    settled(page)
    shot(page, "edit-refused")
    # Nothing ran: the thread is as it was.
    _, after = api(console_server, f"/threads/{thread_id}")
    assert after["checkpoint_id"] == thread["checkpoint_id"] and after["turns"] == 1


def test_a_background_run_s_lifecycle_is_drawn_from_its_log(
    page: Page, console_url: str, console_server: Serving
) -> None:
    open_on(page, console_url, "later", "step-pipeline")
    expect(page.locator("#workflow svg g.node")).to_have_count(10, timeout=TIMEOUT)
    page.fill("#composer textarea[name=message]", "in the background")
    page.check("#composer input[name=background]")
    page.click("#composer button[type=submit]")
    run = page.locator("#runs .run")
    expect(run).to_have_attribute("data-status", "succeeded", timeout=TIMEOUT)
    # The run's log carried the lifecycle ("events": "all"): drawn on the timeline and the
    # graph, not listed among the run's events, which keep its output and its end.
    timeline = page.locator("#timeline .timeline", has_text="Background run")
    expect(timeline.locator(".superstep.done")).to_have_count(10, timeout=TIMEOUT)
    expect(timeline.locator(".invocation.done .executor")).to_have_text(STEPS)
    expect(page.locator("#workflow svg g.node.done")).to_have_count(10)
    expect(run.locator(".events li[data-event=output]")).to_contain_text('turn 1: "in the background"')
    assert not [e for e in run.locator(".events li").all_inner_texts() if "executor" in e or "superstep" in e]
    _, record = api(console_server, f"/runs/{run.get_attribute('data-run-id')}")
    assert record["status"] == "succeeded"
    shot(page, "background-run-timeline")
