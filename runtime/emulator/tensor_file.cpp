#include "runtime/emulator/tensor_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ipu::emu {

void TensorFile::set(const std::string& key, const std::string& value) {
  for (auto& kv : meta)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  meta.emplace_back(key, value);
}

std::string TensorFile::get(const std::string& key, const std::string& fallback) const {
  for (const auto& kv : meta)
    if (kv.first == key) return kv.second;
  return fallback;
}

const Mat* TensorFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.first == name) return &t.second;
  return nullptr;
}

Expected<bool> writeTensorFile(const std::string& path, const TensorFile& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  std::ostringstream header;
  header << "IPU-TENSORS 1\n";
  for (const auto& [k, v] : file.meta) header << "meta " << k << ' ' << v << '\n';
  long long offset = 0;
  for (const auto& [name, m] : file.tensors) {
    header << "tensor " << name << ' ' << m.rows() << ' ' << m.cols() << ' ' << offset << '\n';
    offset += static_cast<long long>(m.size());
  }
  header << "end\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Error{code::kIo, "cannot write `" + tmp + "`", "check that the directory exists and is writable", {}};
    const std::string h = header.str();
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    static_assert(sizeof(float) == 4, "float32 data");
    for (const auto& t : file.tensors)
      out.write(reinterpret_cast<const char*>(t.second.data()), static_cast<std::streamsize>(t.second.size() * 4));
    out.flush();
    if (!out) return Error{code::kIo, "writing `" + tmp + "` failed", "check the free disk space", {}};
  }
  fs::rename(tmp, path, ec);
  if (ec) return Error{code::kIo, "cannot rename `" + tmp + "` to `" + path + "`: " + ec.message(), "", {}};
  return true;
}

Expected<TensorFile> readTensorFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{code::kCheckpoint, "cannot read `" + path + "`", "check the path", {}};
  auto bad = [&](const std::string& why) {
    return Error{code::kCheckpoint, "`" + path + "` is not a valid tensor file: " + why, "the file may be damaged; use an earlier checkpoint", {}};
  };
  std::string line;
  if (!std::getline(in, line) || line != "IPU-TENSORS 1") return bad("missing the `IPU-TENSORS 1` header");
  TensorFile f;
  struct Entry {
    std::string name;
    long long rows, cols, offset;
  };
  std::vector<Entry> entries;
  bool ended = false;
  while (std::getline(in, line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "meta") {
      std::string key, value;
      ls >> key;
      std::getline(ls, value);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      f.meta.emplace_back(key, value);
    } else if (kind == "tensor") {
      Entry e;
      if (!(ls >> e.name >> e.rows >> e.cols >> e.offset) || e.rows < 0 || e.cols < 0 || e.offset < 0) return bad("a bad tensor line");
      entries.push_back(e);
    } else {
      return bad("an unknown line `" + line + "`");
    }
  }
  if (!ended) return bad("no `end` line");
  const std::streampos dataStart = in.tellg();
  in.seekg(0, std::ios::end);
  const long long dataFloats = static_cast<long long>(in.tellg() - dataStart) / 4;
  for (const auto& e : entries) {
    if (e.rows * e.cols > dataFloats || e.offset > dataFloats - e.rows * e.cols) return bad("tensor `" + e.name + "` runs past the end");
    Mat m(e.rows, e.cols);
    in.seekg(dataStart + static_cast<std::streamoff>(e.offset * 4));
    in.read(reinterpret_cast<char*>(m.data()), static_cast<std::streamsize>(m.size() * 4));
    if (!in) return bad("tensor `" + e.name + "` could not be read");
    f.tensors.emplace_back(e.name, std::move(m));
  }
  return f;
}

}  // namespace ipu::emu
