"""A model-backed workflow: a writer agent drafts, a reviewer agent answers the user.

Selected with ``WORKFLOW=chat-agents``; nothing here is imported otherwise. Each agent
runs in an ``AgentExecutor`` whose session (the conversation so far) is saved in the
checkpoint, so turn 2 sees turn 1 after a resume. Only the reviewer's reply reaches
the caller; in streaming mode its tokens arrive as SSE ``output`` deltas.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_framework import Agent, AgentExecutor, Workflow, WorkflowBuilder

from resumable.base.errors import ConfigurationError

from . import WorkflowSpec
from .model_settings import ModelSettings

WORKFLOW_NAME = "chat-agents"
WRITER_INSTRUCTIONS = (
    "writer: Draft a helpful, accurate reply to the user's latest message, "
    "taking the whole conversation so far into account."
)
REVIEWER_INSTRUCTIONS = (
    "reviewer: You receive a draft reply. Check it for mistakes and tone, then answer the "
    "user with the final reply only, without mentioning the draft."
)

# One chat client per (event loop, settings): it holds an HTTP connection pool and,
# for Azure, a credential with a token cache (kept beside it, to be closed with it).
_clients: dict[tuple[int, ModelSettings], Any] = {}
_credentials: list[Any] = []


async def close_clients() -> None:
    """Close every cached chat client and credential (tests and scripts, before their loop ends)."""
    clients, credentials = list(_clients.values()), list(_credentials)
    _clients.clear()
    _credentials.clear()
    for client in clients:
        await client.client.close()
    for credential in credentials:
        await credential.close()


def chat_client(settings: ModelSettings) -> Any:
    key = (id(asyncio.get_running_loop()), settings)
    if key not in _clients:
        try:
            from agent_framework.openai import OpenAIChatCompletionClient  # noqa: PLC0415 - only when selected
        except ImportError as exc:  # the default deployment leaves the model client out
            raise ConfigurationError(
                "WORKFLOW=chat-agents needs agent-framework-openai and openai, which the default "
                "requirements.txt leaves out: deploy requirements-chat-agents.txt as requirements.txt "
                f"(docs/workflows.md: Use a real model). Import failed: {exc}"
            ) from exc

        if settings.provider == "azure-openai":
            from azure.identity import aio as identity  # noqa: PLC0415

            credential = identity.DefaultAzureCredential()
            _credentials.append(credential)
            _clients[key] = OpenAIChatCompletionClient(
                model=settings.model,
                azure_endpoint=settings.endpoint,
                api_version=settings.api_version,
                credential=credential,
            )
        else:
            _clients[key] = OpenAIChatCompletionClient(
                model=settings.model, base_url=settings.endpoint, api_key=settings.api_key
            )
    return _clients[key]


def build_workflow() -> Workflow:
    client = chat_client(ModelSettings.from_env())
    writer = AgentExecutor(Agent(client, WRITER_INSTRUCTIONS, name="writer"), id="writer")
    reviewer = AgentExecutor(Agent(client, REVIEWER_INSTRUCTIONS, name="reviewer"), id="reviewer")
    return (
        WorkflowBuilder(name=WORKFLOW_NAME, start_executor=writer, output_from=[reviewer])
        .add_edge(writer, reviewer)
        .build()
    )


SPEC = WorkflowSpec(build=build_workflow)
