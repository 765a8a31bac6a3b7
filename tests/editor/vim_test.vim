" Loads editor/vim over .ipu files in a headless Vim (run by vim_test.sh):
"   - every file gets filetype `ipu` and syntax `ipu`, with no Vim error;
"   - no character of a valid script is in an ipuError* group, and the lines
"     where a diagnostics script expects IPU0002, IPU0012 or IPU1017 have one;
"   - re-indenting a canonical file (`gg=G` on examples and stdlib, which
"     `ipu fmt` keeps formatted) changes nothing;
"   - the groups of chosen spots of tests/editor/fixtures/constructs.ipu,
"     embedded Lua included;
"   - the ftplugin's 'errorformat' reads `ipu check` diagnostics.
" Inputs (set with --cmd): g:ipu_out, the file to write the report to;
" g:ipu_root, the repository (its examples/ and stdlib/ are re-indented);
" g:ipu_files, a file listing the .ipu files to load, one a line.

let s:failures = []
let s:checked = 0
let s:reindented = 0

function! s:Fail(msg) abort
  call add(s:failures, a:msg)
endfunction

function! s:Group(lnum, col) abort
  return synIDattr(synID(a:lnum, a:col, 0), 'name')
endfunction

" Codes of the `// expect-error: IPUxxxx [@line]` comments, with their lines.
function! s:ExpectedErrors() abort
  let out = []
  for lnum in range(1, line('$'))
    let m = matchlist(getline(lnum), '\v//\s*expect-error:\s*(IPU\d{4})%(\s+\@(\d+))?')
    if !empty(m)
      call add(out, [m[1], empty(m[2]) ? lnum : str2nr(m[2])])
    endif
  endfor
  return out
endfunction

function! s:ErrorColumns(lnum) abort
  let cols = []
  let line = getline(a:lnum)
  for col in range(1, len(line))
    if line[col - 1] !~# '\s' && s:Group(a:lnum, col) =~# '^ipuError'
      call add(cols, col)
    endif
  endfor
  return cols
endfunction

function! s:CheckFile(file) abort
  let v:errmsg = ''
  try
    execute 'silent edit ' . fnameescape(a:file)
  catch
    call s:Fail(a:file . ': ' . v:exception)
    return
  endtry
  let s:checked += 1
  if &filetype !=# 'ipu'
    call s:Fail(a:file . ": filetype is '" . &filetype . "', not ipu (ftdetect)")
  endif
  if get(b:, 'current_syntax', '') !=# 'ipu'
    call s:Fail(a:file . ': syntax/ipu.vim not loaded')
  endif
  if &l:commentstring !=# '// %s' || &l:shiftwidth != 2 || &l:indentexpr !~# 'GetIpuIndent'
    call s:Fail(a:file . ': ftplugin or indent not loaded (commentstring ' . &l:commentstring . ', indentexpr ' . &l:indentexpr . ')')
  endif
  call synID(line('$'), 1, 1)

  let errors = s:ExpectedErrors()
  let lexical = !empty(filter(copy(errors), 'v:val[0] =~# "^IPU00" || v:val[0] ==# "IPU1017"'))
  if !lexical
    for lnum in range(1, line('$'))
      let cols = s:ErrorColumns(lnum)
      if !empty(cols)
        call s:Fail(printf('%s:%d:%d: %s in a valid script: %s', a:file, lnum, cols[0], s:Group(lnum, cols[0]), getline(lnum)))
      endif
    endfor
  endif
  for [code, lnum] in errors
    if index(['IPU0002', 'IPU0012', 'IPU1017'], code) >= 0 && empty(s:ErrorColumns(lnum))
      call s:Fail(printf('%s:%d: expects %s, but nothing on the line is in an ipuError group', a:file, lnum, code))
    endif
  endfor

  let full = fnamemodify(a:file, ':p')
  if stridx(full, g:ipu_root . '/examples/') == 0 || stridx(full, g:ipu_root . '/stdlib/') == 0
    let before = getline(1, '$')
    silent normal! gg=G
    let after = getline(1, '$')
    let s:reindented += 1
    for i in range(len(before))
      if before[i] !=# after[i]
        call s:Fail(printf("%s:%d: re-indenting changes\n    %s\n  to\n    %s", a:file, i + 1, before[i], after[i]))
        break
      endif
    endfor
  endif

  if fnamemodify(a:file, ':t') ==# 'constructs.ipu'
    call s:CheckSpots(a:file)
  endif
  if v:errmsg !=# ''
    call s:Fail(a:file . ': Vim error: ' . v:errmsg)
  endif
  silent! bwipeout!
