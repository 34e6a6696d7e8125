"""Reading and running examples/*.http: as VS Code REST Client reads them, and through httpyac.

REST Client cannot run in CI (it is a VS Code extension), so ``rest_client_run`` plays it:
``###`` separates requests, ``@x = ...`` defines a file variable, ``# @name`` names a
request whose JSON reply later requests read as ``{{name.response.body.$.a.b[0].c}}``.
Both runs give the same ``Exchange`` list, which one set of checks judges.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HTTPYAC = ROOT / "node_modules" / ".bin" / "httpyac"
FILE_BASE = "@base = http://127.0.0.1:7071/api"  # what requests.http and requests.signed.http say


@dataclass
class HttpFileRequest:
    name: str | None
    method: str
    url: str
    headers: dict[str, str]
    body: str


@dataclass
class Exchange:
    """One request as sent and its answer, whichever client sent it."""

    method: str
    url: str
    headers: dict[str, str]  # as sent, names lower-cased
    status: int
    body: str


def parse_http_file(text: str) -> tuple[dict[str, str], list[HttpFileRequest]]:
    """File variables and requests, as VS Code REST Client reads them (`###` separates requests)."""
    variables: dict[str, str] = {}
    requests: list[HttpFileRequest] = []
    for block in re.split(r"^###.*\n?", text, flags=re.MULTILINE):
        name, request_line, headers = None, None, {}
        lines = iter(block.splitlines())
        for line in lines:
            if named := re.match(r"#\s*@name\s+(\w+)", line):
                name = named[1]
            elif variable := re.match(r"@(\w+)\s*=\s*(.*)", line):
                variables[variable[1]] = variable[2].strip()
            elif line.strip() and not line.startswith(("#", "//")):
                request_line = line
                break
        if request_line is None:
            continue
        for line in lines:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            headers[key.strip()] = value.strip()
        method, url = request_line.split(maxsplit=1)
        requests.append(HttpFileRequest(name, method, url, headers, "\n".join(lines).strip()))
    return variables, requests


def _resolve(text: str, variables: dict[str, str], replies: dict[str, Any]) -> str:
    """Expand `{{var}}` and `{{name.response.body.$.a.b[0].c}}`, as REST Client does."""

    def expand(match: re.Match[str]) -> str:
        ref = match[1].strip()
        if ref in variables:
            return _resolve(variables[ref], variables, replies)
        name, _, path = ref.partition(".response.body.$")
        value = replies[name]
        for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
            value = value[key] if key else value[int(index)]
        return str(value)

    return re.sub(r"\{\{(.*?)\}\}", expand, text)


def pointed_at(name: str, folder: Path, base: str, headers: dict[str, str] | None = None) -> Path:
    """A copy of examples/``name`` (with httpyac.config.js beside it) whose ``@base`` line says
    ``base`` and whose ``PASTE-...`` header values are ``headers``; everything else as written."""
    text = (EXAMPLES / name).read_text()
    assert text.count(FILE_BASE + "\n") == 1, f"{name} should have the line {FILE_BASE!r}"
    text = text.replace(FILE_BASE + "\n", f"@base = {base}\n")
    for header, value in (headers or {}).items():
        text = re.sub(rf"^{re.escape(header)}: PASTE-.*$", f"{header}: {value}", text, flags=re.MULTILINE)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "httpyac.config.js", folder / "httpyac.config.js")
    (folder / name).write_text(text)
    return folder / name


def httpyac_run(path: Path) -> tuple[dict[str, Any], list[Exchange]]:
    """``httpyac send <path> --all`` with machine-readable output: its summary, and each exchange."""
    # To a file, not a pipe: node exits before a pipe takes more than 64 KiB of its output.
    output = path.with_suffix(".out.json")
    with output.open("w") as sink:
        done = subprocess.run(
            [str(HTTPYAC), "send", str(path), "--all", "-o", "exchange", "--json"],
            cwd=path.parent,
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
            check=False,
        )
    stdout = output.read_text()
    assert stdout.strip().startswith("{"), stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(stdout)
    exchanges = []
    for request in result["requests"]:
        response = request.get("response")
        assert response, f"{request['title']}: no response ({request.get('testResults')})"
        sent = response["request"]
        exchanges.append(
            Exchange(
                sent["method"],
                sent["url"],
                {k.lower(): str(v) for k, v in sent.get("headers", {}).items()},
                response["statusCode"],
                response.get("body", ""),
            )
        )
    return result, exchanges


async def rest_client_run(path: Path) -> list[Exchange]:
    """Send every request of ``path`` in order, resolving variables as REST Client does."""
    variables, requests = parse_http_file(path.read_text())
    replies: dict[str, Any] = {}
    exchanges = []
    async with aiohttp.ClientSession() as session:
        for request in requests:
            url = _resolve(request.url, variables, replies)
            headers = {k: _resolve(v, variables, replies) for k, v in request.headers.items()}
            body = _resolve(request.body, variables, replies).encode()
            async with session.request(request.method, url, headers=headers, data=body or None) as response:
                text = await response.text()
                exchanges.append(
                    Exchange(request.method, url, {k.lower(): v for k, v in headers.items()}, response.status, text)
                )
            if request.name:
                replies[request.name] = json.loads(text)
    return exchanges
