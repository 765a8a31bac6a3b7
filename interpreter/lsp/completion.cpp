#include "interpreter/lsp/completion.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "interpreter/check/modules.h"
#include "interpreter/check/schema.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"

namespace ipu::lsp {

namespace {

using Place = CompletionContext::Place;
using BlockKind = CompletionContext::Block;

// What a `{` opens, from its header and the block around it.
struct BlockInfo {
  BlockKind kind = BlockKind::Unknown;
  std::optional<syntax::DeclKind> declaration;
  const check::Schema* schema = nullptr;
};

// The schema a field's value block is validated against (a struct, or a record kind).
const check::Schema* schemaOfField(const check::Schema* parent, const std::string& field) {
  if (parent == nullptr) return nullptr;
  const check::Field* f = parent->find(field);
  if (f == nullptr) return nullptr;
  if (f->type.kind == check::TypeKind::Struct) return f->type.schema;
  if (f->type.kind == check::TypeKind::Record) return check::schemaFor(f->type.recordKind);
  return nullptr;
}

class Scanner {
 public:
  Scanner(std::string_view text, std::size_t cursor) : text_(text), cursor_(cursor), tokens_(scanTokens(text)) {}

  CompletionContext run() {
    CompletionContext c;
    c.replaceBegin = cursor_;
    std::size_t before = 0;  // tokens [0, before) end before what is being typed
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      const Token& t = tokens_[i];
      if (t.begin >= cursor_) break;
      const bool inside = cursor_ < t.end || (cursor_ == t.end && !t.closed);
      switch (t.kind) {
        case TokenKind::LineComment:
          if (cursor_ <= t.end) return c;  // to the end of its line
          break;
        case TokenKind::BlockComment:
          if (inside) return c;
          break;
        case TokenKind::String:
          if (inside) {
            // `import "std/mo|`: the module path typed so far.
            if (i > 0 && word(tokens_[i - 1]) == "import" && text_.compare(t.begin, 3, "\"\"\"") != 0) {
              c.place = Place::ImportPath;
              c.replaceBegin = t.begin + 1;
              c.prefix = std::string(text_.substr(t.begin + 1, cursor_ - t.begin - 1));
            }
            return c;
          }
          break;
        case TokenKind::Number:
          if (cursor_ <= t.end) return c;  // typing a number
          break;
        case TokenKind::Word:
          if (cursor_ <= t.end) {
            c.replaceBegin = t.begin;
            c.prefix = std::string(text_.substr(t.begin, cursor_ - t.begin));
            before = i;
            return classify(c, before);
          }
          break;
        case TokenKind::Punctuation: case TokenKind::Other: break;
      }
      before = i + 1;
    }
    return classify(c, before);
  }

 private:
  std::string_view word(const Token& t) const {
    return t.kind == TokenKind::Word ? text_.substr(t.begin, t.end - t.begin) : std::string_view();
  }
  bool is(const Token& t, char c) const { return t.kind == TokenKind::Punctuation && t.end == t.begin + 1 && text_[t.begin] == c; }
  bool isComment(const Token& t) const { return t.kind == TokenKind::LineComment || t.kind == TokenKind::BlockComment; }
  bool lineBreakBetween(std::size_t from, std::size_t to) const {
    const std::size_t nl = text_.find_first_of("\n\r", from);
    return nl != std::string_view::npos && nl < to;
  }

  // The tokens before `{` number `open` that say what it opens: those on
  // its line back to the enclosing opener (or the previous line's, for a
  // brace on a line of its own).
  std::vector<std::size_t> header(std::size_t open, std::size_t stop) const {
    std::vector<std::size_t> out;
    bool crossedLine = false;
    int depth = 0;  // brackets closed in the header (`bert(layers: 2, heads: 4) with {`)
    for (std::size_t j = open; j-- > 0;) {
      if (stop != kNone && j <= stop) break;
      const Token& t = tokens_[j];
      if (isComment(t)) continue;
      const std::size_t next = out.empty() ? tokens_[open].begin : tokens_[out.front()].begin;
      if (depth == 0 && lineBreakBetween(t.end, next)) {
        if (!out.empty() || crossedLine) break;
        crossedLine = true;
      }
      if (is(t, ')') || is(t, ']')) ++depth;
      if ((is(t, '(') || is(t, '[')) && depth > 0) --depth;
      if (depth == 0 && (is(t, ',') || is(t, '}') || is(t, ';') || is(t, '{'))) break;
      out.insert(out.begin(), j);
    }
    return out;
  }

