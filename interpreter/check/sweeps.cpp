#include "interpreter/check/sweeps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "interpreter/check/codes.h"

namespace ipu::check {

using namespace syntax;

namespace {

// Declarations a training uses whose fields a sweep may vary one by one.
const std::vector<std::string> kRecordFields = {"optimizer", "precision", "mapping", "dataset"};

// Types a sweep can give a value of: numbers, names and strings. Lists,
// models, pipelines and Lua are structure, not hyper-parameters.
bool sweepable(const Field& f) {
  switch (f.type.kind) {
    case TypeKind::Number:
    case TypeKind::Whole:
    case TypeKind::Fraction:
    case TypeKind::Bool:
    case TypeKind::Enum:
    case TypeKind::String:
    case TypeKind::Schedule:
    case TypeKind::Record:
    case TypeKind::LossScale: return !f.type.orList || f.type.kind == TypeKind::Fraction;
    default: return false;
  }
}

bool numeric(const Type& t) {
  return t.kind == TypeKind::Number || t.kind == TypeKind::Whole || t.kind == TypeKind::Fraction ||
         t.kind == TypeKind::Schedule || t.kind == TypeKind::LossScale;
}

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

const Value* fieldOf(const Record& host, const Record& training, const PhaseEntry* phase, const std::string& name) {
  if (phase != nullptr)
    if (const Value* v = host.get(name); v != nullptr && !v->isUnknown()) return v;
  if (const Value* v = training.get(name); v != nullptr && !v->isUnknown()) return v;
  return nullptr;
}

// What a path names in a training.
struct Target {
  enum class Kind { Field, RecordField, ModelArgument } kind = Kind::Field;
  std::string phase;       // "" at the training level
  std::string record;      // RecordField: optimizer, precision, mapping or dataset
  std::string field;       // the field, or the model's parameter
  const Field* spec = nullptr;         // Field, RecordField
  const syntax::Param* param = nullptr;  // ModelArgument
  std::string describe() const {
    if (kind == Kind::ModelArgument) return "parameter `" + field + "` of the model";
    return "`" + field + "`";
  }
};

class Paths {
 public:
  Paths(Evaluator& ev, const Record& training) : ev_(ev), tr_(training) {}

  // Every path the training has (for "did you mean").
  std::vector<std::string> all() const {
    std::vector<std::string> out;
    addLevel(out, "", nullptr);
    for (const auto& p : tr_.phases) addLevel(out, "phase." + p.name + ".", &p);
    return out;
  }

  std::optional<Target> resolve(const std::string& path, Span at) const {
    std::vector<std::string> parts = split(path);
    Target t;
    const PhaseEntry* phase = nullptr;
    if (parts.size() >= 2 && parts[0] == "phase") {
      for (const auto& p : tr_.phases)
        if (p.name == parts[1]) phase = &p;
      if (phase == nullptr) {
        std::vector<std::string> names;
        for (const auto& p : tr_.phases) names.push_back(p.name);
        std::string help = base::didYouMean(path, all());
        if (help.empty()) help = base::didYouMean(parts[1], names);
        ev_.error(code::kUnknownSweepPath, at, "training `" + tr_.name + "` has no phase `" + parts[1] + "`",
                  help.empty() ? phasesHelp() : help);
        return std::nullopt;
      }
      t.phase = phase->name;
      parts.erase(parts.begin(), parts.begin() + 2);
    }
    const Record& host = phase != nullptr ? *phase->fields : tr_;
    if (parts.size() == 1) {
      const Schema* schema = schemaFor(phase != nullptr ? "phase" : "training");
      const Field* spec = schema->find(parts[0]);
      if (spec == nullptr || !sweepable(*spec)) return unknown(path, at, spec);
      t.kind = Target::Kind::Field;
      t.field = parts[0];
      t.spec = spec;
      if (phase == nullptr && schemaFor("phase")->find(t.field) != nullptr && everyPhaseSets(t.field))
        return noEffect(path, t.field, at);
      return t;
    }
    if (parts.size() == 2 && std::find(kRecordFields.begin(), kRecordFields.end(), parts[0]) != kRecordFields.end()) {
      const Field* spec = schemaFor(parts[0])->find(parts[1]);
      if (spec == nullptr || !sweepable(*spec)) return unknown(path, at, spec);
      if (phase == nullptr && everyPhaseSets(parts[0])) return noEffect(path, parts[0], at);
      const Value* rv = fieldOf(host, tr_, phase, parts[0]);
      if (rv == nullptr || rv->kind != ValueKind::Record) {
        ev_.error(code::kUnknownSweepPath, at,
                  (phase != nullptr ? "phase `" + phase->name + "`" : "training `" + tr_.name + "`") + " has no " +
                      parts[0] + " whose `" + parts[1] + "` to vary",
                  "declare one (`" + parts[0] + ": NAME`) in the training");
        return std::nullopt;
      }
      t.kind = Target::Kind::RecordField;
      t.record = parts[0];
      t.field = parts[1];
      t.spec = spec;
      return t;
    }
    if (parts.size() == 2 && parts[0] == "model") {
      if (phase == nullptr && everyPhaseSets("mapping")) return noEffect(path, "mapping", at);
      const ModelValue* model = modelOf(host, phase);
      if (model == nullptr) return unknown(path, at, nullptr);
      if (!model->tmpl) {
        ev_.error(code::kUnknownSweepPath, at, "model `" + model->name + "` has no parameters to vary",
                  "a sweep varies the arguments of a model made by a call, e.g. `model tiny = bert(layers: 2, hidden: 64, ...)`");
        return std::nullopt;
      }
      for (const auto& p : model->tmpl->decl->params)
        if (p.name == parts[1]) {
          t.kind = Target::Kind::ModelArgument;
          t.field = p.name;
          t.param = &p;
          return t;
        }
      std::vector<std::string> names;
      for (const auto& p : model->tmpl->decl->params) names.push_back(p.name);
      std::string help = base::didYouMean(parts[1], names);
      if (help.empty()) {
        help = "its parameters are:";
        for (const auto& n : names) help += " `" + n + "`";
      }
      ev_.error(code::kUnknownSweepPath, at,
                "model `" + model->name + "` (`" + model->tmpl->decl->name + "(...)`) has no parameter `" + parts[1] + "`",
                help);
      return std::nullopt;
    }
    return unknown(path, at, nullptr);
  }

  // The model a level trains: its mapping's.
  const ModelValue* modelOf(const Record& host, const PhaseEntry* phase) const {
    const Value* mv = fieldOf(host, tr_, phase, "mapping");
    if (mv == nullptr || mv->kind != ValueKind::Record) return nullptr;
    const Value* model = mv->record->get("model");
    return model != nullptr && model->kind == ValueKind::Model ? model->model.get() : nullptr;
  }

 private:
  void addLevel(std::vector<std::string>& out, const std::string& prefix, const PhaseEntry* phase) const {
    const Schema* schema = schemaFor(phase != nullptr ? "phase" : "training");
    for (const auto& f : schema->fields)
      if (sweepable(f)) out.push_back(prefix + f.name);
    const Record& host = phase != nullptr ? *phase->fields : tr_;
    for (const auto& r : kRecordFields)
      if (const Value* v = fieldOf(host, tr_, phase, r); v != nullptr && v->kind == ValueKind::Record)
        for (const auto& f : schemaFor(r)->fields)
          if (sweepable(f)) out.push_back(prefix + r + "." + f.name);
    if (const ModelValue* m = modelOf(host, phase); m != nullptr && m->tmpl)
      for (const auto& p : m->tmpl->decl->params) out.push_back(prefix + "model." + p.name);
  }

