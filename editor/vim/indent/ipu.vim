" Vim indent file
" Language: ipu (.ipu scripts: plans for training models on Graphcore IPU pods)
"
" The indentation of `ipu fmt`: one 'shiftwidth' per open `{`, `[` or `(`; a
" closing bracket back at the level of the line that opened it; a wrapped sum
" (a line starting with `+` or `-`) under the first term of the value, or just
" inside the bracket it continues. Lines inside a """ string (Lua code) or a
" block comment are left as they are.

if exists("b:did_indent")
  finish
endif
let b:did_indent = 1

setlocal indentexpr=GetIpuIndent(v:lnum)
setlocal indentkeys=0{,0},0),0],0+,0-,!^F,o,O,e
setlocal autoindent nosmartindent nocindent nolisp

let b:undo_indent = "setlocal indentexpr< indentkeys< autoindent< smartindent< cindent< lisp<"

if exists("*GetIpuIndent")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

" Is (lnum, col) in a string, a comment or Lua code?
function! s:InText(lnum, col) abort
  for id in synstack(a:lnum, a:col)
    if synIDattr(id, "name") =~# '\v^ipu(String|RawString|LuaBlock|LuaLine|LuaQuote|LineComment|BlockComment|Escape|ErrorEscape|Todo)$|^lua'
      return 1
    endif
  endfor
  return 0
endfunction

" Does line lnum start inside a """ string, Lua code or a block comment?
function! s:StartsInText(lnum) abort
  let col = match(getline(a:lnum), '\S') + 1
  if col <= 0
    return 0
  endif
  for id in synstack(a:lnum, col)
    if synIDattr(id, "name") =~# '\v^ipu(RawString|LuaBlock|BlockComment)$'
      return 1
    endif
  endfor
  " The closing """ itself is drawn by the region's matchgroup.
  return synIDattr(synID(a:lnum, col, 0), "name") ==# "ipuLuaQuote" && getline(a:lnum) =~# '^\s*"""'
endfunction

function! s:IsContinuation(lnum) abort
  return getline(a:lnum) =~# '\v^\s*[-+](\s|$)'
endfunction

" The first line of the member or item that line lnum belongs to: back over the
" lines inside text and over the continuation lines of a wrapped sum.
function! s:StatementStart(lnum) abort
  let lnum = a:lnum
  while lnum > 1 && (s:StartsInText(lnum) || s:IsContinuation(lnum))
    let lnum = prevnonblank(lnum - 1)
  endwhile
  return lnum
endfunction

" The brackets still open at the end of lines first..last, as a list of
" [lnum, col], ignoring strings, comments and Lua code.
function! s:OpenBrackets(first, last) abort
  let stack = []
  for lnum in range(a:first, a:last)
    let line = getline(lnum)
    let col = 0
    while 1
      let col = match(line, '[][(){}]', col)
      if col < 0
        break
      endif
      if !s:InText(lnum, col + 1)
        if line[col] =~# '[[({]'
          call add(stack, [lnum, col])
        elseif !empty(stack)
          call remove(stack, -1)
        endif
      endif
      let col += 1
    endwhile
  endfor
  return stack
endfunction

function! GetIpuIndent(lnum) abort
  if s:StartsInText(a:lnum)
    return -1
  endif
  let prev = prevnonblank(a:lnum - 1)
  if prev == 0
    return 0
  endif
  let start = s:StatementStart(prev)
  let open = s:OpenBrackets(start, prev)
  let line = getline(a:lnum)

  " A wrapped sum: under the first term, or just inside the bracket it continues.
  if line =~# '\v^\s*[-+](\s|$)'
    if s:IsContinuation(prev) && empty(open)
      return indent(prev)
    endif
    if !empty(open) && open[-1][0] >= start
      let [olnum, ocol] = open[-1]
      if getline(olnum)[ocol] ==# '('
        return virtcol([olnum, ocol + 1])
      endif
    endif
    let value = matchend(getline(start), '\v^\s*(let\s+)?\h\w*\s*[:=]\s*')
    return value > 0 ? value : indent(start) + shiftwidth()
  endif

  let ind = indent(start)
  if !empty(open)
    let ind += shiftwidth()
  endif
  if line =~# '^\s*[]})]'
    let ind -= shiftwidth()
  endif
  return ind < 0 ? 0 : ind
endfunction

let &cpo = s:cpo_save
unlet s:cpo_save
