"""A ready thread authorizer: a caller may use only threads whose IDs start with its prefix.

    THREAD_AUTHORIZER=functions_adapter.authorizers:thread_prefix_of_principal

The caller's principal comes from, in order:

1. ``THREAD_PRINCIPAL_HEADER``: a header a gateway (API Management, Front Door rules)
   sets after authenticating the caller. The gateway must overwrite it on every request;
   a client could otherwise set it itself.
2. App Service Authentication (Easy Auth): the claim ``THREAD_PRINCIPAL_CLAIM`` (default
   the Entra ID object ID) of ``X-MS-CLIENT-PRINCIPAL``, which the platform validated. With
   Easy Auth off that header is never trusted (``callers.trusted_headers`` drops it).

The thread ID must start with ``thread_prefix(principal)``: the principal with ASCII
letters, digits and ``-`` kept, every other UTF-8 byte written ``_xx`` (two lowercase hex
digits), then ``.``; one whose first character is not a letter or digit gets ``0_`` in
front (thread IDs start with a letter or digit). ``alice`` owns ``alice.*``, ``a.b`` owns
``a_2eb.*``, ``josé`` owns ``jos_c3_a9.*``, ``@bob`` owns ``0__40bob.*``. No principal:
refused.

Why this shape: two principals never share a prefix, and no prefix starts another. The
encoded part holds no ``.``, so each prefix ends at its first ``.``; ``_`` is always
followed by two hex digits, so ``0_`` followed by ``_`` or ``-`` is never an encoded
principal's start.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping

from functions_adapter.thread_names import escape

OBJECT_ID_CLAIM = "http://schemas.microsoft.com/identity/claims/objectidentifier"


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
    return thread_id.startswith(thread_prefix(principal))


def thread_prefix(principal: str) -> str:
    """The start of every thread ID ``principal`` owns, and of no other principal's."""
    encoded = escape(principal)
    if not encoded[:1].isalnum():
        encoded = "0_" + encoded
    return encoded + "."
