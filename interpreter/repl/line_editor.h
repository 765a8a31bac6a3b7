// Line editing for the REPL on a terminal, with libedit (BSD licence, in
// Debian): emacs key bindings, a history kept in a file across sessions, Tab
// completion, and Ctrl-C that abandons the line being typed. Only this file
// knows libedit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ipu::repl {

class LineEditor {
 public:
  // Candidates that complete `word` (the text before the cursor back to the
  // last separator; `line` is the whole line up to the cursor).
  using Completer = std::function<std::vector<std::string>(const std::string& line, const std::string& word)>;

  LineEditor(std::string historyPath, Completer completer);
  ~LineEditor();  // saves the history
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  enum class Status { Line, Interrupted, EndOfInput };
  Status read(const std::string& prompt, std::string& line);
  void remember(const std::string& entry);  // one history entry (may span lines)

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// Where the history lives: $IPU_HISTORY, else $XDG_STATE_HOME/ipu/repl_history,
// else ~/.local/state/ipu/repl_history.
std::string defaultHistoryPath();

}  // namespace ipu::repl
