"""infra/ without a Bicep CLI: it parses, checkov passes, and the security properties hold."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pycep import BicepParser

from functions_adapter.settings import (
    ADAPTER_SECRETS,
    ADAPTER_SETTINGS,
    CODE_SETTINGS,
    MODEL_SETTINGS,
    PLATFORM_SETTINGS,
    QUEUE_SETTINGS,
    STORAGE_PREFIXES,
    TELEMETRY_SETTINGS,
    TUNING_SETTINGS,
)
from resumable.storage import layout

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))
CHECKOV = ROOT / ".venv-iac" / "bin" / "checkov"


@cache
def parsed(name: str) -> dict[str, Any]:
    return BicepParser().parse(file_path=INFRA / name)


def resource(file: str, name: str) -> dict[str, Any]:
    return parsed(file)["resources"][name]["config"]


def all_text() -> str:
    return "\n".join(p.read_text() for p in BICEP_FILES)


# -- syntax and checkov -----------------------------------------------------------


def test_there_are_templates_to_check() -> None:
    assert {p.name for p in BICEP_FILES} >= {
        "main.bicep",
        "function-app.bicep",
        "storage.bicep",
        "rbac.bicep",
        "monitoring.bicep",
        "network.bicep",
        "identity.bicep",
    }


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_template_parses(path: Path) -> None:
    template = parsed(str(path.relative_to(INFRA)))
    assert template.get("resources") or template.get("modules")


def test_the_parser_rejects_a_syntax_error() -> None:
    broken = "resource sa 'Microsoft.Storage/storageAccounts@2023-05-01' = {\n  name: 'x'\n  properties: {\n}\n"
    with pytest.raises(Exception, match="Unexpected"):
        BicepParser().parse(text=broken)


def skips() -> dict[str, str]:
    entries: dict[str, str] = {}
    for line in (INFRA / "checkov-skips.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            check_id, _, reason = line.partition(" ")
            entries[check_id] = reason.strip()
    return entries


def test_every_skipped_check_is_justified() -> None:
    for check_id, reason in skips().items():
        assert re.fullmatch(r"CKV_AZURE_\d+", check_id), check_id
        assert len(reason) >= 30, f"{check_id} needs a real justification"


def test_checkov_passes_with_no_parsing_errors(tmp_path: Path) -> None:
    assert CHECKOV.exists(), "checkov is not installed: run scripts/setup.sh"
    done = subprocess.run(
        [
            str(CHECKOV),
            "-d",
            str(INFRA),
            "--framework",
            "bicep",
            "-o",
            "json",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "BC_SKIP_MAPPING": "TRUE", "HOME": str(tmp_path)},
    )
    report = json.loads(done.stdout)
    report = report if isinstance(report, dict) else report[0]
    summary = report["summary"]
    # Run without --skip-check and filter here, so a skip that no longer fires is caught.
    failed = [(c["check_id"], c["file_path"], c["resource"]) for c in report["results"]["failed_checks"]]
    assert summary["parsing_errors"] == 0, done.stderr[-2000:]
    assert summary["resource_count"] >= 20
    assert summary["passed"] > 0
    assert [f for f in failed if f[0] not in skips()] == []
    fired = {check_id for check_id, _, _ in failed}
    assert set(skips()) <= fired, f"stale skips: {sorted(set(skips()) - fired)}"


# -- security properties -------------------------------------------------------------


def test_no_keys_or_connection_strings_anywhere() -> None:
    text = all_text()
    for forbidden in ("listKeys(", "AccountKey=", "SharedAccessSignature", "connectionStrings"):
        assert forbidden not in text
    app_settings = parsed("app/function-app.bicep")["variables"]["appSettings"]["value"]
    for prefix in STORAGE_PREFIXES:
        assert prefix not in app_settings, f"{prefix} as a connection string"


def test_storage_account_is_locked_down() -> None:
    props = resource("app/storage.bicep", "storage")["properties"]
    assert props["allowSharedKeyAccess"] is False
    assert props["allowBlobPublicAccess"] is False
    assert props["minimumTlsVersion"] == "TLS1_2"
    assert props["supportsHttpsTrafficOnly"] is True
    assert props["defaultToOAuthAuthentication"] is True
    assert "vnetEnabled" in json.dumps(props["publicNetworkAccess"])
    for container in ("deploymentContainer", "checkpointContainer"):
        assert resource("app/storage.bicep", container)["properties"]["publicAccess"] == "None"


def test_lifecycle_rules_expire_idle_threads_whole_and_idempotency_records() -> None:
    """Retention goes by idle time, never by age, so a thread in use never loses its head.

    Azurite has no lifecycle rules, so the rules are checked here on the template; what a
    caller sees once they fired is tested in tests/library/test_thread_pointers.py.
    """
    storage = parsed("app/storage.bicep")
    tracking = resource("app/storage.bicep", "blobService")["properties"]["lastAccessTimeTrackingPolicy"]
    assert tracking == {
        "enable": True,
        "name": "AccessTimeTracking",
        "trackingGranularityInDays": 1,
        "blobType": ["blockBlob"],
    }
    rules = resource("app/storage.bicep", "lifecycle")["properties"]["policy"]["rules"]
    # Idle expiry can be turned off (0 days); idempotency expiry always applies.
    assert json.dumps(rules).count("checkpointRetentionDays") == 1
    idle_rule = storage["variables"]["idleThreadRule"]["value"]["definition"]
    assert idle_rule["actions"]["baseBlob"]["delete"] == {
        "daysAfterLastAccessTimeGreaterThan": "checkpointRetentionDays"
    }
    # Checkpoints and thread pointers share one idle clock, so an idle thread goes whole;
    # the prefixes must be where blob_store and threads write, and nothing else.
    assert sorted(idle_rule["filters"]["prefixMatch"]) == sorted(
        "${checkpointContainerName}/" + prefix for prefix in layout.IDLE_EXPIRY
    )
    text = (INFRA / "app" / "storage.bicep").read_text()
    assert "daysAfterCreationGreaterThan" not in text, "an age rule would delete a live thread's head"
    idempotency_rule = storage["variables"]["idempotencyRule"]["value"]["definition"]
    # Idempotency records, and background runs' records, event logs and pending lists: the
    # prefixes the code writes, so a rename in code cannot leave them growing forever.
    assert idempotency_rule["filters"]["prefixMatch"] == [
        "${checkpointContainerName}/" + prefix for prefix in layout.MODIFIED_EXPIRY
    ]
    assert idempotency_rule["filters"]["blobTypes"] == ["blockBlob", "appendBlob"]
    assert idempotency_rule["actions"]["baseBlob"]["delete"] == {
        "daysAfterModificationGreaterThan": "idempotencyRetentionDays"
    }
    assert parsed("main.bicep")["parameters"]["checkpointRetentionDays"]["default"] == 30


def test_function_app_is_flex_consumption_python_matching_the_tests() -> None:
    plan = resource("app/function-app.bicep", "plan")
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    assert plan["properties"]["reserved"] is True
    site = resource("app/function-app.bicep", "functionApp")
    props = site["properties"]
    assert props["httpsOnly"] is True
    assert props["siteConfig"]["ftpsState"] == "Disabled"
    assert props["siteConfig"]["minTlsVersion"] == "1.2"
    runtime = props["functionAppConfig"]["runtime"]
    assert runtime == {"name": "python", "version": "pythonVersion"}
    # The deployed default is the newest Python pyproject.toml allows, the one CI tests first;
    # CI runs the whole suite on 3.11 as well, and both are allowed values.
    python = parsed("app/function-app.bicep")["parameters"]["pythonVersion"]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    newest = int(requires.split("<3.")[1]) - 1
    assert python["default"] == f"3.{newest}" == "3.13"
    text = (INFRA / "app" / "function-app.bicep").read_text()
    assert "@allowed([\n  '3.11'\n  '3.12'\n  '3.13'\n])\nparam pythonVersion string = '3.13'" in text
    assert site["identity"]["type"] == "UserAssigned"
    deployment_auth = props["functionAppConfig"]["deployment"]["storage"]["authentication"]
    assert deployment_auth["type"] == "UserAssignedIdentity"
    scale = props["functionAppConfig"]["scaleAndConcurrency"]
    assert (scale["instanceMemoryMB"], scale["maximumInstanceCount"]) == ("instanceMemoryMB", "maximumInstanceCount")
    text = (INFRA / "app" / "function-app.bicep").read_text()
    assert "name: 'function:run_in_background'" in text  # always-ready, per function, when asked for


def test_identity_based_settings() -> None:
    settings = parsed("app/function-app.bicep")["variables"]["appSettings"]["value"]
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == "identityClientId"
    assert settings["CHECKPOINT_STORAGE__clientId"] == "identityClientId"
    assert settings["CHECKPOINT_STORAGE__blobServiceUri"] == "storageBlobEndpoint"
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"].endswith("Authorization=AAD")
    # The run queue: identity-based, from the storage module's endpoint, named by one parameter.
    assert settings["AzureWebJobsStorage__queueServiceUri"] == "storageQueueEndpoint"
    assert settings["RUNS_QUEUE"] == "runsQueueName"
    # Callbacks: the secret only ever from Key Vault, and local http never on in Azure.
    secret = settings["CALLBACK_SECRET"]["operator"]["operands"]
    assert (secret["true_value"], secret["false_value"]) == ("", "@Microsoft.KeyVault(SecretUri=${callbackSecretUri})")
    assert settings["CALLBACK_ALLOW_LOCAL_HTTP"] == "false"
    # The web console is off in Azure until an operator sets it (docs/console.md).
    assert settings["CONSOLE_ENABLED"] == "false"


def test_the_run_queue_and_its_poison_queue_exist_with_the_setting_s_name() -> None:
    storage = parsed("app/storage.bicep")["resources"]
    assert storage["queueService"]["type"] == "Microsoft.Storage/storageAccounts/queueServices"
    names = {storage[r]["config"]["name"] for r in ("runsQueue", "runsPoisonQueue")}
    assert names == {"runsQueueName", "${runsQueueName}-poison"}
    main = (INFRA / "main.bicep").read_text()
    assert "runsQueueName: runsQueueName" in main
    assert parsed("main.bicep")["parameters"]["runsQueueName"]["default"] == "runs"
    assert (
        "queueEndpoint string = storage.properties.primaryEndpoints.queue"
        in (INFRA / "app" / "storage.bicep").read_text()
    )


def test_monitoring_has_local_auth_disabled() -> None:
    assert resource("app/monitoring.bicep", "applicationInsights")["properties"]["DisableLocalAuth"] is True
    workspace = resource("app/monitoring.bicep", "logAnalytics")["properties"]
    assert workspace["features"]["disableLocalAuth"] is True


def test_least_privilege_role_assignments() -> None:
    rbac = parsed("app/rbac.bicep")
    roles = rbac["variables"]
    assert roles["storageBlobDataOwner"]["value"] == "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
    assert roles["storageBlobDataContributor"]["value"] == "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
    assert roles["monitoringMetricsPublisher"]["value"] == "3913510d-42f4-4e42-8a64-420c390055eb"
    assert roles["storageQueueDataContributor"]["value"] == "974c5e8b-45b9-4653-ba55-5f855dd0fb88"
    assert rbac["resources"]["queueContributor"]["type"] == "Microsoft.Authorization/roleAssignments"
    text = (INFRA / "app" / "rbac.bicep").read_text()
    # The checkpoint role is scoped to the container, not the account.
    assert re.search(r"checkpointContributor[^\n]*\n(?:.*\n){0,4}\s+scope: checkpointContainer", text)
    assert "principalType: principal.type" in text
    assert "'User'" in text


def test_vnet_option_adds_private_endpoint_and_delegated_subnet() -> None:
    network = parsed("app/network.bicep")
    assert network["resources"]["privateEndpoints"]["type"] == "Microsoft.Network/privateEndpoints"
    # One private endpoint and DNS zone per storage service the app uses: blobs and the run queue.
    assert network["variables"]["storageServices"]["value"] == ["blob", "queue"]
    text = (INFRA / "app" / "network.bicep").read_text()
    assert "Microsoft.App/environments" in text
    assert "privatelink.${service}." in text
    main = parsed("main.bicep")
    assert main["parameters"]["vnetEnabled"]["default"] is False


def test_outputs_for_azd_and_the_readme() -> None:
    outputs = parsed("main.bicep")["outputs"]
    assert {"AZURE_FUNCTION_APP_NAME", "AZURE_FUNCTION_APP_HOSTNAME", "AZURE_STORAGE_ACCOUNT_NAME"} <= set(outputs)


# -- settings parity ------------------------------------------------------------------


def local_settings() -> dict[str, str]:
    return json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]


def bicep_settings() -> dict[str, Any]:
    """Every setting Bicep can set: the common ones and the per-Python-version ones."""
    variables = parsed("app/function-app.bicep")["variables"]
    per_version = variables["pythonWorkerSettings"]["value"]["operator"]["operands"]
    return {**variables["appSettings"]["value"], **per_version["true_value"], **per_version["false_value"]}


def test_init_indexing_is_set_only_for_the_older_worker() -> None:
    """3.11/3.12's worker needs PYTHON_ENABLE_INIT_INDEXING for HTTP streaming; the 3.13+ worker
    never reads it (tests/e2e/test_worker_conformance.py runs it with the setting unset)."""
    file = parsed("app/function-app.bicep")
    assert "PYTHON_ENABLE_INIT_INDEXING" not in file["variables"]["appSettings"]["value"]
    conditional = file["variables"]["pythonWorkerSettings"]["value"]["operator"]
    assert conditional["type"] == "conditional"
    condition = conditional["operands"]["condition"]["function"]
    assert condition["type"] == "contains" and condition["parameters"]["item_to_find"] == "pythonVersion"
    (allowed,) = [d["argument"] for d in file["parameters"]["pythonVersion"]["decorators"] if d["type"] == "allowed"]
    older_worker = [version for version in allowed if tuple(map(int, version.split("."))) < (3, 13)]
    assert condition["parameters"]["container"] == older_worker == ["3.11", "3.12"]
    assert conditional["operands"]["true_value"] == {"PYTHON_ENABLE_INIT_INDEXING": "1"}
    assert conditional["operands"]["false_value"] == {}
    properties = file["resources"]["functionApp__settings"]["config"]["properties"]["function"]
    assert properties == {"type": "union", "parameters": {"arg_1": "appSettings", "arg_2": "pythonWorkerSettings"}}


def test_settings_parity_code_local_and_bicep() -> None:
    """The code, local.settings.sample.json and Bicep name the same settings.

    Storage is the one deliberate difference: locally it is a connection string (Azurite),
    in Azure the managed-identity form, so no key ever reaches the cloud config.
    """
    local, bicep = set(local_settings()), set(bicep_settings())
    known = set(CODE_SETTINGS) | set(PLATFORM_SETTINGS)
    assert local - known == set(), "local.settings.sample.json has settings nothing reads"
    assert bicep - known == set(), "Bicep sets settings nothing reads"

    for group in (TUNING_SETTINGS, MODEL_SETTINGS, TELEMETRY_SETTINGS, ADAPTER_SETTINGS):
        assert set(group) <= local
        assert set(group) <= bicep
    for prefix in STORAGE_PREFIXES:
        assert prefix in local, f"{prefix} (connection string) belongs in local settings"
        assert f"{prefix}__blobServiceUri" in bicep, f"{prefix} must use managed identity in Azure"
        assert f"{prefix}__clientId" in bicep
    assert "PYTHON_ENABLE_INIT_INDEXING" in local
    assert "PYTHON_ENABLE_INIT_INDEXING" in bicep
    # Local only: `func start` on 3.11/3.12 otherwise imports the worker's bundled azure-functions
    # (1.22.0b4 in worker 4.34) ahead of the locked one. In Azure the app's packages come first.
    assert local_settings()["PYTHON_ISOLATE_WORKER_DEPENDENCIES"] == "1"
    assert "PYTHON_ISOLATE_WORKER_DEPENDENCIES" not in bicep
    # The run queue: a connection string locally (AzureWebJobsStorage), the identity form in Azure.
    assert set(QUEUE_SETTINGS) <= bicep and not set(QUEUE_SETTINGS) & local
    # Every setting the code reads has a row of its own in docs/configuration.md
    # (tests/infra/test_docs.py checks the tables both ways, and the defaults they state).
    table = (ROOT / "docs" / "configuration.md").read_text()
    undocumented = [name for name in CODE_SETTINGS if f"| `{name}` |" not in table]
    assert undocumented == [], "settings missing from docs/configuration.md"


def test_adapter_secrets_are_key_vault_references_only() -> None:
    """The Slack and GitHub secrets reach the app only as Key Vault references: a URI
    parameter (not @secure: it is no secret) from main.bicep and azd, never a literal."""
    app, main = parsed("app/function-app.bicep"), parsed("main.bicep")
    settings = bicep_settings()
    passed = main["modules"]["functionApp"]["config"]["params"]
    azd = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    for name in ADAPTER_SECRETS:
        uri = "".join(word.capitalize() for word in name.lower().split("_"))
        uri = uri[0].lower() + uri[1:] + "Uri"  # GITHUB_WEBHOOK_SECRET -> githubWebhookSecretUri
        operands = settings[name]["operator"]["operands"]
        assert operands["condition"]["function"] == {"type": "empty", "parameters": {"item_to_test": uri}}
        assert (operands["true_value"], operands["false_value"]) == ("", f"@Microsoft.KeyVault(SecretUri=${{{uri}}})")
        for file in (app, main):
            assert file["parameters"][uri]["type"] == "string" and file["parameters"][uri]["default"] == ""
        assert passed[uri] == uri
        assert azd[uri] == {"value": f"${{{name}_URI=}}"}
    # Nothing else could carry one of these secrets as a literal.
    text = all_text()
    for literal in ("githubWebhookSecret ", "slackSigningSecret ", "slackBotToken "):
        assert f"param {literal}" not in text
    # The answer URL is plain (it carries no key: the answer route checks CALLBACK_SECRET's
    # signature), and Slack's API is the public one unless set.
    assert settings["ADAPTER_ANSWER_URL"] == "adapterAnswerUrl" and passed["adapterAnswerUrl"] == "adapterAnswerUrl"
    assert azd["adapterAnswerUrl"] == {"value": "${ADAPTER_ANSWER_URL=}"}
    # The Slack answer route verifies callbacks, so CALLBACK_SECRET's URI comes from azd too.
    assert azd["callbackSecretUri"] == {"value": "${CALLBACK_SECRET_URI=}"}
    assert settings["SLACK_API_URL"] == ""
    # With Easy Auth on, the adapters' routes stay reachable: the sender's signature is their auth.
    function_app_text = (INFRA / "app" / "function-app.bicep").read_text()
    for path in ("/api/adapters/github", "/api/adapters/slack/events", "/api/adapters/slack/answer"):
        assert f"'{path}'" in function_app_text


def test_every_setting_read_in_code_is_declared_in_settings_module() -> None:
    """No module reads the environment behind settings.py's back."""
    for path in (ROOT / "resumable").glob("*.py"):
        if path.name == "settings.py":
            continue
        assert "os.environ" not in path.read_text() and "getenv" not in path.read_text(), path


