// A fuzz input that stands for a directory of files: sections each starting
// with a line `=== NAME`, written under a root (at most 16 files, names of
// letters, digits, `.`, `_`, `-` and `/`, never `..` or absolute). Shared by
// the run-directory and run-import fuzz targets.
#pragma once

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace ipu::fuzz {

inline bool safeSectionName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name.find("..") != std::string::npos || name[0] == '/') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '/')) return false;
  return true;
}

// Empties `root` and writes the input's sections into it as files; returns
// them by name.
inline std::map<std::string, std::string> writeSections(const std::string& text, const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root, ec);
  std::map<std::string, std::string> files;
  std::size_t at = text.rfind("=== ", 0) == 0 ? 0 : text.find("\n=== ");
  if (at != std::string::npos && at != 0) ++at;
  while (at != std::string::npos && at < text.size()) {
    const std::size_t nameEnd = text.find('\n', at);
    if (nameEnd == std::string::npos) break;
    const std::string name = text.substr(at + 4, nameEnd - at - 4);
    const std::size_t next = text.find("\n=== ", nameEnd);
    const std::size_t end = next == std::string::npos ? text.size() : next + 1;
    if (safeSectionName(name) && files.size() < 16) files[name] = text.substr(nameEnd + 1, end - nameEnd - 1);
    at = next == std::string::npos ? std::string::npos : next + 1;
  }
  for (const auto& [name, content] : files) {
    const fs::path p = fs::path(root) / name;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << content;
  }
  return files;
}

}  // namespace ipu::fuzz
