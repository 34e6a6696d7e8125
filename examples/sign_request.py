"""Sign a request body the way a Standard Webhooks sender does, for a function app with WEBHOOK_SECRET.

Prints the three headers to paste into a request (examples/requests.signed.http has slots for them):

    WEBHOOK_SECRET=whsec_... python examples/sign_request.py '{"messages": "Payment received."}'

or signs and sends it in one go (the body is sent byte for byte as signed):

    WEBHOOK_SECRET=whsec_... python examples/sign_request.py '{"messages": "Payment received."}' \\
        --url http://localhost:7071/api/threads/ticket-43/runs

The signature covers "{webhook-id}.{webhook-timestamp}.{body}", so the body you send must be
exactly the one signed (same spacing, no added newline), and the timestamp must be within
WEBHOOK_TOLERANCE_SECONDS (300 s by default) of the server's clock when it arrives.
The secret is read from WEBHOOK_SECRET rather than the command line, so it stays out of
shell history and process listings. For an app in Azure, also set FUNCTION_KEY: it is sent
as `x-functions-key`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from functions_adapter.signatures import sign


def signed_headers(
    secret: str, body: bytes, *, message_id: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    """The webhook-id, webhook-timestamp and webhook-signature headers for ``body``."""
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def send(url: str, body: bytes, headers: dict[str, str], function_key: str | None) -> int:
    """POST the signed body; the webhook-id doubles as the Idempotency-Key, so a resend replays."""
    all_headers = {"content-type": "application/json", "idempotency-key": headers["webhook-id"], **headers}
    if function_key:
        all_headers["x-functions-key"] = function_key
    # The URL's scheme was checked in main(): http or https only.
    request = urllib.request.Request(url, data=body, method="POST", headers=all_headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request) as response:  # noqa: S310
            print(f"HTTP {response.status}\n{response.read().decode()}")
            return 0
    except urllib.error.HTTPError as error:
        print(f"HTTP {error.code}\n{error.read().decode()}")
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("body", help="the exact JSON body to sign")
    parser.add_argument("--url", help="send the signed body to this URL and print the reply")
    parser.add_argument("--id", dest="message_id", help="webhook-id (default: a new msg_<uuid>)")
    parser.add_argument("--timestamp", type=int, help="webhook-timestamp in Unix seconds (default: now)")
    args = parser.parse_args(argv)
    secret = os.environ.get("WEBHOOK_SECRET", "").replace(",", " ").split()
    if not secret:
        parser.error("set WEBHOOK_SECRET to the secret the function app has (whsec_... or any string)")
    if args.url and not args.url.startswith(("http://", "https://")):
        parser.error("--url must be an http:// or https:// URL")
    body = args.body.encode()
    # During a rotation the app accepts any of its secrets; a sender signs with one (the last: the new one).
    headers = signed_headers(secret[-1], body, message_id=args.message_id, timestamp=args.timestamp)
    if args.url:
        return send(args.url, body, headers, os.environ.get("FUNCTION_KEY"))
    for name, value in headers.items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
