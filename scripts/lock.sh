#!/usr/bin/env bash
# Compile the declared dependencies (*.in) into the locks everything installs from: every
# transitive version pinned, with hashes, in one file per feature set that holds for each
# Python pyproject.toml supports (environment markers pick azure-functions 1.x or 2.x).
#
#   scripts/lock.sh              # after editing a .in file: keep every other pin as it is
#   scripts/lock.sh --upgrade    # move every transitive pin to its newest release (then test!)
#
#   requirements-dev.in          -> requirements-dev.txt          (.venv: tests, lint, demo)
#   requirements-chat-agents.in  -> requirements-chat-agents.txt  (deploy for WORKFLOW=chat-agents)
#   requirements.in              -> requirements.txt              (deployed; the remote build installs it)
#
# The dev lock is resolved first and the others are constrained to it, so every version
# deployed is the version the tests ran with. tests/infra/test_locks.py fails when a lock and
# the .in files drift apart. Needs uv (pinned in requirements-dev.in; setup puts it in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

upgrade=()
for arg in "$@"; do
  case "$arg" in
    --upgrade) upgrade=(--upgrade) ;;
    *) echo "usage: scripts/lock.sh [--upgrade]" >&2; exit 2 ;;
  esac
done

uv=${UV:-.venv/bin/uv}
if ! command -v "$uv" >/dev/null 2>&1; then
  echo "uv is not at $uv: run scripts/setup.sh first, or set UV=/path/to/uv." >&2
  exit 1
fi
lowest=$(sed -n 's/^requires-python *= *">=\(3\.[0-9]*\),.*$/\1/p' pyproject.toml)
if [ -z "$lowest" ]; then
  echo "scripts/lock.sh could not read the lowest Python from pyproject.toml's requires-python." >&2
  exit 1
fi

compile() {  # compile OUTPUT INPUT [uv options]...
  "$uv" pip compile "$2" --output-file "$1" "${@:3}" \
    --universal --python-version "$lowest" --generate-hashes \
    --index-url https://pypi.org/simple --no-emit-index-url \
    --custom-compile-command "scripts/lock.sh" --quiet
}
compile requirements-dev.txt requirements-dev.in ${upgrade[@]+"${upgrade[@]}"}  # (bash 3.2-safe when empty)
compile requirements-chat-agents.txt requirements-chat-agents.in --constraint requirements-dev.txt
compile requirements.txt requirements.in --constraint requirements-dev.txt
echo "Locked requirements.txt, requirements-chat-agents.txt and requirements-dev.txt for Python >= $lowest."
