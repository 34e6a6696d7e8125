"""JSON in and out, strictly: one meaning per body, and bytes every parser accepts.

Parsing refuses what two parsers could read differently (a key given twice) and
strings no UTF-8 encoder can write (lone surrogates, which JSON escapes can carry).
Rendering cannot fail: values JSON has no spelling for are written in a documented
way, so a run that committed can always be answered.

* ``NaN``, ``Infinity`` and ``-Infinity`` are written as ``null`` (as ``JSON.stringify``
  does): strict parsers reject the bare tokens.
* A lone surrogate in an output string is written as U+FFFD, the replacement character.
"""

from __future__ import annotations

import json
import math
from typing import Any


class StrictJsonError(ValueError):
    """The bytes are not one unambiguous JSON document of UTF-8 text."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJsonError(f"The key {key[:40]!r} appears twice in one object.")
        result[key] = value
    return result


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, which UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                raise StrictJsonError("A string holds a lone surrogate (an unpaired \\ud800-\\udfff escape).")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _refuse_constant(name: str) -> Any:
    raise StrictJsonError(f"{name} is not JSON.")


def _decoded(data: bytes) -> str:
    if not data.strip():
        raise StrictJsonError("The body is empty: send one JSON value.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJsonError(f"The body is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}.") from None


def loads(data: bytes) -> Any:
    """Parse a request body; ``StrictJsonError`` on anything ambiguous or not UTF-8 JSON,
    with a message that says what is wrong and where (line and column)."""
    text = _decoded(data)
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_refuse_constant)
    except StrictJsonError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJsonError(
            f"The body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    except RecursionError:
        raise StrictJsonError("The body nests arrays or objects too deeply to be read.") from None
    except ValueError as exc:  # an integer of more digits than int() reads
        raise StrictJsonError("The body holds a number with too many digits.") from exc
    _check_strings(value)
    return value


def _sanitized(value: Any) -> Any:
    """A copy in which non-finite floats are None and strings are encodable."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str) and has_lone_surrogate(value):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_sanitized(str(k)): _sanitized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitized(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON that strict parsers accept; never raises for JSON-shaped values."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return json.dumps(_sanitized(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
