// The evaluator: gives `.ipu` expressions and declarations their values.
//
// Scopes nest lexically: a block's `let`s, then a definition's parameters and,
// inside models and layers, the phase variables; then the module (whose
// declarations are evaluated lazily, on first use, so declaration order does
// not matter and cycles are reported), its imports, and the built-ins.
//
// Records are checked against schema.h as they are built. A field whose type is
// an enumeration reads a bare name as that enumeration's member (`compute:
// fp16`), so scripts need no quotes and a typo gets "did you mean" over the
// members. Errors are collected as diagnostics; evaluation continues with an
// Unknown value, which propagates silently so one mistake is reported once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/check/modules.h"
#include "interpreter/check/schema.h"
#include "interpreter/check/value.h"

namespace ipu::check {

class Evaluator;

class Scope {
 public:
  explicit Scope(ScopePtr parent = nullptr) : parent_(std::move(parent)) {}
  virtual ~Scope() = default;
  // False (and nothing defined) when the name is already defined in this scope.
  bool define(const std::string& name, Value value, Span span);
  virtual const Value* lookup(const std::string& name, Evaluator& ev, Span use);
  virtual void collectNames(std::vector<std::string>& out, Evaluator& ev);
  Span definedAt(const std::string& name) const;
  const ScopePtr& parent() const { return parent_; }
  // Drop every binding. Closures (templates, models) hold their defining
  // scope, which holds them: the owner of the scopes clears them to free both.
  virtual void clear() { locals_.clear(); }

 protected:
  struct Entry {
    Value value;
    Span span;
  };
  std::map<std::string, Entry> locals_;
  ScopePtr parent_;
};

// A module's top-level names: declarations evaluated on first use; imports.
class ModuleScope : public Scope {
 public:
  ModuleScope(const Module& module, ScopePtr builtins) : Scope(std::move(builtins)), module_(module) {}
  const Value* lookup(const std::string& name, Evaluator& ev, Span use) override;
  void collectNames(std::vector<std::string>& out, Evaluator& ev) override;
  const Module& module() const { return module_; }
  // The module's own top-level names (what an import brings in).
  const Value* lookupOwn(const std::string& name, Evaluator& ev, Span use);
  // True while `name`'s own declaration is being evaluated: inside it, the
  // name means the outer (imported or built-in) one, so that
  // `optimizer lamb = lamb(...)` and `model bert_large = bert_large with {...}` work.
  bool isSelfReference(const std::string& name) const { return !evaluating_.empty() && evaluating_.back() == name; }
  bool declares(const std::string& name) const { return items_.count(name) > 0; }
  // The item declaring `name` in this module or an unaliased import (null if none).
  const syntax::Item* declaringItem(const std::string& name) const {
    if (auto it = items_.find(name); it != items_.end()) return it->second.item;
    for (const auto& [module, scope] : imports_)
      if (const syntax::Item* item = scope->declaringItem(name)) return item;
    return nullptr;
  }
  // The unaliased import that declares `name` ("" if none): for saying which
  // imported definition a local declaration hides.
  std::string importDeclaring(const std::string& name) const {
    for (const auto& [module, scope] : imports_)
      if (scope->declares(name)) return module;
    return {};
  }
  void clear() override {
    Scope::clear();
    imports_.clear();
  }
  void index(Evaluator& ev);  // find declarations, report duplicates

 private:
  enum class State { Pending, InProgress, Done };
  struct Pending {
    const syntax::Item* item = nullptr;
    State state = State::Pending;
  };
  const Module& module_;
  std::map<std::string, Pending> items_;
  std::vector<std::pair<std::string, ModuleScope*>> imports_;  // unaliased
  std::vector<std::string> evaluating_;  // declarations being evaluated, innermost last
  bool indexed_ = false;
};

// What a training phase binds inside models and layers.
struct PhaseContext {
  // Structural: expanding a model without a phase (to list its layers, count
  // its parameters, check a mapping): phase variables are Unknown. Otherwise
  // only the variables the phase sets are defined, and using another one is
  // an error naming the phase.
  bool structural = true;
  Value microBatch, seqLen, maskedTokens, imageSize;  // Unknown when not set
  std::string phaseName;
  Span phaseSpan;
  // Binds the phase variables in `scope`.
  void bind(Scope& scope) const;
};

class Evaluator {
 public:
  Evaluator(base::Diagnostics& diags, ModuleLoader& loader);
  ~Evaluator();

  base::Diagnostics& diags() { return diags_; }
  ModuleScope& scopeOf(const Module& module);
  ScopePtr scopePtrOf(const Module& module);

  Value eval(const syntax::Expr& e, const ScopePtr& scope);
  // Evaluate a field value against its declared type: contextual enumeration
  // names, unit and range checks, coercion of counts. Reports and returns
  // Unknown on mismatch.
  Value evalField(const syntax::Expr& e, const Type& type, const ScopePtr& scope, const std::string& field);
  bool conforms(Value& v, const Type& type, const std::string& field, Span at);

  // Calls `seen` with each value `expr` is given while this evaluator runs
  // (once per evaluation: a definition's body once per instantiation; a
  // field's value as the field reads it, enumeration names included). How
  // the session answers "what is the value here" without writing any text.
  void watch(const syntax::Expr* expr, std::function<void(const Value&)> seen) {
    watched_ = expr;
    seen_ = std::move(seen);
  }
  // A model's `params` (parameter count) or `layers` (layer count), as the
  // property reads it; Unknown when it cannot be counted.
  Value modelProperty(const ModelValue& model, const std::string& name, Span at);

  // Build a record of `kind` from a block, on top of `base` (for `with`).
  std::shared_ptr<Record> buildRecord(const std::string& kind, const syntax::Block& block, const ScopePtr& scope,
                                      std::shared_ptr<const Record> base, std::string name, Span span);
  Value evaluateItem(const syntax::Item& item, ModuleScope& scope);
  // A record-kind declaration's value (body, `= value`, `for`/`on`), in `scope`.
  Value declaredRecord(const syntax::Declaration& d, const ScopePtr& scope, Span span);

  Value call(const Value& callee, const std::vector<syntax::Arg>& args, const ScopePtr& scope, Span span,
             Span calleeSpan);
  // A model made by a call, applied again with `args` in place of its own
  // (what `model with { hidden: 128 }` makes, from values instead of syntax;
  // sweeps.h). Argument errors are reported at each value's span.
  Value reapplyModel(const ModelValue& model, const std::vector<std::pair<std::string, Value>>& args);

  // Where in the standard library a name is declared (for "add an import").
  std::string standardModuleDeclaring(const std::string& name);

  // Report an error; inside a definition's body, notes point back to where the
  // user instantiated it.
  base::Diagnostic& error(const char* code, Span span, std::string message, std::string help = {});
  base::Diagnostic& warning(const char* code, Span span, std::string message, std::string help = {});

  // Instantiation stack, for notes and the recursion limit.
  struct Frame {
    std::string what;
    Span site;
  };
  bool pushFrame(std::string what, Span site);  // false (error reported) when too deep
  void popFrame() {
    frames_.pop_back();
    if (frames_.empty()) recursionAborted_ = false;
  }

  const ScopePtr& builtins() const { return builtins_; }
  // The phase whose model is being expanded (for messages about phase variables).
  const PhaseContext* currentPhase() const { return phase_; }
  void setCurrentPhase(const PhaseContext* p) { phase_ = p; }
  static constexpr int kMaxDepth = 64;
  static constexpr long long kMaxTemplateCalls = 500'000;  // definitions applied in one check
  static constexpr std::size_t kMaxStringBytes = 1u << 20;  // strings built by `+`
  static constexpr std::size_t kMaxListItems = 1u << 20;    // lists built by `+`

 private:
  Value evalExpr(const syntax::Expr& e, const ScopePtr& scope);
  Value evalFieldValue(const syntax::Expr& e, const Type& type, const ScopePtr& scope, const std::string& field);
  Value evaluateItemIsolated(const syntax::Item& item, ModuleScope& scope);
  Value evalName(const syntax::NameExpr& e, const ScopePtr& scope);
  Value evalBinary(const syntax::BinaryExpr& e, const ScopePtr& scope);
  Value evalMember(const syntax::MemberExpr& e, const ScopePtr& scope);
  Value evalIndex(const syntax::IndexExpr& e, const ScopePtr& scope);
  Value evalWith(const syntax::WithExpr& e, const ScopePtr& scope);
  Value evalSchedule(const syntax::ScheduleExpr& e, const ScopePtr& scope);
  Value evalNumber(const syntax::NumberExpr& e);
  struct ArgRef {
    std::string name;
    Span nameSpan;
    const syntax::Expr* value;
  };
  Value callTemplate(const Template& t, const std::vector<ArgRef>& args, const ScopePtr& scope, Span span,
                     const std::vector<std::pair<std::string, Value>>* base);
  Value callBuiltin(const std::string& name, const std::vector<syntax::Arg>& args, const ScopePtr& scope, Span span);
  void buildPipeline(Record& rec, const std::string& field, const syntax::BlockMember& m, const ScopePtr& scope);
  void buildPhase(Record& rec, const syntax::PhaseMember& m, const ScopePtr& scope);

  base::Diagnostics& diags_;
  ModuleLoader& loader_;
  ScopePtr builtins_;
  std::map<const Module*, ScopePtr> moduleScopes_;
  std::vector<Frame> frames_;
  // Once a definition nests too deep, every call until the outermost one
  // returns gives up at once: a definition that calls itself twice per level
  // would otherwise make 2^depth calls before unwinding.
  bool recursionAborted_ = false;
  long long templateCalls_ = 0;  // per check: a budget against exponential expansion
  int exprDepth_ = 0;
  const PhaseContext* phase_ = nullptr;
  const syntax::Expr* watched_ = nullptr;  // watch()
  const syntax::Expr* fieldExpr_ = nullptr;
  std::function<void(const Value&)> seen_;
};

}  // namespace ipu::check
