// Reading a command's words: flags, `--name VALUE` or `--name=VALUE`, and the
// positional words (files, ids). Every command parses its own options with
// it, so they read alike and their mistakes are reported alike.
#pragma once

#include <string>
#include <vector>

#include "interpreter/base/terminal.h"

namespace ipu::cli {

class ArgumentReader {
 public:
  explicit ArgumentReader(const std::vector<std::string>& args) : args_(args) {}

  // Moves to the next word; false after the last.
  bool next() { return ++at_ < args_.size(); }
  const std::string& word() const { return args_[at_]; }
  // The current word's index in the arguments.
  std::size_t at() const { return at_; }
  // `-x` or `--name...`: an option (a lone `-` is a positional word).
  bool isOption() const { return word().size() > 1 && word()[0] == '-'; }

  bool flag(const char* name) const { return word() == name; }
  // True when the word is `name`, `alias` (if given) or `name=...`; `value`
  // then receives the value, the next word for the spaced form, empty when
  // there is none (the caller says what it needs).
  bool value(const char* name, std::string& value, const char* alias = nullptr);
  // The word after the current one, for an option with a second value
  // (`--export-steps N DIR`); null after the last word. `skip` moves past it.
  const std::string* following() const { return at_ + 1 < args_.size() ? &args_[at_ + 1] : nullptr; }
  void skip() { ++at_; }

 private:
  const std::vector<std::string>& args_;
  std::size_t at_ = static_cast<std::size_t>(-1);
};

// Prints `ipu COMMAND: message` and where to look; returns kUsage (2).
int usage(const std::string& command, const std::string& message);

// `--color auto|always|never`; false for any other value.
bool parseColor(const std::string& value, base::ColorMode& mode);

}  // namespace ipu::cli
