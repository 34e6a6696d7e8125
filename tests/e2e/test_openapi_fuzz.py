"""Schemathesis against ``scripts/serve.sh``: every operation of the OpenAPI document
(functions_adapter/openapi.json), valid and invalid requests; no answer is a 5xx and every
answer (status, content type, headers, body) matches the document.

``OPENAPI_FUZZ_EXAMPLES`` sets the examples per operation: 8 by default (the whole file then
takes well under a minute on two cores); ``bench/openapi_fuzz.sh`` runs it with 500.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from functions_adapter.service_info import DOCUMENT
from tests.serving import ROOT, Serving, serving

pytestmark = pytest.mark.e2e
EXAMPLES = int(os.environ.get("OPENAPI_FUZZ_EXAMPLES", "8"))
# A schema-invalid request must be refused, with any documented 4xx: the checks run in a fixed
# order (body size, signature, content type, If-Match, body), so a bad body that also sends a
# stale If-Match is rightly 412.
CONFIG = schemathesis.Config.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": ["4XX"]}}})
SCHEMA = schemathesis.openapi.from_dict(json.loads(DOCUMENT.read_text()), config=CONFIG)
# Every adapter on, so that every documented route exists (the secrets are test values).
ADAPTER_SETTINGS = {
    "GITHUB_WEBHOOK_SECRET": "g" * 32,
    "SLACK_SIGNING_SECRET": "s" * 32,
    "SLACK_BOT_TOKEN": "xoxb-test",
    "CALLBACK_SECRET": "whsec_" + "c" * 32,
    "ADAPTER_ANSWER_URL": "http://127.0.0.1:9/api/adapters/slack/answer",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    tmp = tmp_path_factory.mktemp("fuzz")
    values = json.loads((ROOT / "local.settings.sample.json").read_text())
    values["Values"].update(ADAPTER_SETTINGS)
    settings_file: Path = tmp / "local.settings.json"
    settings_file.write_text(json.dumps(values))
    with serving(tmp, settings=settings_file) as server:
        yield server


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_document(case: schemathesis.Case, served: Serving) -> None:
    case.call_and_validate(
        base_url=served.base.removesuffix("/api"),
        timeout=30,
        # The document's request schemas are a superset: the parsers also hold rules across
        # fields ("messages or checkpoint_id", "messages xor responses") and on values
        # (a non-empty message) that a request schema does not spell, and answer them 400.
        # Function keys are checked by the Functions host in Azure, not by the app, and not
        # locally (as with func start): "accepts invalid authentication" holds by design here.
        excluded_checks=[schemathesis.checks.positive_data_acceptance, schemathesis.checks.ignored_auth],
    )
