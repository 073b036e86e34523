#!/usr/bin/env bash
# Installs (once) the Neovim that tests/server/test_neovim.py drives: Debian's, as vscode-extension/e2e/setup.sh
# installs chromium. `make test-python` (and so `make test`) runs it before pytest.
set -euo pipefail
command -v nvim >/dev/null 2>&1 && exit 0
printf '[neovim-setup] apt-get install neovim\n'
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends neovim >/dev/null
nvim --version | head -n 1
