"""A run's events as the Responses stream: ``response.created`` ... exactly one terminal event.

``ResponseEvents`` numbers what it emits (``sequence_number`` 0, 1, 2...) and is a pure
function of what it is fed, in order. A background response's stream is always built
by feeding it the run's event log from the start (``logged_run``), whether a client
watches live or replays later; ``starting_after=N`` only drops the events numbered up
to N. So a replay and a live follow carry the same numbers for the same events.

Only a run's outputs and pending requests become events; everything else the workflow
reports stays out. The terminal event carries the response rendered from the finished
run (``openai_objects``), the same object ``GET /api/responses/{id}`` returns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from functions_adapter.openai.objects import PREFIX, call_item, from_record, message_item, render, text_of
from resumable.background import EventReader, LoggedEvent, RunRecord, RunRecords
from resumable.background.follow import TERMINAL_EVENTS, follow
from resumable.core.event_pump import IdleTick

TERMINAL = {"completed": "response.completed", "failed": "response.failed", "cancelled": "response.failed"}
Frame = dict[str, Any]


@dataclass
class _OpenText:
    item_id: str
    index: int
    parts: list[str] = field(default_factory=list)


class ResponseEvents:
    def __init__(self, base: dict[str, Any]) -> None:
        self._base = base
        self._run_id = str(base["id"]).removeprefix(PREFIX)
        self._seq = -1
        self._items = 0
        self._open: dict[str, _OpenText] = {}
        self._started = False

    def _event(self, kind: str, **fields: Any) -> Frame:
        self._seq += 1
        return {"type": kind, "sequence_number": self._seq, **fields}

    def opening(self) -> list[Frame]:
        """``response.created``; a synchronous response is in progress at once."""
        background = bool(self._base["background"])
        created = self._event(
            "response.created", response=render(self._base, "queued" if background else "in_progress")
        )
        return [created] if background else [created, *self.started()]

    def started(self) -> list[Frame]:
        if self._started:
            return []
        self._started = True
        return [self._event("response.in_progress", response=render(self._base, "in_progress"))]

    def add(self, name: str, data: dict[str, Any]) -> list[Frame]:
        """One of the run's events (``output``, ``request_info``); others are not shown."""
        if name == "request_info":
            return [*self.started(), *self._call(data)]
        if name != "output":
            return []
        out, executor = self.started(), str(data.get("executor_id", ""))
        if "delta" in data:
            return out + self._delta(executor, str(data["delta"]))
        if "messages" in data:
            texts = [m.get("content", "") for m in data["messages"]]
        elif "message" in data:
            texts = [data["message"].get("content", "")]
        else:
            texts = [text_of(data.get("output"))]
        out += self._close(executor)
        for text in texts:
            out += self._message(message_item(self._next_id(), str(text)))
        return out

    def new_attempt(self) -> list[Frame]:
        """A later attempt took over the run: what the last one left open is closed."""
        return [frame for executor in list(self._open) for frame in self._close(executor)]

    def finish(self, final: dict[str, Any]) -> list[Frame]:
        """Close what is open, show the final output if nothing was streamed, then the one terminal event."""
        out = self.new_attempt()
        if self._items == 0:
            for item in final["output"]:
                self._items += 1
                out += self._message(item) if item["type"] == "message" else self._call_of(item)
        kind = TERMINAL.get(final["status"], "response.incomplete")
        return [*out, self._event(kind, response=final)]

    # -- items ----------------------------------------------------------------------------

    def _next_id(self) -> str:
        item_id = f"msg_{self._run_id}_{self._items}"
        self._items += 1
        return item_id

    def _message(self, item: dict[str, Any]) -> list[Frame]:
        index, text = self._items - 1, item["content"][0]["text"]
        opened = _OpenText(item["id"], index, [text])
        return [*self._open_text(opened), self._text_delta(opened, text), *self._done_text(opened)]

    def _open_text(self, opened: _OpenText) -> list[Frame]:
        where = {"item_id": opened.item_id, "output_index": opened.index, "content_index": 0}
        return [
            self._event(
                "response.output_item.added",
                output_index=opened.index,
                item=message_item(opened.item_id, "", done=False),
            ),
            self._event("response.content_part.added", **where, part=_part("")),
        ]

    def _text_delta(self, opened: _OpenText, delta: str) -> Frame:
        where = {"item_id": opened.item_id, "output_index": opened.index, "content_index": 0}
        return self._event("response.output_text.delta", **where, delta=delta, logprobs=[])

    def _done_text(self, opened: _OpenText) -> list[Frame]:
        text = "".join(opened.parts)
        where = {"item_id": opened.item_id, "output_index": opened.index, "content_index": 0}
        return [
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=_part(text)),
            self._event(
                "response.output_item.done", output_index=opened.index, item=message_item(opened.item_id, text)
            ),
        ]

    def _delta(self, executor: str, delta: str) -> list[Frame]:
        out: list[Frame] = []
        opened = self._open.get(executor)
        if opened is None:
            opened = self._open[executor] = _OpenText(self._next_id(), self._items - 1)
            out += self._open_text(opened)
        opened.parts.append(delta)
        return [*out, self._text_delta(opened, delta)]

    def _close(self, executor: str) -> list[Frame]:
        opened = self._open.pop(executor, None)
        return [] if opened is None else self._done_text(opened)

    def _call(self, request: dict[str, Any]) -> list[Frame]:
        self._items += 1
        return self._call_of(call_item(request))

    def _call_of(self, item: dict[str, Any]) -> list[Frame]:
        index, arguments = self._items - 1, item["arguments"]
        where = {"item_id": item["id"], "output_index": index}
        return [
            self._event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            ),
            self._event("response.function_call_arguments.delta", **where, delta=arguments),
            self._event("response.function_call_arguments.done", **where, arguments=arguments),
            self._event("response.output_item.done", output_index=index, item=item),
        ]


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


# -- a background response: its run's log, from the start ------------------------------------


async def logged_run(
    records: RunRecords, reader: EventReader, record: RunRecord, keepalive: float
) -> AsyncIterator[LoggedEvent | RunRecord | None]:
    """Every logged event of the run, attempt after attempt (the library's ``follow``: the
    log, then the last attempt's tail from its record), then its finished record; None
    after each ``keepalive`` seconds of silence. Ends early if the record is deleted."""
    async for item in follow(records, reader, record.run_id, idle_seconds=keepalive):
        if isinstance(item, IdleTick):
            yield None
        elif item.name in TERMINAL_EVENTS:  # written from the settled record: read it once
            latest = await records.get(record.run_id)
            if latest is not None and latest.value.terminal:
                yield latest.value
            return
        elif item.name != "restarted":  # a new attempt shows in the events' own attempt
            yield item


async def run_frames(
    events: ResponseEvents, source: AsyncIterator[LoggedEvent | RunRecord | None]
) -> AsyncIterator[Frame | None]:
    """The Responses stream of a logged run (None: a keep-alive)."""
    for frame in events.opening():
        yield frame
    attempt = 1
    async for item in source:
        if item is None:
            yield None
            continue
        if isinstance(item, RunRecord):
            frames = events.started() if item.started_at is not None else []
            for frame in [*frames, *events.finish(from_record(item))]:
                yield frame
            return
        frames = events.new_attempt() if item.attempt != attempt else []
        attempt = item.attempt
        for frame in [*frames, *events.add(item.name, item.data)]:
            yield frame
