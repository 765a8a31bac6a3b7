// textDocument/semanticTokens/full: colours by meaning, on top of the
// TextMate grammar's colours by shape (editor/vscode).
//
// Comments, strings, numbers and keywords come from the lexical scan
// (text_scan.h), so they are coloured in any text. Names are coloured by what
// declares them, which the grammar cannot know: a use of `bert_large` is a
// model wherever it is written, `hidden` a parameter inside the definition
// that declares it, a name declared nowhere an enumeration member (`fp16`), a
// built-in function or a phase variable. Those come from the syntax tree and
// the session's resolvedNames() (queries.h), so they need a text that parses.
#pragma once

#include <string>
#include <vector>

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;

// The legend's token types, in the order of their numbers on the wire.
enum class SemanticType {
  Namespace, Class, Struct, Parameter, Variable, Property, EnumMember, Event, Function, Method, Keyword,
  Comment, String, Number, Type,
};
// And its modifiers, as bits.
enum class SemanticModifier : unsigned { Declaration = 1, Readonly = 2, DefaultLibrary = 4 };

// The legend sent in the server's capabilities.
Json semanticTokensLegend();

struct SemanticToken {
  std::size_t begin = 0, end = 0;  // byte offsets, on one line
  SemanticType type = SemanticType::Variable;
  unsigned modifiers = 0;
};
// The tokens of a document in text order, each within one line (a token
// over several lines, such as a block comment, is split at line breaks).
std::vector<SemanticToken> semanticTokens(const Analysis& analysis);
// SemanticTokens: {"data": [...]} with the protocol's relative encoding.
Json encodeSemanticTokens(const Analysis& analysis, const std::vector<SemanticToken>& tokens, PositionEncoding encoding);

}  // namespace ipu::lsp
