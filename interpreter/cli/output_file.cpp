#include "interpreter/cli/output_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

namespace ipu::cli {

bool replaceFile(const std::string& path, const std::string& text, std::string& error) {
  const std::string tmp = path + ".ipu-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      error = "cannot write `" + tmp + "`";
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    error = "cannot replace `" + path + "`: " + ec.message();
    return false;
  }
  return true;
}

}  // namespace ipu::cli
