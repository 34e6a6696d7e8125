"""``scripts/serve.sh --reload``: run the app in a child process and start a new one when a
Python file of the app changes, keeping Azurite, its data and the listening socket.

The supervisor (``devtools.serve``) owns the listening socket and keeps it open across
restarts, so a request sent while the app restarts waits in the socket's backlog and is
answered by the new process instead of being refused. A child that fails to start (a syntax
error) is reported; the next change starts another one.

Most of a restart is Python importing the app's third-party packages (Agent Framework, the
Azure SDKs, uvicorn, MCP: about three quarters of the import time). So a spare child waits
beside the serving one with those already imported and nothing of the app's own code: at a
change, the old child stops, the spare imports the app as it now is and serves, and a new
spare starts warming. ``python -m devtools.reloader --spare <devtools.serve options>`` is that
spare; "go" on its stdin starts it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders of the checkout that are not the app: tools, tests, docs and installed packages.
NOT_THE_APP = frozenset({"node_modules", "tests", "bench", "docs", "site", "infra", "scripts", "devtools", "examples"})
# What a spare imports ahead: third-party packages only, never the app's modules (they may change).
PREWARM = (
    "agent_framework",
    "aiohttp",
    "azure.functions",
    "azurefunctions.extensions.http.fastapi",
    "azure.storage.blob.aio",
    "azure.storage.queue.aio",
    "dotenv",
    "fastapi",
    "mcp.server.streamable_http_manager",
    "msgspec",
    "opentelemetry.sdk.trace",
    "starlette.applications",
    "uvicorn",
)
GO = b"go\n"
# A new spare starts this long after a (re)start, not with it: on a busy machine its imports
# would otherwise slow down the child that is starting to serve.
SPARE_AFTER_SECONDS = 3.0
POLL_SECONDS = 0.25  # how often the files' modification times are read (a few hundred stat calls)
STOP_SECONDS = 15.0  # the app's own shutdown gives open streams 2 s; then it is killed


def python_files(root: Path = ROOT) -> dict[str, int]:
    """Every ``*.py`` of the app under ``root`` (relative path → modification time in ns):
    ``function_app.py``, ``functions_adapter/``, ``resumable/``, ``workflows/`` and any
    package of your own, but no hidden folder (``.venv``, ``.azurite``) nor ``NOT_THE_APP``."""
    found: dict[str, int] = {}
    for folder, subfolders, files in os.walk(root):
        at_top = Path(folder) == root
        subfolders[:] = [
            name for name in subfolders if not name.startswith((".", "__")) and not (at_top and name in NOT_THE_APP)
        ]
        for name in files:
            if name.endswith(".py"):
                path = Path(folder, name)
                with contextlib.suppress(FileNotFoundError):  # removed while we looked
                    found[str(path.relative_to(root))] = path.stat().st_mtime_ns
    return found


def changed_files(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """What was edited, added or removed between two ``python_files`` readings."""
    return sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))


class AppProcess:
    """One ``devtools.serve`` child serving on the supervisor's socket; with ``spare``, one
    that has imported the third-party packages and waits for ``go`` to import the app."""

    def __init__(self, sock: socket.socket, settings: Path, *, reloaded: bool, spare: bool = False) -> None:
        fd = sock.fileno()
        options = ["--no-azurite", "--settings", str(settings), "--listen-fd", str(fd)]
        options += ["--reloaded"] if reloaded else []
        entry = ["devtools.reloader", "--spare"] if spare else ["devtools.serve"]
        stdin = subprocess.PIPE if spare else None
        self.process = subprocess.Popen([sys.executable, "-m", *entry, *options], cwd=ROOT, pass_fds=(fd,), stdin=stdin)

    def running(self) -> bool:
        return self.process.poll() is None

    def go(self) -> bool:
        """Start a spare serving; False if it is gone (then start a new child instead)."""
        if self.process.stdin is None or not self.running():
            return False
        try:
            self.process.stdin.write(GO)
            self.process.stdin.close()
        except BrokenPipeError:
            return False
        return True

    def stop(self) -> None:
        """SIGTERM (the app finishes its streams and closes its clients), then a kill."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def supervise(sock: socket.socket, settings: Path, say: Callable[[str], None], root: Path = ROOT) -> None:
    """Serve the app from a child process until interrupted, restarting it on every change
    to the app's Python files. Returns (or raises KeyboardInterrupt / SystemExit) with the
    child stopped."""
    sock.listen(128)  # connections made during a restart wait here for the next child
    seen = python_files(root)
    app = AppProcess(sock, settings, reloaded=False)
    spare: AppProcess | None = None
    spare_due = time.monotonic() + SPARE_AFTER_SECONDS
    reported_exit = False
    try:
        while True:
            time.sleep(POLL_SECONDS)
            now = python_files(root)
            changed = changed_files(seen, now)
            if changed:
                seen = now
                shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
                say(f"Reloading: {shown} changed.")
                app.stop()
                app = spare if spare is not None and spare.go() else AppProcess(sock, settings, reloaded=True)
                spare, spare_due = None, time.monotonic() + SPARE_AFTER_SECONDS
                reported_exit = False
            elif not app.running() and not reported_exit:
                say(f"The app stopped (exit {app.process.returncode}); saving a Python file starts it again.")
                reported_exit = True
            if spare is None and time.monotonic() >= spare_due:
                spare = AppProcess(sock, settings, reloaded=True, spare=True)
    finally:
        if spare is not None:
            spare.stop()
        app.stop()


def _spare(serve_options: list[str]) -> int:
    """Import ``PREWARM``, wait for ``go`` on stdin, then run ``devtools.serve`` with the options."""
    for name in PREWARM:
        with contextlib.suppress(ImportError):  # an optional package missing costs the spare nothing
            importlib.import_module(name)
    if sys.stdin.buffer.readline() != GO:  # the supervisor stopped (stdin closed)
        return 0
    sys.argv = ["devtools.serve", *serve_options]
    runpy.run_module("devtools.serve", run_name="__main__", alter_sys=True)  # exits with its status
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--spare"]:
        raise SystemExit("usage: python -m devtools.reloader --spare <devtools.serve options>")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C while waiting: the supervisor stops it
        raise SystemExit(_spare(sys.argv[2:]))
