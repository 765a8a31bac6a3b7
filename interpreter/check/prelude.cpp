#include "interpreter/check/prelude.h"

#include <chrono>

#include "interpreter/check/evaluator.h"
#include "interpreter/check/modules.h"
#include "runtime/base/invariant.h"

namespace ipu::check {

const Prelude& Prelude::get() {
  // Leaked on purpose: module scopes and the closures in them refer to each
  // other, and other statics may still look names up during exit.
  static const Prelude* prelude = new Prelude();
  return *prelude;
}

Prelude::Prelude() {
  auto start = std::chrono::steady_clock::now();
  loader_ = std::make_unique<ModuleLoader>(sources_, diags_, nullptr);
  evaluator_ = std::make_unique<Evaluator>(diags_, *loader_);
  for (const std::string& name : ModuleLoader::standardModuleNames())
    if (Module* m = loader_->loadStandard(name)) modules_[name] = m;
  // Evaluate every declaration now, so that the scopes are only ever read later.
  for (const auto& [name, m] : modules_) {
    if (!m->program) continue;
    ModuleScope& scope = evaluator_->scopeOf(*m);
    scope.index(*evaluator_);
    for (const auto& item : m->program->items) {
      if (const auto* d = item->dyn<syntax::Declaration>()) scope.lookupOwn(d->name, *evaluator_, {});
      else if (const auto* l = item->dyn<syntax::LetItem>()) scope.lookupOwn(l->name, *evaluator_, {});
    }
    scopes_[m] = evaluator_->scopePtrOf(*m);
  }
  // The standard library is tested to be clean (tests/unit/stdlib_test.cpp).
  IPU_INVARIANT(!diags_.hasErrors(), "the embedded standard library checks without errors");
  buildMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Prelude::~Prelude() = default;

Module* Prelude::module(const std::string& name) const {
  auto it = modules_.find(name);
  return it == modules_.end() ? nullptr : it->second;
}

ScopePtr Prelude::scopeOf(const Module& module) const {
  auto it = scopes_.find(&module);
  return it == scopes_.end() ? nullptr : it->second;
}

}  // namespace ipu::check