  BlockInfo blockInfo(const std::vector<std::size_t>& h, const std::optional<BlockInfo>& parent) const {
    BlockInfo b;
    if (h.empty()) return b;
    const std::string_view first = word(tokens_[h[0]]);
    if (!parent) {
      // A top-level declaration: its body, or the block of its `= base with { ... }`.
      if (auto k = declKindNamed(first)) {
        b.declaration = k;
        if (*k == syntax::DeclKind::Model) {
          const bool valueForm = std::any_of(h.begin(), h.end(), [&](std::size_t i) { return is(tokens_[i], '='); });
          b.kind = valueForm ? BlockKind::Unknown : BlockKind::Model;
          return b;
        }
        b.kind = BlockKind::Declaration;
        b.schema = check::schemaFor(syntax::spelling(*k));
      }
      return b;
    }
    if (first == "phase") {
      b.kind = BlockKind::Phase;
      b.schema = check::schemaFor("phase");
      return b;
    }
    if (first == "let" || first == "layer" || first == "repeat") return b;
    // `pipeline {`, `search {`, `flops: {`, `optimizer: lamb with {`
    if (h.size() >= 1 && tokens_[h[0]].kind == TokenKind::Word) {
      const std::string name(first);
      const bool blockField = h.size() == 1;
      const bool valueField = h.size() >= 2 && is(tokens_[h[1]], ':');
      if (blockField || valueField) {
        const check::Field* f = parent->schema != nullptr ? parent->schema->find(name) : nullptr;
        if (name == "pipeline" || (f != nullptr && f->type.kind == check::TypeKind::Pipeline)) {
          b.kind = BlockKind::Pipeline;
          return b;
        }
        if (const check::Schema* s = schemaOfField(parent->schema, name)) {
          b.kind = BlockKind::Struct;
          b.schema = s;
        }
      }
    }
    return b;
  }

  CompletionContext& classify(CompletionContext& c, std::size_t before) {
    // The brackets open before the cursor, outermost first.
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < before; ++i) {
      const Token& t = tokens_[i];
      if (is(t, '{') || is(t, '(') || is(t, '[')) open.push_back(i);
      else if (is(t, '}') || is(t, ')') || is(t, ']')) {
        const char want = is(t, '}') ? '{' : is(t, ')') ? '(' : '[';
        auto it = std::find_if(open.rbegin(), open.rend(), [&](std::size_t o) { return is(tokens_[o], want); });
        if (it != open.rend()) open.erase(std::next(it).base(), open.end());
      }
    }
    // What each open `{` builds, from the outside in.
    std::optional<BlockInfo> inner;
    std::size_t innerBrace = kNone;
    for (std::size_t k = 0; k < open.size(); ++k) {
      if (!is(tokens_[open[k]], '{')) continue;
      const std::vector<std::size_t> h = header(open[k], k == 0 ? kNone : open[k - 1]);
      if (k == 0 && h.size() >= 2 && word(tokens_[h[0]]) == "mapping") c.mapping = std::string(word(tokens_[h[1]]));
      inner = blockInfo(h, inner);
      innerBrace = open[k];
    }
    // The last token before the word being typed, skipping comments.
    std::optional<std::size_t> prev;
    for (std::size_t i = before; i-- > 0;)
      if (!isComment(tokens_[i])) {
        prev = i;
        break;
      }

