#include "interpreter/runner/checkpoint_fetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "runtime/ir/sha256.h"

namespace ipu::runner {

namespace fs = std::filesystem;

bool fileDigest(const std::string& path, std::string& sha256, long long& size, std::string& error) {
  // O_NONBLOCK: a FIFO in a checkpoint's place must not hang the reader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = std::string(std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = "not a regular file";
    return false;
  }
  ir::Sha256 hash;
  std::vector<char> buffer(1 << 20);
  long long total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = std::string(std::strerror(errno));
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    hash.add(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    total += n;
  }
  ::close(fd);
  sha256 = hash.hex();
  size = total;
  return true;
}

bool staysInside(const std::string& relative) {
  if (relative.empty() || relative.front() == '/') return false;
  for (const auto& part : fs::path(relative))
    if (part == "..") return false;
  return true;
}

namespace {

std::string whose(const store::RunRecord& run, const store::Artifact& a) {
  return "checkpoint `" + a.path + "` of run " + run.name;
}

}  // namespace

CheckpointFile ensureCheckpoint(store::RunStore& store, const store::RunRecord& run, const store::Artifact& a,
                                const std::string& destination) {
  CheckpointFile out;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(destination, ec);
  const bool there = !ec && fs::exists(st);
  if (there && fs::is_regular_file(fs::status(destination, ec))) {
    std::string digest, error;
    long long size = 0;
    if (a.sha256.empty() || (fileDigest(destination, digest, size, error) && digest == a.sha256)) {
      out.ok = true;
      out.path = destination;
      return out;
    }
  } else if (there) {
    out.problem = "the " + whose(run, a) + " is expected at `" + destination +
                  "`, where something that is not a regular file stands (a directory, a FIFO, a device): remove it, and " +
                  (a.stored ? "its bytes will be fetched from the store" : "put the checkpoint there");
    return out;
  }
  if (!a.stored) {
    out.problem = "the " + whose(run, a) + " is not on this host" +
                  std::string(there ? " as recorded (its SHA-256 differs)" : "") + " at `" + destination +
                  "`, and its bytes are not in the store (it was recorded with --artifacts files" +
                  (a.host.empty() ? std::string() : " on host " + a.host) +
                  "): copy the file there from the host that wrote it, or record runs with --artifacts store";
    return out;
  }
  // Fetched into a temporary file beside the destination, renamed into place
  // once every byte is there and the checksum matched: a reader never sees
  // a part, and a damaged copy never lands.
  fs::create_directories(fs::path(destination).parent_path(), ec);
  const std::string temporary = destination + ".fetching-" + std::to_string(static_cast<long long>(::getpid()));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    out.problem = "cannot write `" + temporary + "` to fetch the " + whose(run, a) + " from the store: " +
                  std::strerror(errno) + " (check the permissions of its directory)";
    return out;
  }
  std::string writeError;
  try {
    store.readArtifact(run.id, a.path, [&](const char* bytes, std::size_t n) {
      while (n > 0 && writeError.empty()) {
        const ssize_t w = ::write(fd, bytes, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          writeError = std::strerror(errno);
          break;
        }
        bytes += w;
        n -= static_cast<std::size_t>(w);
      }
    });
  } catch (const store::ArtifactDamaged& e) {
    ::close(fd);
    fs::remove(temporary, ec);
    out.problem = "the copy of the " + whose(run, a) + " kept in the store is damaged, so it was not used (" + e.what() +
                  "); restore the file from the host that wrote it" + (a.host.empty() ? std::string() : " (" + a.host + ")") +
                  " to `" + destination + "`, or start from another checkpoint or a new run";
    return out;
  } catch (const store::StoreError& e) {
    ::close(fd);
    fs::remove(temporary, ec);
    out.problem = "the " + whose(run, a) + " could not be fetched from the store: " + e.what();
    return out;
  }
  if (writeError.empty() && ::fsync(fd) != 0) writeError = std::strerror(errno);
  ::close(fd);
  if (writeError.empty()) {
    fs::rename(temporary, destination, ec);
    if (ec) writeError = ec.message();
  }
  if (!writeError.empty()) {
    fs::remove(temporary, ec);
    out.problem = "cannot write the " + whose(run, a) + " fetched from the store to `" + destination + "`: " + writeError;
    return out;
  }
  out.ok = true;
  out.fetched = true;
  out.path = destination;
  return out;
}

CheckpointFile localCheckpoint(store::RunStore& store, const store::RunRecord& run, const store::Artifact& a,
                               const std::string& cacheRoot) {
  const std::string own = store::artifactFile(a);
  std::error_code ec;
  if (fs::is_regular_file(own, ec)) {
    std::string digest, error;
    long long size = 0;
    if (a.sha256.empty() || (fileDigest(own, digest, size, error) && digest == a.sha256)) {
      CheckpointFile out;
      out.ok = true;
      out.path = own;
      return out;
    }
  }
  if (!a.stored) return ensureCheckpoint(store, run, a, own);
  // Another host's path (or another file at it): the copy goes under this
  // host's runs directory, never over a file that is not this checkpoint.
  std::string relative = a.path;
  while (!relative.empty() && relative.front() == '/') relative.erase(0, 1);
  // A path that would climb out of the cache keeps its file name only.
  if (!staysInside(relative)) relative = fs::path(relative).filename().string();
  const std::string cached =
      (fs::path(cacheRoot) / "store-artifacts" / std::to_string(run.id) / fs::path(relative).lexically_normal()).string();
  return ensureCheckpoint(store, run, a, cached);
}

}  // namespace ipu::runner
