"""The library's folders show its architecture: each sub-package imports only the ones
below it, none imports the package root, and ``import resumable`` loads no HTTP or
Functions code. The adapter is layered the same way: its shared modules sit below its
protocol folders, no protocol folder imports another, and no imports run in a cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from devtools import adapter_graph

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "resumable"
# Lowest first: a package may import itself and anything before it, nothing after.
LAYERS = ["base", "storage", "checkpoints", "threads", "core", "background"]


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, dotted module) of every ``from ... import`` in ``path`` (absolute: level 0)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
        elif isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
    return found


def _target_package(path: Path, level: int, module: str) -> str | None:
    """The sub-package an import lands in ("" for the package root), None if outside."""
    package = path.relative_to(LIBRARY).parent.parts
    if level == 0:
        parts = module.split(".")
        if parts[0] != "resumable":
            return None
        return parts[1] if len(parts) > 1 and parts[1] in LAYERS else ""
    base = list(package[: len(package) - (level - 1)]) if level > 1 else list(package)
    parts = base + [part for part in module.split(".") if part]
    return parts[0] if parts and parts[0] in LAYERS else ""


def test_every_module_lives_in_a_layer() -> None:
    loose = [p.name for p in LIBRARY.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    assert sorted(p.name for p in LIBRARY.iterdir() if (p / "__init__.py").exists()) == sorted(LAYERS)


def test_sub_packages_import_only_downward_and_never_the_root() -> None:
    wrong = []
    for path in LIBRARY.rglob("*.py"):
        if path.parent == LIBRARY:
            continue  # the root re-exports the public names
        own = path.relative_to(LIBRARY).parts[0]
        for level, module in _imports(path):
            target = _target_package(path, level, module)
            if target is None:
                continue
            if target == "" or LAYERS.index(target) > LAYERS.index(own):
                wrong.append(f"{path.relative_to(ROOT)} imports {'.' * level}{module}")
    assert wrong == []


def test_import_resumable_loads_no_http_or_functions_code() -> None:
    code = (
        "import sys, resumable\n"
        "from resumable import BackgroundRuns, RunService, prepare_run\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'starlette', 'azure.functions'})\n"
        "bad += [m for m in sys.modules if m.startswith('azure.functions') or m.startswith('functions_adapter')]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_adapters_shared_modules_import_no_protocol_folder() -> None:
    """A protocol is one folder: what two protocols need lives below them, never in one of them."""
    assert adapter_graph.figures(ROOT).up == []


def test_no_protocol_folder_imports_another() -> None:
    assert adapter_graph.figures(ROOT).across == []


def test_the_adapters_imports_run_in_no_cycle() -> None:
    assert adapter_graph.figures(ROOT).cycles == []


def test_the_adapter_graph_sees_each_kind_of_wrong_arrow(tmp_path: Path) -> None:
    """The three checks above can fail: a planted arrow up, across and a cycle are each found."""
    files = {
        "__init__.py": "",
        "shared.py": "from functions_adapter.api.routes import handle\n",
        "api/__init__.py": "",
        "api/routes.py": "from functions_adapter.mcp import tools\n",
        "mcp/__init__.py": "",
        "mcp/tools.py": "from . import background\n",
        "mcp/background.py": "def later():\n    from functions_adapter.mcp.tools import call\n",
    }
    for name, text in files.items():
        path = tmp_path / "functions_adapter" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    found = adapter_graph.figures(tmp_path)
    assert found.up == [("functions_adapter.shared", "functions_adapter.api.routes")]
    assert found.across == [("functions_adapter.api.routes", "functions_adapter.mcp.tools")]
    assert found.cycles == [["functions_adapter.mcp.background", "functions_adapter.mcp.tools"]]


def test_no_adapter_module_builds_a_request_by_hand() -> None:
    """Below a protocol's edge a turn is plain values (``turn_call.TurnCall``): no module makes
    up a Starlette request, or the ASGI scope of one, to reach another protocol's handler."""
    made_up = []
    for path in sorted((ROOT / "functions_adapter").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "id", None) or getattr(called, "attr", None)
            scope = isinstance(node, ast.Dict) and any(
                isinstance(key, ast.Constant) and key.value == "type" for key in node.keys
            )
            scope = scope and any(isinstance(v, ast.Constant) and v.value == "http" for v in node.values)
            if name in {"Request", "StarletteRequest", "HTTPConnection"} or scope:
                made_up.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert made_up == []


# Where a turn may be started other than the one turn call, and why.
TURN_STARTERS_ELSEWHERE = {
    "functions_adapter/api/checkpoint_state.py": "a state edit's fork: no key, no thread, no background accept",
    "functions_adapter/queue_triggers.py": "executes a run call_turn already accepted",
}


def test_every_protocol_starts_its_turns_through_the_one_turn_call() -> None:
    """Claiming a key, accepting a background run or owning a run happens in ``turn_call.py``
    only, so each protocol (the Responses API included) inherits the same commit and cost."""
    starters = {"begin", "submit", "RunOwner"}
    found = []
    for path in sorted((ROOT / "functions_adapter").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where == "functions_adapter/turn_call.py" or where in TURN_STARTERS_ELSEWHERE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "id", None) or getattr(called, "attr", None)
            owner = getattr(getattr(called, "value", None), "id", None)
            if name == "RunOwner" or (name in starters and owner in {"keyed_call", "background_submit"}):
                found.append(f"{where}:{node.lineno} {name}")
    assert found == []
