// The console: one page over the app's public API. Threads on the left, a thread's
// conversation, pending requests and background runs in the middle, its checkpoint lineage
// and workflow graph on the right, and every HTTP call it made at the bottom.

import { Api, ApiError, checkId } from "./api.js";
import { Timeline, drawState, forgetTurns, isLifecycle, remarkGraph } from "./debugger.js";
import { $, clear, el, json, shortId, when } from "./dom.js";
import { drawGraph } from "./graph.js";
import { drawLineage } from "./lineage.js";
import { outputText } from "./output.js";
import { Runs } from "./runs.js";

const PAGE = 20; // turns per history page: a 500-turn thread opens with one page
const BRANCH_PAGE = 10; // checkpoints read along each replaced branch
const MAX_BRANCHES = 10;
const THREAD_PAGES = 5; // listing pages of 100 read to sort newest first

const api = new Api(location.pathname.replace(/\/console\/?$/, ""), () => openKeyDialog());
const runTimelines = new Map(); // background run ID → its Timeline
const runs = new Runs(api, $("#runs"), (threadId) => {
  touchThread(threadId);
  if (view && view.threadId === threadId) act(refresh);
}, (run, event, data) => {
  if (!isLifecycle(event)) return false;
  if (view && view.threadId === run.threadId) {
    if (!runTimelines.has(run.id)) runTimelines.set(run.id, new Timeline($("#timeline"), `Background run ${shortId(run.id)}`));
    runTimelines.get(run.id).onEvent(event, data);
  }
  return true;
});
const graphs = new Map(); // workflow name → GET /api/workflows/{name} body
let workflows = [];
let threadList = []; // the listing as last read, newest first
let view = null; // the open thread

// -- small things ---------------------------------------------------------------------------

function notify(text, kind = "info") {
  const notice = $("#notice");
  notice.textContent = text;
  notice.className = kind;
  notice.hidden = false;
  clearTimeout(notify.timer);
  if (kind === "info") notify.timer = setTimeout(() => (notice.hidden = true), 6000);
}

/** Runs an action; an API error becomes a notice naming its code, never an uncaught error. */
async function act(work) {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ApiError) notify(`${error.status || ""} ${error.code}: ${error.message}`.trim(), "error");
    else if (error.name !== "AbortError") notify(String(error.message || error), "error");
    return undefined;
  }
}

function openKeyDialog() {
  const dialog = $("#key-dialog");
  if (!dialog.open) dialog.showModal();
  $("input[name=key]", dialog).focus();
}

// -- workflows and threads ------------------------------------------------------------------

async function loadWorkflows() {
  const { body } = await api.call("GET", "/workflows");
  workflows = body.workflows || [];
  const select = $("#new-thread select[name=workflow]");
  clear(select);
  for (const workflow of workflows) {
    const newest = (workflow.versions || []).find((v) => v.newest);
    select.append(el("option", { value: workflow.name, selected: workflow.default }, `${workflow.name}${newest ? ` (${newest.version})` : ""}`));
  }
}

/** The listing, newest first. Storage lists by ID, so up to THREAD_PAGES pages are read and
 * sorted here, the list drawn after each page; a turn or a delete then edits it in place. */
async function loadThreads() {
  const prefix = $("#thread-filter").value.trim();
  const asked = (loadThreads.asked = (loadThreads.asked || 0) + 1);
  let found = [];
  let cursor = null;
  let pages = 0;
  do {
    const { body } = await api.call("GET", "/threads", { query: { prefix, limit: 100, cursor } });
    if (asked !== loadThreads.asked) return; // the filter changed meanwhile
    found = found.concat(body.threads);
    cursor = body.next_cursor;
    pages += 1;
    threadList = found;
    drawThreads(cursor !== null && pages >= THREAD_PAGES);
  } while (cursor && pages < THREAD_PAGES);
}

