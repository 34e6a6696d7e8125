"""The README and docs/ stay true: sizes, links, and the tables other files own.

`mkdocs build --strict` (scripts/test.sh) checks links between docs pages with MkDocs' rules;
these tests check what it cannot: the README, links as GitHub resolves them, and that the
route and settings tables name exactly what the code registers and reads, with its defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from functions_adapter.settings import (
    CODE_SETTINGS,
    PLATFORM_SETTINGS,
    Settings,
    SettingsError,
    TelemetrySettings,
)
from functions_adapter.webhooks import ADAPTERS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
MARKDOWN = [README, *PAGES]


def prose(text: str) -> str:
    """The text outside fenced code blocks (links and headings there are not Markdown)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def github_anchors(text: str) -> set[str]:
    """Heading anchors as GitHub makes them: lower case, punctuation dropped, spaces to '-'."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(text), flags=re.MULTILINE):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", plain.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


def anchors_of(file: Path) -> set[str]:
    return github_anchors(file.read_text()) if file.suffix == ".md" else set()


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))


def table_rows(text: str, header: str) -> list[list[str]]:
    """The body rows of every table whose header line is ``header``, as stripped cells."""
    rows: list[list[str]] = []
    for block in re.split(r"\n(?!\|)", text):
        lines = block.strip().splitlines()
        if lines and lines[0].strip() == header:
            for line in lines[2:]:
                cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
                rows.append([cell.strip() for cell in cells])
    return rows


def test_the_readme_is_a_front_door() -> None:
    assert len(README.read_text().splitlines()) <= 300


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_on_github(page: Path) -> None:
    """Every relative link names a file that exists, and an anchor that its headings make."""
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and anchor not in anchors_of(file)):
            broken.append(target)
    assert not broken


def test_the_link_checker_can_fail() -> None:
    text = "# Title\n\n## POST /api/runs\n\n```\n## not a heading\n```\n"
    assert github_anchors(text) == {"title", "post-apiruns"}
    assert links("[a](b.md#c)\n```\n[d](e.md)\n```\n") == ["b.md#c"]


def test_every_docs_page_is_in_the_site_navigation() -> None:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    assert config["docs_dir"] == "docs" and config["strict"] is True
    assert config["validation"]["anchors"] == "warn"  # strict turns every warning into a failure

    def files(nav: Any) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, dict):
            return [f for value in nav.values() for f in files(value)]
        return [f for item in nav for f in files(item)]

    listed = files(config["nav"])
    assert sorted(listed) == sorted(p.name for p in PAGES)


# -- routes ---------------------------------------------------------------------------

# Settings under which every optional part of the app registers its routes: the adapters
# (functions_adapter/webhooks/) are registered only when their signing secret is set.
ALL_ROUTES_ENV = {setting: "s" * 32 for setting in ADAPTERS}

_LIST_ROUTES = """
import json, function_app
from devtools.function_host import index_of
print(json.dumps(sorted([m, "/api/" + r.template] for r in index_of(function_app.app).routes for m in r.methods)))
"""


def registered_routes(env: dict[str, str]) -> set[tuple[str, str]]:
    """METHOD and route of every HTTP function ``function_app`` registers under ``env``."""
    done = subprocess.run(
        [sys.executable, "-c", _LIST_ROUTES],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {(method, route) for method, route in json.loads(done.stdout.splitlines()[-1])}


def documented_routes(*, optional: bool) -> list[tuple[str, str]]:
    """The route table's rows; ``optional=False`` leaves out those registered "only when"."""
    rows = table_rows((DOCS / "api.md").read_text(), "| method | route | what it does | page |")
    return [(method, route.strip("`")) for method, route, what, _ in rows if optional or "only when" not in what]


def test_the_route_table_is_every_registered_route() -> None:
    documented = documented_routes(optional=True)
    assert len(documented) == len(set(documented)), "a route is documented twice"
    assert set(documented) == registered_routes(ALL_ROUTES_ENV)


def test_routes_documented_as_optional_are_absent_by_default() -> None:
    assert set(documented_routes(optional=False)) == registered_routes(dict.fromkeys(ADAPTERS, ""))


def test_no_page_states_how_many_routes_or_functions_there_are() -> None:
    """A count drifts with every new route; the table above is the count."""
    numbers = r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen)"
    pattern = re.compile(numbers + r" (http )?(routes|functions|endpoints)\b", re.IGNORECASE)
    for page in MARKDOWN:
        assert not pattern.search(page.read_text()), page.name


# -- settings -------------------------------------------------------------------------

SETTINGS_HEADER = "| setting | default | meaning |"
BASE_ENV = {"CHECKPOINT_STORAGE": "UseDevelopmentStorage=true"}


def documented_settings() -> dict[str, str]:
    rows = table_rows((DOCS / "configuration.md").read_text(), SETTINGS_HEADER)
    names = [row[0].strip("`") for row in rows]
    assert len(names) == len(set(names)), "a setting is documented twice"
    return {name: row[1] for name, row in zip(names, rows, strict=True)}


def literal_default(cell: str) -> str | None:
    """`value` (the whole cell one code span) is a default the code must apply; prose is not."""
    match = re.fullmatch(r"`([^`]*)`", cell)
    return match.group(1) if match else None


def parsed(env: dict[str, str]) -> tuple[Settings, TelemetrySettings]:
    return Settings.from_env(env), TelemetrySettings.from_env(env)