    if (open.empty()) {
      if (!prev || lineBreakBetween(tokens_[*prev].end, c.replaceBegin)) {
        c.place = Place::Statement;
        return c;
      }
      const std::string_view p = word(tokens_[*prev]);
      if (p == "run") {
        c.place = Place::Value;
        c.afterRun = true;
        return c;
      }
      if (declKindNamed(p) || p == "let" || p == "import" || p == "as") return c;  // a name being declared
      c.place = Place::Value;
      return c;
    }
    if (inner) {
      c.block = inner->kind;
      c.declaration = inner->declaration;
      c.schema = inner->schema;
    }
    const std::size_t innermost = open.back();
    // `ipu 0: encoder[|`: an index of a layer path.
    if (is(tokens_[innermost], '[') && c.block == BlockKind::Pipeline && innermost >= 1 &&
        tokens_[innermost - 1].kind == TokenKind::Word && innerBrace != kNone) {
      std::size_t lineFirst = innermost - 1;
      while (lineFirst > innerBrace + 1 && !lineBreakBetween(tokens_[lineFirst - 1].end, tokens_[lineFirst].begin)) --lineFirst;
      const std::string_view lead = word(tokens_[lineFirst]);
      if (lineFirst > innerBrace && (lead == "ipu" || lead == "stage")) {
        c.place = Place::StageLayer;
        c.layerGroup = std::string(word(tokens_[innermost - 1]));
        return c;
      }
    }
    if (!is(tokens_[innermost], '{')) {
      // In a call's arguments or a list: a value; `field: [` gives the field.
      c.place = Place::Value;
      if (is(tokens_[innermost], '[') && innermost >= 2 && is(tokens_[innermost - 1], ':') &&
          tokens_[innermost - 2].kind == TokenKind::Word && innerBrace != kNone && innermost - 2 > innerBrace)
        c.field = std::string(word(tokens_[innermost - 2]));
      return c;
    }
    // The member being written: the tokens of the innermost block on the
    // cursor's line, after its last `,` (nested brackets are closed).
    std::size_t segment = innermost + 1;
    int depth = 0;
    for (std::size_t i = innermost + 1; i < before; ++i) {
      const Token& t = tokens_[i];
      if (isComment(t)) continue;
      if (depth == 0 && i > innermost + 1 && lineBreakBetween(tokens_[i - 1].end, t.begin)) segment = i;
      if (is(t, '{') || is(t, '(') || is(t, '[')) ++depth;
      else if (is(t, '}') || is(t, ')') || is(t, ']')) depth = std::max(0, depth - 1);
      else if (depth == 0 && is(t, ',')) segment = i + 1;
    }
    std::vector<std::size_t> seg;
    for (std::size_t i = segment; i < before; ++i)
      if (!isComment(tokens_[i])) seg.push_back(i);
    if (!seg.empty() && lineBreakBetween(tokens_[seg.back()].end, c.replaceBegin)) seg.clear();
    if (seg.empty()) {
      c.place = Place::Member;
      c.written = writtenFields(innermost, c.replaceBegin);
      return c;
    }
    const std::string_view first = word(tokens_[seg[0]]);
    const bool hasEquals = std::any_of(seg.begin(), seg.end(), [&](std::size_t i) { return is(tokens_[i], '='); });
    if ((first == "ipu" || first == "stage") && c.block == BlockKind::Pipeline) {
      const bool afterColon = std::any_of(seg.begin(), seg.end(), [&](std::size_t i) { return is(tokens_[i], ':'); });
      c.place = afterColon ? Place::StageLayer : Place::Nothing;
      return c;
    }
    if (first == "let" || first == "layer" || first == "repeat" || first == "phase") {
      c.place = hasEquals ? Place::Value : Place::Nothing;
      return c;
    }
    c.place = Place::Value;
    if (seg.size() >= 2 && tokens_[seg[0]].kind == TokenKind::Word && is(tokens_[seg[1]], ':')) c.field = std::string(first);
    return c;
  }

