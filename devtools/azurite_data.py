"""The folder in which ``scripts/serve.sh``'s Azurite keeps threads between runs.

One Azurite at a time may use a folder: two would write the same database files. The
folder is claimed with an advisory lock held for the server's lifetime, so a second
``serve.sh`` on the same checkout is refused with a line that says what to do.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = ".serve.lock"


class DataInUse(RuntimeError):
    """Another server holds the data folder."""


@contextmanager
def claim_data_folder(folder: Path, *, fresh: bool = False) -> Iterator[Path]:
    """Hold ``folder`` (created if missing) for one Azurite; with ``fresh``, empty it first."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOCK).open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataInUse(
                f"Azurite's data folder {folder} is in use by another scripts/serve.sh: stop that one, "
                "or pass --in-memory (or --data <another folder>)."
            ) from None
        if fresh:
            for entry in folder.iterdir():
                if entry.name != LOCK:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        yield folder