  bool everyPhaseSets(const std::string& field) const {
    if (tr_.phases.empty()) return false;
    for (const auto& p : tr_.phases)
      if (const Value* v = p.fields->get(field); v == nullptr || v->isUnknown()) return false;
    return true;
  }

  std::string phasesHelp() const {
    std::string s = "its phases are:";
    for (const auto& p : tr_.phases) s += " `" + p.name + "`";
    return s;
  }

  std::optional<Target> unknown(const std::string& path, Span at, const Field* notSweepable) const {
    if (notSweepable != nullptr) {
      ev_.error(code::kUnknownSweepPath, at,
                "`" + path + "` cannot be swept: it is " + notSweepable->type.name() + ", not a number, name or string",
                "a sweep varies numbers, names and strings; to compare structures, declare variants and run each");
      return std::nullopt;
    }
    std::string help = base::didYouMean(path, all());
    if (help.empty()) help = "paths start from the training: `lr`, `phase.NAME.micro_batch`, `optimizer.weight_decay`, "
                             "`mapping.replicas`, `precision.compute`, `model.hidden`";
    ev_.error(code::kUnknownSweepPath, at, "training `" + tr_.name + "` has no value `" + path + "` to vary", help);
    return std::nullopt;
  }

  std::optional<Target> noEffect(const std::string& path, const std::string& field, Span at) const {
    std::string phase = tr_.phases.front().name;
    ev_.error(code::kSweepPathNoEffect, at,
              "every phase of training `" + tr_.name + "` sets its own `" + field + "`, so `" + path + "` changes nothing",
              "vary the phase's value: `phase." + phase + "." + path + "`");
    return std::nullopt;
  }

  Evaluator& ev_;
  const Record& tr_;
};

// A value a sweep proposes, as the evaluator holds it for the target's type:
// names of declarations are looked up, numbers take the field's unit.
Value toValue(Evaluator& ev, const ScopePtr& scope, const Target& t, const sweep::ParamValue& p, Span at) {
  using K = sweep::ParamValue::Kind;
  Value v;
  switch (p.kind) {
    case K::Number: v = Value::num(p.number); break;
    case K::Integer: v = Value::integral(static_cast<long long>(p.number)); break;
    case K::Boolean: v = Value::boolean_(p.number != 0); break;
    case K::Text: v = Value::str(p.text); break;
    case K::Name:
      if (t.spec != nullptr && t.spec->type.kind == TypeKind::Record) {
        const Value* found = scope->lookup(p.text, ev, at);
        if (found == nullptr) {
          ev.error(code::kUnknownName, at, "no " + t.spec->type.recordKind + " `" + p.text + "` for `" + t.field + "`");
          return Value::unknown(at);
        }
        v = *found;
      } else {
        v = Value::symbol(p.text);
      }
      break;
  }
  // A number is in the unit the field is stored in.
  if (v.isNumber() && t.spec != nullptr && numeric(t.spec->type) && !t.spec->type.dim.dimensionless()) v.dim = t.spec->type.dim;
  v.span = at;
  return v;
}

sweep::ParamValue toParam(const Value& v) {
  switch (v.kind) {
    case ValueKind::Number:
      return (v.integer || v.isWhole()) && std::fabs(v.number) < kMaxExactInteger
                 ? sweep::ParamValue::ofInteger(static_cast<long long>(v.number))
                 : sweep::ParamValue::ofNumber(v.number);
    case ValueKind::Bool: return sweep::ParamValue::ofBoolean(v.boolean);
    case ValueKind::String: return sweep::ParamValue::ofText(v.text);
    case ValueKind::Symbol: return sweep::ParamValue::ofName(v.text);
    case ValueKind::Record: return sweep::ParamValue::ofName(v.record->name);
    default: return sweep::ParamValue::ofText(v.show());
  }
}

// The training record with one target replaced. Copy on write: the records
// the script evaluated stay as they are.
class Substitution {
 public:
  Substitution(Evaluator& ev, const Record& training) : ev_(ev), tr_(std::make_shared<Record>(training)) {}

  // Substitutes `v` for what `t` names. A value the field does not take is
  // reported as in a script and, as in a script, the field becomes unknown
  // and checking goes on (so the diagnostics that follow are the script's
  // too). False when something was reported.
  bool apply(const Target& t, Value v, Span at) {
    const std::size_t before = ev_.diags().errorCount();
    Record* host = tr_.get();
    std::shared_ptr<Record> phaseCopy;
    std::size_t phaseIndex = 0;
    const PhaseEntry* entry = nullptr;
    if (!t.phase.empty()) {
      for (std::size_t i = 0; i < tr_->phases.size(); ++i)
        if (tr_->phases[i].name == t.phase) phaseIndex = i;
      phaseCopy = std::make_shared<Record>(*tr_->phases[phaseIndex].fields);
      host = phaseCopy.get();
      entry = &tr_->phases[phaseIndex];
    }
    switch (t.kind) {
      case Target::Kind::Field: setField(*host, entry, t, std::move(v), at); break;
      case Target::Kind::RecordField: {
        const Value* rv = fieldOf(*host, *tr_, entry, t.record);
        Span where = writtenAt(*rv->record, t.field, at);
        auto copy = std::make_shared<Record>(*rv->record);
        if (!ev_.conforms(v, t.spec->type, t.field, where)) {
          v = Value::unknown(where);
          copy->hadErrors = true;
        }
        copy->set(t.field, withSpan(v, where), nameSpanOf(*copy, t.field, at));
        Value nv = *rv;
        nv.record = copy;
        host->set(t.record, nv, nameSpanOf(*host, t.record, nameSpanOf(*tr_, t.record, at)));
        break;
      }
      case Target::Kind::ModelArgument: {
        const Value* mv = fieldOf(*host, *tr_, entry, "mapping");
        const Value* old = mv->record->get("model");
        v.span = at;
        Value model = ev_.reapplyModel(*old->model, {{t.field, v}});
        if (model.kind != ValueKind::Model) break;
        auto mapping = std::make_shared<Record>(*mv->record);
        model.span = old->span;
        mapping->set("model", model, nameSpanOf(*mapping, "model", at));
        Value nm = *mv;
        nm.record = mapping;
        // The phase's own `model:` names the same model: it follows.
        if (const Value* pm = fieldOf(*host, *tr_, entry, "model");
            pm != nullptr && pm->kind == ValueKind::Model && pm->model == old->model)
          host->set("model", model, nameSpanOf(*host, "model", nameSpanOf(*tr_, "model", at)));
        host->set("mapping", nm, nameSpanOf(*host, "mapping", nameSpanOf(*tr_, "mapping", at)));
        break;
      }
    }
    if (phaseCopy) tr_->phases[phaseIndex].fields = phaseCopy;
    return ev_.diags().errorCount() == before;
  }

  std::shared_ptr<const Record> result() const { return tr_; }

 private:
  void setField(Record& host, const PhaseEntry* entry, const Target& t, Value v, Span at) {
    const Value* old = fieldOf(host, *tr_, entry, t.field);
    Span where = old != nullptr && old->span.valid() ? old->span : at;
    if (t.spec->type.kind == TypeKind::Schedule && old != nullptr && old->kind == ValueKind::Schedule &&
        !v.isUnknown()) {
      // A learning rate replaces the peak of the schedule written there:
      // warmup and decay stay as written, and the schedule's checks apply.
      auto s = std::make_shared<ScheduleValue>(*old->schedule);
      s->base = withSpan(v, s->base.span.valid() ? s->base.span : where);
      Value nv = *old;
      nv.schedule = s;
      v = nv;
    } else if (!ev_.conforms(v, t.spec->type, t.field, where)) {
      v = Value::unknown(where);
      host.hadErrors = true;
    } else {
      v = withSpan(v, where);
    }
    host.set(t.field, v, nameSpanOf(host, t.field, nameSpanOf(*tr_, t.field, at)));
  }

