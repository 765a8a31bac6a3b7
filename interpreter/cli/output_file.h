// Files the CLI writes (formatted scripts, calibrations, timelines) are
// replaced whole or not at all: the text goes to a temporary file beside the
// target, which is renamed over it only once completely written. An
// interrupted or failed write never leaves a truncated file behind.
#pragma once

#include <string>

namespace ipu::cli {

// False (with `error` saying why) when the file could not be written.
bool replaceFile(const std::string& path, const std::string& text, std::string& error);

}  // namespace ipu::cli
