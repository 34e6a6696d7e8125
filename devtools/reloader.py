"""``scripts/serve.sh --reload``: run the app in a child process and start a new one when a
Python file of the app changes, keeping Azurite, its data and the listening socket.

The supervisor (``devtools.serve``) owns the listening socket and keeps it open across
restarts, so a request sent while the app restarts waits in the socket's backlog and is
answered by the new process instead of being refused. A child that fails to start (a syntax
error) is reported; the next change starts another one.
"""

from __future__ import annotations

import contextlib
import os
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
    """One ``devtools.serve`` child serving on the supervisor's socket."""

    def __init__(self, sock: socket.socket, settings: Path, *, reloaded: bool) -> None:
        fd = sock.fileno()
        command = [sys.executable, "-m", "devtools.serve", "--no-azurite", "--settings", str(settings)]
        command += ["--listen-fd", str(fd), *(["--reloaded"] if reloaded else [])]
        self.process = subprocess.Popen(command, cwd=ROOT, pass_fds=(fd,))

    def running(self) -> bool:
        return self.process.poll() is None

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
                app = AppProcess(sock, settings, reloaded=True)
                reported_exit = False
            elif not app.running() and not reported_exit:
                say(f"The app stopped (exit {app.process.returncode}); saving a Python file starts it again.")
                reported_exit = True
    finally:
        app.stop()
