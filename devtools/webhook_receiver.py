"""A loopback webhook receiver for the demo and the tests: verifies Standard Webhooks
signatures, records every delivery, and can be told to fail, stop (410) or redirect.

    python -m devtools.webhook_receiver [--port 8000] [--secret whsec_...]

runs one on ``http://127.0.0.1:PORT/<any path>`` and prints each delivery as it arrives,
verified with ``--secret`` (default: ``CALLBACK_SECRET`` from the environment, else from
local.settings.json). An unverified delivery is answered 401; Ctrl+C stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from functions_adapter import signatures
from functions_adapter.errors import InvalidSignature

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int
    path: str = ""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    """``fail_first`` deliveries get ``fail_status``; after that each gets ``status``
    (or a 302 to ``redirect_to``), with ``reply`` as a JSON body when it is set (an API's
    answer, for a receiver that plays one). ``refuse_unverified`` answers 401 to a
    delivery the secret does not verify; ``on_delivery`` sees each one as it arrives."""

    secret: str
    fail_first: int = 0
    fail_status: int = 500
    status: int = 200
    redirect_to: str | None = None
    reply: Any = None
    refuse_unverified: bool = False
    on_delivery: Callable[[Delivery], None] | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    url: str = ""

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            signatures.verify(headers, body, [self.secret], tolerance_seconds=300)
            verified = True
        except InvalidSignature:
            verified = False
        if self.refuse_unverified and not verified:
            answer = 401
        elif len(self.deliveries) < self.fail_first:
            answer = self.fail_status
        elif self.redirect_to is not None:
            answer = 302
        else:
            answer = self.status
        delivery = Delivery(headers, body, verified, answer, request.path)
        self.deliveries.append(delivery)
        if self.on_delivery is not None:
            self.on_delivery(delivery)
        if answer == 302:
            raise web.HTTPFound(str(self.redirect_to))
        if self.reply is not None:
            return web.json_response(self.reply, status=answer)
        return web.Response(status=answer, text="ok" if answer < 300 else "no")

    async def start(self, port: int = 0) -> str:
        """Listen on 127.0.0.1 (``port`` 0: a free one); the URL to give as ``callback_url``."""
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hooks/run-finished"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


# -- python -m devtools.webhook_receiver ---------------------------------------------------


def _say(text: str) -> None:
    print(text, flush=True)


def printer() -> Callable[[Delivery], None]:
    """Print each delivery: its verdict, its webhook-id (noting repeats) and its body."""
    first_seen: dict[str, int] = {}
    count = 0

    def show(delivery: Delivery) -> None:
        nonlocal count
        count += 1
        message_id = delivery.headers.get("webhook-id", "")
        verdict = "verified" if delivery.verified else "NOT verified (wrong secret?)"
        repeat = first_seen.setdefault(message_id, count) if message_id else count
        note = f" (a repeat of delivery {repeat}: deduplicate on webhook-id)" if repeat != count else ""
        _say(f"delivery {count}: {verdict}, answered {delivery.answered}, POST {delivery.path}")
        _say(f"  webhook-id: {message_id or '(none)'}{note}")
        try:
            _say("  " + json.dumps(delivery.json(), ensure_ascii=False))
        except ValueError:
            _say(f"  ({len(delivery.body)} bytes, not JSON)")

    return show


def _secret(given: str | None, settings: Path) -> str:
    """``--secret``, else CALLBACK_SECRET from the environment, else from local.settings.json
    (the first of several, as the app signs with the first)."""
    value = given or os.environ.get("CALLBACK_SECRET", "")
    if not value.strip() and settings.exists():
        value = str(json.loads(settings.read_text()).get("Values", {}).get("CALLBACK_SECRET", ""))
    return (value.split() or [""])[0]


async def _serve(secret: str, port: int) -> None:
    receiver = WebhookReceiver(secret, refuse_unverified=True, on_delivery=printer())
    url = await receiver.start(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    _say(f"Receiving callbacks on {url.rsplit('/hooks', 1)[0]}/<any path>, e.g. {url}; Ctrl+C stops.")
    try:
        await stop.wait()
    finally:
        await receiver.stop()
    _say(f"Stopped after {len(receiver.deliveries)} deliveries.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.webhook_receiver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; 0: a free one)")
    parser.add_argument("--secret", help="the whsec_... that signs the callbacks (default: CALLBACK_SECRET)")
    parser.add_argument("--settings", type=Path, default=ROOT / "local.settings.json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    secret = _secret(args.secret, args.settings)
    if not secret:
        print("No secret: pass --secret whsec_... or set CALLBACK_SECRET (local.settings.json).", file=sys.stderr)
        return 2
    try:
        signatures.secret_bytes(secret)
    except ValueError as exc:
        print(f"Bad --secret: {exc}", file=sys.stderr)
        return 2
    asyncio.run(_serve(secret, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
