#include "interpreter/lsp/standard_library_files.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

#include "interpreter/check/stdlib_files.h"
#include "interpreter/lsp/uri.h"
#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"

namespace ipu::lsp {

namespace fs = std::filesystem;

namespace {

// FNV-1a over every module's name and text: the library's version.
std::string libraryHash() {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](const char* s) {
    for (; *s != '\0'; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  for (const auto& f : check::stdlibFiles()) {
    mix(f.module);
    mix(f.text);
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

const char* moduleText(const std::string& standardPath) {
  for (const auto& f : check::stdlibFiles())
    if (standardPath == std::string(f.module) + ".ipu") return f.text;
  return nullptr;
}

}  // namespace

StandardLibraryFiles::StandardLibraryFiles(std::string directory)
    : directory_(directory.empty() ? defaultDirectory() : std::move(directory)) {}

std::string StandardLibraryFiles::defaultDirectory() {
  const std::string name = "stdlib-" + libraryHash();
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return (fs::path(xdg) / "ipu" / name).string();
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/')
    return (fs::path(home) / ".cache" / "ipu" / name).string();
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  return ((ec ? fs::path("/tmp") : tmp) / ("ipu-" + std::to_string(::getuid())) / name).string();
}

std::optional<std::string> StandardLibraryFiles::uriOf(const std::string& standardPath) {
  const char* text = moduleText(standardPath);
  if (text == nullptr) return std::nullopt;
  const fs::path file = fs::path(directory_) / standardPath;
  files::ReadResult existing = files::readRegularFile(file.string(), 16u << 20);
  if (existing.status != files::ReadResult::Status::Ok || existing.text != text) {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    if (existing.status == files::ReadResult::Status::Ok) ::chmod(file.c_str(), 0644);  // ours, to replace
    std::string error;
    if (!files::writeFileSafely(file.string(), text, error)) {
      problem_ = error;
      return std::nullopt;
    }
    // Read-only: the standard library is shown, not edited.
    ::chmod(file.c_str(), 0444);
  }
  return fileUriOf(file.string());
}

std::optional<std::string> StandardLibraryFiles::standardPathOf(const std::string& uri) const {
  auto path = pathOfFileUri(uri);
  if (!path) return std::nullopt;
  const std::string prefix = directory_ + "/";
  if (path->compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::string rest = path->substr(prefix.size());
  if (moduleText(rest) == nullptr) return std::nullopt;
  return rest;
}

}  // namespace ipu::lsp
