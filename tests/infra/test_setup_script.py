"""scripts/setup.sh checks its prerequisites before installing anything, and keeps no wrong venv.

Each run happens in a scratch copy of the files setup.sh reads, never in the working tree, so
a check that fails to stop it cannot touch the project's own .venv or node_modules. The
prerequisite tests install nothing; the venv tests use empty requirement files, so pip has
nothing to fetch and the only cost is creating small venvs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP_INPUTS = ["scripts/setup.sh", "pyproject.toml", "package.json", "package-lock.json"]
THIS_PYTHON = Path(sys.executable)  # the test venv's Python: a supported interpreter
HIDDEN = {"node", "npm", "npx"}


def _pyenv_python(version: str) -> Path:
    """An interpreter pyenv installed, or skip: used only as an unsupported version."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = sorted((root / "versions").glob(f"{version}*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} under {root}/versions")
    return found[-1]


def _scratch(tmp_path: Path, *, empty_requirements: bool = False) -> Path:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    for name in SETUP_INPUTS:
        shutil.copy(ROOT / name, project / name)
    for source in [*ROOT.glob("requirements*.txt"), *ROOT.glob("constraints*.txt")]:
        text = "" if empty_requirements else source.read_text()
        (project / source.name).write_text(text)
    return project


def _path_without(tmp_path: Path, hidden: set[str], extra: dict[str, str] | None = None) -> str:
    """A PATH holding every command the current PATH has, except ``hidden``, plus ``extra`` scripts."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (extra or {}).items():
        script = bin_dir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = bin_dir / entry.name
            if entry.name in hidden or target.exists() or not os.access(entry.path, os.X_OK):
                continue
            target.symlink_to(entry.path)
    return str(bin_dir)


def _setup(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # The scratch project's own .venv from its own lock: not the venv or the framework version
    # a CI pass (scripts/try-framework.sh) chose for itself.
    env = {k: v for k, v in env.items() if k not in ("VENV", "AGENT_FRAMEWORK_CORE_VERSION")}
    return subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )


def _refused(project: Path, done: subprocess.CompletedProcess[str]) -> str:
    """The first output line of a run that must have stopped before installing anything."""
    assert done.returncode == 1, done.stdout
    assert not (project / ".venv").exists() and not (project / "node_modules").exists()
    return done.stdout.splitlines()[0]


def test_missing_node_is_named_on_the_first_line(tmp_path: Path) -> None:
    project = _scratch(tmp_path)
    env = {**os.environ, "PATH": _path_without(tmp_path, HIDDEN), "PYTHON": str(THIS_PYTHON)}
    first = _refused(project, _setup(project, env))
    assert first.startswith("Node.js is not installed: install Node.js 22 LTS or newer"), first


def test_node_older_than_azurite_runs_on_is_refused(tmp_path: Path) -> None:
    project = _scratch(tmp_path)
    old_node = {"node": 'echo "v18.20.4"\n'}
    env = {**os.environ, "PATH": _path_without(tmp_path, HIDDEN, old_node), "PYTHON": str(THIS_PYTHON)}
    first = _refused(project, _setup(project, env))
    assert first.startswith("Node.js v18.20.4 is too old for Azurite 3.37.0"), first
    assert "install Node.js 22" in first


def test_missing_npm_is_named_when_azurite_must_be_installed(tmp_path: Path) -> None:
    project = _scratch(tmp_path)
    env = {**os.environ, "PATH": _path_without(tmp_path, {"npm", "npx"}), "PYTHON": str(THIS_PYTHON)}
    first = _refused(project, _setup(project, env))
    assert first.startswith("npm is not installed"), first


def test_unsupported_python_is_named_on_the_first_line(tmp_path: Path) -> None:
    project = _scratch(tmp_path)
    python310 = _pyenv_python("3.10")
    env = {**os.environ, "PATH": _path_without(tmp_path, HIDDEN), "PYTHON": str(python310)}
    done = _setup(project, env)
    first = _refused(project, done)
    assert first.startswith(f"PYTHON={python310} is Python 3.10"), first
    assert 'needs Python 3.11–3.13 (pyproject.toml: requires-python ">=3.11,<3.14")' in first
    # Node is missing too: every problem is reported, each on its own line, Python first.
    assert done.stdout.splitlines()[1].startswith("Node.js is not installed")


def test_the_newest_supported_python_is_chosen_from_pyenv_when_path_has_none(tmp_path: Path) -> None:
    """pyenv keeps its builds off PATH until one is selected; setup looks there too, newest first."""
    python313 = _pyenv_python("3.13")
    hidden = {f"python3.{minor}" for minor in range(10, 15)}
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env["PATH"] = _path_without(tmp_path, hidden)
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "--which-python"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(rf"{re.escape(str(python313))} \(3\.13\.\d+\)\n", done.stdout), done.stdout
    explicit = subprocess.run(
        ["bash", "scripts/setup.sh", "--which-python"],
        cwd=ROOT,
        env={**env, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
    )
    assert explicit.returncode == 0 and explicit.stdout.startswith(f"{sys.executable} ("), explicit.stdout


def test_python_that_does_not_run_is_named(tmp_path: Path) -> None:
    project = _scratch(tmp_path)
    env = {**os.environ, "PYTHON": str(tmp_path / "no-such-python")}
    first = _refused(project, _setup(project, env))
    assert first.startswith(f"PYTHON={tmp_path / 'no-such-python'} does not run"), first


@pytest.fixture
def installed_azurite(tmp_path: Path) -> Path:
    """A scratch project whose node_modules is the working tree's (read-only use: no npm runs)."""
    project = _scratch(tmp_path, empty_requirements=True)
    (project / "node_modules").symlink_to(ROOT / "node_modules")
    return project


