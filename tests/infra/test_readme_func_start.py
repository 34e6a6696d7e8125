"""The README's `func start` block works as written, minus `func` itself (not installable here).

The test reads the block from README.md, starts the Azurite command line it contains, loads
the app settings from local.settings.sample.json (what the block copies to
local.settings.json), and drives a resume through the functions `function_app.app` registers,
the way `func start` would host them. If the README's command or the sample settings stop
working together, this fails; nothing here restates them.

One rewrite, and only one: port numbers. The documented ports (10000 for blob, 10001 for
queue, 10002 for table) may be taken on a test machine, and are whenever tests run side by
side, so every `--<service>Port N` becomes `0` (Azurite picks a free port and prints it) and
the settings' endpoints follow the ports Azurite reports. Every other argument runs verbatim.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from devtools.azurite import ACCOUNT, ACCOUNT_KEY
from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from resumable.storage import clients as storage_client
from resumable.storage import run_queue

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### Run it with `func start`"
# What each Azurite binary serves, and each service's documented default port.
SERVICES = {"azurite": ("blob", "queue", "table"), "azurite-blob": ("blob",), "azurite-queue": ("queue",)}
SERVICES["azurite-table"] = ("table",)
DEFAULT_PORTS = {"blob": 10000, "queue": 10001, "table": 10002}
_PORT_FLAG = re.compile(r"--(blob|queue|table)Port(?:=(\d+))?$")
_LISTENING = re.compile(r"Azurite (Blob|Queue|Table) service .*successfully.* http://[\d.]+:(\d+)")


@dataclass
class FuncStartBlock:
    """The shell block under the heading, one parsed command per entry."""

    commands: list[list[str]]

    def azurite_commands(self) -> list[list[str]]:
        return [c for c in self.commands if _azurite_binary(c) is not None]


def func_start_block(text: str) -> FuncStartBlock:
    """Parse the first ```bash fence after the heading (continuations joined, comments dropped)."""
    after = text.split(HEADING, 1)[1]
    match = re.search(r"```(?:bash|sh|shell)\n(.*?)```", after, re.DOTALL)
    assert match, f"no shell block under {HEADING!r}"
    joined = match.group(1).replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return FuncStartBlock([c for c in commands if c])


def _azurite_binary(command: list[str]) -> str | None:
    """`npx azurite-blob ...` or `node_modules/.bin/azurite-blob ...` -> "azurite-blob"."""
    words = command[1:] if command[0] == "npx" else command
    name = Path(words[0]).name if words else ""
    return name if name in SERVICES else None


def func_start_block_from_script(text: str) -> list[list[str]]:
    """The Azurite command lines in a shell script, parsed like the README's."""
    commands = [shlex.split(line, comments=True) for line in text.replace("\\\n", " ").splitlines()]
    return [c for c in commands if c and _azurite_binary(c) is not None]


@dataclass
class RunningAzurite:
    process: subprocess.Popen[str]
    ports: dict[str, int] = field(default_factory=dict)  # service -> port Azurite reports
    output: list[str] = field(default_factory=list)


def start_documented_azurite(command: list[str], timeout: float = 30.0) -> RunningAzurite:
    """Run the README's Azurite command with each port number set to 0, nothing else changed."""
    binary = _azurite_binary(command)
    assert binary is not None
    args = command[2:] if command[0] == "npx" else command[1:]
    assert args and args[-1] == "&", "the README starts Azurite in the background (`... &`)"
    args = args[:-1]
    rewritten: list[str] = []
    named: set[str] = set()
    i = 0
    while i < len(args):
        flag = _PORT_FLAG.match(args[i])
        if flag and flag.group(2):  # --blobPort=10000
            rewritten.append(f"--{flag.group(1)}Port=0")
        elif flag:  # --blobPort 10000
            assert i + 1 < len(args) and args[i + 1].isdigit(), f"{args[i]} needs a port number"
            rewritten += [args[i], "0"]
            i += 1
        else:
            rewritten.append(args[i])
        if flag:
            named.add(flag.group(1))
        i += 1
    # A service started on its default port (no flag) is moved the same way.
    rewritten += [arg for service in SERVICES[binary] if service not in named for arg in (f"--{service}Port", "0")]
    executable = ROOT / "node_modules" / ".bin" / binary
    assert executable.exists(), f"{executable} is missing: run scripts/setup.sh"
    process = subprocess.Popen(
        [str(executable), *rewritten], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    running = RunningAzurite(process)
    all_up = threading.Event()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            running.output.append(line.rstrip())
            found = _LISTENING.search(line)
            if found:
                running.ports[found.group(1).lower()] = int(found.group(2))
                if set(running.ports) >= set(SERVICES[binary]):
                    all_up.set()
        all_up.set()

    threading.Thread(target=pump, daemon=True).start()
    all_up.wait(timeout)
    if set(running.ports) < set(SERVICES[binary]):
        process.kill()
        raise AssertionError("the README's Azurite did not start:\n" + "\n".join(running.output[-20:]))
    return running


def documented_settings(ports: dict[str, int]) -> dict[str, str]:
    """local.settings.sample.json's values, with the emulator's ports replaced by the real ones."""
    values: dict[str, str] = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]
    # The SDK reads `UseDevelopmentStorage=true` as this string (fixed default ports); spell it
    # out so its ports can follow Azurite's.
    dev = f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};" + "".join(
        f"{s.capitalize()}Endpoint=http://127.0.0.1:{p}/{ACCOUNT};" for s, p in DEFAULT_PORTS.items()
    )
    moved = {DEFAULT_PORTS[service]: port for service, port in ports.items()}
    result = {}
    for name, value in values.items():
        spelled_out = value.replace("UseDevelopmentStorage=true", dev)
        result[name] = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{moved.get(int(m[1]), m[1])}", spelled_out)
    return result


@pytest.fixture
def readme_block() -> FuncStartBlock:
    return func_start_block((ROOT / "README.md").read_text())


@pytest.fixture
def documented_azurite(readme_block: FuncStartBlock) -> Iterator[RunningAzurite]:
    commands = readme_block.azurite_commands()
    assert commands, "the func start block starts no Azurite"
    started = [start_documented_azurite(c) for c in commands]
    merged = RunningAzurite(started[0].process)
    for each in started:
        merged.ports.update(each.ports)
    yield merged
    for each in started:
        each.process.terminate()
        try:
            each.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            each.process.kill()
            each.process.wait()


def test_every_line_of_the_block_is_one_this_test_understands(readme_block: FuncStartBlock) -> None:
    """So a new step in the README cannot slip past the test below unexercised."""
    for command in readme_block.commands:
        text = " ".join(command)
        if "scripts/setup.sh" in text:
            assert (ROOT / "scripts" / "setup.sh").exists()
            assert "--no-iac" in command, "func start needs no checkov: the block should pass --no-iac"
        elif "local.settings.sample.json" in text:
            assert "local.settings.json" in command
        elif _azurite_binary(command):
            assert "--skipApiVersionCheck" in command, "azure-storage-blob's API version needs it (issue 11)"
        elif command[0] in ("source", ".") and len(command) == 2:
            assert command[1] == ".venv/bin/activate" and (ROOT / command[1]).exists()
        elif command[:2] == ["func", "start"] or command[0] == "kill":
            pass
        else:
            raise AssertionError(f"unrecognised line in the README's func start block: {text!r}")


async def test_readme_func_start_block_serves_a_resume(
    documented_azurite: RunningAzurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in documented_settings(documented_azurite.ports).items():
        monkeypatch.setenv(name, value)
    import function_app

    host = FunctionHost(function_app.app)
    try:
        first = await host.request("POST", "/api/runs", json_body={"messages": "hello"})
        assert first.status == 200, await first.body()
        started = (await first.json())["checkpoint_id"]
        resumed = await host.request("POST", "/api/runs", json_body={"checkpoint_id": started, "messages": "again"})
        assert resumed.status == 200, await resumed.body()
        latest = (await resumed.json())["checkpoint_id"]
        info = await host.request("GET", f"/api/checkpoints/{latest}")
        assert info.status == 200
        assert (await info.json())["previous_checkpoint_id"] == started
        # A background run through the documented queue service, pulled as `func` would.
        accepted = await host.request(
            "POST", "/api/runs", json_body={"messages": "later"}, headers={"Prefer": "respond-async"}
        )
        assert accepted.status == 202, await accepted.body()
        assert await QueueRunner(host).run_until_idle() == 1
        status = await host.request("GET", f"/api/runs/{(await accepted.json())['run_id']}")
        assert (await status.json())["status"] == "succeeded"
    finally:
        await storage_client.close_all()
        await run_queue.close_all()


def test_demo_func_starts_the_azurite_the_readme_documents(readme_block: FuncStartBlock) -> None:
    demo = func_start_block_from_script((ROOT / "scripts" / "demo.sh").read_text())
    assert demo == readme_block.azurite_commands()


def test_port_rewrite_touches_only_port_numbers() -> None:
    """The rewrite this test relies on, on a known input."""
    settings = documented_settings({"blob": 45678})
    assert f"BlobEndpoint=http://127.0.0.1:45678/{ACCOUNT};" in settings["AzureWebJobsStorage"]
    assert "QueueEndpoint=http://127.0.0.1:10001/" in settings["AzureWebJobsStorage"]
    assert settings["CHECKPOINT_CONTAINER"] == "checkpoints"
    block = func_start_block(f"{HEADING}\n\n```bash\nnpx azurite-blob --blobPort=10000 --x \\\n  --y &  # bg\n```\n")
    assert block.commands == [["npx", "azurite-blob", "--blobPort=10000", "--x", "--y", "&"]]
