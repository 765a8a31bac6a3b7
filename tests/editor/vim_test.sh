#!/bin/sh
# Loads editor/vim in a headless Vim over every example, stdlib file, test script,
# diagnostics script and editor test fixture (tests/editor/vim_test.vim says what
# is checked). Usage: tests/editor/vim_test.sh [ROOT]   (ROOT: the repository)
# IPU_VIM=nvim runs the same checks in Neovim.
# Exit: 0 passed, 1 failed, 77 skipped (no Vim, or no Vim runtime with syntax/lua.vim).
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
vim=${IPU_VIM:-vim}
case $(basename "$vim") in
  nvim*) batch=--headless ;;
  *) batch=-Es ;;
esac
if ! command -v "$vim" >/dev/null 2>&1; then
  echo "SKIP: $vim is not installed (Debian: apt-get install vim; ./dev installs it)"
  exit 77
fi
if ! "$vim" $batch -N -u NONE -i NONE -c 'if empty(globpath(&rtp, "syntax/lua.vim")) | cquit! | endif' -c 'qall!' </dev/null >/dev/null 2>&1; then
  echo "SKIP: this $vim has no runtime files (syntax/lua.vim); install the full vim package"
  exit 77
fi
out=$(mktemp)
list=$(mktemp)
trap 'rm -f "$out" "$list"' EXIT
find -L "$root/examples" "$root/stdlib" "$root/tests/scripts" "$root/tests/diagnostics" \
        "$root/tests/editor/fixtures" -name '*.ipu' | LC_ALL=C sort > "$list"
"$vim" --version | head -n 1
# Paths go through g: variables (single-quoted Vim strings: a quote in them is doubled).
q() { printf '%s' "$1" | sed "s/'/''/g"; }
"$vim" $batch -N -u NONE -i NONE \
    --cmd "set rtp^=$(printf '%s' "$root/editor/vim" | sed 's/[ ,\\]/\\&/g')" \
    --cmd "let g:ipu_out = '$(q "$out")'" \
    --cmd "let g:ipu_files = '$(q "$list")'" \
    --cmd "let g:ipu_root = '$(q "$root")'" \
    -c 'filetype plugin indent on' -c 'syntax on' \
    -S "$root/tests/editor/vim_test.vim" </dev/null >/dev/null 2>&1
rc=$?
if [ ! -s "$out" ]; then
  echo "FAIL: Vim exited $rc without a report"
  exit 1
fi
cat "$out"
if [ $rc -ne 0 ] || ! tail -n 1 "$out" | grep -q ': passed$'; then
  exit 1
fi
exit 0