def test_venvs_are_kept_when_current_and_rebuilt_when_pins_or_interpreter_change(installed_azurite: Path) -> None:
    """One scratch project through the life of its venvs (each venv costs seconds, so one test)."""
    project = installed_azurite
    env = {**os.environ, "PYTHON": str(THIS_PYTHON)}
    version = ".".join(map(str, sys.version_info[:3]))

    first = _setup(project, env)
    assert first.returncode == 0, first.stdout
    lines = first.stdout.splitlines()
    assert lines[0].startswith("Python: ") and f"({version}), from PYTHON" in lines[0]
    assert f"Creating .venv with Python {version}." in lines
    assert f"Creating .venv-iac with Python {version}." in lines
    assert "Azurite 3.37.0 and httpyac 6.16.7 are installed." in lines

    again = _setup(project, env).stdout.splitlines()
    assert ".venv is up to date." in again and ".venv-iac is up to date." in again

    # Two changes at once (the two venvs are built side by side): checkov's pins move, and
    # .venv is replaced by one another interpreter left (say a failed attempt with 3.12:
    # whichever supported version this test does not run on).
    with (project / "constraints-iac.txt").open("a") as handle:
        handle.write("# a changed pin\n")
    shutil.rmtree(project / ".venv")
    other_version = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    other = _pyenv_python(other_version)
    subprocess.run([str(other), "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=120)
    changed = _setup(project, env)
    assert changed.returncode == 0, changed.stdout
    lines = changed.stdout.splitlines()
    assert "Rebuilding .venv-iac: requirements-iac.txt or constraints-iac.txt changed" in changed.stdout
    assert any(line.startswith(f"Rebuilding .venv: it was built with Python {other_version}") for line in lines)
    built = subprocess.run(
        [str(project / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert built.stdout.strip() == str(sys.version_info[:2])

    # And once rebuilt, each is left alone.
    settled = _setup(project, env).stdout.splitlines()
    assert ".venv is up to date." in settled and ".venv-iac is up to date." in settled


def test_iac_constraints_pin_what_requirements_iac_names() -> None:
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / "constraints-iac.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for line in (ROOT / "requirements-iac.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==", 1)
            assert pins[name] == version
    # The two pins that make checkov need its own venv.
    assert pins["pycep-parser"] == "0.5.1"
    assert "packaging" in pins


def test_a_venv_without_pip_and_without_a_stamp_is_rebuilt(installed_azurite: Path) -> None:
    """A venv made by other tools (``uv venv``, ``python -m venv --without-pip``) has no pip to
    install into; setup must rebuild it rather than fail with "No module named pip"."""
    project = installed_azurite
    subprocess.run([str(THIS_PYTHON), "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=120)
    done = _setup(project, {**os.environ, "PYTHON": str(THIS_PYTHON)}, "--no-iac")
    assert done.returncode == 0, done.stdout
    assert "Rebuilding .venv: it has no pip (made by another tool?)." in done.stdout.splitlines()
    pip = subprocess.run([str(project / ".venv" / "bin" / "python"), "-m", "pip", "--version"], check=False)
    assert pip.returncode == 0


def test_a_missing_httpyac_installs_the_node_tools(tmp_path: Path) -> None:
    """Azurite at its pinned version is not enough: without the pinned httpyac (examples/requests.http
    runs under it in CI), setup runs ``npm ci`` too, so a fresh clone gets both."""
    project = _scratch(tmp_path, empty_requirements=True)
    modules = project / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    (modules / "azurite").symlink_to(ROOT / "node_modules" / "azurite")
    for name in ("azurite-blob", "azurite-queue"):
        (modules / ".bin" / name).symlink_to((ROOT / "node_modules" / ".bin" / name).resolve())
    log = tmp_path / "npm.log"
    fake_npm = {"npm": f'echo "$@" >> {log}\n'}
    env = {**os.environ, "PATH": _path_without(tmp_path, {"npm"}, fake_npm), "PYTHON": str(THIS_PYTHON)}
    done = _setup(project, env, "--no-iac")
    assert done.returncode == 0, done.stdout
    assert (
        "Installing Azurite 3.37.0, httpyac 6.16.7 and the other test tools of package-lock.json (npm ci)."
        in done.stdout.splitlines()
    )
    assert log.read_text().split()[0] == "ci"


def test_chromium_is_installed_with_apt_get_only_when_missing_and_only_for_the_tests(installed_azurite: Path) -> None:
    """The full setup installs Debian's Chromium for the browser tests (root with apt-get), or
    names what to install; the demo path (--no-iac) never does; once there it costs nothing."""
    project = installed_azurite
    chromium = project.parent / "usr-bin-chromium"  # where this scratch setup looks for Debian's
    script = project / "scripts" / "setup.sh"
    script.write_text(script.read_text().replace("debian_chromium=/usr/bin/chromium", f"debian_chromium={chromium}"))
    log = project.parent / "apt.log"
    installs = f'if [ "$1" = install ]; then printf "#!/bin/sh\\n" > {chromium}; chmod +x {chromium}; fi\n'
    fake_apt = {"apt-get": f'echo "$@" >> {log}\n{installs}'}
    env = {k: v for k, v in os.environ.items() if k != "CHROMIUM"}
    for name in ("root", "user"):
        (project.parent / name).mkdir()
    env |= {"PATH": _path_without(project.parent / "root", {"apt-get"}, fake_apt), "PYTHON": str(THIS_PYTHON)}
    user_path = _path_without(project.parent / "user", {"apt-get", "id"}, {**fake_apt, "id": "echo 1000\n"})

    demo = _setup(project, env, "--no-iac")
    assert demo.returncode == 0, demo.stdout
    assert not log.exists() and "Chromium" not in demo.stdout

    as_user = _setup(project, {**env, "PATH": user_path})
    assert as_user.returncode == 0, as_user.stdout
    assert f"Chromium is not at {chromium}, and the browser tests (tests/browser/) skip without it" in as_user.stdout
    assert not log.exists()

    as_root = _setup(project, env)
    assert as_root.returncode == 0, as_root.stdout
    assert log.read_text().splitlines() == ["update -q", "install -y -q --no-install-recommends chromium"]
    assert f"Chromium: {chromium}, installed." in as_root.stdout.splitlines()

    again = _setup(project, env)
    assert f"Chromium: {chromium}" in again.stdout.splitlines()
    assert len(log.read_text().splitlines()) == 2  # no second apt-get