function drawThreads(truncated) {
  threadList.sort((a, b) => (b.updated_at || 0) - (a.updated_at || 0));
  const list = clear($("#threads"));
  for (const thread of threadList) {
    const tags = Object.entries(thread.metadata || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    list.append(
      el(
        "li",
        { dataset: { threadId: thread.thread_id }, class: view && view.threadId === thread.thread_id ? "current" : "" },
        el("button", { type: "button", onclick: () => act(() => openThread(thread.thread_id)) },
          el("span", { class: "id" }, thread.thread_id),
          el("span", { class: "when quiet" }, when(thread.updated_at)),
          tags ? el("span", { class: "tags quiet" }, tags) : null),
      ),
    );
  }
  const count = threadList.length;
  $("#threads-note").textContent = truncated
    ? `The newest of the first ${count} threads by ID; filter by prefix to find others.`
    : count ? `${count} thread${count === 1 ? "" : "s"}, newest first.` : "No threads yet.";
}

/** A turn moved this thread's head: first in the list, without reading the listing again. */
function touchThread(threadId) {
  const known = threadList.find((t) => t.thread_id === threadId);
  const prefix = $("#thread-filter").value.trim();
  if (known) known.updated_at = Date.now() / 1000;
  else if (threadId.startsWith(prefix)) threadList.push({ thread_id: threadId, updated_at: Date.now() / 1000, metadata: {} });
  drawThreads(false);
}

function dropThread(threadId) {
  threadList = threadList.filter((t) => t.thread_id !== threadId);
  drawThreads(false);
}

// -- one thread -----------------------------------------------------------------------------

async function openThread(threadId, workflow) {
  checkId(threadId); // a link or the form may carry any text: only an ID the API takes opens
  history.replaceState(null, "", `${location.pathname}?thread=${encodeURIComponent(threadId)}`);
  view = { threadId, workflow: workflow || defaultWorkflow(), version: null, head: null, info: null, lineage: [], nodes: new Map(), next: null, selected: null, fork: null };
  $("#welcome").hidden = true;
  $("#thread-pane").hidden = false;
  $("#thread-title").textContent = threadId;
  for (const item of document.querySelectorAll("#threads li")) item.classList.toggle("current", item.dataset.threadId === threadId);
  setFork(null);
  clear($("#conversation"));
  clear($("#pending"));
  clear($("#checkpoint-detail")).hidden = true;
  forgetTurns();
  runTimelines.clear();
  runs.show(threadId);
  // Whether it exists, asked of the listing (always 200) rather than by a 404 from
  // GET /threads/{id}, which the browser would log as a failed load.
  const { body } = await api.call("GET", "/threads", { query: { prefix: threadId, limit: 1 } });
  view.exists = body.threads.length > 0 && body.threads[0].thread_id === threadId;
  await refresh();
}

function defaultWorkflow() {
  const chosen = workflows.find((w) => w.default);
  return chosen ? chosen.name : null;
}

/** Re-reads the thread: its record, then the newest page of its lineage with each turn. The
 * view changes only once everything is read, so a click meanwhile sees a whole state. */
async function refresh(attempt = 0) {
  const current = view;
  const read = { lineage: [], nodes: new Map(), next: null, workflow: current.workflow, version: current.version };
  // The record and the newest history page side by side: each reads the thread's pointer.
  const [info] = current.exists
    ? await Promise.all([
        api.call("GET", `/threads/${encodeURIComponent(current.threadId)}`).then((answer) => answer.body),
        loadHistory(current.threadId, read),
      ])
    : [null];
  if (view !== current) return;
  const moved = info && info.checkpoint_id !== (read.lineage[0] || {}).checkpoint_id;
  if (moved && attempt < 3) return refresh(attempt + 1); // a turn landed between the two reads
  Object.assign(current, read, { info, head: info ? info.checkpoint_id : null });
  render(current);
  await showWorkflow(current);
  performance.mark("console:thread-drawn"); // what bench/console_open.py times
}

/** One page of the head's line (or the page after `before`) into `read`, then the branches. */
async function loadHistory(threadId, read, before) {
  const query = { include: "turn", limit: PAGE, before };
  const { body } = await api.call("GET", `/threads/${encodeURIComponent(threadId)}/history`, { query });
  for (const entry of body.checkpoints) read.nodes.set(entry.checkpoint_id, entry);
  read.lineage.push(...body.checkpoints);
  read.next = body.next;
  const newest = read.lineage[0];
  if (newest) {
    read.workflow = newest.workflow || read.workflow;
    read.version = newest.workflow_version || read.version;
  }
  await loadBranches(threadId, read);
}

/** The lines a fork replaced: each `replaced_head_id` not yet read, a page along it. */
async function loadBranches(threadId, read) {
  const seen = new Set();
  for (let round = 0; round < MAX_BRANCHES; round += 1) {
    const missing = [...read.nodes.values()].map((n) => n.replaced_head_id).find((id) => id && !read.nodes.has(id) && !seen.has(id));
    if (!missing) return;
    seen.add(missing);
    try {
      const query = { include: "turn", limit: BRANCH_PAGE, from: missing };
      const { body } = await api.call("GET", `/threads/${encodeURIComponent(threadId)}/history`, { query });
      for (const entry of body.checkpoints) if (!read.nodes.has(entry.checkpoint_id)) read.nodes.set(entry.checkpoint_id, entry);
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) throw error; // retention took it
    }
  }
}

