#!/usr/bin/env bash
# Everything the extension and the grammar are tested with: npm deps, then the grammar tests, the typecheck, the unit
# tests, the .vsix (package), the end-to-end tests in code-server + headless Chromium on that .vsix, and the harness's
# own cleanup when a browser cannot start or a signal ends it.
#
# Every suite that can run is run, whatever the ones before it did: only what a suite needs decides whether it runs
# (each needs the npm packages; e2e and e2e-cleanup need the .vsix the package step built). Each suite writes exactly
# one line to $STREAMED_TEST_SUMMARY/<order>-<name>.txt — `NAME: passed (counts, time)`, `NAME: failed (counts,
# time)` or `NAME: not run (why)` — which `make test` prints with the Python suite's; the lines are printed here at
# the end too. Exits 1 when any suite failed or did not run.
set -uo pipefail
EXT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$EXT" || exit 2
SUMMARY="${STREAMED_TEST_SUMMARY:-$(mktemp -d)}"
mkdir -p "$SUMMARY"
LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT
failed=0
step() { printf '\n==== %s\n' "$*"; }
line() { printf '%s\n' "$2" > "$SUMMARY/$1.txt"; } # line ORDER-NAME TEXT: the suite's one line, replacing any other
not_run() { line "$1-$2" "$2: not run ($3)"; failed=1; }
# run ORDER NAME COUNTS-REGEX CMD...: the suite's output to the terminal and a log; its line says passed or failed by
# the exit status, with the counts its last line matching COUNTS-REGEX gives (after "NAME: "). Returns the status.
run() {
  local order=$1 name=$2 pattern=$3; shift 3
  local s=$SECONDS status=0 counts
  "$@" 2>&1 | tee "$LOGS/$name.log" || status=$?
  counts="$(grep -E "$pattern" "$LOGS/$name.log" | tail -n 1 | sed -E "s/^$name: //")"
  [[ -n $counts ]] || counts="no summary line, exit $status"
  if [[ $status -eq 0 ]]; then
    line "$order-$name" "$name: passed ($counts, $((SECONDS - s))s)"
  else
    line "$order-$name" "$name: failed ($counts, exit $status, $((SECONDS - s))s)"
    failed=1
  fi
  return "$status"
}
unit_summary() {
  local status=0
  npm run -s test:unit | tee "$LOGS/unit.raw" || status=$?
  printf 'unit: %s passed, %s failed\n' "$(sed -n 's/^ℹ pass //p' "$LOGS/unit.raw")" "$(sed -n 's/^ℹ fail //p' "$LOGS/unit.raw")"
  return "$status"
}
# The .vsix the e2e suites install, built from this checkout (its wheel from $STREAMED_PYTHON), and what it carries.
package() {
  rm -f streamed.vsix
  npm run -s package || return
  local files wheel
  files="$(unzip -Z1 streamed.vsix)" || return
  wheel="$(grep -E '^extension/server/streamed_lgm-.*\.whl$' <<<"$files")" \
    || { echo "package: the .vsix carries no server wheel"; return 1; }
  printf 'package: streamed.vsix %s, %s files, %s KiB, carrying %s\n' "$(node -p 'require("./package.json").version')" \
    "$(wc -l <<<"$files")" "$(( $(stat -c %s streamed.vsix) / 1024 ))" "$(basename "$wheel")"
}

step "npm dependencies"
deps=0
if [[ ! -d node_modules/.bin || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error || deps=$?
else
  echo "node_modules up to date"
fi
if [[ $deps -ne 0 ]]; then
  why="npm ci failed with exit $deps"
  for s in 2-grammar 3-typecheck 4-unit 5-package 6-e2e 7-e2e-cleanup; do not_run "${s%%-*}" "${s#*-}" "$why"; done
else
  step "grammar tests";   run 2 grammar '^grammar: ' npm run -s test:grammar
  step "typecheck";       run 3 typecheck '^typecheck: ' bash -c 'npm run -s typecheck && echo "typecheck: no errors"'
  step "unit tests";      run 4 unit '^unit: ' unit_summary
  step "package";         run 5 package '^package: ' package
  if [[ -f streamed.vsix ]] && grep -q '^package: passed' "$SUMMARY/5-package.txt"; then
    step "end-to-end tests"
    STREAMED_E2E_VSIX="$EXT/streamed.vsix" run 6 e2e '^e2e: [0-9]+ passed' npm run -s test:e2e
    step "e2e harness cleanup"
    run 7 e2e-cleanup '^e2e-cleanup: [0-9]+ passed' node e2e/cleanup-test.mjs
  else
    not_run 6 e2e "no .vsix to install: the package step failed"
    not_run 7 e2e-cleanup "no .vsix to install: the package step failed"
  fi
fi
step "summary"
cat "$SUMMARY"/[2-7]-*.txt
exit "$failed"
