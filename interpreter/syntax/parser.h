// The parser facade: the only place that knows ANTLR exists. It turns one
// source file into our AST, or into syntax diagnostics (IPU0xxx) whose text
// says what the user meant ("expected `:` after field `micro_batch`") instead
// of ANTLR's "no viable alternative". Before ANTLR sees the input, a linear
// pre-scan checks UTF-8, brackets and nesting depth, so that no input can make
// the recursive-descent parser, the transformer or the checker overflow the
// stack.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/syntax/ast.h"

namespace ipu::syntax {

// Returns the program, or null when there were syntax errors (all reported).
std::unique_ptr<Program> parse(const base::SourceMap& sources, base::FileId file, base::Diagnostics& diags);

// One value alone (what `let x = VALUE` takes), the whole file: the REPL's
// input and the expressions tools evaluate. Null when there were syntax errors.
ExprPtr parseValue(const base::SourceMap& sources, base::FileId file, base::Diagnostics& diags);

// For the REPL: does `text` end inside an open bracket or string, so that more
// lines should be read before parsing? (Like lua.c's `incomplete()`.)
bool isIncomplete(std::string_view text);

// The language's keywords, read from the generated lexer's vocabulary.
const std::vector<std::string>& keywords();

// Codes this layer emits, with their titles (for docs and tests).
const std::vector<base::CodeInfo>& syntaxCodes();

// The deepest nesting the front end accepts (brackets plus operator chains).
inline constexpr int kMaxNesting = 256;

}  // namespace ipu::syntax
