"""A thread turn's transcript: what its checkpoint records of the messages it was sent and
answered, read back as the thread's messages (``resumable.threads.transcript``)."""

from __future__ import annotations

from resumable.threads import transcript as t


def test_a_transcript_holds_what_the_turn_was_sent_then_what_it_answered() -> None:
    body = {"messages": [{"role": "assistant", "content": "hello"}], "outputs": [{"score": 3}, "plain"]}
    record = t.transcript([{"role": "user", "content": "hi"}], body)
    assert record == {
        "in": [{"role": "user", "content": "hi"}],
        "out": [
            {"role": "assistant", "content": "hello"},
            {"role": "assistant", "content": '{"score":3}'},
            {"role": "assistant", "content": "plain"},
        ],
    }
    messages = t._messages("c-1", {t.TRANSCRIPT: record})
    assert [(m.message_id, m.role, m.sent) for m in messages] == [
        ("msg_c-1_0", "user", True),
        ("msg_c-1_1", "assistant", False),
        ("msg_c-1_2", "assistant", False),
        ("msg_c-1_3", "assistant", False),
    ]


def test_long_texts_are_cut_to_the_turn_s_budget_so_a_checkpoint_stays_under_its_cap() -> None:
    big = "x" * (t.MAX_TRANSCRIPT_CHARS - 10)
    reply = {"messages": [{"role": "assistant", "content": "y" * 50}]}
    record = t.transcript([{"role": "user", "content": big}], reply)
    assert len(record["in"][0]["content"]) == t.MAX_TRANSCRIPT_CHARS - 10
    assert record["out"][0]["content"] == "y" * 10
    over = t.transcript([{"role": "user", "content": "z" * (3 * t.MAX_TRANSCRIPT_CHARS)}], {"messages": []})
    assert len(over["in"][0]["content"]) == t.MAX_TRANSCRIPT_CHARS


def test_a_checkpoint_without_a_transcript_or_with_a_damaged_one_has_no_messages() -> None:
    assert t._messages("c", {}) == []
    assert t._messages("c", {t.TRANSCRIPT: "text"}) == []
    damaged = {t.TRANSCRIPT: {"in": [{"role": "user"}, 5, {"role": "user", "content": "ok"}], "out": None}}
    assert [m.content for m in t._messages("c", damaged)] == ["ok"]
