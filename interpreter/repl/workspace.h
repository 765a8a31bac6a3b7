// What an `ipu repl` session has built: the text of every item the user gave
// (declaration, let, import, run), in the order first given; a new
// definition of a name replaces the old one in place. Every change is checked
// together with the rest before it is accepted, so the workspace is always a
// script that checks, and it can be saved or planned like one.
//
// Each request is answered from a fresh Session over the workspace's text
// (checking the standard library and a few declarations takes milliseconds).
// Diagnostics about what was just typed are shown against that input
// (`<input>:1:12`), so the caret sits under the REPL line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/terminal.h"
#include "interpreter/session/session.h"

namespace ipu::repl {

struct Reply {
  bool ok = true;
  std::string out;     // for standard output
  std::string errors;  // rendered diagnostics and messages, for standard error
};

class Workspace {
 public:
  // Relative imports and `lua file` paths resolve against `directory`.
  explicit Workspace(std::string directory);

  // Declarations (any number, any kinds) or one expression, whose value is shown.
  Reply submit(const std::string& input, const base::Painter& painter);
  Reply typeOf(const std::string& expression, const base::Painter& painter);
  // Adds the items of a script (its relative imports resolve from its own directory).
  Reply load(const std::string& path, const base::Painter& painter);
  Reply doc(const std::string& name, const base::Painter& painter);

  enum class Report { Plan, Estimate, Memory };
  // `name` is a training, or a mapping: then the last training of the
  // workspace runs with that mapping instead of its own.
  Reply report(const std::string& name, Report kind, const base::Painter& painter);

  // A plan of one training for `:run`, with the session that made it (its
  // hooks run during the run). Null plan (and `reply` says why) on failure.
  struct Planned {
    std::unique_ptr<session::Session> session;
    const ir::ExecutionPlan* plan = nullptr;
    std::unique_ptr<ir::ExecutionPlan> variantPlan;  // a training with another mapping: `plan` points here
    const cost::Estimate* estimate = nullptr;  // when asked for
    std::string description;  // "training `t`" or "training `t` with mapping `m8`"
    Reply reply;
    base::FileId root = base::kNoFile;  // the workspace's text in `session`
    std::size_t inputStart = 0;
  };
  // `purpose` Run (`:run`): what the emulator cannot execute is an error.
  Planned planFor(const std::string& name, const base::Painter& painter, bool estimate = false,
                  session::Purpose purpose = session::Purpose::Estimate);
  // The diagnostics left in a planned session (by a run), rendered against
  // `<session>` as every other diagnostic of the REPL.
  static std::string diagnostics(const Planned& planned, const base::Painter& painter);

  std::string text() const;                       // the workspace as a script
  const std::vector<std::string>& names() const { return names_; }  // visible names, for completion
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string key;   // the name it defines, or "import ...", "run ..."
    std::string kind;  // "mapping", "let", "import", "run", ...
    std::string text;
  };
  struct Checked {
    std::unique_ptr<session::Session> session;
    base::FileId root = base::kNoFile;
    std::size_t inputStart = 0;   // where the typed text starts in the root file
    std::string input;
  };
  Checked compose(const std::vector<Entry>& entries, const std::string& extra, const std::string& input) const;
  std::string render(const Checked& c, const base::Painter& painter) const;
  static std::string renderDiagnostics(session::Session& session, base::FileId root, std::size_t inputStart,
                                       const std::string& input, const base::Painter& painter);
  const check::Value* lookup(Checked& c, const std::string& name) const;
  Reply definitions(const std::string& input, const std::vector<Entry>& items, const base::Painter& painter);
  Reply expression(const std::string& input, const base::Painter& painter, bool typeOnly);
  std::string show(const session::Snapshot::Evaluation& e) const;
  // The workspace's text checked, to ask about (session/queries.h).
  std::shared_ptr<const session::Snapshot> snapshot() const;
  void refreshNames(Checked& c);

  std::string directory_;
  std::vector<Entry> entries_;
  std::vector<std::string> names_;
};

}  // namespace ipu::repl
