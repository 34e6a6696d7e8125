// The console as a debugger: a turn's executor lifecycle (`"events": "all"`) drawn live, as a
// timeline of supersteps and invocations and as marks on the workflow graph; and a
// checkpoint's state (`GET .../checkpoints/{id}/state`), editable where it is plain JSON, to
// fork a turn from (`POST .../checkpoints/{id}/fork`). Everything is text: state is shown as
// JSON and parsed with JSON.parse, never run.

import { $, clear, el, json, shortId } from "./dom.js";

const LIFECYCLE = new Set(["superstep_started", "superstep_completed", "executor_invoked", "executor_completed", "executor_failed"]);
const KEPT_TURNS = 10; // timelines kept on the page, newest first

/** Whether a stream event is one of the executor lifecycle's (`"events": "all"`). */
export function isLifecycle(event) {
  return LIFECYCLE.has(event);
}

function ms(value) {
  return typeof value === "number" ? `${value < 10 ? value.toFixed(1) : Math.round(value)} ms` : "";
}

/** The graph's node for an executor, if the graph is drawn. */
function graphNode(executorId) {
  for (const node of document.querySelectorAll("#workflow svg .node")) if (node.dataset.executorId === executorId) return node;
  return null;
}

// The last turn's marks, kept so a graph drawn again (the thread re-read) shows them still.
const marks = new Map();

function markGraph(executorId, state) {
  marks.set(executorId, state);
  const node = graphNode(executorId);
  if (!node) return;
  node.classList.remove("running", "done", "failed");
  node.classList.add(state);
}

/** Put the last turn's marks on a graph just drawn. */
export function remarkGraph() {
  for (const node of document.querySelectorAll("#workflow svg .node")) {
    const state = marks.get(node.dataset.executorId);
    if (state) node.classList.add(state);
  }
}

/** Forget the marks and the timelines (another thread opened). */
export function forgetTurns() {
  clearGraph();
  clear($("#timeline"));
}

function clearGraph() {
  marks.clear();
  for (const node of document.querySelectorAll("#workflow svg .node")) node.classList.remove("running", "done", "failed");
}

function payload(title, value) {
  return el("details", { class: "payload" }, el("summary", {}, title), el("pre", {}, json(value)));
}

/** One turn's timeline: a section per superstep, a row per invocation. */
export class Timeline {
  constructor(box, label) {
    this.steps = new Map(); // iteration → {section, head, rows}
    this.rows = new Map(); // executor ID → its open rows, oldest first (one per message handed it)
    this.count = el("span", { class: "quiet" }, "");
    this.body = el("ol", { class: "supersteps" });
    this.root = el("details", { class: "timeline", open: true }, el("summary", {}, label, " ", this.count), this.body);
    for (const older of box.querySelectorAll(".timeline")) older.open = false;
    box.prepend(this.root);
    while (box.children.length > KEPT_TURNS) box.lastElementChild.remove();
    clearGraph();
  }

  /** Takes any stream event; true if it was a lifecycle event (drawn here). */
  onEvent(event, data) {
    if (!LIFECYCLE.has(event)) {
      if (event === "error") this.root.classList.add("failed");
      return false;
    }
    if (event === "superstep_started") {
      const head = el("span", { class: "step-head" }, `superstep ${data.iteration}`, el("span", { class: "quiet" }, " running"));
      const rows = el("ol", { class: "invocations" });
      const section = el("li", { class: "superstep running", dataset: { iteration: data.iteration } }, head, rows);
      this.steps.set(data.iteration, { section, head, rows });
      this.body.append(section);
      this.count.textContent = `${this.steps.size} superstep${this.steps.size === 1 ? "" : "s"}`;
    } else if (event === "superstep_completed") {
      const step = this.steps.get(data.iteration);
      if (step) {
        step.section.classList.replace("running", "done");
        step.head.lastChild.textContent = ` · ${ms(data.duration_ms)}`;
      }
    } else if (event === "executor_invoked") {
      const step = this.steps.get(data.iteration) || [...this.steps.values()].pop();
      const status = el("span", { class: "state" }, "running");
      const row = el("li", { class: "invocation running", dataset: { executorId: data.executor_id } },
        el("span", { class: "executor" }, data.executor_id), status, el("span", { class: "duration" }, ""),
        payload("input", data.input));
      row.status = status;
      if (!this.rows.has(data.executor_id)) this.rows.set(data.executor_id, []);
      this.rows.get(data.executor_id).push(row);
      if (step) step.rows.append(row);
      markGraph(data.executor_id, "running");
    } else {
      const row = (this.rows.get(data.executor_id) || []).shift();
      const failed = event === "executor_failed";
      markGraph(data.executor_id, failed ? "failed" : "done");
      if (!row) return true;
      row.classList.replace("running", failed ? "failed" : "done");
      row.status.textContent = failed ? `failed: ${data.error ? data.error.type : "error"}` : "done";
      $(".duration", row).textContent = ms(data.duration_ms);
      if (!failed) row.append(payload(`outputs (${(data.outputs || []).length})`, data.outputs || []));
    }
    return true;
  }
}

/** A checkpoint's state, each executor's in a text box to edit, and a form that forks a turn
 * from the edit: `onFork(executorStates, message)` sends it, run through `act` (which shows
 * an error as a notice). */
export function drawState(box, state, { onFork, act }) {
  clear(box);
  const editors = [];
  box.append(el("h5", {}, `State of checkpoint ${shortId(state.checkpoint_id)}`));
  if (state.edited) {
    box.append(el("p", { class: "edited-note" }, `Edited: its turn ran from ${shortId(state.edited.from_checkpoint_id)} with new state for ${state.edited.executors.join(", ")}.`));
  }
  for (const executor of state.executors) {
    const original = json(executor.state);
    const editor = el("textarea", { class: "state-edit", rows: Math.min(Math.max(original.split("\n").length, 2), 24), spellcheck: "false", "aria-label": `State of ${executor.executor_id}`, dataset: { executorId: executor.executor_id } });
    editor.value = original;
    editors.push({ id: executor.executor_id, editor, original });
    box.append(el("div", { class: executor.editable ? "executor-state" : "executor-state locked", dataset: { executorId: executor.executor_id } },
      el("h6", {}, executor.executor_id, executor.editable ? "" : el("span", { class: "quiet" }, " · not plain JSON")),
      executor.editable ? null : el("p", { class: "quiet" }, `Saved as pickled values (${executor.not_json.join("; ")}): shown by its fields; the API refuses an edit of it.`),
      editor));
  }
  box.append(el("h6", {}, "Shared state"), el("pre", { class: "shared-state" }, json(state.shared_state)));
  const message = el("input", { name: "fork-message", placeholder: "message for the forked turn", "aria-label": "Message for the forked turn" });
  const fork = () => {
    const changed = {};
    for (const { id, editor, original } of editors) {
      if (editor.value === original) continue;
      try {
        changed[id] = JSON.parse(editor.value);
      } catch (error) {
        throw new Error(`The state of ${id} is not JSON: ${error.message}`);
      }
    }
    if (!Object.keys(changed).length) throw new Error("Change an executor's state first.");
    return onFork(changed, message.value.trim());
  };
  box.append(el("div", { class: "send-row" }, message, el("button", { type: "button", dataset: { action: "fork-edited" }, onclick: () => act(fork) }, "Fork with this state")));
}
