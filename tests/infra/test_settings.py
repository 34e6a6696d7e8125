"""Settings: the connection fallbacks and clear errors for bad values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from functions_adapter.settings import Settings, SettingsError, StorageTarget


def test_checkpoint_storage_wins_over_webjobs_storage() -> None:
    settings = Settings.from_env({"CHECKPOINT_STORAGE": "A", "AzureWebJobsStorage": "B"})
    assert settings.storage == StorageTarget(connection_string="A")


def test_falls_back_to_webjobs_storage() -> None:
    assert Settings.from_env({"AzureWebJobsStorage": "B"}).storage == StorageTarget(connection_string="B")


def test_identity_uri_wins_and_carries_the_client_id() -> None:
    env = {
        "CHECKPOINT_STORAGE": "A",
        "CHECKPOINT_STORAGE__blobServiceUri": "https://acct.blob.core.windows.net",
        "CHECKPOINT_STORAGE__clientId": "00000000-0000-0000-0000-000000000001",
    }
    assert Settings.from_env(env).storage == StorageTarget(
        blob_service_uri="https://acct.blob.core.windows.net", client_id="00000000-0000-0000-0000-000000000001"
    )


def test_defaults() -> None:
    settings = Settings.from_env({"CHECKPOINT_STORAGE": "A", "CHECKPOINT_ALLOWED_TYPES": " a:B , c:D ,"})
    assert settings.container == "checkpoints"
    assert settings.max_request_bytes == 1024 * 1024
    assert settings.allowed_types == ("a:B", "c:D")
    assert settings.workflow == "default"
    # The housekeeping timer's slice: well inside the function timeout (host.json).
    hours, minutes, seconds = json.loads((Path(__file__).resolve().parents[2] / "host.json").read_text())[
        "functionTimeout"
    ].split(":")
    timeout = int(hours) * 3600 + int(minutes) * 60 + int(seconds)
    assert settings.housekeeping_seconds == 300.0 <= timeout / 4


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"CHECKPOINT_STORAGE": "A", "MAX_REQUEST_BYTES": "lots"},
        {"CHECKPOINT_STORAGE": "A", "MAX_REQUEST_BYTES": "0"},
    ],
    ids=["no-storage", "not-a-number", "zero"],
)
def test_bad_settings_raise_a_clear_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)


async def test_identity_client_is_built_without_touching_the_network() -> None:
    from functions_adapter import wiring
    from resumable.storage import clients as storage_client

    settings = Settings.from_env(
        {"CHECKPOINT_STORAGE__blobServiceUri": "https://acct.blob.core.windows.net", "CHECKPOINT_CONTAINER": "c"}
    )
    container = wiring.container_for(settings)
    assert container.url == "https://acct.blob.core.windows.net/c"
    assert container.credential.__class__.__name__ == "DefaultAzureCredential"
    await storage_client.close_all()


def test_webjobs_identity_form_is_the_last_fallback() -> None:
    env = {
        "AzureWebJobsStorage__blobServiceUri": "https://h.blob.core.windows.net",
        "AzureWebJobsStorage__clientId": "c",
    }
    assert Settings.from_env(env).storage == StorageTarget(
        blob_service_uri="https://h.blob.core.windows.net", client_id="c"
    )
    env["CHECKPOINT_STORAGE"] = "A"
    assert Settings.from_env(env).storage == StorageTarget(connection_string="A")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), (" True ", True), ("1", True), ("false", False), ("FALSE", False), ("0", False), ("", False)],
)
def test_an_on_off_setting_reads_every_spelling_its_message_and_docs_name(raw: str, expected: bool) -> None:
    assert Settings.from_env({"CHECKPOINT_STORAGE": "A", "CONSOLE_ENABLED": raw}).console_enabled is expected
    docs = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert "On/off settings accept `true` or `false`, `1` or `0` (any case); empty means `false`." in docs


def test_a_bad_on_off_value_is_named_with_what_is_accepted() -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({"CHECKPOINT_STORAGE": "A", "CONSOLE_ENABLED": "maybe"})
    assert str(raised.value) == "CONSOLE_ENABLED must be true or false (or 1 or 0; empty means false), not 'maybe'."
