// The unmodified @ag-ui/client HttpAgent against a served app: node tests/e2e/ag_ui_client.mjs <base>/api
// Prints one JSON object of what it saw; tests/e2e/test_ag_ui_client.py asserts on it.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const url = `${process.argv[2]}/ag-ui`;
const seen = {};

function lastReply(agent) {
  const replies = agent.messages.filter((m) => m.role === "assistant");
  return replies.length ? replies[replies.length - 1].content : null;
}

function say(agent, text) {
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
}

// Two runs on one thread: the second reply counts turn 2 and quotes the first message.
const threadId = `agui-${randomUUID()}`;
const first = new HttpAgent({ url, threadId });
say(first, "hello");
await first.runAgent();
seen.firstReply = lastReply(first);
say(first, "again");
await first.runAgent();
seen.secondReply = lastReply(first);

// A fresh agent on the same thread reloads it: the history arrives as a MESSAGES_SNAPSHOT.
const fresh = new HttpAgent({ url, threadId });
const events = [];
await fresh.runAgent({}, { onEvent: ({ event }) => void events.push(event.type) });
seen.reloadEvents = events;
seen.sameHistory =
  JSON.stringify(fresh.messages.map((m) => [m.id, m.role, m.content])) ===
  JSON.stringify(first.messages.map((m) => [m.id, m.role, m.content]));
seen.reloadCount = fresh.messages.length;

// An approval: the run ends interrupted; the next run resumes it with the answer.
const approver = new HttpAgent({ url, threadId: `agui-${randomUUID()}` });
say(approver, "this needs approval");
await approver.runAgent();
seen.interrupts = approver.pendingInterrupts.map((i) => ({ id: i.id, reason: i.reason }));
const resume = approver.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: "yes" }));
await approver.runAgent({ resume });
seen.approvedReply = lastReply(approver);
seen.pendingAfter = approver.pendingInterrupts.length;

// A refused run: RUN_ERROR with our code, after RUN_STARTED.
const refused = new HttpAgent({ url, threadId: "not..valid" });
say(refused, "hi");
const refusedEvents = [];
await refused.runAgent(
  {},
  {
    onEvent: ({ event }) => void refusedEvents.push(event.type),
    onRunErrorEvent: ({ event }) => void (seen.errorCode = event.code),
  },
);
seen.refusedEvents = refusedEvents;

console.log(JSON.stringify(seen));
