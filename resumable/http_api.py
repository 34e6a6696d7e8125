"""HTTP handlers: request in, response out. ``function_app`` only routes to these.

Handlers take and return Starlette (FastAPI) objects because the Functions HTTP
streaming extension, which live SSE needs, uses them for every HTTP trigger.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from . import __version__
from .af_internals import AGENT_FRAMEWORK_VERSION
from .blob_store import BlobCheckpointStorage
from .checkpoint_codec import CheckpointCodec
from .errors import InvalidRequest, PayloadTooLarge, ResumeError
from .ids import validate_id
from .run_request import parse_run_request
from .run_service import RunService
from .settings import Settings, SettingsError
from .sse import MEDIA_TYPE
from .storage_client import container_client

logger = logging.getLogger(__name__)


class ServerMisconfigured(ResumeError):
    status = 500
    code = "server_misconfigured"


@lru_cache(maxsize=8)
def _spec(name: str) -> Any:
    from workflows import load_spec  # noqa: PLC0415 - workflows are an app concern, loaded on demand

    return load_spec(name)


def build_service(settings: Settings) -> RunService:
    """The service for the current settings; its storage client is shared per process."""
    spec = _spec(settings.workflow)
    codec = CheckpointCodec(
        allowed_types=(*settings.allowed_types, *spec.allowed_type_keys),
        max_bytes=settings.max_checkpoint_bytes,
    )
    return RunService(BlobCheckpointStorage(container_client(settings), codec), spec)


def error_response(error: ResumeError) -> JSONResponse:
    return JSONResponse(error.to_body(), status_code=error.status, headers=error.headers())


async def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        logger.error("Configuration error: %s", exc)
        raise ServerMisconfigured("The function app is not configured correctly; see its logs.") from exc


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing (413) anything over ``limit`` without reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidRequest("Content-Length must be a whole number.")
        if int(declared) > limit:
            raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"The body is over the {limit}-byte limit.")
        chunks.append(chunk)
    return b"".join(chunks)


async def handle_run(request: Request) -> Response:
    """``POST /api/runs``: HTTP → parse → load → resume → save → respond."""
    try:
        settings = await _settings()
        body = await read_body(request, settings.max_request_bytes)
        run_request = parse_run_request(body, accept=request.headers.get("accept"))
        service = build_service(settings)
        if run_request.stream:
            frames = await service.open_stream(run_request)
            return StreamingResponse(
                frames,
                media_type=MEDIA_TYPE,
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return JSONResponse(await service.run_to_json(run_request))
    except ResumeError as exc:
        return error_response(exc)
    except Exception:
        logger.exception("Unhandled error in POST /api/runs")
        return error_response(ResumeError("An internal error occurred."))


async def handle_get_checkpoint(checkpoint_id: str) -> Response:
    """``GET /api/checkpoints/{id}``: metadata from blob properties; the state is not read."""
    try:
        validate_id(checkpoint_id)
        settings = await _settings()
        info = await build_service(settings).store.get_info(checkpoint_id)
        return JSONResponse(info.to_json())
    except ResumeError as exc:
        return error_response(exc)
    except Exception:
        logger.exception("Unhandled error in GET /api/checkpoints")
        return error_response(ResumeError("An internal error occurred."))


async def handle_health() -> Response:
    """``GET /api/health``: liveness and versions; touches no storage."""
    return JSONResponse({"status": "ok", "version": __version__, "agent_framework": AGENT_FRAMEWORK_VERSION})
