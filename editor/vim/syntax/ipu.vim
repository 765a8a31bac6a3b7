" Vim syntax file
" Language:  ipu (.ipu scripts: plans for training models on Graphcore IPU pods)
" Reference: docs/language.md. The keywords are those of grammar/IpuLexer.g4 and the
"            units those of interpreter/check/units.cpp: tests/editor/check_editor_sync.py
"            fails when this file and those sources disagree. Keywords are in the
"            `syntax match ipuKeyword...` lines, written as \v<(word|word)>.

if exists("b:current_syntax")
  finish
endif

let s:cpo_save = &cpo
set cpo&vim

" Lua code of hooks (lua """...""" and lua "...") is coloured by Vim's Lua syntax.
syntax include @Lua syntax/lua.vim
unlet! b:current_syntax
syntax case match

" ---- Lowest priority first: for items that start at the same place, the one
" ---- defined last wins.

" Calls and operators.
syntax match ipuFunction "\v<\h\w*>\ze\s*\("
syntax match ipuBuiltin "\v<(min|max|sum|len|ceil|floor|round|abs|sqrt|log|log2|exp|mod|balanced|sgd|momentum|adam|adamw|lamb|lars|dynamic)>\ze\s*\("
syntax match ipuOperator "\v[-+*/^=<>]|!\="
syntax match ipuRange "\.\."

" Characters the lexer rejects (IPU0002), and a `%` that follows no number.
syntax match ipuErrorChar "\v[^ \t\r\n\fA-Za-z0-9_{}()\[\].,;:=!<>+\-*/^"]"
syntax match ipuErrorChar "\v!(\=)@!"
syntax match ipuErrorChar "%"

" Numbers and their units: 900 MB, 1.33 GHz, 64 GB/s, 2000 steps, 15%. A name after
" a number is a unit; one the checker does not know is an error (IPU1017), and so is
" NAME/s for a NAME with no such rate unit. `100 MB / n` is a division.
syntax match ipuNumber "\v<\d(_?\d)*(\.\d(_?\d)*)?([eE][+-]?\d+)?" nextgroup=ipuErrorUnit,ipuUnit skipwhite
syntax match ipuErrorUnit contained "\v(<(import|as|let|chip|machine|pod|layer|model|mapping|precision|optimizer|dataset|training|hook|sweep|run|with|for|on|off|repeat|ipu|stage|phase|from|warmup|then|to|per|if|else|lua|file|true|false|and|or|not)>)@!\h\w*(\s*/\s*s>)?(\w)@!(\s*:)@!"
syntax match ipuUnit contained "\v(KiB\s*/\s*s|MiB\s*/\s*s|GiB\s*/\s*s|B\s*/\s*s|KB\s*/\s*s|MB\s*/\s*s|GB\s*/\s*s|TB\s*/\s*s)(\w)@!(\s*:)@!"
syntax match ipuUnit contained "\v(minutes|samples|GFLOPS|PFLOPS|TFLOPS|epochs|sample|FLOPS|GFLOP|PFLOP|TFLOP|epoch|hours|steps|FLOP|Gbps|Mbps|Tbps|days|step|GHz|GiB|KiB|MHz|MiB|TiB|kHz|min|GB|Hz|KB|MB|TB|ms|ns|us|B|h|s)(\w)@!(\s*/\s*s>)@!(\s*:)@!"
syntax match ipuUnit contained "%"

" Strings: "..." with escapes, """...""" raw.
syntax match ipuErrorEscape contained "\v\\.?"
syntax match ipuEscape contained "\v\\([nrtbf\"\\]|u([dD][89a-fA-F])@![0-9a-fA-F]{4})"
syntax region ipuString start=+"+ skip=+\\\\\|\\"+ end=+"+ end=+$+ oneline contains=ipuEscape,ipuErrorEscape
syntax region ipuRawString start=+"""+ end=+"""+

" Keywords.
syntax match ipuKeywordDecl "\v<(chip|machine|pod|layer|model|mapping|precision|optimizer|dataset|training|hook|sweep)>" nextgroup=ipuDeclName skipwhite
syntax match ipuKeywordLet "\v<(let)>" nextgroup=ipuDeclName skipwhite
syntax match ipuKeywordPhase "\v<(phase)>" nextgroup=ipuDeclName skipwhite
syntax match ipuKeywordImport "\v<(import)>"
syntax match ipuKeywordRun "\v<(run)>"
syntax match ipuKeywordAs "\v<(as)>" nextgroup=ipuDeclName skipwhite
syntax match ipuKeywordRepeat "\v<(repeat)>"
syntax match ipuKeywordOther "\v<(with|for|ipu|stage|from|lua|file)>"
syntax match ipuKeywordSchedule "\v<(warmup|then|to|per)>"
syntax match ipuKeywordConditional "\v<(if|then|else)>"
syntax match ipuKeywordOperator "\v<(and|or|not)>"
syntax match ipuKeywordBoolean "\v<(true|false|on|off)>"
" `on` before a name is the pod of a mapping (mapping m for M on P), not the boolean.
syntax match ipuKeywordHeader "\v<(for|on)>(\s+\h)@="
syntax match ipuDeclName contained "\v\h\w*"
syntax match ipuDecay "\v(<then\s+)@<=<(constant|linear|cosine|poly|exponential)>"

" Field names, keywords included (`model: bert_large`), and block fields (`flops {`).
syntax match ipuField "\v<\h\w*>\ze\s*:"
syntax match ipuField "\v^\s*\zs\h\w*\ze\s*\{"
" a.b: the member, keywords included (`settings.phase`).
syntax match ipuMember "\v(\.)@<!\.\s*\zs\h\w*>(\s*\()@!"

" Pipeline lines: ipu 0: embedding, encoder[0..3], encoder[3].attention
syntax region ipuStage matchgroup=ipuKeywordStage start="\v<(ipu|stage)>(\s+\d(_?\d)*\s*:)@=" end="\v$|\ze[;}]|\ze<(ipu|stage)\s+\d" oneline contains=ipuLayer,ipuNumber,ipuRange,ipuLineComment,ipuBlockComment,ipuStageIndex
syntax match ipuLayer contained "\v\h\w*"
syntax region ipuStageIndex contained transparent matchgroup=ipuDelimiter start="\[" end="\]" contains=ipuNumber,ipuRange,ipuOperator,ipuLayer

" Lua code: after the strings, so that `lua """` starts Lua rather than a raw string.
syntax region ipuLuaBlock matchgroup=ipuLuaQuote start=+\v(<lua\s*)@<="""+ end=+"""+ keepend contains=@Lua
syntax region ipuLuaLine matchgroup=ipuLuaQuote start=+\v(<lua\s*)@<="("")@!+ skip=+\\\\\|\\"+ end=+"+ end=+$+ oneline keepend contains=@Lua

" Comments: last, so that `//` and `/*` are not operators.
syntax keyword ipuTodo contained TODO FIXME XXX NOTE
syntax match ipuLineComment "//.*$" contains=ipuTodo,@Spell
syntax region ipuBlockComment start="/\*" end="\*/" contains=ipuTodo,@Spell

