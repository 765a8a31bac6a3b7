#include "runtime/emulator/image_file.h"

#include <algorithm>

#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"

namespace ipu::emu {

namespace {

constexpr char kMagic[] = "IPUIMG1\n";
constexpr std::size_t kMagicBytes = 8;
constexpr std::size_t kHeaderBytes = kMagicBytes + 5 * 4;

std::uint32_t readU32(const std::string& b, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(b[at + 3])) << 24;
}

void writeU32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

Error damaged(const std::string& name, std::uint64_t offset, const std::string& what) {
  return Error{code::kImageFile, "image file `" + name + "`, byte " + std::to_string(offset) + ": " + what,
               "image files hold the magic \"IPUIMG1\\n\", five little-endian uint32 (channels, height, width, classes, "
               "count), then per record a uint32 label and channels*height*width bytes (docs/emulator.md, \"Image files\")",
               {}};
}

}  // namespace

Expected<std::shared_ptr<const ImageSet>> parseImageFile(const std::string& b, const std::string& name) {
  if (b.size() < kMagicBytes || b.compare(0, kMagicBytes, kMagic, kMagicBytes) != 0)
    return damaged(name, 0, "it does not start with the magic \"IPUIMG1\\n\": not an image file of the emulator's format");
  if (b.size() < kHeaderBytes)
    return damaged(name, b.size(), "the header is truncated: it needs " + std::to_string(kHeaderBytes) + " bytes, the file has " + std::to_string(b.size()));
  const std::uint32_t channels = readU32(b, 8), height = readU32(b, 12), width = readU32(b, 16), classes = readU32(b, 20),
                      count = readU32(b, 24);
  if (channels < 1 || channels > static_cast<std::uint32_t>(kMaxImageChannels))
    return damaged(name, 8, "channels is " + std::to_string(channels) + ", not between 1 and " + std::to_string(kMaxImageChannels));
  if (height < 1 || height > static_cast<std::uint32_t>(kMaxImageSide))
    return damaged(name, 12, "height is " + std::to_string(height) + ", not between 1 and " + std::to_string(kMaxImageSide));
  if (width < 1 || width > static_cast<std::uint32_t>(kMaxImageSide))
    return damaged(name, 16, "width is " + std::to_string(width) + ", not between 1 and " + std::to_string(kMaxImageSide));
  if (classes < 2 || classes > kMaxImageClasses)
    return damaged(name, 20, "classes is " + std::to_string(classes) + ", not between 2 and " + std::to_string(kMaxImageClasses));
  if (count < 1) return damaged(name, 24, "the file declares no records");
  const std::uint64_t pixels = std::uint64_t{channels} * height * width;
  const std::uint64_t record = 4 + pixels;
  const std::uint64_t expected = kHeaderBytes + record * count;  // < 2^32 * 2^30: no overflow
  if (b.size() < expected) {
    const std::uint64_t whole = (b.size() - kHeaderBytes) / record;
    return damaged(name, b.size(),
                   "the file is truncated: record " + std::to_string(whole) + " of " + std::to_string(count) + " is cut off (" +
                       std::to_string(expected) + " bytes expected, " + std::to_string(b.size()) + " found)");
  }
  if (b.size() > expected)
    return damaged(name, expected, std::to_string(b.size() - expected) + " bytes follow the last of the " + std::to_string(count) +
                                       " records the header declares");
  auto set = std::make_shared<ImageSet>();
  set->channels = static_cast<int>(channels);
  set->height = static_cast<int>(height);
  set->width = static_cast<int>(width);
  set->classes = static_cast<int>(classes);
  set->labels.resize(count);
  set->pixels.resize(static_cast<std::size_t>(pixels * count));
  for (std::uint64_t r = 0; r < count; ++r) {
    const std::uint64_t at = kHeaderBytes + r * record;
    const std::uint32_t label = readU32(b, static_cast<std::size_t>(at));
    if (label >= classes)
      return damaged(name, at, "record " + std::to_string(r) + " has label " + std::to_string(label) + ", but the file declares " +
                                   std::to_string(classes) + " classes");
    set->labels[static_cast<std::size_t>(r)] = static_cast<int>(label);
    std::copy(b.begin() + static_cast<std::ptrdiff_t>(at + 4), b.begin() + static_cast<std::ptrdiff_t>(at + record),
              set->pixels.begin() + static_cast<std::ptrdiff_t>(r * pixels));
  }
  return std::shared_ptr<const ImageSet>(set);
}

Expected<std::shared_ptr<const ImageSet>> loadImageFile(const std::string& path, const std::string& name) {
  const std::string shown = name.empty() ? path : name;
  files::ReadResult read = files::readRegularFile(path, kMaxImageFileBytes);
  if (!read.ok()) return Error{code::kDataset, read.describe(shown), "give an image file (docs/emulator.md, \"Image files\")", {}};
  return parseImageFile(read.text, shown);
}

std::string encodeImageFile(const ImageSet& set) {
  std::string b(kMagic, kMagicBytes);
  writeU32(b, static_cast<std::uint32_t>(set.channels));
  writeU32(b, static_cast<std::uint32_t>(set.height));
  writeU32(b, static_cast<std::uint32_t>(set.width));
  writeU32(b, static_cast<std::uint32_t>(set.classes));
  writeU32(b, static_cast<std::uint32_t>(set.count()));
  const std::size_t n = set.pixelsPerImage();
  for (std::size_t r = 0; r < set.count(); ++r) {
    writeU32(b, static_cast<std::uint32_t>(set.labels[r]));
    b.append(reinterpret_cast<const char*>(set.pixels.data() + r * n), n);
  }
  return b;
}

Expected<bool> writeImageFile(const std::string& path, const ImageSet& set) {
  std::string error;
  if (!files::writeFileSafely(path, encodeImageFile(set), error)) return Error{code::kIo, error, "", {}};
  return true;
}

}  // namespace ipu::emu
