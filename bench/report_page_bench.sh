#!/bin/sh
# The runs report in Chromium at scale: report_page_bench.js.
#   bench/report_page_bench.sh BUILD
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: report_page_bench.sh BUILD}" && pwd)
"$here/../tests/browser/npm_install.sh" "$build" || exit $?
chromium=$(command -v chromium || command -v chromium-browser) || { echo "no chromium"; exit 1; }
NODE_PATH="$build/browser-node/node_modules" exec node "$here/report_page_bench.js" "$build/ipu" \
  "$build/tests/ipu_runs_report_fixture" "$chromium"
