#include "interpreter/session/queries.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "interpreter/check/checker.h"
#include "interpreter/check/prelude.h"
#include "interpreter/check/schema.h"
#include "interpreter/syntax/parser.h"

namespace ipu::session {

using namespace syntax;
using base::FileId;
using base::Span;

const char* name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Import: return "import";
    case NodeKind::Let: return "let";
    case NodeKind::Declaration: return "declaration";
    case NodeKind::Run: return "run";
    case NodeKind::Param: return "parameter";
    case NodeKind::Field: return "field";
    case NodeKind::Block: return "block";
    case NodeKind::LetMember: return "let member";
    case NodeKind::Layer: return "layer member";
    case NodeKind::Repeat: return "repeat member";
    case NodeKind::Stage: return "pipeline stage";
    case NodeKind::Phase: return "phase";
    case NodeKind::Number: return "number";
    case NodeKind::String: return "string";
    case NodeKind::Bool: return "bool";
    case NodeKind::Name: return "name";
    case NodeKind::List: return "list";
    case NodeKind::Record: return "record";
    case NodeKind::Call: return "call";
    case NodeKind::Member: return "member access";
    case NodeKind::Index: return "index";
    case NodeKind::Unary: return "unary operation";
    case NodeKind::Binary: return "binary operation";
    case NodeKind::Range: return "range";
    case NodeKind::If: return "if";
    case NodeKind::With: return "with";
    case NodeKind::Lua: return "lua";
    case NodeKind::Schedule: return "schedule";
  }
  return "?";
}

// `counted`: say how many items a list has (not for lists inside a list).
static std::string typeName(const check::Value& v, bool counted) {
  using check::ValueKind;
  switch (v.kind) {
    case ValueKind::Number: return v.percent ? "fraction" : v.dim.dimensionless() ? "number" : v.dim.describe();
    case ValueKind::Bool: return "bool";
    case ValueKind::String: return "string";
    case ValueKind::Symbol: return "symbol";
    case ValueKind::List: {
      // "list of number, 3 items"; "list of bytes or string, 2 items"
      const auto& items = *v.list;
      if (items.empty()) return counted ? "empty list" : "list";
      std::vector<std::string> kinds;
      for (const auto& item : items) {
        std::string k = typeName(item, false);
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
      }
      std::string s = "list of ";
      for (std::size_t i = 0; i < kinds.size(); ++i) s += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i];
      if (!counted) return s;
      return s + ", " + std::to_string(items.size()) + (items.size() == 1 ? " item" : " items");
    }
    case ValueKind::Range: return "range";
    case ValueKind::Record: return v.record->kind.empty() ? "record" : v.record->kind;
    case ValueKind::Template: {
      const auto& d = *v.tmpl->decl;
      std::string s = std::string(syntax::spelling(d.declKind)) + " definition (";
      for (std::size_t i = 0; i < d.params.size(); ++i) {
        if (i) s += ", ";
        s += d.params[i].name;
        if (!d.params[i].type.empty()) s += ": " + d.params[i].type;
        if (d.params[i].dflt) s += " = ...";
      }
      return s + ")";
    }
    case ValueKind::Builtin: return "built-in function";
    case ValueKind::Module: return "module";
    case ValueKind::Model: return "model";
    case ValueKind::Layer: case ValueKind::LayerRef: return "layer";
    case ValueKind::Selection: return "layer selection";
    case ValueKind::Pipeline: return "pipeline";
    case ValueKind::Lua: return "Lua";
    case ValueKind::Schedule: return "learning-rate schedule";
    case ValueKind::Unknown: return "unknown";
  }
  return "?";
}

std::string describeType(const check::Value& v) { return typeName(v, true); }

namespace {

// Calls onExpr for each expression directly under `e` and onBlock for each
// block (a record's, a `with`'s), in source order: the one place that knows
// the shape of every expression, for the walkers below.
template <class OnExpr, class OnBlock>
void forEachChild(const Expr& e, OnExpr&& onExpr, OnBlock&& onBlock) {
  switch (e.kind) {
    case ExprKind::List: for (const auto& i : e.as<ListExpr>().items) onExpr(i.get()); break;
    case ExprKind::Record: onBlock(e.as<RecordExpr>().block.get()); break;
    case ExprKind::Call: {
      const auto& c = e.as<CallExpr>();
      onExpr(c.callee.get());
      for (const auto& a : c.args) onExpr(a.value.get());
      break;
    }
    case ExprKind::Member: onExpr(e.as<MemberExpr>().object.get()); break;
    case ExprKind::Index:
      onExpr(e.as<IndexExpr>().object.get());
      onExpr(e.as<IndexExpr>().index.get());
      break;
    case ExprKind::Unary: onExpr(e.as<UnaryExpr>().operand.get()); break;
    case ExprKind::Binary:
      onExpr(e.as<BinaryExpr>().lhs.get());
      onExpr(e.as<BinaryExpr>().rhs.get());
      break;
    case ExprKind::Range:
      onExpr(e.as<RangeExpr>().lo.get());
      onExpr(e.as<RangeExpr>().hi.get());
      break;
    case ExprKind::If: {
      const auto& i = e.as<IfExpr>();
      onExpr(i.cond.get());
      onExpr(i.then.get());
      onExpr(i.otherwise.get());
      break;
    }
    case ExprKind::With:
      onExpr(e.as<WithExpr>().base.get());
      onBlock(e.as<WithExpr>().block.get());
      break;
    case ExprKind::Schedule: {
      const auto& sc = e.as<ScheduleExpr>();
      onExpr(sc.base.get());
      onExpr(sc.per.get());
      onExpr(sc.warmup.get());
      if (sc.decay) {
        for (const auto& a : sc.decay->args) onExpr(a.value.get());
        onExpr(sc.decay->end.get());
      }
      break;
    }
    case ExprKind::Number: case ExprKind::String: case ExprKind::Bool: case ExprKind::Name: case ExprKind::Lua: break;
  }
}

bool contains(Span s, FileId file, std::uint32_t off) { return s.file == file && s.begin <= off && off < s.end; }

// ------------------------------------------------------------ nodes at a place

// The chain of nodes from the item down to the innermost one containing `off`.
struct Path {
  std::vector<Node> nodes;
  std::vector<const Expr*> exprs;  // the expressions among them, outermost first
  const Item* item = nullptr;
};

class Finder {
 public:
  Finder(FileId file, std::uint32_t off, Path& out) : file_(file), off_(off), out_(out) {}

