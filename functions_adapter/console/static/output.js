// What a streamed `output` event says, as text: a whole message (or an agent's messages), a
// model's token (`delta`), or any other output as JSON.

import { json } from "./dom.js";

export function outputText(data) {
  if (data.message) return data.message.content;
  if (Array.isArray(data.messages)) return data.messages.map((m) => m.content).join("\n");
  if (typeof data.delta === "string") return data.delta;
  return typeof data.output === "string" ? data.output : json(data.output);
}
