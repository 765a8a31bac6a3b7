#!/bin/sh
# Runs tokenize.js (the TextMate goldens, no invalid.* scopes in valid scripts,
# the snippets) with the npm packages of tests/editor/package-lock.json, installed
# by `npm ci` into BUILD/editor-node the first time and again when the lockfile
# changes (from npm's cache when it has them, else from the registry).
# Usage: tests/editor/textmate_test.sh BUILD_DIR IPU_BINARY
# Exit: 0 passed, 1 failed, 77 skipped (no node or npm on the machine).
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: textmate_test.sh BUILD_DIR IPU_BINARY}
ipu=${2:?usage: textmate_test.sh BUILD_DIR IPU_BINARY}
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (Debian: apt-get install nodejs npm; ./dev installs them)"
  exit 77
fi
dir="$build/editor-node"
stamp="$dir/node_modules/.ipu-editor-stamp"
if ! cat "$here/package.json" "$here/package-lock.json" | cmp -s - "$stamp"; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: npm is not installed (Debian: apt-get install npm; ./dev installs it)"
    exit 77
  fi
  mkdir -p "$dir" && cp "$here/package.json" "$here/package-lock.json" "$dir/" || exit 1
  echo "npm ci in $dir"
  if ! (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error); then
    echo "FAIL: \`npm ci\` could not install tests/editor/package-lock.json (is the npm registry reachable?)"
    exit 1
  fi
  cat "$here/package.json" "$here/package-lock.json" > "$stamp"
fi
exec node "$here/tokenize.js" --modules "$dir/node_modules" --ipu "$ipu"
