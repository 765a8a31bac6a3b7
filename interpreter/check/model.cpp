#include "interpreter/check/model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "interpreter/check/codes.h"

namespace ipu::check {

using namespace syntax;

namespace {

bool startsWith(const std::vector<PathPart>& parts, const std::vector<PathPart>& prefix) {
  if (prefix.size() > parts.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (parts[i].name != prefix[i].name) return false;
    if (prefix[i].index >= 0 && parts[i].index != prefix[i].index) return false;
  }
  return true;
}

// Arguments that decide a definition's result by value alone (lists, records and
// closures are compared by nothing cheaper than evaluating again).
bool sameScalar(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case ValueKind::Number:
      return a.number == b.number && a.dim.exp == b.dim.exp && a.percent == b.percent && a.integer == b.integer;
    case ValueKind::Bool: return a.boolean == b.boolean;
    case ValueKind::Unknown: return true;  // a phase variable outside a phase: the body sees the same unknown
    case ValueKind::String:
    case ValueKind::Symbol:
    case ValueKind::LayerRef: return a.text == b.text;
    default: return false;
  }
}

// A model call whose expansion is the same as another's: same definition,
// declared in the same scope, equal explicit arguments (the defaults follow
// from them, the phase, and the definition's scope, which are shared).
bool sameModelCall(const ModelValue& a, const ModelValue& b) {
  if (a.tmpl == nullptr || b.tmpl == nullptr || a.decl != b.decl || a.body != b.body || a.tmpl->scope != b.tmpl->scope ||
      a.args.size() != b.args.size())
    return false;
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].first != b.args[i].first || !sameScalar(a.args[i].second, b.args[i].second)) return false;
  return true;
}

// Whether leaves can be copied to another element of a repeat: their layers'
// arguments are plain values. A reference to a sibling layer names the path of
// this element (`encoder[3].attention`), and lists or records may hold one.
bool copyable(const std::vector<ModelStructure::Leaf>& leaves, std::size_t from) {
  for (std::size_t i = from; i < leaves.size(); ++i) {
    const LayerValue& l = *leaves[i].layer.layer;
    if (l.tmpl == nullptr) return false;
    for (const auto& [name, v] : l.args)
      if (v.kind != ValueKind::Number && v.kind != ValueKind::Bool && v.kind != ValueKind::String &&
          v.kind != ValueKind::Symbol && v.kind != ValueKind::Unknown)
        return false;
  }
  return true;
}

class Expander {
 public:
  Expander(Evaluator& ev, const PhaseContext& ctx, ModelStructure& out) : ev_(ev), ctx_(ctx), out_(out) {}

