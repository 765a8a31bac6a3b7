#!/bin/sh
# tests/npm_install.sh for puppeteer-core: BUILD_DIR/browser-node/node_modules.
# Usage: tests/browser/npm_install.sh BUILD_DIR
exec "$(dirname "$0")/../npm_install.sh" browser "$@"
