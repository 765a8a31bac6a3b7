#!/bin/sh
# tests/ui/browser_test.js with its npm package installed first
# (tests/browser/npm_install.sh: puppeteer-core, shared with the report's page test).
# Usage: browser_test.sh BUILD_DIR IPU SWEEP_FIXTURE ROOT
# Screenshots: BUILD_DIR/ui-screenshots/. Exit 77 (skip) only without node or npm.
build=$1 ipu=$2 fixture=$3 root=$4
here=$(cd "$(dirname "$0")" && pwd)
"$root/tests/browser/npm_install.sh" "$build" || exit $?
exec node "$here/browser_test.js" "$ipu" "$fixture" "$root" "$build/browser-node/node_modules" "$build/ui-screenshots"
