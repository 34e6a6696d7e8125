"""Several app processes on one storage account: ``devtools.serve --no-azurite`` each, as
separate Flex Consumption instances are separate workers on one account.

Each process gets the same storage settings (one Azurite: blobs, and the run queue every
instance's queue listener pulls from), its own port and settings file, and the environment
switches of ``devtools.storage_switches``: every process counts its storage operations (dumped
as JSON when it stops), and the faulty one injects storage faults at its SDK boundary.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.azurite import free_port
from devtools.storage_switches import FAULTS_ENV, OPS_ENV

ROOT = Path(__file__).resolve().parent.parent
# The app's settings come from what the cluster sets, not from whatever the caller's shell has.
APP_SETTINGS = set(json.loads((ROOT / "local.settings.sample.json").read_text())["Values"])


@dataclass
class Instance:
    """One app process."""

    index: int
    process: subprocess.Popen[bytes]
    base: str  # http://127.0.0.1:PORT/api
    log: Path
    ops_file: Path
    faulty: bool

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    instances: list[Instance] = field(default_factory=list)

    @property
    def bases(self) -> list[str]:
        return [i.base for i in self.instances]

    def operations(self) -> tuple[Counter[str], Counter[str]]:
        """Every process's storage operations ("METHOD service prefix" → attempts) and the faults
        injected, summed; read once the processes stopped (they write them as they exit)."""
        counts: Counter[str] = Counter()
        faults: Counter[str] = Counter()
        for instance in self.instances:
            if instance.ops_file.exists():
                data = json.loads(instance.ops_file.read_text())
                counts.update(data["counts"])
                faults.update(data["faults"])
        return counts, faults


def _env(connection: str, container: str, ops_file: Path, fault_rate: float, seed: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in APP_SETTINGS and k not in (FAULTS_ENV, OPS_ENV)}
    env.update(
        AzureWebJobsStorage=connection,
        CHECKPOINT_STORAGE=connection,
        CHECKPOINT_CONTAINER=container,
        PYTHONUNBUFFERED="1",
    )
    env[OPS_ENV] = str(ops_file)
    if fault_rate > 0:
        env[FAULTS_ENV] = f"{fault_rate},{seed}"
    return env


def _start(index: int, work: Path, env: dict[str, str], faulty: bool) -> Instance:
    port = free_port()
    log = work / f"instance-{index}.log"
    settings = work / f"instance-{index}.settings.json"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.serve", "--no-azurite", "--port", str(port), "--settings", str(settings)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Instance(index, process, f"http://127.0.0.1:{port}/api", log, Path(env[OPS_ENV]), faulty)


def _wait_ready(instances: list[Instance], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for instance in instances:
        while f"Serving {instance.base} " not in instance.output():
            if instance.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"instance {instance.index} did not start:\n{instance.output()[-3000:]}")
            time.sleep(0.2)


def _stop(instances: list[Instance]) -> None:
    for instance in instances:
        if instance.process.poll() is None:
            os.killpg(instance.process.pid, signal.SIGINT)
    for instance in instances:
        try:
            instance.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(instance.process.pid, signal.SIGKILL)
            instance.process.wait()


@contextmanager
def cluster(
    connection: str,
    container: str,
    work: Path,
    *,
    instances: int = 4,
    fault_rate: float = 0.0,
    seed: int = 1,
    timeout: float = 240,
) -> Any:
    """``instances`` app processes on ``connection``'s ``container``; the first one injects
    storage faults at ``fault_rate`` (none if 0). Yields a ``Cluster``; stops every process on
    exit (SIGINT, as a terminal's Ctrl+C), so each dumps its operation count."""
    work.mkdir(parents=True, exist_ok=True)
    started = Cluster()
    try:
        for index in range(instances):
            ops_file = work / f"instance-{index}.ops.json"
            ops_file.unlink(missing_ok=True)
            faulty = index == 0 and fault_rate > 0
            env = _env(connection, container, ops_file, fault_rate if faulty else 0.0, seed)
            started.instances.append(_start(index, work, env, faulty))
        _wait_ready(started.instances, timeout)
        yield started
    finally:
        _stop(started.instances)


__all__ = ["Cluster", "Instance", "cluster"]
