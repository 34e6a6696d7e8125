// The one way the console talks to the app: every call goes through `Api.call` or
// `Api.stream`, which add the tab's function key, log the call (method, path, status,
// storage operations), and turn an error body into an `ApiError`.

import { logCall } from "./calls.js";
import { readEvents } from "./sse.js";

const KEY_ITEM = "workflow-console.function-key";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export class Api {
  /** `base`: the API's path prefix, read off the page's own path (`/api/console` → `/api`). */
  constructor(base, onUnauthorized) {
    this.base = base;
    this.onUnauthorized = onUnauthorized;
  }

  get key() {
    return sessionStorage.getItem(KEY_ITEM) || "";
  }

  set key(value) {
    if (value) sessionStorage.setItem(KEY_ITEM, value);
    else sessionStorage.removeItem(KEY_ITEM);
  }

  headers(extra) {
    const headers = { ...extra };
    if (this.key) headers["x-functions-key"] = this.key;
    return headers;
  }

  /** A JSON call; resolves to `{status, body, headers}`, rejects with `ApiError`. */
  async call(method, path, { body, query, headers } = {}) {
    const url = this.url(path, query);
    const started = performance.now();
    const response = await this.fetch(method, url, { headers: this.headers(headers), body }, started);
    const text = await response.text();
    this.log(method, url, response.status, response.headers.get("x-storage-operations"), started, body).setResponse(text);
    const parsed = parse(text);
    if (!response.ok) throw this.failure(response.status, parsed);
    return { status: response.status, body: parsed, headers: response.headers };
  }

  /** A call answered as server-sent events: `onEvent` gets each; resolves when the stream ends. */
  async stream(method, path, { body, onEvent, signal } = {}) {
    const url = this.url(path);
    const started = performance.now();
    const response = await this.fetch(method, url, { headers: this.headers({ accept: "text/event-stream" }), body, signal }, started);
    const entry = this.log(method, url, response.status, response.headers.get("x-storage-operations"), started, body, "SSE");
    if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      const text = await response.text();
      entry.setResponse(text);
      const parsed = parse(text);
      if (!response.ok) throw this.failure(response.status, parsed);
      return parsed; // a JSON answer where a stream was asked for (a replayed turn)
    }
    let events = 0;
    await readEvents(response, (event) => {
      events += 1;
      entry.setOps(`${events} events`);
      entry.addEvent(event);
      onEvent(event);
    }, signal);
    return null;
  }

  /** `fetch`, never cached, a JSON body if there is one; a network failure is logged and
   * becomes an `ApiError` (an abort stays an abort). */
  async fetch(method, url, { headers, body, signal }, started) {
    const init = { method, headers, cache: "no-store", credentials: "same-origin", signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    try {
      return await fetch(url, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      this.log(method, url, "network error", null, started, body);
      throw new ApiError(0, "network_error", `The app did not answer: ${error.message}`);
    }
  }

  url(path, query) {
    const url = new URL(this.base + path, location.origin);
    for (const [name, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    return url.pathname + url.search;
  }

  failure(status, parsed) {
    const error = parsed && typeof parsed === "object" && parsed.error ? parsed.error : {};
    if (status === 401 || status === 403) this.onUnauthorized(status, error);
    return new ApiError(status, error.code || `http_${status}`, error.message || `HTTP ${status}`, error.details);
  }

  /** The call in the page's list (`calls.js`), with its request body; returns the entry. */
  log(method, url, status, operations, started, request, kind) {
    return logCall(method, url, status, operations, started, request, kind);
  }
}

function parse(text) {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
