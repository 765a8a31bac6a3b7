// Calls: parameterised declarations (templates), built-in functions and
// constructors, and `with` variants.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "interpreter/check/codes.h"
#include "interpreter/check/evaluator.h"

namespace ipu::check {

using namespace syntax;

namespace {

// Parameter type annotations: `layers: int`, `memory: bytes`.
bool paramTypeOk(const std::string& type, const Value& v, std::string& expected) {
  if (v.isUnknown() || type.empty() || type == "any") return true;
  static const std::map<std::string, std::pair<std::string, Dim>> numeric = {
      {"int", {"a whole number", Dim::none()}},       {"number", {"a number", Dim::none()}},
      {"bytes", {"bytes", dims::bytes()}},            {"bandwidth", {"a bandwidth", dims::bandwidth()}},
      {"frequency", {"a frequency", dims::hertz()}}, {"time", {"a time", dims::seconds()}},
      {"fraction", {"a fraction in (0, 1]", Dim::none()}},
  };
  if (auto it = numeric.find(type); it != numeric.end()) {
    expected = it->second.first;
    if (!v.isNumber() || v.dim != it->second.second) return false;
    if (type == "int" && v.number != std::floor(v.number)) return false;
    if (type == "fraction" && !(v.number > 0 && v.number <= 1)) return false;
    return true;
  }
  expected = "a " + type;
  if (type == "string") return v.kind == ValueKind::String || v.kind == ValueKind::Symbol;
  if (type == "bool") return v.kind == ValueKind::Bool;
  if (type == "list") return v.kind == ValueKind::List;
  if (type == "model") return v.kind == ValueKind::Model;
  if (type == "layer") return v.kind == ValueKind::Layer || v.kind == ValueKind::LayerRef;
  return v.kind == ValueKind::Record && v.record->kind == type;
}

const std::vector<std::string>& paramTypeNames() {
  static const std::vector<std::string> n = {"int", "number", "bytes", "bandwidth", "frequency", "time", "fraction",
                                             "string", "bool", "list", "model", "layer", "any", "chip", "machine",
                                             "pod", "mapping", "precision", "optimizer", "dataset"};
  return n;
}

}  // namespace

Value Evaluator::call(const Value& callee, const std::vector<Arg>& args, const ScopePtr& scope, Span span,
                      Span calleeSpan) {
  if (callee.isUnknown()) {
    for (const auto& a : args) eval(*a.value, scope);
    return Value::unknown(span);
  }
  if (callee.kind == ValueKind::Template) {
    std::vector<ArgRef> refs;
    for (const auto& a : args) refs.push_back(ArgRef{a.name, a.nameSpan, a.value.get()});
    return callTemplate(*callee.tmpl, refs, scope, span, nullptr);
  }
  if (callee.kind == ValueKind::Builtin) return callBuiltin(callee.text, args, scope, span);
  std::string help;
  if (callee.kind == ValueKind::Model || callee.kind == ValueKind::Record)
    help = "it is already a value; to change it, write `" + std::string("x with { field: value }") + "`";
  // A local declaration may hide an imported definition of the same name.
  std::string name = callee.kind == ValueKind::Record ? callee.record->name
                     : callee.kind == ValueKind::Model ? callee.model->name
                                                       : std::string();
  for (Scope* s = scope.get(); s != nullptr && !name.empty(); s = s->parent().get())
    if (auto* ms = dynamic_cast<ModuleScope*>(s)) {
      std::string module = ms->declares(name) ? ms->importDeclaring(name) : std::string();
      if (!module.empty())
        help = "this `" + name + "` is declared in this module and hides `" + name + "` from `" + module +
               "`; rename one of them, or import the module with `as` and write `alias." + name + "`";
      break;
    }
  error(code::kNotCallable, calleeSpan, callee.describe() + " is not a function or a definition with parameters", help);
  return Value::unknown(span);
}

Value Evaluator::callTemplate(const Template& t, const std::vector<ArgRef>& args, const ScopePtr& scope, Span span,
                              const std::vector<std::pair<std::string, Value>>* base) {
  const Declaration& d = *t.decl;
  if (recursionAborted_) return Value::unknown(span);  // unwinding from too deep a nesting (reported)
  const std::string kind = spelling(d.declKind);
  // Phase variables are visible in definitions applied while a phase expands a
  // model, including their default arguments (`seq: int = seq_len`); a
  // parameter of the same name shadows them.
  ScopePtr outer = t.scope;
  if (phase_ != nullptr && (d.declKind == DeclKind::Layer || d.declKind == DeclKind::Model)) {
    outer = std::make_shared<Scope>(t.scope);
    phase_->bind(*outer);
  }
  auto paramScope = std::make_shared<Scope>(outer);
  std::vector<std::pair<std::string, Value>> bound;   // explicit arguments, in parameter order
  std::map<std::string, std::pair<Value, Span>> given;
  std::size_t positional = 0;
  bool named = false, ok = true;
  std::set<std::string> explicitSeen;
  std::set<std::string> suggested;  // parameters a misspelt argument was probably meant for
  std::vector<std::string> paramNames;
  for (const auto& p : d.params) paramNames.push_back(p.name);
  if (base != nullptr)
    for (const auto& [n, v] : *base) given[n] = {v, v.span};
  for (const auto& a : args) {
    std::string name;
    if (a.name.empty()) {
      if (named) {
        error(code::kBadArgument, a.value->span, "a positional argument cannot follow named ones",
              "name it: `param: value`");
        ok = false;
        continue;
      }
      if (positional >= d.params.size()) {
        error(code::kBadArgument, a.value->span,
              "`" + d.name + "` takes " + std::to_string(d.params.size()) + " parameter" +
                  (d.params.size() == 1 ? "" : "s") + "; this is one too many");
        ok = false;
        continue;
      }
      name = d.params[positional++].name;
    } else {
      named = true;
      name = a.name;
      if (std::find(paramNames.begin(), paramNames.end(), name) == paramNames.end()) {
        for (const auto& guess : base::closestMatches(name, paramNames, 1)) suggested.insert(guess);
        std::string help = base::didYouMean(name, paramNames);
        if (help.empty()) {
          help = "its parameters are:";
          for (const auto& p : paramNames) help += " `" + p + "`";
        }
        auto& diag = error(code::kBadArgument, a.nameSpan, "`" + d.name + "` has no parameter `" + name + "`", help);
        diag.addNote({d.nameSpan, "`" + d.name + "` is defined here"});
        ok = false;
        continue;
      }
    }
    if (!explicitSeen.insert(name).second) {
      error(code::kBadArgument, a.name.empty() ? a.value->span : a.nameSpan, "argument `" + name + "` is given twice");
      ok = false;
      continue;
    }
    given[name] = {eval(*a.value, scope), a.value->span};
  }
  if (!pushFrame("`" + d.name + "(...)`", span)) return Value::unknown(span);
  for (const auto& p : d.params) {
    Value v;
    if (auto it = given.find(p.name); it != given.end()) {
      v = it->second.first;
      bound.emplace_back(p.name, v);
      std::string expected;
      if (!paramTypeOk(p.type, v, expected)) {
        auto& diag = error(code::kTypeMismatch, it->second.second.valid() ? it->second.second : span,
                           "parameter `" + p.name + "` of `" + d.name + "` expects " + expected + ", found " + v.describe());
        diag.addNote({p.span, "declared here"});
        v = Value::unknown(span);
        ok = false;
      }
    } else if (p.dflt) {
      v = eval(*p.dflt, paramScope);
    } else {
      // A misspelt argument already said what was meant; do not repeat it.
      if (!suggested.count(p.name)) {
        std::string call = d.name + "(";
        bool firstParam = true;
        for (const auto& q : d.params) {
          if (q.dflt) continue;  // only the ones without a default must be given
          call += (firstParam ? "" : ", ") + q.name + ": ...";
          firstParam = false;
        }
        auto& diag = error(code::kBadArgument, span, "missing argument `" + p.name + "` for `" + d.name + "`",
                           "write `" + call + ")`");
        diag.addNote({p.span, "the parameter is declared here"});
      }
      v = Value::unknown(span);
      ok = false;
    }
    if (!p.type.empty() &&
        std::find(paramTypeNames().begin(), paramTypeNames().end(), p.type) == paramTypeNames().end()) {
      std::string help = base::didYouMean(p.type, paramTypeNames());
      error(code::kTypeMismatch, p.typeSpan, "unknown parameter type `" + p.type + "`",
            help.empty() ? [] {
              std::string all = "parameter types:";
              for (const auto& n : paramTypeNames()) all += " `" + n + "`";
              return all;
            }() : help);
    }
    paramScope->define(p.name, v, p.span);
  }
  (void)ok;
  Value result;
  auto tp = std::make_shared<Template>(t);
  if (d.declKind == DeclKind::Model) {
    auto m = std::make_shared<ModelValue>();
    m->name = d.name;
    m->body = d.body.get();
    m->decl = &d;
    m->scope = paramScope;
    m->span = span;
    m->tmpl = tp;
    m->args = bound;
    if (!d.body && d.value) {  // `model small(n) = bert(layers: n, ...)`
      result = eval(*d.value, paramScope);
    } else {
      result.kind = ValueKind::Model;
      result.model = m;
    }
  } else if (d.declKind == DeclKind::Layer) {
    auto l = std::make_shared<LayerValue>();
    l->decl = &d;
    l->scope = paramScope;
    l->span = span;
    l->tmpl = tp;
    l->explicitArgs = bound;
    for (const auto& p : d.params)
      if (const Value* v = paramScope->lookup(p.name, *this, span)) l->args.emplace_back(p.name, *v);
    if (!d.body && d.value) {
      result = eval(*d.value, paramScope);
    } else {
      result.kind = ValueKind::Layer;
      result.layer = l;
    }
  } else {
    result = declaredRecord(d, paramScope, span);
  }
  popFrame();
  result.span = span;
  return result;
}

Value Evaluator::callBuiltin(const std::string& name, const std::vector<Arg>& args, const ScopePtr& scope, Span span) {
  // Constructors with named fields validated against a schema.
  if (ir::optimizerKindFromName(name) || name == "dynamic") {
    const std::string kind = name == "dynamic" ? "loss_scale" : "optimizer";
    const Schema* schema = schemaFor(kind);
    auto rec = std::make_shared<Record>();
    rec->kind = kind;
    rec->span = span;
    if (kind == "optimizer") rec->set("kind", Value::symbol(name, span), span);
    for (const auto& a : args) {
      if (a.name.empty()) {
        static const std::map<std::string, std::string> example = {
            {"sgd", "weight_decay: 0.0001"}, {"momentum", "momentum: 0.9"},  {"adam", "beta1: 0.9"},
            {"adamw", "weight_decay: 0.01"}, {"lamb", "weight_decay: 0.01"}, {"lars", "momentum: 0.9"},
            {"dynamic", "initial: 32768"}};
        error(code::kBadArgument, a.value->span,
              "`" + name + "` takes named arguments: `" + name + "(" + example.at(name) + ")`");
        continue;
      }
      const Field* f = schema->find(a.name);
      if (f == nullptr || a.name == "kind") {
        std::vector<std::string> names = schema->names();
        names.erase(std::remove(names.begin(), names.end(), "kind"), names.end());
        error(code::kBadArgument, a.nameSpan, "`" + name + "` has no parameter `" + a.name + "`",
              base::didYouMean(a.name, names));
        continue;
      }
      if (rec->field(a.name) != nullptr && a.name != "kind") {
        error(code::kBadArgument, a.nameSpan, "argument `" + a.name + "` is given twice");
        continue;
      }
      rec->set(a.name, evalField(*a.value, f->type, scope, a.name), a.nameSpan);
    }
    Value v;
    v.kind = ValueKind::Record;
    v.record = rec;
    v.span = span;
    return v;
  }

  std::vector<Value> vals;
  for (const auto& a : args) {
    if (!a.name.empty()) {
      error(code::kBadArgument, a.nameSpan, "`" + name + "` takes positional arguments");
      return Value::unknown(span);
    }
    vals.push_back(eval(*a.value, scope));
  }
  for (const auto& v : vals)
    if (v.isUnknown()) return Value::unknown(span);
  auto arity = [&](std::size_t n) {
    if (vals.size() == n) return true;
    error(code::kBadArgument, span,
          "`" + name + "` takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + ", given " +
              std::to_string(vals.size()));
    return false;
  };
  auto number = [&](const Value& v, bool plain) {
    if (!v.isNumber() || (plain && !v.dim.dimensionless())) {
      error(code::kTypeMismatch, v.span.valid() ? v.span : span,
            "`" + name + "` needs " + (plain ? "a plain number" : "a number") + ", found " + v.describe());
      return false;
    }
    return true;
  };

  if (name == "balanced") {
    if (!arity(1) || !number(vals[0], true)) return Value::unknown(span);
    if (!vals[0].isWhole() || vals[0].number < 1 || vals[0].number > (1 << 20)) {
      error(code::kOutOfRange, vals[0].span, "`balanced` needs a positive whole number of IPUs, found " + vals[0].describe());
      return Value::unknown(span);
    }
    auto p = std::make_shared<PipelineValue>();
    p->kind = PipelineValue::Kind::Balanced;
    p->ipus = static_cast<long long>(vals[0].number);
    p->span = span;
    Value v;
    v.kind = ValueKind::Pipeline;
    v.pipeline = p;
    v.span = span;
    return v;
  }
  if (name == "min" || name == "max" || name == "sum") {
    std::vector<Value> xs = vals;
    if (vals.size() == 1 && vals[0].kind == ValueKind::List) xs = *vals[0].list;
    if (vals.size() == 1 && vals[0].kind == ValueKind::Range) {
      // Reduce a range arithmetically: it may be long.
      const double lo = static_cast<double>(vals[0].lo), hi = static_cast<double>(vals[0].hi), n = hi - lo;
      if (n <= 0) {
        if (name == "sum") return Value::num(0, Dim::none(), span);
        error(code::kBadArgument, span, "`" + name + "` of an empty range");
        return Value::unknown(span);
      }
      double r = name == "sum" ? n * (lo + hi - 1) / 2 : name == "min" ? lo : hi - 1;
      if (!std::isfinite(r)) {
        error(code::kInvalidOperation, span, "`" + name + "` overflows");
        return Value::unknown(span);
      }
      return Value::num(r, Dim::none(), span);
    }
    if (xs.empty()) {
      if (name == "sum") return Value::num(0, Dim::none(), span);
      error(code::kBadArgument, span, "`" + name + "` needs at least one value");
      return Value::unknown(span);
    }
    Value acc = xs[0];
    for (const auto& x : xs) {
      if (x.isUnknown()) return Value::unknown(span);
      if (!number(x, false)) return Value::unknown(span);
      if (x.dim != acc.dim) {
        error(code::kUnitMismatch, x.span.valid() ? x.span : span,
              "`" + name + "` of values with different units: " + acc.describe() + " and " + x.describe());
        return Value::unknown(span);
      }
    }
    double r = name == "sum" ? 0 : xs[0].number;
    for (const auto& x : xs) r = name == "sum" ? r + x.number : name == "min" ? std::min(r, x.number) : std::max(r, x.number);
    return Value::num(r, acc.dim, span);
  }
  if (name == "len") {
    if (!arity(1)) return Value::unknown(span);
    if (vals[0].kind == ValueKind::List) return Value::integral(static_cast<long long>(vals[0].list->size()), span);
    if (vals[0].kind == ValueKind::Range) return Value::integral(vals[0].hi - vals[0].lo, span);
    if (vals[0].kind == ValueKind::String) {
      long long chars = 0;
      for (unsigned char c : vals[0].text) chars += (c & 0xC0) != 0x80 ? 1 : 0;
      return Value::integral(chars, span);
    }
    error(code::kTypeMismatch, span, "`len` needs a list, range or string, found " + vals[0].describe());
    return Value::unknown(span);
  }
  if (name == "mod") {
    if (!arity(2) || !number(vals[0], false) || !number(vals[1], false)) return Value::unknown(span);
    if (vals[1].number == 0) {
      error(code::kInvalidOperation, span, "`mod` by zero");
      return Value::unknown(span);
    }
    if (vals[0].dim != vals[1].dim) {
      error(code::kUnitMismatch, span, "`mod` of values with different units");
      return Value::unknown(span);
    }
    return Value::num(std::fmod(vals[0].number, vals[1].number), vals[0].dim, span);
  }
  // One-argument math.
  if (!arity(1) || !number(vals[0], false)) return Value::unknown(span);
  const Value& x = vals[0];
  bool keepsUnit = name == "ceil" || name == "floor" || name == "round" || name == "abs";
  if (!keepsUnit && !x.dim.dimensionless()) {
    error(code::kUnitMismatch, x.span.valid() ? x.span : span, "`" + name + "` needs a plain number, found " + x.describe());
    return Value::unknown(span);
  }
  double r = 0;
  if (name == "ceil") r = std::ceil(x.number);
  else if (name == "floor") r = std::floor(x.number);
  else if (name == "round") r = std::round(x.number);
  else if (name == "abs") r = std::fabs(x.number);
  else if (name == "sqrt" || name == "log2" || name == "log") {
    if (x.number < 0 || ((name != "sqrt") && x.number == 0)) {
      error(code::kOutOfRange, x.span.valid() ? x.span : span, "`" + name + "` of " + x.describe() + " is undefined");
      return Value::unknown(span);
    }
    r = name == "sqrt" ? std::sqrt(x.number) : name == "log2" ? std::log2(x.number) : std::log(x.number);
  } else if (name == "exp") {
    r = std::exp(x.number);
  }
  if (!std::isfinite(r)) {
    error(code::kInvalidOperation, span, "`" + name + "` overflows");
    return Value::unknown(span);
  }
  return Value::num(r, keepsUnit ? x.dim : Dim::none(), span);
}

Value Evaluator::reapplyModel(const ModelValue& model, const std::vector<std::pair<std::string, Value>>& args) {
  if (!model.tmpl) return Value::unknown(model.span);
  std::vector<std::pair<std::string, Value>> given = model.args;
  for (const auto& [name, v] : args) {
    auto it = std::find_if(given.begin(), given.end(), [&](const auto& a) { return a.first == name; });
    if (it != given.end()) it->second = v;
    else given.emplace_back(name, v);
  }
  Value v = callTemplate(*model.tmpl, {}, model.tmpl->scope, model.span, &given);
  if (v.kind == ValueKind::Model) {
    auto m = std::make_shared<ModelValue>(*v.model);
    m->name = model.name;
    v.model = m;
  }
  return v;
}

Value Evaluator::evalWith(const WithExpr& e, const ScopePtr& scope) {
  Value base = eval(*e.base, scope);
  if (base.isUnknown()) return base;
  if (base.kind == ValueKind::Record) {
    Value v;
    v.kind = ValueKind::Record;
    v.record = buildRecord(base.record->kind, *e.block, scope, base.record, "", e.span);
    v.span = e.span;
    return v;
  }
  if ((base.kind == ValueKind::Model && base.model->tmpl) || (base.kind == ValueKind::Layer && base.layer->tmpl)) {
    // A variant of a model or layer re-applies its definition with changed arguments.
    const auto& tmpl = base.kind == ValueKind::Model ? base.model->tmpl : base.layer->tmpl;
    const auto& baseArgs = base.kind == ValueKind::Model ? base.model->args : base.layer->explicitArgs;
    std::vector<ArgRef> overrides;
    for (const auto& m : e.block->members) {
      const auto* f = m->dyn<FieldMember>();
      if (f == nullptr) {
        error(code::kMisplacedMember, m->span, "a variant of a model or layer overrides its parameters: `with { layers: 12 }`");
        continue;
      }
      overrides.push_back(ArgRef{f->name, f->nameSpan, f->value.get()});
    }
    Value v = callTemplate(*tmpl, overrides, scope, e.span, &baseArgs);
    if (v.kind == ValueKind::Model && base.kind == ValueKind::Model) {
      auto m = std::make_shared<ModelValue>(*v.model);
      m->name = base.model->name;
      v.model = m;
    }
    return v;
  }
  error(code::kTypeMismatch, e.base->span, "cannot make a variant of " + base.describe() + " with `with`",
        "`with` applies to declarations (mappings, precisions, trainings, ...) and to models made by a call");
  return Value::unknown(e.span);
}

}  // namespace ipu::check
