// Unit tests of runtime/files: the one reader (regular files only, never
// blocking, bounded) and the one writer (modes, owners and links kept,
// read-only refused, the old content kept on failure), and the checkpoint
// format's checksum and identity built on them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/emulator/tensor_file.h"
#include "runtime/files/regular_file.h"
#include "runtime/files/safe_write.h"

using namespace ipu;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("ipu-files-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

mode_t modeOf(const std::string& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

}  // namespace

TEST(RegularFile, ReadsRegularFilesAndRefusesTheRestWithoutBlocking) {
  Scratch s;
  s.write("a.txt", "hello");
  files::ReadResult ok = files::readRegularFile(s.path("a.txt"), 100);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.text, "hello");
  EXPECT_EQ(files::readRegularFile(s.path("a.txt"), 4).status, files::ReadResult::Status::TooLarge);
  EXPECT_EQ(files::readRegularFile(s.path("none"), 100).status, files::ReadResult::Status::Missing);
  ASSERT_EQ(::mkfifo(s.path("fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  files::ReadResult fifo = files::readRegularFile(s.path("fifo"), 100);  // no writer: would block forever
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_EQ(fifo.status, files::ReadResult::Status::NotAFile);
  EXPECT_NE(fifo.describe("fifo").find("pipe (FIFO)"), std::string::npos) << fifo.describe("fifo");
  EXPECT_EQ(files::readRegularFile(s.dir.string(), 100).problem, "a directory");
  EXPECT_EQ(files::readRegularFile("/dev/zero", 100).problem, "a device");
  EXPECT_EQ(files::readRegularFile("/dev/null", 100).status, files::ReadResult::Status::NotAFile);
}

TEST(SafeWrite, KeepsModeLinksAndRefusesReadOnly) {
  Scratch s;
  s.write("private.ipu", "old");
  ::chmod(s.path("private.ipu").c_str(), 0600);
  std::string error;
  ASSERT_TRUE(files::writeFileSafely(s.path("private.ipu"), "new", error)) << error;
  EXPECT_EQ(s.read("private.ipu"), "new");
  EXPECT_EQ(modeOf(s.path("private.ipu")), 0600u);

  s.write("target.ipu", "old");
  fs::create_symlink("target.ipu", s.dir / "link.ipu");
  ASSERT_TRUE(files::writeFileSafely(s.path("link.ipu"), "through", error)) << error;
  EXPECT_TRUE(fs::is_symlink(s.dir / "link.ipu"));
  EXPECT_EQ(s.read("target.ipu"), "through");

  s.write("one.ipu", "old");
  fs::create_hard_link(s.dir / "one.ipu", s.dir / "two.ipu");
  ASSERT_TRUE(files::writeFileSafely(s.path("one.ipu"), "both", error)) << error;
  EXPECT_EQ(fs::hard_link_count(s.dir / "one.ipu"), 2u);
  EXPECT_EQ(s.read("two.ipu"), "both");

  s.write("ro.ipu", "keep");
  ::chmod(s.path("ro.ipu").c_str(), 0444);
  EXPECT_FALSE(files::writeFileSafely(s.path("ro.ipu"), "lost", error));
  EXPECT_NE(error.find("read-only"), std::string::npos) << error;
  EXPECT_EQ(s.read("ro.ipu"), "keep");

  ASSERT_EQ(::mkfifo(s.path("out.fifo").c_str(), 0600), 0);
  EXPECT_FALSE(files::writeFileSafely(s.path("out.fifo"), "x", error));
  EXPECT_NE(error.find("pipe"), std::string::npos) << error;

  ASSERT_TRUE(files::writeFileSafely(s.path("fresh.ipu"), "created", error)) << error;
  EXPECT_EQ(s.read("fresh.ipu"), "created");
  for (const auto& e : fs::directory_iterator(s.dir))
    EXPECT_EQ(e.path().filename().string().find(".ipu-tmp"), std::string::npos) << "left behind: " << e.path();
}

TEST(TensorFile, AChecksumCatchesEveryFlippedByte) {
  Scratch s;
  emu::TensorFile f;
  f.set("format", "ipu-checkpoint/1");
  f.set("step", "7");
  emu::Mat m(3, 4);
  for (int i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(i) * 0.5f;
  f.tensors.emplace_back("w", m);
  ASSERT_TRUE(emu::writeTensorFile(s.path("c.ipt"), f).ok());
  auto back = emu::readTensorFile(s.path("c.ipt"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->checksummed);
  EXPECT_EQ(back->get("step"), "7");
  EXPECT_TRUE(back->find("w")->isApprox(m));
  const std::string bytes = s.read("c.ipt");
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x04);
    std::ofstream(s.path("d.ipt"), std::ios::binary) << damaged;
    // Refused, or (a flip that turns the checksum line into part of another
    // line) read as a file without a checksum, which no checkpoint may be.
    auto r = emu::readTensorFile(s.path("d.ipt"));
    EXPECT_TRUE(!r.ok() || !r->checksummed) << "a flip of byte " << i << " went unnoticed";
  }
}
