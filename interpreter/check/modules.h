// Modules: one parsed `.ipu` file each. `import "std/x"` resolves to the
// embedded standard library; any other path is a file relative to the
// importing script (".ipu" may be omitted). The loader parses each module once,
// reports missing modules with "did you mean" and import cycles with the chain.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/syntax/ast.h"

namespace ipu::check {

struct Module {
  std::string name;      // "std/models/bert" or the file path as given
  std::string key;       // canonical identity (std name, or absolute path)
  base::FileId file = base::kNoFile;
  std::unique_ptr<syntax::Program> program;  // null when it failed to parse
  bool standard = false;
  std::vector<std::pair<const syntax::ImportItem*, Module*>> imports;
};

class ModuleLoader {
 public:
  ModuleLoader(base::SourceMap& sources, base::Diagnostics& diags) : sources_(sources), diags_(diags) {}

  // Parse `file` (already in the source map) and everything it imports.
  Module* loadRoot(base::FileId file);
  // Parse a standard-library module by name (for the REPL's completion and docs).
  Module* loadStandard(const std::string& name);
  const std::vector<std::unique_ptr<Module>>& modules() const { return modules_; }
  // Every embedded module name, for "did you mean" and completion.
  static std::vector<std::string> standardModuleNames();

 private:
  Module* load(std::string key, std::string name, base::FileId file, bool standard);
  Module* resolve(const syntax::ImportItem& import, const Module& from);
  void loadImports(Module& m);

  base::SourceMap& sources_;
  base::Diagnostics& diags_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<std::string, Module*> byKey_;
  std::vector<Module*> loading_;  // the import chain, for cycle reports
};

}  // namespace ipu::check
