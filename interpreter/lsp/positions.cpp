#include "interpreter/lsp/positions.h"

#include <algorithm>

namespace ipu::lsp {

const char* nameOf(PositionEncoding encoding) {
  switch (encoding) {
    case PositionEncoding::Utf16: return "utf-16";
    case PositionEncoding::Utf8: return "utf-8";
    case PositionEncoding::Utf32: return "utf-32";
  }
  return "utf-16";
}

std::size_t characterBytes(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(offset);
  std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || offset + n > text.size()) return 1;
  for (std::size_t i = 1; i < n; ++i)
    if ((byte(offset + i) & 0xC0) != 0x80) return 1;
  // Overlong forms and surrogates are not UTF-8 either: one character per byte.
  if (n == 2 && lead < 0xC2) return 1;
  if (n == 3) {
    const unsigned char second = byte(offset + 1);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second >= 0xA0)) return 1;
  }
  if (n == 4) {
    const unsigned char second = byte(offset + 1);
    if (lead > 0xF4 || (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second >= 0x90)) return 1;
  }
  return n;
}

std::uint32_t characterUnits(std::string_view text, std::size_t offset, PositionEncoding encoding) {
  const std::size_t bytes = characterBytes(text, offset);
  switch (encoding) {
    case PositionEncoding::Utf8: return static_cast<std::uint32_t>(bytes);
    case PositionEncoding::Utf32: return 1;
    case PositionEncoding::Utf16: return bytes == 4 ? 2 : 1;  // beyond the BMP: a surrogate pair
  }
  return 1;
}

LineIndex::LineIndex(std::string_view text) : text_(text) {
  lineStarts_.push_back(0);
  bool ascii = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lineStarts_.push_back(i + 1);
      asciiLine_.push_back(ascii);
      ascii = true;
    } else if (text[i] == '\n') {
      lineStarts_.push_back(i + 1);
      asciiLine_.push_back(ascii);
      ascii = true;
    } else if (static_cast<unsigned char>(text[i]) >= 0x80) {
      ascii = false;
    }
  }
  asciiLine_.push_back(ascii);
}

std::size_t LineIndex::lineStart(std::uint32_t line) const {
  return line < lineStarts_.size() ? lineStarts_[line] : text_.size();
}

std::size_t LineIndex::lineEnd(std::uint32_t line) const {
  if (line >= lineStarts_.size()) return text_.size();
  std::size_t end = line + 1 < lineStarts_.size() ? lineStarts_[line + 1] : text_.size();
  if (end > lineStarts_[line] && line + 1 < lineStarts_.size()) {
    --end;  // the \n or lone \r
    if (text_[end] == '\n' && end > lineStarts_[line] && text_[end - 1] == '\r') --end;
  }
  return end;
}

std::uint32_t LineIndex::lineOf(std::size_t offset) const {
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), std::min(offset, text_.size()));
  return static_cast<std::uint32_t>(it - lineStarts_.begin()) - 1;
}

std::size_t LineIndex::offsetOf(Position p, PositionEncoding encoding) const {
  if (p.line >= lineStarts_.size()) return text_.size();
  std::size_t offset = lineStarts_[p.line];
  const std::size_t end = lineEnd(p.line);
  if (asciiLine_[p.line]) return std::min<std::size_t>(offset + p.character, end);
  std::uint32_t units = 0;
  while (offset < end) {
    const std::uint32_t w = characterUnits(text_, offset, encoding);
    // A position inside a character (half a surrogate pair, a byte inside a
    // UTF-8 sequence) means the character's start.
    if (units + w > p.character) break;
    units += w;
    offset += characterBytes(text_, offset);
  }
  return offset;
}

Position LineIndex::positionOf(std::size_t offset, PositionEncoding encoding) const {
  offset = std::min(offset, text_.size());
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  const std::uint32_t line = static_cast<std::uint32_t>(it - lineStarts_.begin()) - 1;
  // An offset inside a line break (between \r and \n) is the end of its line.
  const std::size_t stop = std::min(offset, lineEnd(line));
  if (asciiLine_[line]) return Position{line, static_cast<std::uint32_t>(stop - lineStarts_[line])};
  std::uint32_t units = 0;
  for (std::size_t i = lineStarts_[line]; i < stop;) {
    const std::size_t bytes = characterBytes(text_, i);
    if (i + bytes > stop) break;  // an offset inside a character: its start
    units += characterUnits(text_, i, encoding);
    i += bytes;
  }
  return Position{line, units};
}

base::LineCol sessionLineCol(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  base::LineCol lc{1, 1};
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lc.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++lc.column;  // a code point starts here, as SourceFile::lineCol counts them
    }
  }
  return lc;
}

}  // namespace ipu::lsp
