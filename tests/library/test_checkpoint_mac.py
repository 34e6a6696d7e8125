"""The optional checkpoint MAC: keys, rotation, and blobs that were not written by the app."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from devtools.function_host import FunctionHost
from functions_adapter.settings import Settings, SettingsError
from resumable.checkpoints.mac import METADATA_KEY, CheckpointMac, MacConfigError, MacMismatch, parse_mac_keys
from tests.pickle_gadgets import GADGETS
from tests.tamper import attacker_container, envelope, first_turn, plant, with_state_value

KEY_A = base64.b64encode(b"A" * 32).decode()
KEY_B = base64.b64encode(b"B" * 32).decode()


# -- unit ------------------------------------------------------------------------------


def test_the_first_key_signs_and_every_key_verifies() -> None:
    old = CheckpointMac(parse_mac_keys(f"k1:{KEY_A}"))
    rotated = CheckpointMac(parse_mac_keys(f"k2:{KEY_B}, k1:{KEY_A}"))
    tag = old.sign(b"blob")
    assert tag[METADATA_KEY].startswith("k1:")
    rotated.verify(b"blob", tag)
    assert rotated.sign(b"blob")[METADATA_KEY].startswith("k2:")
    with pytest.raises(MacMismatch, match="does not match"):
        rotated.verify(b"blob!", tag)
    with pytest.raises(MacMismatch, match="unknown key"):
        CheckpointMac(parse_mac_keys(f"k2:{KEY_B}")).verify(b"blob", tag)
    with pytest.raises(MacMismatch, match="no checkpoint MAC"):
        rotated.verify(b"blob", {})


def test_without_keys_nothing_is_signed_or_checked() -> None:
    off = CheckpointMac(())
    assert not off.active and off.sign(b"blob") == {}
    off.verify(b"blob", {})


@pytest.mark.parametrize(
    "raw",
    [
        f"k1:{base64.b64encode(b'short').decode()}",  # under 16 bytes
        "k1:",  # empty key
        "k1:not base64!",
        KEY_A,  # no key ID
        f"bad id:{KEY_A}",
        f"k1:{KEY_A},k1:{KEY_B}",  # the same key ID twice
    ],
    ids=["short", "empty", "not-base64", "no-key-id", "bad-key-id", "duplicate-id"],
)
def test_malformed_keys_are_a_configuration_error(raw: str) -> None:
    with pytest.raises(MacConfigError):
        parse_mac_keys(raw)
    with pytest.raises(SettingsError):
        Settings.from_env({"CHECKPOINT_STORAGE": "UseDevelopmentStorage=true", "CHECKPOINT_MAC_KEYS": raw})


def test_keys_never_appear_in_a_repr() -> None:
    keys = parse_mac_keys(f"k1:{KEY_A}")
    assert KEY_A not in repr(keys) and "AAAA" not in repr(keys)


# -- through the registered functions ----------------------------------------------------------


async def resume(host: FunctionHost, checkpoint_id: str) -> tuple[int, dict[str, Any]]:
    response = await host.request("POST", "/api/runs", json_body={"checkpoint_id": checkpoint_id, "messages": "again"})
    return response.status, await response.json()


async def test_signed_checkpoints_resume_and_a_tampered_copy_is_refused_unparsed(
    host: FunctionHost, storage_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k1:{KEY_A}")
    genuine = await first_turn(host)
    status, body = await resume(host, genuine["checkpoint_id"])
    assert status == 200, body

    # The attacker copies the genuine tag along with the rest of the metadata. Even a
    # harmless change is refused: only the MAC can tell.
    harmless = await plant(storage_env, genuine["checkpoint_id"], with_state_value("harmless"))
    status, body = await resume(host, harmless)
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")
    marker = tmp_path / "marker"
    gadget = GADGETS["type-agent-framework-base"](marker)
    tampered = await plant(storage_env, genuine["checkpoint_id"], with_state_value(envelope(gadget)))
    status, body = await resume(host, tampered)
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")
    assert not marker.exists()


async def test_a_blob_without_a_valid_mac_is_refused_once_keys_are_set(
    host: FunctionHost, storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unsigned = await first_turn(host)  # written before keys were configured
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k1:{KEY_A}")
    status, body = await resume(host, unsigned["checkpoint_id"])
    assert (status, body["error"]["code"]) == (422, "checkpoint_unreadable")


async def test_rotation_keeps_old_checkpoints_readable(
    host: FunctionHost, storage_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k1:{KEY_A}")
    first = await first_turn(host)
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k2:{KEY_B},k1:{KEY_A}")
    status, second = await resume(host, first["checkpoint_id"])
    assert status == 200, second
    async with attacker_container(storage_env) as client:
        props = await client.get_blob_client(f"checkpoints/{second['checkpoint_id']}.json").get_blob_properties()
    assert props.metadata[METADATA_KEY].startswith("k2:")
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k2:{KEY_B}")  # k1 retired: its checkpoints are refused
    assert (await resume(host, first["checkpoint_id"]))[0] == 422
    assert (await resume(host, second["checkpoint_id"]))[0] == 200


async def test_a_short_key_is_server_misconfigured(host: FunctionHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_MAC_KEYS", f"k1:{base64.b64encode(b'0123456789').decode()}")
    response = await host.request("POST", "/api/runs", json_body={"messages": "hello"})
    assert response.status == 500
    body = await response.json()
    assert body["error"]["code"] == "server_misconfigured"
    assert "0123456789" not in json.dumps(body) and "CHECKPOINT_MAC_KEYS" not in json.dumps(body)
