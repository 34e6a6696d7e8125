"""azd can set every Bicep parameter: `azd env set NAME value` then `azd up` is the whole flow.

`infra/main.parameters.json` maps each parameter of `infra/main.bicep` to an azd environment
variable (`${NAME=default}`, azd's syntax; an unset variable takes the default). These tests
hold the mapping, the Bicep parameters and the table in docs/deploy.md together.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pycep import BicepParser

ROOT = Path(__file__).resolve().parents[2]
# Variables azd sets itself, so they need no default in the parameters file.
AZD_OWN = {"AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_PRINCIPAL_ID"}
REFERENCE = re.compile(r"\$\{(?P<name>[A-Z][A-Z0-9_]*)(?:=(?P<default>[^}]*))?\}")


def bicep_parameters() -> dict[str, dict[str, Any]]:
    return BicepParser().parse(file_path=ROOT / "infra" / "main.bicep")["parameters"]


def mapping() -> dict[str, Any]:
    parameters = json.loads((ROOT / "infra" / "main.parameters.json").read_text())["parameters"]
    return {name: entry["value"] for name, entry in parameters.items()}


def reference(value: Any) -> re.Match[str]:
    match = REFERENCE.fullmatch(value) if isinstance(value, str) else None
    assert match, f"{value!r} is not an azd variable reference (${{NAME}} or ${{NAME=default}})"
    return match


def test_every_parameter_is_mapped_and_every_mapping_is_a_parameter() -> None:
    assert set(mapping()) == set(bicep_parameters())


@pytest.mark.parametrize("parameter", sorted(bicep_parameters()))
def test_each_parameter_is_an_azd_variable_whose_default_is_bicep_s(parameter: str) -> None:
    match = reference(mapping()[parameter])
    declared = bicep_parameters()[parameter]
    if match["default"] is None:
        # Without a default azd would pass an empty string: only its own variables may omit it.
        assert match["name"] in AZD_OWN
        return
    default = declared["default"]
    expected = str(default).lower() if isinstance(default, bool) else str(default)
    assert match["default"] == expected, f"{parameter}: azd default {match['default']!r}, Bicep {default!r}"


def test_each_azd_variable_names_one_parameter() -> None:
    names = [reference(value)["name"] for value in mapping().values()]
    assert len(names) == len(set(names))


def test_the_reference_syntax_is_checked() -> None:
    assert reference("${PYTHON_VERSION=3.13}")["default"] == "3.13"
    assert reference("${AZURE_ENV_NAME}")["default"] is None
    for wrong in (False, "3.13", "$PYTHON_VERSION", "${python_version=3.13}"):
        with pytest.raises(AssertionError):
            reference(wrong)


def test_the_deploy_page_lists_every_parameter_with_its_azd_variable() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", page, flags=re.MULTILINE)
    documented = dict(rows)
    assert len(rows) == len(documented)
    assert documented == {name: reference(value)["name"] for name, value in mapping().items()}


def test_the_documented_azd_flow_is_env_set_and_up() -> None:
    """Every azd command in the README's and docs' code blocks is `azd env set` of a mapped
    variable, or `azd up`."""
    variables = {reference(value)["name"] for value in mapping().values()} | {"AZURE_RESOURCE_GROUP"}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = []
    for page in pages:
        for block in re.findall(r"^ *```[a-z]*\n(.*?)^ *```", page.read_text(), flags=re.MULTILINE | re.DOTALL):
            commands += [line.split("#")[0].split() for line in block.splitlines() if line.strip().startswith("azd ")]
    assert len(commands) >= 3
    for command in commands:
        assert command[:3] == ["azd", "env", "set"] or command == ["azd", "up"], command
        if command[:3] == ["azd", "env", "set"]:
            assert command[3] in variables, command
