"""How long the console takes to open a thread of 5 turns and one of 500, side by side.

    .venv/bin/python -m bench.console_open [--turns 500] [--repeat 5]

One ``devtools.serve`` (its own in-memory Azurite, the console on) serves both threads. For
each, a fresh Chromium tab (Debian's, as the browser tests use) opens
``/api/console?thread=<id>`` and the time is read off the page's own clock at the mark it
sets once the conversation, the lineage and the graph are drawn: everything from navigation
start (page, modules, the listing, the thread, its newest history page with each turn, the
workflow graph). Beside
it, the baseline a client would write without pages: the whole lineage read with
``/history?include=turn`` to its end. Medians of ``--repeat`` runs; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from devtools.azurite import free_port

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("CHROMIUM") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


def call(base: str, method: str, path: str, body: Any = None) -> tuple[Any, int]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method)  # noqa: S310 - loopback
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - a loopback URL
        return json.loads(answer.read() or b"null"), int(answer.headers.get("x-storage-operations") or -1)


def serve(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    settings = json.loads((ROOT / "local.settings.sample.json").read_text())
    settings["Values"]["CONSOLE_ENABLED"] = "true"
    (work / "settings.json").write_text(json.dumps(settings))
    log = (work / "serve.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devtools.serve",
            "--in-memory",
            "--port",
            str(port),
            "--settings",
            str(work / "settings.json"),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while f"Serving {base} " not in (work / "serve.log").read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((work / "serve.log").read_text(errors="replace")[-2000:])
        time.sleep(0.2)
    return process, base


def whole_lineage(base: str, thread_id: str) -> tuple[float, int]:
    """The baseline: every turn, page after page (100 a page), to the end."""
    started, operations, cursor = time.perf_counter(), 0, None
    while True:
        query = "?include=turn&limit=100" + (f"&before={cursor}" if cursor else "")
        page, ops = call(base, "GET", f"/threads/{thread_id}/history{query}")
        operations += ops
        cursor = page["next"]
        if cursor is None:
            return time.perf_counter() - started, operations


def open_in_browser(browser: Any, base: str, thread_id: str) -> float:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}/console?thread={thread_id}")
    # The page marks the moment it has drawn the thread (conversation, lineage, graph), on its
    # own clock from navigation start, so how often this polls for the mark does not count.
    # (wait_for_function would evaluate a string in the page, which the console's CSP forbids.)
    mark = "performance.getEntriesByName('console:thread-drawn').map(m => m.startTime)"
    drawn: list[float] = []
    deadline = time.monotonic() + 30
    while not drawn and time.monotonic() < deadline:
        drawn = page.evaluate(mark)
        time.sleep(0.02)
    if not drawn:
        raise RuntimeError(f"the console never drew thread {thread_id}")
    elapsed = float(drawn[0])
    context.close()
    return elapsed / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        process, base = serve(Path(tmp))
        try:
            threads = {5: "bench-short", args.turns: "bench-long"}
            for turns, thread_id in threads.items():
                started = time.perf_counter()
                for n in range(turns):
                    call(base, "POST", f"/threads/{thread_id}/runs", {"messages": f"message {n}"})
                print(f"built {thread_id}: {turns} turns in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            rows = []
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
                open_in_browser(browser, base, threads[5])  # warm: the first tab compiles the modules
                for turns, thread_id in threads.items():
                    opened = [open_in_browser(browser, base, thread_id) for _ in range(args.repeat)]
                    _, page_ops = call(base, "GET", f"/threads/{thread_id}/history?include=turn&limit=20")
                    whole = [whole_lineage(base, thread_id) for _ in range(args.repeat)]
                    rows.append(
                        (
                            turns,
                            statistics.median(opened),
                            page_ops,
                            statistics.median(w[0] for w in whole),
                            whole[0][1],
                        )
                    )
                browser.close()
        finally:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=60)
    print(
        "| turns | console opens the thread (median) | its history page: storage ops "
        "| whole lineage read (median) | its storage ops |"
    )
    print("|---:|---:|---:|---:|---:|")
    for turns, opened, page_ops, whole, whole_ops in rows:
        print(f"| {turns} | {opened * 1000:.0f} ms | {page_ops} | {whole * 1000:.0f} ms | {whole_ops} |")
    short, long = rows[0][1], rows[-1][1]
    print(f"\n{rows[-1][0]} turns vs 5: {long / short:.2f}x to open in the console.")


if __name__ == "__main__":
    main()