endfunction

" [text on a line, the part to look at, the group expected there (a pattern)]
let s:spots = [
      \ ['^import "std/layers" as L', 'import', '^ipuKeywordImport$'],
      \ ['^import "std/layers" as L', '"std', '^ipuString$'],
      \ ['^import "std/layers" as L', ' L$', '^ipuDeclName$'],
      \ ['^let sizes', 'sizes', '^ipuDeclName$'],
      \ ['^let sizes', '65_536', '^ipuNumber$'],
      \ ['^let sizes', '2.5E+3', '^ipuNumber$'],
      \ ['^let bytes', 'MB', '^ipuUnit$'],
      \ ['^let rates', 'GB/s', '^ipuUnit$'],
      \ ['^let rates', '/s, 8', '^ipuUnit$'],
      \ ['^let counts', '%', '^ipuUnit$'],
      \ ['^let counts', ' %', '^ipuUnit$'],
      \ ['^let counts', 'MB]', '^ipuUnit$'],
      \ ['^let spaced', 's$', '^ipuUnit$'],
      \ ['^let logic', 'if', '^ipuKeywordConditional$'],
      \ ['^let logic', 'and', '^ipuKeywordOperator$'],
      \ ['^let logic', 'len', '^ipuBuiltin$'],
      \ ['^let comparisons', 'on,', '^ipuKeywordBoolean$'],
      \ ['^let text', '\\t', '^ipuEscape$'],
      \ ['^let text', '\\u00e9', '^ipuEscape$'],
      \ ['^let raw', '\\n', '^ipuRawString$'],
      \ ['^let record', 'model', '^ipuField$'],
      \ ['^let record', 'for', '^ipuField$'],
      \ ['^let keyword_fields', 'phase', '^ipuMember$'],
      \ ['^let scaled', 'per', '^ipuKeywordSchedule$'],
      \ ['^let scaled', 'cosine', '^ipuDecay$'],
      \ ['^let lr_function', 'lua', '^ipuKeywordOther$'],
      \ ['^chip lab_chip', 'lab_chip', '^ipuDeclName$'],
      \ ['^  flops_per_cycle', 'flops_per_cycle', '^ipuField$'],
      \ ['^  power_of_two_replicas', 'off', '^ipuKeywordBoolean$'],
      \ ['^  repeat 2 as head', 'repeat', '^ipuKeywordRepeat$'],
      \ ['^  repeat 2 as head', 'head', '^ipuDeclName$'],
      \ ['^  layer first', 'dense', '^ipuFunction$'],
      \ ['^mapping split', 'for', '^ipuKeywordHeader$'],
      \ ['^mapping split', 'on', '^ipuKeywordHeader$'],
      \ ['^    ipu 0', 'ipu', '^ipuKeywordStage$'],
      \ ['^    ipu 0', 'encoder', '^ipuLayer$'],
      \ ['^    ipu 0', '\.\.', '^ipuRange$'],
      \ ['^    ipu 1', 'attention', '^ipuLayer$'],
      \ ['^    ipu 1', 'stage', '^ipuKeywordStage$'],
      \ ['^  stochastic_rounding', 'on', '^ipuKeywordBoolean$'],
      \ ['^hook stop_on_nan', 'lua', '^ipuKeywordOther$'],
      \ ['^hook stop_on_nan', '"""', '^ipuLuaQuote$'],
      \ ['^function on_step', 'function', '^lua'],
      \ ['^  -- Lua comment', 'Lua', '^luaComment$'],
      \ ['ctx:stop', '"NaN', '^luaString'],
      \ ['ctx:stop', 'then', '^lua'],
      \ ['^  lua: lua "function', 'lua:', '^ipuField$'],
      \ ['^  lua: lua "function', 'function', '^lua'],
      \ ['^hook log_steps', 'file', '^ipuKeywordOther$'],
      \ ['^  phase long from', 'phase', '^ipuKeywordPhase$'],
      \ ['^  phase long from', 'long', '^ipuDeclName$'],
      \ ['^  phase long from', 'from', '^ipuKeywordOther$'],
      \ ['^training finetune', 'with', '^ipuKeywordOther$'],
      \ ['^run pretrain', 'run', '^ipuKeywordRun$'],
      \ ['^/\* A block', 'block', '^ipuBlockComment$'],
      \ ['^   over two lines', 'model', '^ipuBlockComment$'],
      \ ]

