"""A ready thread authorizer: a caller may use only threads whose IDs start with its prefix.

    THREAD_AUTHORIZER=functions_adapter.authorizers:thread_prefix_of_principal

The caller's principal comes from, in order:

1. ``THREAD_PRINCIPAL_HEADER``: a header a gateway (API Management, Front Door rules)
   sets after authenticating the caller. The gateway must overwrite it on every request;
   a client could otherwise set it itself.
2. App Service Authentication (Easy Auth): the claim ``THREAD_PRINCIPAL_CLAIM`` (default
   the Entra ID object ID) of ``X-MS-CLIENT-PRINCIPAL``, which the platform validated. With
   Easy Auth off that header is never trusted (``authorization.trusted_headers`` drops it).

The thread ID must start with ``<principal>-`` (the principal with anything but letters,
digits, ``_`` and ``-`` replaced by ``-``). No principal: refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping

OBJECT_ID_CLAIM = "http://schemas.microsoft.com/identity/claims/objectidentifier"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def principal_of(headers: Mapping[str, str]) -> str | None:
    header = os.environ.get("THREAD_PRINCIPAL_HEADER", "").strip().lower()
    if header:
        return headers.get(header) or None
    encoded = headers.get("x-ms-client-principal")
    if not encoded:
        return None
    try:
        principal = json.loads(base64.b64decode(encoded, validate=True))
        wanted = os.environ.get("THREAD_PRINCIPAL_CLAIM", "").strip() or OBJECT_ID_CLAIM
        values = [c["val"] for c in principal.get("claims", []) if c.get("typ") == wanted]
    except (ValueError, binascii.Error, TypeError, KeyError, AttributeError):
        return None
    return str(values[0]) if values else None


def thread_prefix_of_principal(
    *, route: str, thread_id: str, headers: Mapping[str, str], metadata: Mapping[str, str]
) -> bool:
    principal = principal_of(headers)
    if not principal:
        return False
    return thread_id.startswith(_UNSAFE.sub("-", principal) + "-")
