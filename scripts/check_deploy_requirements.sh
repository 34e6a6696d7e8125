#!/bin/sh
# azd's prepackage hook (azure.yaml): refuse to package a deployment whose WORKFLOW cannot
# load. With deployAzureOpenAI=true the infra sets WORKFLOW=chat-agents (a Bicep output azd
# passes here), but the default requirements.txt leaves the model client out; deployed as is,
# every run would answer 500 server_misconfigured. Checked here, it fails before anything ships.
set -eu
cd "$(dirname "$0")/.."
if [ "${WORKFLOW:-default}" = "chat-agents" ] && ! grep -q '^openai==' requirements.txt; then
  echo "This environment hosts WORKFLOW=chat-agents (deployAzureOpenAI=true), but requirements.txt" >&2
  echo "is the default lock, without agent-framework-openai and openai. Deploy the chat-agents" >&2
  echo "lock instead: cp requirements-chat-agents.txt requirements.txt, then package again." >&2
  exit 1
fi
