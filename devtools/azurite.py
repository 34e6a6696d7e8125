"""Start and stop a real Azurite blob emulator on a free loopback port."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AZURITE_BIN = ROOT / "node_modules" / ".bin" / "azurite-blob"
# Azurite's published development account; it only ever exists inside the emulator.
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_LISTENING = re.compile(r"successfully listens on http://127\.0\.0\.1:(\d+)")


@dataclass
class Azurite:
    """A running emulator; ``connection_string`` points at it."""

    process: subprocess.Popen[str]
    port: int
    output: list[str] = field(default_factory=list)
    location: Path | None = None

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_azurite(
    port: int = 0, timeout: float = 30.0, location: Path | None = None, *, skip_api_version_check: bool = True
) -> Azurite:
    """Start Azurite (no telemetry) and wait until it accepts requests.

    In memory by default; with ``location`` it keeps its data on disk, so a restart on
    the same port finds it again. ``port=0`` lets Azurite pick a free port. Without
    ``--skipApiVersionCheck`` it refuses the storage SDK's newer API version (a test
    uses that to see how the app reports a permanent storage 400).
    """
    persistence = ["--location", str(location)] if location else ["--inMemoryPersistence"]
    if not AZURITE_BIN.exists():
        raise RuntimeError(f"Azurite is not installed at {AZURITE_BIN}; run `npm ci` in {ROOT}.")
    process = subprocess.Popen(
        [
            str(AZURITE_BIN),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            *persistence,
            "--disableTelemetry",
            *(["--skipApiVersionCheck"] if skip_api_version_check else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[int] = []
    output: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip())
            match = _LISTENING.search(line)
            if match and not found:
                found.append(int(match.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.05):
        if time.monotonic() > deadline:
            break
    if not found:
        process.kill()
        raise RuntimeError("Azurite did not start:\n" + "\n".join(output[-20:]))
    return Azurite(process=process, port=found[0], output=output, location=location)
