"""The A2A agent card through the registered functions, against real Azurite: its version from
the catalog (the newest, or the one the URL names), its turn rule from the version policy,
its security schemes with Easy Auth off and on, and every field a name the a2a-sdk knows."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import AgentCard
from google.protobuf import json_format

from devtools.function_host import FunctionHost
from tests.adapter.conftest import V1, V2, V3, Register

TENANT_ISSUER = "https://login.microsoftonline.com/00000000-0000-0000-0000-00000000abcd/v2.0"


async def card_of(host: FunctionHost, workflow: str) -> dict[str, Any]:
    response = await host.request("GET", f"/api/a2a/{workflow}/.well-known/agent-card.json")
    assert response.status == 200, await response.body()
    card: dict[str, Any] = await response.json()
    json_format.ParseDict(card, AgentCard())  # raises on any field name the SDK does not know
    return card


async def test_the_card_names_the_newest_version_a_new_context_runs(host: FunctionHost, register: Register) -> None:
    register("pinned", v1=V1, v2=V2, v3=V3)
    card = await card_of(host, "default")
    assert card["version"] == "v3"
    assert card["name"] == "default"
    assert card["description"] == (
        "The hosted workflow 'default': each context is a durable thread, each task one turn."
    )
    skill = card["skills"][0]
    assert "new context starts on version v3" in skill["description"]
    assert "stays on the version it started on" in skill["description"]
    register("upgrade", v1=V1, v2=V2)
    upgraded = await card_of(host, "default")
    assert upgraded["version"] == "v2"
    assert "moves to the newest at its next turn" in upgraded["skills"][0]["description"]


async def test_a_card_for_name_at_version_names_that_version(host: FunctionHost, register: Register) -> None:
    register("pinned", v1=V1, v2=V2, v3=V3)
    card = await card_of(host, "default@v2")
    assert card["version"] == "v2"
    assert card["name"] == "default"
    assert card["supportedInterfaces"][0]["url"].endswith("/api/a2a/default@v2")
    assert card["skills"][0]["description"].endswith(
        "Every turn runs version v2: a thread on an older version moves to it, one on a newer version is refused."
    )
    missing = await host.request("GET", "/api/a2a/default@v9/.well-known/agent-card.json")
    assert missing.status == 404
    assert (await missing.json())["error"]["details"]["versions"] == ["v1", "v2", "v3"]


async def test_an_unversioned_workflow_is_its_v1(host: FunctionHost) -> None:
    card = await card_of(host, "step-pipeline")
    assert (card["name"], card["version"]) == ("step-pipeline", "v1")


async def test_without_easy_auth_the_function_key_is_the_only_scheme(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WEBSITE_AUTH_ENABLED", raising=False)
    monkeypatch.setenv("WEBSITE_AUTH_OPENID_ISSUER", TENANT_ISSUER)  # read only when Easy Auth is on
    card = await card_of(host, "default")
    assert list(card["securitySchemes"]) == ["functionKey"]
    assert card["securitySchemes"]["functionKey"]["apiKeySecurityScheme"] == {
        "location": "header",
        "name": "x-functions-key",
        "description": "An Azure Functions key (function or host key).",
    }
    assert card["securityRequirements"] == [{"schemes": {"functionKey": {"list": []}}}]


@pytest.mark.parametrize(
    ("setting", "issuer", "discovery"),
    [
        ("EASY_AUTH_ISSUER", TENANT_ISSUER, TENANT_ISSUER + "/.well-known/openid-configuration"),
        ("WEBSITE_AUTH_OPENID_ISSUER", TENANT_ISSUER + "/", TENANT_ISSUER + "/.well-known/openid-configuration"),
        ("EASY_AUTH_ISSUER", None, "https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration"),
        (
            "EASY_AUTH_ISSUER",
            "http://not-https.example/v2.0",
            "https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration",
        ),
    ],
)
async def test_with_easy_auth_a_caller_needs_an_entra_token_and_the_function_key(
    host: FunctionHost, monkeypatch: pytest.MonkeyPatch, setting: str, issuer: str | None, discovery: str
) -> None:
    """Bicep sets ``EASY_AUTH_ISSUER`` to the issuer Easy Auth validates; the platform's
    ``WEBSITE_AUTH_OPENID_ISSUER`` serves where it is not set."""
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    for name in ("EASY_AUTH_ISSUER", "WEBSITE_AUTH_OPENID_ISSUER"):
        monkeypatch.delenv(name, raising=False)
    if issuer is not None:
        monkeypatch.setenv(setting, issuer)
    card = await card_of(host, "default")
    assert card["securitySchemes"]["entraId"]["openIdConnectSecurityScheme"]["openIdConnectUrl"] == discovery
    assert "x-functions-key" in str(card["securitySchemes"]["functionKey"])
    # One requirement naming both: the platform checks the token, then the host the key.
    assert card["securityRequirements"] == [{"schemes": {"functionKey": {"list": []}, "entraId": {"list": []}}}]


async def test_the_sdk_check_fails_on_a_misspelt_field(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ParseDict in ``card_of`` can fail: a field name the SDK does not know raises."""
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    card = await card_of(host, "default")
    scheme = card["securitySchemes"]["entraId"]["openIdConnectSecurityScheme"]
    scheme["openIdConnectURL"] = scheme.pop("openIdConnectUrl")
    with pytest.raises(json_format.ParseError, match="openIdConnectURL"):
        json_format.ParseDict(card, AgentCard())
