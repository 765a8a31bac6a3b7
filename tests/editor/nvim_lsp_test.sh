#!/bin/sh
# Headless Neovim, configured by editor/nvim/ipu.lua, against `ipu lsp`: opens a
# copy of examples/bert_large_pod16.ipu, waits for diagnostics, hovers, makes
# an error and applies the server's quick fix, goes to a definition, formats,
# and checks the buffer's text after each step (nvim_lsp_test.lua says how).
# Usage: tests/editor/nvim_lsp_test.sh ROOT IPU_BINARY   (ROOT: the repository)
# IPU_NVIM names another nvim. Exit: 0 passed, 1 failed, 77 skipped (no nvim).
root=$(cd "${1:?usage: nvim_lsp_test.sh ROOT IPU_BINARY}" && pwd)
ipu=${2:?usage: nvim_lsp_test.sh ROOT IPU_BINARY}
case $ipu in /*) ;; *) ipu=$(pwd)/$ipu ;; esac
nvim=${IPU_NVIM:-nvim}
if ! command -v "$nvim" >/dev/null 2>&1; then
  echo "SKIP: $nvim is not installed (Debian: apt-get install neovim; ./dev test installs it)"
  exit 77
fi
"$nvim" --version | head -n 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$root/examples/bert_large_pod16.ipu" "$work/" || exit 1
out="$work/report.txt"
# -u NONE: no user configuration; ipu.lua sets up everything the test uses.
IPU_BIN=$ipu IPU_ROOT=$root IPU_WORK=$work IPU_OUT=$out \
  timeout 120 "$nvim" --headless -u NONE -i NONE -n \
    -c "luafile $(printf '%s' "$root/tests/editor/nvim_lsp_test.lua" | sed 's/[ \\|"]/\\&/g')" </dev/null >"$work/nvim.log" 2>&1
rc=$?
if [ ! -s "$out" ]; then
  echo "FAIL: Neovim exited $rc without a report; its output:"
  cat "$work/nvim.log"
  exit 1
fi
cat "$out"
if [ $rc -ne 0 ] || ! tail -n 1 "$out" | grep -q ' 0 failed$'; then
  [ -s "$work/nvim.log" ] && { echo "Neovim's output:"; cat "$work/nvim.log"; }
  exit 1
fi
exit 0
