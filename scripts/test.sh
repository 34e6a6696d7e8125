#!/usr/bin/env bash
# Set up, then run every check CI runs: ruff (lint + format), the docs build (mkdocs --strict),
# the test suite against a real Azurite that the tests start and stop themselves.
#
#   scripts/test.sh              # everything but the slow tests, on every core
#   scripts/test.sh -m slow      # the slow tests (CI runs them in a step of their own)
#   scripts/test.sh -k threads   # extra arguments go to pytest, after (so over) the defaults
#   TEST_WORKERS=0 scripts/test.sh   # in one process (pytest-xdist's -n 0)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
venv=${VENV:-.venv}
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
# The docs site, strict: a broken link, a missing page or an unknown anchor fails here
# (not --quiet: it hides the warnings, and then strict mode lets them pass).
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --site-dir "$site"
# pytest-xdist: one worker per core (each with an Azurite of its own); an idle worker takes
# tests from a busy one (worksteal). Not loadfile/loadscope/loadgroup: with them xdist 3.8
# reports a Schemathesis operation that fails (a subtest) as passed. "not slow": the few
# tests of tens of seconds (docs/tests.md); a -m of the caller's replaces it.
"$venv/bin/python" -m pytest -n "${TEST_WORKERS:-auto}" --dist worksteal -m "not slow" "$@"
