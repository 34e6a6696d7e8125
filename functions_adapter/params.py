"""The one parser of bounded numbers and enums, for every route (ours, the Responses
routes, history paging, the headers): a hostile value is a 400 that names the parameter,
never a 500.

Digits are counted before ``int()`` runs: ``int()`` of thousands of digits costs quadratic
time, and over 4,300 of them it raises (a 500 if nothing catches it). Only ASCII digits
are numbers: ``str.isdigit`` also accepts ``²`` and other scripts' digits, which
``int()`` refuses or reads differently. An enum's value must be one of its strings: a
list or an object is refused before it is looked up (neither is hashable).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from resumable.base import InvalidRequest, strict_json
from resumable.base.ids import is_ascii_digits

T = TypeVar("T")


def json_object(body: bytes) -> dict[str, Any]:
    """A request body that must be one JSON object; 400 saying what is wrong and where."""
    try:
        data = strict_json.loads(body)
    except strict_json.StrictJsonError as exc:
        raise InvalidRequest(str(exc)) from None
    if not isinstance(data, dict):
        raise InvalidRequest(f"The body must be a JSON object, not {_kind(data)}.")
    return data


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return strict_json.dumps(value).decode()[:20]  # null, true, a number


def invalid(message: str, param: str) -> InvalidRequest:
    """A 400 ``invalid_request`` naming ``param`` (OpenAI's ``param``; ``details.param`` on ours)."""
    return InvalidRequest(message, details={"param": param})


def _digits(raw: str, most: int, *, padded: bool = True) -> int | None:
    """``raw`` as a number if it is ASCII digits; ``most + 1`` if it has more digits than
    ``most`` could (no ``int()`` of a long string); None if it is not a whole number, or
    (``padded`` False) if it has a leading zero."""
    if not is_ascii_digits(raw):
        return None
    significant = raw.lstrip("0") or "0"  # int() counts leading zeros towards its limit
    if not padded and significant != raw:
        return None
    if len(significant) > len(str(most)):
        return most + 1
    return int(significant)


def whole_number(raw: str | None, name: str, *, low: int, high: int, default: int, padded: bool = False) -> int:
    """A whole number from ``low`` to ``high`` (a query parameter or a header's part);
    ``default`` when absent; 400 ``invalid_request`` naming ``name`` otherwise. Written as
    this app writes numbers (no leading zeros) unless ``padded`` (RFC 7240's ``wait``)."""
    if raw is None:
        return default
    value = _digits(raw, high, padded=padded)
    if value is None or not low <= value <= high:
        raise invalid(f"'{name}' must be a whole number from {low} to {high}.", name)
    return value


def capped_number(raw: str, name: str, *, cap: int) -> int:
    """A whole number of any size, read as at most ``cap + 1`` (a size checked against a
    limit, a wait that is capped); 400 naming ``name`` if it is not digits."""
    value = _digits(raw, cap)
    if value is None:
        raise invalid(f"'{name}' must be a whole number.", name)
    return value


def one_of(value: object, name: str, allowed: Collection[str], *, default: str | None = None) -> str:
    """One of ``allowed`` (a JSON value or a query parameter); ``default`` when None is allowed."""
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or value not in allowed:
        raise invalid(f"'{name}' must be one of {', '.join(allowed)}.", name)
    return value


def mapped(value: object, name: str, table: Mapping[str, T], why: str = "") -> T:
    """``table[value]`` for a string key of ``table``; 400 naming ``name`` otherwise."""
    if isinstance(value, str) and value in table:
        return table[value]
    raise invalid(f"'{name}' must be one of {', '.join(table)}{f' ({why})' if why else ''}.", name)


def flag(value: object, name: str, *, default: bool) -> bool:
    """A JSON boolean; ``default`` when None (absent or null)."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(f"'{name}' must be true or false.", name)
    return value