  void item(const Item& it) {
    if (!contains(it.span, file_, off_)) return;
    out_.item = &it;
    switch (it.kind) {
      case ItemKind::Import: {
        const auto& i = it.as<ImportItem>();
        add(NodeKind::Import, it.span, i.alias.empty() ? i.path : i.alias);
        break;
      }
      case ItemKind::Let: {
        const auto& l = it.as<LetItem>();
        add(NodeKind::Let, it.span, l.name);
        expr(l.value.get());
        break;
      }
      case ItemKind::Run: add(NodeKind::Run, it.span, it.as<RunItem>().name); break;
      case ItemKind::Declaration: {
        const auto& d = it.as<Declaration>();
        add(NodeKind::Declaration, it.span, d.name);
        for (const auto& p : d.params) {
          Span whole = p.span;
          if (p.dflt) whole = Span::cover(whole, p.dflt->span);
          if (p.typeSpan.valid()) whole = Span::cover(whole, p.typeSpan);
          if (contains(whole, file_, off_)) {
            add(NodeKind::Param, p.span, p.name);
            expr(p.dflt.get());
          }
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
  void add(NodeKind k, Span s, std::string n = {}) { out_.nodes.push_back(Node{k, s, std::move(n)}); }

  void block(const Block* b) {
    if (b == nullptr || !contains(b->span, file_, off_)) return;
    for (const auto& m : b->members) member(*m);
  }

  void member(const Member& m) {
    if (!contains(m.span, file_, off_)) return;
    switch (m.kind) {
      case MemberKind::Field: {
        const auto& f = m.as<FieldMember>();
        add(NodeKind::Field, m.span, f.name);
        expr(f.value.get());
        break;
      }
      case MemberKind::Block: {
        const auto& b = m.as<BlockMember>();
        add(NodeKind::Block, m.span, b.name);
        block(b.block.get());
        break;
      }
      case MemberKind::Let: {
        const auto& l = m.as<LetMember>();
        add(NodeKind::LetMember, m.span, l.name);
        expr(l.value.get());
        break;
      }
      case MemberKind::Layer: {
        const auto& l = m.as<LayerMember>();
        add(NodeKind::Layer, m.span, l.name);
        expr(l.value.get());
        break;
      }
      case MemberKind::Repeat: {
        const auto& r = m.as<RepeatMember>();
        add(NodeKind::Repeat, m.span, r.name);
        expr(r.count.get());
        expr(r.value.get());
        break;
      }
      case MemberKind::Stage: {
        add(NodeKind::Stage, m.span);
        for (const auto& l : m.as<StageMember>().layers) expr(l.get());
        break;
      }
      case MemberKind::Phase: {
        const auto& p = m.as<PhaseMember>();
        add(NodeKind::Phase, m.span, p.name);
        block(p.block.get());
        break;
      }
    }
  }

  void expr(const Expr* e) {
    if (e == nullptr || !contains(e->span, file_, off_)) return;
    static const NodeKind kinds[] = {NodeKind::Number, NodeKind::String, NodeKind::Bool,   NodeKind::Name,
                                     NodeKind::List,   NodeKind::Record, NodeKind::Call,   NodeKind::Member,
                                     NodeKind::Index,  NodeKind::Unary,  NodeKind::Binary, NodeKind::Range,
                                     NodeKind::If,     NodeKind::With,   NodeKind::Lua,    NodeKind::Schedule};
    std::string n;
    if (const auto* ne = e->dyn<NameExpr>()) n = ne->name;
    if (const auto* me = e->dyn<MemberExpr>()) n = me->member;
    add(kinds[static_cast<int>(e->kind)], e->span, n);
    out_.exprs.push_back(e);
    forEachChild(*e, [this](const Expr* c) { expr(c); }, [this](const auto* b) { block(b); });
  }

  FileId file_;
  std::uint32_t off_;
  Path& out_;
};

// ------------------------------------------------------------- name resolution

// What a name can be declared by, and where (the span of the declaring name).
struct Definition {
  Span at;
  NodeKind kind = NodeKind::Let;         // what declares it
  Span whole;                            // the whole declaring item or member
  const Declaration* decl = nullptr;     // a declaration (for its parameters, when called)
  const check::Module* module = nullptr;  // an import alias: the module it names
  const check::Module* in = nullptr;      // a top-level item: the module that declares it
};

// A model definition with a body, and the module it is written in.
struct ModelBody {
  const Declaration* decl = nullptr;
  const check::Module* module = nullptr;
};

// Resolves names statically, as the evaluator's scopes do (evaluator.h): a
// block's `let`s and a model's layers from where they are written on, a
// definition's parameters, a repeat's index; then the module's `let`s and
// declarations (inside a declaration, its own name means the imported one),
// import aliases, and the unaliased imports' own names. Built-ins,
// enumeration members and phase variables are declared nowhere.
class Resolver {
 public:
  using Found = std::function<void(Span use, const Definition& def)>;
  explicit Resolver(Found found) : found_(std::move(found)) {}

  void module(const check::Module& m) {
    if (!m.program) return;
    module_ = &m;
    for (const auto& item : m.program->items) {
      self_.clear();
      frames_.clear();
      switch (item->kind) {
        case ItemKind::Let: {
          const auto& l = item->as<LetItem>();
          self_ = l.name;
          expr(l.value.get());
          break;
        }
        case ItemKind::Run: {
          const auto& r = item->as<RunItem>();
          if (auto d = top(r.name)) found_(r.nameSpan, *d);
          break;
        }
        case ItemKind::Declaration: declaration(item->as<Declaration>()); break;
        case ItemKind::Import: break;
      }
    }
  }

  // namesInScope(): while walking, keep the frames in force at `off` of the
  // module walked (the deepest, and of those the last, place the walk passes
  // it).
  void captureAt(std::uint32_t off) { captureOff_ = off; }
  using Frame = std::map<std::string, Definition>;
  const std::vector<Frame>& captured() const { return captured_; }

  // Every name the top level of `m` sees, with what declares it, as top()
  // would find it: aliases, then the module's own items, then the items of
  // the modules it imports without an alias.
  static std::vector<std::pair<std::string, Definition>> topNames(const check::Module& m) {
    std::vector<std::pair<std::string, Definition>> out;
    std::map<std::string, bool> seen;
    auto add = [&](const std::string& n, const Definition& d) {
      if (!n.empty() && seen.emplace(n, true).second) out.emplace_back(n, d);
    };
    auto ownItems = [&](const check::Module& mod) {
      if (!mod.program) return;
      for (const auto& item : mod.program->items) {
        if (const auto* l = item->dyn<LetItem>()) add(l->name, Definition{l->nameSpan, NodeKind::Let, l->span, nullptr, nullptr, &mod});
        if (const auto* d = item->dyn<Declaration>())
          add(d->name, Definition{d->nameSpan, NodeKind::Declaration, d->span, d, nullptr, &mod});
      }
    };
    for (const auto& [imp, dep] : m.imports)
      if (!imp->alias.empty()) add(imp->alias, Definition{imp->aliasSpan, NodeKind::Import, imp->span, nullptr, dep});
    ownItems(m);
    for (const auto& [imp, dep] : m.imports)
      if (imp->alias.empty()) ownItems(*dep);
    return out;
  }

  // `name` as the top level of `m` sees it.
  std::optional<Definition> topOf(const check::Module& m, const std::string& name) {
    module_ = &m;
    self_.clear();
    return top(name);
  }

  // What a declaring name itself declares (the name under the cursor may be one).
  static std::optional<Definition> declaredAt(const check::Module& m, FileId file, std::uint32_t off) {
    std::optional<Definition> out;
    auto at = [&](Span s, NodeKind k, Span whole, const Declaration* d = nullptr) {
      if (contains(s, file, off)) out = Definition{s, k, whole, d, nullptr};
    };
    std::function<void(const Block*)> block;
    std::function<void(const Expr*)> expr = [&](const Expr* e) {
      if (e == nullptr || !contains(e->span, file, off)) return;
      if (const auto* r = e->dyn<RecordExpr>()) block(r->block.get());
      if (const auto* w = e->dyn<WithExpr>()) {
        expr(w->base.get());
        block(w->block.get());
      }
      if (const auto* c = e->dyn<CallExpr>())
        for (const auto& a : c->args) expr(a.value.get());
      if (const auto* l = e->dyn<ListExpr>())
        for (const auto& i : l->items) expr(i.get());
    };
    block = [&](const Block* b) {
      if (b == nullptr || !contains(b->span, file, off)) return;
      for (const auto& mem : b->members) {
        if (const auto* l = mem->dyn<LetMember>()) at(l->nameSpan, NodeKind::LetMember, l->span), expr(l->value.get());
        if (const auto* l = mem->dyn<LayerMember>()) at(l->nameSpan, NodeKind::Layer, l->span), expr(l->value.get());
        if (const auto* r = mem->dyn<RepeatMember>()) {
          at(r->nameSpan, NodeKind::Repeat, r->span);
          if (!r->indexVar.empty()) at(r->indexSpan, NodeKind::Repeat, r->span);
          expr(r->value.get());
        }
        if (const auto* f = mem->dyn<FieldMember>()) expr(f->value.get());
        if (const auto* bm = mem->dyn<BlockMember>()) block(bm->block.get());
        if (const auto* p = mem->dyn<PhaseMember>()) at(p->nameSpan, NodeKind::Phase, p->span), block(p->block.get());
      }
    };
    for (const auto& item : m.program->items) {
      if (!contains(item->span, file, off)) continue;
      if (const auto* l = item->dyn<LetItem>()) at(l->nameSpan, NodeKind::Let, l->span), expr(l->value.get());
      if (const auto* i = item->dyn<ImportItem>(); i != nullptr && !i->alias.empty())
        if (contains(i->aliasSpan, file, off))
          for (const auto& [imp, dep] : m.imports)
            if (imp == i) out = Definition{i->aliasSpan, NodeKind::Import, i->span, nullptr, dep};
      if (const auto* d = item->dyn<Declaration>()) {
        at(d->nameSpan, NodeKind::Declaration, d->span, d);
        for (const auto& p : d->params) at(p.span, NodeKind::Param, p.span), expr(p.dflt.get());
        expr(d->value.get());
        block(d->body.get());
      }
    }
    return out;
  }

 private:
  bool capturing(Span s) const { return captureOff_ && module_ != nullptr && s.file == module_->file && s.begin <= *captureOff_ && *captureOff_ <= s.end; }
  void capture() {
    if (frames_.size() >= captured_.size()) captured_ = frames_;
  }

  std::optional<Definition> top(const std::string& name) const {
    const check::Module& m = *module_;
    for (const auto& [imp, dep] : m.imports)
      if (!imp->alias.empty() && imp->alias == name) return Definition{imp->aliasSpan, NodeKind::Import, imp->span, nullptr, dep};
    if (name != self_)
      if (auto d = own(m, name)) return d;
    for (const auto& [imp, dep] : m.imports)
      if (imp->alias.empty())
        if (auto d = own(*dep, name)) return d;
    return std::nullopt;
  }

  static std::optional<Definition> own(const check::Module& m, const std::string& name) {
    if (!m.program) return std::nullopt;
    for (const auto& item : m.program->items) {
      if (const auto* l = item->dyn<LetItem>(); l != nullptr && l->name == name)
        return Definition{l->nameSpan, NodeKind::Let, l->span, nullptr, nullptr, &m};
      if (const auto* d = item->dyn<Declaration>(); d != nullptr && d->name == name)
        return Definition{d->nameSpan, NodeKind::Declaration, d->span, d, nullptr, &m};
    }
    return std::nullopt;
  }

  std::optional<Definition> lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return f->second;
    return top(name);
  }

  // The model whose layers the stages of mapping `d` (in `m`) name: its `for`,
  // or its base's (`mapping b = a with { ... }`).
  static std::optional<ModelBody> mappingModel(const Declaration& d, const check::Module& m, int depth = 0) {
    if (depth > 8) return std::nullopt;
    if (d.forExpr) return modelOf(d.forExpr.get(), m, depth + 1);
    if (const auto* w = d.value ? d.value->dyn<WithExpr>() : nullptr)
      if (const auto* n = w->base->dyn<NameExpr>())
        if (auto base = Resolver([](Span, const Definition&) {}).topOf(m, n->name);
            base && base->decl != nullptr && base->in != nullptr && base->decl->declKind == DeclKind::Mapping)
          return mappingModel(*base->decl, *base->in, depth + 1);
    return std::nullopt;
  }

  // The model definition an expression of `m` names or calls: `bert_large`,
  // `bert(layers: 2, ...)`, `base with { ... }`, followed through
  // `model small = bert(...)` to the definition with the body.
  static std::optional<ModelBody> modelOf(const Expr* e, const check::Module& m, int depth = 0) {
    if (e == nullptr || depth > 8) return std::nullopt;
    if (const auto* c = e->dyn<CallExpr>()) return modelOf(c->callee.get(), m, depth + 1);
    if (const auto* w = e->dyn<WithExpr>()) return modelOf(w->base.get(), m, depth + 1);
    const auto* n = e->dyn<NameExpr>();
    if (n == nullptr) return std::nullopt;
    auto d = Resolver([](Span, const Definition&) {}).topOf(m, n->name);
    if (!d || d->decl == nullptr || d->in == nullptr || d->decl->declKind != DeclKind::Model) return std::nullopt;
    if (d->decl->body) return ModelBody{d->decl, d->in};
    return modelOf(d->decl->value.get(), *d->in, depth + 1);
  }

  // A `layer` or `repeat` member of a model's body, and the model it holds
  // (for the next part of a path, `encoder[3].attention`).
  static std::optional<std::pair<Definition, std::optional<ModelBody>>> memberOf(const ModelBody& model,
                                                                              const std::string& name) {
    for (const auto& mem : model.decl->body->members) {
      if (const auto* l = mem->dyn<LayerMember>(); l != nullptr && l->name == name)
        return std::make_pair(Definition{l->nameSpan, NodeKind::Layer, l->span}, modelOf(l->value.get(), *model.module));
      if (const auto* r = mem->dyn<RepeatMember>(); r != nullptr && r->name == name)
        return std::make_pair(Definition{r->nameSpan, NodeKind::Repeat, r->span}, modelOf(r->value.get(), *model.module));
    }
    return std::nullopt;
  }

  // A stage's layer selector (`embedding`, `decoder[0..12]`,
  // `encoder[3].attention`) names layers of `model`: reports each part's
  // definition, and returns the model the selected member holds.
  std::optional<ModelBody> selector(const Expr* e, const std::optional<ModelBody>& model) {
    if (e == nullptr) return std::nullopt;
    if (const auto* n = e->dyn<NameExpr>()) {
      if (!model) return std::nullopt;
      auto member = memberOf(*model, n->name);
      if (!member) return std::nullopt;
      found_(n->span, member->first);
      return member->second;
    }
    if (const auto* i = e->dyn<IndexExpr>()) {
      expr(i->index.get());
      return selector(i->object.get(), model);
    }
    if (const auto* m = e->dyn<MemberExpr>()) {
      auto inner = selector(m->object.get(), model);
      if (!inner) return std::nullopt;
      auto member = memberOf(*inner, m->member);
      if (!member) return std::nullopt;
      found_(m->memberSpan, member->first);
      return member->second;
    }
    expr(e);
    return std::nullopt;
  }

  void declaration(const Declaration& d) {
    self_ = d.name;
    stageModel_ = d.declKind == DeclKind::Mapping ? mappingModel(d, *module_) : std::nullopt;
    frames_.emplace_back();
    for (const auto& p : d.params) {
      expr(p.dflt.get());
      frames_.back()[p.name] = Definition{p.span, NodeKind::Param, p.span};
    }
    if (capturing(d.span)) capture();
    expr(d.forExpr.get());
    expr(d.onExpr.get());
    expr(d.value.get());
    block(d.body.get());
  }

  void block(const Block* b) {
    if (b == nullptr) return;
    frames_.emplace_back();
    // A place between members (or after the last) sees the members before it.
    std::uint32_t gapBegin = b->span.begin;
    auto inGap = [&](std::uint32_t gapEnd) {
      return captureOff_ && b->span.file == module_->file && gapBegin <= *captureOff_ && *captureOff_ <= gapEnd &&
             *captureOff_ < b->span.end;
    };
    for (const auto& m : b->members) {
      if (inGap(m->span.begin)) capture();
      gapBegin = m->span.end;
      switch (m->kind) {
        case MemberKind::Field: expr(m->as<FieldMember>().value.get()); break;
        case MemberKind::Block: block(m->as<BlockMember>().block.get()); break;
        case MemberKind::Phase: {
          const auto& p = m->as<PhaseMember>();
          if (!p.from.empty())
            if (auto d = phaseNamed(b, p.from)) found_(p.fromSpan, *d);
          block(p.block.get());
          break;
        }
        case MemberKind::Let: {
          const auto& l = m->as<LetMember>();
          expr(l.value.get());
          frames_.back()[l.name] = Definition{l.nameSpan, NodeKind::LetMember, l.span};
          break;
        }
        case MemberKind::Layer: {
          const auto& l = m->as<LayerMember>();
          expr(l.value.get());
          frames_.back()[l.name] = Definition{l.nameSpan, NodeKind::Layer, l.span};
          break;
        }
        case MemberKind::Repeat: {
          const auto& r = m->as<RepeatMember>();
          expr(r.count.get());
          frames_.emplace_back();
          if (!r.indexVar.empty()) frames_.back()[r.indexVar] = Definition{r.indexSpan, NodeKind::Repeat, r.span};
          expr(r.value.get());
          frames_.pop_back();
          frames_.back()[r.name] = Definition{r.nameSpan, NodeKind::Repeat, r.span};
          break;
        }
        case MemberKind::Stage:
          // Stages name the layers of the mapping's model, wherever it is written.
          for (const auto& e : m->as<StageMember>().layers) selector(e.get(), stageModel_);
          break;
      }
    }
    if (inGap(b->span.end)) capture();
    frames_.pop_back();
  }

  void expr(const Expr* e) {
    if (e == nullptr) return;
    if (capturing(e->span)) capture();
    switch (e->kind) {
      case ExprKind::Name: {
        const auto& n = e->as<NameExpr>();
        if (auto d = lookup(n.name)) found_(n.span, *d);
        break;
      }
      case ExprKind::Call: {
        const auto& c = e->as<CallExpr>();
        expr(c.callee.get());
        // Named arguments name the parameters of the definition called.
        std::optional<Definition> callee;
        if (const auto* n = c.callee->dyn<NameExpr>()) callee = lookup(n->name);
        if (const auto* m = c.callee->dyn<MemberExpr>())
          if (const auto* n = m->object->dyn<NameExpr>())
            if (auto alias = lookup(n->name); alias && alias->module != nullptr) callee = own(*alias->module, m->member);
        for (const auto& a : c.args) {
          if (!a.name.empty() && callee && callee->decl != nullptr)
            for (const auto& p : callee->decl->params)
              if (p.name == a.name) found_(a.nameSpan, Definition{p.span, NodeKind::Param, p.span});
          expr(a.value.get());
        }
        break;
      }
      case ExprKind::Member: {
        const auto& m = e->as<MemberExpr>();
        expr(m.object.get());
        if (const auto* n = m.object->dyn<NameExpr>())
          if (auto alias = lookup(n->name); alias && alias->module != nullptr)
            if (auto d = own(*alias->module, m.member)) found_(m.memberSpan, *d);
        break;
      }
      case ExprKind::With: {
        const auto& w = e->as<WithExpr>();
        expr(w.base.get());
        const Block* savedBlock = withBlock_;
        const Declaration* savedBase = withBase_;
        withBlock_ = w.block.get();
        withBase_ = nullptr;
        if (const auto* n = w.base->dyn<NameExpr>())
          if (auto d = lookup(n->name)) withBase_ = d->decl;
        block(w.block.get());
        withBlock_ = savedBlock;
        withBase_ = savedBase;
        break;
      }
      default:  // the rest only nest expressions and blocks
        forEachChild(*e, [this](const Expr* c) { expr(c); }, [this](const auto* b) { block(b); });
        break;
    }
  }

  // The phase `name` of a training body `b` (a phase may start from one
  // written after it), or of the training it derives from
  // (`training b = a with { phase two from one { ... } }`).
  std::optional<Definition> phaseNamed(const Block* b, const std::string& name) const {
    for (const auto& m : b->members)
      if (const auto* p = m->dyn<PhaseMember>(); p != nullptr && p->name == name)
        return Definition{p->nameSpan, NodeKind::Phase, p->span};
    if (b != withBlock_ || withBase_ == nullptr || withBase_->body == nullptr) return std::nullopt;
    for (const auto& m : withBase_->body->members)
      if (const auto* p = m->dyn<PhaseMember>(); p != nullptr && p->name == name)
        return Definition{p->nameSpan, NodeKind::Phase, p->span};
    return std::nullopt;
  }

  Found found_;
  const check::Module* module_ = nullptr;
  std::optional<ModelBody> stageModel_;    // a mapping's model, for its stages
  const Block* withBlock_ = nullptr;       // the block of the `with` being walked
  const Declaration* withBase_ = nullptr;  // and the declaration it derives from
  std::string self_;            // the top-level item being walked
  std::vector<Frame> frames_;   // innermost last
  std::optional<std::uint32_t> captureOff_;  // captureAt()
  std::vector<Frame> captured_;
};

}  // namespace

// ------------------------------------------------------------------ snapshot

struct Snapshot::State {
  std::string rootPath;
  FileId root = base::kNoFile;
  base::SourceMap sources;
  base::Diagnostics diags;
  // Every user module's text as checked, by canonical path: a re-check reads
  // these, not the disk, so it sees this snapshot's text and parses.
  std::map<std::string, std::string> texts;
  check::ModuleCache cache;
  std::unique_ptr<check::Checker> checker;
  std::unique_ptr<check::CheckedProgram> program;
  std::vector<const check::Module*> modules;  // the user's, then the standard library's

  const check::Module* moduleOf(FileId file) const {
    for (const check::Module* m : modules)
      if (m->file == file) return m;
    return nullptr;
  }
  // A module by the path of its file (as given, or canonical), or a standard module by name.
  const check::Module* moduleNamed(const std::string& path) const {
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).string();
    for (const check::Module* m : modules) {
      const std::string& p = sources.file(m->file).path();
      if (p == path || m->key == path || (!m->standard && !ec && m->key == canonical) ||
          (m->standard && (m->name == path || m->name + ".ipu" == path)))
        return m;
    }
    return nullptr;
  }
  // The module and byte offset of a position; none past the end of a line
  // or the file, in a comment, or in a file that did not parse.
  struct Place {
    const check::Module* module = nullptr;
    std::uint32_t offset = 0;
  };
  std::optional<Place> place(const std::string& path, std::uint32_t line, std::uint32_t column) const {
    const check::Module* m = moduleNamed(path);
    if (m == nullptr || !m->program || line == 0 || column == 0) return std::nullopt;
    const base::SourceFile& f = sources.file(m->file);
    if (line > f.lineCount()) return std::nullopt;
    std::string_view text = f.lineText(line);
    std::uint32_t off = f.lineStart(line), end = off + static_cast<std::uint32_t>(text.size());
    for (std::uint32_t col = 1; col < column; ++col) {
      if (off >= end) return std::nullopt;
      ++off;
      while (off < end && (static_cast<unsigned char>(f.text()[off]) & 0xC0) == 0x80) ++off;
    }
    if (off >= end) return std::nullopt;
    for (const auto& c : m->program->comments)
      if (contains(c.span, m->file, off)) return std::nullopt;
    return Place{m, off};
  }
  Path pathAt(const Place& p) const {
    Path out;
    Finder finder(p.module->file, p.offset, out);
    for (const auto& item : p.module->program->items) finder.item(*item);
    return out;
  }
  Location location(Span s, NodeKind kind = NodeKind::Name, Span whole = {}) const {
    Location l;
    l.kind = kind;
    l.declaration = whole.valid() ? whole : s;
    const base::SourceFile& f = sources.file(s.file);
    l.path = f.path();
    l.span = s;
    l.start = f.lineCol(s.begin);
    l.end = f.lineCol(s.end);
    const check::Module* m = moduleOf(s.file);
    l.standard = m != nullptr && m->standard;
    return l;
  }
  // A check of this snapshot's text again, by a checker of its own (the
  // snapshot is not changed); `prepare` may add files and set a watch first.
  struct Recheck {
    base::SourceMap sources;
    base::Diagnostics diags;
    check::ModuleCache cache;
    std::map<std::string, std::string> texts;
    std::unique_ptr<check::Checker> checker;
    std::unique_ptr<check::CheckedProgram> program;
    ~Recheck() {
      program.reset();
      checker.reset();
    }
  };
  std::shared_ptr<Recheck> recheck(const std::function<void(Recheck&)>& prepare) const {
    auto r = std::make_shared<Recheck>();
    r->sources = sources;
    r->cache = cache;
    r->texts = texts;
    r->checker = std::make_unique<check::Checker>(r->sources, r->diags, &check::Prelude::get(), &r->cache);
    r->checker->loader().setTexts(&r->texts);
    prepare(*r);
    r->program = r->checker->checkFile(root);
    return r;
  }
};

const std::string& Snapshot::rootPath() const { return state_->rootPath; }
bool Snapshot::checked() const { return state_->program != nullptr && !state_->diags.hasErrors(); }
const base::Diagnostics& Snapshot::diagnostics() const { return state_->diags; }
const base::SourceMap& Snapshot::sources() const { return state_->sources; }

std::vector<std::string> Snapshot::modulePaths() const {
  std::vector<std::string> out;
  for (const check::Module* m : state_->modules)
    if (!m->standard) out.push_back(state_->sources.file(m->file).path());
  return out;
}

const std::string* Snapshot::text(const std::string& path) const {
  const check::Module* m = state_->moduleNamed(path);
  return m != nullptr ? &state_->sources.file(m->file).text() : nullptr;
}

std::optional<Node> Snapshot::nodeAt(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  Path found = state_->pathAt(*p);
  if (found.nodes.empty()) return std::nullopt;
  return found.nodes.back();
}

std::optional<Node> Snapshot::declarationAt(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  Path found = state_->pathAt(*p);
  if (found.nodes.empty()) return std::nullopt;
  return found.nodes.front();
}

namespace {
// The definition the name at `off` of `m` refers to, or declares.
std::optional<Definition> definitionAt(const check::Module& m, std::uint32_t off) {
  if (auto d = Resolver::declaredAt(m, m.file, off)) return d;
  std::optional<Definition> out;
  Resolver r([&](Span use, const Definition& def) {
    if (contains(use, m.file, off)) out = def;
  });
  r.module(m);
  return out;
}
}  // namespace

std::optional<Location> Snapshot::definitionOf(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  auto d = definitionAt(*p->module, p->offset);
  if (!d) return std::nullopt;
  return state_->location(d->at, d->kind, d->whole);
}

std::vector<Location> Snapshot::usesOf(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  std::vector<Location> out;
  auto p = state_->place(path, line, column);
  if (!p) return out;
  auto d = definitionAt(*p->module, p->offset);
  if (!d) return out;
  const Span target = d->at;
  std::vector<Span> uses;
  Resolver r([&](Span use, const Definition& def) {
    if (def.at.file == target.file && def.at.begin == target.begin && def.at.end == target.end) uses.push_back(use);
  });
  for (const check::Module* m : state_->modules) r.module(*m);  // the standard library's own uses too
  std::sort(uses.begin(), uses.end(), [](const Span& a, const Span& b) {
    return a.file != b.file ? a.file < b.file : a.begin < b.begin;
  });
  uses.erase(std::unique(uses.begin(), uses.end(),
                         [](const Span& a, const Span& b) { return a.file == b.file && a.begin == b.begin; }),
             uses.end());
  for (const Span& s : uses) out.push_back(state_->location(s));
  return out;
}

std::optional<Location> Snapshot::definitionOfName(const std::string& path, const std::string& nameIn) const {
  const check::Module* m = state_->moduleNamed(path);
  if (m == nullptr || !m->program) return std::nullopt;
  Resolver r([](Span, const Definition&) {});
  auto d = r.topOf(*m, nameIn);
  if (!d) return std::nullopt;
  return state_->location(d->at, d->kind, d->whole);
}

std::optional<ValueAndType> Snapshot::valueAndTypeAt(const std::string& path, std::uint32_t line,
                                                     std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  Path found = state_->pathAt(*p);
  if (found.exprs.empty()) return std::nullopt;
  const Expr* target = found.exprs.back();
  ValueAndType out;
  std::string first;
  state_->recheck([&](State::Recheck& rc) {
    rc.checker->evaluator().watch(target, [&](const check::Value& v) {
      std::string shown = v.show();
      if (out.evaluations++ == 0) {
        out.value = v;
        first = shown;
      } else if (shown != first) {
        out.varies = true;
      }
    });
  });
  if (out.evaluations == 0) return std::nullopt;  // never evaluated (an unused definition's body, a branch not taken)
  out.shown = first;
  out.type = describeType(out.value);
  return out;
}

std::optional<FieldInfo> Snapshot::fieldAt(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  const Item* item = nullptr;
  for (const auto& it : p->module->program->items)
    if (contains(it->span, p->module->file, p->offset)) item = it.get();
  const auto* d = item != nullptr ? item->dyn<Declaration>() : nullptr;
  if (d == nullptr) return std::nullopt;
  const FileId file = p->module->file;
  const std::uint32_t off = p->offset;
  // Walk down the blocks to the member whose name is at the position,
  // knowing the kind of record each block builds.
  std::function<std::optional<FieldInfo>(const Block*, const check::Schema*)> inBlock =
      [&](const Block* b, const check::Schema* schema) -> std::optional<FieldInfo> {
    if (b == nullptr || !contains(b->span, file, off)) return std::nullopt;
    for (const auto& m : b->members) {
      if (!contains(m->span, file, off)) continue;
      std::string fieldName;
      Span nameSpan;
      if (const auto* f = m->dyn<FieldMember>()) fieldName = f->name, nameSpan = f->nameSpan;
      if (const auto* bm = m->dyn<BlockMember>()) {
        fieldName = bm->name, nameSpan = bm->nameSpan;
        if (!contains(nameSpan, file, off)) {
          const check::Field* f = schema != nullptr ? schema->find(bm->name) : nullptr;
          return inBlock(bm->block.get(), f != nullptr && f->type.kind == check::TypeKind::Struct ? f->type.schema : nullptr);
        }
      }
      if (const auto* ph = m->dyn<PhaseMember>()) return inBlock(ph->block.get(), check::schemaFor("phase"));
      if (schema == nullptr || fieldName.empty() || !contains(nameSpan, file, off)) return std::nullopt;
      const check::Field* f = schema->find(fieldName);
      if (f == nullptr) return std::nullopt;
      FieldInfo info;
      info.recordKind = schema->kind;
      info.name = f->name;
      info.nameSpan = nameSpan;
      info.type = f->type.name();
      info.required = f->required;
      info.dflt = f->required ? "required" : !f->defaultDoc.empty() ? f->defaultDoc : f->dflt.isUnknown() ? "none" : f->dflt.show();
      info.doc = f->doc;
      return info;
    }
    return std::nullopt;
  };
  const Block* body = d->body.get();
  if (body == nullptr && d->value != nullptr)
    if (const auto* r = d->value->dyn<RecordExpr>()) body = r->block.get();
  return inBlock(body, check::schemaFor(spelling(d->declKind)));
}

namespace {
ScopeName scopeName(const std::string& n, const Definition& d, const Location& at) {
  ScopeName out;
  out.name = n;
  out.kind = d.kind;
  if (d.decl != nullptr) out.declKind = d.decl->declKind;
  out.at = at;
  return out;
}
}  // namespace

std::vector<ScopeName> Snapshot::topLevelNames(const std::string& path) const {
  std::vector<ScopeName> out;
  const check::Module* m = state_->moduleNamed(path);
  if (m == nullptr || !m->program) return out;
  for (const auto& [n, d] : Resolver::topNames(*m)) out.push_back(scopeName(n, d, state_->location(d.at, d.kind, d.whole)));
  return out;
}

std::vector<ScopeName> Snapshot::namesInScope(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  std::vector<ScopeName> out;
  std::map<std::string, bool> seen;
  auto add = [&](ScopeName n) {
    if (seen.emplace(n.name, true).second) out.push_back(std::move(n));
  };
  const check::Module* m = state_->moduleNamed(path);
  if (m != nullptr && m->program) {
    const base::SourceFile& f = state_->sources.file(m->file);
    if (line >= 1 && column >= 1 && line <= f.lineCount()) {
      // The cursor's byte offset: up to one past the line's last character.
      std::string_view text = f.lineText(line);
      std::uint32_t off = f.lineStart(line), end = off + static_cast<std::uint32_t>(text.size());
      for (std::uint32_t col = 1; col < column && off < end; ++col) {
        ++off;
        while (off < end && (static_cast<unsigned char>(f.text()[off]) & 0xC0) == 0x80) ++off;
      }
      Resolver r([](Span, const Definition&) {});
      r.captureAt(off);
      r.module(*m);
      const auto& frames = r.captured();
      for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame)
        for (const auto& [n, d] : *frame) add(scopeName(n, d, state_->location(d.at, d.kind, d.whole)));
    }
    for (auto& n : topLevelNames(path)) add(std::move(n));
  }
  std::vector<std::string> builtins;
  check::Evaluator& ev = state_->checker->evaluator();
  ev.builtins()->collectNames(builtins, ev);
  std::sort(builtins.begin(), builtins.end());
  for (const auto& b : builtins) {
    ScopeName n;
    n.name = b;
    n.kind = NodeKind::Name;
    add(std::move(n));
  }
  return out;
}

std::vector<ResolvedName> Snapshot::resolvedNames(const std::string& path) const {
  std::vector<ResolvedName> out;
  const check::Module* m = state_->moduleNamed(path);
  if (m == nullptr || !m->program) return out;
  Resolver r([&](Span use, const Definition& d) {
    if (use.file == m->file) out.push_back(ResolvedName{use, state_->location(d.at, d.kind, d.whole)});
  });
  r.module(*m);
  std::stable_sort(out.begin(), out.end(), [](const ResolvedName& a, const ResolvedName& b) { return a.use.begin < b.use.begin; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const ResolvedName& a, const ResolvedName& b) { return a.use.begin == b.use.begin && a.use.end == b.use.end; }),
            out.end());
  return out;
}

