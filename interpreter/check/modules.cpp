#include "interpreter/check/modules.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "interpreter/check/codes.h"
#include "interpreter/check/prelude.h"
#include "interpreter/check/stdlib_files.h"
#include "interpreter/syntax/parser.h"

namespace ipu::check {

namespace fs = std::filesystem;

std::string importHelp(const std::string& name, const std::string& module) {
  return "`" + name + "` is defined in `" + module + "`: add `import \"" + module + "\"`";
}

std::string moduleToImport(const std::string& help) {
  const std::string lead = ": add `import \"";
  const std::size_t at = help.find(lead);
  if (at == std::string::npos) return {};
  const std::size_t begin = at + lead.size();
  const std::size_t end = help.find("\"`", begin);
  return end == std::string::npos ? std::string() : help.substr(begin, end - begin);
}

std::vector<std::string> ModuleLoader::standardModuleNames() {
  std::vector<std::string> names;
  for (const auto& f : stdlibFiles()) names.push_back(f.module);
  return names;
}

Module* ModuleLoader::load(std::string key, std::string name, base::FileId file, bool standard) {
  auto m = std::make_unique<Module>();
  m->key = std::move(key);
  m->name = std::move(name);
  m->file = file;
  m->standard = standard;
  Module* raw = m.get();
  modules_.push_back(std::move(m));
  byKey_[raw->key] = raw;
  const ModuleCache::Entry* cached =
      cache_ != nullptr && !standard ? cache_->find(raw->key, sources_.file(file).text()) : nullptr;
  if (cached != nullptr) {
    raw->file = cached->file;
    raw->program = cached->program;
  } else {
    std::size_t before = diags_.all().size();
    raw->program = syntax::parse(sources_, file, diags_);
    // Only a clean parse is kept: a reuse must report what a parse would.
    if (cache_ != nullptr && !standard && raw->program && diags_.all().size() == before)
      cache_->put(raw->key, ModuleCache::Entry{sources_.file(file).text(), file, raw->program});
  }
  loading_.push_back(raw);
  if (raw->program) loadImports(*raw);
  loading_.pop_back();
  return raw;
}

Module* ModuleLoader::loadRoot(base::FileId file) {
  std::string path = sources_.file(file).path();
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(fs::absolute(path, ec), ec);
  std::string key = ec ? path : abs.string();
  if (auto it = byKey_.find(key); it != byKey_.end()) return it->second;
  return load(key, path, file, false);
}

Module* ModuleLoader::loadStandard(const std::string& name) {
  if (prelude_ != nullptr) return prelude_->module(name);
  if (auto it = byKey_.find(name); it != byKey_.end()) return it->second;
  for (const auto& f : stdlibFiles())
    if (name == f.module) {
      base::FileId id = sources_.add(std::string(f.module) + ".ipu", f.text);
      return load(name, name, id, true);
    }
  return nullptr;
}

void ModuleLoader::loadImports(Module& m) {
  for (const auto& item : m.program->items) {
    const auto* imp = item->dyn<syntax::ImportItem>();
    if (imp == nullptr) continue;
    if (Module* dep = resolve(*imp, m)) m.imports.emplace_back(imp, dep);
  }
}

Module* ModuleLoader::resolve(const syntax::ImportItem& imp, const Module& from) {
  std::string path = imp.path;
  std::string key;
  bool standard = path.rfind("std/", 0) == 0 || path == "std";
  base::FileId file = base::kNoFile;
  std::string text;
  if (standard && prelude_ != nullptr) {
    // The prelude's modules only import each other: no cycle through user modules.
    if (Module* m = prelude_->module(path)) return m;
    std::string help = base::didYouMean(path, standardModuleNames());
    if (help.empty()) {
      help = "the standard library has:";
      for (const auto& n : standardModuleNames()) help += " `" + n + "`";
    }
    diags_.error(code::kModuleNotFound, imp.pathSpan, "no standard module `" + path + "`", help);
    return nullptr;
  }
  if (standard) {
    key = path;
    if (!byKey_.count(key)) {
      const StdlibFile* found = nullptr;
      for (const auto& f : stdlibFiles())
        if (path == f.module) found = &f;
      if (found == nullptr) {
        std::string help = base::didYouMean(path, standardModuleNames());
        if (help.empty()) {
          help = "the standard library has:";
          for (const auto& n : standardModuleNames()) help += " `" + n + "`";
        }
        diags_.error(code::kModuleNotFound, imp.pathSpan, "no standard module `" + path + "`", help);
        return nullptr;
      }
      text = found->text;
    }
  } else {
    if (from.standard) {
      diags_.error(code::kModuleNotFound, imp.pathSpan, "standard modules can only import `std/...` modules");
      return nullptr;
    }
    fs::path base = fs::path(sources_.file(from.file).path()).parent_path();
    fs::path candidate = fs::path(path).is_absolute() ? fs::path(path) : base / path;
    std::error_code ec;
    // A text given in place of the file (setTexts) wins over the disk, with
    // or without `.ipu`, and need not exist on disk.
    const std::string* given = nullptr;
    if (texts_ != nullptr) {
      fs::path withExtension = candidate;
      withExtension += ".ipu";
      for (const fs::path& c : {candidate, withExtension}) {
        std::string k = fs::weakly_canonical(fs::absolute(c, ec), ec).string();
        if (auto it = texts_->find(k); !ec && it != texts_->end()) {
          given = &it->second;
          candidate = c;
          key = k;
          break;
        }
      }
    }
    if (given != nullptr) {
      if (!byKey_.count(key)) text = *given;
    } else {
      // `x` is `x` if it is a file, else `x.ipu` if that exists, else `x` if it
      // exists at all (a directory, a FIFO, `/dev/null`: refused below by the
      // reader, saying what it is, rather than "cannot find").
      if (!fs::is_regular_file(candidate, ec) && candidate.extension() != ".ipu") {
        fs::path withExtension = candidate;
        withExtension += ".ipu";
        if (fs::exists(withExtension, ec) || !fs::exists(candidate, ec)) candidate = withExtension;
      }
      if (!fs::exists(candidate, ec)) {
        std::string help = "paths are relative to the importing script (" +
                           (base.empty() ? std::string(".") : base.string()) + "); standard modules start with `std/`";
        std::vector<std::string> siblings;
        for (const auto& entry : fs::directory_iterator(candidate.parent_path().empty() ? "." : candidate.parent_path(), ec))
          if (entry.path().extension() == ".ipu") siblings.push_back(entry.path().stem().string());
        std::string dym = base::didYouMean(fs::path(path).stem().string(), siblings);
        if (!dym.empty()) help = dym;
        diags_.error(code::kModuleNotFound, imp.pathSpan, "cannot find module `" + path + "`", help);
        return nullptr;
      }
      fs::path abs = fs::weakly_canonical(fs::absolute(candidate, ec), ec);
      key = abs.string();
      if (!byKey_.count(key)) {
        base::FileText read = base::readSourceFile(candidate.string());
        if (read.status != base::FileText::Status::Ok) {
          if (read.status == base::FileText::Status::NotAFile) {
            diags_.error(code::kModuleNotFound, imp.pathSpan,
                         "module `" + path + "` is " + read.problem + ", not a file", "import a `.ipu` file");
            return nullptr;
          }
          std::string why = read.status == base::FileText::Status::TooLarge
                                ? "it is " + std::to_string(read.bytes) + " bytes; the limit is 8 MiB"
                                : read.problem;
          diags_.error(code::kModuleNotFound, imp.pathSpan, "cannot read module `" + path + "`: " + why);
          return nullptr;
        }
        text = std::move(read.text);
      }
    }
    path = candidate.lexically_normal().string();
  }
  for (Module* open : loading_)
    if (open->key == key) {
      std::string chain;
      bool on = false;
      for (Module* m : loading_) {
        if (m == open) on = true;
        if (on) chain += "`" + m->name + "` -> ";
      }
      chain += "`" + open->name + "`";
      diags_.error(code::kImportCycle, imp.pathSpan, "import cycle: " + chain,
                   "move what both modules need into a third module that neither imports");
      return nullptr;
    }
  if (auto it = byKey_.find(key); it != byKey_.end()) return it->second;
  if (const ModuleCache::Entry* cached = cache_ != nullptr && !standard ? cache_->find(key, text) : nullptr)
    file = cached->file;  // unchanged since the last check: its file and parse are reused
  else
    file = sources_.add(standard ? path + ".ipu" : path, std::move(text));
  return load(key, path, file, standard);
}

}  // namespace ipu::check
