# The whole set-up on a fresh machine with Python 3.11 and Node 20:  make test   and   make demo
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test test-python test-extension demo bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: test-python test-extension

test-python: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

test-extension: $(STAMP)
	@if [ -x vscode-extension/scripts/test-all.sh ]; then PYTHON=$(abspath $(PY)) vscode-extension/scripts/test-all.sh; \
	else echo "test-extension: vscode-extension/scripts/test-all.sh is missing" >&2; exit 1; fi

demo: $(STAMP)
	$(PY) -m streamed kinds examples/tiny-llama.lgm

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache
