// Expressions: names, arithmetic with units, members, indexing, schedules.
#include "interpreter/check/evaluator.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "interpreter/check/codes.h"
#include "interpreter/check/model.h"
#include "interpreter/check/prelude.h"

namespace ipu::check {

using namespace syntax;

// ------------------------------------------------------------------ scopes

bool Scope::define(const std::string& name, Value value, Span span) {
  if (locals_.count(name)) return false;
  locals_[name] = Entry{std::move(value), span};
  return true;
}

const Value* Scope::lookup(const std::string& name, Evaluator& ev, Span use) {
  auto it = locals_.find(name);
  if (it != locals_.end()) return &it->second.value;
  return parent_ ? parent_->lookup(name, ev, use) : nullptr;
}

void Scope::collectNames(std::vector<std::string>& out, Evaluator& ev) {
  for (const auto& [k, _] : locals_) out.push_back(k);
  if (parent_) parent_->collectNames(out, ev);
}

Span Scope::definedAt(const std::string& name) const {
  auto it = locals_.find(name);
  return it == locals_.end() ? Span{} : it->second.span;
}

void PhaseContext::bind(Scope& scope) const {
  const std::pair<const char*, const Value*> vars[] = {
      {"micro_batch", &microBatch}, {"seq_len", &seqLen}, {"masked_tokens", &maskedTokens}, {"image_size", &imageSize}};
  for (const auto& [name, v] : vars)
    if (structural || !v->isUnknown()) scope.define(name, *v, {});
}

void ModuleScope::index(Evaluator& ev) {
  if (indexed_) return;
  indexed_ = true;
  std::map<std::string, Span> firstAt;
  auto declare = [&](const std::string& name, Span span, const Item* item) {
    if (auto it = firstAt.find(name); it != firstAt.end()) {
      auto& d = ev.error(code::kDuplicateName, span, "`" + name + "` is already declared in this module",
                         "rename one of them; to make a variant, write `kind new_name = " + name + " with { ... }`");
      d.addNote({it->second, "first declared here"});
      return;
    }
    firstAt[name] = span;
    items_[name] = Pending{item, State::Pending};
  };
  for (const auto& item : module_.program->items) {
    if (const auto* l = item->dyn<LetItem>()) declare(l->name, l->nameSpan, item.get());
    if (const auto* d = item->dyn<Declaration>()) declare(d->name, d->nameSpan, item.get());
  }
  for (const auto& [imp, dep] : module_.imports) {
    ModuleScope& depScope = ev.scopeOf(*dep);
    depScope.index(ev);
    if (!imp->alias.empty()) {
      Value v;
      v.kind = ValueKind::Module;
      auto mv = std::make_shared<ModuleValue>();
      mv->path = dep->name;
      mv->scope = ev.scopePtrOf(*dep);
      v.module = mv;
      v.span = imp->aliasSpan;
      if (firstAt.count(imp->alias)) {
        auto& d = ev.error(code::kDuplicateName, imp->aliasSpan, "`" + imp->alias + "` is already declared in this module");
        d.addNote({firstAt[imp->alias], "first declared here"});
      } else {
        firstAt[imp->alias] = imp->aliasSpan;
        locals_[imp->alias] = Entry{v, imp->aliasSpan};
      }
    } else {
      imports_.emplace_back(dep->name, &depScope);
    }
  }
}

const Value* ModuleScope::lookupOwn(const std::string& name, Evaluator& ev, Span use) {
  index(ev);
  auto lit = locals_.find(name);
  if (lit != locals_.end()) return &lit->second.value;
  auto it = items_.find(name);
  if (it == items_.end()) return nullptr;
  Pending& p = it->second;
  if (p.state == State::InProgress && isSelfReference(name)) return nullptr;  // the outer binding, see lookup()
  if (p.state == State::InProgress) {
    const Item* item = p.item;
    Span at = item->kind == ItemKind::Let ? item->as<LetItem>().nameSpan : item->as<Declaration>().nameSpan;
    auto& d = ev.error(code::kCyclicDefinition, use.valid() ? use : at, "`" + name + "` is defined in terms of itself",
                       "break the cycle: a definition cannot use its own value");
    d.addNote({at, "`" + name + "` is declared here"});
    locals_[name] = Entry{Value::unknown(), at};
    p.state = State::Done;
    return &locals_[name].value;
  }
  if (p.state == State::Done) {
    auto done = locals_.find(name);
    return done == locals_.end() ? nullptr : &done->second.value;
  }
  p.state = State::InProgress;
  evaluating_.push_back(name);
  Value v = ev.evaluateItem(*p.item, *this);
  evaluating_.pop_back();
  if (p.state == State::Done) return &locals_[name].value;  // a cycle was reported meanwhile
  p.state = State::Done;
  locals_[name] = Entry{std::move(v), p.item->span};
  return &locals_[name].value;
}

const Value* ModuleScope::lookup(const std::string& name, Evaluator& ev, Span use) {
  if (const Value* v = lookupOwn(name, ev, use)) return v;
  ModuleScope* found = nullptr;
  std::string foundIn;
  for (auto& [modName, scope] : imports_) {
    if (!scope->declares(name)) continue;
    if (found != nullptr && found != scope) {
      ev.error(code::kAmbiguousName, use, "`" + name + "` is defined by both `" + foundIn + "` and `" + modName + "`",
               "import one of them with `as` and write `alias." + name + "`");
      break;
    }
    found = scope;
    foundIn = modName;
  }
  if (found != nullptr) return found->lookupOwn(name, ev, use);
  const Value* outer = parent_ ? parent_->lookup(name, ev, use) : nullptr;
  if (outer == nullptr && isSelfReference(name)) {
    auto it = items_.find(name);
    const Item* item = it->second.item;
    Span at = item->kind == ItemKind::Let ? item->as<LetItem>().nameSpan : item->as<Declaration>().nameSpan;
    ev.error(code::kCyclicDefinition, use.valid() ? use : at, "`" + name + "` is defined in terms of itself",
             "a declaration's own name refers to an imported or built-in one of that name; there is none here");
    static const Value unknown;
    return &unknown;
  }
  return outer;
}

void ModuleScope::collectNames(std::vector<std::string>& out, Evaluator& ev) {
  index(ev);
  for (const auto& [k, _] : items_) out.push_back(k);
  for (const auto& [k, _] : locals_) out.push_back(k);
  for (auto& [_, scope] : imports_)
    for (const auto& [k, __] : scope->items_) out.push_back(k);
  if (parent_) parent_->collectNames(out, ev);
}

// --------------------------------------------------------------- evaluator

Evaluator::Evaluator(base::Diagnostics& diags, ModuleLoader& loader) : diags_(diags), loader_(loader) {
  builtins_ = std::make_shared<Scope>();
  for (const char* name : {"min", "max", "ceil", "floor", "round", "sqrt", "log2", "log", "exp", "abs", "sum", "len",
                           "mod", "balanced", "sgd", "momentum", "adam", "adamw", "lamb", "lars", "dynamic"}) {
    Value v;
    v.kind = ValueKind::Builtin;
    v.text = name;
    builtins_->define(name, v, {});
  }
}

Evaluator::~Evaluator() {
  for (auto& [module, scope] : moduleScopes_) scope->clear();
}

ScopePtr Evaluator::scopePtrOf(const Module& module) {
  auto it = moduleScopes_.find(&module);
  if (it != moduleScopes_.end()) return it->second;
  // The standard library's scopes are the prelude's: evaluated once, only read here.
  if (module.standard && loader_.prelude() != nullptr)
    if (ScopePtr shared = loader_.prelude()->scopeOf(module)) return shared;
  auto scope = std::make_shared<ModuleScope>(module, builtins_);
  moduleScopes_[&module] = scope;
  return scope;
}

ModuleScope& Evaluator::scopeOf(const Module& module) { return static_cast<ModuleScope&>(*scopePtrOf(module)); }

base::Diagnostic& Evaluator::error(const char* code, Span span, std::string message, std::string help) {
  base::Diagnostic& d = diags_.error(code, span, std::move(message), std::move(help));
  // Inside a definition the error points into the definition; say where the
  // user's script instantiated it (the innermost frame outside that file).
  if (d.notes.empty())
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
      if (it->site.valid() && it->site.file != span.file) {
        d.addNote({it->site, "while evaluating " + it->what});
        break;
      }
  return d;
}

base::Diagnostic& Evaluator::warning(const char* code, Span span, std::string message, std::string help) {
  return diags_.warning(code, span, std::move(message), std::move(help));
}

bool Evaluator::pushFrame(std::string what, Span site) {
  if (recursionAborted_) return false;
  if (frames_.size() >= static_cast<std::size_t>(kMaxDepth)) {
    error(code::kLimitExceeded, site,
          "definitions nest more than " + std::to_string(kMaxDepth) + " deep while evaluating " + what,
          "a model or definition probably instantiates itself; recursion is not supported");
    recursionAborted_ = !frames_.empty();
    return false;
  }
  if (++templateCalls_ > kMaxTemplateCalls) {
    if (templateCalls_ == kMaxTemplateCalls + 1)
      error(code::kLimitExceeded, site,
            "more than " + std::to_string(kMaxTemplateCalls) + " definitions applied while checking (at " + what + ")",
            "a definition probably expands exponentially (it uses itself, or a list of itself, more than once)");
    recursionAborted_ = !frames_.empty();
    return false;
  }
  frames_.push_back(Frame{std::move(what), site});
  return true;
}

std::string Evaluator::standardModuleDeclaring(const std::string& name) {
  for (const auto& mod : ModuleLoader::standardModuleNames()) {
    base::Diagnostics scratch;
    Module* m = loader_.loadStandard(mod);
    if (m == nullptr || !m->program) continue;
    for (const auto& item : m->program->items) {
      if (const auto* d = item->dyn<Declaration>(); d != nullptr && d->name == name) return mod;
      if (const auto* l = item->dyn<LetItem>(); l != nullptr && l->name == name) return mod;
    }
  }
  return {};
}

Value Evaluator::evalNumber(const NumberExpr& e) {
  Value v = Value::num(e.value, Dim::none(), e.span);
  v.integer = e.integer;
  if (e.unit.empty()) return v;
  auto unit = lookupUnit(e.unit);
  if (!unit && (e.unit[0] == '_' || std::isdigit(static_cast<unsigned char>(e.unit[0])))) {
    // `1__000`, `1_`, `1e5_0`: the lexer took the digits it could and left
    // the rest as a "unit"; the mistake is in the number.
    error(code::kUnknownUnit, e.unitSpan, "this number is malformed: `_` may only separate two digits",
          "write digits with single underscores between them, like `65_536` or `1_000_000`");
    return Value::unknown(e.span);
  }
  if (!unit) {
    std::string help = base::didYouMean(e.unit, unitNames());
    if (help.empty()) help = "units include MB, GiB, GB/s, GHz, TFLOPS, steps, epochs and %";
    error(code::kUnknownUnit, e.unitSpan, "unknown unit `" + e.unit + "`", help);
    return Value::unknown(e.span);
  }
  v = Value::num(e.value * unit->factor, unit->dim, e.span);
  v.percent = unit->percent;
  if (!std::isfinite(v.number)) {
    error(code::kInvalidOperation, e.span, "`" + e.text + " " + e.unit + "` is too large to represent");
    return Value::unknown(e.span);
  }
  return v;
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  if (&e != watched_) return evalExpr(e, scope);
  Value v = evalExpr(e, scope);
  // Inside evalField the field's value is reported once it has its meaning.
  if (&e != fieldExpr_ && seen_) seen_(v);
  return v;
}

Value Evaluator::evalExpr(const Expr& e, const ScopePtr& scope) {
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(exprDepth_);
  if (exprDepth_ > 2000) {
    error(code::kLimitExceeded, e.span, "expression evaluation nests too deeply");
    return Value::unknown(e.span);
  }
  switch (e.kind) {
    case ExprKind::Number: return evalNumber(e.as<NumberExpr>());
    case ExprKind::String: return Value::str(e.as<StringExpr>().value, e.span);
    case ExprKind::Bool: return Value::boolean_(e.as<BoolExpr>().value, e.span);
    case ExprKind::Name: return evalName(e.as<NameExpr>(), scope);
    case ExprKind::List: {
      std::vector<Value> items;
      for (const auto& i : e.as<ListExpr>().items) items.push_back(eval(*i, scope));
      return Value::ofList(std::move(items), e.span);
    }
    case ExprKind::Record: {
      auto rec = buildRecord("", *e.as<RecordExpr>().block, scope, nullptr, "", e.span);
      Value v;
      v.kind = ValueKind::Record;
      v.record = rec;
      v.span = e.span;
      return v;
    }
    case ExprKind::Call: {
      const auto& c = e.as<CallExpr>();
      Value callee = eval(*c.callee, scope);
      return call(callee, c.args, scope, e.span, c.callee->span);
    }
    case ExprKind::Member: return evalMember(e.as<MemberExpr>(), scope);
    case ExprKind::Index: return evalIndex(e.as<IndexExpr>(), scope);
    case ExprKind::Unary: {
      const auto& u = e.as<UnaryExpr>();
      Value v = eval(*u.operand, scope);
      if (v.isUnknown()) return v;
      if (u.op == UnaryOp::Neg) {
        if (!v.isNumber()) {
          error(code::kTypeMismatch, u.operand->span, "cannot negate " + v.describe());
          return Value::unknown(e.span);
        }
        v.number = -v.number;
        v.span = e.span;
        return v;
      }
      if (v.kind != ValueKind::Bool) {
        error(code::kTypeMismatch, u.operand->span, "`not` needs a boolean, found " + v.describe());
        return Value::unknown(e.span);
      }
      return Value::boolean_(!v.boolean, e.span);
    }
    case ExprKind::Binary: return evalBinary(e.as<BinaryExpr>(), scope);
    case ExprKind::Range: {
      const auto& r = e.as<RangeExpr>();
      Value lo = eval(*r.lo, scope), hi = eval(*r.hi, scope);
      if (lo.isUnknown() || hi.isUnknown()) return Value::unknown(e.span);
      if (!lo.isWhole() || !hi.isWhole() || std::fabs(lo.number) > kMaxExactInteger || std::fabs(hi.number) > kMaxExactInteger) {
        if (lo.isWhole() && hi.isWhole()) {
          error(code::kOutOfRange, e.span, "range bounds must be within +-2^53, found `" + lo.show() + ".." + hi.show() + "`");
          return Value::unknown(e.span);
        }
        error(code::kTypeMismatch, e.span, "range bounds must be whole numbers, found " +
                                               (lo.isWhole() ? hi : lo).describe());
        return Value::unknown(e.span);
      }
      if (hi.number < lo.number) {
        error(code::kOutOfRange, e.span, "range `" + lo.show() + ".." + hi.show() + "` is empty (ends before it starts)",
              "ranges are half-open: `0..3` is 0, 1, 2");
        return Value::unknown(e.span);
      }
      Value v;
      v.kind = ValueKind::Range;
      v.lo = static_cast<long long>(lo.number);
      v.hi = static_cast<long long>(hi.number);
      v.span = e.span;
      return v;
    }
    case ExprKind::If: {
      const auto& i = e.as<IfExpr>();
      Value c = eval(*i.cond, scope);
      if (c.isUnknown()) {
        // Evaluate both branches for their errors; the value stays unknown.
        eval(*i.then, scope);
        eval(*i.otherwise, scope);
        return Value::unknown(e.span);
      }
      if (c.kind != ValueKind::Bool) {
        error(code::kTypeMismatch, i.cond->span, "`if` needs a boolean condition, found " + c.describe());
        return Value::unknown(e.span);
      }
      return eval(c.boolean ? *i.then : *i.otherwise, scope);
    }
    case ExprKind::With: return evalWith(e.as<WithExpr>(), scope);
    case ExprKind::Lua: {
      Value v;
      v.kind = ValueKind::Lua;
      v.lua = &e.as<LuaExpr>();
      v.text = v.lua->text;
      v.span = e.span;
      return v;
    }
    case ExprKind::Schedule: return evalSchedule(e.as<ScheduleExpr>(), scope);
  }
  return Value::unknown(e.span);
}

Value Evaluator::evalName(const NameExpr& e, const ScopePtr& scope) {
  if (const Value* v = scope->lookup(e.name, *this, e.span)) return *v;
  const auto& ctxVars = contextVariables();
  if (std::find(ctxVars.begin(), ctxVars.end(), e.name) != ctxVars.end()) {
    if (phase_ != nullptr && !phase_->structural) {
      // One error per phase and variable, at the phase the user wrote; where
      // the model uses it is a note.
      std::string where = frames_.empty() ? std::string("the model") : frames_.back().what;
      Span at = phase_->phaseSpan.valid() ? phase_->phaseSpan : e.span;
      auto& d = diags_.error(code::kPhaseVariable, at,
                             "phase `" + phase_->phaseName + "` does not set `" + e.name + "`, which the model needs",
                             "add `" + e.name + ": ...` to the phase (or to the training, for every phase)");
      d.addNote({e.span, "first needed by " + where + " here"});
    } else {
      error(code::kPhaseVariable, e.span,
            "`" + e.name + "` is a phase variable: it has a value only inside `model` and `layer` definitions",
            "each training phase binds micro_batch, seq_len, masked_tokens and image_size when it expands the model");
    }
    return Value::unknown(e.span);
  }
  std::vector<std::string> names;
  scope->collectNames(names, *this);
  std::string help = base::didYouMean(e.name, names);
  if (help.empty()) {
    std::string mod = standardModuleDeclaring(e.name);
    if (!mod.empty()) help = importHelp(e.name, mod);
  }
  error(code::kUnknownName, e.span, "unknown name `" + e.name + "`", help);
  return Value::unknown(e.span);
}

namespace {
bool countLike(const Dim& d) { return d == dims::steps() || d == dims::epochs() || d == dims::samples(); }
}  // namespace

Value Evaluator::evalBinary(const BinaryExpr& e, const ScopePtr& scope) {
  if (e.op == BinaryOp::And || e.op == BinaryOp::Or) {
    Value l = eval(*e.lhs, scope);
    if (l.isUnknown()) {
      eval(*e.rhs, scope);
      return Value::unknown(e.span);
    }
    if (l.kind != ValueKind::Bool) {
      error(code::kTypeMismatch, e.lhs->span, std::string("`") + spelling(e.op) + "` needs booleans, found " + l.describe());
      return Value::unknown(e.span);
    }
    if ((e.op == BinaryOp::And && !l.boolean) || (e.op == BinaryOp::Or && l.boolean)) return Value::boolean_(l.boolean, e.span);
    Value r = eval(*e.rhs, scope);
    if (r.isUnknown()) return r;
    if (r.kind != ValueKind::Bool) {
      error(code::kTypeMismatch, e.rhs->span, std::string("`") + spelling(e.op) + "` needs booleans, found " + r.describe());
      return Value::unknown(e.span);
    }
    return Value::boolean_(r.boolean, e.span);
  }
  Value l = eval(*e.lhs, scope);
  Value r = eval(*e.rhs, scope);
  if (l.isUnknown() || r.isUnknown()) return Value::unknown(e.span);
  const char* op = spelling(e.op);

  // Equality of non-numbers.
  if ((e.op == BinaryOp::Eq || e.op == BinaryOp::Ne) && !(l.isNumber() && r.isNumber())) {
    bool eq = false;
    if (l.kind == r.kind && (l.kind == ValueKind::String || l.kind == ValueKind::Symbol)) eq = l.text == r.text;
    else if (l.kind == ValueKind::Bool && r.kind == ValueKind::Bool) eq = l.boolean == r.boolean;
    else if ((l.kind == ValueKind::String || l.kind == ValueKind::Symbol) &&
             (r.kind == ValueKind::String || r.kind == ValueKind::Symbol)) eq = l.text == r.text;
    else {
      error(code::kTypeMismatch, e.span, "cannot compare " + l.describe() + " with " + r.describe());
      return Value::unknown(e.span);
    }
    return Value::boolean_(e.op == BinaryOp::Eq ? eq : !eq, e.span);
  }
  if (e.op == BinaryOp::Add && l.kind == ValueKind::String && r.kind == ValueKind::String) {
    if (l.text.size() + r.text.size() > kMaxStringBytes) {
      error(code::kLimitExceeded, e.span, "string longer than " + std::to_string(kMaxStringBytes >> 20) + " MiB");
      return Value::unknown(e.span);
    }
    return Value::str(l.text + r.text, e.span);
  }
  if (e.op == BinaryOp::Add && l.kind == ValueKind::List && r.kind == ValueKind::List) {
    if (l.list->size() + r.list->size() > kMaxListItems) {
      error(code::kLimitExceeded, e.span, "list longer than " + std::to_string(kMaxListItems) + " items");
      return Value::unknown(e.span);
    }
    std::vector<Value> items = *l.list;
    items.insert(items.end(), r.list->begin(), r.list->end());
    return Value::ofList(std::move(items), e.span);
  }
  if (!l.isNumber() || !r.isNumber()) {
    const Value& bad = l.isNumber() ? r : l;
    // `a < b < c` reads as a range test but compares the boolean `a < b`
    // with c: say so, and how to write it.
    auto isOrdering = [](BinaryOp o) {
      return o == BinaryOp::Lt || o == BinaryOp::Le || o == BinaryOp::Gt || o == BinaryOp::Ge;
    };
    const auto* inner = e.lhs->dyn<BinaryExpr>();
    if (isOrdering(e.op) && !l.isNumber() && inner != nullptr && isOrdering(inner->op)) {
      error(code::kTypeMismatch, e.opSpan,
            std::string("comparisons do not chain: this `") + op + "` compares the result of `" + spelling(inner->op) +
                "` (a boolean) with a number",
            std::string("write `a ") + spelling(inner->op) + " b and b " + op + " c`");
      return Value::unknown(e.span);
    }
    error(code::kTypeMismatch, (l.isNumber() ? e.rhs : e.lhs)->span,
          std::string("`") + op + "` needs numbers, found " + bad.describe());
    return Value::unknown(e.span);
  }
  // Counts written with and without a unit (`2000 steps` vs `2000`) mix freely.
  Dim ld = l.dim, rd = r.dim;
  if (countLike(ld) && rd.dimensionless() && e.op != BinaryOp::Mul && e.op != BinaryOp::Div) rd = ld;
  if (countLike(rd) && ld.dimensionless() && e.op != BinaryOp::Mul && e.op != BinaryOp::Div) ld = rd;
  double a = l.number, b = r.number, out = 0;
  Dim d;
  switch (e.op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Lt:
    case BinaryOp::Le:
    case BinaryOp::Gt:
    case BinaryOp::Ge:
    case BinaryOp::Eq:
    case BinaryOp::Ne:
      if (ld != rd) {
        error(code::kUnitMismatch, e.opSpan,
              std::string("cannot ") + (e.op == BinaryOp::Add ? "add " : e.op == BinaryOp::Sub ? "subtract " : "compare ") +
                  l.describe() + (e.op == BinaryOp::Sub ? " and " : " and ") + r.describe(),
              "both sides need the same kind of unit");
        return Value::unknown(e.span);
      }
      d = ld;
      break;
    default:
      break;
  }
  switch (e.op) {
    case BinaryOp::Add: out = a + b; break;
    case BinaryOp::Sub: out = a - b; break;
    case BinaryOp::Mul: out = a * b; d = l.dim * r.dim; break;
    case BinaryOp::Div:
      if (b == 0) {
        error(code::kInvalidOperation, e.rhs->span, "division by zero", "the divisor evaluates to 0");
        return Value::unknown(e.span);
      }
      out = a / b;
      d = l.dim / r.dim;
      break;
    case BinaryOp::Pow: {
      if (!r.dim.dimensionless()) {
        error(code::kUnitMismatch, e.rhs->span, "an exponent must be a plain number, found " + r.describe());
        return Value::unknown(e.span);
      }
      if (!l.dim.dimensionless() && (b != std::floor(b) || std::fabs(b) > 8)) {
        error(code::kUnitMismatch, e.rhs->span, "a quantity with a unit can only be raised to a small whole power");
        return Value::unknown(e.span);
      }
      out = std::pow(a, b);
      d = l.dim.dimensionless() ? Dim::none() : l.dim.pow(static_cast<int>(b));
      break;
    }
    case BinaryOp::Lt: return Value::boolean_(a < b, e.span);
    case BinaryOp::Le: return Value::boolean_(a <= b, e.span);
    case BinaryOp::Gt: return Value::boolean_(a > b, e.span);
    case BinaryOp::Ge: return Value::boolean_(a >= b, e.span);
    case BinaryOp::Eq: return Value::boolean_(a == b, e.span);
    case BinaryOp::Ne: return Value::boolean_(a != b, e.span);
    default: break;
  }
  if (!std::isfinite(out)) {
    error(code::kInvalidOperation, e.span, "the result of `" + std::string(op) + "` is not a finite number",
          "check for overflow (a value beyond about 1.8e308) or 0^negative");
    return Value::unknown(e.span);
  }
  Value v = Value::num(out, d, e.span);
  // A percentage stays one through + and - with another percentage only.
  v.percent = (e.op == BinaryOp::Add || e.op == BinaryOp::Sub) && l.percent && r.percent;
  return v;
}

Value Evaluator::evalMember(const MemberExpr& e, const ScopePtr& scope) {
  Value obj = eval(*e.object, scope);
  if (obj.isUnknown()) return obj;
  const std::string& name = e.member;
  switch (obj.kind) {
    case ValueKind::Record: {
      const Record& rec = *obj.record;
      if (const Value* v = rec.get(name)) return *v;
      const Schema* schema = schemaFor(rec.kind);
      if (rec.kind == "pod" && name == "ipus") {
        const Value* machines = rec.get("machines");
        const Value* machine = rec.get("machine");
        if (machines && machine && machine->kind == ValueKind::Record)
          if (const Value* ipus = machine->record->get("ipus"); ipus && ipus->isNumber() && machines->isNumber())
            return Value::num(machines->number * ipus->number, Dim::none(), e.span);
        return Value::unknown(e.span);
      }
      if (schema != nullptr)
        if (const Field* f = schema->find(name)) {
          if (!f->dflt.isUnknown()) return f->dflt;
          // Defaults computed from other fields, as the schema documents them.
          auto field = [&](const char* n) -> Value {
            if (const Value* v = rec.get(n)) return *v;
            const Field* g = schema->find(n);
            return g != nullptr ? g->dflt : Value::unknown(e.span);
          };
          if (rec.kind == "pod" && name == "machines_per_rack") return field("machines");
          if (rec.kind == "precision" && name == "weights") return field("compute");
          if (rec.kind == "precision" && name == "accumulators")
            return rec.get("weights") != nullptr ? *rec.get("weights") : field("compute");
          if (rec.kind == "dataset" && name == "sequences_per_pack") {
            Value packing = field("packing");
            return Value::num(packing.kind == ValueKind::Bool && packing.boolean ? 2 : 1, Dim::none(), e.span);
          }
          if (rec.kind == "optimizer" && (name == "momentum" || name == "epsilon")) {
            std::string kind = field("kind").text;
            if (name == "momentum") return Value::num(kind == "momentum" || kind == "lars" ? 0.9 : 0, Dim::none(), e.span);
            return Value::num(kind == "adam" || kind == "adamw" ? 1e-8 : 1e-6, Dim::none(), e.span);
          }
          error(code::kMissingField, e.memberSpan,
                obj.describe() + " does not set `" + name + "`" +
                    (f->defaultDoc.empty() ? std::string(", which has no default") : " (default: " + f->defaultDoc + ")"),
                "set it where " + obj.describe() + " is declared, or do not read it here");
          return Value::unknown(e.span);
        }
      std::vector<std::string> names;
      for (const auto& f : rec.fields) names.push_back(f.name);
      if (schema != nullptr)
        for (const auto& n : schema->names()) names.push_back(n);
      if (rec.kind == "pod") names.push_back("ipus");
      error(code::kUnknownField, e.memberSpan, obj.describe() + " has no field `" + name + "`", base::didYouMean(name, names));
      return Value::unknown(e.span);
    }
    case ValueKind::Module: {
      auto& ms = static_cast<ModuleScope&>(*obj.module->scope);
      if (const Value* v = ms.lookupOwn(name, *this, e.memberSpan)) return *v;
      std::vector<std::string> names;
      ms.collectNames(names, *this);
      error(code::kUnknownName, e.memberSpan, "module `" + obj.module->path + "` has no `" + name + "`",
            base::didYouMean(name, names));
      return Value::unknown(e.span);
    }
    case ValueKind::Model: {
      if (name != "params" && name != "layers") {
        error(code::kUnknownField, e.memberSpan, obj.describe() + " has no property `" + name + "`",
              "models have `params` (parameter count) and `layers` (layer count)");
        return Value::unknown(e.span);
      }
      return modelProperty(*obj.model, name, e.span);
    }
    case ValueKind::Selection: {
      const Selection& sel = *obj.selection;
      auto out = std::make_shared<Selection>();
      out->model = sel.model;
      for (auto prefix : sel.prefixes) {
        prefix.push_back(PathPart{name, -1});
        if (sel.model->leavesUnder(prefix).empty()) {
          std::vector<PathPart> parent(prefix.begin(), prefix.end() - 1);
          auto children = sel.model->childNames(parent);
          std::string help = base::didYouMean(name, children);
          if (help.empty() && !children.empty()) {
            help = "`" + pathString(parent) + "` has:";
            for (const auto& c : children) help += " `" + c + "`";
          }
          error(code::kUnknownLayer, e.memberSpan, "`" + pathString(parent) + "` has no layer `" + name + "`", help);
          return Value::unknown(e.span);
        }
        out->prefixes.push_back(prefix);
      }
      Value v;
      v.kind = ValueKind::Selection;
      v.selection = out;
      v.span = e.span;
      return v;
    }
    default:
      error(code::kTypeMismatch, e.memberSpan, obj.describe() + " has no fields");
      return Value::unknown(e.span);
  }
}

Value Evaluator::modelProperty(const ModelValue& model, const std::string& name, Span at) {
  PhaseContext structural;
  auto st = expandModel(*this, model, structural);
  if (name == "layers") return Value::num(static_cast<double>(st->leaves.size()), Dim::none(), at);
  if (name != "params") return Value::unknown(at);
  double total = 0;
  LayerFactsMemo memo;
  for (const auto& leaf : st->leaves) {
    LayerFacts f = layerFacts(*this, leaf, structural, &memo);
    if (f.paramsUnknown) return Value::unknown(at);  // reported where the model is used in a mapping
    total += f.params;
    if (!std::isfinite(total)) return Value::unknown(at);
  }
  return Value::num(total, Dim::none(), at);
}

Value Evaluator::evalIndex(const IndexExpr& e, const ScopePtr& scope) {
  Value obj = eval(*e.object, scope);
  Value idx = eval(*e.index, scope);
  if (obj.isUnknown() || idx.isUnknown()) return Value::unknown(e.span);
  if (obj.kind == ValueKind::Selection) {
    const Selection& sel = *obj.selection;
    auto out = std::make_shared<Selection>();
    out->model = sel.model;
    long long lo = 0, hi = 0;
    if (idx.kind == ValueKind::Range) {
      lo = idx.lo;
      hi = idx.hi;
    } else if (idx.isWhole() && std::fabs(idx.number) <= kMaxExactInteger) {
      lo = static_cast<long long>(idx.number);
      hi = lo + 1;
    } else {
      error(code::kTypeMismatch, e.index->span, "a layer index must be a whole number or a range, found " + idx.describe());
      return Value::unknown(e.span);
    }
    for (const auto& prefix : sel.prefixes) {
      const ModelStructure::Group* g = sel.model->group(prefix);
      if (g == nullptr || g->count < 0 || prefix.back().index >= 0) {
        error(code::kLayerIndex, e.span, "`" + pathString(prefix) + "` is not a repeated group, so it has no index",
              "only `repeat` groups are indexed: `encoder[0..3]`");
        return Value::unknown(e.span);
      }
      if (lo < 0 || hi > g->count) {
        error(code::kLayerIndex, e.index->span,
              "`" + pathString(prefix) + "` has " + std::to_string(g->count) + " elements (indices 0.." +
                  std::to_string(g->count) + "); `" + idx.show() + "` is out of range",
              "ranges are half-open: `" + prefix.back().name + "[0.." + std::to_string(g->count) + "]` is all of them");
        return Value::unknown(e.span);
      }
      for (long long i = lo; i < hi; ++i) {
        auto p = prefix;
        p.back().index = i;
        out->prefixes.push_back(p);
      }
    }
    Value v;
    v.kind = ValueKind::Selection;
    v.selection = out;
    v.span = e.span;
    return v;
  }
  if (!idx.isWhole()) {
    error(code::kTypeMismatch, e.index->span, "an index must be a whole number, found " + idx.describe());
    return Value::unknown(e.span);
  }
  if (std::fabs(idx.number) > kMaxExactInteger) {
    error(code::kOutOfRange, e.index->span, "index `" + idx.show() + "` is out of range");
    return Value::unknown(e.span);
  }
  long long i = static_cast<long long>(idx.number);
  if (obj.kind == ValueKind::List) {
    long long n = static_cast<long long>(obj.list->size());
    if (i < 0 || i >= n) {
      error(code::kOutOfRange, e.index->span,
            "index " + std::to_string(i) + " is out of range for a list of " + std::to_string(n));
      return Value::unknown(e.span);
    }
    return (*obj.list)[static_cast<std::size_t>(i)];
  }
  if (obj.kind == ValueKind::Range) {
    if (i < 0 || i >= obj.hi - obj.lo) {
      error(code::kOutOfRange, e.index->span, "index " + std::to_string(i) + " is out of range for `" + obj.show() + "`");
      return Value::unknown(e.span);
    }
    return Value::integral(obj.lo + i, e.span);
  }
  error(code::kInvalidOperation, e.object->span, "cannot index " + obj.describe());
  return Value::unknown(e.span);
}

Value Evaluator::evalSchedule(const ScheduleExpr& e, const ScopePtr& scope) {
  auto s = std::make_shared<ScheduleValue>();
  s->base = eval(*e.base, scope);
  if (e.per) {
    s->per = eval(*e.per, scope);
    s->hasPer = true;
  }
  if (e.warmup) {
    s->warmup = eval(*e.warmup, scope);
    s->hasWarmup = true;
  }
  if (e.decay) {
    s->decaySpan = e.decay->kindSpan;
    if (std::optional<ir::LrDecay> d = ir::lrDecayFromName(e.decay->kind)) {
      s->decay = *d;
    } else {
      std::vector<std::string> kinds;
      for (ir::LrDecay k : ir::kLrDecays) kinds.emplace_back(ir::nameOf(k));
      std::string help = base::didYouMean(e.decay->kind, kinds);
      if (help.empty()) help = "decays are constant, linear, cosine, poly(power) and exponential";
      error(code::kBadSchedule, e.decay->kindSpan, "unknown decay `" + e.decay->kind + "`", help);
    }
    for (const auto& a : e.decay->args) s->decayArgs.emplace_back(a.name, eval(*a.value, scope));
    if (e.decay->end) {
      s->end = eval(*e.decay->end, scope);
      s->hasEnd = true;
    }
  }
  Value v;
  v.kind = ValueKind::Schedule;
  v.schedule = s;
  v.span = e.span;
  return v;
}

}  // namespace ipu::check
