#include "runtime/emulator/tensor_file.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"

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

namespace {

// FNV-1a, 64 bits: no dependency, and any change of a byte changes it.
struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(const char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(p[i]);
      h *= 0x100000001b3ull;
    }
  }
  void add(const std::string& s) { add(s.data(), s.size()); }
  std::string hex() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

}  // namespace

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
  static_assert(sizeof(float) == 4, "float32 data");
  std::string blob = header.str();
  const std::size_t headerBytes = blob.size();
  std::string data;
  data.reserve(static_cast<std::size_t>(offset) * 4);
  for (const auto& t : file.tensors)
    data.append(reinterpret_cast<const char*>(t.second.data()), static_cast<std::size_t>(t.second.size()) * 4);
  Fnv1a sum;
  sum.add(blob.data(), headerBytes);
  sum.add(data);
  blob += "checksum " + sum.hex() + "\nend\n";
  blob += data;
  std::string error;
  if (!files::writeFileSafely(path, blob, error))
    return Error{code::kIo, error, "check that the directory is writable and the disk has space", {}};
  return true;
}

Expected<TensorFile> readTensorFile(const std::string& path) {
  files::ReadResult read = files::readRegularFile(path, std::uint64_t{1} << 40);
  if (!read.ok())
    return Error{code::kCheckpoint, read.describe(path), "check the path; a checkpoint is a file `ipu run` wrote", {}};
  auto bad = [&](const std::string& why) {
    return Error{code::kCheckpoint, "`" + path + "` is not a valid tensor file: " + why, "the file may be damaged; delete it to use an earlier checkpoint, or start a new run", {}};
  };
  const std::string& text = read.text;
  std::size_t pos = 0;
  auto nextLine = [&](std::string& line) {
    if (pos >= text.size()) return false;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return false;  // a header line always ends with a newline
    line.assign(text, pos, nl - pos);
    pos = nl + 1;
    return true;
  };
  std::string line;
  if (!nextLine(line) || line != "IPU-TENSORS 1") return bad("missing the `IPU-TENSORS 1` header");
  Fnv1a sum;
  sum.add(line);
  sum.add("\n", 1);
  TensorFile f;
  struct Entry {
    std::string name;
    long long rows, cols, offset;
  };
  std::vector<Entry> entries;
  std::string checksum;
  bool ended = false;
  while (nextLine(line)) {
    if (line == "end") {
      ended = true;
      break;
    }
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "checksum") {
      ls >> checksum;
      continue;
    }
    sum.add(line);
    sum.add("\n", 1);
    if (kind == "meta") {
      std::string key, value;
      ls >> key;
      std::getline(ls, value);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      f.meta.emplace_back(key, value);
    } else if (kind == "tensor") {
      Entry e;
      std::string rest;
      if (!(ls >> e.name >> e.rows >> e.cols >> e.offset) || (ls >> rest) || e.rows < 0 || e.cols < 0 ||
          e.offset < 0 || e.rows > (1LL << 31) || e.cols > (1LL << 31))
        return bad("a bad tensor line");
      entries.push_back(e);
    } else {
      return bad("an unknown line `" + line.substr(0, 60) + "`");
    }
  }
  if (!ended) return bad("no `end` line");
  const std::size_t dataStart = pos;
  const long long dataFloats = static_cast<long long>((text.size() - dataStart) / 4);
  if (!checksum.empty()) {
    sum.add(text.data() + dataStart, text.size() - dataStart);
    if (sum.hex() != checksum)
      return bad("its checksum does not match its content (changed or damaged since it was written)");
    f.checksummed = true;
  }
  for (const auto& e : entries) {
    if (e.rows * e.cols > dataFloats || e.offset > dataFloats - e.rows * e.cols) return bad("tensor `" + e.name + "` runs past the end");
    Mat m(e.rows, e.cols);
    std::memcpy(m.data(), text.data() + dataStart + static_cast<std::size_t>(e.offset) * 4,
                static_cast<std::size_t>(m.size()) * 4);
    f.tensors.emplace_back(e.name, std::move(m));
  }
  return f;
}

}  // namespace ipu::emu
