// When to colour output. NO_COLOR wins, then --color, then CLICOLOR_FORCE /
// FORCE_COLOR, then TERM=dumb, then isatty: the order no-color.org and the
// bixense standard agree on. rang does not read NO_COLOR, so the decision is
// made here and rang is only asked to emit codes once we have decided.
#pragma once

#include <ostream>
#include <string>

namespace ipu::base {

enum class ColorMode { Auto, Always, Never };

// Decide for one stream (1 = stdout, 2 = stderr).
bool shouldColor(ColorMode mode, int fd);

enum class Style { Error, Warning, Note, Help, Bold, Dim, Good, Accent, Code };

// Writes text in a style when colour is on, plain otherwise.
class Painter {
 public:
  explicit Painter(bool color) : color_(color) {}
  bool color() const { return color_; }
  void put(std::ostream& os, Style style, const std::string& text) const;
  std::string paint(Style style, const std::string& text) const;

 private:
  bool color_;
};

}  // namespace ipu::base