def test_the_settings_tables_name_every_setting_and_nothing_else() -> None:
    documented = documented_settings()
    assert set(documented) == set(CODE_SETTINGS) | set(PLATFORM_SETTINGS)
    assert all(default for default in documented.values()), "every setting needs its default"


@pytest.mark.parametrize(
    ("name", "default"),
    [(n, d) for n, d in documented_settings().items() if n in CODE_SETTINGS and literal_default(d) is not None],
)
def test_a_documented_default_is_the_one_the_code_applies(name: str, default: str) -> None:
    value = literal_default(default)
    assert value is not None
    unset = parsed(BASE_ENV)
    # The setting is one the code parses: a nonsense value is refused or changes the result ...
    with contextlib.suppress(SettingsError):
        assert parsed({**BASE_ENV, name: "\x01nonsense"}) != unset, f"{name} is not read by settings.py"
    # ... and the documented default, set explicitly, changes nothing.
    assert parsed({**BASE_ENV, name: value}) == unset
    sample = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]
    assert sample.get(name, "") in ("", value), "local.settings.sample.json disagrees with the docs"


def test_a_wrong_documented_default_would_fail() -> None:
    assert parsed({**BASE_ENV, "MAX_MESSAGES": "101"}) != parsed(BASE_ENV)
    assert literal_default("`100`") == "100" and literal_default("empty (off)") is None


# -- claims that were false once --------------------------------------------------------

CHECKED_FOR_CURL = [*MARKDOWN, *(ROOT / "examples").glob("*"), *(ROOT / "scripts").glob("*.sh")]


@pytest.mark.parametrize("path", CHECKED_FOR_CURL, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_curl_streams_with_a_progress_meter(path: Path) -> None:
    """`curl -N` without `-s` prints a progress meter over the stream."""
    for line in path.read_text().splitlines():
        if "curl " not in line:
            continue
        flags = "".join(w[1:] for w in line.split() if re.fullmatch(r"-[A-Za-z]+", w))
        streaming = "N" in flags or "--no-buffer" in line
        assert not streaming or "s" in flags or "--silent" in line, line


def test_retention_is_described_as_idle_time_not_age() -> None:
    for page in [*MARKDOWN, ROOT / "infra" / "main.bicep"]:
        for line in page.read_text().splitlines():
            if "checkpointRetentionDays" in line:
                assert "older than" not in line, f"{page.name}: {line}"
    configuration = (DOCS / "deploy.md").read_text()
    row = next(line for line in configuration.splitlines() if line.startswith("| `checkpointRetentionDays`"))
    assert "daysAfterLastAccessTimeGreaterThan" in row and "not age" in row


def test_every_test_file_is_on_the_tests_page() -> None:
    page = (DOCS / "tests.md").read_text()
    files = sorted((ROOT / "tests").rglob("test_*.py"))  # each layer's folder: tests/<layer>/test_*.py
    assert len(files) > 50
    missing = [p.name for p in files if p.name not in page]
    assert not missing


# -- the README's code runs -------------------------------------------------------------


def python_block(text: str, heading: str) -> str:
    """The first ```python block after ``heading``."""
    return text.split(heading, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_resume_in_code_runs_as_written(azurite: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Two turns through the README's function: the second is parented on the first, one run each."""
    import uuid

    from azure.storage.blob.aio import ContainerClient

    from resumable import BlobCheckpointStorage, CheckpointCodec
    from workflows.default_conversation import SPEC

    code = python_block(README.read_text(), "## The one-run resume in code")
    assert len([line for line in code.splitlines() if line.strip()]) <= 15
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the README's own code
    container = ContainerClient.from_connection_string(azurite.connection_string, f"readme-{uuid.uuid4().hex[:8]}")
    async with container:
        store = BlobCheckpointStorage(container, CheckpointCodec(allowed_types=SPEC.allowed_type_keys))
        await store.ensure_container()
        first = await namespace["turn"](store, None, "hello")
        second = await namespace["turn"](store, first, "and again")
        assert (await store.load(second)).previous_checkpoint_id == first
    printed = capsys.readouterr().out.split()
    assert printed.count("started") == 2 and printed.count("output") == 2  # one run per turn


def test_the_responses_example_is_the_same_in_the_readme_and_the_docs() -> None:
    """tests/adapter/test_responses_api.py runs the README's copy against a served app."""
    readme = python_block(README.read_text(), "### OpenAI Responses API")
    assert readme == python_block((DOCS / "responses-api.md").read_text(), "# OpenAI Responses API")


@pytest.mark.parametrize("package", ["resumable", "functions_adapter", "devtools", "workflows"])
def test_the_architecture_page_names_every_module(package: str) -> None:
    """Its layout is where a newcomer looks first: a module it does not name is one they miss.
    (`devtools/` and `workflows/` are described as folders; their modules need not be named.)"""
    page = (DOCS / "architecture.md").read_text()
    assert f"{package}/" in page
    if package in ("devtools", "workflows"):
        return
    unnamed = []
    for path in sorted((ROOT / package).iterdir()):
        if path.suffix == ".py" and path.stem != "__init__" and f"{path.stem}.py" not in page:
            unnamed.append(path.name)
        elif path.is_dir() and (path / "__init__.py").exists() and f"{path.name}/" not in page:
            unnamed.append(f"{path.name}/")
    assert not unnamed