  static Value withSpan(Value v, Span s) {
    v.span = s;
    return v;
  }
  static Span writtenAt(const Record& r, const std::string& field, Span dflt) {
    const Value* v = r.get(field);
    return v != nullptr && v->span.valid() ? v->span : dflt;
  }
  static Span nameSpanOf(const Record& r, const std::string& field, Span dflt) {
    const RecordField* f = r.field(field);
    return f != nullptr && f->nameSpan.valid() ? f->nameSpan : dflt;
  }

  Evaluator& ev_;
  std::shared_ptr<Record> tr_;
};

// ------------------------------------------------------------ the declaration

// `eval.mlm_loss` as written: a dotted metric name, not an expression.
std::optional<std::string> dottedName(const Expr& e) {
  if (const auto* n = e.dyn<NameExpr>()) return n->name;
  if (const auto* s = e.dyn<StringExpr>()) {
    if (s->value.empty()) return std::nullopt;
    for (char c : s->value)
      if (std::isspace(static_cast<unsigned char>(c))) return std::nullopt;
    return s->value;
  }
  if (const auto* m = e.dyn<MemberExpr>())
    if (auto base = dottedName(*m->object); base && !m->object->dyn<StringExpr>()) return *base + "." + m->member;
  return std::nullopt;
}

class SweepReader {
 public:
  SweepReader(Evaluator& ev, const Module& module, const Declaration& d,
              const std::vector<const Declaration*>& sweeps, const TrainingSpec* training)
      : ev_(ev), module_(module), d_(d), sweeps_(sweeps), training_(training) {}

  std::optional<sweep::SweepSpec> read() {
    const std::size_t before = ev_.diags().errorCount();
    spec_.name = d_.name;
    spec_.span = d_.nameSpan;
    if (d_.hasParams)
      ev_.error(code::kBadSweep, d_.nameSpan, "a sweep takes no parameters", "write `sweep " + d_.name + " for TRAINING { ... }`");
    if (d_.onExpr) ev_.error(code::kBadSweep, d_.onExpr->span, "`on` belongs to mappings", "write `sweep " + d_.name + " for TRAINING { ... }`");
    if (!d_.body) {
      ev_.error(code::kBadSweep, d_.nameSpan, "sweep `" + d_.name + "` needs a body: `sweep " + d_.name + " for TRAINING { ... }`",
                "a sweep cannot be made from another with `=`; copy its members");
      return std::nullopt;
    }
    if (!d_.forExpr) {
      ev_.error(code::kBadSweep, d_.nameSpan, "sweep `" + d_.name + "` does not say which training it varies",
                "write `sweep " + d_.name + " for TRAINING { ... }`");
      return std::nullopt;
    }
    scope_ = std::make_shared<Scope>(ev_.scopePtrOf(module_));
    Value tv = ev_.eval(*d_.forExpr, scope_);
    if (tv.isUnknown()) return std::nullopt;
    if (tv.kind != ValueKind::Record || tv.record->kind != "training") {
      std::string what = tv.kind == ValueKind::Record ? "a " + tv.record->kind : std::string(check::describe(tv.kind));
      ev_.error(code::kBadSweep, d_.forExpr->span, "a sweep varies a training, but this is " + what,
                "write `sweep " + d_.name + " for TRAINING { ... }` with a training of the script");
      return std::nullopt;
    }
    training_record_ = tv.record;
    spec_.training = tv.record->name;
    if (training_ != nullptr && training_->name != spec_.training) training_ = nullptr;

    readMembers();
    if (ev_.diags().errorCount() != before) return std::nullopt;
    std::sort(spec_.parameters.begin(), spec_.parameters.end(),
              [](const sweep::ParamSpec& a, const sweep::ParamSpec& b) { return a.path < b.path; });
    return spec_;
  }

 private:
  void readMembers() {
    const Schema& schema = *schemaFor("sweep");
    std::map<std::string, Span> seen;
    bool hasMethod = false, hasMetric = false, hasParameters = false, hasRunCap = false;
    const FieldMember* earlyTerminate = nullptr;
    for (const auto& m : d_.body->members) {
      std::string name;
      Span nameSpan;
      if (const auto* f = m->dyn<FieldMember>()) name = f->name, nameSpan = f->nameSpan;
      else if (const auto* b = m->dyn<BlockMember>()) name = b->name, nameSpan = b->nameSpan;
      else if (const auto* l = m->dyn<LetMember>()) {
        if (!scope_->define(l->name, ev_.eval(*l->value, scope_), l->nameSpan)) {
          auto& diag = ev_.error(code::kDuplicateName, l->nameSpan, "`" + l->name + "` is already defined in this block");
          diag.addNote({scope_->definedAt(l->name), "first defined here"});
        }
        continue;
      } else {
        ev_.error(code::kMisplacedMember, m->span, "a sweep holds `method`, `metric`, `parameters { ... }`, `run_cap`, "
                                                   "`early_terminate`, `from`, `seed` and `let`s");
        continue;
      }
      if (auto it = seen.find(name); it != seen.end()) {
        auto& diag = ev_.error(code::kDuplicateField, nameSpan, "`" + name + "` is given twice", "keep one of them");
        diag.addNote({it->second, "first given here"});
        continue;
      }
      seen[name] = nameSpan;
      const Field* spec = schema.find(name);
      if (spec == nullptr) {
        ev_.error(code::kUnknownField, nameSpan, "`" + name + "` is not a field of a sweep", base::didYouMean(name, schema.names()));
        continue;
      }
      const auto* f = m->dyn<FieldMember>();
      const auto* b = m->dyn<BlockMember>();
      if (name == "parameters") {
        hasParameters = true;
        if (b == nullptr) {
          ev_.error(code::kTypeMismatch, nameSpan, "`parameters` takes a block: `parameters { lr: log_uniform(1e-4, 1e-2) }`");
          continue;
        }
        readParameters(*b);
      } else if (name == "metric") {
        hasMetric = true;
        if (b != nullptr) readMetricBlock(*b);
        else readMetricCall(*f);
      } else if (b != nullptr) {
        ev_.error(code::kTypeMismatch, nameSpan, "`" + name + "` takes a value, not a block", "write `" + name + ": ...`");
      } else if (name == "method") {
        hasMethod = true;
        Value v = ev_.evalField(*f->value, spec->type, scope_, name);
        if (v.kind == ValueKind::Symbol) spec_.method = *sweep::methodFromName(v.text);
      } else if (name == "run_cap") {
        hasRunCap = true;
        Value v = ev_.evalField(*f->value, spec->type, scope_, name);
        if (v.isNumber()) spec_.runCap = static_cast<long long>(v.number);
      } else if (name == "seed") {
        Value v = ev_.evalField(*f->value, spec->type, scope_, name);
        if (v.isNumber()) spec_.seed = static_cast<std::uint64_t>(v.number);
      } else if (name == "early_terminate") {
        earlyTerminate = f;
      } else if (name == "from") {
        readFrom(*f);
      }
    }
    if (!hasMethod)
      ev_.error(code::kMissingField, d_.nameSpan, "sweep `" + d_.name + "` needs `method`: grid, random or bayes",
                "add `method: bayes` (or grid, random)");
    if (!hasMetric)
      ev_.error(code::kBadMetric, d_.nameSpan, "sweep `" + d_.name + "` needs a `metric` to optimise",
                "add e.g. `metric: minimize(loss)` or `metric: maximize(eval.mlm_accuracy)`");
    if (!hasParameters || parametersEmptyAt_.valid())
      ev_.error(code::kMissingField, hasParameters ? parametersEmptyAt_ : d_.nameSpan,
                "sweep `" + d_.name + "` varies nothing: it needs `parameters { ... }` with at least one",
                "add e.g. `parameters { lr: log_uniform(1e-4, 1e-2) }`");
    if (hasMethod && spec_.method != sweep::Method::Grid && !hasRunCap)
      ev_.error(code::kRunCapRequired, d_.nameSpan,
                std::string("a ") + (spec_.method == sweep::Method::Bayes ? "Bayesian" : "random") + " sweep needs `run_cap`",
                "it can propose trials forever: add e.g. `run_cap: 40`");
    if (hasMethod && spec_.method == sweep::Method::Grid) checkGrid();
    if (hasMetric) checkDirection();
    if (earlyTerminate != nullptr) readEarlyTerminate(*earlyTerminate);
    if (earlyTerminate != nullptr && hasMetric && spec_.earlyTerminate.enabled) checkRungsSeeMetric(*earlyTerminate);
  }