def test_optional_azure_openai_uses_the_identity_and_is_off_by_default() -> None:
    main = parsed("main.bicep")
    assert main["parameters"]["deployAzureOpenAI"]["default"] is False
    account = resource("app/openai.bicep", "account")
    assert account["properties"]["disableLocalAuth"] is True
    assert account["kind"] == "OpenAI"
    role = parsed("app/openai.bicep")["variables"]["cognitiveServicesOpenAIUser"]["value"]
    assert role == "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd"
    settings = bicep_settings()
    assert settings["AZURE_OPENAI_ENDPOINT"] == "azureOpenAiEndpoint"
    assert settings["AZURE_CLIENT_ID"] == "identityClientId"
    assert settings["ENABLE_SENSITIVE_DATA"] == "false"
    assert "chat-agents" in (INFRA / "main.bicep").read_text()


def test_easy_auth_is_an_optional_entra_id_front_door_that_leaves_health_open() -> None:
    app = parsed("app/function-app.bicep")
    assert app["parameters"]["easyAuthClientId"]["default"] == ""
    text = (INFRA / "app" / "function-app.bicep").read_text()
    assert "resource easyAuth 'Microsoft.Web/sites/config@2024-04-01' = if (length(easyAuthClientId) > 0)" in text
    assert "unauthenticatedClientAction: 'Return401'" in text and "'/api/health'" in text
    assert "easyAuthClientId: easyAuthClientId" in (INFRA / "main.bicep").read_text()


