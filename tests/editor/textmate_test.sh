#!/bin/sh
# Runs tokenize.js (the TextMate goldens, no invalid.* scopes in valid scripts,
# the snippets) with the npm packages of tests/editor/package-lock.json, installed
# by npm_install.sh into BUILD/editor-node the first time and again when the
# lockfile changes.
# Usage: tests/editor/textmate_test.sh BUILD_DIR IPU_BINARY
# Exit: 0 passed, 1 failed, 77 skipped (no node or npm on the machine).
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: textmate_test.sh BUILD_DIR IPU_BINARY}
ipu=${2:?usage: textmate_test.sh BUILD_DIR IPU_BINARY}
"$here/npm_install.sh" "$build" || exit $?
exec node "$here/tokenize.js" --modules "$build/editor-node/node_modules" --ipu "$ipu"
