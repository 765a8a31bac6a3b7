// textDocument/completion.
//
// While a member is being typed the text rarely parses (`recompute:` with no
// value yet), so where the cursor is comes from the lexical scan
// (text_scan.h) rather than the syntax tree: the brackets open before the
// cursor, the header before each `{` (`mapping m for x on y {`,
// `phase short {`, `pipeline {`, `flops: {`) and what is written on the
// cursor's line in the innermost block. That gives the record being written,
// whose schema (check/schema.h) lists the fields to offer, with their types,
// defaults and docs, leaving out those already written; and, after
// `field:`, the field's enumeration members first.
//
// Names come from the session's namesInScope() at the cursor when the text
// parses, else from the top level of the document's last version that
// parsed; the built-in functions always. At the start of a top-level line:
// the declaration keywords (and snippets for a mapping, a training and a
// phase when the client takes snippets); inside `import "`: the standard
// modules. In a pipeline stage (`ipu 0: |`), the layers of the mapping's
// model, as the plan of the document's last version that planned names them
// (the first phase that uses the mapping): the first names of their paths
// (`embedding`, `encoder`), and inside `encoder[` the indices.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"
#include "interpreter/syntax/ast.h"

namespace ipu::check {
struct Schema;
}

namespace ipu::lsp {

struct Analysis;
class Workspace;

// What is being typed at the cursor.
struct CompletionContext {
  enum class Place {
    Nothing,     // in a comment, a string, a number, or a name being declared
    Statement,   // the start of a top-level item
    Member,      // the start of a member of a block
    Value,       // an expression
    ImportPath,  // inside the string after `import`
    StageLayer,  // after `ipu N:` in a pipeline
  };
  enum class Block { None, Unknown, Declaration, Model, Phase, Pipeline, Struct };
  Place place = Place::Nothing;
  std::size_t replaceBegin = 0;  // where the word (or module path) being typed starts
  std::string prefix;            // what of it is typed
  // The innermost block the cursor is in, and what it builds.
  Block block = Block::None;
  std::optional<syntax::DeclKind> declaration;  // Block::Declaration: of what kind
  const check::Schema* schema = nullptr;        // the record's fields, when known
  std::string field;                            // Value: the field given a value (after `field:`)
  std::set<std::string> written;                // Member: fields the block has already
  bool afterRun = false;                        // Value: the training of `run`
  std::string mapping;     // in a mapping's block: its name
  std::string layerGroup;  // StageLayer inside `name[`: the name (an index is being typed)
};

CompletionContext completionContext(std::string_view text, std::size_t cursor);

struct CompletionOptions {
  bool snippets = false;       // the client takes snippet syntax (`$1`)
  bool markdownDocs = true;    // documentation as markdown
};

// The CompletionList for a position.
Json complete(Workspace& workspace, const Analysis& analysis, Position position, const CompletionOptions& options);

// The protocol's CompletionItemKind numbers used.
enum class CompletionKind : int {
  Function = 3, Field = 5, Variable = 6, Class = 7, Module = 9, Property = 10, Keyword = 14, Snippet = 15,
  EnumMember = 20, Constant = 21, Struct = 22, Event = 23,
};

}  // namespace ipu::lsp
