#!/usr/bin/env bash
# Everything the extension and the grammar are tested with, in order: npm deps, grammar tests, typecheck, unit tests,
# end-to-end tests in code-server + headless Chromium (which first builds the .vsix it installs: the package line), and
# the harness's own cleanup when a browser cannot start or a signal ends it.
# Each suite ends with one summary line, collected in $STREAMED_TEST_SUMMARY (one file per suite; `make test` prints
# them all) and printed here at the end. Exits non-zero on the first failure.
set -euo pipefail
EXT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$EXT"
SUMMARY="${STREAMED_TEST_SUMMARY:-$(mktemp -d)}"
mkdir -p "$SUMMARY"
LOGS="$(mktemp -d)"
step() { printf '\n==== %s\n' "$*"; }
# run NAME ORDER SUMMARY-REGEX CMD...: the suite's output to the terminal and a log; its summary line kept.
run() {
  local name=$1 order=$2 pattern=$3; shift 3
  local s=$SECONDS status=0
  "$@" 2>&1 | tee "$LOGS/$name.log" || status=$?
  local line
  line="$(grep -E "$pattern" "$LOGS/$name.log" | tail -n 1 || true)"
  printf '%s (%ss)\n' "${line:-$name: no summary line (exit $status)}" "$((SECONDS - s))" >> "$SUMMARY/$order-$name.txt"
  [[ $status -eq 0 ]] || { printf '\n%s failed (exit %s)\n' "$name" "$status"; cat "$SUMMARY"/*.txt; exit "$status"; }
}
unit_summary() {
  npm run -s test:unit | tee "$LOGS/unit.raw"
  printf 'unit: %s passed, %s failed\n' "$(sed -n 's/^ℹ pass //p' "$LOGS/unit.raw")" "$(sed -n 's/^ℹ fail //p' "$LOGS/unit.raw")"
}

step "npm dependencies"
if [[ ! -d node_modules/.bin || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "node_modules up to date"
fi
step "grammar tests";     run grammar 2 '^grammar: ' npm run -s test:grammar
step "typecheck";         run typecheck 3 '^typecheck: ' bash -c 'npm run -s typecheck && echo "typecheck: no errors"'
step "unit tests";        run unit 4 '^unit: ' unit_summary
step "end-to-end tests";  run e2e 6 '^e2e: [0-9]+ passed' npm run -s test:e2e
step "e2e harness cleanup"; run e2e-cleanup 7 '^e2e-cleanup: ' node e2e/cleanup-test.mjs
grep -h '^package: ' "$LOGS/e2e.log" >> "$SUMMARY/5-package.txt" || true
step "summary"
cat "$SUMMARY"/*.txt
