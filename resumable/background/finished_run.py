"""What the library needs of a finished run (callbacks, for now), as a small Protocol.

``RunRecordView`` reads a typed ``RunRecord`` through it, and ``run_record_reader``
reads one by ID, so the callback service depends on this Protocol, not on run records.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from azure.storage.blob.aio import ContainerClient

from . import records as rr


class FinishedRun(Protocol):
    """What scheduling and the payload need of a run record."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def terminal(self) -> bool: ...
    @property
    def thread_id(self) -> str | None: ...
    @property
    def callback_url(self) -> str | None: ...
    @property
    def callback_format(self) -> str | None: ...  # who renders the payload (None: ``run.completed``)
    @property
    def callback_params(self) -> Mapping[str, str]: ...  # what that renderer needs
    @property
    def origin(self) -> str | None: ...  # who started the run (``RunRequest.origin``)
    @property
    def result(self) -> Any: ...  # the synchronous 200 body (a succeeded run)
    @property
    def error(self) -> dict[str, Any] | None: ...  # a failed or cancelled run's


RunReader = Callable[[str], Awaitable[FinishedRun | None]]


@dataclass(frozen=True, slots=True)
class RunRecordView:
    """A ``RunRecord`` as a ``FinishedRun``."""

    record: rr.RunRecord

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def terminal(self) -> bool:
        return self.record.terminal

    @property
    def thread_id(self) -> str | None:
        return self.record.thread_id

    @property
    def callback_url(self) -> str | None:
        return self.record.callback_url

    @property
    def callback_format(self) -> str | None:
        return self.record.callback_format

    @property
    def callback_params(self) -> Mapping[str, str]:
        return self.record.callback_params

    @property
    def origin(self) -> str | None:
        return self.record.origin

    @property
    def result(self) -> Any:
        return self.record.status_json()["result"]

    @property
    def error(self) -> dict[str, Any] | None:
        return None if self.record.error is None else self.record.error.to_json()


def run_record_reader(container: ContainerClient) -> RunReader:
    records = rr.RunRecords(container)

    async def read(run_id: str) -> FinishedRun | None:
        found = await records.get(run_id)
        return None if found is None else RunRecordView(found.value)

    return read
