#include "runtime/files/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ipu::files {

namespace {

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a pipe (FIFO)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string ReadResult::describe(const std::string& path) const {
  switch (status) {
    case Status::Ok: return "`" + path + "` was read";
    case Status::Missing: return "`" + path + "` does not exist";
    case Status::NotAFile: return "`" + path + "` is " + problem + ", not a file";
    case Status::TooLarge: return "`" + path + "` is too large (" + std::to_string(bytes) + " bytes)";
    case Status::Unreadable: return "cannot read `" + path + "`: " + problem;
  }
  return "cannot read `" + path + "`";
}

std::string notARegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return S_ISREG(st.st_mode) ? "" : kindOf(st.st_mode);
}

ReadResult readRegularFile(const std::string& path, std::uint64_t maxBytes) {
  ReadResult out;
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of
  // waiting; O_NOCTTY: a terminal device never becomes ours.
  Descriptor d;
  d.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (d.fd < 0) {
    const int err = errno;
    out.status = err == ENOENT || err == ENOTDIR ? ReadResult::Status::Missing : ReadResult::Status::Unreadable;
    out.problem = std::strerror(err);
    if (err == ENXIO || err == ENODEV) {  // a FIFO or socket nobody serves, a device without a driver
      out.status = ReadResult::Status::NotAFile;
      out.problem = notARegularFile(path);
      if (out.problem.empty()) out.problem = "not a regular file";
    }
    return out;
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) {
    out.status = ReadResult::Status::Unreadable;
    out.problem = std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.status = ReadResult::Status::NotAFile;
    out.problem = kindOf(st.st_mode);
    return out;
  }
  out.bytes = static_cast<std::uint64_t>(st.st_size);
  if (out.bytes > maxBytes) {
    out.status = ReadResult::Status::TooLarge;
    return out;
  }
  // A regular file: back to blocking reads (O_NONBLOCK means nothing for
  // regular files on Linux, but be plain about it).
  const int flags = ::fcntl(d.fd, F_GETFL);
  if (flags >= 0) ::fcntl(d.fd, F_SETFL, flags & ~O_NONBLOCK);
  // Read at most one byte more than allowed: the file may have grown.
  std::string text;
  text.resize(static_cast<std::size_t>(out.bytes) + 1);
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (used > maxBytes) break;
      text.resize(std::min<std::uint64_t>(maxBytes + 1, text.size() * 2 + 4096));
    }
    const ssize_t n = ::read(d.fd, text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      out.status = ReadResult::Status::Unreadable;
      out.problem = std::strerror(errno);
      return out;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > maxBytes) {
    out.status = ReadResult::Status::TooLarge;
    out.bytes = used;
    return out;
  }
  text.resize(used);
  out.text = std::move(text);
  out.bytes = used;
  return out;
}

}  // namespace ipu::files
