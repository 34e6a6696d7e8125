"""The console's files (``functions_adapter/console/static/``): small, self-contained, and
unable to turn text into markup.

Every piece of workflow output and user input must reach the page as text, so no module may
use an API that parses a string as HTML or code; the page may load nothing from elsewhere;
and the whole console stays well under the 300 KB the issue allows.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "functions_adapter" / "console" / "static"
SCRIPTS = sorted(STATIC.glob("*.js"))
# Each turns a string into markup or code: the console builds elements and sets textContent.
TEXT_TO_CODE = re.compile(
    r"\.innerHTML\b|\.outerHTML\b|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function\b|"
    r"createContextualFragment|DOMParser|setTimeout\(\s*[\"'`]|setInterval\(\s*[\"'`]|\.srcdoc\b"
)
MAX_TOTAL_BYTES = 120_000


def test_the_console_is_small_and_all_its_files_are_ones_the_route_serves() -> None:
    files = sorted(p for p in STATIC.iterdir() if p.is_file())
    assert {p.name for p in files} >= {"index.html", "console.js", "console.css"}
    assert sum(p.stat().st_size for p in files) < MAX_TOTAL_BYTES
    for path in files:
        assert path.name == "index.html" or re.fullmatch(r"[a-z0-9][a-z0-9-]*\.(js|css|svg|png)", path.name), path.name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_module_parses_a_string_as_markup_or_code(path: Path) -> None:
    found = [line for line in path.read_text().splitlines() if TEXT_TO_CODE.search(line)]
    assert found == []


def test_the_page_loads_only_its_own_files_and_holds_no_inline_code() -> None:
    page = (STATIC / "index.html").read_text()
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page)
    assert loaded and all(url.startswith("/api/console/") for url in loaded), loaded
    assert all((STATIC / Path(url).name).is_file() for url in loaded)
    assert re.findall(r"<script(?![^>]*\bsrc=)", page) == []  # no inline script
    assert re.findall(r"\son[a-z]+\s*=", page) == []  # no inline handler
    assert re.findall(r"\sstyle\s*=|<style", page) == []  # no inline style
    for path in SCRIPTS:
        imports = re.findall(r"""^import .* from ["']([^"']+)["'];$""", path.read_text(), re.MULTILINE)
        assert all(re.fullmatch(r"\./[a-z0-9-]+\.js", name) and (STATIC / name[2:]).is_file() for name in imports)
        assert "http://" not in path.read_text().replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in path.read_text()


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is a prerequisite of setup; absent here")
@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_module_parses(path: Path, tmp_path: Path) -> None:
    module = tmp_path / f"{path.stem}.mjs"
    module.write_text(path.read_text())
    checked = subprocess.run(["node", "--check", str(module)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
