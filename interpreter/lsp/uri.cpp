#include "interpreter/lsp/uri.h"

#include <cctype>
#include <filesystem>
#include <functional>

namespace ipu::lsp {

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

}  // namespace

std::optional<std::string> pathOfFileUri(std::string_view uri) {
  if (!startsWithNoCase(uri, "file://")) return std::nullopt;
  std::string_view rest = uri.substr(7);
  // An authority: empty or `localhost` names this machine; any other host is not ours to read.
  std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view host = rest.substr(0, slash);
  if (!host.empty() && (host.size() != 9 || !startsWithNoCase(host, "localhost"))) return std::nullopt;
  rest = rest.substr(slash);
  // A query or fragment is not part of the path.
  if (std::size_t cut = rest.find_first_of("?#"); cut != std::string_view::npos) rest = rest.substr(0, cut);
  std::string path;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%') {
      if (i + 2 >= rest.size()) return std::nullopt;  // `%` without two digits after it
      const int hi = hexValue(rest[i + 1]);
      const int lo = hexValue(rest[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      const char c = static_cast<char>(hi * 16 + lo);
      if (c == '\0') return std::nullopt;
      path += c;
      i += 2;
    } else {
      path += rest[i];
    }
  }
  if (path.empty() || path[0] != '/') return std::nullopt;
  return path;
}

std::string fileUriOf(const std::string& absolutePath) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : absolutePath) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string sessionPathOf(std::string_view uri) {
  if (auto path = pathOfFileUri(uri)) return *path;
  // A stand-in: a name of its own per URI, in the working directory, ending
  // in `.ipu` (as scripts do), never a file that is read.
  std::string name;
  for (char c : uri) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.size() > 80) name = name.substr(0, 60) + "_" + std::to_string(std::hash<std::string_view>{}(uri));
  std::error_code ec;
  std::filesystem::path cwd = std::filesystem::current_path(ec);
  return ((ec ? std::filesystem::path("/tmp") : cwd) / ("unsaved-" + name + ".ipu")).string();
}

}  // namespace ipu::lsp
