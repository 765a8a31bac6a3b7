#include "interpreter/lsp/transport.h"

#include <cerrno>
#include <chrono>
#include <unistd.h>

namespace ipu::lsp {

Transport::Incoming StreamTransport::read() {
  for (;;) {
    if (auto frame = decoder_.next()) {
      if (frame->kind == FrameDecoder::Frame::Kind::BadHeader)
        return Incoming{Incoming::Kind::BadFrame, {}, frame->problem};
      return Incoming{Incoming::Kind::Message, std::move(frame->body), {}};
    }
    if (ended_) return Incoming{};
    char buffer[64 * 1024];
    ssize_t n = ::read(in_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ended_ = true;  // a message cut off by the end of input is not one
      continue;
    }
    decoder_.feed(std::string_view(buffer, static_cast<std::size_t>(n)));
  }
}

bool StreamTransport::write(const std::string& body) {
  const std::string frame = encodeFrame(body);
  std::lock_guard<std::mutex> lock(writing_);
  std::size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = ::write(out_, frame.data() + done, frame.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

Transport::Incoming MemoryTransport::read() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !toServer_.empty() || closed_; });
  if (toServer_.empty()) return Incoming{};
  Incoming in = std::move(toServer_.front());
  toServer_.pop_front();
  return in;
}

bool MemoryTransport::write(const std::string& body) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    toClient_.push_back(body);
  }
  changed_.notify_all();
  return true;
}

void MemoryTransport::send(const std::string& body) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    toServer_.push_back(Incoming{Incoming::Kind::Message, body, {}});
  }
  changed_.notify_all();
}

void MemoryTransport::sendBadFrame(const std::string& problem) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    toServer_.push_back(Incoming{Incoming::Kind::BadFrame, {}, problem});
  }
  changed_.notify_all();
}

void MemoryTransport::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  changed_.notify_all();
}

std::optional<std::string> MemoryTransport::receive(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  if (!changed_.wait_until(lock, deadline, [&] { return !toClient_.empty(); })) return std::nullopt;
  std::string body = std::move(toClient_.front());
  toClient_.pop_front();
  return body;
}

}  // namespace ipu::lsp