syntax sync fromstart

highlight default link ipuLineComment Comment
highlight default link ipuBlockComment Comment
highlight default link ipuTodo Todo
highlight default link ipuString String
highlight default link ipuRawString String
highlight default link ipuLuaQuote String
highlight default link ipuEscape SpecialChar
highlight default link ipuNumber Number
highlight default link ipuUnit Special
highlight default link ipuKeywordDecl Structure
highlight default link ipuKeywordLet StorageClass
highlight default link ipuKeywordPhase Structure
highlight default link ipuKeywordImport Include
highlight default link ipuKeywordRun Statement
highlight default link ipuKeywordAs Keyword
highlight default link ipuKeywordRepeat Repeat
highlight default link ipuKeywordOther Keyword
highlight default link ipuKeywordStage Keyword
highlight default link ipuKeywordSchedule Keyword
highlight default link ipuKeywordConditional Conditional
highlight default link ipuKeywordOperator Operator
highlight default link ipuKeywordBoolean Boolean
highlight default link ipuKeywordHeader Keyword
highlight default link ipuDeclName Function
highlight default link ipuDecay Function
highlight default link ipuFunction Function
highlight default link ipuBuiltin Function
highlight default link ipuField Identifier
highlight default link ipuMember Identifier
highlight default link ipuLayer Tag
highlight default link ipuOperator Operator
highlight default link ipuRange Operator
highlight default link ipuDelimiter Delimiter
highlight default link ipuErrorChar Error
highlight default link ipuErrorUnit Error
highlight default link ipuErrorEscape Error

let b:current_syntax = "ipu"

let &cpo = s:cpo_save
unlet s:cpo_save
