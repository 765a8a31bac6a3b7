// Source files and locations.
//
// Every AST node and every diagnostic carries a `Span`: a file id plus a byte
// range. Line and column are computed on demand from the file's line table, so
// spans stay two words wide and survive copying into the plan. Files live in a
// `SourceMap` owned by the session; the REPL adds one file per input line, the
// CLI one per script and one per imported module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ipu::base {

using FileId = std::uint32_t;
inline constexpr FileId kNoFile = 0xffffffffu;

struct Span {
  FileId file = kNoFile;
  std::uint32_t begin = 0;  // byte offset of the first character
  std::uint32_t end = 0;    // byte offset one past the last character
  bool valid() const { return file != kNoFile; }
  // The smallest span covering both (same file assumed; otherwise `a`).
  static Span cover(const Span& a, const Span& b);
};

// 1-based line and column; the column counts characters (UTF-8 code points), as
// GNU-style `file:line:col` and editors expect.
struct LineCol {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

class SourceFile {
 public:
  SourceFile(std::string path, std::string text);
  const std::string& path() const { return path_; }
  const std::string& text() const { return text_; }
  LineCol lineCol(std::uint32_t offset) const;
  std::string_view lineText(std::uint32_t line) const;  // without the newline
  std::uint32_t lineCount() const { return static_cast<std::uint32_t>(lineStarts_.size()); }
  std::uint32_t lineStart(std::uint32_t line) const;     // byte offset of 1-based line

 private:
  std::string path_;
  std::string text_;
  std::vector<std::uint32_t> lineStarts_;
};

// The largest file the front end reads (scripts, modules, Lua hooks).
inline constexpr std::size_t kMaxSourceBytes = 8u << 20;

// Reading a whole source file safely: only regular files (a device, a FIFO or
// a directory would never end or means nothing), at most `maxBytes`.
struct FileText {
  enum class Status { Ok, Missing, NotAFile, TooLarge, Unreadable } status = Status::Ok;
  std::string text;
  std::string problem;      // why not, for a message: "No such file or directory", "a directory", ...
  std::uint64_t bytes = 0;  // the file's size (TooLarge)
};
FileText readSourceFile(const std::string& path, std::size_t maxBytes = kMaxSourceBytes);

// Copying a SourceMap shares its files (they are immutable): a session starts
// as a copy of the prelude's map, so the standard library keeps the same ids
// (and its spans stay valid) in every session.
class SourceMap {
 public:
  FileId add(std::string path, std::string text);
  const SourceFile& file(FileId id) const { return *files_.at(id); }
  const SourceFile* find(FileId id) const;
  std::size_t size() const { return files_.size(); }

 private:
  std::vector<std::shared_ptr<const SourceFile>> files_;
};

}  // namespace ipu::base
