"""Slack and GitHub in front of the thread API: opt-in blueprints, one per sender.

Slack and GitHub do not speak this app's body and will not wait for an agent (Slack: 3 s,
GitHub: 10 s). Each adapter verifies its sender's signature, turns one delivery into a
**background** turn on a thread named after where it came from, keyed by the sender's
delivery ID, and answers at once (202 for GitHub, 200 for Slack); the reply comes back
through a completion callback (``ADAPTER_ANSWER_URL``), which for Slack is the app's own
``POST /api/adapters/slack/answer``.

An adapter is registered only when its signing secret is set: ``GITHUB_WEBHOOK_SECRET``
for ``github``, ``SLACK_SIGNING_SECRET`` for ``slack``. App settings are environment
variables by the time the host indexes the app, so the choice is made once, at import:
turning an adapter on or off takes a restart (changing an app setting restarts the app in
Azure; locally, restart ``func start`` or ``scripts/serve.sh``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import azure.functions as func

# Each adapter's module, by the setting that turns it on.
ADAPTERS = {
    "GITHUB_WEBHOOK_SECRET": "functions_adapter.webhooks.github",
    "SLACK_SIGNING_SECRET": "functions_adapter.webhooks.slack",
}


def register(app: func.FunctionApp, env: Mapping[str, str] | None = None) -> list[str]:
    """Register the blueprint of every adapter whose secret is set; returns their settings.

    A module is imported only when its adapter is on, so an app without adapters loads none.
    """
    env = os.environ if env is None else env
    enabled = [setting for setting in ADAPTERS if env.get(setting, "").strip()]
    for setting in enabled:
        app.register_functions(importlib.import_module(ADAPTERS[setting]).bp)
    return enabled
