"""The README's snippets run as written, in the order a reader meets them.

Against one ``scripts/serve.sh``: the curl lines, the OpenAI Responses example, the AG-UI client
(Node), the Conversations example (which goes on with the Responses example's ``client``, as the
README says) and the MCP program. Each uses a thread of its own, so the turn each prints is the one
the README's comment shows. "Use your own workflow" is the file it says to write, hosted in-process.
Only the address changes: the README's ``127.0.0.1:7071`` becomes the test server's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator

import pytest

import workflows
from devtools.function_host import FunctionHost
from functions_adapter import wiring as composition
from tests.serving import ROOT, Serving, serving

README = (ROOT / "README.md").read_text()
README_ROOT = "http://127.0.0.1:7071"


def block(heading: str, language: str) -> str:
    """The first ```language block after ``heading``, exactly as the README shows it."""
    return README.split(f"\n{heading}\n", 1)[1].split(f"```{language}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("readme")) as server:
        yield server


def _here(code: str, served: Serving) -> str:
    return code.replace(README_ROOT, served.base.removesuffix("/api"))


def _curl_commands(code: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    return [command.strip() for command in code.replace("\\\n", " ").splitlines() if command.strip()]


def _run_bash(command: str) -> str:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True).stdout


def test_the_api_snippets_run_in_order_each_on_its_own_thread(
    served: Serving, capsys: pytest.CaptureFixture[str]
) -> None:
    # Try the API locally: the reader pastes each reply's checkpoint ID where the README says to.
    first, again, stream, thread = _curl_commands(_here(block("## Try the API locally", "bash"), served))
    reply = json.loads(_run_bash(first))
    assert reply["messages"][0]["content"].startswith('turn 1: you said "hello"')
    reply = json.loads(_run_bash(again.replace("<from the last reply>", reply["checkpoint_id"])))
    assert reply["messages"][0]["content"].startswith('turn 2: you said "and again"')
    events = _run_bash(stream.replace("<id>", reply["checkpoint_id"]))
    assert "event: output" in events and 'turn 3: you said \\"stream this\\"' in events
    assert json.loads(_run_bash(thread))["messages"][0]["content"].startswith('turn 1: you said "hi"')

    session: dict[str, object] = {}  # one Python session, as a reader following the page keeps
    exec(_here(block("### OpenAI Responses API", "python"), served), session)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == 'turn 2: you said "What is my name?". Earlier you said: "My name is Ada."'

    node = shutil.which("node")
    assert node is not None, "Node.js is needed (scripts/setup.sh checks for it)"
    script = _here(block("### AG-UI", "js"), served)
    done = subprocess.run(  # the README's module as given, resolving @ag-ui/client from the checkout
        [node, "--input-type=module", "--eval", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith('turn 1: you said "hello".')

    exec(_here(block("### OpenAI Conversations API", "python"), served), session)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == 'turn 2: you said "What is my name?". Earlier you said: "My name is Ada."'

    exec(_here(block("### MCP", "python"), served), {"__name__": "__main__"})  # a complete program
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r'turn 2: you said "What is my name\?"\. Earlier you said: "My name is Ada\." \S+', line)


async def test_use_your_own_workflow_is_a_complete_file(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = block("## Use your own workflow", "python")
    assert code.startswith("# workflows/my_flow.py\n")
    module = types.ModuleType("workflows.my_flow")
    monkeypatch.setitem(sys.modules, "workflows.my_flow", module)  # the file it names, imported
    exec(compile(code, "workflows/my_flow.py", "exec"), module.__dict__)
    # The README's registration line, as written.
    registration = re.search(r"`(REGISTRY\[\"my-flow\"\] = \"workflows\.my_flow:SPEC\")`", README)
    assert registration is not None
    monkeypatch.setattr(workflows, "REGISTRY", dict(workflows.REGISTRY))
    exec(registration.group(1), vars(workflows))
    monkeypatch.setenv("WORKFLOW", "my-flow")
    composition.workflow_spec.cache_clear()
    try:
        paused = await host.request("POST", "/api/runs", json_body={"messages": "hello"})
        body = await paused.json()
        assert paused.status == 200, body
        (request,) = body["pending_requests"]  # the Approval, saved in the checkpoint and read back
        answer = {"checkpoint_id": body["checkpoint_id"], "responses": {request["request_id"]: "yes"}}
        done = await host.request("POST", "/api/runs", json_body=answer)
        reply = await done.json()
        assert done.status == 200, reply
        assert reply["messages"][-1]["content"] == "You said: hello (yes)"
    finally:
        composition.workflow_spec.cache_clear()
    assert not (ROOT / "workflows" / "my_flow.py").exists()  # nothing was written to the checkout
