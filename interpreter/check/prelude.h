// The prelude: the standard library parsed and evaluated once per process.
//
// Every question a tool asks (check a file, plan a variant, answer a position
// query) used to parse and evaluate the whole standard library again, which
// was most of the time of checking any example. The prelude does it once, on
// first use (thread-safe: a function-local static), and is immutable after:
// each standard module's declarations are all evaluated, so looking a name up
// in one of its scopes only reads. Sessions share it:
//   - their SourceMap starts as a copy of prelude().sources(), so the standard
//     files keep the same FileIds (and every span into them stays valid);
//   - their ModuleLoader hands out the prelude's modules for `import "std/..."`;
//   - their Evaluator uses the prelude's module scopes for those modules.
// It is never destroyed (closures and their scopes refer to each other).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/check/value.h"

namespace ipu::check {

struct Module;
class ModuleLoader;
class Evaluator;

class Prelude {
 public:
  // The process's prelude, built on the first call.
  static const Prelude& get();

  // The standard library's files, at the ids every session's spans use.
  const base::SourceMap& sources() const { return sources_; }
  // The parsed module `std/...` (null when there is none).
  Module* module(const std::string& name) const;
  // The evaluated scope of one of the prelude's modules (null for any other module).
  ScopePtr scopeOf(const Module& module) const;
  // How long building it took, for the benchmarks.
  double buildMilliseconds() const { return buildMs_; }

  Prelude(const Prelude&) = delete;
  Prelude& operator=(const Prelude&) = delete;

 private:
  Prelude();
  ~Prelude();
  base::SourceMap sources_;
  base::Diagnostics diags_;
  std::unique_ptr<ModuleLoader> loader_;
  std::unique_ptr<Evaluator> evaluator_;
  std::map<std::string, Module*> modules_;
  std::map<const Module*, ScopePtr> scopes_;
  double buildMs_ = 0;
};

}  // namespace ipu::check
