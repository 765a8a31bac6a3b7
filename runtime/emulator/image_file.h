// Image datasets in files: the emulator's own simple format (docs/emulator.md,
// "Image files"), so a user can train a convolutional model on real pictures
// without a decoding library.
//
// Layout, all integers little-endian:
//   bytes 0-7    magic "IPUIMG1\n"
//   bytes 8-27   five uint32: channels, height, width, classes, count
//   then `count` records, each a uint32 label (< classes) followed by
//   channels * height * width uint8 pixels, channel-major then row-major.
// A file is accepted only if it is exactly that long and every label is in
// range; anything else is refused (IPU5011) with the byte offset and record
// where it goes wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/emulator/error.h"

namespace ipu::emu {

struct ImageSet {
  int channels = 0, height = 0, width = 0, classes = 0;
  std::vector<int> labels;               // per record
  std::vector<std::uint8_t> pixels;      // records' pixels back to back
  std::size_t count() const { return labels.size(); }
  std::size_t pixelsPerImage() const { return static_cast<std::size_t>(channels) * height * width; }
};

// Limits a file must respect (the emulator runs small models).
inline constexpr int kMaxImageChannels = 64;
inline constexpr int kMaxImageSide = 4096;
inline constexpr std::uint32_t kMaxImageClasses = 1u << 20;
inline constexpr std::uint64_t kMaxImageFileBytes = std::uint64_t{1} << 34;

// Parses the bytes of an image file (`name` is how messages call it).
Expected<std::shared_ptr<const ImageSet>> parseImageFile(const std::string& bytes, const std::string& name);
// Reads and parses the file at `path` (IPU5004 when it cannot be read at
// all); messages call it `name` (the path as the script gives it), or `path`.
Expected<std::shared_ptr<const ImageSet>> loadImageFile(const std::string& path, const std::string& name = "");
// The file's bytes for a set (what writeImageFile writes).
std::string encodeImageFile(const ImageSet& set);
// Writes a set atomically (files::writeFileSafely); IPU5009 on failure.
Expected<bool> writeImageFile(const std::string& path, const ImageSet& set);

}  // namespace ipu::emu
