#!/bin/sh
# The runs report as a reader uses it (docs/tracking.md, "ipu report"), in
# headless Chromium driven by puppeteer-core: report_page_test.js. Installs
# tests/browser's packages first (npm_install.sh). Skips (77) without node or
# npm; fails without chromium.
#   report_page_test.sh IPU FIXTURE ROOT BUILD [SCREENSHOT.png]
here=$(cd "$(dirname "$0")" && pwd)
ipu=${1:?usage: report_page_test.sh IPU FIXTURE ROOT BUILD [SCREENSHOT.png]}
fixture=${2:?} root=${3:?} build=${4:?}
"$root/tests/browser/npm_install.sh" "$build" || exit $?
chromium=$(command -v chromium || command -v chromium-browser)
if [ -z "$chromium" ]; then
  echo "FAIL: no chromium (Debian package \`chromium\`; ./dev installs it)"
  exit 1
fi
NODE_PATH="$build/browser-node/node_modules" exec node "$here/report_page_test.js" "$ipu" "$fixture" "$chromium" ${5:+"$5"}
