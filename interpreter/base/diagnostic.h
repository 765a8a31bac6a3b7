// Diagnostics are values: a stable code, a severity, the span it is about, a
// message, an optional `help:` with the way out, and secondary notes. Every
// layer collects them into a `Diagnostics` list and returns; nothing is thrown
// across layers. Rendering (human or JSON) is separate, in render.h.
//
// Codes are stable and grouped by layer: IPU0xxx syntax, IPU1xxx check,
// IPU2xxx plan, IPU3xxx runtime, IPU4xxx hooks. Each layer lists its codes with
// a one-line title (see `CodeInfo`) so that docs/diagnostics.md can be checked
// against them by a test.
#pragma once

#include <string>
#include <vector>

#include "interpreter/base/source.h"

namespace ipu::base {

enum class Severity { Error, Warning, Note };

struct Note {
  Span span;          // may be invalid for a note without a location
  std::string message;
};

struct Diagnostic {
  std::string code;     // e.g. "IPU1001"
  Severity severity = Severity::Error;
  Span span;
  std::string message;  // lower case, no final period, code in backticks
  std::string help;     // how to fix it; empty when there is nothing useful to say
  std::vector<Note> notes;
  // Adds a note unless the same one is already there (a diagnostic reached
  // twice, e.g. once per layer, keeps one copy of its notes).
  void addNote(Note note);
};

struct CodeInfo {
  const char* code;
  const char* title;
};

class Diagnostics {
 public:
  Diagnostic& error(std::string code, Span span, std::string message, std::string help = {});
  Diagnostic& warning(std::string code, Span span, std::string message, std::string help = {});
  Diagnostic& add(Diagnostic d);
  void append(const Diagnostics& other);

  bool hasErrors() const { return errors_ > 0; }
  std::size_t errorCount() const { return errors_; }
  std::size_t warningCount() const;
  const std::vector<Diagnostic>& all() const { return items_; }
  // One diagnostic, to complete it after others were added (a help found later).
  Diagnostic& at(std::size_t index) { return items_.at(index); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); errors_ = 0; }
  // Moves the diagnostics from index `from` on into a list of their own.
  Diagnostics splitOff(std::size_t from);
  // Most tools stop after this many errors; beyond it, the rest are noise.
  static constexpr std::size_t kMaxErrors = 50;
  bool full() const { return errors_ >= kMaxErrors; }

 private:
  std::vector<Diagnostic> items_;
  std::size_t errors_ = 0;
};

// "did you mean" support: the closest candidates by edit distance, best first,
// only those close enough to be a plausible typo.
std::vector<std::string> closestMatches(const std::string& word,
                                        const std::vector<std::string>& candidates,
                                        std::size_t limit = 3);
// "did you mean `x`?" / "did you mean `x` or `y`?"; empty when nothing is close.
std::string didYouMean(const std::string& word, const std::vector<std::string>& candidates);
// The candidates a didYouMean() sentence in a help text names, best first
// (what a language server offers as fixes); empty when the help has none.
// Written beside didYouMean so that the sentence and its reader change together.
std::vector<std::string> didYouMeanCandidates(const std::string& help);

}  // namespace ipu::base
