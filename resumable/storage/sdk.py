"""The Azure SDK's error types and match conditions, loaded on first use.

``azure.core`` (about 60 modules) is needed only once a storage call is made, so the code
that catches its errors names them through this module (``sdk.ResourceNotFoundError``) and
a cold start that never touches storage does not load it (``tests/library/test_cold_start.py``).
An ``except`` clause evaluates its type only when an exception reaches it; by then the
storage client that raised it has loaded the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from azure.core import MatchConditions
    from azure.core.exceptions import (
        AzureError,
        HttpResponseError,
        ResourceExistsError,
        ResourceNotFoundError,
        ServiceRequestError,
    )

_MODULE_OF = {
    "MatchConditions": "azure.core",
    "AzureError": "azure.core.exceptions",
    "HttpResponseError": "azure.core.exceptions",
    "ResourceExistsError": "azure.core.exceptions",
    "ResourceNotFoundError": "azure.core.exceptions",
    "ServiceRequestError": "azure.core.exceptions",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


__all__ = [
    "AzureError",
    "HttpResponseError",
    "MatchConditions",
    "ResourceExistsError",
    "ResourceNotFoundError",
    "ServiceRequestError",
]
