#!/usr/bin/env bash
# Install everything from the project's own files: .venv from the hashed lock
# requirements-dev.txt, checkov in a venv of its own (.venv-iac), and the pinned Azurite from
# package-lock.json (with httpyac, which runs examples/requests.http in the tests). Safe to run again.
#
#   scripts/setup.sh            # everything scripts/test.sh needs
#   scripts/setup.sh --no-iac   # without checkov and Chromium: enough for the demo, func start, the benchmark
#   PYTHON=/path/to/python3.11 scripts/setup.sh   # use this interpreter instead of searching
#   VENV=.venv-3.11 scripts/setup.sh              # build the app's venv there instead of .venv
#   AGENT_FRAMEWORK_CORE_VERSION=1.23.0 VENV=.venv-af scripts/setup.sh   # that core over the lock
#                                                    (scripts/try-framework.sh sets both)
#   scripts/setup.sh --which-python               # print the interpreter it would use; install nothing
#
# The browser tests (tests/browser/) drive Debian's Chromium with Playwright (from the lock;
# never `playwright install`, never a browser download). The full setup makes sure it is
# there: /usr/bin/chromium (or $CHROMIUM) already present costs nothing; missing, it is
# installed as root with apt-get (`apt-get install --no-install-recommends chromium`, side by
# side with the venvs), and otherwise one line says what to install and those tests skip.
# The demo path (--no-iac: what scripts/serve.sh runs, func start, the benchmark) opens no
# browser and never installs it.
#
# It checks the prerequisites first (a supported Python, Node.js, npm) and installs
# nothing if one is missing: each problem is one line that says what to install.
# A venv built with another interpreter is rebuilt; one whose requirements changed is
# rebuilt; one that is up to date is left alone (a stamp file records what built it).
set -euo pipefail
cd "$(dirname "$0")/.."

with_iac=1
which_python=0
for arg in "$@"; do
  case "$arg" in
    --no-iac) with_iac=0 ;;
    --which-python) which_python=1 ;;  # print the interpreter setup would use, install nothing
    *) echo "usage: scripts/setup.sh [--no-iac] [--which-python]" >&2; exit 2 ;;
  esac
done

problems=()
notes=()

# --- Python: the versions pyproject.toml's requires-python allows, newest first ------------
# The range lives in pyproject.toml alone ("requires-python = ">=3.A,<3.B""); widening it
# there is all it takes for setup to accept, and prefer, the newer versions.
requires=$(sed -n 's/^requires-python *= *"\(.*\)" *$/\1/p' pyproject.toml)
if [[ "$requires" =~ ^\>=3\.([0-9]+),\ *\<3\.([0-9]+)$ ]]; then
  lowest=${BASH_REMATCH[1]} beyond=${BASH_REMATCH[2]}
else
  echo "scripts/setup.sh understands requires-python of the form \">=3.A,<3.B\"; pyproject.toml has \"$requires\"." >&2
  exit 1
fi
supported=()
for ((minor = beyond - 1; minor >= lowest; minor--)); do supported+=("3.$minor"); done
if [ "${#supported[@]}" -eq 1 ]; then wanted="Python ${supported[0]}"; else wanted="Python ${supported[${#supported[@]} - 1]}–${supported[0]}"; fi
example="python${supported[0]}"

# Prints "version executable base_prefix" for an interpreter, or nothing if it does not run.
describe_python() {
  "$1" -c 'import os, sys; print("%d.%d.%d" % sys.version_info[:3], sys.executable, os.path.realpath(sys.base_prefix))' 2>/dev/null || true
}
is_supported() {
  local version
  for version in "${supported[@]}"; do [[ "$1" == "$version".* ]] && return 0; done
  return 1
}

python_info=""
if [ -n "${PYTHON:-}" ]; then
  python_info=$(describe_python "$PYTHON")
  if [ -z "$python_info" ]; then
    problems+=("PYTHON=$PYTHON does not run: set PYTHON to a $wanted interpreter (e.g. PYTHON=/usr/bin/$example), or unset it to search PATH.")
  elif ! is_supported "${python_info%% *}"; then
    problems+=("PYTHON=$PYTHON is Python ${python_info%% *}, but this project needs $wanted (pyproject.toml: requires-python \"$requires\"): install $wanted and set PYTHON to it (e.g. PYTHON=/usr/bin/$example), or unset PYTHON.")
    python_info=""
  fi
