// Where the server's messages come from and go to. The server reads one
// framed message body at a time and writes whole messages; it does not know
// whether they travel over a process's stdin/stdout (`ipu lsp`) or through
// memory (the tests drive a server in-process and read its replies as they
// come).
//
// write() may be called from several threads (the reader answers lifecycle
// requests while the worker answers the rest): each transport writes one
// message at a time.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "interpreter/lsp/json_rpc.h"

namespace ipu::lsp {

class Transport {
 public:
  virtual ~Transport() = default;
  struct Incoming {
    enum class Kind { Message, BadFrame, End } kind = Kind::End;
    std::string body;     // Message
    std::string problem;  // BadFrame
  };
  // Blocks until a message, a header block that had to be dropped, or the end of input.
  virtual Incoming read() = 0;
  // False once the other side is gone.
  virtual bool write(const std::string& body) = 0;
};

// Content-Length frames over two file descriptors (stdin and stdout of `ipu lsp`).
class StreamTransport : public Transport {
 public:
  StreamTransport(int in, int out) : in_(in), out_(out) {}
  Incoming read() override;
  bool write(const std::string& body) override;

 private:
  int in_, out_;
  FrameDecoder decoder_;
  bool ended_ = false;
  std::mutex writing_;
};

// Two queues of message bodies: the client side pushes what the server reads
// and takes what it writes. For the tests.
class MemoryTransport : public Transport {
 public:
  Incoming read() override;
  bool write(const std::string& body) override;

  // The client's side.
  void send(const std::string& body);
  void sendBadFrame(const std::string& problem);  // as if a header block were unusable
  void close();                                   // the end of input
  // The next message the server wrote, waiting up to `seconds`; none on timeout.
  std::optional<std::string> receive(double seconds);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Incoming> toServer_;
  std::deque<std::string> toClient_;
  bool closed_ = false;
};

}  // namespace ipu::lsp
