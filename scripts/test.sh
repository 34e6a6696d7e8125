#!/usr/bin/env bash
# Set up, then run every check CI runs: ruff (lint + format), the docs build (mkdocs --strict),
# the test suite against a real Azurite that the tests start and stop themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
venv=${VENV:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
# The docs site, strict: a broken link, a missing page or an unknown anchor fails here
# (not --quiet: it hides the warnings, and then strict mode lets them pass).
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --site-dir "$site"
"$venv/bin/python" -m pytest "$@"
