"""Serve the function app over real HTTP without Azure Functions Core Tools.

    python -m devtools.serve [--port 7071] [--settings local.settings.json] [--reload]
                             [--fresh | --in-memory | --no-azurite] [--data .azurite]

What ``func start`` does, played in one process: every HTTP function on
``http://127.0.0.1:7071/api/...`` through uvicorn (function keys not checked), the MCP tool
triggers on ``/runtime/webhooks/mcp`` (``devtools.mcp_server``), the queue
triggers through ``devtools.queue_runner``, the timer on its NCRONTAB schedule, and
Core Tools' ``POST /admin/functions/{name}``. Settings come from local.settings.json's
``Values`` (copied from local.settings.sample.json if missing); a variable already set
wins, and a malformed one stops it with one line that says what is wrong. Unless
``--no-azurite``, Azurite is started on free ports, keeping its data in ``.azurite/`` (git
ignores it; ``--fresh`` empties it first, ``--in-memory`` keeps nothing), and every setting
that says ``UseDevelopmentStorage=true`` (or a storage setting left unset) points at it.
With ``--reload`` the app runs in a child process that ``devtools.reloader`` restarts when a
Python file of the app changes. ``devtools.storage_switches`` reads its environment switches (injected storage
faults, a count of storage operations) before the app builds a client. SIGINT, SIGTERM or
SIGHUP (the terminal closed) stops the server, the runners and Azurite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from devtools import reloader, storage_switches
from devtools.azurite import Azurite, start_azurite
from devtools.azurite_data import DataInUse, claim_data_folder
from devtools.function_host import FunctionHost
from devtools.local_server import asgi_app, served
from devtools.mcp_server import MCP_PATH, mcp_endpoint
from devtools.queue_runner import QueueRunner, load_local_settings
from devtools.timers import TimerRunner

ROOT = Path(__file__).resolve().parent.parent
DEV_STORAGE = "usedevelopmentstorage=true"
# The settings the app's storage lives in: the host's queue connection and the checkpoints.
STORAGE_SETTINGS = ("AzureWebJobsStorage", "CHECKPOINT_STORAGE")
DATA = ROOT / ".azurite"  # Azurite's data between runs (git-ignored)
logger = logging.getLogger("devtools.serve")
# Ctrl+C, a kill, and a closed terminal: Azurite runs in a process group of its own (so a
# terminal's Ctrl+C does not stop it before the app has shut down), so the hangup that a
# closing terminal sends reaches only this process, which must then stop Azurite itself.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # a closed terminal must not stop the clean-up
        print(text, flush=True)


def _reserve(port: int) -> socket.socket | None:
    """The HTTP socket, bound to 127.0.0.1:``port`` now (None if the port is taken), so that
    nothing started afterwards (Azurite picks free ports) can take it before uvicorn listens.

    Made with ``IPPROTO_TCP``, not protocol 0: asyncio sets ``TCP_NODELAY`` on the connections a
    listening socket accepts only when its protocol says TCP, and without it every answer on a
    kept-alive connection waited for the client's delayed ACK (about 40 ms a call)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        return None
    return sock


def prepare_settings(path: Path, azurite: Azurite | None) -> list[str]:
    """Load ``path``'s Values into the environment (creating it from the sample if missing);
    with ``azurite``, point development storage at it. Returns the settings pointed there."""
    if not path.exists():
        shutil.copy(ROOT / "local.settings.sample.json", path)
        _say(f"Created {path} from local.settings.sample.json.")
    load_local_settings(path)
    if azurite is None:
        return []
    names = [name for name, value in os.environ.items() if value.strip().lower() == DEV_STORAGE]
    names += [name for name in STORAGE_SETTINGS if name not in os.environ and name not in names]
    for name in names:
        os.environ[name] = azurite.connection_string
    return sorted(names)


def _describe(host: FunctionHost, base: str, timers: TimerRunner) -> list[str]:
    """The function list ``func start`` prints, one line each."""
    lines = [f"  {r.name}: [{','.join(sorted(r.methods))}] {base}/api/{r.template}" for r in host.routes]
    for trigger in host.queue_triggers():
        lines.append(f"  {trigger.name}: queueTrigger (queue {trigger.queue_name})")
    for name, when in timers.next_runs().items():
        schedule = host.triggers[name].binding["schedule"]
        lines.append(f"  {name}: timerTrigger ({schedule}, next {when:%Y-%m-%dT%H:%M:%SZ})")
    return lines


def _settings_problem() -> str | None:
    """Why the app's settings would make every call a 500 ``server_misconfigured``, or None:
    found at start-up, it is one line for the user rather than a traceback per request."""
    from functions_adapter.settings import Settings, SettingsError  # noqa: PLC0415 - after the settings are in place

    try:
        Settings.from_env()
    except SettingsError as error:
        return str(error)
    return None


def _console_on() -> bool:
    """Whether the app serves its console (CONSOLE_ENABLED); the settings were checked at start-up."""
    from functions_adapter.settings import Settings  # noqa: PLC0415 - after the settings are in place

    return Settings.from_env().console_enabled


