#!/usr/bin/env bash
# Set up, then run the benchmark (Azurite is started by the script). Pass --quick for a
# smoke run; the full run writes bench/results.md. With --plot FILE it also installs the
# optional matplotlib (requirements-bench.txt) and writes a PNG.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --no-iac
case " $* " in
  *" --plot "*) .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-bench.txt ;;
esac
.venv/bin/python bench/run.py "$@"
