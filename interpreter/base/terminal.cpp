#include "interpreter/base/terminal.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include <rang.hpp>

namespace ipu::base {

namespace {
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}
bool envTruthy(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
}  // namespace

bool shouldColor(ColorMode mode, int fd) {
  if (envSet("NO_COLOR")) return false;
  if (mode == ColorMode::Never) return false;
  if (mode == ColorMode::Always) return true;
  if (envTruthy("CLICOLOR_FORCE") || envTruthy("FORCE_COLOR")) return true;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  return ::isatty(fd) == 1;
}

void Painter::put(std::ostream& os, Style style, const std::string& text) const {
  if (!color_) {
    os << text;
    return;
  }
  // We have decided to colour; rang must not second-guess with its own tty test
  // (the target may be a string stream that ends up on a terminal).
  rang::setControlMode(rang::control::Force);
  switch (style) {
    case Style::Error: os << rang::style::bold << rang::fg::red; break;
    case Style::Warning: os << rang::style::bold << rang::fg::yellow; break;
    case Style::Note: os << rang::style::bold << rang::fg::cyan; break;
    case Style::Help: os << rang::style::bold << rang::fg::green; break;
    case Style::Bold: os << rang::style::bold; break;
    case Style::Dim: os << rang::style::dim; break;
    case Style::Good: os << rang::fg::green; break;
    case Style::Accent: os << rang::fg::blue << rang::style::bold; break;
    case Style::Code: os << rang::fg::magenta; break;
  }
  os << text << rang::style::reset;
}

std::string Painter::paint(Style style, const std::string& text) const {
  std::ostringstream os;
  put(os, style, text);
  return os.str();
}

}  // namespace ipu::base
