#!/usr/bin/env bash
# The long Schemathesis run: tests/e2e/test_openapi_fuzz.py with many examples per operation
# (500 by default; CI runs 8) against scripts/serve.sh. Failures print a curl line to reproduce.
#
#   bench/openapi_fuzz.sh          # 500 examples per operation
#   bench/openapi_fuzz.sh 2000     # another number
set -euo pipefail
cd "$(dirname "$0")/.."
OPENAPI_FUZZ_EXAMPLES="${1:-500}" exec "${VENV:-.venv}/bin/python" -m pytest tests/e2e/test_openapi_fuzz.py \
  -q -p no:cacheprovider -o addopts="" --tb=short
