#!/usr/bin/env bash
# Run the checks on another agent-framework-core: the lock with only that core moved, in a venv
# of its own (.venv-af-<version>), so the project's .venv is never touched.
#
#   scripts/try-framework.sh 1.23.0                   # scripts/test.sh on 1.23.0 (setup, ruff, docs, pytest)
#   scripts/try-framework.sh oldest                   # the oldest supported version (CI's 3.11 pass)
#   scripts/try-framework.sh newest                   # the lock's own version, in the separate venv
#   scripts/try-framework.sh 1.23.0 tests/library -k contract   # extra arguments go to pytest
#   VENV=.venv-3.11 PYTHON=python3.11 scripts/try-framework.sh oldest -m "not e2e"
#
# The supported range (oldest and newest) lives in resumable/checkpoints/af_internals.py. The
# version is exported as AGENT_FRAMEWORK_CORE_VERSION with VENV: scripts/setup.sh installs it
# over the lock and records it in the venv's stamp, so the setup that scripts/test.sh and
# scripts/serve.sh (the end-to-end tests start it) run again finds the venv up to date instead
# of reinstalling the lock underneath the tests. A version outside the supported range runs
# too: the contract tests then say what differs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -lt 1 ] || [[ "$1" == -* ]]; then
  echo "usage: scripts/try-framework.sh VERSION|oldest|newest [pytest arguments...]" >&2
  exit 2
fi
supported() {  # supported OLDEST|NEWEST: that end of the range, as af_internals.py declares it
  sed -n "s/^$1_SUPPORTED = \"\\(.*\\)\"\$/\\1/p" resumable/checkpoints/af_internals.py
}
case "$1" in
  oldest) version=$(supported OLDEST) ;;
  newest) version=$(supported NEWEST) ;;
  *) version=$1 ;;
esac
shift
if ! [[ "$version" =~ ^[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?$ ]]; then
  echo "scripts/try-framework.sh: '$version' is not a version of agent-framework-core." >&2
  exit 2
fi

export AGENT_FRAMEWORK_CORE_VERSION=$version
export VENV=${VENV:-.venv-af-$version}
echo "agent-framework-core $version in $VENV"
exec bash scripts/test.sh "$@"
