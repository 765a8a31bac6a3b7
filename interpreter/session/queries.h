// Position queries over a checked snapshot: what a language server and the
// REPL ask about a script, by (file, line, column) rather than by writing
// text into it.
//
// Session::snapshot() checks a file and returns a Snapshot: the sources as
// they were, the parsed modules and the checker's outcome, shared and never
// changed afterwards. A snapshot stays valid (and keeps answering about the
// old text) after Session::update() replaces a file's text and later
// snapshots are taken; it does not refer to the session that made it.
//
// Lines and columns are 1-based; a column counts characters (UTF-8 code
// points), as diagnostics do. A position names the character under it: a
// name's span contains its first character, not the one after its last. A
// position past the end of a line or of the file, inside a comment, or in a
// file that did not parse, has no answer (an empty optional or list), never
// an error. Queries on one snapshot may be made from one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/modules.h"
#include "interpreter/check/value.h"
#include "interpreter/syntax/ast.h"

namespace ipu::session {

// What a node of the syntax tree is (syntax/ast.h's kinds, flattened).
enum class NodeKind {
  Import, Let, Declaration, Run,                                        // items
  Param,                                                                // of a definition
  Field, Block, LetMember, Layer, Repeat, Stage, Phase,                 // members of a block
  Number, String, Bool, Name, List, Record, Call, Member, Index,        // expressions
  Unary, Binary, Range, If, With, Lua, Schedule,
};
const char* name(NodeKind kind);

struct Node {
  NodeKind kind = NodeKind::Name;
  base::Span span;
  std::string name;  // the name it declares or refers to ("" for unnamed nodes)
};

// A place in a file: the span, and where it starts and ends as line:column.
struct Location {
  std::string path;  // as the session's source map names the file ("std/models/bert.ipu" for the standard library)
  base::Span span;   // the name
  // A definition: what declares it (Let, Declaration, Param, LetMember,
  // Layer, Repeat, Phase, or Import for an alias) and the whole of that item or
  // member. A use: Name, and the span again.
  NodeKind kind = NodeKind::Name;
  base::Span declaration;
  base::LineCol start, end;
  bool standard = false;  // in the standard library
};

struct ValueAndType {
  check::Value value;        // the first value the expression was given
  std::string shown;         // value.show()
  std::string type;          // describeType(value)
  int evaluations = 0;       // how often the check evaluated it (a definition's body: once per use)
  bool varies = false;       // those evaluations did not all give the same value
};

struct FieldInfo {
  std::string recordKind;  // "mapping", "phase", ...
  std::string name;
  base::Span nameSpan;
  std::string type;        // check::Type::name()
  bool required = false;
  std::string dflt;        // "required", the documented default, its value, or "none"
  std::string doc;
};

// A name an expression could use at a place: what completion offers.
struct ScopeName {
  std::string name;
  // What declares it: Let, Declaration, Import (an alias), Param, LetMember,
  // Layer, Repeat; Name for a built-in function, which is declared nowhere.
  NodeKind kind = NodeKind::Let;
  std::optional<syntax::DeclKind> declKind;  // a declaration's kind (`model`, `mapping`, ...)
  std::optional<Location> at;                // none for a built-in
};

// A name used (not declared) in a file, and what it refers to.
struct ResolvedName {
  base::Span use;
  Location definition;
};

// "number", "bytes", "list of number, 3 items", "mapping", "model definition (layers: int, ...)".
std::string describeType(const check::Value& v);

class Snapshot {
 public:
  struct State;  // the checked program and everything it refers to (queries.cpp)
  explicit Snapshot(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // The root file of the check, as given.
  const std::string& rootPath() const;
  // True when the check found no errors.
  bool checked() const;
  const base::Diagnostics& diagnostics() const;
  const base::SourceMap& sources() const;
  // The paths of the user's modules the check read (not the standard library's), the root's first.
  std::vector<std::string> modulePaths() const;
  // The text of a file of the snapshot (null: not one of its files).
  const std::string* text(const std::string& path) const;

  // The innermost node at the position.
  std::optional<Node> nodeAt(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // The top-level item (declaration, let, import, run) around the position.
  std::optional<Node> declarationAt(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // Where the name at the position is declared: a `let`, a declaration, a
  // parameter, a block's `let`, a model's layer, an import's alias; in the
  // same file, an imported module, or the standard library. On a declaring
  // name, that declaration itself. Built-in functions, enumeration members
  // and phase variables have no declaration.
  std::optional<Location> definitionOf(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // Every use of what definitionOf() finds, in the files of the session (not
  // the standard library), in file and then text order; not the declaration.
  std::vector<Location> usesOf(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // Where `name` is declared as the top level of `path` sees it (for `:doc`).
  std::optional<Location> definitionOfName(const std::string& path, const std::string& name) const;
  // The value the checker gave the innermost expression at the position (the
  // evaluator is run again over this snapshot's text, watching it).
  std::optional<ValueAndType> valueAndTypeAt(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // The field whose name is at the position, in a declaration's (or a
  // phase's, or a nested block's) body: its schema entry.
  std::optional<FieldInfo> fieldAt(const std::string& path, std::uint32_t line, std::uint32_t column) const;

  // The names an expression written at the place could use, innermost
  // first: the block's `let`s, layers and repeats written before it, the
  // definition's parameters, then the top level (as topLevelNames), then the
  // built-in functions. The place is between characters, as an editor's
  // cursor is: the column may be one past the end of the line, and the place
  // need not be in an expression. A file that did not parse has only the
  // built-ins.
  std::vector<ScopeName> namesInScope(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // The names the top level of `path` sees: its import aliases, its own
  // `let`s and declarations, and those of the modules it imports without an
  // alias (each name once, as the evaluator finds it). Empty when the file did
  // not parse.
  std::vector<ScopeName> topLevelNames(const std::string& path) const;
  // Every use of a name in `path` that resolves (as definitionOf would), in
  // text order: what an editor colours by meaning. Built-ins, enumeration
  // members and phase variables are left out.
  std::vector<ResolvedName> resolvedNames(const std::string& path) const;
  // The module an import's path (the string after `import`) at the place
  // names: its file, with an empty span at its start.
  std::optional<Location> importedModuleAt(const std::string& path, std::uint32_t line, std::uint32_t column) const;
  // The syntax tree of a file of the snapshot, as the check parsed it (null:
  // not one of its files, or it did not parse). Its spans are the snapshot's.
  std::shared_ptr<const syntax::Program> programOf(const std::string& path) const;

  // An expression typed outside the script (the REPL's input), evaluated in
  // the scope of the root file's top level, without adding it to the script.
  struct Evaluation {
    std::optional<check::Value> value;  // none when it did not parse or evaluate
    std::string type;                   // describeType(value)
    // For a model: its layer and parameter counts (the `layers` and `params` properties), when countable.
    std::optional<double> layers, params;
    base::Diagnostics diagnostics;      // the check's and the expression's
    base::SourceMap sources;            // what the diagnostics' spans refer to (the input's file last)
    base::FileId input = base::kNoFile;
    std::shared_ptr<const void> keep;   // what the value refers to (scopes, modules)
  };
  Evaluation evaluate(const std::string& expression, const std::string& inputName = "<input>") const;

 private:
  std::shared_ptr<State> state_;
};

// For Session::snapshot(): check `root` with a checker of the snapshot's own,
// over a copy of `sources` (which then gains the files the check read) and
// `texts` in place of the disk; `cache` is the session's parsed modules.
std::shared_ptr<const Snapshot> checkSnapshot(base::SourceMap& sources, check::ModuleCache& cache,
                                              const std::map<std::string, std::string>& texts, base::FileId root);

}  // namespace ipu::session
