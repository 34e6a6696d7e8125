#!/usr/bin/env bash
# The library and adapter layers with every core busy: one CPU burner per core (stress-ng
# when installed, else a Python busy loop) runs beside pytest for as long as it does, so a
# timeout or retry tuned for an idle machine shows up here, not on a newcomer's first run.
#
#   scripts/test-under-load.sh                 # library + adapter, one burner per core
#   LOAD_PER_CORE=3 scripts/test-under-load.sh # three per core (load about 3x the cores)
#   scripts/test-under-load.sh -k blob_store   # extra arguments go to pytest
#
# It sets nothing up: run scripts/setup.sh (or scripts/test.sh) first.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
cores=$(nproc)
burners=$((cores * ${LOAD_PER_CORE:-1}))
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu "$burners" --quiet &
else
  for _ in $(seq "$burners"); do "$venv/bin/python" -c 'while True: pass' & done
fi
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
echo "Load: $burners CPU burners on $cores cores, beside pytest." >&2
"$venv/bin/python" -m pytest -n "${TEST_WORKERS:-auto}" --dist worksteal -m "(library or adapter) and not slow" "$@"
