// Fuzz target for store locations (`--store`, IPU_STORE): the bytes are a
// location. For a `postgresql://` URI, whatever libpq reads in it as the
// password (its user part, `?password=`, the key=value form) must never
// appear in the location as ipu prints it (store::printableLocation), and
// nothing is connected to. Any other location is classified as openStore
// does (refused with a reason, or an SQLite file), inside a scratch
// directory: a plain name is created there and removed; of other paths only
// those that must be refused (empty, `:memory:`, `file:`, another scheme)
// are given, and must be refused before anything is made. The promise: no location crashes, throws
// anything but a StoreError, or has its password printed.
//
// Run by ctest as `ipu_fuzz_store_uri_mutate` (tests/fuzz/mutate_main.cpp)
// for a few seconds on tests/fuzz/corpus_uri. See docs/fuzzing.md.
#include <libpq-fe.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "interpreter/store/run_store.h"
#include "interpreter/store/sql_connection.h"
#include "interpreter/store/sql_schema.h"

extern const char* const kFuzzTokens[] = {
    "postgresql://", "postgres://", "postgresq://", "file:", ":memory:", "user:", "secretpw@", "@", ":", "/", "?", "&",
    "=", "%", "%2", "%41", "password=", "?password=hunter22", "host=", "[", "]", "[::1]", "options=-c%20statement_timeout%3D5s",
    "connect_timeout=", "sslmode=disable", "dbname=", " password='p w' ", "\\", "'", nullptr};

namespace {
namespace fs = std::filesystem;

struct Scratch {
  std::string path = "/tmp/ipu-fuzz-uri-" + std::to_string(::getpid());
  Scratch() {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (::chdir(path.c_str()) != 0) std::abort();
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Scratch scratch;
  std::string location(reinterpret_cast<const char*>(data), size);
  const std::string::size_type nul = location.find('\0');
  if (nul != std::string::npos) location.resize(nul);  // a command line has no NUL
  const std::string shown = ipu::store::printableLocation(location);
  if (ipu::store::isPostgresLocation(location)) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(location.c_str(), &error);
    PQfreemem(error);
    for (PQconninfoOption* o = options; o != nullptr && o->keyword != nullptr; ++o) {
      if (std::string(o->keyword) != "password" || o->val == nullptr) continue;
      const std::string password = o->val;
      // Three bytes or more: a shorter one may be in the URI's other words.
      if (password.size() >= 3 && shown.find(password) != std::string::npos) {
        std::fprintf(stderr, "ipu fuzz: the password `%s` of `%s` is printed: `%s`\n", password.c_str(), location.c_str(),
                     shown.c_str());
        std::abort();
      }
    }
    PQconninfoFree(options);
    return 0;
  }
  // Created only as a plain name in the scratch directory.
  const bool plain = !location.empty() && location.find('/') == std::string::npos && location.size() < 100 &&
                     location != "." && location != "..";
  try {
    if (plain) {
      auto db = ipu::store::connectStore(location, ipu::store::OpenMode::Create);
      std::error_code ec;
      fs::remove(location, ec);
      fs::remove(location + "-wal", ec);
      fs::remove(location + "-shm", ec);
    } else if (location.empty() || location == ":memory:" || location.rfind("file:", 0) == 0 ||
               location.find("://") != std::string::npos) {
      // Refused before any file is looked at; a path elsewhere is not opened.
      (void)ipu::store::connectStore(location, ipu::store::OpenMode::Create);
      std::fprintf(stderr, "ipu fuzz: `%s` was not refused\n", location.c_str());
      std::abort();
    }
  } catch (const ipu::store::StoreError& e) {
    if (std::string(e.what()).empty()) std::abort();
  }
  return 0;
}
