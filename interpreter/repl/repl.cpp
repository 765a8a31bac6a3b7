#include "interpreter/repl/repl.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include "interpreter/check/schema.h"
#include "interpreter/check/modules.h"
#include "interpreter/repl/line_editor.h"
#include "interpreter/syntax/parser.h"
#include "runtime/files/safe_write.h"

namespace ipu::repl {

namespace fs = std::filesystem;
using base::Style;

namespace {

std::atomic<bool> gInterrupted{false};

void onInterrupt(int) { gInterrupted = true; }

struct Command {
  const char* name;
  const char* args;
  const char* help;
};

const Command kCommands[] = {
    {":plan", "NAME", "plan a training (or the last training with mapping NAME): placement and memory"},
    {":estimate", "NAME", "predict step time, throughput and time to train"},
    {":mem", "NAME", "the memory of every IPU, and whether it fits"},
    {":run", "NAME", "train it on the emulator (small models); Ctrl-C stops it"},
    {":load", "FILE", "add the declarations of a script"},
    {":save", "FILE", "write what has been declared as a script"},
    {":type", "EXPR", "the type of an expression"},
    {":doc", "NAME", "what a declaration, a kind (`mapping`) or a field (`mapping.replicas`) is"},
    {":help", "", "this list"},
    {":quit", "", "leave (also Ctrl-D)"},
};

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Whether the input goes on over the next line: declarations and expressions
// (and the expression of `:type`) while a bracket or a string is open. Other
// commands take names and paths, which are complete on one line.
bool continues(const std::string& buffer) {
  if (buffer[0] != ':') return syntax::isIncomplete(buffer);
  if (buffer.rfind(":type", 0) == 0 && buffer.size() > 5 && std::isspace(static_cast<unsigned char>(buffer[5])))
    return syntax::isIncomplete(buffer.substr(6));
  return false;
}

class Loop {
 public:
  Loop(const ReplOptions& o)
      : options_(o),
        out_(base::shouldColor(o.color, 1)),
        err_(base::shouldColor(o.color, 2)),
        workspace_(o.file.empty() ? fs::current_path().string()
                                  : fs::absolute(fs::path(o.file)).parent_path().string()) {}

  int run() {
    interactive_ = ::isatty(STDIN_FILENO) != 0;
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read in progress returns, so the line is abandoned
    struct sigaction previous {};
    if (interactive_) sigaction(SIGINT, &sa, &previous);

    if (!options_.file.empty()) {
      Reply r = workspace_.load(options_.file, out_);
      show(r);
      if (!r.ok && !interactive_) return 1;
    }
    int status = interactive_ ? interactiveLoop() : scriptLoop();
    if (interactive_) sigaction(SIGINT, &previous, nullptr);
    return status;
  }

 private:
  void show(const Reply& r) {
    if (!r.errors.empty()) std::cerr << r.errors << std::flush;
    if (!r.out.empty()) std::cout << r.out << std::flush;
  }

  // One complete input: a command or declarations/an expression. False to quit.
  bool handle(const std::string& input, bool& failed) {
    failed = false;
    std::string text = trim(input);
    if (text.empty()) return true;
    if (text[0] != ':') {
      Reply r = workspace_.submit(input, out_);
      show(r);
      failed = !r.ok;
      return true;
    }
    std::size_t space = text.find_first_of(" \t");
    std::string cmd = text.substr(0, space);
    std::string arg = space == std::string::npos ? "" : trim(text.substr(space));
    if (cmd == ":quit" || cmd == ":q" || cmd == ":exit") return false;
    Reply r;
    if (cmd == ":help" || cmd == ":h" || cmd == ":?") {
      r.out = help();
    } else if (cmd == ":plan") {
      r = workspace_.report(arg, Workspace::Report::Plan, out_);
    } else if (cmd == ":estimate") {
      r = workspace_.report(arg, Workspace::Report::Estimate, out_);
    } else if (cmd == ":mem") {
      r = workspace_.report(arg, Workspace::Report::Memory, out_);
    } else if (cmd == ":load") {
      r = arg.empty() ? Reply{false, "", "usage: :load FILE\n"} : workspace_.load(arg, out_);
    } else if (cmd == ":save") {
      r = save(arg);
    } else if (cmd == ":type") {
      r = workspace_.typeOf(arg, out_);
    } else if (cmd == ":doc") {
      r = workspace_.doc(arg, out_);
    } else if (cmd == ":run") {
      r = train(arg);
    } else {
      std::vector<std::string> names;
      for (const auto& c : kCommands) names.push_back(c.name);
      std::string dym = base::didYouMean(cmd, names);
      r = {false, "", "unknown command `" + cmd + "`" + (dym.empty() ? "" : "; " + dym) + " (:help lists them)\n"};
    }
    show(r);
    failed = !r.ok;
    return true;
  }

