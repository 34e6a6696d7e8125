"""The fake OpenAI model on an event loop of its own thread, for tests whose app runs in another
process (``scripts/serve.sh``): its replies stream token by token, and ``hold`` stops the
reviewer's reply after its first token until ``release``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.fake_openai import FakeOpenAI, start_fake_openai
from tests.serving import ROOT

HELD = "reviewer:"  # the reviewer's reply is the one the caller sees


class ModelThread:
    """The fake model on an event loop of its own thread (the app runs in another process)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: FakeOpenAI = self.call(start_fake_openai())

    def call(self, work: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=30)

    def hold(self) -> None:
        async def hold() -> None:
            self.server.hold_role, self.server.release = HELD, asyncio.Event()

        self.call(hold())

    def release(self) -> None:
        async def release() -> None:
            self.server.release.set()

        self.call(release())

    def close(self) -> None:
        self.call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module", name="model")
def model_fixture() -> Iterator[ModelThread]:
    """The fake model, one per test file (a test file imports this to use ``model``)."""
    fake = ModelThread()
    yield fake
    fake.close()


def settings_with_model(folder: Path, model: ModelThread, **values: str) -> Path:
    """``local.settings.sample.json`` with the fake model behind ``chat-agents`` (and
    ``values``), written into ``folder``: the settings file to serve with."""
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"].update(OPENAI_BASE_URL=model.server.base_url, OPENAI_API_KEY="sk-fake", OPENAI_MODEL="fake")
    settings["Values"].update(values)
    path = folder / "local.settings.json"
    path.write_text(json.dumps(settings))
    return path
