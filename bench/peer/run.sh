#!/usr/bin/env bash
# Installs the LangChain.js peer (exact versions from package-lock.json) and
# runs it on the long-chat replay through `agentd-bench --only peer`, which
# starts the OpenAI-style fake and hands run.mjs its URL and the replay.
# Extra arguments go to agentd-bench (e.g. --turns 500 --windows 8000,32000).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
(cd "$here" && npm ci --no-audit --no-fund)
cd "$root"
exec go run ./cmd/agentd-bench --only peer --peer "$here" "$@"