def test_python_version_is_a_deployment_parameter() -> None:
    """`-p pythonVersion=3.12` (or azd's PYTHON_VERSION) reaches the site's runtime setting."""
    main, app = parsed("main.bicep"), parsed("app/function-app.bicep")

    def allowed(file: dict[str, Any]) -> list[str]:
        decorators = file["parameters"]["pythonVersion"]["decorators"]
        return next(d["argument"] for d in decorators if d["type"] == "allowed")

    assert allowed(main) == allowed(app) == ["3.11", "3.12", "3.13"]
    assert main["parameters"]["pythonVersion"]["default"] == app["parameters"]["pythonVersion"]["default"] == "3.13"
    assert main["modules"]["functionApp"]["config"]["params"]["pythonVersion"] == "pythonVersion"
    parameters = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert parameters["pythonVersion"] == {"value": "${PYTHON_VERSION=3.13}"}


def _prepackage(tmp_path: Path, workflow: str | None, lock: str) -> subprocess.CompletedProcess[str]:
    """azd's prepackage hook, run in a copy of the project whose requirements.txt is ``lock``."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    hook = ROOT / "scripts" / "check_deploy_requirements.sh"
    (tmp_path / "scripts" / hook.name).write_text(hook.read_text())
    (tmp_path / "requirements.txt").write_text((ROOT / lock).read_text())
    env = {"PATH": "/usr/bin:/bin", **({"WORKFLOW": workflow} if workflow else {})}
    return subprocess.run(
        ["sh", f"scripts/{hook.name}"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )


def test_azd_refuses_to_package_chat_agents_without_its_lock(tmp_path: Path) -> None:
    """deployAzureOpenAI=true sets WORKFLOW=chat-agents; the default lock cannot run it."""
    import yaml

    hooks = yaml.safe_load((ROOT / "azure.yaml").read_text())["services"]["api"]["hooks"]["prepackage"]
    assert hooks["posix"] == {"shell": "sh", "run": "scripts/check_deploy_requirements.sh"}
    assert "requirements-chat-agents.txt" in hooks["windows"]["run"]
    outputs = parsed("main.bicep")["outputs"]["WORKFLOW"]["value"]["operator"]["operands"]
    assert (outputs["condition"], outputs["true_value"], outputs["false_value"]) == (
        "deployAzureOpenAI",
        "chat-agents",
        "default",
    )

    refused = _prepackage(tmp_path, "chat-agents", "requirements.txt")
    assert refused.returncode == 1
    assert "cp requirements-chat-agents.txt requirements.txt" in refused.stderr
    assert _prepackage(tmp_path, "chat-agents", "requirements-chat-agents.txt").returncode == 0
    assert _prepackage(tmp_path, "default", "requirements.txt").returncode == 0
    assert _prepackage(tmp_path, None, "requirements.txt").returncode == 0
