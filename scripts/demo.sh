#!/usr/bin/env bash
# Set up, then run the demo: a three-turn conversation resumed from checkpoints in
# Azurite, one workflow run per turn. With Azure Functions Core Tools installed,
# `scripts/demo.sh --func` then serves the same app with `func start`, as README
# "Run it with func start" does (the same Azurite command line; a test compares them).
set -euo pipefail
cd "$(dirname "$0")/.."

port_taken() { (exec 3<>/dev/tcp/127.0.0.1/"${1:-10000}") 2>/dev/null; }
if [ "${1:-}" = "--func" ]; then
  # Checked before anything runs, so a missing tool or a busy port costs no time.
  if ! command -v func >/dev/null 2>&1; then
    echo "Azure Functions Core Tools (func) is not installed; see README 'Run it with func start'." >&2
    exit 1
  fi
  for port in 10000 10001; do
    if port_taken "$port"; then
      echo "Port $port is taken (another Azurite?): stop whatever listens there (lsof -i :$port), then run this again." >&2
      exit 1
    fi
  done
fi

bash scripts/setup.sh --no-iac
.venv/bin/python examples/three_turns.py

if [ "${1:-}" = "--func" ]; then
  [ -f local.settings.json ] || cp local.settings.sample.json local.settings.json
  node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence \
      --disableTelemetry --skipApiVersionCheck &
  azurite=$!
  node_modules/.bin/azurite-queue --queueHost 127.0.0.1 --queuePort 10001 --inMemoryPersistence \
      --disableTelemetry --skipApiVersionCheck &
  azurite_queue=$!
  trap 'kill "$azurite" "$azurite_queue" 2>/dev/null' EXIT
  for _ in $(seq 50); do
    port_taken 10000 && port_taken 10001 && break
    for pid in "$azurite" "$azurite_queue"; do
      kill -0 "$pid" 2>/dev/null || { echo "Azurite did not start (its output is above)." >&2; exit 1; }
    done
    sleep 0.2
  done
  . .venv/bin/activate
  func start
fi