  std::string help() const {
    std::string s =
        "Declarations accumulate (a new one replaces an old one of the same name); an expression prints its value.\n"
        "Input continues over lines while a bracket or a string is open.\n\n";
    for (const auto& c : kCommands) {
      std::string head = std::string(c.name) + (c.args[0] ? std::string(" ") + c.args : "");
      s += "  " + head + std::string(head.size() < 16 ? 16 - head.size() : 1, ' ') + c.help + "\n";
    }
    s += "\nTry a variant of a mapping in one line, e.g. `mapping fewer = pod16 with { replicas: 2 }`, then\n"
       "`:estimate fewer`: it runs the last training declared with that mapping.\n";
    return s;
  }

  Reply save(const std::string& path) {
    if (path.empty()) return {false, "", "usage: :save FILE\n"};
    std::error_code dirError;
    if (fs::is_directory(path, dirError))
      return {false, "", "ipu repl: `" + path + "` is a directory; name a file, e.g. `:save " +
                             (fs::path(path) / "session.ipu").string() + "`\n"};
    // Through the one safe writer: mode, owner and links kept, read-only refused.
    std::string error;
    if (!files::writeFileSafely(path, workspace_.text(), error)) return {false, "", "ipu repl: " + error + "\n"};
    return {true, "saved " + std::to_string(workspace_.size()) + " declarations to " + path + "\n", ""};
  }

  Reply train(const std::string& name) {
    if (!options_.trainer) return {false, "", "ipu repl: training is not available here\n"};
    Workspace::Planned planned = workspace_.planFor(name, out_, /*estimate=*/false, session::Purpose::Run);
    if (!planned.reply.errors.empty()) std::cerr << planned.reply.errors << std::flush;
    if (planned.plan == nullptr || !planned.reply.ok) return {false, "", ""};
    gInterrupted = false;
    bool ok = options_.trainer(planned, gInterrupted);
    gInterrupted = false;
    return {ok, "", ""};
  }

  std::vector<std::string> complete(const std::string& line, const std::string& word) const {
    std::vector<std::string> candidates;
    const std::string trimmed = trim(line);
    if (!word.empty() && word[0] == ':' && trimmed == word) {
      for (const auto& c : kCommands) candidates.emplace_back(c.name);
    } else if (word.rfind("\"", 0) == 0) {
      for (const auto& m : check::ModuleLoader::standardModuleNames()) candidates.push_back("\"" + m + "\"");
    } else {
      candidates = workspace_.names();
      for (const auto& k : syntax::keywords()) candidates.push_back(k);
      for (const check::Schema* s : check::allSchemas())
        for (const auto& f : s->fields) candidates.push_back(f.name);
    }
    std::vector<std::string> out;
    for (const auto& c : candidates)
      if (c.rfind(word, 0) == 0) out.push_back(c);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  int interactiveLoop() {
    LineEditor editor(options_.historyPath.empty() ? defaultHistoryPath() : options_.historyPath,
                      [this](const std::string& line, const std::string& word) { return complete(line, word); });
    std::cout << out_.paint(Style::Bold, "ipu repl") << out_.paint(Style::Dim,
                                                                   "  declarations accumulate, expressions print "
                                                                   "their value; :help for commands, Ctrl-D to leave")
              << "\n";
    std::string buffer;
    for (;;) {
      std::string line;
      gInterrupted = false;
      LineEditor::Status st = editor.read(buffer.empty() ? "ipu> " : "...> ", line);
      if (st == LineEditor::Status::Interrupted) {
        std::cout << "\n";
        buffer.clear();
        continue;
      }
      if (st == LineEditor::Status::EndOfInput) {
        std::cout << "\n";
        if (!buffer.empty()) {
          bool failed = false;
          editor.remember(buffer);
          handle(buffer, failed);
        }
        return 0;
      }
      buffer += buffer.empty() ? line : "\n" + line;
      if (continues(buffer)) continue;
      editor.remember(buffer);
      bool failed = false;
      bool go = handle(buffer, failed);
      buffer.clear();
      if (!go) return 0;
    }
  }

  int scriptLoop() {
    std::string buffer, line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      buffer += buffer.empty() ? line : "\n" + line;
      if (continues(buffer)) continue;
      bool failed = false;
      bool go = handle(buffer, failed);
      buffer.clear();
      if (failed) return 1;
      if (!go) return 0;
    }
    if (!trim(buffer).empty()) {
      // Input ended inside a bracket or a string: say so.
      bool failed = false;
      handle(buffer, failed);
      return 1;
    }
    return 0;
  }

  const ReplOptions& options_;
  base::Painter out_, err_;
  Workspace workspace_;
  bool interactive_ = false;
};

}  // namespace

int runRepl(const ReplOptions& options) {
  Loop loop(options);
  return loop.run();
}

}  // namespace ipu::repl
