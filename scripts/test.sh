#!/usr/bin/env bash
# Set up, then run every check CI runs: ruff (lint + format), the test suite against
# a real Azurite that the tests start and stop themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
venv=${VENV:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/python" -m pytest "$@"