  void expand(const ModelValue& m, const std::vector<PathPart>& prefix) {
    if (m.body == nullptr) return;
    if (!ev_.pushFrame("model `" + m.name + "`", m.span)) return;
    open_.push_back(m.body);
    auto scope = std::make_shared<Scope>(m.scope);
    ctx_.bind(*scope);
    for (const auto& member : m.body->members) {
      if (tooMany_) break;
      switch (member->kind) {
        case MemberKind::Let: {
          const auto& l = member->as<LetMember>();
          if (!scope->define(l.name, ev_.eval(*l.value, scope), l.nameSpan))
            ev_.error(code::kDuplicateName, l.nameSpan, "`" + l.name + "` is already defined in this model");
          break;
        }
        case MemberKind::Field: {
          const auto& f = member->as<FieldMember>();
          if (f.name != "family" && f.name != "doc") {
            ev_.error(code::kUnknownField, f.nameSpan, "`" + f.name + "` is not a field of a model",
                      "models hold `layer` and `repeat` members, `let`s, and the fields `family` and `doc`");
            break;
          }
          if (prefix.empty()) out_.fields.emplace_back(f.name, ev_.eval(*f.value, scope));
          break;
        }
        case MemberKind::Layer: {
          const auto& l = member->as<LayerMember>();
          auto parts = prefix;
          parts.push_back(PathPart{l.name, -1});
          add(parts, ev_.eval(*l.value, scope), l.span, l.value->span);
          defineRef(*scope, l.name, parts, l.nameSpan);
          break;
        }
        case MemberKind::Repeat: {
          const auto& r = member->as<RepeatMember>();
          Value count = ev_.eval(*r.count, scope);
          if (count.isUnknown()) {
            // Unknown while checking a definition with unknown arguments: nothing to say yet.
            if (ctx_.structural) break;
            ev_.error(code::kPhaseVariable, r.count->span, "the repeat count must be known without a phase",
                      "a model's shape cannot depend on micro_batch, seq_len, masked_tokens or image_size");
            break;
          }
          if (!count.isWhole() || count.number < 0) {
            ev_.error(code::kTypeMismatch, r.count->span, "a repeat count must be a whole number, found " + count.describe());
            break;
          }
          if (count.number > static_cast<double>(kMaxLayers)) {
            ev_.error(code::kLimitExceeded, r.count->span,
                      "repeat count " + count.show() + " exceeds the limit of " + std::to_string(kMaxLayers) + " layers");
            break;
          }
          auto groupParts = prefix;
          groupParts.push_back(PathPart{r.name, -1});
          long long n = static_cast<long long>(count.number);
          out_.groups.push_back(ModelStructure::Group{groupParts, n});
          // Elements that call the same block with the same arguments expand
          // alike (BERT-Large's 24 encoders): the first such expansion that
          // reported nothing is copied under the next elements' index.
          Value firstValue;
          std::size_t firstLeaves = 0, endLeaves = 0, firstGroups = 0, endGroups = 0;
          for (long long i = 0; i < n && !tooMany_; ++i) {
            auto elemScope = std::make_shared<Scope>(scope);
            if (!r.indexVar.empty()) elemScope->define(r.indexVar, Value::integral(i, r.indexSpan), r.indexSpan);
            auto parts = prefix;
            parts.push_back(PathPart{r.name, i});
            // Without an index variable every element evaluates the same
            // expression in the same scope: the first value stands for all.
            const bool same = r.indexVar.empty() && firstValue.kind == ValueKind::Model;
            const std::size_t diagnostics = ev_.diags().all().size();
            Value v = same ? firstValue : ev_.eval(*r.value, elemScope);
            if (firstValue.kind == ValueKind::Model && v.kind == ValueKind::Model &&
                (same || sameModelCall(*firstValue.model, *v.model)) &&
                out_.leaves.size() + (endLeaves - firstLeaves) <= kMaxLayers) {
              copyElement(prefix.size(), i, firstLeaves, endLeaves, firstGroups, endGroups);
              continue;
            }
            const std::size_t leaves = out_.leaves.size(), groups = out_.groups.size();
            add(parts, v, r.span, r.value->span);
            if (firstValue.kind != ValueKind::Model && v.kind == ValueKind::Model && !tooMany_ &&
                ev_.diags().all().size() == diagnostics && copyable(out_.leaves, leaves)) {
              firstValue = v;
              firstLeaves = leaves;
              endLeaves = out_.leaves.size();
              firstGroups = groups;
              endGroups = out_.groups.size();
            }
          }
          defineRef(*scope, r.name, groupParts, r.nameSpan);
          break;
        }
        case MemberKind::Block:
        case MemberKind::Stage:
        case MemberKind::Phase:
          ev_.error(code::kMisplacedMember, member->span,
                    "a model holds `layer`, `repeat` and `let` members (this belongs elsewhere)");
          break;
      }
    }
    open_.pop_back();
    ev_.popFrame();
  }

 private:
  // Appends the leaves and groups [first, end) of one repeat element again,
  // as element `index` (the path part at `depth`).
  void copyElement(std::size_t depth, long long index, std::size_t firstLeaves, std::size_t endLeaves,
                   std::size_t firstGroups, std::size_t endGroups) {
    for (std::size_t k = firstGroups; k < endGroups; ++k) {
      ModelStructure::Group g = out_.groups[k];
      g.parts[depth].index = index;
      out_.groups.push_back(std::move(g));
    }
    for (std::size_t k = firstLeaves; k < endLeaves; ++k) {
      ModelStructure::Leaf leaf = out_.leaves[k];
      leaf.parts[depth].index = index;
      leaf.path = pathString(leaf.parts);
      out_.leaves.push_back(std::move(leaf));
    }
  }

  void defineRef(Scope& scope, const std::string& name, const std::vector<PathPart>& parts, Span at) {
    Value ref;
    ref.kind = ValueKind::LayerRef;
    ref.text = pathString(parts);
    ref.span = at;
    if (!scope.define(name, ref, at)) {
      auto& d = ev_.error(code::kDuplicateName, at, "`" + name + "` is already a layer of this model",
                          "give each layer its own name");
      d.addNote({scope.definedAt(name), "first defined here"});
    }
  }

