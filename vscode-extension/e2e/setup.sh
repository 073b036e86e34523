#!/usr/bin/env bash
# Installs (once, cached) what the end-to-end tests need: Debian's chromium and ripgrep plus the native-build
# headers code-server's modules want, and code-server 4.100.3 under e2e/.cache/ (gitignored).
# Offline-friendly: code-server's own postinstall (which downloads ripgrep) is skipped; the Debian rg is used.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CS_VERSION="${CODE_SERVER_VERSION:-4.100.3}"
CACHE="${STREAMED_E2E_CACHE:-$HERE/.cache}"
CS_ROOT="$CACHE/code-server-$CS_VERSION"
STAMP="$CS_ROOT/.ready"
log() { printf '[e2e-setup] %s\n' "$*"; }

# 1. System packages, only when something is missing.
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v rg >/dev/null 2>&1 || need_apt+=(ripgrep)
for pkg in libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# native rebuilds need a compiler and python3
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
if ((${#need_apt[@]})); then
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# 2. code-server, cached.
if [[ -f "$STAMP" ]]; then
  log "code-server $CS_VERSION cached at $CS_ROOT"
  exit 0
fi
log "installing code-server $CS_VERSION into $CS_ROOT (one time, a few minutes)"
rm -rf "$CS_ROOT"
mkdir -p "$CS_ROOT"
cd "$CS_ROOT"
printf '{"name":"streamed-e2e-code-server","private":true}\n' > package.json
npm install --no-audit --no-fund --loglevel=error --ignore-scripts "code-server@$CS_VERSION"
VS="$CS_ROOT/node_modules/code-server/lib/vscode"
(
  cd "$VS"
  npm install --no-audit --no-fund --loglevel=error --omit=dev --ignore-scripts
  mkdir -p node_modules/@vscode/ripgrep/bin
  cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
  npm_config_yes=true npm rebuild --loglevel=error
  [[ -e node_modules.asar ]] || ln -s node_modules node_modules.asar
  cd extensions
  npm install --no-audit --no-fund --loglevel=error --omit=dev
)
(cd "$CS_ROOT" && npm rebuild argon2 --loglevel=error)
"$CS_ROOT/node_modules/.bin/code-server" --version
touch "$STAMP"
log "code-server ready"