std::optional<Location> Snapshot::importedModuleAt(const std::string& path, std::uint32_t line, std::uint32_t column) const {
  auto p = state_->place(path, line, column);
  if (!p) return std::nullopt;
  for (const auto& [imp, dep] : p->module->imports)
    if (contains(imp->pathSpan, p->module->file, p->offset) && dep != nullptr)
      return state_->location(Span{dep->file, 0, 0}, NodeKind::Import, Span{dep->file, 0, 0});
  return std::nullopt;
}

std::shared_ptr<const syntax::Program> Snapshot::programOf(const std::string& path) const {
  const check::Module* m = state_->moduleNamed(path);
  return m != nullptr ? m->program : nullptr;
}

Snapshot::Evaluation Snapshot::evaluate(const std::string& expression, const std::string& inputName) const {
  Evaluation out;
  ExprPtr parsed;
  FileId input = base::kNoFile;
  auto r = state_->recheck([&](State::Recheck& rc) { input = rc.sources.add(inputName, expression); });
  out.input = input;
  const check::Module* root = r->checker->root();
  if (root != nullptr && root->program) {
    parsed = syntax::parseValue(r->sources, input, r->diags);
    if (parsed) {
      check::Evaluator& ev = r->checker->evaluator();
      const std::size_t errorsBefore = r->diags.errorCount();
      check::Value v = ev.eval(*parsed, ev.scopePtrOf(*root));
      if (r->diags.errorCount() == errorsBefore) {
        out.type = describeType(v);
        if (v.kind == check::ValueKind::Model) {
          // The counts as the `layers` and `params` properties give them; a
          // problem counting leaves them out (it is not the expression's).
          const std::size_t before = r->diags.all().size();
          check::Value layers = ev.modelProperty(*v.model, "layers", v.span);
          check::Value params = ev.modelProperty(*v.model, "params", v.span);
          const bool clean = r->diags.all().size() == before;
          r->diags.splitOff(before);
          if (clean && layers.isNumber() && params.isNumber()) {
            out.layers = layers.number;
            out.params = params.number;
          }
        }
        out.value = std::move(v);
      }
    }
  }
  out.sources = r->sources;
  out.diagnostics = r->diags;
  // The value's closures refer to the re-check's scopes and modules, and the
  // AST of the input: keep them with it.
  auto ast = std::shared_ptr<Expr>(std::move(parsed));
  out.keep = std::shared_ptr<const void>(new std::pair<std::shared_ptr<State::Recheck>, std::shared_ptr<Expr>>(r, ast));
  return out;
}

std::shared_ptr<const Snapshot> checkSnapshot(base::SourceMap& sources, check::ModuleCache& cache,
                                              const std::map<std::string, std::string>& texts, FileId root) {
  auto state = std::make_shared<Snapshot::State>();
  state->rootPath = sources.file(root).path();
  state->root = root;
  state->sources = sources;
  state->texts = texts;
  state->checker = std::make_unique<check::Checker>(state->sources, state->diags, &check::Prelude::get(), &cache);
  state->checker->loader().setTexts(&state->texts);
  state->program = state->checker->checkFile(root);
  // The files the check added (imports) are the session's from now on: its
  // module cache refers to them by id.
  sources = state->sources;
  state->cache = cache;
  for (const auto& m : state->checker->loader().modules())
    if (!m->standard) {
      state->modules.push_back(m.get());
      if (m->file != root) state->texts[m->key] = state->sources.file(m->file).text();
    }
  for (const auto& name : check::ModuleLoader::standardModuleNames())
    if (const check::Module* m = check::Prelude::get().module(name)) state->modules.push_back(m);
  return std::make_shared<const Snapshot>(state);
}

}  // namespace ipu::session