  // Hyperband judges a trial when it reports its metric at or past a bracket
  // (min_iter x eta^k steps), before the trial ends. A held-out metric
  // (`eval.NAME`) is reported once, at the end of each phase: when no phase
  // but the last ends at or after min_iter, there is no report to judge it by
  // before the trial is over, and hyperband stops nothing.
  void checkRungsSeeMetric(const FieldMember& f) {
    if (training_ == nullptr || spec_.metric.name.rfind("eval.", 0) != 0) return;
    long long end = 0, lastReportBeforeTheEnd = 0;
    for (std::size_t i = 0; i < training_->phases.size(); ++i) {
      end += training_->phases[i].steps;
      if (i + 1 < training_->phases.size()) lastReportBeforeTheEnd = end;
    }
    const long long minIter = spec_.earlyTerminate.minIter;
    if (lastReportBeforeTheEnd >= minIter) return;
    std::string when = training_->phases.size() <= 1
                           ? "once, as the trial's only phase ends"
                           : "at the end of each phase, and no phase before the last ends at or after step " +
                                 std::to_string(minIter) + " (the first bracket)";
    ev_.warning(code::kHyperbandUnseenMetric, f.value->span,
                "hyperband cannot stop a trial: `" + spec_.metric.name + "` is recorded " + when +
                    "; a trial is judged only on what it reported before it ended",
                "stop on a metric recorded every step (`loss`, an accuracy), or split the training into phases "
                "so that an evaluation comes before the end");
  }

  // --------------------------------------------------------------- parameters

  void readParameters(const BlockMember& b) {
    Paths paths(ev_, *training_record_);
    std::map<std::string, Span> seen;
    if (b.block->members.empty()) parametersEmptyAt_ = b.nameSpan;
    for (const auto& m : b.block->members) {
      const auto* f = m->dyn<FieldMember>();
      if (f == nullptr) {
        ev_.error(code::kMisplacedMember, m->span, "`parameters` holds `PATH: VALUES` lines: `lr: log_uniform(1e-4, 1e-2)`");
        continue;
      }
      if (auto it = seen.find(f->name); it != seen.end()) {
        auto& diag = ev_.error(code::kDuplicateField, f->nameSpan, "`" + f->name + "` is given twice", "keep one of them");
        diag.addNote({it->second, "first given here"});
        continue;
      }
      seen[f->name] = f->nameSpan;
      std::optional<Target> target = paths.resolve(f->name, f->nameSpan);
      if (!target) continue;
      sweep::ParamSpec p;
      p.path = f->name;
      p.span = f->span;
      if (readDistribution(*f, *target, p)) spec_.parameters.push_back(std::move(p));
    }
  }

  // One value written for `target`, checked as the field checks it, and
  // substituted into the training the way a trial's value is (so a value a
  // trial could not use is reported now).
  std::optional<sweep::ParamValue> valueFor(const Expr& e, const Target& t) {
    const std::size_t before = ev_.diags().errorCount();
    Value v = t.spec != nullptr ? ev_.evalField(e, t.spec->type, scope_, t.field) : ev_.eval(e, scope_);
    if (v.isUnknown() || ev_.diags().errorCount() != before) return std::nullopt;
    if (v.kind == ValueKind::Record && v.record->name.empty()) {
      ev_.error(code::kTypeMismatch, e.span, "a swept " + v.record->kind + " must be a declaration with a name",
                "declare it (`" + v.record->kind + " NAME { ... }`) and list its name");
      return std::nullopt;
    }
    if (t.kind == Target::Kind::ModelArgument && v.kind != ValueKind::Number && v.kind != ValueKind::Bool &&
        v.kind != ValueKind::String && v.kind != ValueKind::Symbol) {
      ev_.error(code::kTypeMismatch, e.span, "a sweep varies a model's numbers, names and strings, found " + v.describe());
      return std::nullopt;
    }
    sweep::ParamValue p = toParam(v);
    if (!substitutes(t, p, e.span)) return std::nullopt;
    return p;
  }

  bool substitutes(const Target& t, const sweep::ParamValue& p, Span at) {
    const std::size_t before = ev_.diags().errorCount();
    Substitution s(ev_, *training_record_);
    Value v = toValue(ev_, scope_, t, p, at);
    if (v.isUnknown()) return false;
    return s.apply(t, v, at) && ev_.diags().errorCount() == before;
  }

  // A bound of a range: a number in the field's unit.
  std::optional<double> bound(const Expr& e, const Target& t, const sweep::ParamSpec& p, bool integral) {
    Value v = ev_.eval(e, scope_);
    if (v.isUnknown()) return std::nullopt;
    if (!v.isNumber()) {
      ev_.error(code::kBadDistribution, e.span, "a bound of `" + p.path + "`'s range must be a number, found " + v.describe());
      return std::nullopt;
    }
    if (std::fabs(v.number) > kMaxExactInteger) {
      ev_.error(code::kBadDistribution, e.span, "a bound of `" + p.path + "`'s range is too large: `" + v.show() + "`",
                "check for a typo in the number");
      return std::nullopt;
    }
    if (integral && v.number != std::floor(v.number)) {
      ev_.error(code::kBadDistribution, e.span,
                std::string(sweep::distributionName(p.distribution)) + " takes whole numbers, found `" + v.show() + "`");
      return std::nullopt;
    }
    if (t.spec != nullptr) {
      Value c = v;
      if (!ev_.conforms(c, t.spec->type, t.field, e.span)) return std::nullopt;
      return c.number;
    }
    if (!v.dim.dimensionless()) {
      ev_.error(code::kUnitMismatch, e.span, "a model's parameter takes plain numbers, found " + v.describe(), "remove the unit");
      return std::nullopt;
    }
    return v.number;
  }

