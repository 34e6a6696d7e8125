"""A2A push notifications with the unmodified ``a2a-sdk`` 1.3 client against ``scripts/serve.sh``.

The client's own ``push_notification_config`` rides on its SendMessage; the app, served with
``CALLBACK_SECRET`` and (for this loopback receiver only) ``CALLBACK_ALLOW_LOCAL_HTTP=true``,
pushes the finished task to ``devtools/webhook_receiver.py``. The delivery verifies as a
Standard Webhooks signature with ``CALLBACK_SECRET``, carries the config's token and
authorization, and parses as the SDK's own ``StreamResponse``; the SDK's config methods read
the config back and delete it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf import json_format
from standardwebhooks.webhooks import Webhook

from devtools.webhook_receiver import Delivery, WebhookReceiver
from tests.conftest import CALLBACK_SECRET
from tests.serving import ROOT, Serving, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    tmp: Path = tmp_path_factory.mktemp("a2a-push")
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    # Loopback http callbacks are for local development only; the sample keeps it "false".
    settings["Values"].update({"CALLBACK_SECRET": CALLBACK_SECRET, "CALLBACK_ALLOW_LOCAL_HTTP": "true"})
    (tmp / "local.settings.json").write_text(json.dumps(settings))
    with serving(tmp, settings=tmp / "local.settings.json") as server:
        yield server


async def _delivered(receiver: WebhookReceiver) -> Delivery:
    """The first delivery, once it arrived (the app's queue runs the callback after the turn)."""
    for _ in range(600):
        if receiver.deliveries:
            return receiver.deliveries[0]
        await asyncio.sleep(0.1)
    raise AssertionError("no push notification arrived")


async def test_the_sdk_clients_push_config_is_delivered_signed_and_parses_as_its_stream_response(
    served: Serving, receiver: WebhookReceiver
) -> None:
    config = TaskPushNotificationConfig(
        id="sdk-config",
        url=receiver.url,
        token="tok-sdk",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="pushed-secret"),
    )
    async with httpx.AsyncClient(headers={"x-functions-key": "local"}, timeout=120) as http:
        client = await create_client(
            f"{served.base}/a2a/default",
            ClientConfig(streaming=False, httpx_client=http, push_notification_config=config),
        )
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="notify me")])
        [event] = [e async for e in client.send_message(SendMessageRequest(message=message))]
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

        delivery = await _delivered(receiver)
        Webhook(CALLBACK_SECRET).verify(delivery.body, delivery.headers)  # our documented recipe
        assert delivery.headers["webhook-id"] == f"msg_{task.id}"
        assert delivery.headers["x-a2a-notification-token"] == "tok-sdk"
        assert delivery.headers["authorization"] == "Bearer pushed-secret"
        pushed = json_format.ParseDict(json.loads(delivery.body), StreamResponse())
        assert pushed.task.id == task.id and pushed.task.context_id == task.context_id
        assert pushed.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert pushed.task.artifacts[0].parts[0].text == task.artifacts[0].parts[0].text

        read = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="sdk-config")
        )
        assert (read.url, read.token, read.authentication.scheme) == (receiver.url, "tok-sdk", "Bearer")
        assert read.authentication.credentials == ""  # never read back
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["sdk-config"]
        # The task finished and its notification went out: the config cannot be deleted now.
        with pytest.raises(Exception, match="finished"):
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="sdk-config")
            )
    assert len(receiver.deliveries) == 1 and receiver.deliveries[0].verified
