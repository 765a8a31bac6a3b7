// Files the CLI writes (formatted scripts, calibrations, timelines) go
// through files::writeFileSafely (runtime/files/safe_write.h): replaced whole
// or not at all, keeping the file's mode, owner and links, refusing
// read-only files.
#pragma once

#include <string>

namespace ipu::cli {

// False (with `error` saying why) when the file could not be written.
bool replaceFile(const std::string& path, const std::string& text, std::string& error);

}  // namespace ipu::cli