  // The names given a value (`name:`) or a block (`name {`) at the top of the
  // block opened by token `open`, anywhere in it, except the one at `typing`.
  std::set<std::string> writtenFields(std::size_t open, std::size_t typing) const {
    std::set<std::string> out;
    int depth = 0;
    for (std::size_t i = open + 1; i < tokens_.size(); ++i) {
      const Token& t = tokens_[i];
      if (is(t, '{') || is(t, '(') || is(t, '[')) {
        ++depth;
        continue;
      }
      if (is(t, '}') || is(t, ')') || is(t, ']')) {
        if (depth-- == 0) break;
        continue;
      }
      if (depth == 0 && t.kind == TokenKind::Word && t.begin != typing && i + 1 < tokens_.size() &&
          (is(tokens_[i + 1], ':') || is(tokens_[i + 1], '{')))
        out.insert(std::string(word(t)));
    }
    return out;
  }

  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::string_view text_;
  std::size_t cursor_;
  std::vector<Token> tokens_;
};

// ------------------------------------------------------------------- items

struct ItemList {
  Json items = Json::array();
  std::set<std::string> labels;
  Json range;  // the textEdit range: what is being typed

  void add(const std::string& label, CompletionKind kind, const std::string& sortGroup, const std::string& detail = {},
           const std::string& doc = {}, const std::string& insert = {}, bool snippet = false, bool markdown = true) {
    if (label.empty() || !labels.insert(label).second) return;
    Json item{{"label", label}, {"kind", static_cast<int>(kind)}};
    if (!detail.empty()) item["detail"] = detail;
    if (!doc.empty()) item["documentation"] = markdown ? Json{{"kind", "markdown"}, {"value", doc}} : Json(doc);
    item["sortText"] = sortGroup + label;
    item["filterText"] = label;
    item["textEdit"] = Json{{"range", range}, {"newText", insert.empty() ? label : insert}};
    if (snippet) item["insertTextFormat"] = 2;
    items.push_back(std::move(item));
  }
};

std::string fieldDoc(const check::Field& f) {
  const std::string dflt = f.required ? "required" : !f.defaultDoc.empty() ? f.defaultDoc : f.dflt.isUnknown() ? "none" : f.dflt.show();
  return f.doc + "\n\n" + f.type.name() + " · default: " + dflt;
}

