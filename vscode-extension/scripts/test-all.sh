#!/usr/bin/env bash
# Everything the extension and the grammar are tested with, in order: npm deps, grammar tests, unit tests,
# packaging (.vsix), end-to-end tests in code-server + headless Chromium. Exits non-zero on the first failure.
set -euo pipefail
EXT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$EXT"
step() { printf '\n==== %s\n' "$*"; }
timed() { local s=$SECONDS; "$@"; printf '[test-all] %s: %ss\n' "$*" "$((SECONDS - s))"; }

step "npm dependencies"
if [[ ! -d node_modules/.bin || package-lock.json -nt node_modules/.package-lock.json ]]; then
  timed npm ci --no-audit --no-fund --loglevel=error
else
  echo "node_modules up to date"
fi
step "grammar tests";      timed npm run -s test:grammar
step "typecheck";          timed npm run -s typecheck
step "unit tests";         timed npm run -s test:unit
step "package (.vsix)";    timed npm run -s package
step "end-to-end tests";   timed npm run -s test:e2e
