// Positions as the protocol counts them, and as the session does.
//
// The protocol: a 0-based line, where \n, \r\n and \r each end a line, and a
// 0-based character offset within it in the negotiated encoding: UTF-16 code
// units unless the client offers UTF-8 or UTF-32 (LSP 3.17 positionEncoding).
// The session: a 1-based line ended by \n only and a 1-based column counting
// code points (queries.h). The two meet at byte offsets into the UTF-8 text,
// which is how every conversion here goes.
//
// Bytes that are not UTF-8 count as one character each, in every encoding,
// both ways, so any text converts without loss; a position past the end of a
// line means the line's end, and one past the last line the text's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "interpreter/base/source.h"

namespace ipu::lsp {

enum class PositionEncoding { Utf16, Utf8, Utf32 };
const char* nameOf(PositionEncoding encoding);  // "utf-16", "utf-8", "utf-32"

struct Position {
  std::uint32_t line = 0;
  std::uint32_t character = 0;
  bool operator==(const Position& o) const { return line == o.line && character == o.character; }
  bool operator<(const Position& o) const { return line != o.line ? line < o.line : character < o.character; }
};

struct Range {
  Position start, end;
  bool operator==(const Range& o) const { return start == o.start && end == o.end; }
};

// The lines of one text, for converting positions both ways. It keeps a view
// of the text: the text must outlive it and not change.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text);
  std::size_t offsetOf(Position p, PositionEncoding encoding) const;
  Position positionOf(std::size_t offset, PositionEncoding encoding) const;
  Range rangeOf(std::size_t begin, std::size_t end, PositionEncoding encoding) const {
    return Range{positionOf(begin, encoding), positionOf(end, encoding)};
  }
  // The 0-based line of a byte offset.
  std::uint32_t lineOf(std::size_t offset) const;
  std::uint32_t lineCount() const { return static_cast<std::uint32_t>(lineStarts_.size()); }
  // Where line `line` (0-based) starts, and where its text ends (before its line break).
  std::size_t lineStart(std::uint32_t line) const;
  std::size_t lineEnd(std::uint32_t line) const;

 private:
  std::string_view text_;
  std::vector<std::size_t> lineStarts_;
  std::vector<bool> asciiLine_;  // a line of ASCII only converts in constant time
};

// The session's line and column (1-based, code points) of a byte offset.
base::LineCol sessionLineCol(std::string_view text, std::size_t offset);

// The length in bytes of the character starting at `offset` (1 for a byte
// that does not start valid UTF-8), and its width in `encoding`'s units.
std::size_t characterBytes(std::string_view text, std::size_t offset);
std::uint32_t characterUnits(std::string_view text, std::size_t offset, PositionEncoding encoding);

}  // namespace ipu::lsp
