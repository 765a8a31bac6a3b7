#include "interpreter/cli/output_file.h"

#include "runtime/files/safe_write.h"

namespace ipu::cli {

bool replaceFile(const std::string& path, const std::string& text, std::string& error) {
  return files::writeFileSafely(path, text, error);
}

}  // namespace ipu::cli
