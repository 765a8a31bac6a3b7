// The emulator's file format for named tensors: checkpoints, exported weights
// and gradients (docs/emulator.md, "Files"). A text header a person or a
// ten-line Python reader can parse, then raw little-endian float32 data:
//
//   IPU-TENSORS 1
//   meta phase short
//   tensor embedding.word 1000 64 0        name rows cols offset (in floats)
//   ...
//   end
//   <data>
//
// Files are written to a temporary name and renamed into place, so a reader
// (or a run interrupted while saving) never sees half a file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/numerics.h"

namespace ipu::emu {

struct TensorFile {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<std::pair<std::string, Mat>> tensors;

  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key, const std::string& fallback = "") const;
  const Mat* find(const std::string& name) const;
};

Expected<bool> writeTensorFile(const std::string& path, const TensorFile& file);
Expected<TensorFile> readTensorFile(const std::string& path);

}  // namespace ipu::emu