  bool readDistribution(const FieldMember& f, const Target& t, sweep::ParamSpec& p) {
    const Expr& e = *f.value;
    const auto* call = e.dyn<CallExpr>();
    const NameExpr* callee = call != nullptr ? call->callee->dyn<NameExpr>() : nullptr;
    if (callee == nullptr) return readValues(e, t, p, sweep::Distribution::Values);
    auto dist = sweep::distributionFromName(callee->name);
    if (!dist || *dist == sweep::Distribution::Values) {
      std::vector<std::string> names;
      for (auto d : {sweep::Distribution::Categorical, sweep::Distribution::Uniform, sweep::Distribution::IntUniform,
                     sweep::Distribution::LogUniform, sweep::Distribution::QUniform, sweep::Distribution::QLogUniform,
                     sweep::Distribution::Normal, sweep::Distribution::QNormal, sweep::Distribution::LogNormal,
                     sweep::Distribution::QLogNormal})
        names.push_back(sweep::distributionName(d));
      std::string help = base::didYouMean(callee->name, names);
      if (help.empty()) {
        help = "write a list of values, or one of:";
        for (const auto& n : names) help += " `" + n + "(...)`";
      }
      ev_.error(code::kBadDistribution, callee->span, "`" + callee->name + "` is not a distribution", help);
      return false;
    }
    p.distribution = *dist;
    // Arguments by position, or by name.
    std::vector<std::string> order;
    switch (*dist) {
      case sweep::Distribution::Categorical: order = {"values", "probabilities"}; break;
      case sweep::Distribution::Uniform:
      case sweep::Distribution::IntUniform:
      case sweep::Distribution::LogUniform: order = {"min", "max"}; break;
      case sweep::Distribution::QUniform:
      case sweep::Distribution::QLogUniform: order = {"min", "max", "q"}; break;
      case sweep::Distribution::Normal:
      case sweep::Distribution::LogNormal: order = {"mu", "sigma"}; break;
      case sweep::Distribution::QNormal:
      case sweep::Distribution::QLogNormal: order = {"mu", "sigma", "q"}; break;
      case sweep::Distribution::Values: break;
    }
    std::map<std::string, const Expr*> args;
    std::size_t positional = 0;
    bool ok = true;
    for (const auto& a : call->args) {
      std::string name = a.name;
      if (name.empty()) {
        if (positional >= order.size()) {
          ev_.error(code::kBadArgument, a.value->span,
                    "`" + callee->name + "` takes " + std::to_string(order.size()) + " arguments; this is one too many");
          ok = false;
          continue;
        }
        name = order[positional++];
      } else if (std::find(order.begin(), order.end(), name) == order.end()) {
        ev_.error(code::kBadArgument, a.nameSpan, "`" + callee->name + "` has no argument `" + name + "`",
                  base::didYouMean(name, order));
        ok = false;
        continue;
      }
      if (args.count(name)) {
        ev_.error(code::kBadArgument, a.value->span, "argument `" + name + "` is given twice");
        ok = false;
        continue;
      }
      args[name] = a.value.get();
    }
    for (const auto& n : order)
      if (!args.count(n) && n != "probabilities") {
        ev_.error(code::kBadArgument, call->span, "`" + callee->name + "` needs `" + n + "`", usage(*dist));
        ok = false;
      }
    if (!ok) return false;
    if (*dist == sweep::Distribution::Categorical) {
      if (!readValues(*args["values"], t, p, *dist)) return false;
      if (args.count("probabilities")) return readProbabilities(*args["probabilities"], p);
      return true;
    }
    // A range of numbers: the field must take numbers, and whole-number
    // fields only ranges that draw whole numbers.
    const Type* type = t.spec != nullptr ? &t.spec->type : nullptr;
    if (type != nullptr && !numeric(*type)) {
      ev_.error(code::kDistributionForField, call->span,
                "`" + t.field + "` takes " + type->name() + ": a range of numbers cannot give one",
                "list the values: `" + p.path + ": [...]`");
      return false;
    }
    const bool wholeField = type != nullptr && type->kind == TypeKind::Whole;
    const bool integral = *dist == sweep::Distribution::IntUniform;
    if (args.count("q")) {
      Value q = ev_.eval(*args["q"], scope_);
      if (q.isUnknown()) return false;
      if (!q.isNumber() || !(q.number > 0)) {
        ev_.error(code::kBadDistribution, args["q"]->span, "the step `q` must be a positive number, found " + q.describe());
        return false;
      }
      p.q = q.number;
      if (wholeField && p.q != std::floor(p.q)) {
        ev_.error(code::kDistributionForField, args["q"]->span,
                  "`" + t.field + "` takes whole numbers, but a step of " + q.show() + " gives fractions",
                  "use a whole step, e.g. `q: 1`");
        return false;
      }
    }
    const bool drawsWhole = integral || (p.q > 0 && p.q == std::floor(p.q));
    if (wholeField && !drawsWhole) {
      ev_.error(code::kDistributionForField, call->span,
                "`" + t.field + "` takes whole numbers, but `" + callee->name + "` draws fractions",
                "use `int_uniform(min, max)`, or a `q_` form with a whole step `q`");
      return false;
    }
    if (args.count("min")) {
      auto lo = bound(*args["min"], t, p, integral || (wholeField && p.q > 0));
      auto hi = bound(*args["max"], t, p, integral || (wholeField && p.q > 0));
      if (!lo || !hi) return false;
      p.min = *lo;
      p.max = *hi;
      if (p.min > p.max) {
        ev_.error(code::kBadDistribution, call->span,
                  "the range of `" + p.path + "` is inverted: " + formatNumber(p.min) + " > " + formatNumber(p.max),
                  "write the smaller bound first");
        return false;
      }
      if (p.min == p.max) {
        ev_.error(code::kBadDistribution, call->span, "the range of `" + p.path + "` is empty: both bounds are " + formatNumber(p.min),
                  "to fix the value, set it in the training; to vary it, widen the range");
        return false;
      }
      const bool logForm = *dist == sweep::Distribution::LogUniform || *dist == sweep::Distribution::QLogUniform;
      if (logForm && !(p.min > 0)) {
        ev_.error(code::kBadDistribution, args["min"]->span,
                  "`" + callee->name + "` is uniform in the logarithm: its bounds must be positive, found " + formatNumber(p.min));
        return false;
      }
      if (p.q > 0 && p.q > p.max - p.min) {
        ev_.error(code::kBadDistribution, args["q"]->span,
                  "the step " + formatNumber(p.q) + " is wider than the range " + formatNumber(p.min) + " to " + formatNumber(p.max),
                  "use a smaller `q`");
        return false;
      }
      // Both ends must be values a trial can use.
      sweep::ParamValue a = integral || (wholeField && p.q > 0) ? sweep::ParamValue::ofInteger(static_cast<long long>(p.min))
                                                                : sweep::ParamValue::ofNumber(p.min);
      sweep::ParamValue z = integral || (wholeField && p.q > 0) ? sweep::ParamValue::ofInteger(static_cast<long long>(p.max))
                                                                : sweep::ParamValue::ofNumber(p.max);
      if (t.kind == Target::Kind::ModelArgument)
        return substitutes(t, a, args["min"]->span) && substitutes(t, z, args["max"]->span);
      return true;
    }
    // The normal forms.
    Value mu = ev_.eval(*args["mu"], scope_), sigma = ev_.eval(*args["sigma"], scope_);
    if (mu.isUnknown() || sigma.isUnknown()) return false;
    if (!mu.isNumber() || !mu.dim.dimensionless()) {
      ev_.error(code::kBadDistribution, args["mu"]->span, "the mean `mu` must be a plain number, found " + mu.describe());
      return false;
    }
    if (!sigma.isNumber() || !sigma.dim.dimensionless() || !(sigma.number > 0)) {
      ev_.error(code::kBadDistribution, args["sigma"]->span,
                "the spread `sigma` must be a positive number, found " + sigma.describe());
      return false;
    }
    p.mu = mu.number;
    p.sigma = sigma.number;
    return true;
  }

