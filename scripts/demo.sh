#!/usr/bin/env bash
# Set up, then run the demo: a three-turn conversation resumed from checkpoints in
# Azurite, one workflow run per turn. With Azure Functions Core Tools installed,
# `scripts/demo.sh --func` then serves the same app with `func start`, as README
# "Run it with func start" does (the same Azurite command line; a test compares them).
set -euo pipefail
cd "$(dirname "$0")/.."

port_taken() { (exec 3<>/dev/tcp/127.0.0.1/10000) 2>/dev/null; }
if [ "${1:-}" = "--func" ]; then
  # Checked before anything runs, so a missing tool or a busy port costs no time.
  if ! command -v func >/dev/null 2>&1; then
    echo "Azure Functions Core Tools (func) is not installed; see README 'Run it with func start'." >&2
    exit 1
  fi
  if port_taken; then
    echo "Port 10000 is taken (another Azurite?): stop whatever listens there (lsof -i :10000), then run this again." >&2
    exit 1
  fi
fi

bash scripts/setup.sh --no-iac
.venv/bin/python examples/three_turns.py

if [ "${1:-}" = "--func" ]; then
  [ -f local.settings.json ] || cp local.settings.sample.json local.settings.json
  node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence \
      --disableTelemetry --skipApiVersionCheck &
  azurite=$!
  trap 'kill "$azurite" 2>/dev/null' EXIT
  for _ in $(seq 50); do
    port_taken && break
    kill -0 "$azurite" 2>/dev/null || { echo "Azurite did not start (its output is above)." >&2; exit 1; }
    sleep 0.2
  done
  . .venv/bin/activate
  func start
fi
