#include "interpreter/lsp/formatting.h"

#include "interpreter/lsp/workspace.h"
#include "interpreter/syntax/format.h"

namespace ipu::lsp {

Json formatDocument(const Analysis& a, PositionEncoding encoding) {
  base::SourceMap sources;
  const base::FileId id = sources.add(a.document.path, a.text());
  base::Diagnostics diags;
  syntax::Formatted f = syntax::formatSource(sources, id, diags);
  if (f.outcome != syntax::Formatted::Outcome::Formatted) return nullptr;
  const std::string& before = a.text();
  const std::string& after = f.text;
  Json edits = Json::array();
  if (before == after) return edits;
  // The smallest middle that differs, cut at character boundaries.
  std::size_t prefix = 0;
  while (prefix < before.size() && prefix < after.size() && before[prefix] == after[prefix]) ++prefix;
  while (prefix > 0 && (static_cast<unsigned char>(before[prefix]) & 0xC0) == 0x80) --prefix;
  std::size_t suffix = 0;
  while (suffix < before.size() - prefix && suffix < after.size() - prefix &&
         before[before.size() - 1 - suffix] == after[after.size() - 1 - suffix])
    ++suffix;
  while (suffix > 0 && (static_cast<unsigned char>(before[before.size() - suffix]) & 0xC0) == 0x80) --suffix;
  // Never cut a \r\n in two: the protocol counts it as one line break.
  if (prefix > 0 && prefix < before.size() && before[prefix - 1] == '\r' && before[prefix] == '\n') --prefix;
  if (suffix > 0 && before.size() - suffix > 0 && before[before.size() - suffix] == '\n' &&
      before[before.size() - suffix - 1] == '\r')
    --suffix;
  const Range range = a.lines->rangeOf(prefix, before.size() - suffix, encoding);
  edits.push_back(Json{{"range", toJson(range)}, {"newText", after.substr(prefix, after.size() - suffix - prefix)}});
  return edits;
}

}  // namespace ipu::lsp
