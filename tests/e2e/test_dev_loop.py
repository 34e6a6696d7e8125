"""The development loop of ``scripts/serve.sh``: kept-alive connections answered without a
delayed-ACK wait, local storage that survives a restart, reload on save, and start-up errors
a user can act on."""

from __future__ import annotations

import asyncio
import http.client
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import uvicorn

from devtools.serve import _reserve
from tests.serving import ROOT, Serving, serving, session_processes

EDITED_WORKFLOW = Path("workflows/default_conversation.py")


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """One call on a connection of its own (a restart closes kept-alive ones)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _turn(server: Serving, thread_id: str, text: str) -> str:
    status, reply = _call("POST", f"{server.base}/threads/{thread_id}/runs", {"messages": text})
    assert status == 200, reply
    return reply["messages"][-1]["content"]


def _settings(tmp: Path, **values: str) -> Path:
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"].update(values)
    path = tmp / "settings.json"
    path.write_text(json.dumps(settings))
    return path


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _get(connection: http.client.HTTPConnection) -> bytes:
    connection.request("GET", "/")
    response = connection.getresponse()
    assert response.status == 200
    return response.read()


async def test_kept_alive_connections_are_accepted_with_tcp_nodelay() -> None:
    """The dev server's listening socket is one asyncio knows as TCP, so every connection it
    accepts has Nagle off: an answer written in two pieces (headers, then body) is not held
    back until the client's delayed ACK, about 40 ms per call on a kept-alive connection."""
    sock = _reserve(0)
    assert sock is not None
    server = uvicorn.Server(uvicorn.Config(_ok, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    connection = http.client.HTTPConnection("127.0.0.1", sock.getsockname()[1], timeout=30)
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
            await asyncio.sleep(0.01)
        assert await asyncio.to_thread(_get, connection) == b"ok"
        (accepted,) = server.server_state.connections  # the server's end of our connection
        assert accepted.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert await asyncio.to_thread(_get, connection) == b"ok"  # the same connection, kept alive
        assert len(server.server_state.connections) == 1
    finally:
        connection.close()
        server.should_exit = True
        await task
        sock.close()


def test_threads_survive_a_restart_and_fresh_starts_empty(tmp_path: Path) -> None:
    data = tmp_path / "azurite-data"
    settings = _settings(tmp_path)
    with serving(tmp_path, "--data", str(data), settings=settings) as server:
        assert f"data in {data}/, kept across restarts" in server.output()
        assert _turn(server, "kept", "hello").startswith("turn 1:")
        # A second server on the same folder is refused before it starts anything.
        second = subprocess.run(
            [
                ".venv/bin/python",
                "-m",
                "devtools.serve",
                "--port",
                "0",
                "--data",
                str(data),
                "--settings",
                str(settings),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert second.returncode == 1 and "is in use by another scripts/serve.sh" in second.stderr, second.stderr
        assert "Azurite (" not in second.stdout
    with serving(tmp_path, "--data", str(data), settings=settings) as server:
        assert _call("GET", f"{server.base}/threads/kept")[0] == 200
        assert _turn(server, "kept", "again").startswith("turn 2:")  # the thread goes on where it was
    with serving(tmp_path, "--data", str(data), "--fresh", settings=settings) as server:
        assert "emptied first" in server.output()
        assert _call("GET", f"{server.base}/threads/kept")[0] == 404
    assert session_processes(server.process.pid) == []


def test_a_bad_setting_stops_serve_with_one_line(tmp_path: Path) -> None:
    settings = _settings(tmp_path, CONSOLE_ENABLED="maybe")
    done = subprocess.run(
        ["bash", "scripts/serve.sh", "--in-memory", "--port", "0", "--settings", str(settings)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        start_new_session=True,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (  # before it, only setup's notes
        "Setting error (settings.json or the environment): CONSOLE_ENABLED must be true or false "
        "(or 1 or 0; empty means false), not 'maybe'."
    )
    assert "Traceback" not in done.stderr
    assert "Traceback" not in done.stdout


def _copy_of_the_checkout(into: Path) -> Path:
    """The tracked files (as in this working tree), with the shared venv and node_modules
    linked: a checkout whose workflow a test may edit without touching this one."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in listed.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file() and not source.is_symlink():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    for shared in (".venv", "node_modules"):
        (into / shared).symlink_to((ROOT / shared).resolve())
    return into


def _wait_for(server: Serving, line: str, times: int = 1, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while server.output().count(line) < times:
        assert time.monotonic() < deadline and server.process.poll() is None, server.output()[-3000:]
        time.sleep(0.05)


def test_reload_runs_an_edited_workflow_on_the_next_request(tmp_path: Path) -> None:
    copy = _copy_of_the_checkout(tmp_path / "checkout")
    with serving(tmp_path, "--reload", root=copy) as server:
        assert _turn(server, "edited", "hello").startswith("turn 1: you said")
        source = copy / EDITED_WORKFLOW
        text = source.read_text()
        assert "f'turn {turn}: you said" in text
        source.write_text(text.replace("f'turn {turn}: you said", "f'turn {turn} (edited): you said"))
        edited_at = time.monotonic()
        _wait_for(server, "Reloaded: serving the new code")
        # The next request runs the new code, on the same Azurite: the thread goes on.
        assert _turn(server, "edited", "again").startswith("turn 2 (edited): you said")
        print(f"edit -> first answer on the new code: {time.monotonic() - edited_at:.2f} s")
        assert f"Reloading: {EDITED_WORKFLOW} changed." in server.output()
        # A workflow that does not compile: the server stays up and its log names the line;
        # the next save fixes it.
        source.write_text(text + "\ndef (:\n")
        _wait_for(server, "Reloaded: serving the new code", 2)
        assert _call("POST", f"{server.base}/threads/edited/runs", {"messages": "broken"})[0] == 500
        assert "SyntaxError: invalid syntax (default_conversation.py, line" in server.output()
        source.write_text(text)
        _wait_for(server, "Reloaded: serving the new code", 3)
        assert _turn(server, "edited", "once more").startswith("turn 3: you said")
    assert session_processes(server.process.pid) == []
    assert not (copy / ".azurite").exists()  # the tests' Azurite keeps nothing
