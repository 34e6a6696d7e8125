#!/usr/bin/env bash
# Install everything from the project's own files: a venv with the pinned Python
# dependencies, checkov in a venv of its own, and the pinned Azurite from
# package-lock.json. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
# The infra checks' own venv; the demo and the benchmark skip it (--no-iac).
if [ "${1:-}" != "--no-iac" ] && [ ! -x .venv-iac/bin/checkov ]; then
  "$PYTHON" -m venv .venv-iac
  .venv-iac/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-iac.txt
fi
if [ ! -x node_modules/.bin/azurite-blob ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