else
  # Newest first: python3.X on PATH, then pyenv's builds of 3.X (pyenv keeps versions out
  # of PATH until one is selected), then python3.
  candidates=()
  pyenv_root=$(command -v pyenv >/dev/null 2>&1 && pyenv root 2>/dev/null || true)
  for version in "${supported[@]}"; do
    candidates+=("python$version")
    if [ -n "$pyenv_root" ]; then
      for built in "$pyenv_root"/versions/"$version".*/bin/python"$version"; do
        [ -x "$built" ] && candidates+=("$built")
      done
    fi
  done
  candidates+=(python3)
  for candidate in "${candidates[@]}"; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    info=$(describe_python "$candidate")
    if [ -n "$info" ] && is_supported "${info%% *}"; then python_info=$info; break; fi
  done
  if [ -z "$python_info" ]; then
    problems+=("$wanted is not on PATH (pyproject.toml: requires-python \"$requires\"): install it (apt install $example $example-venv, brew install python@${supported[0]}, or pyenv install ${supported[0]}), or set PYTHON=/path/to/$example.")
  fi
fi
if [ -n "$python_info" ]; then
  read -r python_version python_exe python_base <<<"$python_info"
  if ! "$python_exe" -c 'import ensurepip, venv' 2>/dev/null; then
    problems+=("Python $python_version at $python_exe cannot create venvs: install its venv module (apt install python${python_version%.*}-venv).")
  fi
fi

if [ "$which_python" = 1 ]; then
  if [ -z "$python_info" ]; then printf '%s\n' "${problems[@]}" >&2; exit 1; fi
  echo "$python_exe ($python_version)"
  exit 0
fi

# --- Node.js and npm, for Azurite ----------------------------------------------------------
# Azurite's package declares the Node.js it supports (engines); read it from the lock file so
# the check follows the pinned version. Node 20 runs it here (the whole test suite passes on
# 20.20) but is below what Azurite declares, so it gets a warning, not a refusal.
azurite_lock=$(awk '/"node_modules\/azurite": \{/ {found = 1} found && /"(version|node)":/ {print} found && /"node":/ {exit}' package-lock.json)
azurite_version=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' <<<"$azurite_lock" | head -n 1)
node_range=$(sed -n 's/.*"node": *"\([^"]*\)".*/\1/p' <<<"$azurite_lock")
node_supported=$(sed -n 's/^>=\([0-9]*\).*/\1/p' <<<"$node_range")
node_supported=${node_supported:-22}
node_works=20
# httpyac runs examples/requests.http in the tests; it is installed with Azurite, by the same npm ci.
httpyac_version=$(awk '/"node_modules\/httpyac": \{/ {found = 1} found && /"version":/ {print; exit}' package-lock.json |
  sed -n 's/.*"version": *"\([^"]*\)".*/\1/p')
installed_version() { node -p "require('./node_modules/$1/package.json').version" 2>/dev/null; }
# What npm ci installed from: a package-lock.json that changed since (a new test tool such as
# @ag-ui/client) installs again.
lock_digest() { cksum <package-lock.json; }
node_tools_installed() {
  [ -x node_modules/.bin/azurite-blob ] && [ "$(installed_version azurite)" = "$azurite_version" ] &&
    [ -x node_modules/.bin/httpyac ] && [ "$(installed_version httpyac)" = "$httpyac_version" ] &&
    [ "$(cat node_modules/.setup-stamp 2>/dev/null)" = "$(lock_digest)" ]
}
npm_install() {
  npm ci --no-audit --no-fund --prefer-offline --loglevel=error && lock_digest >node_modules/.setup-stamp
}
if ! command -v node >/dev/null 2>&1; then
  problems+=("Node.js is not installed: install Node.js $node_supported LTS or newer (Azurite $azurite_version requires node $node_range), from https://nodejs.org or your package manager.")
