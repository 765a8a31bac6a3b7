" Vim filetype plugin
" Language: ipu (.ipu scripts: plans for training models on Graphcore IPU pods)

if exists("b:did_ftplugin")
  finish
endif
let b:did_ftplugin = 1

let s:cpo_save = &cpo
set cpo&vim

" `gc`-style plugins and :help commentstring use this; `gq` keeps comment leaders.
setlocal commentstring=//\ %s
setlocal comments=s1:/*,mb:*,ex:*/,://
setlocal formatoptions-=t formatoptions+=croql

" The canonical style of `ipu fmt`: two spaces, no tabs.
setlocal shiftwidth=2 softtabstop=2 expandtab

" `gf` on an import path opens the module (".ipu" may be left out).
setlocal suffixesadd=.ipu
setlocal include=^\\s*import

" :make checks the current script; :copen lists the diagnostics.
setlocal makeprg=ipu\ check\ %:S
setlocal errorformat=%f:%l:%c:\ %trror[IPU%n]:\ %m,%f:%l:%c:\ %tarning[IPU%n]:\ %m,%-G%.%#

let b:undo_ftplugin = "setlocal commentstring< comments< formatoptions< shiftwidth< softtabstop< expandtab<"
      \ . " suffixesadd< include< makeprg< errorformat<"

let &cpo = s:cpo_save
unlet s:cpo_save
