"""The Conversations routes through ``scripts/serve.sh`` with the unmodified ``openai`` SDK:
a conversation's whole life (create, two turns, items, update, delete), background turns on
it through the queue runner, and the README's example run as written."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest
from openai import OpenAI

from tests.serving import ROOT, Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with serving(tmp_path_factory.mktemp("conversations")) as server:
        yield server


@pytest.fixture(scope="module")
def client(served: Serving) -> OpenAI:
    return OpenAI(base_url=served.base, api_key="local", default_headers={"x-functions-key": "local"}, max_retries=0)


def test_a_conversation_s_whole_life_through_the_served_app(client: OpenAI) -> None:
    conv = client.conversations.create(metadata={"channel": "C1"})
    assert client.conversations.retrieve(conv.id).metadata == {"channel": "C1"}
    assert client.conversations.items.list(conv.id).data == []
    client.responses.create(input="first", conversation=conv.id)
    late = client.responses.create(input="second", conversation={"id": conv.id}, background=True)
    deadline = time.monotonic() + 60
    while client.responses.retrieve(late.id).status in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the queue runner never ran the background turn"
        time.sleep(0.2)
    assert client.responses.retrieve(late.id).status == "completed"
    items = list(client.conversations.items.list(conv.id, order="asc", limit=1))
    assert [(i.role, i.content[0].type) for i in items] == [
        ("user", "input_text"),
        ("assistant", "output_text"),
    ] * 2
    assert items[2].content[0].text == "second" and "turn 2" in items[3].content[0].text
    assert client.conversations.update(conv.id, metadata={"channel": "C2"}).metadata == {"channel": "C2"}
    assert client.conversations.delete(conv.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.list(conv.id)


def test_the_readme_example_runs_as_written(served: Serving, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("### OpenAI Responses API", 1)[1].split("```python\n", 1)[1].split("\n", 3)
    section = readme.split("### OpenAI Conversations API", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 5
    client_lines = "\n".join(setup[:3])  # the import and the client, as the Responses block makes them
    exec((client_lines + "\n" + code).replace("http://127.0.0.1:7071/api", served.base), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == 'turn 2: you said "What is my name?". Earlier you said: "My name is Ada."'
    assert printed[1].startswith("['My name is Ada.', 'turn 1: you said \"My name is Ada.\"")
