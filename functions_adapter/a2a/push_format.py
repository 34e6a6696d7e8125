"""A2A push-notification configs as our completion callbacks' format ``a2a``.

A ``TaskPushNotificationConfig`` (``id``, ``url``, ``token``, ``authentication``) becomes the
run's completion callback: ``url`` is the callback URL (checked as every callback is),
and the rest rests in the run's record as the callback's parameters (``callback_params``),
deleted with it. At delivery the body is what an A2A receiver expects, a ``StreamResponse``
holding the task in its final state, as ``a2a-sdk``'s own push sender posts it, with its
headers: the ``token`` as ``X-A2A-Notification-Token`` and ``authentication`` as
``Authorization: <scheme> <credentials>``. The delivery keeps our signature headers, so a
receiver verifies it as any callback.

Imported by ``function_app.py`` to register the format, so it loads nothing heavy at import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from functions_adapter.a2a import tasks
from resumable.base import InvalidRequest, strict_json

if TYPE_CHECKING:  # the background modules (and the storage SDK) load on first use: cold start
    from resumable.background.finished_run import FinishedRun

FORMAT = "a2a"
# A push config as a run is accepted with it: the callback URL, and the parameters its deliveries use.
Push = tuple[str, dict[str, str]]
TOKEN_HEADER = "X-A2A-Notification-Token"  # noqa: S105 - a header name, not a secret
_ID, _TOKEN, _SCHEME, _CREDENTIALS = "id", "token", "scheme", "credentials"
MAX_ID = 128
MAX_TOKEN = 1024
MAX_CREDENTIALS = 4096
_SCHEME_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")  # an RFC 9110 token
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")  # visible ASCII, no CR/LF


def _text(config: Mapping[str, Any], name: str, limit: int, pattern: re.Pattern[str]) -> str | None:
    value = config.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
        raise InvalidRequest(f"'{name}' must be visible ASCII text of at most {limit} characters.")
    return value


def parse_config(config: object) -> Push:
    """A ``TaskPushNotificationConfig`` as (callback URL, callback parameters); its URL is
    checked later, as every callback's is. ``authentication`` needs both a scheme (an HTTP
    auth scheme name, ``Bearer`` say) and credentials: a scheme alone would send nothing."""
    if not isinstance(config, dict):
        raise InvalidRequest("'taskPushNotificationConfig' must be an object.")
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidRequest("'taskPushNotificationConfig.url' must be a non-empty URL string.")
    params: dict[str, str] = {}
    for name, limit in ((_ID, MAX_ID), (_TOKEN, MAX_TOKEN)):
        value = _text(config, name, limit, _HEADER_VALUE)
        if value is not None:
            params[name] = value
    auth = config.get("authentication")
    if auth is not None:
        if not isinstance(auth, dict):
            raise InvalidRequest("'authentication' must be an object {scheme, credentials}.")
        scheme = _text(auth, _SCHEME, 64, _SCHEME_NAME)
        credentials = _text(auth, _CREDENTIALS, MAX_CREDENTIALS, _HEADER_VALUE)
        if (scheme is None) != (credentials is None):
            raise InvalidRequest("'authentication' needs both a scheme (such as 'Bearer') and credentials.")
        if scheme is not None and credentials is not None:
            params[_SCHEME], params[_CREDENTIALS] = scheme, credentials
    return url, params


def config_id(task_id: str, params: Mapping[str, str]) -> str:
    """The config's ID: the one given, else the task's (as ``a2a-sdk``'s stores default it)."""
    return params.get(_ID) or task_id


def config_json(task_id: str, url: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The ``TaskPushNotificationConfig`` as a read shows it: ``authentication.credentials``
    is never sent back (its owner has it; a read is not a way to recover a credential)."""
    config: dict[str, Any] = {"id": config_id(task_id, params), "taskId": task_id, "url": url}
    if _TOKEN in params:
        config["token"] = params[_TOKEN]
    if _SCHEME in params:
        config["authentication"] = {"scheme": params[_SCHEME]}
    return config


def headers_of(params: Mapping[str, str]) -> dict[str, str]:
    """What an A2A receiver checks: its token, and the authorization it asked for."""
    headers: dict[str, str] = {}
    if _TOKEN in params:
        headers[TOKEN_HEADER] = params[_TOKEN]
    if _SCHEME in params:
        headers["Authorization"] = f"{params[_SCHEME]} {params[_CREDENTIALS]}"
    return headers


def render(run: FinishedRun) -> tuple[bytes, dict[str, str]]:
    """The callback's body, a ``StreamResponse`` ``{"task": ...}`` in its final state, and
    the A2A headers. Over the callbacks' payload cap the artifacts are left out
    (``metadata.result_truncated``): the receiver reads them with ``GetTask``."""
    from resumable.background.callbacks import MAX_PAYLOAD_BYTES  # noqa: PLC0415 - on first use

    document = {"run_id": run.run_id, "thread_id": run.thread_id, "status": run.status}
    document["result"], document["error"] = run.result, run.error
    task = tasks.task_of(document)
    body = strict_json.dumps({"task": task})
    if len(body) > MAX_PAYLOAD_BYTES:
        task.pop("artifacts", None)
        body = strict_json.dumps({"task": {**task, "metadata": {**task["metadata"], "result_truncated": True}}})
    return body, headers_of(run.callback_params)


def requested(configuration: Mapping[str, Any]) -> Push | None:
    """A message's push config (``configuration.taskPushNotificationConfig``) as the callback
    URL and parameters its background run is accepted with; None without one."""
    config = configuration.get("taskPushNotificationConfig")
    return None if config is None or config == {} else parse_config(config)