  void add(const std::vector<PathPart>& parts, Value v, Span memberSpan, Span valueSpan) {
    if (v.isUnknown()) return;
    if (v.kind == ValueKind::Template && v.tmpl->decl->declKind == DeclKind::Layer && v.tmpl->decl->params.empty()) {
      auto l = std::make_shared<LayerValue>();
      l->decl = v.tmpl->decl;
      l->scope = v.tmpl->scope;
      l->span = valueSpan;
      v = Value();
      v.kind = ValueKind::Layer;
      v.layer = l;
    }
    if (v.kind == ValueKind::Layer) {
      if (out_.leaves.size() >= kMaxLayers) {
        ev_.error(code::kLimitExceeded, memberSpan,
                  "the model has more than " + std::to_string(kMaxLayers) + " layers, the limit");
        tooMany_ = true;
        return;
      }
      out_.leaves.push_back(ModelStructure::Leaf{parts, pathString(parts), v, memberSpan});
      return;
    }
    if (v.kind == ValueKind::Model) {
      if (std::find(open_.begin(), open_.end(), v.model->body) != open_.end()) {
        ev_.error(code::kLimitExceeded, valueSpan,
                  "model `" + v.model->name + "` contains itself (as `" + pathString(parts) + "`)",
                  "a model cannot hold an instance of itself; repeat a block with `repeat n as name = block(...)`");
        tooMany_ = true;  // stop expanding
        return;
      }
      out_.groups.push_back(ModelStructure::Group{parts, -1});
      expand(*v.model, parts);
      return;
    }
    std::string help;
    if (v.kind == ValueKind::Template)
      help = "`" + v.tmpl->decl->name + "` has parameters: call it, e.g. `" + v.tmpl->decl->name + "(...)`";
    ev_.error(code::kTypeMismatch, valueSpan, "a model member must be a layer or a model, found " + v.describe(), help);
  }

  Evaluator& ev_;
  const PhaseContext& ctx_;
  ModelStructure& out_;
  bool tooMany_ = false;
  std::vector<const syntax::Block*> open_;  // bodies being expanded (a model inside itself is an error)
};

double numberOr(const Record& rec, const char* field, double dflt, bool& unknown) {
  const Value* v = rec.get(field);
  if (v == nullptr) return dflt;
  if (v->isUnknown()) {
    unknown = true;
    return 0;
  }
  return v->isNumber() ? v->number : dflt;
}

ir::Flops flopsOf(const Value* v, bool& unknown) {
  ir::Flops f;
  if (v == nullptr || v->kind != ValueKind::Record) {
    if (v != nullptr && v->isUnknown()) unknown = true;
    return f;
  }
  f.matmul = numberOr(*v->record, "matmul", 0, unknown);
  f.attention = numberOr(*v->record, "attention", 0, unknown);
  f.conv = numberOr(*v->record, "conv", 0, unknown);
  f.elementwise = numberOr(*v->record, "elementwise", 0, unknown);
  return f;
}

}  // namespace

std::shared_ptr<ModelStructure> expandModel(Evaluator& ev, const ModelValue& model, const PhaseContext& ctx) {
  auto out = std::make_shared<ModelStructure>();
  out->name = model.name;
  const PhaseContext* saved = ev.currentPhase();
  ev.setCurrentPhase(&ctx);
  Expander(ev, ctx, *out).expand(model, {});
  ev.setCurrentPhase(saved);
  out->index();
  return out;
}

namespace {

// Same definition, declared in the same scope, equal arguments. Only layers
// made by a call qualify: their scope holds exactly the parameters, above the
// phase variables the call saw (already reflected in the arguments' defaults;
// the body sees the phase's own) and the definition's scope, so the arguments
// and that scope are everything the body can see besides the phase.
bool sameCall(const LayerValue& a, const LayerValue& b) {
  if (a.tmpl == nullptr || b.tmpl == nullptr || a.decl != b.decl || a.tmpl->scope != b.tmpl->scope ||
      a.args.size() != b.args.size())
    return false;
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].first != b.args[i].first || !sameScalar(a.args[i].second, b.args[i].second)) return false;
  return true;
}

}  // namespace

const LayerFacts* LayerFactsMemo::find(const LayerValue& layer) const {
  for (const auto& e : entries_)
    if (e.layer == &layer || sameCall(*e.layer, layer)) return &e.facts;
  return nullptr;
}

void LayerFactsMemo::keep(const LayerValue& layer, const LayerFacts& facts) {
  if (layer.tmpl != nullptr) entries_.push_back(Entry{&layer, facts});
}

