#!/usr/bin/env bash
# Installs (once) the editors tests/server/test_neovim.py and test_emacs.py drive: Debian's Neovim, and Debian's Emacs
# with eglot (built into Emacs 29; Debian 12's Emacs 28 has it as elpa-eglot), as vscode-extension/e2e/setup.sh
# installs chromium. `make test-python` (and so `make test`) runs it before pytest.
set -euo pipefail
has_eglot() { command -v emacs >/dev/null 2>&1 && emacs --batch --eval "(require 'eglot)" >/dev/null 2>&1; }
command -v nvim >/dev/null 2>&1 && has_eglot && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
wanted=()
command -v nvim >/dev/null 2>&1 || wanted+=(neovim)
if ! has_eglot; then
  wanted+=(emacs-nox)
  apt-cache show elpa-eglot >/dev/null 2>&1 && wanted+=(elpa-eglot)  # an Emacs before 29 (Debian 12's)
fi
printf '[editors-setup] apt-get install %s\n' "${wanted[*]}"
apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null
nvim --version | head -n 1
emacs --version | head -n 1
has_eglot || { printf '[editors-setup] this Emacs has no eglot\n' >&2; exit 1; }
