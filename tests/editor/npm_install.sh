#!/bin/sh
# tests/npm_install.sh for the editor tests: BUILD_DIR/editor-node/node_modules.
# Usage: tests/editor/npm_install.sh BUILD_DIR
exec "$(dirname "$0")/../npm_install.sh" editor "$@"
