#include "interpreter/base/source.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

#include <algorithm>

namespace ipu::base {

FileText readSourceFile(const std::string& path, std::size_t maxBytes) {
  FileText out;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    out.status = errno == ENOENT || errno == ENOTDIR ? FileText::Status::Missing : FileText::Status::Unreadable;
    out.problem = std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.status = FileText::Status::NotAFile;
    out.problem = S_ISDIR(st.st_mode)                          ? "a directory"
                  : S_ISFIFO(st.st_mode)                       ? "a pipe"
                  : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                               : "not a regular file";
    return out;
  }
  out.bytes = static_cast<std::uint64_t>(st.st_size);
  if (out.bytes > maxBytes) {
    out.status = FileText::Status::TooLarge;
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.status = FileText::Status::Unreadable;
    out.problem = std::strerror(errno);
    return out;
  }
  // Read at most one byte more than allowed: the file may have grown.
  out.text.resize(maxBytes + 1);
  in.read(out.text.data(), static_cast<std::streamsize>(maxBytes + 1));
  if (in.bad()) {
    out.status = FileText::Status::Unreadable;
    out.problem = "read error";
    out.text.clear();
    return out;
  }
  out.text.resize(static_cast<std::size_t>(in.gcount()));
  if (out.text.size() > maxBytes) {
    out.status = FileText::Status::TooLarge;
    out.bytes = out.text.size();
    out.text.clear();
  }
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
