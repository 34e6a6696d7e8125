"""Thread names the adapters derive from a sender's IDs: valid thread IDs, and injective
(two different repositories, issues, channels or threads never share a conversation)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from functions_adapter.thread_names import derived_thread_id, parts_of
from functions_adapter.webhooks.github import github_turn
from functions_adapter.webhooks.slack import slack_turn
from resumable.base.ids import validate_id


def _github(full_name: str, number: int) -> str:
    event: dict[str, Any] = {
        "action": "created",
        "issue": {"number": number},
        "comment": {"body": "hi", "user": {"login": "octocat", "type": "User"}},
        "repository": {"full_name": full_name, "id": 1296269},
    }
    turn = github_turn(event)
    assert turn is not None
    return validate_id(turn[0], kind="thread_id")


def _slack(team: str, channel: str, ts: str) -> str:
    envelope = {"team_id": team, "event": {"type": "message", "channel": channel, "ts": ts, "text": "hi"}}
    turn = slack_turn(envelope)
    assert turn is not None
    return validate_id(turn[0], kind="thread_id")


def test_github_repositories_that_once_shared_a_thread_do_not() -> None:
    assert _github("a-b/c", 1) != _github("a/b-c", 1)
    assert _github("octo/socket.io", 2) != _github("octo/socket-io", 2)
    assert _github("octo/a_b", 2) != _github("octo/a-b", 2)
    owner, repo = "o" * 39, "r" * 100  # GitHub's longest owner and repository names
    assert _github(f"{owner}/{repo}", 1) != _github(f"{owner}/{repo}", 2)


def test_slack_threads_that_once_shared_a_thread_do_not() -> None:
    assert _slack("T1", "C1", "1355517523.000005") != _slack("T1", "C1", "1355517523-000005")
    assert _slack("T1-C1", "C2", "1.2") != _slack("T1", "C1-C2", "1.2")


_TEXT = st.text(min_size=0, max_size=150)


@given(st.tuples(_TEXT, _TEXT, st.integers(0, 10**12)), st.tuples(_TEXT, _TEXT, st.integers(0, 10**12)))
def test_github_names_are_injective_valid_thread_ids(a: tuple[str, str, int], b: tuple[str, str, int]) -> None:
    name_a, name_b = _github(f"{a[0]}/{a[1]}", a[2]), _github(f"{b[0]}/{b[1]}", b[2])
    assert (name_a == name_b) == (f"{a[0]}/{a[1]}" == f"{b[0]}/{b[1]}" and a[2] == b[2])


@given(st.tuples(_TEXT, _TEXT, _TEXT), st.tuples(_TEXT, _TEXT, _TEXT))
def test_slack_names_are_injective_valid_thread_ids(a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    assert (_slack(*a) == _slack(*b)) == (a == b)


@given(st.lists(_TEXT, max_size=5))
def test_a_derived_name_gives_its_parts_back_unless_it_was_shortened(parts: list[str]) -> None:
    name = validate_id(derived_thread_id("kind", *parts), kind="thread_id")
    assert parts_of(name, "kind") == (tuple(parts) if "_h" not in name else None)
    assert parts_of(name, "other") is None
