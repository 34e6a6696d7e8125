// Background runs started from this tab: each one's status read until it ends (queued →
// running → succeeded, failed or cancelled), its events followed live from
// `GET /api/runs/{id}/stream`, and a cancel button while it can still be stopped.

import { ApiError } from "./api.js";
import { outputText } from "./output.js";
import { clear, el, json, shortId } from "./dom.js";

const POLL_MS = 600;
const FINISHED = new Set(["succeeded", "failed", "cancelled"]);

export class Runs {
  /** `onLifecycle(run, event, data)`: offered each event first; true if it took it (the
   * executor lifecycle, drawn on the turn timeline rather than in the run's event list). */
  constructor(api, list, onFinished, onLifecycle) {
    this.api = api;
    this.list = list;
    this.onFinished = onFinished;
    this.onLifecycle = onLifecycle || (() => false);
    this.byThread = new Map(); // thread ID → [run view]
    this.shown = null;
  }

  /** Shows the runs of `threadId` (the ones this tab started). */
  show(threadId) {
    this.shown = threadId;
    clear(this.list);
    for (const run of this.byThread.get(threadId) || []) this.list.append(run.item);
  }

  forget(threadId) {
    for (const run of this.byThread.get(threadId) || []) run.stopped = true;
    this.byThread.delete(threadId);
    if (this.shown === threadId) clear(this.list);
  }

  /** A run the app accepted (its 202 body): listed, then followed until it ends. */
  add(threadId, accepted) {
    const status = el("span", { class: "status" }, accepted.status);
    const events = el("ol", { class: "events" });
    const cancel = el("button", { type: "button", dataset: { action: "cancel" }, class: "danger" }, "Cancel");
    const item = el("li", { class: "run", dataset: { runId: accepted.run_id, status: accepted.status } },
      el("span", { class: "id" }, `run ${shortId(accepted.run_id)}`), status, cancel, events);
    const run = { id: accepted.run_id, threadId, item, status, events, cancel, stopped: false, history: [accepted.status] };
    cancel.addEventListener("click", () => this.cancel(run));
    if (!this.byThread.has(threadId)) this.byThread.set(threadId, []);
    this.byThread.get(threadId).unshift(run);
    if (this.shown === threadId) this.list.prepend(item);
    this.follow(run);
    this.poll(run);
  }

  setStatus(run, value) {
    if (run.history[run.history.length - 1] !== value) run.history.push(value);
    run.status.textContent = run.history.join(" → ");
    run.item.dataset.status = value;
    run.cancel.hidden = FINISHED.has(value);
  }

  async poll(run) {
    while (!run.stopped) {
      let body;
      try {
        ({ body } = await this.api.call("GET", `/runs/${encodeURIComponent(run.id)}`));
      } catch (error) {
        this.note(run, error instanceof ApiError ? `${error.code}: ${error.message}` : String(error));
        return;
      }
      this.setStatus(run, body.status);
      if (FINISHED.has(body.status)) {
        if (body.error) this.note(run, `error: ${body.error.code || ""} ${body.error.message || json(body.error)}`);
        run.stopped = true;
        this.onFinished(run.threadId);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  async follow(run) {
    try {
      await this.api.stream("GET", `/runs/${encodeURIComponent(run.id)}/stream`, {
        onEvent: ({ event, data }) => {
          if (this.onLifecycle(run, event, data)) return;
          const last = run.events.lastElementChild;
          if (event === "output" && typeof data.delta === "string" && last && last.dataset.executor === data.executor_id) {
            last.lastChild.textContent += data.delta; // a model's tokens: one line per reply
            return;
          }
          const text = event === "output" ? outputText(data) : event === "done" ? `status ${data.status}` : json(data);
          const executor = event === "output" ? data.executor_id : undefined;
          run.events.append(el("li", { dataset: { event, executor } }, el("b", {}, event), " ", el("span", {}, text)));
        },
      });
    } catch (error) {
      this.note(run, error instanceof ApiError ? `stream: ${error.code}: ${error.message}` : `stream: ${error}`);
    }
  }

  async cancel(run) {
    try {
      const { body } = await this.api.call("POST", `/runs/${encodeURIComponent(run.id)}/cancel`);
      this.setStatus(run, body.status);
    } catch (error) {
      this.note(run, error instanceof ApiError ? `${error.code}: ${error.message}` : String(error));
    }
  }

  note(run, text) {
    run.events.append(el("li", { class: "note" }, text));
  }
}
