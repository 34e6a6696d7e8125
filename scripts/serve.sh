#!/usr/bin/env bash
# Serve the function app over real HTTP, without Azure Functions Core Tools: every function
# route on http://127.0.0.1:7071/api/... (the port and paths `func start` uses; function keys
# are not checked, as with func start), the queue triggers and the timer, against an Azurite
# started for it that keeps its data in .azurite/ (git-ignored), so threads survive a restart.
# It prints the base URL and a curl line; Ctrl+C stops all of it. docs/local-development.md.
#
#   scripts/serve.sh                 # set up if needed, then serve on 127.0.0.1:7071
#   scripts/serve.sh --reload        # restart the app when one of its Python files changes
#   scripts/serve.sh --fresh         # empty .azurite/ first
#   scripts/serve.sh --in-memory     # keep nothing (the tests run it this way)
#   scripts/serve.sh --data DIR      # keep Azurite's data in DIR instead
#   scripts/serve.sh --port 8080     # another port
#   scripts/serve.sh --no-azurite    # use local.settings.json's storage settings as they are
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --no-iac
# exec: the server is this process, so Ctrl+C and SIGTERM reach it directly.
exec "${VENV:-.venv}/bin/python" -m devtools.serve "$@"
