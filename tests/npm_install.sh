#!/bin/sh
# Installs the npm packages of tests/PACKAGE/package-lock.json (PACKAGE:
# `editor` for the editor tests, `browser` for puppeteer-core, which the
# report's page test, the dashboard's browser test and their benchmarks use
# to drive Debian's chromium; it downloads no browser) with `npm ci` into
# BUILD_DIR/PACKAGE-node, the first time and again when package.json or the
# lockfile changes (from npm's cache when it has them, else from the
# registry). The tests call it first; a lock (flock) keeps two of them from
# installing at once.
# Usage: tests/npm_install.sh PACKAGE BUILD_DIR   (the packages: BUILD_DIR/PACKAGE-node/node_modules)
# Exit: 0 installed, 1 failed, 77 no node or npm on the machine (the caller skips).
package=${1:?usage: npm_install.sh PACKAGE BUILD_DIR}
build=${2:?usage: npm_install.sh PACKAGE BUILD_DIR}
here="$(cd "$(dirname "$0")" && pwd)/$package"
[ -f "$here/package-lock.json" ] || { echo "FAIL: no tests/$package/package-lock.json"; exit 1; }
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (Debian: apt-get install nodejs npm; ./dev installs them)"
  exit 77
fi
dir="$build/$package-node"
stamp="$dir/node_modules/.ipu-$package-stamp"
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
    echo "FAIL: \`npm ci\` could not install tests/$package/package-lock.json (is the npm registry reachable?)"
    return 1
  fi
  cat "$here/package.json" "$here/package-lock.json" > "$stamp"
}
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock"
  flock 9
fi
install