namespace {

LayerFacts evaluateLayerFacts(Evaluator& ev, const ModelStructure::Leaf& leaf, const PhaseContext& ctx) {
  LayerFacts f;
  f.path = leaf.path;
  f.parts = leaf.parts;
  f.span = leaf.span;
  const LayerValue& lv = *leaf.layer.layer;
  f.definition = lv.decl->name;
  f.definitionSpan = lv.decl->nameSpan;
  for (const auto& [name, v] : lv.args) {
    ir::Attribute a;
    a.name = name;
    if (v.isNumber()) a.number = v.number;
    else if (v.kind == ValueKind::String || v.kind == ValueKind::Symbol) a.text = v.text;
    else if (v.kind == ValueKind::Bool) a.number = v.boolean ? 1 : 0;
    else if (v.kind == ValueKind::LayerRef) a.text = v.text;
    else continue;
    f.attributes.push_back(std::move(a));
  }
  if (lv.decl->body == nullptr) return f;
  const PhaseContext* saved = ev.currentPhase();
  ev.setCurrentPhase(&ctx);
  if (ev.pushFrame("layer `" + leaf.path + "`", leaf.span)) {
    auto scope = std::make_shared<Scope>(lv.scope);
    ctx.bind(*scope);
    auto rec = ev.buildRecord("layer", *lv.decl->body, scope, nullptr, lv.decl->name, leaf.span);
    bool unknown = false;
    if (const Value* op = rec->get("op"); op != nullptr && op->kind == ValueKind::String) f.op = op->text;
    f.params = numberOr(*rec, "params", 0, unknown);
    if (const Value* pv = rec->get("params"); pv != nullptr && pv->isUnknown()) f.paramsUnknown = true;
    f.forward = flopsOf(rec->get("flops"), unknown);
    if (const Value* b = rec->get("backward"); b != nullptr) {
      f.backward = flopsOf(b, unknown);
    } else {
      f.backward = f.forward;
      f.backward.matmul *= 2;
      f.backward.attention *= 2;
      f.backward.conv *= 2;
      f.backward.elementwise *= 2;
    }
    f.activations = numberOr(*rec, "activations", 0, unknown);
    f.output = numberOr(*rec, "output", 0, unknown);
    f.input = numberOr(*rec, "input", f.output, unknown);
    f.workspace = numberOr(*rec, "workspace", 0, unknown);
    f.codeBytes = numberOr(*rec, "code", 0, unknown);
    f.ops = numberOr(*rec, "ops", 1, unknown);
    if (const Value* s = rec->get("shardable"); s != nullptr && s->kind == ValueKind::Bool) f.shardable = s->boolean;
    if (const Value* t = rec->get("tied_to"); t != nullptr && t->kind == ValueKind::LayerRef) f.tiedTo = t->text;
    f.tiedParams = numberOr(*rec, "tied_params", 0, unknown);
    for (double x : {f.params, f.activations, f.output, f.input, f.workspace, f.codeBytes, f.tiedParams,
                     f.forward.total(), f.backward.total()})
      if (!std::isfinite(x) || x < 0) {
        ev.error(code::kOutOfRange, leaf.span, "layer `" + leaf.path + "` evaluates to a negative or non-finite size",
                 "check the arguments of its definition `" + lv.decl->name + "`");
        break;
      }
    ev.popFrame();
  }
  ev.setCurrentPhase(saved);
  return f;
}

}  // namespace

LayerFacts layerFacts(Evaluator& ev, const ModelStructure::Leaf& leaf, const PhaseContext& ctx, LayerFactsMemo* memo) {
  if (memo != nullptr)
    if (const LayerFacts* known = memo->find(*leaf.layer.layer)) {
      LayerFacts f = *known;
      f.path = leaf.path;
      f.parts = leaf.parts;
      f.span = leaf.span;
      return f;
    }
  const std::size_t diagnosticsBefore = ev.diags().all().size();
  LayerFacts f = evaluateLayerFacts(ev, leaf, ctx);
  if (memo != nullptr && ev.diags().all().size() == diagnosticsBefore) memo->keep(*leaf.layer.layer, f);
  return f;
}


void ModelStructure::index() {
  runs_.clear();
  runsOf_.clear();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].parts.empty()) {  // not a path: leavesUnder scans everything
      runs_.clear();
      runsOf_.clear();
      return;
    }
    const PathPart& p = leaves[i].parts.front();
    if (!runs_.empty() && runs_.back().name == p.name && runs_.back().index == p.index) {
      ++runs_.back().last;
      continue;
    }
    auto [it, added] = runsOf_.try_emplace(p.name, runs_.size(), runs_.size());
    if (!added && it->second.second != runs_.size()) {  // a name's leaves apart from each other: no index
      runs_.clear();
      runsOf_.clear();
      return;
    }
    runs_.push_back(Run{p.name, p.index, static_cast<int>(i), static_cast<int>(i) + 1});
    it->second.second = runs_.size();
  }
}