// The enumeration members a field's value may be.
std::vector<std::string> symbolsOf(const check::Type& type) {
  std::vector<std::string> out = type.symbols;
  if (type.kind == check::TypeKind::Bool) out = {"on", "off"};
  if (type.kind == check::TypeKind::LossScale) out = {"none", "dynamic"};
  if (type.kind == check::TypeKind::List && type.element) {
    auto more = symbolsOf(*type.element);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

CompletionKind kindOfName(const session::ScopeName& n) {
  using K = session::NodeKind;
  switch (n.kind) {
    case K::Name: return CompletionKind::Function;  // a built-in
    case K::Import: return CompletionKind::Module;
    case K::Let: case K::LetMember: return CompletionKind::Constant;
    case K::Param: return CompletionKind::Variable;
    case K::Layer: case K::Repeat: return CompletionKind::Property;
    case K::Declaration:
      if (n.declKind == syntax::DeclKind::Model || n.declKind == syntax::DeclKind::Layer) return CompletionKind::Class;
      if (n.declKind == syntax::DeclKind::Chip || n.declKind == syntax::DeclKind::Machine ||
          n.declKind == syntax::DeclKind::Pod)
        return CompletionKind::Struct;
      if (n.declKind == syntax::DeclKind::Training) return CompletionKind::Event;
      return CompletionKind::Struct;
    default: return CompletionKind::Variable;
  }
}

// The record kind a field's value is, when it names a declaration (`mapping: m`).
std::optional<syntax::DeclKind> wantedDeclaration(const check::Schema* schema, const std::string& field) {
  if (schema == nullptr || field.empty()) return std::nullopt;
  const check::Field* f = schema->find(field);
  if (f == nullptr) return std::nullopt;
  if (f->type.kind == check::TypeKind::Model) return syntax::DeclKind::Model;
  if (f->type.kind == check::TypeKind::Record) return declKindNamed(f->type.recordKind);
  return std::nullopt;
}

}  // namespace

CompletionContext completionContext(std::string_view text, std::size_t cursor) {
  return Scanner(text, std::min(cursor, text.size())).run();
}

Json complete(Workspace& workspace, const Analysis& a, Position position, const CompletionOptions& options) {
  const std::size_t cursor = a.lines->offsetOf(position, workspace.encoding());
  const CompletionContext c = completionContext(a.text(), cursor);
  ItemList list;
  list.range = workspace.range(a.text(), c.replaceBegin, cursor);
  const bool md = options.markdownDocs;

  auto addNames = [&](std::optional<syntax::DeclKind> preferred) {
    std::vector<session::ScopeName> names;
    const base::LineCol lc = sessionLineCol(a.text(), cursor);
    if (a.program) {
      names = a.snapshot->namesInScope(a.queryPath, lc.line, lc.column);
    } else {
      // Mid-edit: the declarations written now (read lexically), then the
      // top level as it last parsed, or as its imports alone give it.
      const LexicalTopLevel lexical = readTopLevel(a.text());
      for (const auto& [name, kind] : lexical.declarations) {
        session::ScopeName n;
        n.name = name;
        n.kind = kind ? session::NodeKind::Declaration : session::NodeKind::Let;
        n.declKind = kind;
        names.push_back(std::move(n));
      }
      std::vector<session::ScopeName> top = workspace.namingSnapshot(a, lexical.imports)->namesInScope(a.queryPath, 0, 0);
      names.insert(names.end(), top.begin(), top.end());
    }
    for (const auto& n : names) {
      std::string detail;
      if (n.declKind) detail = syntax::spelling(*n.declKind);
      else if (n.kind == session::NodeKind::Name) detail = "built-in function";
      else detail = session::name(n.kind);
      if (n.at && n.at->standard) detail += " · " + n.at->path;
      // A declaration of the kind the field takes comes first; then the script's, then the rest.
      const bool wanted = preferred && n.declKind == preferred;
      const std::string group = wanted ? "1" : n.kind == session::NodeKind::Name ? "4" : n.at && n.at->standard ? "3" : "2";
      if (c.afterRun && n.declKind != syntax::DeclKind::Training) continue;
      list.add(n.name, kindOfName(n), group, detail, {}, {}, false, md);
    }
  };

  switch (c.place) {
    case Place::Nothing: break;
    case Place::ImportPath:
      for (const auto& m : check::ModuleLoader::standardModuleNames())
        list.add(m, CompletionKind::Module, "1", "standard module");
      break;
    case Place::Statement: {
      for (syntax::DeclKind k : syntax::allDeclKinds())
        list.add(syntax::spelling(k), CompletionKind::Keyword, "2", "declaration");
      for (const char* k : {"let", "import", "run"}) list.add(k, CompletionKind::Keyword, "2", "item");
      if (options.snippets) {
        list.add("mapping … for … on …", CompletionKind::Snippet, "1", "a mapping of a model onto a pod",
                 "A pipeline of stages, replicas and recomputation (docs/language.md)",
                 "mapping ${1:name} for ${2:model} on ${3:pod} {\n  pipeline {\n    ipu 0: ${4:layers}\n  }\n  replicas: ${5:1}\n}",
                 true, md);
        list.add("training … { phase … }", CompletionKind::Snippet, "1", "a training with one phase",
                 "A mapping, a precision, an optimizer and the phases that run them",
                 "training ${1:name} {\n  mapping: ${2:mapping}\n  precision: ${3:fp16}\n  optimizer: ${4:lamb}\n  phase ${5:main} {\n"
                 "    seq_len: ${6:128}\n    micro_batch: ${7:8}\n    global_batch: ${8:1024}\n    steps: ${9:1000}\n    lr: ${10:0.001}\n  }\n}",
                 true, md);
      }
      break;
    }
    case Place::Member: {
      if (c.schema != nullptr)
        for (const auto& f : c.schema->fields) {
          if (c.written.count(f.name)) continue;
          const bool block = f.type.kind == check::TypeKind::Struct || f.type.kind == check::TypeKind::Pipeline;
          std::string insert = f.name + ": ";
          bool snippet = false;
          if (block && options.snippets) {
            insert = f.type.kind == check::TypeKind::Pipeline ? f.name + " {\n  ipu 0: $0\n}" : f.name + " {\n  $0\n}";
            snippet = true;
          }
          list.add(f.name, CompletionKind::Field, f.required ? "1" : "2", f.type.name(), fieldDoc(f), insert, snippet, md);
        }
      list.add("let", CompletionKind::Keyword, "5", "a name local to the block");
      if (c.block == BlockKind::Model) {
        list.add("layer", CompletionKind::Keyword, "1", "a layer of the model");
        list.add("repeat", CompletionKind::Keyword, "1", "a layer repeated: repeat N as name[i] = ...");
      }
      if (c.block == BlockKind::Pipeline) {
        list.add("ipu", CompletionKind::Keyword, "1", "a pipeline stage on one IPU: ipu N: layers");
        list.add("stage", CompletionKind::Keyword, "1", "a pipeline stage: stage N: layers");
      }
      if (c.block == BlockKind::Declaration && c.declaration == syntax::DeclKind::Training) {
        list.add("phase", CompletionKind::Keyword, "1", "a phase of the training");
        if (options.snippets)
          list.add("phase … { … }", CompletionKind::Snippet, "1", "a phase with its batch, length and learning rate", {},
                   "phase ${1:name} {\n  seq_len: ${2:128}\n  micro_batch: ${3:8}\n  global_batch: ${4:1024}\n  steps: ${5:1000}\n"
                   "  lr: ${6:0.001}\n}",
                   true, md);
      }
      break;
    }
    case Place::Value: {
      const check::Field* f = c.schema != nullptr && !c.field.empty() ? c.schema->find(c.field) : nullptr;
      if (f != nullptr)
        for (const auto& s : symbolsOf(f->type))
          list.add(s, CompletionKind::EnumMember, "0", "`" + c.field + "`: " + f->type.name());
      addNames(wantedDeclaration(c.schema, c.field));
      break;
    }
    case Place::StageLayer: {
      // A layer path being typed rarely checks: the plan of the last version that did.
      auto plan = workspace.planOf(a);
      if (plan == nullptr) plan = workspace.lastPlan(a.document.uri);
      if (plan == nullptr || c.mapping.empty()) break;
      const ir::PhasePlan* phase = nullptr;
      for (const auto& run : plan->runs)
        for (const auto& p : run.phases)
          if (phase == nullptr && p.mapping.name == c.mapping) phase = &p;
      if (phase == nullptr) break;
      // name -> the layers under it, in the plan's order.
      std::vector<std::pair<std::string, std::vector<std::string>>> groups;
      auto add = [&](const std::string& key, const std::string& layer) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
        if (it == groups.end()) groups.push_back({key, {layer}});
        else it->second.push_back(layer);
      };
      for (const auto& l : phase->layers) {
        if (c.layerGroup.empty()) {
          add(l.name.substr(0, l.name.find_first_of("[.")), l.name);
        } else if (l.name.rfind(c.layerGroup + "[", 0) == 0) {
          const std::size_t close = l.name.find(']', c.layerGroup.size() + 1);
          if (close != std::string::npos) add(l.name.substr(c.layerGroup.size() + 1, close - c.layerGroup.size() - 1), l.name);
        }
      }
      int order = 0;
      for (const auto& [key, layers] : groups) {
        std::string detail = layers.size() == 1 ? layers.front() : std::to_string(layers.size()) + " layers: " + layers.front() + " .. " + layers.back();
        char sort[16];
        std::snprintf(sort, sizeof sort, "1%06d", order++);  // the model's order, not the alphabet's
        list.add(key, CompletionKind::Property, sort, detail);
      }
      break;
    }
  }
  return Json{{"isIncomplete", false}, {"items", std::move(list.items)}};
}

}  // namespace ipu::lsp