function render(current) {
  const info = current.info;
  $("#thread-meta").textContent = info
    ? `${headTurns(current, info)} · workflow ${current.workflow || "?"}@${current.version || "?"} · head ${shortId(current.head)}` +
      (Object.keys(info.metadata || {}).length ? ` · metadata ${JSON.stringify(info.metadata)}` : "")
    : `New thread: its first message starts it on workflow ${current.workflow || "(the default)"}.`;
  renderConversation(current);
  renderPending(current);
  renderLineage(current);
  if (current.selected && current.nodes.has(current.selected)) renderDetail(current, current.selected);
}

/** The turns on the head's line (what its replies count), not every turn the thread took:
 * a fork's abandoned branch is not the head's. Read off the lineage pages; while older pages
 * are unread, a lower bound. */
function headTurns(current, info) {
  const line = current.lineage.length;
  const text = `${line}${current.next ? "+" : ""} turn${line === 1 && !current.next ? "" : "s"}`;
  const forked = info.turns > line && !current.next ? ` (${info.turns} in all, forks included)` : "";
  return text + forked;
}

function renderConversation(current) {
  const list = clear($("#conversation"));
  for (const entry of [...current.lineage].reverse()) {
    const turn = entry.turn || { in: [], out: [] };
    list.append(el("li", { class: "turn-mark", dataset: { checkpointId: entry.checkpoint_id } },
      el("button", { type: "button", class: "quiet", onclick: () => select(entry.checkpoint_id) }, `checkpoint ${shortId(entry.checkpoint_id)} · ${when(entry.timestamp)}`)));
    if (!turn.in.length) list.append(message("note", "(continued: an answer to a request, or nothing new)"));
    for (const sent of turn.in) list.append(message(sent.role, sent.content));
    for (const answered of turn.out) list.append(message(answered.role || "assistant", answered.content));
    if (entry.status === "pending_requests") list.append(message("note", "(waiting for an answer: see below)"));
  }
  $("#load-older").hidden = !current.next;
  scrollToNewest();
}

/** The conversation opens (and stays) at its newest turn. */
function scrollToNewest() {
  const list = $("#conversation");
  list.scrollTop = list.scrollHeight;
}

function message(role, text) {
  return el("li", { class: "message", dataset: { role } }, el("span", { class: "role" }, role), el("p", { class: "text" }, text));
}

