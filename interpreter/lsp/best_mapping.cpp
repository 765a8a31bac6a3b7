#include "interpreter/lsp/best_mapping.h"

#include <vector>

#include "interpreter/lsp/workspace.h"
#include "interpreter/search/script_edit.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"

namespace ipu::lsp {

namespace {

// The document's text checked in a session of its own, which sees the
// unsaved texts of the other open documents (the modules it imports).
base::FileId load(session::Session& s, Workspace& workspace, const Analysis& a) {
  for (const auto& d : workspace.documents().all())
    if (d.uri != a.document.uri && !workspace.standardLibrary().standardPathOf(d.uri)) s.update(d.path, *d.text);
  return s.addSource(a.document.path, a.text());
}

}  // namespace

BestMapping bestMappingEdit(Workspace& workspace, const Analysis& a, const std::string& mapping, const std::atomic<bool>* stop) {
  if (a.standardPath) return {nullptr, "the standard library is read-only"};
  session::Session s;
  const base::FileId root = load(s, workspace, a);
  const check::CheckedProgram* program = s.check(root);
  if (program == nullptr) return {nullptr, "the script does not check: its errors are shown"};
  std::vector<search::FoundMapping> found;
  std::string unfound;
  for (const auto& run : program->runs)
    for (const auto& ph : run.phases) {
      if (ph.mapping == nullptr || ph.mapping->name != mapping) continue;
      search::Options options;  // `ipu search`'s defaults: throughput, ranked conservatively
      options.interrupt = stop;
      search::PhaseResult r = search::searchPhase(ph, s.checker()->evaluator(), s.sources(), options);
      if (r.stopped != search::StopReason::None) return {nullptr, "the search was stopped before it covered the space"};
      if (!r.error.empty() || r.top.empty()) {
        unfound += (unfound.empty() ? "" : ", ") + std::string("phase `") + ph.name + "` of `" + run.name + "`" +
                   (r.error.empty() ? "" : " (" + r.error + ")");
        continue;
      }
      found.push_back({run.name, &ph, r.top.front(), nullptr});
    }
  if (!unfound.empty()) return {nullptr, "no mapping fits " + unfound};
  if (found.empty()) return {nullptr, "no training uses `" + mapping + "`"};
  // The phases as the script writes them (a `search { }` mapping's phases
  // were given the block's answer by the check), as `ipu search --write` does.
  session::Session asWritten;
  asWritten.setSearches(session::Session::Searches::AsWritten);
  const base::FileId writtenRoot = load(asWritten, workspace, a);
  const check::CheckedProgram* written = asWritten.check(writtenRoot);
  std::vector<search::FoundMapping> edits;
  for (const auto& f : found)
    for (std::size_t r = 0; written != nullptr && r < written->runs.size(); ++r)
      for (const auto& ph : written->runs[r].phases)
        if (written->runs[r].name == f.run && ph.name == f.phase->name) edits.push_back({f.run, f.phase, f.candidate, &ph});
  if (written == nullptr || edits.size() != found.size())
    return {nullptr, "the script's phases do not check again as written"};
  search::ScriptEdit edit = search::putFoundMappings(asWritten.sources(), writtenRoot, *written, edits);
  if (!edit.ok) return {nullptr, edit.problem};
  Json changes = Json::object();
  changes[a.document.uri] = Json::array({Json{{"range", workspace.range(a.text(), 0, a.text().size())}, {"newText", edit.text}}});
  return {Json{{"changes", std::move(changes)}}, {}};
}

}  // namespace ipu::lsp
