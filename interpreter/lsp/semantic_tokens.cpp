#include "interpreter/lsp/semantic_tokens.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "interpreter/check/schema.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/session/queries.h"

namespace ipu::lsp {

namespace {

using namespace syntax;

const char* nameOf(SemanticType t) {
  switch (t) {
    case SemanticType::Namespace: return "namespace";
    case SemanticType::Class: return "class";
    case SemanticType::Struct: return "struct";
    case SemanticType::Parameter: return "parameter";
    case SemanticType::Variable: return "variable";
    case SemanticType::Property: return "property";
    case SemanticType::EnumMember: return "enumMember";
    case SemanticType::Event: return "event";
    case SemanticType::Function: return "function";
    case SemanticType::Method: return "method";
    case SemanticType::Keyword: return "keyword";
    case SemanticType::Comment: return "comment";
    case SemanticType::String: return "string";
    case SemanticType::Number: return "number";
    case SemanticType::Type: return "type";
  }
  return "variable";
}
constexpr SemanticType kAllTypes[] = {
    SemanticType::Namespace, SemanticType::Class,    SemanticType::Struct,   SemanticType::Parameter,
    SemanticType::Variable,  SemanticType::Property, SemanticType::EnumMember, SemanticType::Event,
    SemanticType::Function,  SemanticType::Method,   SemanticType::Keyword,  SemanticType::Comment,
    SemanticType::String,    SemanticType::Number,   SemanticType::Type,
};

constexpr unsigned bit(SemanticModifier m) { return static_cast<unsigned>(m); }

struct Meaning {
  SemanticType type = SemanticType::Variable;
  unsigned modifiers = 0;
};

SemanticType typeOfDeclaration(DeclKind k, bool hasParams) {
  if (hasParams) return SemanticType::Function;
  switch (k) {
    case DeclKind::Model: case DeclKind::Layer: return SemanticType::Class;
    default: return SemanticType::Struct;
  }
}

// What a resolved use's definition makes it.
Meaning meaningOf(const session::Location& def, const session::Snapshot& snap) {
  Meaning m;
  switch (def.kind) {
    case session::NodeKind::Declaration: {
      // The declaring item's first word is its kind (`model`, `mapping`, ...).
      m.type = SemanticType::Struct;
      if (const base::SourceFile* f = snap.sources().find(def.declaration.file)) {
        const std::string& t = f->text();
        std::size_t b = std::min<std::size_t>(def.declaration.begin, t.size()), e = b;
        while (e < t.size() && std::isalpha(static_cast<unsigned char>(t[e]))) ++e;
        const std::string word = t.substr(b, e - b);
        if (word == "model" || word == "layer") m.type = SemanticType::Class;
        // A template (`model bert(...)`): a parameter list right after its name.
        std::size_t after = std::min<std::size_t>(def.span.end, t.size());
        while (after < t.size() && (t[after] == ' ' || t[after] == '\t')) ++after;
        if (after < t.size() && t[after] == '(') m.type = SemanticType::Function;
      }
      break;
    }
    case session::NodeKind::Let: case session::NodeKind::LetMember:
      m.type = SemanticType::Variable;
      m.modifiers |= bit(SemanticModifier::Readonly);
      break;
    case session::NodeKind::Param: m.type = SemanticType::Parameter; break;
    case session::NodeKind::Layer: m.type = SemanticType::Property; break;
    case session::NodeKind::Repeat: m.type = SemanticType::Property; break;
    case session::NodeKind::Phase: m.type = SemanticType::Event; break;
    case session::NodeKind::Import: m.type = SemanticType::Namespace; break;
    default: m.type = SemanticType::Variable; break;
  }
  if (def.standard) m.modifiers |= bit(SemanticModifier::DefaultLibrary);
  return m;
}

// Names of the syntax tree by the offset of their first byte.
class NameCollector {
 public:
  NameCollector(std::map<std::size_t, Meaning>& names, std::map<std::size_t, std::size_t>& ends,
                const std::set<std::string>& builtins)
      : names_(names), ends_(ends), builtins_(builtins) {}

  void item(const Item& it) {
    switch (it.kind) {
      case ItemKind::Import: {
        const auto& i = it.as<ImportItem>();
        if (!i.alias.empty()) put(i.aliasSpan, SemanticType::Namespace, bit(SemanticModifier::Declaration));
        break;
      }
      case ItemKind::Let: {
        const auto& l = it.as<LetItem>();
        put(l.nameSpan, SemanticType::Variable, bit(SemanticModifier::Declaration) | bit(SemanticModifier::Readonly));
        expr(l.value.get());
        break;
      }
      case ItemKind::Run: break;  // a use: resolved below
      case ItemKind::Declaration: {
        const auto& d = it.as<Declaration>();
        put(d.nameSpan, typeOfDeclaration(d.declKind, d.hasParams), bit(SemanticModifier::Declaration));
        for (const auto& p : d.params) {
          put(p.span, SemanticType::Parameter, bit(SemanticModifier::Declaration));
          if (p.typeSpan.valid()) put(p.typeSpan, SemanticType::Type, 0);
          expr(p.dflt.get());
        }
        expr(d.forExpr.get());
        expr(d.onExpr.get());
        expr(d.value.get());
        block(d.body.get());
        break;
      }
    }
  }

