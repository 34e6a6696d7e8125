"""An SDK transport that hands every request to a function with the real transport beside it:
the one seam where ``write_faults`` (tests) and ``storage_switches`` (``devtools.serve``)
see, count and fault storage requests below the SDK's own retries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from azure.core.pipeline.transport import AsyncHttpTransport

# (service, the real transport, the request, the transport's keyword arguments) -> response
Relay = Callable[..., Awaitable[Any]]


class RelayTransport(AsyncHttpTransport):
    def __init__(self, relay: Relay, service: str, inner: AsyncHttpTransport) -> None:
        self._relay = relay
        self._service = service
        self._inner = inner

    async def __aenter__(self) -> RelayTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> None:
        await self._inner.__aexit__(*args)

    async def open(self) -> None:
        await self._inner.open()

    async def close(self) -> None:
        await self._inner.close()

    async def send(self, request: Any, **kwargs: Any) -> Any:
        return await self._relay(self._service, self._inner, request, **kwargs)


__all__ = ["Relay", "RelayTransport"]
