"""Headers parsed by the background routes (``Prefer``, ``Last-Event-ID``): hostile or
malformed values are 400 ``invalid_request``, never a 500, and cost no big-number work."""

from __future__ import annotations

import asyncio
import re

import pytest

from devtools.function_host import FunctionHost, HostResponse
from functions_adapter.headers import MAX_WAIT_SECONDS, last_event_id, preferences, wait_seconds
from resumable.base.errors import InvalidRequest

ASYNC = {"Prefer": "respond-async"}


async def _queued_run(host: FunctionHost) -> str:
    response = await host.request("POST", "/api/runs", json_body={"messages": "stay queued"}, headers=ASYNC)
    assert response.status == 202, await response.body()
    return str((await response.json())["run_id"])


async def _code(response: HostResponse) -> tuple[int, str | None]:
    if response.status == 200:
        return 200, None  # a stream of a queued run would never end
    body = await asyncio.wait_for(response.json(), 5)
    return response.status, (body.get("error") or {}).get("code")


@pytest.mark.parametrize(
    "value",
    ["1." + "9" * 5000, "9" * 5000 + ".1", "1.2.3", "abc", "-1.2", "1.", ".5", "1.0x", "1 .2", "1.\u00b2"],
)
async def test_a_hostile_or_malformed_last_event_id_is_400(host: FunctionHost, queue_env: str, value: str) -> None:
    run_id = await _queued_run(host)
    response = await host.request("GET", f"/api/runs/{run_id}/stream", headers={"Last-Event-ID": value})
    assert await _code(response) == (400, "invalid_request")


@pytest.mark.parametrize("value", ["wait=" + "9" * 4301, "wait=abc", "wait=-5", "wait=1.5", "wait=", "wait=\u00b2"])
async def test_a_hostile_or_malformed_prefer_wait_is_400(host: FunctionHost, queue_env: str, value: str) -> None:
    run_id = await _queued_run(host)
    response = await host.request("GET", f"/api/runs/{run_id}", headers={"Prefer": value})
    assert await _code(response) == (400, "invalid_request")


async def test_well_formed_headers_still_work(host: FunctionHost, queue_env: str) -> None:
    run_id = await _queued_run(host)
    # No wait (or wait=0) answers at once; other preferences and parameters are ignored.
    for prefer in (None, "wait=0", "respond-async", "handling=lenient; x=1", 'wait="0"'):
        response = await host.request("GET", f"/api/runs/{run_id}", headers={"Prefer": prefer} if prefer else None)
        assert response.status == 200, prefer


@pytest.mark.parametrize(
    ("prefer", "seconds"),
    [
        (None, 0.0),
        ("", 0.0),
        ("respond-async", 0.0),
        ("wait=10", 10.0),
        ("respond-async, wait=5", 5.0),
        ("WAIT=7", 7.0),
        ('wait="3"', 3.0),
        ("wait=3; foo=bar", 3.0),
        ("wait=1000", float(MAX_WAIT_SECONDS)),  # over the cap: the cap
        ("wait=" + "0" * 5000 + "7", 7.0),  # leading zeros are still a small number
        ("wait=2, wait=9", 2.0),  # RFC 7240: only the first instance counts
    ],
)
def test_prefer_wait_values(prefer: str | None, seconds: float) -> None:
    assert wait_seconds(prefer) == seconds


def test_preferences_are_lower_cased_names_first_instance_wins() -> None:
    assert preferences("Respond-Async, WAIT=2, wait=9") == {"respond-async": "", "wait": "2"}
    assert preferences(None) == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, (0, 0)), ("", (0, 0)), ("  ", (0, 0)), ("1.0", (1, 0)), ("2.15", (2, 15)), (" 3.4 ", (3, 4))],
)
def test_last_event_id_values(value: str | None, expected: tuple[int, int]) -> None:
    assert last_event_id(value) == expected


def test_a_long_last_event_id_is_refused_before_int() -> None:
    with pytest.raises(InvalidRequest):
        last_event_id("1." + "0" * 100)


async def test_every_route_answers_with_a_request_id_no_store_and_its_storage_cost(host: FunctionHost) -> None:
    """``docs/api.md``'s "Headers on every answer", for every route the app registers: each
    is called once (path parameters filled with an ID nothing has; a POST with an empty JSON
    object), and whatever it answers, 2xx or an error, carries the three headers. A stream,
    whose headers leave before its work, carries no operation count."""
    checked = []
    for route in host.routes:
        path = re.sub(r"\{\w+\}", "no-such-id", f"/api/{route.template}")
        for method in sorted(route.methods):
            body = {} if method in ("POST", "PUT") else None
            response = await host.request(method, path, json_body=body)
            headers = {name.lower(): value for name, value in response.headers.items()}
            where = f"{method} {path} -> {response.status}"
            assert re.fullmatch(r"[0-9a-f]{32}", headers.get("x-request-id", "")), where
            assert headers.get("cache-control") in ("no-store", "no-cache"), where
            if response.is_stream:
                assert "x-storage-operations" not in headers, where
                await response.response.body_iterator.aclose()  # type: ignore[attr-defined]
            else:
                assert headers.get("x-storage-operations", "").isdigit(), where
            checked.append(f"{method} {route.template}")
    assert "GET health" in checked and "GET openapi.json" in checked
