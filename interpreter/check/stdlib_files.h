// The standard library, embedded at build time from stdlib/**/*.ipu by
// cmake/EmbedStdlib.cmake: `import "std/models/bert"` reads from here.
#pragma once

#include <vector>

namespace ipu::check {

struct StdlibFile {
  const char* module;  // "std/models/bert"
  const char* text;
};

const std::vector<StdlibFile>& stdlibFiles();

}  // namespace ipu::check