function renderPending(current) {
  const box = clear($("#pending"));
  const head = current.nodes.get(current.head);
  const requests = head && head.turn ? head.turn.pending_requests || [] : [];
  current.pending = requests.length > 0;
  lockComposer();
  if (!requests.length) return;
  box.append(el("h3", {}, "Waiting for you"));
  for (const request of requests) {
    const answer = el("input", { name: "answer", placeholder: request.response_type === "str" ? "your answer" : `a JSON ${request.response_type}`, "aria-label": "Answer" });
    box.append(
      el(
        "div",
        { class: "request", dataset: { requestId: request.request_id } },
        el("p", {}, `Request ${shortId(request.request_id)} expects a ${request.response_type}:`),
        el("pre", { class: "request-data" }, json(request.data)),
        el("div", { class: "send-row" },
          answer,
          el("button", { type: "button", dataset: { action: "answer" }, onclick: () => act(() => respond(request, typed(request, answer.value))) }, "Answer"),
          el("button", { type: "button", dataset: { action: "approve" }, onclick: () => act(() => respond(request, approval(request))) }, "Approve")),
      ),
    );
  }
}

function approval(request) {
  return request.response_type === "bool" ? true : "approved";
}

function typed(request, text) {
  if (request.response_type === "str") return text;
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(0, "invalid_answer", `This request expects a JSON ${request.response_type}.`);
  }
}

function renderLineage(current) {
  const box = clear($("#lineage"));
  if (!current.nodes.size) {
    box.append(el("p", { class: "quiet" }, "No checkpoint yet."));
    return;
  }
  box.append(drawLineage(current.nodes, current.head, current.selected, select));
  if (current.next) box.append(el("p", { class: "quiet" }, "Older checkpoints: “Load older turns”."));
}

function select(checkpointId) {
  if (!view.nodes.has(checkpointId)) return;
  view.selected = checkpointId;
  renderLineage(view);
  renderDetail(view, checkpointId);
}

function renderDetail(current, checkpointId) {
  const entry = current.nodes.get(checkpointId);
  const box = clear($("#checkpoint-detail"));
  box.hidden = false;
  const { turn, ...metadata } = entry;
  const isHead = checkpointId === current.head;
  box.append(
    el("h4", {}, `Checkpoint ${shortId(checkpointId)}${isHead ? " (head)" : ""}`),
    el("ol", { class: "detail-turn" }, ...(turn ? [...turn.in, ...turn.out].map((m) => message(m.role, m.content)) : [])),
    el("pre", { class: "metadata" }, json(metadata)),
    isHead
      ? el("p", { class: "quiet" }, "This is the head: the next message continues from it.")
      : el("button", { type: "button", dataset: { action: "fork" }, onclick: () => setFork(checkpointId) }, "Fork from here"),
    el("div", { class: "state", id: "checkpoint-state" }, el("p", { class: "quiet" }, "Reading its state…")),
  );
  act(() => showState(current, checkpointId));
}

/** The selected checkpoint's executor states, each editable, and a fork from an edit. */
async function showState(current, checkpointId) {
  const path = `/threads/${encodeURIComponent(current.threadId)}/checkpoints/${encodeURIComponent(checkpointId)}`;
  let state;
  try {
    ({ body: state } = await api.call("GET", `${path}/state`));
  } catch (error) {
    const box = $("#checkpoint-state");
    if (box && view === current && current.selected === checkpointId) clear(box).append(el("p", { class: "quiet" }, `State unavailable: ${error.message}`));
    throw error;
  }
  const box = $("#checkpoint-state");
  if (!box || view !== current || current.selected !== checkpointId) return;
  drawState(box, state, {
    act,
    onFork: async (executorStates, text) => {
      if (current.busy) throw new Error("A turn is still in progress: its reply comes first.");
      const body = { executor_states: executorStates, events: "all" };
      if (text) body.messages = text;
      await streamTurn(current, `${path}/fork`, body, `Fork from ${shortId(checkpointId)} with edited state`);
    },
  });
}

/** A thread waiting on a request takes an answer, not a message (the API would say 409),
 * unless the message forks from an older checkpoint. */
