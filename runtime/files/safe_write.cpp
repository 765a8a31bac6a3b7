#include "runtime/files/safe_write.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/files/regular_file.h"

namespace ipu::files {

namespace {

struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

bool writeAll(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The file a path finally names: symlinks followed, even a dangling one
// (writing through it creates its target, as an editor would).
std::string resolveLinks(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(current.c_str(), buf, sizeof buf - 1);
    if (n < 0) return current;
    std::string target(buf, static_cast<std::size_t>(n));
    if (target.empty() || target[0] != '/') {
      const auto slash = current.rfind('/');
      target = (slash == std::string::npos ? std::string() : current.substr(0, slash + 1)) + target;
    }
    current = target;
  }
  return current;
}

std::string directoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool writable(const struct stat& st) {
  // root may write anything, but a file with no write bit at all was made
  // read-only on purpose: refuse it for root too.
  if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) return false;
  return true;
}

// Rewrites an existing file in place (same inode: links, mode, owner kept).
bool writeInPlace(const std::string& target, const std::string& text, std::string& error) {
  ReadResult old = readRegularFile(target, UINT64_MAX / 2);
  if (!old.ok()) {
    error = old.describe(target);
    return false;
  }
  Descriptor d;
  d.fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (d.fd < 0) {
    error = "cannot write `" + target + "`: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "`" + target + "` is not a regular file; it was left alone";
    return false;
  }
  const bool ok = writeAll(d.fd, text) && ::ftruncate(d.fd, static_cast<off_t>(text.size())) == 0 && ::fsync(d.fd) == 0;
  if (ok) return true;
  const std::string why = std::strerror(errno);
  // Put the old bytes back (best effort: the disk may be full).
  if (::lseek(d.fd, 0, SEEK_SET) == 0 && writeAll(d.fd, old.text))
    (void)!::ftruncate(d.fd, static_cast<off_t>(old.text.size()));
  error = "writing `" + target + "` failed (" + why + "); its previous content was restored";
  return false;
}

}  // namespace

bool writeFileSafely(const std::string& path, const std::string& text, std::string& error) {
  const std::string target = resolveLinks(path);
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists) {
    const std::string kind = notARegularFile(target);
    if (!kind.empty()) {
      error = "`" + path + "` is " + kind + ", not a file; it was left alone";
      return false;
    }
    if (!writable(st) || ::access(target.c_str(), W_OK) != 0) {
      error = "`" + path + "` is read-only; it was left unchanged (make it writable with `chmod u+w` first)";
      return false;
    }
  }
  // One name, our file, a directory we may create files in: write a
  // temporary copy, give it the old file's mode, and rename it over.
  const bool ownedByUs = !exists || st.st_uid == ::geteuid();
  if (!exists || (st.st_nlink == 1 && ownedByUs)) {
    std::string tmp = target + ".ipu-tmp-XXXXXX";
    Descriptor d;
    d.fd = ::mkstemp(tmp.data());
    if (d.fd >= 0) {
      const mode_t mode = exists ? (st.st_mode & 07777) : [] {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        return static_cast<mode_t>(0666 & ~mask);
      }();
      bool ok = ::fchmod(d.fd, mode) == 0;
      if (ok && exists && st.st_gid != ::getegid()) ok = ::fchown(d.fd, static_cast<uid_t>(-1), st.st_gid) == 0;
      ok = ok && writeAll(d.fd, text) && ::fsync(d.fd) == 0;
      const std::string why = ok ? "" : std::strerror(errno);
      ::close(d.fd);
      d.fd = -1;
      if (ok && ::rename(tmp.c_str(), target.c_str()) == 0) return true;
      ::unlink(tmp.c_str());
      if (!exists) {
        error = "cannot write `" + path + "`: " + (why.empty() ? std::strerror(errno) : why);
        return false;
      }
      // The group could not be kept, or the rename failed: in place instead.
    } else if (!exists) {
      error = "cannot write `" + path + "`: " + std::strerror(errno) + " (is `" + directoryOf(target) +
              "` a writable directory?)";
      return false;
    }
  }
  return writeInPlace(target, text, error);
}

}  // namespace ipu::files
