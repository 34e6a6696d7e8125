"""The OpenAPI document (functions_adapter/openapi.json) against the code: every route that
``function_app`` registers, and nothing else; every error in the documented shape; served
as written at ``GET /api/openapi.json``. tests/e2e/test_openapi_fuzz.py holds the answers to it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import schemathesis

from devtools.function_host import FunctionHost
from functions_adapter.service_info import DOCUMENT
from functions_adapter.webhooks import ADAPTERS
from resumable import __version__
from tests.infra.test_docs import ALL_ROUTES_ENV, registered_routes

pytestmark = pytest.mark.infra
DOC: dict[str, Any] = json.loads(DOCUMENT.read_text())
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}
ERROR_SHAPES = {"#/components/schemas/Error", "#/components/schemas/OpenAIError"}


def documented() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in DOC["paths"].items() for method in item if method in METHODS}


def test_it_documents_every_registered_route_and_nothing_else() -> None:
    assert documented() == registered_routes(ALL_ROUTES_ENV)


def test_the_adapters_routes_say_they_are_optional() -> None:
    optional = documented() - registered_routes(dict.fromkeys(ADAPTERS, ""))
    assert optional, "the adapters' routes are in the document"
    for method, path in optional:
        assert "only when" in DOC["paths"][path][method.lower()]["summary"], path


def test_every_error_status_uses_a_documented_error_shape() -> None:
    checked = 0
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert schema.get("$ref") in ERROR_SHAPES, f"{method.upper()} {path} {status}"
                responses_route = path.startswith(("/api/responses", "/api/conversations"))
                expected = "OpenAIError" if responses_route else "Error"
                assert schema["$ref"].endswith("/" + expected), f"{method.upper()} {path} {status}"
                checked += 1
    assert checked > 50


def test_every_503_documents_retry_after() -> None:
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            if "503" in operation["responses"]:
                assert "Retry-After" in operation["responses"]["503"]["headers"], f"{method} {path}"


def test_it_is_a_valid_openapi_3_1_document() -> None:
    schema = schemathesis.openapi.from_dict(DOC)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(documented())


async def test_it_is_served_at_api_openapi_json_anonymously(host: FunctionHost) -> None:
    (route,) = [r for r in host.routes if r.template == "openapi.json"]
    assert route.auth_level == "ANONYMOUS"
    response = await host.request("GET", "/api/openapi.json")
    assert response.status == 200
    served = await response.json()
    assert served["info"]["version"] == __version__
    assert {k: v for k, v in served.items() if k != "info"} == {k: v for k, v in DOC.items() if k != "info"}


def test_the_documented_idempotency_key_is_the_key_the_app_accepts() -> None:
    """The fuzzer sends keys that break the documented pattern and expects a 4xx: a key the
    app takes (a space is printable ASCII) must match it, and one it refuses must not. HTTP
    drops a header value's leading and trailing spaces, so the pattern has none there."""
    from resumable.base.errors import InvalidRequest
    from resumable.core.idempotency_record import validate_key

    patterns = {
        parameter["schema"]["pattern"]
        for item in DOC["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict)
        for parameter in operation.get("parameters", [])
        if parameter.get("name") == "Idempotency-Key"
    }
    assert len(patterns) == 1, patterns
    pattern = re.compile(patterns.pop())
    for key in ["k", "a b", "~!", "", "é", "tab\there", "x" * 255, "x" * 256, "x" * 254 + " y"]:
        try:
            accepted = validate_key(key) == key
        except InvalidRequest:
            accepted = False
        assert bool(pattern.search(key)) == accepted, key
