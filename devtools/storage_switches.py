"""Storage switches for a separate app process, set by environment variables (devtools only).

``devtools.write_faults`` arms one fault at a time from inside a test's process; a drill that
runs the app as separate ``devtools.serve`` processes (``bench/scale_out.py``) cannot reach
in there. These two switches, read once when ``devtools.serve`` starts, do it from outside,
at the same place: the transport of every storage client the app builds
(``resumable.storage.clients.transport_hook``), below the SDK's retry policy, so the SDK and
the app react as they would to a real network.

* ``DEVTOOLS_STORAGE_FAULTS="<rate>[,<seed>]"``: each request, blob or queue, read or write,
  fails with probability ``rate``: half of them are never sent (connection refused: an
  outage), half are sent and land, then their answer is lost (a timeout). The SDK retries
  both, so a lost answer meets its own landed write (409 on a create, 412 on a replace, 404
  on a delete, a second queue message), and three faults in a row reach the app as an outage.
* ``DEVTOOLS_STORAGE_OPS="<path>"``: every request that leaves the client is counted (each
  attempt, as storage bills it) by service, method and blob prefix (``threads/``,
  ``run-order/``, ...); ``dump`` writes the tally as JSON to ``path`` when the server stops.

The host's own queue listener (``devtools.queue_runner``) builds its clients apart, so its
polls are neither faulted nor counted: they are the Functions host's, not the app's.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.core.pipeline.transport import AioHttpTransport, AsyncHttpTransport

from devtools.relay_transport import RelayTransport
from resumable.storage import clients as storage_client

FAULTS_ENV = "DEVTOOLS_STORAGE_FAULTS"
OPS_ENV = "DEVTOOLS_STORAGE_OPS"


def prefix_of(service: str, url: str) -> str:
    """What a request touches, coarsely: ``blob threads/``, ``blob container``, ``queue runs``."""
    path = [unquote(p) for p in urlsplit(url).path.split("/") if p]
    if path and path[0] == "devstoreaccount1":  # Azurite's path-style account
        path = path[1:]
    if service == "queue":
        return f"queue {path[0] if path else ''}"
    if len(path) < 2:  # the container itself: create, list
        return "blob container"
    return f"blob {path[1]}/" if len(path) > 2 else "blob (root)"


class Switches:
    """The faults and the tally one process applies to its storage clients."""

    def __init__(self, rate: float = 0.0, seed: int | None = None, ops_path: Path | None = None) -> None:
        self.rate = rate
        self.random = random.Random(seed)  # noqa: S311 - which request fails, not a secret
        self.ops_path = ops_path
        self.counts: Counter[str] = Counter()  # "<service> <METHOD> <prefix>" → attempts
        self.faults: Counter[str] = Counter()  # "outage" / "lost" → injected

    def transport(self, service: str) -> AsyncHttpTransport:
        return RelayTransport(self.send, service, AioHttpTransport())

    async def send(self, service: str, inner: AsyncHttpTransport, request: Any, **kwargs: Any) -> Any:
        where = prefix_of(service, request.url)
        self.counts[f"{request.method} {where}"] += 1
        if self.rate > 0 and self.random.random() < self.rate:
            if self.random.random() < 0.5:
                self.faults["outage"] += 1
                raise ServiceRequestError(f"injected: {where} unreachable (not sent)")
            await inner.send(request, **kwargs)  # it lands
            self.faults["lost"] += 1
            raise ServiceResponseError(f"injected: {where} landed, its answer was lost")
        return await inner.send(request, **kwargs)

    def dump(self) -> None:
        """Write the tally (and the faults injected) to ``ops_path``, if counting."""
        if self.ops_path is None:
            return
        data = {"counts": dict(sorted(self.counts.items())), "faults": dict(self.faults), "pid": os.getpid()}
        self.ops_path.write_text(json.dumps(data, indent=1))


def from_env(environ: dict[str, str] | None = None) -> Switches | None:
    """Install the switches the environment asks for (None if it asks for none)."""
    env = os.environ if environ is None else environ
    faults = env.get(FAULTS_ENV, "").strip()
    ops = env.get(OPS_ENV, "").strip()
    if not faults and not ops:
        return None
    rate, _, seed = faults.partition(",")
    rate_value = float(rate) if rate else 0.0
    if not 0.0 <= rate_value <= 1.0:
        raise ValueError(f"{FAULTS_ENV}: the rate must be between 0 and 1, not {rate!r}")
    switches = Switches(rate_value, int(seed) if seed else None, Path(ops) if ops else None)
    storage_client.transport_hook = switches.transport
    return switches


__all__ = ["FAULTS_ENV", "OPS_ENV", "Switches", "from_env", "prefix_of"]
