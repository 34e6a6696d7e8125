"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector``, pinned in package.json), as a
developer runs it with npx, against the MCP endpoint ``scripts/serve.sh`` serves: the tools
listed, two turns on one thread, and a refusal shown with our code.

The Inspector validates an error result's ``structuredContent`` against the tool's
``outputSchema`` (the ``mcp`` Python client does not): a refusal it cannot match shows as its
own schema error instead of ``thread_not_found``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.mcp_server import MCP_PATH
from tests.serving import ROOT, Serving, serving

# The Inspector exits with 5 when the tool answered isError (its "tool_is_error", on stderr).
TOOL_IS_ERROR = 5


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("npx") is None:
        pytest.fail("npx is needed (it comes with npm; scripts/setup.sh checks for it).")
    with serving(tmp_path_factory.mktemp("inspector")) as served:
        yield _mcp_url(served)


def _mcp_url(served: Serving) -> str:
    return served.base.removesuffix("/api") + MCP_PATH


def inspector(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``npx @modelcontextprotocol/inspector --cli URL ARGS``; ``--no-install``: the pinned one only."""
    return subprocess.run(
        ["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", url, *args],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def call(url: str, tool: str, **arguments: str) -> tuple[int, dict[str, Any]]:
    args = [f"{name}={value}" for name, value in arguments.items()]
    done = inspector(url, "--method", "tools/call", "--tool-name", tool, *[a for v in args for a in ("--tool-arg", v)])
    assert done.returncode in (0, TOOL_IS_ERROR), done.stdout[-2000:] + done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def test_the_inspector_lists_the_tools(url: str) -> None:
    done = inspector(url, "--method", "tools/list")
    assert done.returncode == 0, done.stderr[-2000:]
    tools = {tool["name"]: tool for tool in json.loads(done.stdout)["tools"]}
    assert sorted(tools) == ["get_run", "get_thread", "run_turn", "start_turn"]
    assert tools["run_turn"]["inputSchema"]["required"] == ["thread_id"]
    assert tools["run_turn"]["outputSchema"]["type"] == "object"


def test_two_turns_through_the_inspector(url: str) -> None:
    thread_id = f"inspector-{uuid.uuid4().hex[:8]}"
    code, first = call(url, "run_turn", thread_id=thread_id, message="My name is Ada.")
    assert code == 0 and first["isError"] is False, first
    code, second = call(url, "run_turn", thread_id=thread_id, message="What is my name?")
    assert code == 0 and second["isError"] is False, second
    assert first["content"][0]["text"].startswith('turn 1: you said "My name is Ada."')
    assert 'Earlier you said: "My name is Ada."' in second["content"][0]["text"]
    assert second["structuredContent"]["previous_checkpoint_id"] == first["structuredContent"]["checkpoint_id"]


def test_a_refusal_shows_our_code_not_a_schema_error(url: str) -> None:
    code, result = call(url, "get_thread", thread_id=f"never-{uuid.uuid4().hex[:8]}")
    assert code == TOOL_IS_ERROR
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("thread_not_found: ")
    assert result["structuredContent"]["error"]["code"] == "thread_not_found"
    assert result["structuredContent"]["status"] == 404
