#include "interpreter/base/source.h"

#include <algorithm>

#include "runtime/files/regular_file.h"

namespace ipu::base {

FileText readSourceFile(const std::string& path, std::size_t maxBytes) {
  // One reader for every file the tool is given (runtime/files): regular
  // files only, opened without blocking, at most `maxBytes`.
  files::ReadResult r = files::readRegularFile(path, maxBytes);
  FileText out;
  using S = files::ReadResult::Status;
  out.status = r.status == S::Ok          ? FileText::Status::Ok
               : r.status == S::Missing   ? FileText::Status::Missing
               : r.status == S::NotAFile  ? FileText::Status::NotAFile
               : r.status == S::TooLarge  ? FileText::Status::TooLarge
                                          : FileText::Status::Unreadable;
  out.text = std::move(r.text);
  out.problem = std::move(r.problem);
  out.bytes = r.bytes;
  return out;
}

Span Span::cover(const Span& a, const Span& b) {
  if (!a.valid()) return b;
  if (!b.valid() || a.file != b.file) return a;
  return Span{a.file, std::min(a.begin, b.begin), std::max(a.end, b.end)};
}

SourceFile::SourceFile(std::string path, std::string text)
    : path_(std::move(path)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (std::uint32_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
}

LineCol SourceFile::lineCol(std::uint32_t offset) const {
  offset = std::min<std::uint32_t>(offset, static_cast<std::uint32_t>(text_.size()));
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  std::uint32_t line = static_cast<std::uint32_t>(it - lineStarts_.begin());
  std::uint32_t start = lineStarts_[line - 1];
  std::uint32_t column = 1;
  for (std::uint32_t i = start; i < offset; ++i)
    if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;  // count code points
  return LineCol{line, column};
}

std::uint32_t SourceFile::lineStart(std::uint32_t line) const {
  if (line == 0 || line > lineStarts_.size()) return static_cast<std::uint32_t>(text_.size());
  return lineStarts_[line - 1];
}

std::string_view SourceFile::lineText(std::uint32_t line) const {
  if (line == 0 || line > lineStarts_.size()) return {};
  std::uint32_t start = lineStarts_[line - 1];
  std::uint32_t end = line < lineStarts_.size() ? lineStarts_[line] : static_cast<std::uint32_t>(text_.size());
  std::string_view view(text_);
  view = view.substr(start, end - start);
  while (!view.empty() && (view.back() == '\n' || view.back() == '\r')) view.remove_suffix(1);
  return view;
}

FileId SourceMap::add(std::string path, std::string text) {
  files_.push_back(std::make_shared<const SourceFile>(std::move(path), std::move(text)));
  return static_cast<FileId>(files_.size() - 1);
}

const SourceFile* SourceMap::find(FileId id) const {
  return id < files_.size() ? files_[id].get() : nullptr;
}

}  // namespace ipu::base
