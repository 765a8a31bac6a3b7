#!/bin/sh
# Runs lsp_client_test.js, the protocol-level client of `ipu lsp` (vscode-jsonrpc)
# and the check of editor/vscode's manifest against extension.js, with the npm
# packages of tests/editor/package-lock.json (installed by npm_install.sh into
# BUILD/editor-node).
# Usage: tests/editor/lsp_client_test.sh BUILD_DIR IPU_BINARY
# Exit: 0 passed, 1 failed, 77 skipped (no node or npm on the machine).
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: lsp_client_test.sh BUILD_DIR IPU_BINARY}
ipu=${2:?usage: lsp_client_test.sh BUILD_DIR IPU_BINARY}
"$here/npm_install.sh" "$build" || exit $?
exec node "$here/lsp_client_test.js" --modules "$build/editor-node/node_modules" --ipu "$ipu"
