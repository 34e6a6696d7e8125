"""Thread IDs and origins derived from someone else's identifiers (a principal, a sender's IDs).

Such a name decides which conversation a message joins, so two different senders' IDs
must never give the same name: the encoding is injective.

* Each part keeps ASCII letters, digits and ``-``; every other UTF-8 byte is written
  ``_xx`` (two lowercase hex digits), so an encoded part never holds a ``.``. An empty
  part is ``_`` alone (no escape is a lone ``_``).
* Parts are joined with ``.``: splitting on ``.`` gives the parts back.
* A name over ``MAX_ID_LENGTH`` keeps its first characters and ends ``_h`` + 32 hex digits
  of the SHA-256 of the whole name. ``_h`` is no escape (``h`` is not a hex digit), so a
  shortened name is never a full one, and two shortened names are equal only if their
  full names' hashes are (a 128-bit collision).
"""

from __future__ import annotations

import hashlib

from resumable.base import MAX_ID_LENGTH

_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HASH_MARK = "_h"
_HASH_DIGITS = 32


def escape(part: str) -> str:
    """``part`` with every character but ASCII letters, digits and ``-`` written ``_xx``."""
    return "".join(
        ch if ch in _KEPT else "".join(f"_{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass")) for ch in part
    )


def unescape(encoded: str) -> str | None:
    """``escape``'s inverse, or None for text ``escape`` never writes."""
    out = bytearray()
    i = 0
    while i < len(encoded):
        ch = encoded[i]
        if ch == "_":
            digits = encoded[i + 1 : i + 3]
            if len(digits) != 2 or any(d not in "0123456789abcdef" for d in digits):
                return None
            out.append(int(digits, 16))
            i += 3
        elif ch in _KEPT:
            out += ch.encode()
            i += 1
        else:
            return None
    try:
        text = out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return text if escape(text) == encoded else None


def derived_thread_id(kind: str, *parts: object) -> str:
    """The thread ID for ``parts`` from the sender ``kind`` (letters only, e.g. ``slack``)."""
    if not kind.isascii() or not kind.isalpha():
        raise ValueError("kind must be ASCII letters")
    name = ".".join([kind, *(escape(str(part)) or "_" for part in parts)])
    if len(name) <= MAX_ID_LENGTH:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_DIGITS]
    return name[: MAX_ID_LENGTH - len(_HASH_MARK) - _HASH_DIGITS] + _HASH_MARK + digest


def parts_of(thread_id: str, kind: str) -> tuple[str, ...] | None:
    """The parts ``derived_thread_id(kind, ...)`` made ``thread_id`` from; None if it did not
    (another kind, a shortened name, or a name no derivation gives)."""
    head, *encoded = thread_id.split(".")
    if head != kind:
        return None
    parts = tuple("" if part == "_" else unescape(part) for part in encoded)
    if any(part is None for part in parts):
        return None
    return parts  # type: ignore[return-value]


# A pointer keeps an origin of at most this many characters (``resumable.threads.pointers``).
MAX_ORIGIN_LENGTH = 512


def origin_for(kind: str, *parts: object) -> str:
    """Who a turn is from, as ``kind:<part>:<part>`` with each part escaped (so no part
    holds a ``:``): injective, printable ASCII, and hashed as names are when too long."""
    if not kind.isascii() or not kind.isalpha():
        raise ValueError("kind must be ASCII letters")
    origin = ":".join([kind, *(escape(str(part)) for part in parts)])
    if len(origin) <= MAX_ORIGIN_LENGTH:
        return origin
    digest = hashlib.sha256(origin.encode()).hexdigest()[:_HASH_DIGITS]
    return origin[: MAX_ORIGIN_LENGTH - len(_HASH_MARK) - _HASH_DIGITS] + _HASH_MARK + digest
