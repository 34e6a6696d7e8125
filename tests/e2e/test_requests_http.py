"""examples/*.http run as written against scripts/serve.sh, in both clients they are written for.

requests.http runs under the pinned httpyac (``httpyac send --all``) and as VS Code REST Client
reads it; every request answers the status it documents, none leaves loopback, and together
they reach every route. requests.signed.http runs against an app with WEBHOOK_SECRET set, its
PASTE slots filled by examples/sign_request.py. requests.azure.http holds the Azure examples.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from devtools.function_host import FunctionHost
from tests.http_files import EXAMPLES, Exchange, httpyac_run, parse_http_file, pointed_at, rest_client_run
from tests.serving import ROOT, Serving, serving

LOOPBACK = {"127.0.0.1", "localhost"}
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the Standard Webhooks test vector's secret


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("serve")) as server:
        yield server


def _expected(exchange: Exchange) -> set[int]:
    """The status each request of requests.http documents in its title."""
    if "respond-async" in exchange.headers.get("prefer", ""):
        return {202}
    if exchange.method == "DELETE":
        return {200} if "/responses/" in exchange.url or "/conversations/" in exchange.url else {204}
    if exchange.url.endswith("/cancel"):
        return {200, 409}  # 409 if the queue runner finished the run first
    return {200}


def _check_requests_http(exchanges: list[Exchange]) -> None:
    """What running requests.http top to bottom must show, whichever client ran it."""
    import function_app  # the routes the file must reach

    _, written = parse_http_file((EXAMPLES / "requests.http").read_text())
    assert len(exchanges) == len(written) == 42
    routes = FunctionHost(function_app.app)
    covered = set()
    for exchange in exchanges:
        url = urlsplit(exchange.url)
        assert url.hostname in LOOPBACK, exchange.url
        assert exchange.status in _expected(exchange), (exchange.method, exchange.url, exchange.body[:500])
        matched = routes.match(exchange.method, url.path)
        assert matched is not None, f"{exchange.method} {url.path} matches no function"
        covered.add(matched[0].name)
    assert covered == {route.name for route in routes.routes}
    by_path = {f"{e.method} {urlsplit(e.url).path}": e for e in exchanges}
    # The replayed delivery got the first reply's exact bytes, and the thread ran once.
    deliveries = [e.body for e in exchanges if e.method == "POST" and e.url.endswith("/threads/ticket-42/runs")]
    assert len(deliveries) == 2 and deliveries[0] == deliveries[1]
    assert json.loads(by_path["GET /api/threads/ticket-42"].body)["turns"] == 1
    assert json.loads(exchanges[2].body)["status"] == "pending_requests"
    assert json.loads(exchanges[3].body)["status"] == "idle"  # the approval answered it
    assert "event: done" in exchanges[4].body  # the streamed turn
    assert '"type":"RUN_FINISHED"' in by_path["POST /api/ag-ui"].body  # an AG-UI run
    # The background run was executed by the queue runner; its stream replays it to the end.
    (status,) = [e for e in exchanges if e.headers.get("prefer") == "wait=30"]
    assert json.loads(status.body)["status"] == "succeeded", status.body
    (stream,) = [e for e in exchanges if e.url.endswith("/stream")]
    assert "event: done" in stream.body
    task = json.loads(by_path["POST /api/a2a/default"].body)["result"]["task"]
    assert task["contextId"] == "a2a-demo" and task["status"]["state"] == "TASK_STATE_COMPLETED", task
    listed = json.loads(by_path["GET /api/threads"].body)
    assert [t["thread_id"] for t in listed["threads"]] == ["ticket-42"] and listed["next_cursor"] is None
    conversation = json.loads(next(e.body for e in exchanges if e.url.endswith("/api/conversations")))
    items = json.loads(by_path[f"GET /api/conversations/{conversation['id']}/items"].body)
    assert items["data"][0]["content"][0]["text"] == "Hello, conversation."


def test_httpyac_runs_every_request_of_requests_http(served: Serving, tmp_path: Path) -> None:
    result, exchanges = httpyac_run(pointed_at("requests.http", tmp_path, served.base))
    summary = result["summary"]
    assert summary["successRequests"] == summary["totalRequests"] == 42, summary
    assert summary["erroredRequests"] == summary["failedRequests"] == 0, summary
    _check_requests_http(exchanges)


async def test_requests_http_runs_as_vs_code_rest_client_reads_it(served: Serving, tmp_path: Path) -> None:
    _check_requests_http(await rest_client_run(pointed_at("requests.http", tmp_path, served.base)))


def _sign(body: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "examples/sign_request.py", body],
        cwd=ROOT,
        env={**os.environ, "WEBHOOK_SECRET": SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


async def test_the_signed_delivery_runs_against_an_app_that_checks_signatures(tmp_path: Path) -> None:
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"]["WEBHOOK_SECRET"] = SECRET
    (tmp_path / "signed.settings.json").write_text(json.dumps(settings))
    written = parse_http_file((EXAMPLES / "requests.signed.http").read_text())[1][0]
    signed = _sign(written.body)
    with serving(tmp_path, settings=tmp_path / "signed.settings.json") as server:
        async with (  # the app does check: unsigned is refused
            aiohttp.ClientSession() as session,
            session.post(f"{server.base}/threads/ticket-43/runs", data=written.body) as response,
        ):
            assert response.status == 401
        result, exchanges = httpyac_run(pointed_at("requests.signed.http", tmp_path / "run", server.base, signed))
    assert result["summary"]["successRequests"] == result["summary"]["totalRequests"] == 2
    assert [e.status for e in exchanges] == [200, 200], [e.body for e in exchanges]
    assert exchanges[0].body == exchanges[1].body  # the retry replayed the first reply
    assert all(urlsplit(e.url).hostname in LOOPBACK for e in exchanges)


def test_the_azure_examples_are_a_file_of_their_own_and_send_the_key() -> None:
    variables, requests = parse_http_file((EXAMPLES / "requests.azure.http").read_text())
    assert requests and all(r.url.startswith("{{azure}}/") for r in requests)
    assert urlsplit(variables["azure"]).hostname.endswith(".azurewebsites.net")
    assert all("x-functions-key" in r.headers for r in requests if not r.url.endswith("/health"))
    for name in ("requests.http", "requests.signed.http"):
        variables, requests = parse_http_file((EXAMPLES / name).read_text())
        assert all(r.url.startswith("{{base}}/") for r in requests), name
        assert urlsplit(variables["base"]).hostname in LOOPBACK, name
