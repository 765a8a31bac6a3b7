// The emulator's file format for named tensors: checkpoints, exported weights
// and gradients (docs/emulator.md, "Files"). A text header a person or a
// ten-line Python reader can parse, then raw little-endian float32 data:
//
//   IPU-TENSORS 1
//   meta phase short
//   tensor embedding.word 1000 64 0        name rows cols offset (in floats)
//   ...
//   checksum fnv1a64:0123456789abcdef      over every other header line and the data
//   end
//   <data>
//
// Files are written to a temporary name and renamed into place, so a reader
// (or a run interrupted while saving) never sees half a file; the checksum
// catches what happens to them afterwards (a flipped bit, a truncated copy):
// a file whose checksum does not match is refused, never trained on. Files
// are read through files::readRegularFile (a FIFO or device never blocks).
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
  bool checksummed = false;  // read: the file had a checksum, and it matched

  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key, const std::string& fallback = "") const;
  const Mat* find(const std::string& name) const;
};

Expected<bool> writeTensorFile(const std::string& path, const TensorFile& file);
Expected<TensorFile> readTensorFile(const std::string& path);

}  // namespace ipu::emu