  static std::string usage(sweep::Distribution d) {
    switch (d) {
      case sweep::Distribution::Categorical: return "write `categorical([a, b, c], probabilities: [0.2, 0.5, 0.3])`";
      case sweep::Distribution::Uniform: return "write `uniform(min, max)`";
      case sweep::Distribution::IntUniform: return "write `int_uniform(min, max)`";
      case sweep::Distribution::LogUniform: return "write `log_uniform(min, max)`";
      case sweep::Distribution::QUniform: return "write `q_uniform(min, max, q)`";
      case sweep::Distribution::QLogUniform: return "write `q_log_uniform(min, max, q)`";
      case sweep::Distribution::Normal: return "write `normal(mu, sigma)`";
      case sweep::Distribution::QNormal: return "write `q_normal(mu, sigma, q)`";
      case sweep::Distribution::LogNormal: return "write `log_normal(mu, sigma)` (of the logarithm)";
      case sweep::Distribution::QLogNormal: return "write `q_log_normal(mu, sigma, q)`";
      case sweep::Distribution::Values: return "write a list: `[a, b, c]`";
    }
    return {};
  }

  bool readValues(const Expr& e, const Target& t, sweep::ParamSpec& p, sweep::Distribution dist) {
    p.distribution = dist;
    std::vector<const Expr*> items;
    if (const auto* list = e.dyn<ListExpr>()) {
      for (const auto& item : list->items) items.push_back(item.get());
    } else if (e.dyn<RangeExpr>() != nullptr) {
      ev_.error(code::kBadDistribution, e.span, "a range lists no values here",
                "list them (`[4, 8, 16]`) or draw whole numbers with `int_uniform(min, max)`");
      return false;
    } else if (dist == sweep::Distribution::Categorical) {
      ev_.error(code::kBadDistribution, e.span, "`categorical` takes a list of values first", usage(dist));
      return false;
    } else {
      items.push_back(&e);  // one value: the parameter is fixed at it
    }
    if (items.empty()) {
      ev_.error(code::kBadDistribution, e.span, "`" + p.path + "` has no values", "list at least one: `[a, b]`");
      return false;
    }
    std::map<std::string, Span> seen;
    bool ok = true;
    for (const Expr* item : items) {
      auto v = valueFor(*item, t);
      if (!v) {
        ok = false;
        continue;
      }
      std::string key = v->canonical();
      if (auto it = seen.find(key); it != seen.end()) {
        auto& diag = ev_.error(code::kBadDistribution, item->span, "`" + key + "` is listed twice for `" + p.path + "`",
                               "each value is one trial's identity: list it once");
        diag.addNote({it->second, "first listed here"});
        ok = false;
        continue;
      }
      seen[key] = item->span;
      p.values.push_back(*v);
    }
    return ok;
  }

  bool readProbabilities(const Expr& e, sweep::ParamSpec& p) {
    const auto* list = e.dyn<ListExpr>();
    if (list == nullptr) {
      ev_.error(code::kBadDistribution, e.span, "`probabilities` takes a list, one per value", usage(p.distribution));
      return false;
    }
    if (list->items.size() != p.values.size()) {
      ev_.error(code::kBadDistribution, e.span,
                std::to_string(list->items.size()) + " probabilit" + (list->items.size() == 1 ? "y" : "ies") + " for " +
                    std::to_string(p.values.size()) + " value" + (p.values.size() == 1 ? "" : "s") + " of `" + p.path + "`",
                "give one probability per value, in the same order");
      return false;
    }
    double sum = 0;
    for (const auto& item : list->items) {
      Value v = ev_.eval(*item, scope_);
      if (v.isUnknown()) return false;
      if (!v.isNumber() || !v.dim.dimensionless() || v.number < 0 || v.number > 1) {
        ev_.error(code::kBadDistribution, item->span, "a probability is a number from 0 to 1, found " + v.describe());
        return false;
      }
      p.probabilities.push_back(v.number);
      sum += v.number;
    }
    if (std::fabs(sum - 1) > 1e-6) {
      ev_.error(code::kBadDistribution, e.span, "the probabilities of `" + p.path + "` sum to " + formatNumber(sum) + ", not 1",
                "scale them so that they sum to 1");
      return false;
    }
    return true;
  }

  // A grid runs every cell: each parameter needs finitely many values.
  void checkGrid() {
    double cells = 1;
    for (auto& p : spec_.parameters) {
      switch (p.distribution) {
        case sweep::Distribution::Values: cells *= static_cast<double>(p.values.size()); break;
        case sweep::Distribution::IntUniform:
        case sweep::Distribution::QUniform: {
          // Finitely many: listed as values, which is what a grid runs.
          const double step = p.distribution == sweep::Distribution::IntUniform ? 1 : p.q;
          const double n = std::floor((p.max - p.min) / step + 1e-9) + 1;
          cells *= n;
          if (n > kMaxGridCells) break;
          std::vector<sweep::ParamValue> values;
          for (double i = 0; i < n; ++i) {
            double v = p.min + i * step;
            values.push_back(v == std::floor(v) && std::fabs(v) < kMaxExactInteger
                                 ? sweep::ParamValue::ofInteger(static_cast<long long>(v))
                                 : sweep::ParamValue::ofNumber(v));
          }
          p.values = std::move(values);
          p.distribution = sweep::Distribution::Values;
          break;
        }
        case sweep::Distribution::Categorical:
          ev_.error(code::kGridNotFinite, p.span, "a grid runs every value of `" + p.path + "`: probabilities mean nothing in it",
                    "list the values (`[...]`), or use `method: random` to draw by probability");
          return;
        default:
          ev_.error(code::kGridNotFinite, p.span,
                    "a grid cannot run every value of `" + p.path + "`: `" + sweep::distributionName(p.distribution) +
                        "` is continuous",
                    "list the values (`[1e-4, 3e-4, 1e-3]`), or use `method: random` or `method: bayes` with `run_cap`");
          return;
      }
    }
    if (cells > kMaxGridCells)
      ev_.error(code::kGridTooLarge, d_.nameSpan,
                "the grid of sweep `" + d_.name + "` has " + formatNumber(cells) + " cells: too large to be meant (the limit is " +
                    formatNumber(kMaxGridCells) + ")",
                "list fewer values, or use `method: random` or `method: bayes` with a `run_cap`");
  }

  // ------------------------------------------------------------------ metric

  void readMetricCall(const FieldMember& f) {
    const auto* call = f.value->dyn<CallExpr>();
    const NameExpr* callee = call != nullptr ? call->callee->dyn<NameExpr>() : nullptr;
    const std::string help = "write `metric: minimize(loss)` or `metric: maximize(eval.mlm_accuracy, target: 0.7)`";
    if (callee == nullptr) {
      ev_.error(code::kBadMetric, f.value->span, "a metric says what to optimise and which way", help);
      return;
    }
    auto goal = sweep::goalFromName(callee->name);
    if (!goal) {
      std::string dym = base::didYouMean(callee->name, {"minimize", "maximize"});
      ev_.error(code::kBadMetric, callee->span, "`" + callee->name + "` is not a goal: a metric is minimised or maximised",
                dym.empty() ? help : dym);
      return;
    }
    spec_.metric.goal = *goal;
    bool named = false;
    for (const auto& a : call->args) {
      if (a.name.empty() && !named) {
        named = true;
        metricName(*a.value);
      } else if (a.name == "target") {
        metricTarget(*a.value);
      } else {
        ev_.error(code::kBadArgument, a.name.empty() ? a.value->span : a.nameSpan,
                  "`" + callee->name + "` takes the metric's name and a `target`", help);
      }
    }
    if (!named) ev_.error(code::kBadMetric, call->span, "which metric? `" + callee->name + "(loss)`", help);
  }

