#!/usr/bin/env bash
# Serve the function app over real HTTP, without Azure Functions Core Tools: every function
# route on http://127.0.0.1:7071/api/... (the port and paths `func start` uses; function keys
# are not checked, as with func start), the queue triggers and the timer, against an in-memory
# Azurite started for it. It prints the base URL and a curl line; Ctrl+C stops all of it.
#
#   scripts/serve.sh                 # set up if needed, then serve on 127.0.0.1:7071
#   scripts/serve.sh --port 8080     # another port
#   scripts/serve.sh --no-azurite    # use local.settings.json's storage settings as they are
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --no-iac
# exec: the server is this process, so Ctrl+C and SIGTERM reach it directly.
exec "${VENV:-.venv}/bin/python" -m devtools.serve "$@"
