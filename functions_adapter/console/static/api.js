// The one way the console talks to the app: every call goes through `Api.call` or
// `Api.stream`, which add the tab's function key, log the call (method, path, status,
// storage operations), and turn an error body into an `ApiError`.

import { logCall } from "./calls.js";
import { readEvents } from "./sse.js";

const KEY_ITEM = "workflow-console.function-key";
// The API's own rule for the IDs a caller chooses (resumable/base/ids.py): letters, digits,
// '-', '_' and single '.', starting with a letter or digit, 1 to 128 characters. Such an ID
// is one path segment and never a dot segment ('.', '..'), which the browser would resolve.
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const MAX_ID_LENGTH = 128;

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** `value` if the API takes it as an ID, else the `invalid_request` the API would answer
 * (status 0: refused here, before anything is sent). */
export function checkId(value, kind = "thread_id") {
  if (typeof value !== "string" || value.length < 1 || value.length > MAX_ID_LENGTH) {
    throw new ApiError(0, "invalid_request", `${kind} must be 1 to ${MAX_ID_LENGTH} characters long.`);
  }
  if (value.includes("..") || !ID_PATTERN.test(value)) {
    throw new ApiError(0, "invalid_request",
      `${kind} may contain only letters, digits, '-', '_' and single '.' characters, and must start with a letter or digit.`);
  }
  return value;
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

  /** The URL of `path` under the API's base; a dot segment (`.`, `..`, or escaped as `%2e`),
   * which the browser would resolve to another route, is refused. */
  url(path, query) {
    if (path.split("/").some((segment) => /^(\.|%2e){1,2}$/i.test(segment))) {
      throw new ApiError(0, "invalid_request", `Not sent: ${path} has a dot segment.`);
    }
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
