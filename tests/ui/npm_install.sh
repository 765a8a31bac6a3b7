#!/bin/sh
# Installs puppeteer-core (tests/ui/package-lock.json) with `npm ci` into
# BUILD_DIR/ui-node, the first time and again when package.json or the
# lockfile changes (from npm's cache when it has them, else from the
# registry), as tests/editor/npm_install.sh does for the editor tests. A lock
# (flock) keeps two callers from installing at once.
# Usage: tests/ui/npm_install.sh BUILD_DIR   (the packages: BUILD_DIR/ui-node/node_modules)
# Exit: 0 installed, 1 failed, 77 no node or npm on the machine (the caller skips).
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: npm_install.sh BUILD_DIR}
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (Debian: apt-get install nodejs npm; ./dev installs them)"
  exit 77
fi
dir="$build/ui-node"
stamp="$dir/node_modules/.ipu-ui-stamp"
mkdir -p "$dir" || exit 1
install() {
  cat "$here/package.json" "$here/package-lock.json" | cmp -s - "$stamp" && return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: npm is not installed (Debian: apt-get install npm; ./dev installs it)"
    return 77
  fi
  cp "$here/package.json" "$here/package-lock.json" "$dir/" || return 1
  echo "npm ci in $dir"
  if ! (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefer-offline --no-audit --no-fund --loglevel=error); then
    echo "FAIL: \`npm ci\` could not install tests/ui/package-lock.json (is the npm registry reachable?)"
    return 1
  fi
  cat "$here/package.json" "$here/package-lock.json" > "$stamp"
}
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
fi
install