 private:
  void put(Span s, SemanticType t, unsigned modifiers) {
    if (!s.valid() || s.end <= s.begin) return;
    names_[s.begin] = Meaning{t, modifiers};
    ends_[s.begin] = s.end;
  }

  void block(const Block* b) {
    if (b == nullptr) return;
    for (const auto& m : b->members) {
      switch (m->kind) {
        case MemberKind::Field: {
          const auto& f = m->as<FieldMember>();
          // A dotted name (`phase.short.micro_batch`, in sweeps) is a path of fields.
          putPath(f.nameSpan, f.name);
          expr(f.value.get());
          break;
        }
        case MemberKind::Block: {
          const auto& bm = m->as<BlockMember>();
          put(bm.nameSpan, SemanticType::Property, 0);
          block(bm.block.get());
          break;
        }
        case MemberKind::Let: {
          const auto& l = m->as<LetMember>();
          put(l.nameSpan, SemanticType::Variable, bit(SemanticModifier::Declaration) | bit(SemanticModifier::Readonly));
          expr(l.value.get());
          break;
        }
        case MemberKind::Layer: {
          const auto& l = m->as<LayerMember>();
          put(l.nameSpan, SemanticType::Property, bit(SemanticModifier::Declaration));
          expr(l.value.get());
          break;
        }
        case MemberKind::Repeat: {
          const auto& r = m->as<RepeatMember>();
          expr(r.count.get());
          put(r.nameSpan, SemanticType::Property, bit(SemanticModifier::Declaration));
          if (!r.indexVar.empty()) put(r.indexSpan, SemanticType::Parameter, bit(SemanticModifier::Declaration));
          expr(r.value.get());
          break;
        }
        case MemberKind::Stage:
          for (const auto& l : m->as<StageMember>().layers) expr(l.get(), SemanticType::Property);
          break;
        case MemberKind::Phase: {
          const auto& p = m->as<PhaseMember>();
          put(p.nameSpan, SemanticType::Event, bit(SemanticModifier::Declaration));
          if (!p.from.empty()) put(p.fromSpan, SemanticType::Event, 0);
          block(p.block.get());
          break;
        }
      }
    }
  }

  void putPath(Span s, const std::string& name) {
    if (name.find('.') == std::string::npos) {
      put(s, SemanticType::Property, 0);
      return;
    }
    std::size_t at = 0;
    while (at <= name.size()) {
      std::size_t dot = name.find('.', at);
      if (dot == std::string::npos) dot = name.size();
      put(Span{s.file, s.begin + static_cast<std::uint32_t>(at), s.begin + static_cast<std::uint32_t>(dot)},
          SemanticType::Property, 0);
      at = dot + 1;
    }
  }

  // `unresolved`: what a name declared nowhere is here (in a stage: a layer path).
  void expr(const Expr* e, std::optional<SemanticType> unresolved = std::nullopt) {
    if (e == nullptr) return;
    switch (e->kind) {
      case ExprKind::Name: {
        const auto& n = e->as<NameExpr>();
        if (unresolved) put(n.span, *unresolved, 0);
        else if (builtins_.count(n.name)) put(n.span, SemanticType::Function, bit(SemanticModifier::DefaultLibrary));
        else if (isContextVariable(n.name))
          put(n.span, SemanticType::Variable, bit(SemanticModifier::Readonly) | bit(SemanticModifier::DefaultLibrary));
        else put(n.span, SemanticType::EnumMember, 0);  // declared nowhere: a member of the field's enumeration
        break;
      }
      case ExprKind::Number: {
        const auto& n = e->as<NumberExpr>();
        if (!n.unit.empty() && n.unit != "%") put(n.unitSpan, SemanticType::Type, 0);
        break;
      }
      case ExprKind::Call: {
        const auto& c = e->as<CallExpr>();
        expr(c.callee.get(), unresolved);
        for (const auto& a : c.args) {
          if (!a.name.empty()) put(a.nameSpan, SemanticType::Parameter, 0);
          expr(a.value.get());
        }
        break;
      }
      case ExprKind::Member: {
        const auto& m = e->as<MemberExpr>();
        expr(m.object.get(), unresolved);
        put(m.memberSpan, SemanticType::Property, 0);
        break;
      }
      case ExprKind::Index:
        expr(e->as<IndexExpr>().object.get(), unresolved);
        expr(e->as<IndexExpr>().index.get());
        break;
      case ExprKind::List: for (const auto& i : e->as<ListExpr>().items) expr(i.get(), unresolved); break;
      case ExprKind::Record: block(e->as<RecordExpr>().block.get()); break;
      case ExprKind::Unary: expr(e->as<UnaryExpr>().operand.get()); break;
      case ExprKind::Binary:
        expr(e->as<BinaryExpr>().lhs.get());
        expr(e->as<BinaryExpr>().rhs.get());
        break;
      case ExprKind::Range:
        expr(e->as<RangeExpr>().lo.get());
        expr(e->as<RangeExpr>().hi.get());
        break;
      case ExprKind::If:
        expr(e->as<IfExpr>().cond.get());
        expr(e->as<IfExpr>().then.get());
        expr(e->as<IfExpr>().otherwise.get());
        break;
      case ExprKind::With:
        expr(e->as<WithExpr>().base.get());
        block(e->as<WithExpr>().block.get());
        break;
      case ExprKind::Schedule: {
        const auto& s = e->as<ScheduleExpr>();
        expr(s.base.get());
        expr(s.per.get());
        expr(s.warmup.get());
        if (s.decay) {
          put(s.decay->kindSpan, SemanticType::Function, bit(SemanticModifier::DefaultLibrary));
          for (const auto& a : s.decay->args) {
            if (!a.name.empty()) put(a.nameSpan, SemanticType::Parameter, 0);
            expr(a.value.get());
          }
          expr(s.decay->end.get());
        }
        break;
      }
      case ExprKind::String: case ExprKind::Bool: case ExprKind::Lua: break;
    }
  }

