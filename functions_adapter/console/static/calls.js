// The HTTP-call list at the bottom of the page: each call the console made, newest first,
// with when it started, how long it took, its status and storage operations, and (opened)
// its request and response bodies, so any call can be repeated from curl.

import { $, el } from "./dom.js";

const MAX_LOGGED = 200;
const MAX_BODY_CHARS = 20000; // a body shown whole up to this, then cut (the page stays light)

function bodyText(value) {
  if (value === undefined || value === null || value === "") return "(none)";
  let text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (typeof value === "string") {
    try {
      text = JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      // not JSON: shown as it came
    }
  }
  return text.length > MAX_BODY_CHARS ? `${text.slice(0, MAX_BODY_CHARS)}\n… (${text.length - MAX_BODY_CHARS} more characters)` : text;
}

/** One call, logged when its answer's head arrived; returns an entry the caller can add to
 * (`setResponse`, `addEvent`, `setOps`). */
export function logCall(method, url, status, operations, started, request, kind) {
  const list = $("#calls");
  const ms = Math.round(performance.now() - started);
  const at = new Date(performance.timeOrigin + started);
  const failed = typeof status !== "number" || status >= 400;
  const ops = el("span", { class: "ops", title: "storage operations this call made (x-storage-operations)" },
    operations === null || operations === undefined ? (kind || "—") : `${operations} storage ops`);
  const response = el("pre", { class: "call-response" }, kind === "SSE" ? "" : "(reading)");
  const entry = el(
    "li",
    { class: failed ? "failed" : "ok" },
    el("details", {},
      el("summary", {},
        el("span", { class: "at" }, at.toLocaleTimeString(undefined, { hour12: false }) + `.${String(at.getMilliseconds()).padStart(3, "0")}`),
        el("span", { class: "method" }, method),
        el("span", { class: "path" }, url),
        el("span", { class: "status" }, String(status)),
        ops,
        el("span", { class: "time" }, `${ms} ms`)),
      el("div", { class: "bodies" },
        el("h5", {}, "Request body"),
        el("pre", { class: "call-request" }, bodyText(request)),
        el("h5", {}, kind === "SSE" ? "Response events" : "Response body"),
        response)),
  );
  list.prepend(entry);
  while (list.children.length > MAX_LOGGED) list.lastElementChild.remove();
  let events = [];
  return {
    entry,
    setOps(text) {
      ops.textContent = text;
    },
    setResponse(value) {
      response.textContent = bodyText(value);
    },
    addEvent(event) {
      events.push(`event: ${event.event}\ndata: ${typeof event.data === "string" ? event.data : JSON.stringify(event.data)}`);
      if (events.length > 500) events = events.slice(-500);
      response.textContent = bodyText(events.join("\n\n"));
    },
  };
}