function lockComposer() {
  const busy = Boolean(view && view.busy);
  const locked = Boolean(view && view.pending && !view.fork);
  const composer = $("#composer");
  $("button[type=submit]", composer).disabled = locked || busy;
  for (const button of document.querySelectorAll("[data-action=fork-edited], #pending button")) button.disabled = busy;
  $("textarea", composer).placeholder = busy
    ? "A turn is in progress: Send comes back when its reply is in"
    : locked ? "Answer the request above first (or fork from an older checkpoint)" : "Message";
}

function setFork(checkpointId) {
  const composer = $("#composer");
  if (view) view.fork = checkpointId;
  const banner = $(".fork-banner", composer);
  banner.hidden = !checkpointId;
  $("code", banner).textContent = checkpointId || "";
  if (checkpointId) {
    composer.dataset.fork = checkpointId;
    $("textarea", composer).focus();
  } else {
    delete composer.dataset.fork;
  }
  lockComposer();
}

async function showWorkflow(current) {
  const box = $("#workflow");
  const name = current.workflow;
  if (!name) {
    clear(box).append(el("p", { class: "quiet" }, "No workflow chosen."));
    return;
  }
  if (!graphs.has(name)) {
    try {
      graphs.set(name, (await api.call("GET", `/workflows/${encodeURIComponent(name)}`)).body);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      clear(box).append(el("p", { class: "quiet" }, `${name}: ${error.code}: ${error.message}`));
      return;
    }
  }
  if (view !== current) return;
  const described = graphs.get(name);
  const version = described.versions.find((v) => v.version === current.version) || described.versions.find((v) => v.newest);
  clear(box).append(
    el("p", {}, `${described.name} · version ${version.version}${version.newest ? " (newest)" : ""} · policy ${described.policy}`),
    el("p", { class: "quiet" }, `Agent Framework name: ${version.workflow_name || "?"}`),
    el("p", { class: "signature", title: "graph signature: a resume checks it against the checkpoint's" }, `signature ${version.signature || "unavailable"}`),
    version.graph ? drawGraph(version.graph) : el("p", { class: "quiet" }, version.graph_unavailable || "No graph."),
  );
  remarkGraph();
}

// -- sending --------------------------------------------------------------------------------

async function send(text, background) {
  const current = view;
  const body = {};
  if (text) body.messages = text;
  if (current.fork) body.from_checkpoint_id = current.fork;
  if (!current.head && current.workflow) body.workflow = current.workflow;
  const path = `/threads/${encodeURIComponent(current.threadId)}/runs`;
  body.events = "all"; // the executor lifecycle too: the timeline and the graph follow it
  if (background) {
    body.background = true;
    const { body: accepted } = await api.call("POST", path, { body });
    setFork(null);
    runs.add(current.threadId, accepted);
    current.exists = true;
    return;
  }
  if (text) $("#conversation").append(message("user", text));
  scrollToNewest();
  await streamTurn(current, path, body, text ? `Turn: ${text}` : "Turn");
  setFork(null);
}

async function respond(request, value) {
  const path = `/threads/${encodeURIComponent(view.threadId)}/runs`;
  await streamTurn(view, path, { responses: { [request.request_id]: value }, events: "all" }, `Answer to ${shortId(request.request_id)}`);
}

/** One turn as a live stream: each output as it arrives, each superstep and executor on the
 * timeline and the graph, then the thread read again. Send is off until it is all drawn. */