else
  node_version=$(node --version 2>/dev/null || echo unknown)
  node_major=$(sed -n 's/^v\([0-9]*\)\..*/\1/p' <<<"$node_version")
  if [ -z "$node_major" ] || [ "$node_major" -lt "$node_works" ]; then
    problems+=("Node.js $node_version is too old for Azurite $azurite_version (it requires node $node_range): install Node.js $node_supported LTS or newer.")
  elif [ "$node_major" -lt "$node_supported" ]; then
    notes+=("Node.js $node_version: Azurite $azurite_version declares node $node_range; it runs on Node $node_works (the tests pass on it), but only $node_supported+ is supported.")
  fi
  if ! node_tools_installed && ! command -v npm >/dev/null 2>&1; then
    problems+=("npm is not installed, and it is needed to install Azurite: install npm (it comes with the Node.js installers from https://nodejs.org; apt install npm).")
  fi
fi

if [ "${#problems[@]}" -gt 0 ]; then
  printf '%s\n' "${problems[@]}" >&2
  exit 1
fi

echo "Python: $python_exe ($python_version)${PYTHON:+, from PYTHON}"
echo "Node.js: $node_version; Azurite $azurite_version"

# --- Chromium, for the browser tests (tests/browser/): the full setup only ------------------
# Not a prerequisite: without it only the browser tests skip (they fail under CI=true).
debian_chromium=/usr/bin/chromium
install_chromium=0
if [ "$with_iac" = 1 ]; then
  if [ -n "${CHROMIUM:-}" ]; then
    if [ -x "$CHROMIUM" ]; then
      echo "Chromium: $CHROMIUM, from CHROMIUM"
    else
      notes+=("CHROMIUM=$CHROMIUM is not an executable: point it at a Chromium, or unset it to use Debian's $debian_chromium; the browser tests (tests/browser/) skip until then.")
    fi
  elif [ -x "$debian_chromium" ]; then
    echo "Chromium: $debian_chromium"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    install_chromium=1
  else
    notes+=("Chromium is not at $debian_chromium, and the browser tests (tests/browser/) skip without it: install Debian's package as root (apt-get install --no-install-recommends chromium), or set CHROMIUM=/path/to/chromium.")
  fi
fi
if [ "${#notes[@]}" -gt 0 ]; then printf '%s\n' "${notes[@]}" >&2; fi

# --- Installs, side by side: pip and npm mostly wait on the network and the disk ----------
job_pids=()
job_logs=()
job_names=()
# start_job NAME COMMAND...: run it in the background, its output kept for finish_jobs.
start_job() {
  local log
  log=$(mktemp)
  "${@:2}" >"$log" 2>&1 &
  job_pids+=("$!")
  job_logs+=("$log")
  job_names+=("$1")
}
# Wait for every job and show its output; a failed job's output goes to stderr.
finish_jobs() {
  local i failed=0
  [ "${#job_pids[@]}" -gt 0 ] || return 0
  for i in "${!job_pids[@]}"; do
    if wait "${job_pids[$i]}"; then
      cat "${job_logs[$i]}"
    else
      cat "${job_logs[$i]}" >&2
      echo "${job_names[$i]} failed (its output is above)." >&2
      failed=1
    fi
    rm -f "${job_logs[$i]}"
  done
  job_pids=()
  return "$failed"
}
# On an early exit (an error, Ctrl+C), stop the background installs and their children.
stop_jobs() {
  local pid
  [ "${#job_pids[@]}" -gt 0 ] || return 0
  for pid in "${job_pids[@]}"; do
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  rm -f "${job_logs[@]}"
}
trap stop_jobs EXIT

# A venv's stamp records the interpreter that built it and a hash of the files it was
# installed from; a mismatch rebuilds it.
fingerprint() {
  "$python_exe" - "$@" <<'PY'
import hashlib
import sys

digest = hashlib.sha256()
for name in sys.argv[1:]:
    with open(name, "rb") as handle:
        digest.update(name.encode() + b"\0" + handle.read() + b"\0")
print(digest.hexdigest())
PY
}