std::vector<int> ModelStructure::leavesUnder(const std::vector<PathPart>& prefix) const {
  std::vector<int> out;
  // Without an index, or with leaves changed since (the index no longer ends
  // at the last leaf), scan them all.
  if (runs_.empty() || prefix.empty() || static_cast<std::size_t>(runs_.back().last) != leaves.size()) {
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (startsWith(leaves[i].parts, prefix)) out.push_back(static_cast<int>(i));
    return out;
  }
  auto named = runsOf_.find(prefix.front().name);
  if (named == runsOf_.end()) return out;
  auto [first, last] = named->second;
  const long long index = prefix.front().index;
  // A repeat's elements are its runs in order: element k is run first + k.
  if (index >= 0 && first + static_cast<std::size_t>(index) < last &&
      runs_[first + static_cast<std::size_t>(index)].index == index) {
    first += static_cast<std::size_t>(index);
    last = first + 1;
  }
  for (std::size_t k = first; k < last; ++k) {
    const Run& r = runs_[k];
    if (index >= 0 && r.index != index) continue;
    for (int i = r.first; i < r.last; ++i)
      if (startsWith(leaves[static_cast<std::size_t>(i)].parts, prefix)) out.push_back(i);
  }
  return out;
}

const ModelStructure::Group* ModelStructure::group(const std::vector<PathPart>& parts) const {
  for (const auto& g : groups) {
    if (g.parts.size() != parts.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < parts.size() && same; ++i)
      same = g.parts[i].name == parts[i].name && (i + 1 == parts.size() || g.parts[i].index == parts[i].index);
    if (same) return &g;
  }
  return nullptr;
}

std::vector<std::string> ModelStructure::childNames(const std::vector<PathPart>& prefix) const {
  std::vector<std::string> out;
  for (const auto& leaf : leaves)
    if (leaf.parts.size() > prefix.size() && startsWith(leaf.parts, prefix)) {
      const std::string& n = leaf.parts[prefix.size()].name;
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
  return out;
}

int ModelStructure::leafIndex(const std::string& path) const {
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].path == path) return static_cast<int>(i);
  return -1;
}

std::string ModelStructure::describe(const std::vector<int>& leafIndices) const {
  std::vector<bool> in(leaves.size(), false);
  for (int i : leafIndices)
    if (i >= 0 && static_cast<std::size_t>(i) < leaves.size()) in[static_cast<std::size_t>(i)] = true;
  // Walk leaves in order; at each position find the largest complete subtree
  // (a whole nested model, or a run of whole repeat elements) and name it once.
  std::vector<std::string> parts;
  std::size_t i = 0;
  auto allIn = [&](const std::vector<PathPart>& prefix, std::size_t& end) {
    std::vector<int> under = leavesUnder(prefix);
    if (under.empty()) return false;
    for (int k : under)
      if (!in[static_cast<std::size_t>(k)]) return false;
    end = static_cast<std::size_t>(under.back()) + 1;
    return true;
  };
  while (i < leaves.size()) {
    if (!in[i]) {
      ++i;
      continue;
    }
    const auto& p = leaves[i].parts;
    std::size_t end = i + 1;
    std::string label = leaves[i].path;
    // Try the shallowest prefix that is entirely selected.
    for (std::size_t depth = 1; depth <= p.size(); ++depth) {
      std::vector<PathPart> prefix(p.begin(), p.begin() + static_cast<long>(depth));
      std::size_t e = 0;
      if (prefix.back().index >= 0) {
        // A run of whole repeat elements: encoder[3..10].
        long long first = prefix.back().index, last = first;
        if (!allIn(prefix, e)) continue;
        std::size_t runEnd = e;
        while (true) {
          auto next = prefix;
          next.back().index = last + 1;
          std::size_t e2 = 0;
          if (leavesUnder(next).empty() || !allIn(next, e2)) break;
          ++last;
          runEnd = e2;
        }
        std::vector<PathPart> base(prefix.begin(), prefix.end() - 1);
        std::string head = base.empty() ? "" : pathString(base) + ".";
        const Group* g = group(std::vector<PathPart>(prefix.begin(), prefix.end()));
        bool whole = g != nullptr && first == 0 && last + 1 == g->count;
        label = head + prefix.back().name + (whole ? "" : (first == last ? "[" + std::to_string(first) + "]"
                                                                          : "[" + std::to_string(first) + ".." +
                                                                                std::to_string(last + 1) + "]"));
        end = runEnd;
        break;
      }
      if (allIn(prefix, e)) {
        label = pathString(prefix);
        end = e;
        break;
      }
    }
    parts.push_back(label);
    i = std::max(end, i + 1);
  }
  std::string out;
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? ", " : "") + parts[k];
  return out;
}

}  // namespace ipu::check
