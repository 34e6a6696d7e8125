"""Validation of caller-supplied identifiers before they become blob names."""

from __future__ import annotations

import re

from .errors import InvalidRequest

MAX_ID_LENGTH = 128

# Letters, digits, '-', '_' and '.', starting with a letter or digit. This admits the
# framework's UUIDs and most application IDs, and cannot express a path separator,
# a control character, a URL escape or a leading dot.
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_ascii_digits(value: str) -> bool:
    """``0-9`` only. ``str.isdigit`` also accepts ``²`` and other scripts' digits,
    which ``int()`` then refuses or reads differently."""
    return value.isascii() and value.isdigit()


def validate_id(value: object, *, kind: str = "checkpoint_id") -> str:
    """Return ``value`` if it is a safe identifier, else raise ``InvalidRequest``.

    Checked before any storage access: an ID is spliced into a blob name, so it must
    not be able to name anything outside its own blob.
    """
    if not isinstance(value, str):
        raise InvalidRequest(f"{kind} must be a string.")
    if not value or len(value) > MAX_ID_LENGTH:
        raise InvalidRequest(f"{kind} must be 1 to {MAX_ID_LENGTH} characters long.")
    if ".." in value or _ID_PATTERN.fullmatch(value) is None:
        raise InvalidRequest(
            f"{kind} may contain only letters, digits, '-', '_' and single '.' characters, "
            "and must start with a letter or digit."
        )
    return value
