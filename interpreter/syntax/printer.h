// The AST printer: canonical `.ipu` text. Used by `ipu fmt`, by the REPL to
// echo declarations, and by the round-trip tests (parse -> print -> parse must
// give the same tree). When given the source map it re-attaches comments from
// `Program::comments` (own-line comments before the node that follows them,
// trailing comments after the node on their line) and keeps single blank lines
// the author left between declarations and members.
//
// `toSExpr` is a span-free dump of the tree: two programs mean the same thing
// syntactically iff their S-expressions are equal.
#pragma once

#include <string>

#include "interpreter/base/source.h"
#include "interpreter/syntax/ast.h"

namespace ipu::syntax {

std::string print(const Program& program, const base::SourceMap* sources = nullptr);
std::string print(const Expr& expr);
std::string toSExpr(const Program& program);
std::string toSExpr(const Expr& expr);

}  // namespace ipu::syntax