function! s:CheckSpots(file) abort
  for [where, what, want] in s:spots
    let lnum = 0
    for l in range(1, line('$'))
      if getline(l) =~# where
        let lnum = l
        break
      endif
    endfor
    if lnum == 0
      call s:Fail(a:file . ': no line matches ' . where)
      continue
    endif
    let col = match(getline(lnum), what) + 1
    if col == 0
      call s:Fail(printf('%s:%d: no %s on the line', a:file, lnum, what))
      continue
    endif
    " look at the first character of the match that is not a space
    while getline(lnum)[col - 1] =~# '\s'
      let col += 1
    endwhile
    let got = s:Group(lnum, col)
    if got !~# want
      call s:Fail(printf('%s:%d:%d: `%s` is in %s, expected %s', a:file, lnum, col, what, empty(got) ? 'no group' : got, want))
    endif
  endfor
endfunction

function! s:CheckErrorformat() abort
  enew
  setfiletype ipu
  let lines = ['a.ipu:5:15: error[IPU1017]: unknown unit `Mb`', '  |', '5 |   memory: 600 Mb',
        \ '  = help: did you mean `MB`?', 'b.ipu:84:61: warning[IPU1108]: mapping `m` uses 8 of 16 IPUs',
        \ 'error: 1 error, 1 warning']
  let &l:errorformat = &l:errorformat
  call setqflist([], ' ', {'lines': lines, 'efm': &l:errorformat})
  let got = map(filter(getqflist(), 'v:val.valid'), '[bufname(v:val.bufnr), v:val.lnum, v:val.col, v:val.type, v:val.nr, v:val.text]')
  let want = [['a.ipu', 5, 15, 'e', 1017, 'unknown unit `Mb`'], ['b.ipu', 84, 61, 'w', 1108, 'mapping `m` uses 8 of 16 IPUs']]
  if got != want
    call s:Fail('errorformat reads ' . string(got) . ', expected ' . string(want))
  endif
  silent! bwipeout!
endfunction

try
  for s:file in readfile(g:ipu_files)
    call s:CheckFile(s:file)
  endfor
  call s:CheckErrorformat()
catch
  call s:Fail('Vim error: ' . v:exception . ' at ' . v:throwpoint)
endtry

let s:report = map(copy(s:failures), '"FAIL " . v:val')
call add(s:report, printf('%d files loaded, %d re-indented unchanged, %d spots of constructs.ipu: %s',
      \ s:checked, s:reindented, len(s:spots), empty(s:failures) ? 'passed' : len(s:failures) . ' failure(s)'))
call writefile(s:report, g:ipu_out)
if empty(s:failures)
  qall!
endif
cquit!
