# The whole set-up on a fresh machine with Python 3.11 and Node 20:  make test   and   make demo
SHELL  := bash
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test test-python test-extension vsix demo bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip uninstall --quiet --yes streamed 2>/dev/null || true  # the distribution's name before streamed-lgm
	$(PY) -m pip install --quiet -e '.[test]'
	# the kernels compiled now, into the user's kernel cache, not in the first run (benchmarks/bench_cold.py)
	$(PY) -m streamed warm
	touch $(STAMP)

SUMMARY := build/test-summary
SUITES  := 1-python 2-grammar 3-typecheck 4-unit 5-package 6-e2e 7-e2e-cleanup

# Every suite this run, each attempted whatever the others did (the extension's do not need the Python suite), then
# one line per suite from this run alone: `passed`, `failed` or `not run (why)`, with its counts. Fails when any suite
# failed or did not run.
test: $(STAMP)
	@rm -rf $(SUMMARY) && mkdir -p $(SUMMARY)
	@status=0; $(MAKE) --no-print-directory test-python || status=1; \
	  $(MAKE) --no-print-directory test-extension || status=1; \
	  printf '\n==== make test: one line per suite, this run\n'; \
	  for s in $(SUITES); do \
	    if [[ -f $(SUMMARY)/$$s.txt ]]; then cat $(SUMMARY)/$$s.txt; \
	    else echo "$${s#*-}: not run (the run ended before it: see the output above)"; status=1; fi; \
	  done; \
	  ! grep -qE '^[a-z-]+: (failed|not run)' $(SUMMARY)/*.txt 2>/dev/null || status=1; \
	  exit $$status

# The Python suite; its line in $(SUMMARY). pytest's exit 5 (no tests collected) is a failure like any other.
test-python: $(STAMP)
	@mkdir -p $(SUMMARY)
	@s=$$SECONDS; note=; bash tests/server/neovim-setup.sh || note="; Neovim not installed, tests/server/neovim-setup.sh failed"; \
	  $(PY) tests/support/llama_builds.py || note="$$note; llama.cpp for the other kernel paths not built (tests/support/llama_builds.py)"; \
	  set -o pipefail; $(PY) -m pytest -q -p no:cacheprovider 2>&1 | tee build/python-tests.log; status=$$?; \
	  counts="$$(tail -n 1 build/python-tests.log | sed -E 's/^=+ //; s/ =+$$//; s/ in [0-9.]+s.*$$//')"; \
	  [[ $$status -ne 5 ]] || counts="no tests collected"; \
	  [[ -z $$note || $$status -ne 0 ]] || status=1; \
	  if [[ $$status -eq 0 ]]; then verdict=passed; else verdict=failed; counts="$$counts, exit $$status"; fi; \
	  printf 'python: %s (%s%s, %ss)\n' $$verdict "$$counts" "$$note" "$$((SECONDS - s))" > $(SUMMARY)/1-python.txt; \
	  exit $$status

# The grammar tests, the extension's unit tests, the .vsix, and the end-to-end tests in code-server + Chromium
# (the first run installs npm packages, code-server and, where missing, Debian's chromium; later runs use the cache).
test-extension: $(STAMP)
	STREAMED_PYTHON=$(abspath $(PY)) STREAMED_E2E_CACHE=$${STREAMED_E2E_CACHE:-$$HOME/.cache/streamed-e2e} \
	  STREAMED_TEST_SUMMARY=$(abspath $(SUMMARY)) bash vscode-extension/scripts/test-all.sh

# vscode-extension/streamed.vsix: the extension with the project's wheel built from this checkout inside it.
vsix: $(STAMP)
	cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error && STREAMED_PYTHON=$(abspath $(PY)) npm run package

# The main job on a shipped example: the 64-layer Qwen3.8 program's kinds, its SN50 decode bundle, and the numerical
# certification of a smaller stand-in; a line before each step says what it shows, and the last what to run next.
demo: $(STAMP)
	@echo "== 1/3 kinds: which of qwen3.8's 64 layers are one program up to the names they give (each kind is lowered once)"
	@$(PY) -m streamed kinds examples/qwen3.8.lgm
	@echo; echo "== 2/3 lower: one SN50 program per kind, for decode at ctx 4096, written as a bundle with its manifest"
	@$(PY) -m streamed lower examples/qwen3.8.lgm --mode decode --ctx 4096 -o build/qwen3.8.bundle
	@echo; echo "== 3/3 verify: a bundle lowered the same way, run op by op against the reference interpreter, of"
	@echo "   examples/small-qwen35.lgm, a Qwen3.5 of 8 layers (gated deltanet and attention, with experts) at width 128:"
	@echo "   numpy runs it in seconds, where qwen3.8's full-width weights (tens of GB) are far beyond a quick check. The"
	@echo "   weights are random (seed 0): what is certified is that the bundle computes what the document computes."
	@$(PY) -m streamed verify examples/small-qwen35.lgm --mode decode --ctx 32 --steps 8
	@echo; echo "== next: streamed show build/qwen3.8.bundle   (the chip, the memory and the roofline of the bundle, in words)"

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache build