  static bool isContextVariable(const std::string& n) {
    const auto& vars = check::contextVariables();
    return std::find(vars.begin(), vars.end(), n) != vars.end();
  }

  std::map<std::size_t, Meaning>& names_;
  std::map<std::size_t, std::size_t>& ends_;
  const std::set<std::string>& builtins_;
};

}  // namespace

Json semanticTokensLegend() {
  Json types = Json::array();
  for (SemanticType t : kAllTypes) types.push_back(nameOf(t));
  return Json{{"tokenTypes", types}, {"tokenModifiers", Json::array({"declaration", "readonly", "defaultLibrary"})}};
}

std::vector<SemanticToken> semanticTokens(const Analysis& a) {
  const std::string& text = a.text();
  const LineIndex& lines = *a.lines;
  std::map<std::size_t, Meaning> names;
  std::map<std::size_t, std::size_t> ends;
  if (a.program) {
    std::set<std::string> builtins;
    for (const auto& n : a.snapshot->namesInScope(a.queryPath, 0, 0))
      if (n.kind == session::NodeKind::Name) builtins.insert(n.name);
    NameCollector collect(names, ends, builtins);
    for (const auto& item : a.program->items) collect.item(*item);
    // Uses that resolve are coloured by what declares them.
    for (const auto& r : a.snapshot->resolvedNames(a.queryPath)) {
      names[r.use.begin] = meaningOf(r.definition, *a.snapshot);
      ends[r.use.begin] = r.use.end;
    }
  }
  std::vector<SemanticToken> out;
  // One token per line of [begin, end).
  auto emit = [&](std::size_t begin, std::size_t end, SemanticType type, unsigned modifiers) {
    while (begin < end) {
      const std::uint32_t line = lines.lineOf(begin);
      const std::size_t stop = std::min(end, lines.lineEnd(line));
      if (stop > begin) out.push_back(SemanticToken{begin, stop, type, modifiers});
      const std::size_t next = lines.lineStart(line + 1);
      if (next <= begin) break;
      begin = next;
    }
  };
  for (const Token& t : scanTokens(text)) {
    switch (t.kind) {
      case TokenKind::LineComment: case TokenKind::BlockComment: emit(t.begin, t.end, SemanticType::Comment, 0); break;
      case TokenKind::String: emit(t.begin, t.end, SemanticType::String, 0); break;
      case TokenKind::Number: emit(t.begin, t.end, SemanticType::Number, 0); break;
      case TokenKind::Word: {
        if (auto it = names.find(t.begin); it != names.end() && ends[t.begin] == t.end) {
          emit(t.begin, t.end, it->second.type, it->second.modifiers);
        } else if (isKeyword(std::string_view(text).substr(t.begin, t.end - t.begin))) {
          emit(t.begin, t.end, SemanticType::Keyword, 0);
        }
        break;
      }
      case TokenKind::Punctuation: case TokenKind::Other: break;
    }
  }
  return out;
}

Json encodeSemanticTokens(const Analysis& a, const std::vector<SemanticToken>& tokens, PositionEncoding encoding) {
  Json data = Json::array();
  const LineIndex& lines = *a.lines;
  Position previous;
  for (const auto& t : tokens) {
    const Position start = lines.positionOf(t.begin, encoding);
    const Position end = lines.positionOf(t.end, encoding);
    if (end.line != start.line || end.character <= start.character) continue;
    data.push_back(start.line - previous.line);
    data.push_back(start.line == previous.line ? start.character - previous.character : start.character);
    data.push_back(end.character - start.character);
    data.push_back(static_cast<int>(t.type));
    data.push_back(t.modifiers);
    previous = start;
  }
  return Json{{"data", std::move(data)}};
}

}  // namespace ipu::lsp
