"""Start and stop a real Azurite (blob and queue services) on free loopback ports."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "node_modules" / ".bin"
AZURITE_BIN = BIN / "azurite-blob"
AZURITE_QUEUE_BIN = BIN / "azurite-queue"
# Azurite's published development account; it only ever exists inside the emulator.
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_LISTENING = re.compile(r"successfully listens on http://127\.0\.0\.1:(\d+)")


@dataclass
class Azurite:
    """A running emulator; ``connection_string`` points at its blob and queue services."""

    process: subprocess.Popen[str]
    port: int
    output: list[str] = field(default_factory=list)
    location: Path | None = None
    queue_process: subprocess.Popen[str] | None = None
    queue_port: int | None = None

    @property
    def connection_string(self) -> str:
        queue = f"QueueEndpoint=http://127.0.0.1:{self.queue_port}/{ACCOUNT};" if self.queue_port else ""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};{queue}"
        )

    def stop(self) -> None:
        for process in (self.process, self.queue_process):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Starting:
    """A service being started: its process, its output so far, and the port it reports."""

    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    found: list[int] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)

    def pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip())
            match = _LISTENING.search(line)
            if match and not self.found:
                self.found.append(int(match.group(1)))
                self.ready.set()
        self.ready.set()


def _spawn(
    binary: Path, service: str, port: int, persistence: list[str], extra: list[str], *, own_group: bool = False
) -> _Starting:
    if not binary.exists():
        raise RuntimeError(f"Azurite is not installed at {binary}; run `npm ci` in {ROOT}.")
    process = subprocess.Popen(
        [str(binary), f"--{service}Host", "127.0.0.1", f"--{service}Port", str(port), *persistence, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=0 if own_group else None,
    )
    starting = _Starting(process)
    threading.Thread(target=starting.pump, daemon=True).start()
    return starting


def _wait(starting: _Starting, deadline: float, others: list[_Starting]) -> int:
    while not starting.ready.wait(0.05):
        if time.monotonic() > deadline:
            break
    if not starting.found:
        for each in (starting, *others):
            each.process.kill()
        raise RuntimeError("Azurite did not start:\n" + "\n".join(starting.output[-20:]))
    return starting.found[0]


def start_azurite(
    port: int = 0,
    timeout: float = 180.0,
    location: Path | None = None,
    *,
    skip_api_version_check: bool = True,
    queue: bool = True,
    queue_port: int = 0,
    own_process_group: bool = False,
) -> Azurite:
    """Start Azurite's blob and (with ``queue``) queue services, no telemetry, and wait
    until both accept requests. They start side by side, so two cost no more than one.
    About 1.5 s on an idle machine; 46-49 s was seen with every core busy (load 15 on 2
    cores), hence the generous ``timeout``.

    In memory by default; with ``location`` each keeps its data on disk (in a folder of
    its own), so a restart on the same ports finds it again. Port 0 lets Azurite pick a
    free one. Without ``--skipApiVersionCheck`` Azurite refuses the storage SDKs' newer
    API versions (a test uses that to see how the app reports a permanent storage 400).
    With ``own_process_group`` a Ctrl+C in the terminal does not reach the emulator, so
    whoever started it can stop its own clients first, then ``stop`` it.
    """
    extra = ["--disableTelemetry", *(["--skipApiVersionCheck"] if skip_api_version_check else [])]

    def persistence(service: str) -> list[str]:
        if location is None:
            return ["--inMemoryPersistence"]
        folder = location if service == "blob" else location / service
        folder.mkdir(parents=True, exist_ok=True)
        return ["--location", str(folder)]

    group = {"own_group": own_process_group}
    blob = _spawn(AZURITE_BIN, "blob", port, persistence("blob"), extra, **group)
    queue_service = (
        _spawn(AZURITE_QUEUE_BIN, "queue", queue_port, persistence("queue"), extra, **group) if queue else None
    )
    others = [queue_service] if queue_service else []
    deadline = time.monotonic() + timeout
    blob_port = _wait(blob, deadline, others)
    found_queue_port = _wait(queue_service, deadline, [blob]) if queue_service else None
    return Azurite(
        process=blob.process,
        port=blob_port,
        output=blob.output,
        location=location,
        queue_process=queue_service.process if queue_service else None,
        queue_port=found_queue_port,
    )