  void readMetricBlock(const BlockMember& b) {
    const Schema& schema = *schemaFor("metric");
    bool hasName = false, hasGoal = false;
    for (const auto& m : b.block->members) {
      const auto* f = m->dyn<FieldMember>();
      if (f == nullptr) {
        ev_.error(code::kMisplacedMember, m->span, "a metric block holds `name`, `goal` and `target`");
        continue;
      }
      const Field* spec = schema.find(f->name);
      if (spec == nullptr) {
        ev_.error(code::kUnknownField, f->nameSpan, "`" + f->name + "` is not a field of a metric",
                  base::didYouMean(f->name, schema.names()));
      } else if (f->name == "name") {
        hasName = true;
        metricName(*f->value);
      } else if (f->name == "goal") {
        hasGoal = true;
        const auto* n = f->value->dyn<NameExpr>();
        auto goal = n != nullptr ? sweep::goalFromName(n->name) : std::nullopt;
        if (!goal)
          ev_.error(code::kBadMetric, f->value->span, "a metric's goal is `minimize` or `maximize`",
                    n != nullptr ? base::didYouMean(n->name, {"minimize", "maximize"}) : std::string());
        else
          spec_.metric.goal = *goal;
      } else {
        metricTarget(*f->value);
      }
    }
    if (!hasName) ev_.error(code::kBadMetric, b.nameSpan, "the metric has no `name`", "add e.g. `name: eval.mlm_loss`");
    if (!hasGoal) ev_.error(code::kBadMetric, b.nameSpan, "the metric has no `goal`", "add `goal: minimize` or `goal: maximize`");
  }

  // A goal against the way a well-known metric improves is almost always a
  // slip (maximizing the loss): a warning, since a hook's key may mean anything.
  void checkDirection() {
    const std::string& n = spec_.metric.name;
    if (n.empty()) return;
    auto endsWith = [&](const std::string& tail) {
      return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
    };
    std::optional<sweep::Goal> better;
    if (endsWith("loss") || endsWith("step_time_s") || endsWith("time_to_train_s") || endsWith("peak_memory_bytes"))
      better = sweep::Goal::Minimize;
    else if (endsWith("accuracy") || endsWith("samples_per_s") || endsWith("tokens_per_s") || endsWith("pipeline_utilisation"))
      better = sweep::Goal::Maximize;
    if (!better || *better == spec_.metric.goal) return;
    const bool lower = *better == sweep::Goal::Minimize;
    ev_.warning(code::kMetricDirection, metricSpan_,
                std::string("this sweep ") + (lower ? "maximizes" : "minimizes") + " `" + n + "`, for which " +
                    (lower ? "lower" : "higher") + " is better",
                std::string("write `") + (lower ? "minimize" : "maximize") + "(" + n + ")`");
  }

  void metricName(const Expr& e) {
    metricSpan_ = e.span;
    auto name = dottedName(e);
    if (!name) {
      ev_.error(code::kBadMetric, e.span, "a metric is named by its key: `loss`, `eval.mlm_accuracy`, `\"my.metric\"`",
                "metrics are what a trial reports: `loss`, `eval.<name>`, `samples_per_s`, or a hook's `ctx:log` key");
      return;
    }
    spec_.metric.name = *name;
  }

  void metricTarget(const Expr& e) {
    Value v = ev_.eval(e, scope_);
    if (v.isUnknown()) return;
    if (!v.isNumber() || !v.dim.dimensionless()) {
      ev_.error(code::kBadMetric, e.span, "a metric's target is a plain number, found " + v.describe());
      return;
    }
    spec_.metric.target = v.number;
  }

  // ------------------------------------------------------- early termination

  void readEarlyTerminate(const FieldMember& f) {
    const auto* call = f.value->dyn<CallExpr>();
    const NameExpr* callee = call != nullptr ? call->callee->dyn<NameExpr>() : nullptr;
    if (callee == nullptr || callee->name != "hyperband") {
      std::string dym = callee != nullptr ? base::didYouMean(callee->name, {"hyperband"}) : std::string();
      ev_.error(code::kBadEarlyTerminate, f.value->span, "early termination is `hyperband(min_iter: N, eta: 3)`",
                dym.empty() ? "hyperband stops trials in the bottom of each bracket; drop `early_terminate` to run every trial to the end" : dym);
      return;
    }
    EarlyTerminateArgs a;
    std::map<std::string, Span> at;
    for (const auto& arg : call->args) {
      if (arg.name != "min_iter" && arg.name != "eta" && arg.name != "max_iter") {
        ev_.error(code::kBadArgument, arg.name.empty() ? arg.value->span : arg.nameSpan,
                  arg.name.empty() ? "name hyperband's arguments: `hyperband(min_iter: 100, eta: 3)`"
                                   : "`hyperband` has no argument `" + arg.name + "`",
                  base::didYouMean(arg.name, {"min_iter", "eta", "max_iter"}));
        return;
      }
      Value v = ev_.eval(*arg.value, scope_);
      if (v.isUnknown()) return;
      // Iterations are steps of the trial's step counter.
      if (!v.isNumber() || !(v.dim.dimensionless() || v.dim == dims::steps()) || v.number != std::floor(v.number) ||
          std::fabs(v.number) > kMaxExactInteger) {
        ev_.error(code::kBadEarlyTerminate, arg.value->span, "`" + arg.name + "` is a whole number of steps, found " + v.describe());
        return;
      }
      at[arg.name] = arg.value->span;
      (arg.name == "min_iter" ? a.minIter : arg.name == "eta" ? a.eta : a.maxIter) = static_cast<long long>(v.number);
    }
    if (!at.count("min_iter")) {
      ev_.error(code::kBadEarlyTerminate, call->span, "hyperband needs `min_iter`: the steps before the first stop",
                "write `hyperband(min_iter: 100, eta: 3)`");
      return;
    }
    if (a.minIter < 1) {
      ev_.error(code::kBadEarlyTerminate, at["min_iter"], "`min_iter` must be at least 1 step");
      return;
    }
    if (at.count("eta") && a.eta < 2) {
      ev_.error(code::kBadEarlyTerminate, at["eta"], "`eta` must be at least 2: each bracket keeps the best 1/eta of the trials",
                "W&B's default is 3");
      return;
    }
    if (a.eta > 1000) {
      ev_.error(code::kBadEarlyTerminate, at["eta"], "`eta` of " + std::to_string(a.eta) + " stops every trial but one in each bracket",
                "use 2, 3 or 4");
      return;
    }
    long long length = a.maxIter;
    if (length == 0 && training_ != nullptr)
      for (const auto& ph : training_->phases) length += ph.steps;
    if (at.count("max_iter") && a.maxIter <= a.minIter) {
      ev_.error(code::kBadEarlyTerminate, at["max_iter"],
                "`max_iter` (" + std::to_string(a.maxIter) + ") must exceed `min_iter` (" + std::to_string(a.minIter) + ")");
      return;
    }
    if (length > 0 && a.minIter * a.eta > length) {
      ev_.error(code::kBadEarlyTerminate, at["min_iter"],
                "hyperband would never stop a trial: its first bracket ends at step " + std::to_string(a.minIter) + " x " +
                    std::to_string(a.eta) + " = " + std::to_string(a.minIter * a.eta) + ", after the trial's " +
                    std::to_string(length) + " steps",
                "lower `min_iter` (a trial is first compared after min_iter steps, then every eta times longer)");
      return;
    }
    spec_.earlyTerminate.enabled = true;
    spec_.earlyTerminate.minIter = a.minIter;
    spec_.earlyTerminate.eta = static_cast<int>(a.eta);
    spec_.earlyTerminate.maxIter = a.maxIter;
  }
  struct EarlyTerminateArgs {
    long long minIter = 1, eta = 3, maxIter = 0;
  };

