// A lexical scan of `.ipu` text that accepts anything: what the editor
// features read when the text being typed does not parse (most of the time,
// mid-edit). It follows grammar/IpuLexer.g4's token shapes (words, numbers
// with `_` and exponents, `0..3` as a range, "strings" that end at the line,
// """triple strings""", // and /* */ comments) without ANTLR, which only the
// parser facade may see, and never reports an error: an unterminated string
// or comment runs to where the lexer would stop, and a byte that is no token
// is a token of its own.
//
// Folding ranges and completion's idea of where the cursor is come from it;
// semantic tokens take keywords, literals and comments from it and names
// from the syntax tree.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "interpreter/syntax/ast.h"

namespace ipu::lsp {

enum class TokenKind {
  Word,         // an identifier or a keyword
  Number,       // 12, 1_000, 2.5e-3 (a unit after it is a Word)
  String,       // "..." or """..."""
  LineComment,  // // ...
  BlockComment, // /* ... */
  Punctuation,  // { } ( ) [ ] , : = . .. + - and the rest of the operators
  Other,        // a byte the language has no token for
};

struct Token {
  TokenKind kind = TokenKind::Other;
  std::size_t begin = 0, end = 0;  // byte offsets
  bool closed = true;              // a string or block comment that reached its end
};

std::vector<Token> scanTokens(std::string_view text);

// Is `s` shaped as a name (a letter or `_`, then letters, digits, `_`)?
bool isName(std::string_view s);
// Is `word` one of the language's keywords (syntax::keywords())?
bool isKeyword(std::string_view word);
// The declaration kind a keyword spells (`mapping`), if it is one.
std::optional<syntax::DeclKind> declKindNamed(std::string_view word);

// The top level of a text read lexically: the declarations (`KIND NAME`,
// `let NAME` at the start of a statement outside any bracket) and the import
// items alone, as a script. What completion and signature help know of a
// text that does not parse.
struct LexicalTopLevel {
  std::vector<std::pair<std::string, std::optional<syntax::DeclKind>>> declarations;  // no kind: a `let`
  std::string imports;
};
LexicalTopLevel readTopLevel(std::string_view text);

}  // namespace ipu::lsp
