#include "interpreter/syntax/format.h"

#include "interpreter/syntax/parser.h"
#include "interpreter/syntax/printer.h"

namespace ipu::syntax {

Formatted formatSource(const base::SourceMap& sources, base::FileId file, base::Diagnostics& diags) {
  Formatted out;
  std::unique_ptr<Program> program = parse(sources, file, diags);
  if (!program) return out;
  std::string formatted = print(*program, &sources);
  out.bytes = formatted.size();
  if (formatted.size() > base::kMaxSourceBytes) {  // it could not be read back (IPU0010)
    out.outcome = Formatted::Outcome::TooLarge;
    return out;
  }
  // Parsed again in a map of its own, so the caller's sources are untouched.
  base::SourceMap again;
  base::FileId id = again.add(sources.file(file).path(), formatted);
  base::Diagnostics scratch;
  auto reparsed = parse(again, id, scratch);
  if (!reparsed || toSExpr(*reparsed) != toSExpr(*program)) {
    out.outcome = Formatted::Outcome::WouldChangeMeaning;
    return out;
  }
  out.outcome = Formatted::Outcome::Formatted;
  out.text = std::move(formatted);
  return out;
}

}  // namespace ipu::syntax