  // -------------------------------------------------------------------- from

  void readFrom(const FieldMember& f) {
    const auto* call = f.value->dyn<CallExpr>();
    const NameExpr* callee = call != nullptr ? call->callee->dyn<NameExpr>() : nullptr;
    const std::string help = "write `from: best(SWEEP)` (the best trial of another sweep) or `from: checkpoint(\"RUN_ID\")`";
    if (callee == nullptr || (callee->name != "best" && callee->name != "checkpoint") || call->args.size() != 1 ||
        !call->args[0].name.empty()) {
      ev_.error(code::kBadSweepStart, f.value->span, "a sweep starts from another sweep's best trial or a recorded run", help);
      return;
    }
    const Expr& arg = *call->args[0].value;
    sweep::StartFrom from;
    if (callee->name == "checkpoint") {
      const auto* s = arg.dyn<StringExpr>();
      if (s == nullptr || s->value.empty()) {
        ev_.error(code::kBadSweepStart, arg.span, "`checkpoint` takes a run's id as a string: `checkpoint(\"12\")` or `checkpoint(\"tiny_trial-12\")`",
                  "`ipu runs` lists the recorded runs and their ids");
        return;
      }
      from.kind = sweep::StartFrom::Kind::Run;
      from.name = s->value;
      spec_.from = from;
      return;
    }
    const auto* n = arg.dyn<NameExpr>();
    std::vector<std::string> names;
    for (const auto* s : sweeps_)
      if (s != &d_) names.push_back(s->name);
    if (n == nullptr) {
      ev_.error(code::kBadSweepStart, arg.span, "`best` takes the name of a sweep of this script", help);
      return;
    }
    if (n->name == d_.name) {
      ev_.error(code::kBadSweepStart, arg.span, "sweep `" + d_.name + "` cannot start from its own best trial",
                "name the sweep that runs before it");
      return;
    }
    const Declaration* other = nullptr;
    for (const auto* s : sweeps_)
      if (s->name == n->name) other = s;
    if (other == nullptr) {
      std::string dym = base::didYouMean(n->name, names);
      ev_.error(code::kBadSweepStart, arg.span, "no sweep `" + n->name + "` in this script",
                dym.empty() ? (names.empty() ? "declare the sweep it starts from in this script" : "sweeps:" + [&] {
                  std::string all;
                  for (const auto& s : names) all += " `" + s + "`";
                  return all;
                }()) : dym);
      return;
    }
    // Sweeps starting from each other would each wait for the other.
    std::set<std::string> visited = {d_.name};
    const Declaration* at = other;
    while (at != nullptr) {
      if (!visited.insert(at->name).second) {
        ev_.error(code::kBadSweepStart, arg.span,
                  "sweeps `" + d_.name + "` and `" + n->name + "` start from each other's best trial (a cycle)",
                  "one of them must start from the training's own initial weights");
        return;
      }
      std::string next = startOf(*at);
      at = nullptr;
      for (const auto* s : sweeps_)
        if (s->name == next) at = s;
    }
    from.kind = sweep::StartFrom::Kind::SweepBest;
    from.name = n->name;
    spec_.from = from;
  }

  // The sweep `d` starts from (by `from: best(NAME)`), or "".
  static std::string startOf(const Declaration& d) {
    if (!d.body) return {};
    for (const auto& m : d.body->members)
      if (const auto* f = m->dyn<FieldMember>(); f != nullptr && f->name == "from")
        if (const auto* c = f->value->dyn<CallExpr>(); c != nullptr && c->args.size() == 1)
          if (const auto* callee = c->callee->dyn<NameExpr>(); callee != nullptr && callee->name == "best")
            if (const auto* n = c->args[0].value->dyn<NameExpr>()) return n->name;
    return {};
  }

  Evaluator& ev_;
  const Module& module_;
  const Declaration& d_;
  const std::vector<const Declaration*>& sweeps_;
  const TrainingSpec* training_;
  std::shared_ptr<const Record> training_record_;
  ScopePtr scope_;
  sweep::SweepSpec spec_;
  Span parametersEmptyAt_, metricSpan_;
};

}  // namespace

std::optional<sweep::SweepSpec> checkSweep(Evaluator& ev, const Module& module, const Declaration& decl,
                                           const std::vector<const Declaration*>& sweeps, const TrainingSpec* training) {
  return SweepReader(ev, module, decl, sweeps, training).read();
}

std::shared_ptr<const Record> applyOverrides(Evaluator& ev, const Module& module, const Record& training,
                                             const Overrides& overrides) {
  const Span at = overrides.at;
  ScopePtr scope = ev.scopePtrOf(module);
  Substitution s(ev, training);
  bool resolved = true;
  std::set<std::string> seen;
  // In path order: a whole declaration (`mapping`) before its fields (`mapping.replicas`).
  sweep::Assignment sorted = overrides.values;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [path, value] : sorted) {
    if (!seen.insert(path).second) {
      ev.error(code::kDuplicateField, at, "the trial gives `" + path + "` twice");
      resolved = false;
      continue;
    }
    // Paths resolve against the training as substituted so far.
    Paths paths(ev, *s.result());
    std::optional<Target> t = paths.resolve(path, at);
    if (!t) {
      resolved = false;  // no script writes a value there
      continue;
    }
    // A name that names nothing is unknown, as it would be in the script.
    s.apply(*t, toValue(ev, scope, *t, value, at), at);
  }
  // Values written in the language, in path order too (stable: as given).
  std::vector<const WrittenOverride*> written;
  for (const auto& w : overrides.written) written.push_back(&w);
  std::stable_sort(written.begin(), written.end(), [](const auto* a, const auto* b) { return a->path < b->path; });
  for (const WrittenOverride* w : written) {
    if (!seen.insert(w->path).second) {
      ev.error(code::kDuplicateField, w->pathAt, "`" + w->path + "` is given twice", "give each value once");
      resolved = false;
      continue;
    }
    Paths paths(ev, *s.result());
    std::optional<Target> t = paths.resolve(w->path, w->pathAt);
    if (!t) {
      resolved = false;
      continue;
    }
    const syntax::Expr& e = *w->value;
    const std::size_t before = ev.diags().errorCount();
    Value v = t->spec != nullptr ? ev.evalField(e, t->spec->type, scope, t->field) : ev.eval(e, scope);
    if (v.isUnknown() || ev.diags().errorCount() != before) continue;  // reported; the field stays as written
    if (t->kind == Target::Kind::ModelArgument && v.kind != ValueKind::Number && v.kind != ValueKind::Bool &&
        v.kind != ValueKind::String && v.kind != ValueKind::Symbol) {
      ev.error(code::kTypeMismatch, e.span, "a model's argument given on the command line is a number, name or string, found " +
                                                v.describe());
      continue;
    }
    v.span = e.span;
    s.apply(*t, std::move(v), e.span);
  }
  if (!resolved) return nullptr;
  return s.result();
}

}  // namespace ipu::check
