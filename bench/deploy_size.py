"""What a deployment's packages weigh, and which distributions dominate it.

Installs a lock the way the Flex Consumption remote build does (``pip install --target``
into an empty folder, with this interpreter) and sums each distribution's files from its
RECORD, largest first. Run it with the Python you deploy:

    .venv/bin/python bench/deploy_size.py requirements.txt
    .venv/bin/python bench/deploy_size.py requirements-chat-agents.txt --top 8
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

MB = 1_000_000
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
PIP_INSTALL += ["--root-user-action=ignore"]  # the remote build runs as root too


def install(lock: Path, target: Path) -> None:
    """``pip install --target``, as the remote build runs it (with .pyc files); hashes enforced."""
    subprocess.run(
        [*PIP_INSTALL, "--target", str(target), "-r", str(lock)],
        check=True,
    )


def sizes(target: Path) -> dict[str, int]:
    """Bytes on disk per distribution, from the files each one's RECORD lists."""
    found: dict[str, int] = {}
    for record in target.glob("*.dist-info/RECORD"):
        name = record.parent.name.removesuffix(".dist-info").replace("-", "==", 1)
        total = 0
        with record.open(newline="") as handle:
            for row in csv.reader(handle):
                if row and (target / row[0]).is_file():
                    total += (target / row[0]).stat().st_size
        found[name] = total
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", type=Path, help="a hashed lock, e.g. requirements.txt")
    parser.add_argument("--top", type=int, default=10, help="how many of the largest to list")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder)
        install(args.lock.resolve(), target)
        by_dist = sizes(target)
        on_disk = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    version = "{}.{}".format(*sys.version_info[:2])
    print(f"{args.lock} on Python {version}: {len(by_dist)} distributions, {on_disk / MB:.1f} MB")
    print("| distribution | MB | share |\n|---|---:|---:|")
    for name, size in sorted(by_dist.items(), key=lambda item: -item[1])[: args.top]:
        print(f"| {name} | {size / MB:.1f} | {size / on_disk:.0%} |")


if __name__ == "__main__":
    main()