# ensure_venv DIR REQUIREMENTS [CONSTRAINTS [EXTRA]]: a hashed lock (requirements-dev.txt) needs no
# constraints; pip checks every file against its hash and refuses anything the lock lacks.
# EXTRA, a requirement installed over the lock (another agent-framework-core), is in the stamp:
# a venv built with another EXTRA, or none, is rebuilt; one built with this one is left alone.
ensure_venv() {
  local dir=$1 requirements=$2 constraints=${3:-} extra=${4:-}
  local want built stamp_file="$dir/.setup-stamp"
  want="python $python_version $python_base"$'\n'"files $(fingerprint "$requirements" ${constraints:+"$constraints"})"
  [ -z "$extra" ] || want+=$'\n'"over the lock: $extra"
  built=$(describe_python "$dir/bin/python")
  if [ ! -e "$dir" ]; then
    echo "Creating $dir with Python $python_version."
  elif [ -z "$built" ]; then
    echo "Rebuilding $dir: its Python does not run."
    rm -rf "$dir"
  elif [ "${built%% *}" != "$python_version" ] || [ "${built##* }" != "$python_base" ]; then
    echo "Rebuilding $dir: it was built with Python ${built%% *} (${built##* }), this run uses $python_version ($python_base)."
    rm -rf "$dir"
  elif ! "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "Rebuilding $dir: it has no pip (made by another tool?)."
    rm -rf "$dir"
  elif [ ! -f "$stamp_file" ]; then
    # Built by an older setup.sh with this same interpreter: bring it in line, keep it.
    echo "Updating $dir: no record of what it was built from; installing the pinned set into it."
  elif [ "$(cat "$stamp_file")" != "$want" ]; then
    echo "Rebuilding $dir: $requirements${constraints:+ or $constraints}${extra:+ or $extra over it} changed since it was built."
    rm -rf "$dir"
  else
    echo "$dir is up to date."
    return 0
  fi
  [ -e "$dir" ] || "$python_exe" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" ${constraints:+-c "$constraints"}
  if [ -n "$extra" ]; then
    echo "Installing $extra into $dir, over the lock."
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$extra"
  fi
  printf '%s\n' "$want" >"$stamp_file"
}

# apt-get's own output is hundreds of lines: kept back unless it fails. A failure is reported,
# not fatal: only the browser tests need Chromium, and they say so when it is missing.
apt_install_chromium() {
  local log
  log=$(mktemp)
  if DEBIAN_FRONTEND=noninteractive apt-get update -q >"$log" 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >>"$log" 2>&1 &&
    [ -x "$debian_chromium" ]; then
    echo "Chromium: $debian_chromium, installed."
  else
    tail -n 5 "$log"
    echo "Installing Chromium with apt-get failed (its last lines are above): the browser tests (tests/browser/) skip without it."
  fi
  rm -f "$log"
}
if [ "$install_chromium" = 1 ]; then
  echo "Installing Chromium from Debian's packages for the browser tests (apt-get install chromium)."
  start_job "apt-get install chromium" apt_install_chromium
fi
if node_tools_installed; then
  echo "Azurite $azurite_version and httpyac $httpyac_version are installed."
else
  echo "Installing Azurite $azurite_version, httpyac $httpyac_version and the other test tools of package-lock.json (npm ci)."
  start_job "npm ci (Azurite, httpyac)" npm_install
fi
# The infra checks' own venv (checkov pins packages the test venv cannot share).
if [ "$with_iac" = 1 ]; then
  start_job "Installing checkov in .venv-iac" ensure_venv .venv-iac requirements-iac.txt constraints-iac.txt
fi
# The app's venv, from the dev lock: the runtime's exact versions (requirements.txt is
# compiled under it by scripts/lock.sh) plus the test tools.
ensure_venv "${VENV:-.venv}" requirements-dev.txt "" \
  ${AGENT_FRAMEWORK_CORE_VERSION:+"agent-framework-core==$AGENT_FRAMEWORK_CORE_VERSION"}
finish_jobs
