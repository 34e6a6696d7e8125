"""Completion callbacks: signed, retried through the queue, and never sent where they must not go.

A real loopback receiver (``devtools/webhook_receiver.py``) and real Azurite; local
``http://127.0.0.1`` is allowed only where a test turns on CALLBACK_ALLOW_LOCAL_HTTP.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from standardwebhooks.webhooks import Webhook

from devtools.function_host import FunctionHost
from devtools.queue_runner import QueueRunner
from devtools.webhook_receiver import WebhookReceiver
from functions_adapter import wiring
from functions_adapter.callback_url import CallbackPolicy, CallbackRefused, PinnedResolver, check, is_public, parse
from resumable.background import callbacks as callback_deliveries
from tests.conftest import CALLBACK_SECRET as SECRET

ASYNC = {"Prefer": "respond-async"}


async def _background(host: FunctionHost, callback_url: str, text: str = "call me back") -> str:
    response = await host.request(
        "POST", "/api/runs", json_body={"messages": text, "callback_url": callback_url}, headers=ASYNC
    )
    assert response.status == 202, await response.body()
    return str((await response.json())["run_id"])


async def _status(host: FunctionHost, run_id: str) -> dict[str, Any]:
    return await (await host.request("GET", f"/api/runs/{run_id}")).json()


async def test_a_finished_run_is_pushed_signed_and_verifies_with_the_official_library(
    callback_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    [delivery] = receiver.deliveries
    assert delivery.verified
    # The Standard Webhooks reference library accepts it too (and returns the parsed payload).
    payload = Webhook(SECRET).verify(delivery.body, delivery.headers)
    status = await _status(callback_env, run_id)
    assert payload == {
        "type": "run.completed",
        "run_id": run_id,
        "status": "succeeded",
        "thread_id": None,
        "origin": "api",
        "result": status["result"],
    }
    assert delivery.headers["webhook-id"] == f"msg_{run_id}"
    assert status["callback"]["outcome"] == "delivered"
    assert [a["status"] for a in status["callback"]["attempts"]] == [200]


async def test_retries_until_the_receiver_accepts(callback_env: FunctionHost, receiver: WebhookReceiver) -> None:
    receiver.fail_first = 3
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    assert [d.answered for d in receiver.deliveries] == [500, 500, 500, 200]
    assert len({d.headers["webhook-id"] for d in receiver.deliveries}) == 1  # stable: receivers dedupe
    callback = (await _status(callback_env, run_id))["callback"]
    assert callback["outcome"] == "delivered"
    assert [a["status"] for a in callback["attempts"]] == [500, 500, 500, 200]


async def test_410_stops(callback_env: FunctionHost, receiver: WebhookReceiver) -> None:
    receiver.status = 410
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    assert len(receiver.deliveries) == 1
    assert (await _status(callback_env, run_id))["callback"]["outcome"] == "stopped"


async def test_gives_up_after_the_maximum_attempts(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBACK_MAX_ATTEMPTS", "4")
    receiver.status = 503
    run_id = await _background(callback_env, receiver.url)
    await QueueRunner(callback_env).run_until_idle()
    assert len(receiver.deliveries) == 4
    callback = (await _status(callback_env, run_id))["callback"]
    assert callback["outcome"] == "gave_up" and len(callback["attempts"]) == 4


async def test_a_failed_run_and_a_cancelled_one_are_reported_too(
    callback_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    failed = await _background(callback_env, receiver.url, "fail now")
    cancelled = await _background(callback_env, receiver.url, "never mind")
    assert (await callback_env.request("POST", f"/api/runs/{cancelled}/cancel")).status == 200
    await QueueRunner(callback_env).run_until_idle()
    by_run = {d.json()["run_id"]: d.json() for d in receiver.deliveries}
    assert by_run[failed]["status"] == "failed" and by_run[failed]["error"]["code"] == "workflow_failed"
    assert by_run[cancelled]["status"] == "cancelled" and "result" not in by_run[cancelled]


async def test_redirects_are_not_followed(callback_env: FunctionHost, receiver: WebhookReceiver) -> None:
    elsewhere = WebhookReceiver(SECRET)
    receiver.redirect_to = await elsewhere.start()
    try:
        run_id = await _background(callback_env, receiver.url)
        await QueueRunner(callback_env).run_until_idle()
    finally:
        await elsewhere.stop()
    assert receiver.deliveries and elsewhere.deliveries == []
    assert {a["status"] for a in (await _status(callback_env, run_id))["callback"]["attempts"]} == {302}


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # not https
        "https://127.0.0.1/hook",
        "https://localhost/hook",  # a name that resolves to loopback
        "https://2130706433/hook",  # 127.0.0.1 in decimal
        "https://0x7f000001/hook",  # and in hex
        "https://127.1/hook",  # and short
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",  # IPv4-mapped IPv6
        "https://10.0.0.7/hook",
        "https://192.168.1.1/hook",
        "https://169.254.169.254/latest/meta-data/",  # cloud metadata
        "https://[fd00::1]/hook",  # unique-local
        "https://[fe80::1]/hook",  # link-local
        "https://224.0.0.1/hook",  # multicast
        "https://100.64.0.1/hook",  # shared address space
        "https://0.0.0.0/hook",
        "https://[fec0::1]/hook",  # site-local IPv6 (deprecated, not global)
        "https://168.63.129.16/hook",  # Azure's wireserver
        "https://198.18.0.1/hook",  # benchmarking
        "https://[64:ff9b::a00:7]/hook",  # NAT64 of 10.0.0.7
        "https://[2002:a00:7::1]/hook",  # 6to4 of 10.0.0.7
        "https://[2001::1]/hook",  # Teredo
        "https://user:secret@example.com/hook",  # credentials in the URL
        "ftp://example.com/hook",
        "not a url",
    ],
)
async def test_unsafe_callback_urls_are_refused_at_submission(
    callback_env: FunctionHost, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.delenv("CALLBACK_ALLOW_LOCAL_HTTP")
    response = await callback_env.request(
        "POST", "/api/runs", json_body={"messages": "x", "callback_url": url}, headers=ASYNC
    )
    assert (response.status, (await response.json())["error"]["code"]) == (400, "invalid_request")
    container = wiring.container_for(wiring.load_settings())
    with contextlib.suppress(ResourceNotFoundError):  # no container at all: nothing was written
        assert [b.name async for b in container.list_blobs(name_starts_with="runs/")] == []


@pytest.mark.parametrize("default", [None, "http://127.0.0.1:9/done"])
async def test_an_empty_callback_url_is_400_not_ignored_or_replaced(
    callback_env: FunctionHost, monkeypatch: pytest.MonkeyPatch, default: str | None
) -> None:
    if default:
        monkeypatch.setenv("CALLBACK_URL", default)  # an empty one must not quietly become this
    for background in ({"background": True}, {}):
        response = await callback_env.request(
            "POST", "/api/runs", json_body={"messages": "x", "callback_url": "", **background}, headers=ASYNC
        )
        assert (response.status, (await response.json())["error"]["code"]) == (400, "invalid_request")
        assert "callback_url" in (await response.json())["error"]["message"]
    container = wiring.container_for(wiring.load_settings())
    with contextlib.suppress(ResourceNotFoundError):
        assert [b.name async for b in container.list_blobs(name_starts_with="runs/")] == []


# Every IANA special-purpose block (IPv4 and IPv6 registries), reserved space, multicast and
# Azure's platform addresses: refused. Embedded-IPv4 forms are judged by the IPv4 they carry.
REFUSED_ADDRESSES = [
    "0.0.0.0",
    "0.1.2.3",  # "this network"
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.0.1",  # private
    "100.64.0.1",
    "100.127.255.254",  # shared (carrier-grade NAT)
    "127.0.0.1",
    "127.255.255.254",  # loopback
    "169.254.0.1",
    "169.254.169.254",  # link-local, the instance metadata service
    "168.63.129.16",  # Azure's wireserver (platform DNS, health probes)
    "192.0.0.1",
    "192.0.0.9",
    "192.0.0.10",
    "192.0.0.170",  # IETF protocol assignments (incl. anycast)
    "192.0.2.1",
    "198.51.100.1",
    "203.0.113.1",  # documentation
    "192.31.196.1",
    "192.175.48.1",  # AS112
    "192.52.193.1",  # AMT
    "192.88.99.1",  # 6to4 relay anycast
    "198.18.0.1",
    "198.19.255.255",  # benchmarking
    "224.0.0.1",
    "239.255.255.250",  # multicast
    "240.0.0.1",
    "255.255.255.255",  # reserved, limited broadcast
    "::",
    "::1",  # unspecified, loopback
    "::a00:1",
    "::808:808",  # IPv4-compatible (deprecated): refused whatever it embeds
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:168.63.129.16",  # IPv4-mapped
    "64:ff9b::a00:1",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",  # NAT64 of private, loopback, IMDS
    "64:ff9b:1::808:808",  # local-use NAT64: local by definition
    "100::1",
    "100:0:0:1::1",  # discard-only, dummy prefix
    "2001::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2001:1::1",
    "2001:1::2",
    "2001:1::3",  # PCP, TURN, DNS-SD anycast
    "2001:2::1",  # benchmarking
    "2001:3::1",
    "2001:4:112::1",
    "2001:10::1",
    "2001:20::1",
    "2001:30::1",  # AMT, AS112, ORCHID, DRIP
    "2001:db8::1",
    "3fff::1",  # documentation
    "2002:a00:1::1",
    "2002:7f00:1::1",
    "2002:a9fe:a9fe::1",
    "2002::1",  # 6to4 of private, loopback, IMDS, 0/8
    "2620:4f:8000::1",  # AS112 direct delegation
    "5f00::1",  # SRv6 SIDs
    "fc00::1",
    "fd12:3456::1",  # unique-local
    "fe80::1",
    "fe80::1%2",  # link-local (scoped too)
    "fec0::1",
    "feff::1",  # site-local (deprecated)
    "ff02::1",
    "ff0e::1",  # multicast
    "4000::1",
    "8000::1",
    "e000::1",  # outside 2000::/3, the only global unicast space
]
ALLOWED_ADDRESSES = [
    "8.8.8.8",
    "1.1.1.1",
    "20.42.0.1",
    "52.0.0.1",
    "168.63.129.17",
    "169.253.255.255",
    "169.255.0.1",  # neighbours of refused addresses
    "100.63.255.255",
    "100.128.0.1",
    "172.32.0.1",
    "192.0.1.1",
    "198.17.255.255",
    "198.20.0.1",
    "223.255.255.254",
    "2001:4860:4860::8888",
    "2606:4700:4700::1111",
    "2a00:1450:4001::1",
    "2001:200::1",
    "::ffff:8.8.8.8",  # IPv4-mapped: the IPv4 decides
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "2002:808:808::1",  # 6to4 of 8.8.8.8
]


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_special_purpose_addresses_are_not_public(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", ALLOWED_ADDRESSES)
def test_global_unicast_addresses_are_public(address: str) -> None:
    assert is_public(address)


async def test_local_http_is_for_loopback_only_even_when_allowed() -> None:
    allowed = CallbackPolicy(allow_local_http=True)
    assert (await check("http://127.0.0.1:9/x", allowed)).addresses == ("127.0.0.1",)
    with pytest.raises(CallbackRefused):
        await check("http://10.0.0.7/x", allowed)
    with pytest.raises(CallbackRefused):
        await check("http://127.0.0.1:9/x", CallbackPolicy())


def test_the_host_allowlist_takes_exact_names_and_wildcard_subdomains() -> None:
    policy = CallbackPolicy(allowed_hosts=("hooks.example.com", "*.corp.example"))
    assert parse("https://hooks.example.com/x", policy)[1] == "hooks.example.com"
    assert parse("https://a.b.corp.example/x", policy)[1] == "a.b.corp.example"
    for url in ("https://evil.example.com/x", "https://corp.example/x", "https://xcorp.example/x"):
        with pytest.raises(CallbackRefused, match="CALLBACK_ALLOWED_HOSTS"):
            parse(url, policy)


async def test_the_address_is_checked_again_at_delivery(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBACK_MAX_ATTEMPTS", "1")
    run_id = await _background(callback_env, receiver.url)
    # Between submission and delivery the address stops being acceptable (as a DNS
    # rebinding would make it): the delivery is refused before any connection.
    monkeypatch.delenv("CALLBACK_ALLOW_LOCAL_HTTP")
    await QueueRunner(callback_env).run_until_idle()
    assert receiver.deliveries == []
    callback = (await _status(callback_env, run_id))["callback"]
    assert callback["attempts"][0]["error"] == "refused_address" and callback["outcome"] == "gave_up"


async def test_the_connection_goes_to_the_checked_address_only() -> None:
    checked = await check("http://127.0.0.1:9/x", CallbackPolicy(allow_local_http=True))
    resolver = PinnedResolver(checked)
    assert [r["host"] for r in await resolver.resolve("127.0.0.1", 9)] == ["127.0.0.1"]
    with pytest.raises(OSError, match="not the checked"):
        await resolver.resolve("attacker.example", 443)


async def test_a_synchronous_call_with_a_callback_is_refused(
    callback_env: FunctionHost, receiver: WebhookReceiver
) -> None:
    response = await callback_env.request(
        "POST", "/api/runs", json_body={"messages": "x", "callback_url": receiver.url}
    )
    assert response.status == 400
    assert "background" in (await response.json())["error"]["message"]


async def test_a_callback_without_callback_secret_is_a_server_misconfiguration(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CALLBACK_SECRET")
    response = await callback_env.request(
        "POST", "/api/runs", json_body={"messages": "x", "callback_url": receiver.url}, headers=ASYNC
    )
    assert (response.status, (await response.json())["error"]["code"]) == (500, "server_misconfigured")


async def test_callback_url_setting_is_the_default(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALLBACK_URL", receiver.url)
    response = await callback_env.request("POST", "/api/runs", json_body={"messages": "x"}, headers=ASYNC)
    assert response.status == 202
    await QueueRunner(callback_env).run_until_idle()
    assert len(receiver.deliveries) == 1 and receiver.deliveries[0].verified


async def test_a_result_over_the_payload_cap_is_left_for_the_status_route(
    callback_env: FunctionHost, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(callback_deliveries, "MAX_PAYLOAD_BYTES", 200)
    run_id = await _background(callback_env, receiver.url, "a reply longer than two hundred bytes " * 4)
    await QueueRunner(callback_env).run_until_idle()
    payload = receiver.deliveries[0].json()
    assert payload["result"] is None and payload["result_truncated"] is True
    assert (await _status(callback_env, run_id))["result"]["checkpoint_id"] == run_id