async function streamTurn(current, path, body, label) {
  const list = $("#conversation");
  const bubbles = new Map();
  const composer = $("#composer");
  const started = new Date().toLocaleTimeString(undefined, { hour12: false });
  let timeline = null;
  composer.classList.add("busy");
  current.busy = true;
  lockComposer();
  try {
    const replayed = await api.stream("POST", path, {
      body,
      onEvent: ({ event, data }) => {
        if (isLifecycle(event)) {
          timeline ||= new Timeline($("#timeline"), `${started} · ${label}`);
          timeline.onEvent(event, data);
          return;
        }
        if (timeline) timeline.onEvent(event, data);
        if (event === "output") {
          const executor = data.executor_id || "";
          const text = outputText(data);
          let bubble = bubbles.get(executor);
          if (!bubble) {
            bubble = message(data.message ? data.message.role : "assistant", "");
            bubble.classList.add("streaming");
            bubbles.set(executor, bubble);
            list.append(bubble);
          }
          $(".text", bubble).textContent += text;
          scrollToNewest();
        } else if (event === "request_info") {
          list.append(message("note", "(the workflow asks for an answer)"));
        } else if (event === "error") {
          notify(`error: ${data.error ? data.error.message : json(data)}`, "error");
        }
      },
    });
    if (replayed) notify("The app answered with a stored reply (a replay).");
    for (const bubble of bubbles.values()) bubble.classList.remove("streaming");
    current.exists = true;
    touchThread(current.threadId);
    if (view === current) await refresh();
  } finally {
    current.busy = false;
    lockComposer();
    composer.classList.remove("busy"); // only once the thread is drawn again
    for (const bubble of bubbles.values()) bubble.classList.remove("streaming");
  }
}

// -- delete ---------------------------------------------------------------------------------

async function deleteThread() {
  const current = view;
  const path = `/threads/${encodeURIComponent(current.threadId)}`;
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const { status } = await api.call("DELETE", path);
    if (status === 204) break;
    await new Promise((resolve) => setTimeout(resolve, 1000)); // 202: a repeat call finishes it
  }
  runs.forget(current.threadId);
  view = null;
  history.replaceState(null, "", location.pathname);
  $("#thread-pane").hidden = true;
  $("#welcome").hidden = false;
  notify(`Thread ${current.threadId} deleted: its checkpoints, runs and records are gone.`);
  dropThread(current.threadId);
}

// -- wiring ---------------------------------------------------------------------------------

function wire() {
  $("#new-thread").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    act(() => openThread(form.thread_id.value.trim(), form.workflow.value || null));
  });
  let typing;
  $("#thread-filter").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => act(loadThreads), 250);
  });
  $("#composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    if (!view) return;
    if (form.classList.contains("busy")) return notify("A turn is still in progress: its reply comes first.");
    const text = form.message.value;
    if (!text.trim() && !view.fork) return notify("Type a message first.");
    form.message.value = "";
    act(() => send(text, form.background.checked));
  });
  $("#composer textarea").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("#composer").requestSubmit();
  });
  $("[data-action=cancel-fork]").addEventListener("click", () => setFork(null));
  $("#load-older").addEventListener("click", () => act(async () => {
    const current = view;
    const read = { lineage: [...current.lineage], nodes: new Map(current.nodes), next: null, workflow: current.workflow, version: current.version };
    await loadHistory(current.threadId, read, current.next);
    if (view !== current) return;
    Object.assign(current, read);
    render(current);
  }));
  $("[data-action=refresh]").addEventListener("click", () => act(refresh));
  const remove = $("[data-action=delete-thread]");
  const confirm = $("[data-action=confirm-delete]");
  remove.addEventListener("click", () => {
    confirm.hidden = false;
    setTimeout(() => (confirm.hidden = true), 6000);
  });
  confirm.addEventListener("click", () => {
    confirm.hidden = true;
    act(deleteThread);
  });
  $("#key-button").addEventListener("click", openKeyDialog);
  $("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    api.key = event.currentTarget.key.value.trim();
    event.currentTarget.key.value = "";
    $("#key-dialog").close();
    notify(api.key ? "Key kept for this tab." : "Key cleared.");
    act(start);
  });
  $("#key-dialog [data-action=close]").addEventListener("click", () => $("#key-dialog").close());
}

async function start() {
  const wanted = new URLSearchParams(location.search).get("thread");
  const workflowsRead = loadWorkflows();
  const opened = wanted && !view ? workflowsRead.then(() => openThread(wanted)) : null;
  await Promise.all([workflowsRead, loadThreads(), opened]);
}

wire();
const suggested = `thread-${Math.random().toString(36).slice(2, 8)}`;
$("#new-thread input[name=thread_id]").value = suggested;
act(start);