async def _serve(sock: socket.socket, stop: asyncio.Event, *, reloaded: bool = False) -> None:
    switches = storage_switches.from_env()  # before any storage client is built
    import function_app  # noqa: PLC0415 - imported only once the settings are in place, as the worker does
    from resumable.storage import clients as storage_client  # noqa: PLC0415 - the app's clients, closed on exit
    from resumable.storage import run_queue  # noqa: PLC0415 - the app's clients, closed on exit

    host = FunctionHost(function_app.app)
    for trigger in host.queue_triggers():
        _ = trigger.queue_name  # a %SETTING% that is not set stops start-up, as in the host
    timers = TimerRunner(host)
    queues = QueueRunner(host)
    app = asgi_app(host, admin=True)
    try:
        async with mcp_endpoint(host, app), served(app, sock=sock, log_level="info", access_log=True) as base:
            queues.start()
            timers.start()
            if reloaded:
                _say(f"Reloaded: serving the new code on {base}/api")
                await stop.wait()
                return
            _say("Functions:\n" + "\n".join(_describe(host, base, timers)))
            _say(f"MCP tools (streamable HTTP): {base}{MCP_PATH}")
            _say(f"Serving {base}/api (function keys are not checked locally, as with func start)")
            if _console_on():
                _say(f"Console: {base}/api/console")
            else:
                _say('Console: off (set "CONSOLE_ENABLED": "true" in local.settings.json to serve it)')
            body = '{"messages": "hello"}'
            _say(f"Try: curl -s {base}/api/runs -H 'content-type: application/json' -d '{body}'")
            _say("Ctrl+C stops everything this started.")
            await stop.wait()
            _say("Stopping.")
    finally:
        await queues.stop()
        await timers.stop()
        await app.state.invocations.stop()
        await storage_client.close_all()
        await run_queue.close_all()
        if switches is not None:
            switches.dump()


async def _main(sock: socket.socket, *, reloaded: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    await _serve(sock, stop, reloaded=reloaded)


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


class _CannotStart(Exception):
    """A reason to stop before serving, printed as one line."""


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=7071, help="port on 127.0.0.1 (default 7071, as func start)")
    parser.add_argument("--settings", type=Path, default=ROOT / "local.settings.json", help="local.settings.json")
    parser.add_argument("--reload", action="store_true", help="restart the app when one of its Python files changes")
    storage = parser.add_mutually_exclusive_group()
    storage.add_argument("--fresh", action="store_true", help="empty Azurite's data folder first")
    storage.add_argument("--in-memory", action="store_true", help="Azurite keeps nothing (the tests use it)")
    storage.add_argument("--no-azurite", action="store_true", help="use the storage settings as they are")
    parser.add_argument("--data", type=Path, default=DATA, help="Azurite's data folder (default .azurite)")
    parser.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # a --reload supervisor's child
    parser.add_argument("--reloaded", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _start_azurite(args: argparse.Namespace, held: contextlib.ExitStack) -> Azurite | None:
    """Azurite as the options ask (None with ``--no-azurite``); ``held`` stops it and frees its folder."""
    if args.no_azurite:
        return None
    location = None if args.in_memory else held.enter_context(claim_data_folder(args.data, fresh=args.fresh))
    try:
        azurite = start_azurite(location=location, own_process_group=True)
    except RuntimeError as error:  # not installed, or it would not start: say why
        raise _CannotStart(str(error)) from None
    held.callback(azurite.stop)
    ports = f"blob 127.0.0.1:{azurite.port}, queue 127.0.0.1:{azurite.queue_port}"
    _say(f"Azurite ({_kept(location, fresh=args.fresh)}): {ports}")
    return azurite


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)  # else every queue poll logs its HTTP request
    if args.listen_fd is not None:
        return _serve_child(socket.socket(fileno=args.listen_fd), args.settings, reloaded=args.reloaded)
    sock = _reserve(args.port)
    if sock is None:
        print(f"Port {args.port} is taken (func start?): stop what listens there, or pass --port.", file=sys.stderr)
        return 1
    # Until the event loop takes over, SIGTERM and SIGHUP unwind like Ctrl+C, so Azurite is still stopped.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGHUP, _exit_on_signal)
    held = contextlib.ExitStack()
    try:
        pointed = prepare_settings(args.settings, _start_azurite(args, held))
        if pointed:
            _say(f"Storage settings pointed at it: {', '.join(pointed)}")
        problem = _settings_problem()
        if problem:
            raise _CannotStart(f"Setting error ({args.settings.name} or the environment): {problem}")
        if args.reload:
            reloader.supervise(sock, args.settings, _say)
        else:
            asyncio.run(_main(sock))
    except KeyboardInterrupt:
        pass
    except (_CannotStart, DataInUse, LookupError) as error:  # LookupError: a setting a binding names is missing
        print(error, file=sys.stderr)
        return 1
    finally:
        # A second Ctrl+C must not cut the clean-up short and leave Azurite running.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        held.close()
        sock.close()
    return 0


def _kept(location: Path | None, *, fresh: bool) -> str:
    """The banner's words for where Azurite keeps its data."""
    if location is None:
        return "in memory: nothing is kept"
    shown = location.relative_to(ROOT) if location.is_relative_to(ROOT) else location
    return f"data in {shown}/, {'emptied first' if fresh else 'kept across restarts'}; --fresh empties it"


def _serve_child(sock: socket.socket, settings: Path, *, reloaded: bool) -> int:
    """A ``--reload`` supervisor's app process: serve on the inherited socket until SIGTERM."""
    prepare_settings(settings, None)
    try:
        asyncio.run(_main(sock, reloaded=reloaded))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
