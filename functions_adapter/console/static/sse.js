// Server-sent events over fetch: EventSource can neither POST nor send the function key
// header, so the console reads the stream itself (the WHATWG event-stream format).

/** Calls `onEvent({event, data, id})` for each event of `response`'s body until it ends. */
export async function readEvents(response, onEvent, signal) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { event: "message", data: [], id: null };
  const dispatch = () => {
    if (event.data.length) {
      const text = event.data.join("\n");
      let data = text;
      try {
        data = JSON.parse(text);
      } catch {
        // not JSON: hand over the text as it came
      }
      onEvent({ event: event.event, data, id: event.id });
    }
    event = { event: "message", data: [], id: null };
  };
  try {
    for (;;) {
      if (signal && signal.aborted) break;
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          dispatch();
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "event") event.event = value;
          else if (field === "data") event.data.push(value);
          else if (field === "id") event.id = value;
        }
      }
    }
    dispatch();
  } finally {
    reader.releaseLock();
  }
}
