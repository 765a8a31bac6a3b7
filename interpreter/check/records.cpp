// Records and declarations: building records from blocks against their
// schemas, typed field evaluation, and module-level declarations.
#include <algorithm>
#include <cmath>
#include <set>

#include "interpreter/check/codes.h"
#include "interpreter/check/evaluator.h"
#include "runtime/ir/mapping_fields.h"

namespace ipu::check {

using namespace syntax;

namespace {

std::string article(const std::string& kind) {
  if (kind.empty()) return "a record";
  bool vowel = std::string("aeiou").find(kind[0]) != std::string::npos;
  return std::string(vowel ? "an " : "a ") + kind;
}

// A written example of a value with the right unit, for help lines.
std::string unitExample(const Dim& d) {
  if (d == dims::bytes()) return "`900 MB`";
  if (d == dims::bandwidth()) return "`64 GB/s`";
  if (d == dims::hertz()) return "`1.33 GHz`";
  if (d == dims::flopRate()) return "`250 TFLOPS`";
  if (d == dims::seconds()) return "`10 ms`";
  if (d == dims::steps()) return "`2000 steps`";
  if (d == dims::epochs()) return "`3 epochs`";
  return {};
}

bool countLike(const Dim& d) { return d == dims::steps() || d == dims::epochs() || d == dims::samples(); }

}  // namespace

bool Evaluator::conforms(Value& v, const Type& type, const std::string& field, Span at) {
  if (v.isUnknown()) return true;
  auto mismatch = [&](const std::string& help = {}) {
    std::string h = help;
    if (h.empty() && type.kind == TypeKind::Record)
      h = "declare one with `" + type.recordKind + " NAME { ... }`" +
          (type.recordKind == "precision" ? ", or use a preset from `std/precision` (fp16_sr, fp16_mixed, fp32_full)"
           : type.recordKind == "pod"     ? ", or use a preset from `std/pods` (POD4 ... POD256, BowPOD16, ...)"
                                          : "");
    if (h.empty() && type.kind == TypeKind::Model) h = "use a model, e.g. `bert_large` from `std/models/bert`";
    error(code::kTypeMismatch, at, "`" + field + "` expects " + type.name() + ", found " + v.describe(), h);
    return false;
  };
  if (type.orList && v.kind == ValueKind::List && type.kind != TypeKind::List) {
    Type one = type;
    one.orList = false;
    std::vector<Value> items = *v.list;
    for (auto& item : items)
      if (!conforms(item, one, field, item.span.valid() ? item.span : at)) return false;
    v = Value::ofList(std::move(items), v.span);
    return true;
  }
  switch (type.kind) {
    case TypeKind::Any: return true;
    case TypeKind::Number:
    case TypeKind::Whole: {
      if ((v.kind == ValueKind::Symbol || v.kind == ValueKind::String) &&
          std::find(type.symbols.begin(), type.symbols.end(), v.text) != type.symbols.end()) {
        v.kind = ValueKind::Symbol;
        return true;
      }
      if (!v.isNumber()) return mismatch();
      if (v.dim != type.dim) {
        if (countLike(type.dim) && v.dim.dimensionless()) v.dim = type.dim;
        else if (type.dim.dimensionless() && countLike(v.dim)) v.dim = Dim::none();
        else {
          std::string ex = unitExample(type.dim);
          std::string help = type.dim.dimensionless() ? "remove the unit"
                             : ex.empty()             ? ""
                             : v.dim.dimensionless()  ? "write it with a unit, e.g. " + ex
                                                      : "use a unit of " + type.dim.describe() + ", e.g. " + ex;
          error(code::kUnitMismatch, at, "`" + field + "` expects " + type.name() + ", found " + v.describe(), help);
          return false;
        }
      }
      if (type.kind == TypeKind::Whole && v.number != std::floor(v.number)) {
        error(code::kOutOfRange, at, "`" + field + "` must be a whole number, found `" + v.show() + "`");
        return false;
      }
      double limit = type.max > 0 ? type.max : kMaxExactInteger;
      if ((type.kind == TypeKind::Whole || type.max > 0) && v.number > limit) {
        error(code::kOutOfRange, at, "`" + field + "` is too large: `" + v.show() + "` (the limit is " + formatNumber(limit) + ")",
              "check for a typo in the number");
        return false;
      }
      if (type.positive && !(v.number > 0)) {
        error(code::kOutOfRange, at, "`" + field + "` must be positive, found `" + v.show() + "`",
              type.kind == TypeKind::Whole ? "use 1 or more" : "use a value above 0");
        return false;
      }
      if (!type.positive && !type.mayBeNegative && v.number < 0) {
        error(code::kOutOfRange, at, "`" + field + "` cannot be negative, found `" + v.show() + "`");
        return false;
      }
      return true;
    }
    case TypeKind::Fraction:
      if (!v.isNumber() || !v.dim.dimensionless()) return mismatch();
      if (!(v.number > 0 && v.number <= 1)) {
        error(code::kOutOfRange, at, "`" + field + "` must be in (0, 1], found `" + v.show() + "`",
              "write a fraction such as `0.25` or `25%`");
        return false;
      }
      return true;
    case TypeKind::Bool: return v.kind == ValueKind::Bool ? true : mismatch();
    case TypeKind::String: return v.kind == ValueKind::String ? true : mismatch();
    case TypeKind::Enum: {
      if (v.kind == ValueKind::Bool && !v.boolean &&
          std::find(type.symbols.begin(), type.symbols.end(), "none") != type.symbols.end()) {
        v = Value::symbol("none", v.span);
        return true;
      }
      // `recompute: on` means the usual policy.
      if (v.kind == ValueKind::Bool && v.boolean && field == ir::nameOf(ir::MappingField::Recompute)) {
        v = Value::symbol("every_layer", v.span);
        return true;
      }
      if (v.kind != ValueKind::Symbol && v.kind != ValueKind::String) return mismatch();
      if (std::find(type.symbols.begin(), type.symbols.end(), v.text) == type.symbols.end()) {
        error(code::kTypeMismatch, at, "`" + field + "` expects " + type.name() + ", found `" + v.text + "`",
              base::didYouMean(v.text, type.symbols));
        return false;
      }
      v.kind = ValueKind::Symbol;
      return true;
    }
    case TypeKind::List: {
      if (v.kind != ValueKind::List) return mismatch();
      std::vector<Value> items = *v.list;
      for (auto& item : items)
        if (!conforms(item, *type.element, field, item.span.valid() ? item.span : at)) return false;
      v = Value::ofList(std::move(items), v.span);
      return true;
    }
    case TypeKind::Record:
      if (v.kind == ValueKind::Record && v.record->kind == type.recordKind) return true;
      if (v.kind == ValueKind::Template && syntax::spelling(v.tmpl->decl->declKind) == type.recordKind)
        return mismatch("`" + v.tmpl->decl->name + "` has parameters: call it, e.g. `" + v.tmpl->decl->name + "(...)`");
      return mismatch();
    case TypeKind::Struct: {
      if (v.kind == ValueKind::Record && (v.record->kind == type.schema->kind)) return true;
      if (v.kind != ValueKind::Record || !v.record->kind.empty()) return mismatch();
      // An untyped record (`let c = { ... }`) used where a typed one is
      // expected: check its fields against the schema now.
      auto typed = std::make_shared<Record>(*v.record);
      typed->kind = type.schema->kind;
      bool ok = true;
      for (auto& f : typed->fields) {
        const Field* spec = type.schema->find(f.name);
        if (spec == nullptr) {
          error(code::kUnknownField, f.nameSpan.valid() ? f.nameSpan : at,
                "`" + f.name + "` is not a field of " + article(type.schema->kind), base::didYouMean(f.name, type.schema->names()));
          ok = false;
          continue;
        }
        if (!conforms(f.value, spec->type, f.name, f.value.span.valid() ? f.value.span : at)) ok = false;
      }
      for (const auto& spec : type.schema->fields)
        if (spec.required && typed->field(spec.name) == nullptr) {
          error(code::kMissingField, at, "`" + field + "` needs `" + spec.name + "`: " + spec.doc);
          ok = false;
        }
      if (!ok) return false;
      v.record = typed;
      return true;
    }
    case TypeKind::Model:
      if (v.kind == ValueKind::Model) return true;
      if (v.kind == ValueKind::Template && v.tmpl->decl->declKind == DeclKind::Model)
        return mismatch("`" + v.tmpl->decl->name + "` is a model definition with parameters: call it, e.g. `" +
                        v.tmpl->decl->name + "(...)`");
      return mismatch();
    case TypeKind::LayerRef: return v.kind == ValueKind::LayerRef ? true : mismatch();
    case TypeKind::Schedule:
      if (v.kind == ValueKind::Schedule) return true;
      if (v.kind == ValueKind::Lua && v.lua->form == LuaForm::Function) return true;
      if (v.isNumber() && v.dim.dimensionless()) {
        if (!(v.number > 0)) {
          error(code::kOutOfRange, at, "`" + field + "` must be positive, found `" + v.show() + "`");
          return false;
        }
        return true;
      }
      return mismatch("write `0.001`, or a schedule such as `0.006 warmup 2000 steps then linear to 0`");
    case TypeKind::Pipeline:
      if (v.kind == ValueKind::Pipeline) return true;
      if (v.kind == ValueKind::Lua && v.lua->form == LuaForm::Function) return true;
      return mismatch();
    case TypeKind::Lua:
      if (v.kind != ValueKind::Lua) return mismatch();
      if (v.lua != nullptr && v.lua->form == LuaForm::Function) {
        error(code::kTypeMismatch, at, "`lua " + v.text + "` names a Lua function; a hook needs Lua code",
              "write `lua \"\"\" function on_step(ctx) ... end \"\"\"` or `lua file \"hooks.lua\"`; function names "
              "belong in `lr: lua f`, `loss_scale: lua f` and `pipeline: lua f`");
        return false;
      }
      return true;
    case TypeKind::LossScale:
      if (v.isNumber() && v.dim.dimensionless()) {
        if (!(v.number >= 1)) {
          error(code::kOutOfRange, at, "a static loss scale must be at least 1, found `" + v.show() + "`");
          return false;
        }
        return true;
      }
      if (v.kind == ValueKind::Symbol && (v.text == "none" || v.text == "dynamic")) return true;
      if (v.kind == ValueKind::Record && v.record->kind == "loss_scale") return true;
      if (v.kind == ValueKind::Lua && v.lua != nullptr && v.lua->form == LuaForm::Function) return true;
      return mismatch();
  }
  return true;
}

Value Evaluator::evalField(const Expr& e, const Type& type, const ScopePtr& scope, const std::string& field) {
  if (&e != watched_) return evalFieldValue(e, type, scope, field);
  const Expr* outer = fieldExpr_;
  fieldExpr_ = &e;
  Value v = evalFieldValue(e, type, scope, field);
  fieldExpr_ = outer;
  if (seen_) seen_(v);
  return v;
}

Value Evaluator::evalFieldValue(const Expr& e, const Type& type, const ScopePtr& scope, const std::string& field) {
  Value v;
  auto enumName = [&](const Expr& x, const Type& t) -> bool {
    const auto* n = x.dyn<NameExpr>();
    return n != nullptr && std::find(t.symbols.begin(), t.symbols.end(), n->name) != t.symbols.end();
  };
  auto contextual = [&](const Expr& x, const Type& t) -> Value {
    // An enum, or a number that also takes symbols (`batch_norm_replicas: all`).
    if (t.kind == TypeKind::Enum || (t.kind == TypeKind::Whole && !t.symbols.empty())) {
      if (enumName(x, t)) return Value::symbol(x.as<NameExpr>().name, x.span);
      if (const auto* n = x.dyn<NameExpr>()) {
        // Not a member: a let or declaration may still hold one; otherwise the
        // user misspelt a member, which is the more useful message.
        std::vector<std::string> names;
        if (scope->lookup(n->name, *this, x.span) == nullptr) {
          error(code::kTypeMismatch, x.span, "`" + field + "` expects " + t.name() + ", found `" + n->name + "`",
                base::didYouMean(n->name, t.symbols));
          return Value::unknown(x.span);
        }
      }
    }
    if (t.kind == TypeKind::LossScale)
      if (const auto* n = x.dyn<NameExpr>(); n != nullptr && (n->name == "none" || n->name == "dynamic"))
        return Value::symbol(n->name, x.span);
    if (t.kind == TypeKind::Record)
      if (const auto* r = x.dyn<RecordExpr>(); r != nullptr && schemaFor(t.recordKind) != nullptr) {
        Value rv;
        rv.kind = ValueKind::Record;
        rv.record = buildRecord(t.recordKind, *r->block, scope, nullptr, "", x.span);
        rv.span = x.span;
        return rv;
      }
    if (t.kind == TypeKind::Struct)
      if (const auto* r = x.dyn<RecordExpr>()) {
        Value rv;
        rv.kind = ValueKind::Record;
        rv.record = buildRecord(t.schema->kind, *r->block, scope, nullptr, "", x.span);
        rv.span = x.span;
        return rv;
      }
    return eval(x, scope);
  };
  if (const auto* list = e.dyn<ListExpr>();
      list != nullptr && ((type.kind == TypeKind::List && type.element) || type.orList)) {
    const Type& elem = type.kind == TypeKind::List ? *type.element : type;
    std::vector<Value> items;
    for (const auto& item : list->items) items.push_back(contextual(*item, elem));
    v = Value::ofList(std::move(items), e.span);
  } else {
    v = contextual(e, type);
  }
  if (!conforms(v, type, field, e.span)) return Value::unknown(e.span);
  if (!v.span.valid()) v.span = e.span;
  return v;
}

std::shared_ptr<Record> Evaluator::buildRecord(const std::string& kind, const Block& block, const ScopePtr& scope,
                                               std::shared_ptr<const Record> base, std::string name, Span span) {
  auto rec = base ? std::make_shared<Record>(*base) : std::make_shared<Record>();
  for (auto& f : rec->fields) f.inherited = true;
  const std::size_t errorsBefore = diags_.errorCount();
  rec->kind = base ? base->kind : kind;
  if (!name.empty() || !base) rec->name = name;
  rec->span = span;
  const Schema* schema = schemaFor(rec->kind);
  auto blockScope = std::make_shared<Scope>(scope);
  std::map<std::string, Span> seen;
  std::set<std::string> phasesHere;
  const std::string what = rec->name.empty() ? article(rec->kind) : rec->kind + " `" + rec->name + "`";

  auto fieldSpec = [&](const std::string& field, Span at) -> const Field* {
    if (schema == nullptr) return nullptr;
    const Field* f = schema->find(field);
    if (f == nullptr) {
      std::string help = base::didYouMean(field, schema->names());
      if (help.empty()) {
        help = "fields of " + article(rec->kind) + ":";
        for (const auto& n : schema->names()) help += " `" + n + "`";
      }
      error(code::kUnknownField, at, "`" + field + "` is not a field of " + article(rec->kind), help);
    }
    return f;
  };
  auto noteDuplicate = [&](const std::string& field, Span at) {
    if (auto it = seen.find(field); it != seen.end()) {
      auto& d = error(code::kDuplicateField, at, "`" + field + "` is given twice", "keep one of them");
      d.addNote({it->second, "first given here"});
      return true;
    }
    seen[field] = at;
    return false;
  };

  for (const auto& member : block.members) {
    switch (member->kind) {
      case MemberKind::Field: {
        const auto& f = member->as<FieldMember>();
        if (f.name.find('.') != std::string::npos) {
          error(code::kMisplacedMember, f.nameSpan,
                "a dotted name (`" + f.name + "`) belongs in a sweep's `parameters { ... }`, not in " + what,
                "write the field in the block it belongs to: `" + f.name.substr(f.name.rfind('.') + 1) + ": ...`");
          continue;
        }
        if (noteDuplicate(f.name, f.nameSpan)) continue;
        if (schema == nullptr) {
          rec->set(f.name, eval(*f.value, blockScope), f.nameSpan);
          continue;
        }
        const Field* spec = fieldSpec(f.name, f.nameSpan);
        if (spec == nullptr) continue;
        if (spec->type.kind == TypeKind::Pipeline && f.value->kind == ExprKind::Record) {
          error(code::kTypeMismatch, f.nameSpan, "write the pipeline as a block: `pipeline { ipu 0: ... }`",
                "drop the `:` after `pipeline`");
          continue;
        }
        rec->set(f.name, evalField(*f.value, spec->type, blockScope, f.name), f.nameSpan);
        break;
      }
      case MemberKind::Block: {
        const auto& b = member->as<BlockMember>();
        if (noteDuplicate(b.name, b.nameSpan)) continue;
        const Field* spec = schema == nullptr ? nullptr : fieldSpec(b.name, b.nameSpan);
        if (schema != nullptr && spec == nullptr) continue;
        if (spec != nullptr && spec->type.kind == TypeKind::Pipeline) {
          buildPipeline(*rec, b.name, b, blockScope);
        } else if (spec != nullptr && spec->type.kind == TypeKind::Struct) {
          std::shared_ptr<const Record> sub;
          if (const Value* old = rec->get(b.name); old != nullptr && old->kind == ValueKind::Record) sub = old->record;
          Value v;
          v.kind = ValueKind::Record;
          v.record = buildRecord(spec->type.schema->kind, *b.block, blockScope, sub, "", b.block->span);
          v.span = b.block->span;
          rec->set(b.name, v, b.nameSpan);
        } else if (spec == nullptr) {
          Value v;
          v.kind = ValueKind::Record;
          v.record = buildRecord("", *b.block, blockScope, nullptr, "", b.block->span);
          rec->set(b.name, v, b.nameSpan);
        } else {
          error(code::kTypeMismatch, b.nameSpan, "`" + b.name + "` takes a value, not a block",
                "write `" + b.name + ": ...`");
        }
        break;
      }
      case MemberKind::Let: {
        const auto& l = member->as<LetMember>();
        Value v = eval(*l.value, blockScope);
        if (!blockScope->define(l.name, v, l.nameSpan)) {
          auto& d = error(code::kDuplicateName, l.nameSpan, "`" + l.name + "` is already defined in this block");
          d.addNote({blockScope->definedAt(l.name), "first defined here"});
        }
        break;
      }
      case MemberKind::Phase: {
        const auto& p = member->as<PhaseMember>();
        if (rec->kind != "training") {
          error(code::kMisplacedMember, p.span, "`phase` belongs in a `training` block, not in " + what);
          break;
        }
        if (phasesHere.count(p.name)) {
          Span first;
          for (const auto& ph : rec->phases)
            if (ph.name == p.name) first = ph.nameSpan;
          auto& d = error(code::kDuplicatePhase, p.nameSpan, "phase `" + p.name + "` is declared twice",
                          "give each phase its own name");
          d.addNote({first, "first declared here"});
          break;
        }
        phasesHere.insert(p.name);
        buildPhase(*rec, p, blockScope);
        break;
      }
      case MemberKind::Layer:
      case MemberKind::Repeat:
        error(code::kMisplacedMember, member->span,
              std::string("`") + (member->kind == MemberKind::Layer ? "layer" : "repeat") +
                  "` belongs in a `model` definition, not in " + what);
        break;
      case MemberKind::Stage:
        error(code::kMisplacedMember, member->span,
              "`" + member->as<StageMember>().keyword + " N:` belongs in a mapping's `pipeline { ... }` block, not in " + what);
        break;
    }
  }
  if (diags_.errorCount() > errorsBefore) rec->hadErrors = true;
  if (schema != nullptr && !base)
    for (const auto& f : schema->fields) {
      if (!f.required || rec->field(f.name) != nullptr) continue;
      std::string help = "add `" + f.name + ": ...` (" + f.type.name() + ")";
      if (rec->kind == "mapping" && f.name == "model") help = "write `mapping NAME for MODEL on POD { ... }`";
      if (rec->kind == "mapping" && f.name == "pod") help = "write `mapping NAME for MODEL on POD { ... }`";
      error(code::kMissingField, span, what + " needs `" + f.name + "`: " + f.doc, help);
    }
  return rec;
}

void Evaluator::buildPipeline(Record& rec, const std::string& field, const BlockMember& m, const ScopePtr& scope) {
  auto p = std::make_shared<PipelineValue>();
  p->kind = PipelineValue::Kind::Explicit;
  p->span = m.nameSpan;  // errors about the whole pipeline point at the word `pipeline`
  auto pipeScope = std::make_shared<Scope>(scope);
  p->scope = pipeScope;
  for (const auto& member : m.block->members) {
    if (const auto* s = member->dyn<StageMember>()) {
      StageEntry e;
      e.ipu = s->index;
      e.span = s->span;
      e.indexSpan = s->indexSpan;
      for (const auto& l : s->layers) e.layers.push_back(l.get());
      p->stages.push_back(std::move(e));
    } else if (const auto* l = member->dyn<LetMember>()) {
      pipeScope->define(l->name, eval(*l->value, pipeScope), l->nameSpan);
    } else {
      error(code::kMisplacedMember, member->span, "a pipeline block holds stages: `ipu 0: embedding, encoder[0..3]`");
    }
  }
  if (p->stages.empty()) error(code::kMissingField, m.span, "the pipeline has no stages", "add `ipu 0: ...` lines");
  Value v;
  v.kind = ValueKind::Pipeline;
  v.pipeline = p;
  v.span = m.span;
  rec.set(field, v, m.nameSpan);
}

void Evaluator::buildPhase(Record& rec, const PhaseMember& m, const ScopePtr& scope) {
  std::shared_ptr<const Record> base;
  std::size_t at = rec.phases.size();
  for (std::size_t i = 0; i < rec.phases.size(); ++i)
    if (rec.phases[i].name == m.name) {
      base = rec.phases[i].fields;  // `training t2 = t with { phase one { ... } }` refines phase one
      at = i;
    }
  PhaseEntry entry;
  entry.name = m.name;
  entry.span = m.span;
  entry.nameSpan = m.nameSpan;
  entry.from = m.from.empty() && base ? rec.phases[at].from : m.from;
  entry.fromSpan = m.from.empty() && base ? rec.phases[at].fromSpan : m.fromSpan;
  entry.fields = buildRecord("phase", *m.block, scope, base, m.name, m.span);
  if (at < rec.phases.size()) rec.phases[at] = std::move(entry);
  else rec.phases.push_back(std::move(entry));
}

Value Evaluator::evaluateItem(const Item& item, ModuleScope& moduleScope) {
  // A module-level declaration means the same whichever phase first needs it:
  // evaluate it outside any phase and instantiation.
  struct Isolate {
    Evaluator& ev;
    const PhaseContext* phase;
    std::vector<Frame> frames;
    explicit Isolate(Evaluator& e) : ev(e), phase(e.phase_), frames(std::move(e.frames_)) {
      ev.phase_ = nullptr;
      ev.frames_.clear();
    }
    ~Isolate() {
      ev.phase_ = phase;
      ev.frames_ = std::move(frames);
    }
  } isolate(*this);
  return evaluateItemIsolated(item, moduleScope);
}

Value Evaluator::evaluateItemIsolated(const Item& item, ModuleScope& moduleScope) {
  ScopePtr scope = scopePtrOf(moduleScope.module());
  if (const auto* l = item.dyn<LetItem>()) return eval(*l->value, scope);
  const auto& d = item.as<Declaration>();
  const std::string kind = spelling(d.declKind);
  auto tmpl = [&] {
    auto t = std::make_shared<Template>();
    t->decl = &d;
    t->scope = scope;
    Value v;
    v.kind = ValueKind::Template;
    v.tmpl = t;
    v.span = d.nameSpan;
    return v;
  };
  if (d.declKind == DeclKind::Sweep) {
    // A sweep describes a search over a training rather than a value: the
    // checker reads its body (sweeps.h). As a name it stands for itself.
    auto rec = std::make_shared<Record>();
    rec->kind = kind;
    rec->name = d.name;
    rec->span = d.nameSpan;
    Value v;
    v.kind = ValueKind::Record;
    v.record = rec;
    v.span = d.nameSpan;
    return v;
  }
  if (d.hasParams || (d.declKind == DeclKind::Layer && d.body)) {
    if (!d.body && !d.value) return Value::unknown(d.nameSpan);
    return tmpl();
  }
  if (d.declKind == DeclKind::Model || d.declKind == DeclKind::Layer) {
    if (d.forExpr || d.onExpr)
      error(code::kMisplacedMember, d.kindSpan, "`for` and `on` belong to mappings");
    if (d.body) {
      auto m = std::make_shared<ModelValue>();
      m->name = d.name;
      m->body = d.body.get();
      m->decl = &d;
      m->scope = std::make_shared<Scope>(scope);
      m->span = d.nameSpan;
      Value v;
      v.kind = ValueKind::Model;
      v.model = m;
      v.span = d.nameSpan;
      return v;
    }
    Value v = eval(*d.value, scope);
    if (v.isUnknown()) return v;
    if (d.declKind == DeclKind::Model) {
      if (v.kind != ValueKind::Model) {
        error(code::kTypeMismatch, d.value->span, "model `" + d.name + "` must be a model, found " + v.describe());
        return Value::unknown(d.nameSpan);
      }
      auto m = std::make_shared<ModelValue>(*v.model);
      m->name = d.name;
      v.model = m;
    } else if (v.kind != ValueKind::Layer) {
      error(code::kTypeMismatch, d.value->span, "layer `" + d.name + "` must be a layer, found " + v.describe());
      return Value::unknown(d.nameSpan);
    }
    return v;
  }
  return declaredRecord(d, scope, d.nameSpan);
}

Value Evaluator::declaredRecord(const Declaration& d, const ScopePtr& scope, Span span) {
  const std::string kind = spelling(d.declKind);
  const Schema* schema = schemaFor(kind);
  // `precision p = { ... }` means the same as `precision p { ... }`.
  const Block* body = d.body.get();
  if (body == nullptr && d.value != nullptr)
    if (const auto* r = d.value->dyn<RecordExpr>()) body = r->block.get();
  std::shared_ptr<Record> rec;
  if (body != nullptr) {
    auto seeded = std::make_shared<Record>();
    seeded->kind = kind;
    if (d.forExpr) {
      if (kind != "mapping") error(code::kMisplacedMember, d.forExpr->span, "`for` belongs to mappings");
      else seeded->set("model", evalField(*d.forExpr, schema->find("model")->type, scope, "model"), d.forExpr->span);
    }
    if (d.onExpr) {
      if (kind != "mapping") error(code::kMisplacedMember, d.onExpr->span, "`on` belongs to mappings");
      else seeded->set("pod", evalField(*d.onExpr, schema->find("pod")->type, scope, "pod"), d.onExpr->span);
    }
    // Required fields are checked against the seeded record: build on it as a base.
    rec = buildRecord(kind, *body, scope, seeded, d.name, span);
    if (schema != nullptr)
      for (const auto& f : schema->fields)
        if (f.required && rec->field(f.name) == nullptr) {
          std::string help = "add `" + f.name + ": ...` (" + f.type.name() + ")";
          if (kind == "mapping" && (f.name == "model" || f.name == "pod"))
            help = "write `mapping " + d.name + " for MODEL on POD { ... }`";
          error(code::kMissingField, d.nameSpan, kind + " `" + d.name + "` needs `" + f.name + "`: " + f.doc, help);
        }
  } else {
    Value v = eval(*d.value, scope);
    if (v.isUnknown()) return v;
    if (d.declKind == DeclKind::Hook && v.kind == ValueKind::Lua) {
      Value code = v;
      if (!conforms(code, schema->find("lua")->type, "lua", d.value->span)) return Value::unknown(span);
      rec = std::make_shared<Record>();
      rec->kind = "hook";
      rec->set("lua", v, d.value->span);
    } else if (v.kind == ValueKind::Record && v.record->kind == kind) {
      rec = std::make_shared<Record>(*v.record);
    } else {
      error(code::kTypeMismatch, d.value->span, kind + " `" + d.name + "` must be " + article(kind) + ", found " + v.describe(),
            d.declKind == DeclKind::Hook ? "write `hook " + d.name + " = lua \"\"\" ... \"\"\"`" : "");
      return Value::unknown(span);
    }
    rec->name = d.name;
    rec->span = span;
    if (d.forExpr && kind == "mapping")
      rec->set("model", evalField(*d.forExpr, schema->find("model")->type, scope, "model"), d.forExpr->span);
    if (d.onExpr && kind == "mapping")
      rec->set("pod", evalField(*d.onExpr, schema->find("pod")->type, scope, "pod"), d.onExpr->span);
  }
  Value v;
  v.kind = ValueKind::Record;
  v.record = rec;
  v.span = span;
  return v;
}

}  // namespace ipu::check
