// Formatting a script in the canonical style: what `ipu fmt` writes and the
// language server's formatting returns. The printer (printer.h) gives the
// text; this adds the promise that makes it safe to apply: the formatted text
// parses back to the same program, so a printer bug can never change what a
// script means (it is then not formatted at all).
#pragma once

#include <string>

#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"

namespace ipu::syntax {

struct Formatted {
  enum class Outcome {
    Formatted,           // `text` is the canonical text (may equal the input)
    SyntaxErrors,        // the script does not parse; the errors are in the diagnostics
    TooLarge,            // the formatted text would be over base::kMaxSourceBytes
    WouldChangeMeaning,  // the printer's text parses to another program: a bug to report
  };
  Outcome outcome = Outcome::SyntaxErrors;
  std::string text;
  std::size_t bytes = 0;  // the formatted text's size (also when TooLarge)
};

// Formats file `file` of `sources`; syntax errors go to `diags`.
Formatted formatSource(const base::SourceMap& sources, base::FileId file, base::Diagnostics& diags);

}  // namespace ipu::syntax
