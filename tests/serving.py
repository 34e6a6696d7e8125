"""Run ``scripts/serve.sh`` as a user would, in a session of its own, for the tests that drive it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devtools.azurite import free_port

ROOT = Path(__file__).resolve().parent.parent
# The app's settings come from the --settings file alone, not from whatever the test run has set.
APP_SETTINGS = set(json.loads((ROOT / "local.settings.sample.json").read_text())["Values"])


def session_processes(sid: int) -> list[str]:
    """``pid command`` for every live process in session ``sid`` (zombies count: not reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended while we looked
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session ...
        if int(fields[3]) == sid:
            found.append(f"{entry.name} {cmdline.strip() or stat.split(' ', 2)[1]}")
    return found


@dataclass
class Serving:
    process: subprocess.Popen[bytes]
    base: str  # http://127.0.0.1:PORT/api
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: signal.Signals = signal.SIGINT, *, group: bool = True, timeout: float = 30) -> float:
        """Send ``sig`` (to the process group, as a terminal's Ctrl+C does, or to the process);
        wait for the exit and return how long it took."""
        started = time.monotonic()
        if group:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        self.process.wait(timeout=timeout)
        return time.monotonic() - started


# Options that say where Azurite keeps its data; without one, a test's Azurite keeps nothing
# (scripts/serve.sh would otherwise keep it in the checkout's .azurite/, shared by every test).
STORAGE_OPTIONS = ("--in-memory", "--no-azurite", "--data")


@contextmanager
def serving(
    tmp: Path, *args: str, settings: Path | None = None, timeout: float = 180, root: Path = ROOT
) -> Iterator[Serving]:
    """``scripts/serve.sh --port <free> --settings <settings>`` (``--in-memory`` unless ``args``
    say where Azurite's data goes), run in ``root``, until it printed its URL."""
    port = free_port()
    if not any(option in args for option in STORAGE_OPTIONS):
        args = ("--in-memory", *args)
    settings = settings or tmp / "local.settings.json"
    log = tmp / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in APP_SETTINGS}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["bash", "scripts/serve.sh", "--port", str(port), "--settings", str(settings), *args],
            cwd=root,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Serving(process, f"http://127.0.0.1:{port}/api", log)
    try:
        deadline = time.monotonic() + timeout
        while f"Serving {served.base} " not in served.output():
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("scripts/serve.sh did not start:\n" + served.output()[-4000:])
            time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for line in session_processes(process.pid):  # whatever it left behind is ours to end
            os.kill(int(line.split()[0]), signal.SIGKILL)
