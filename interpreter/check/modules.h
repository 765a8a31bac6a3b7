// Modules: one parsed `.ipu` file each. `import "std/x"` resolves to the
// embedded standard library; any other path is a file relative to the
// importing script (".ipu" may be omitted). The loader parses each module once,
// reports missing modules with "did you mean" and import cycles with the chain.
// With a prelude (prelude.h), standard modules are the prelude's, parsed once
// per process; user modules are parsed here, or taken from a ModuleCache when
// their path and text are those of an earlier parse.
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
  std::shared_ptr<const syntax::Program> program;  // null when it failed to parse
  bool standard = false;
  std::vector<std::pair<const syntax::ImportItem*, Module*>> imports;
};

class Prelude;

// Parsed user modules kept across checks of one session: a module is parsed
// again only when its text changed. Keyed by canonical path; an entry is
// reused when the text is the same (the FileId it was parsed under stays
// valid: a session's source map only grows).
class ModuleCache {
 public:
  struct Entry {
    std::string text;
    base::FileId file = base::kNoFile;
    std::shared_ptr<const syntax::Program> program;
  };
  const Entry* find(const std::string& key, const std::string& text) const {
    auto it = entries_.find(key);
    return it != entries_.end() && it->second.text == text ? &it->second : nullptr;
  }
  void put(const std::string& key, Entry e) { entries_[key] = std::move(e); }
  void clear() { entries_.clear(); }

 private:
  std::map<std::string, Entry> entries_;
};

class ModuleLoader {
 public:
  // `prelude`: the standard library to share (null: parse it here, as the
  // prelude itself does). `cache`: parsed user modules to reuse (may be null).
  ModuleLoader(base::SourceMap& sources, base::Diagnostics& diags, const Prelude* prelude, ModuleCache* cache = nullptr)
      : sources_(sources), diags_(diags), prelude_(prelude), cache_(cache) {}
  const Prelude* prelude() const { return prelude_; }
  // Texts to use in place of the files on disk, by canonical absolute path
  // (an editor's unsaved buffers, Session::update); null: the disk only.
  // Kept by pointer: it must outlive the loads.
  void setTexts(const std::map<std::string, std::string>* texts) { texts_ = texts; }

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
  const Prelude* prelude_ = nullptr;
  ModuleCache* cache_ = nullptr;
  const std::map<std::string, std::string>* texts_ = nullptr;
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<std::string, Module*> byKey_;
  std::vector<Module*> loading_;  // the import chain, for cycle reports
};

// The help of an unknown name that a standard module declares: "`bert_large`
// is defined in `std/models/bert`: add `import "std/models/bert"`". And its
// reader: the module such a help says to import (empty when it says none),
// for the language server's fix. The two live together so they change together.
std::string importHelp(const std::string& name, const std::string& module);
std::string moduleToImport(const std::string& help);

}  // namespace ipu::check
