#!/usr/bin/env bash
# Set up, then run the demo: a three-turn conversation resumed from checkpoints in
# Azurite, one workflow run per turn. With Azure Functions Core Tools installed,
# `scripts/demo.sh --func` then serves the same app with `func start`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --no-iac
.venv/bin/python examples/three_turns.py

if [ "${1:-}" = "--func" ]; then
  if ! command -v func >/dev/null 2>&1; then
    echo "Azure Functions Core Tools (func) is not installed; see README 'Run it with func start'." >&2
    exit 1
  fi
  [ -f local.settings.json ] || cp local.settings.sample.json local.settings.json
  node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence --disableTelemetry &
  trap 'kill %1' EXIT
  . .venv/bin/activate
  func start
fi
