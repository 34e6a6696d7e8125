#!/usr/bin/env bash
# Set up, then run the benchmark (Azurite is started by the script). Pass --quick for a
# smoke run; the full run writes bench/results.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python bench/run.py "$@"
