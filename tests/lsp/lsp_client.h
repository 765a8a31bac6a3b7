// A protocol-level client for the language server's tests. The same
// requests go either to a Server in this process through a MemoryTransport
// (fast, and the tests can hold the worker to cancel at a known moment) or to
// `ipu lsp` started as a process with pipes (the real framing over real file
// descriptors, and the real exit code).
//
// request() sends a request and waits for the reply with its id; what the
// server sends meanwhile (diagnostics) is kept, in order, for
// waitForDiagnostics(). Every wait has a timeout, so a server that stops
// answering fails the test instead of hanging it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/server.h"
#include "interpreter/lsp/transport.h"

namespace ipu::lsp::test {

class Client {
 public:
  virtual ~Client() = default;

  // Raw access: the body of one message each way.
  virtual void sendBody(const std::string& body) = 0;
  virtual std::optional<std::string> receiveBody(double seconds) = 0;

  // Sends a request, returns the whole reply (with `result` or `error`); a
  // null Json when none came within `seconds`.
  Json request(const std::string& method, Json params, double seconds = 60);
  // Sends a request without waiting; its id.
  long long sendRequest(const std::string& method, Json params);
  // The reply to request `id`, keeping other messages.
  Json waitForReply(long long id, double seconds = 60);
  void notify(const std::string& method, Json params);

  // initialize with the given client capabilities, then initialized.
  Json initialize(Json capabilities = Json::object());
  void open(const std::string& uri, const std::string& text, long long version = 1);
  // A full-range change (replace everything) or one incremental change.
  void replaceAll(const std::string& uri, const std::string& oldText, const std::string& newText, long long version);
  void change(const std::string& uri, long long version, Json range, const std::string& text);

  // The next publishDiagnostics for `uri` (with `version`, when given) among
  // those received or to come; null on timeout.
  Json waitForDiagnostics(const std::string& uri, std::optional<long long> version = std::nullopt,
                          double seconds = 60);
  // Every notification received so far, oldest first (drained).
  std::vector<Json> takeNotifications();

 protected:
  // Reads until a message matching `want` comes; keeps the rest.
  Json waitFor(const std::function<bool(const Json&)>& want, double seconds);
  std::vector<Json> kept_;
  long long nextId_ = 1;
};

// A Server in this process, run on a thread of its own.
class InProcessClient : public Client {
 public:
  explicit InProcessClient(ServerOptions options = {});
  ~InProcessClient() override;
  void sendBody(const std::string& body) override { transport_.send(body); }
  std::optional<std::string> receiveBody(double seconds) override { return transport_.receive(seconds); }
  MemoryTransport& transport() { return transport_; }
  // Ends the input and waits for run() to return; its exit code.
  int finish();

 private:
  MemoryTransport transport_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::optional<int> exitCode_;
};

// `ipu lsp` as a child process.
class ProcessClient : public Client {
 public:
  explicit ProcessClient(const std::vector<std::string>& arguments);
  ~ProcessClient() override;
  void sendBody(const std::string& body) override { sendBytes(encodeFrame(body)); }
  std::optional<std::string> receiveBody(double seconds) override;
  void sendBytes(const std::string& bytes);
  void closeInput();
  // Waits for the process to end; its exit status (-1 if it did not end in time, or died by a signal).
  int wait(double seconds = 30);
  // What it wrote to stderr (read after it ended).
  std::string errorOutput();

 private:
  int pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  FrameDecoder decoder_;
  std::optional<int> status_;
};

// The `file:` URI of a path.
std::string uriOf(const std::string& path);
// Decoded semantic tokens: (line, character, length, type name, modifier bits).
struct DecodedToken {
  std::uint32_t line, character, length;
  std::string type;
  unsigned modifiers;
};
std::vector<DecodedToken> decodeSemanticTokens(const Json& result, const Json& legend);
// The text after applying TextEdits (UTF-16 positions).
std::string applyEdits(const std::string& text, const Json& edits);

}  // namespace ipu::lsp::test
