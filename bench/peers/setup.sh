#!/usr/bin/env bash
# Optional peer comparison, never a project dependency: azure-functions-langgraph's Blob
# checkpoint saver and LangGraph, in a venv of their own (bench/peers/.venv, git-ignored).
#   bash bench/peers/setup.sh && bench/peers/.venv/bin/python bench/peers/langgraph_chain.py
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
"$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "azure-functions-langgraph[azure-blob]==0.12.2" "langgraph>=1.2,<1.3" aiohttp
.venv/bin/python -c "import importlib.metadata as m; print({p: m.version(p) for p in ('azure-functions-langgraph', 'langgraph', 'azure-storage-blob')})"
