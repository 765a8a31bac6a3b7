// JSON-RPC 2.0 as the Language Server Protocol frames it: each message is a
// header block (`Content-Length: N`, optionally `Content-Type`, each line
// ending in \r\n, then an empty line) followed by N bytes of UTF-8 JSON.
//
// Framing is kept apart from reading bytes (transport.h) so that it can be
// fed any bytes in any pieces and tested without a process: FrameDecoder
// takes bytes and hands out whole bodies, or says that a header block was
// unusable. A bad header never stops the server: the block is dropped and
// decoding starts again after it, which also resynchronises after a body
// whose length was a lie.
//
// Messages are then classified into requests, notifications and responses;
// anything else is an invalid request, answered with an error when it has an
// id to answer (a parse error is answered with a null id, as JSON-RPC says).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ipu::lsp {

// Key order kept as inserted: the transcripts in docs/editor.md read well.
using Json = nlohmann::ordered_json;

// The error codes of JSON-RPC and of the protocol that this server sends.
enum class ErrorCode : int {
  ParseError = -32700,
  InvalidRequest = -32600,
  MethodNotFound = -32601,
  InvalidParams = -32602,
  InternalError = -32603,
  ServerNotInitialized = -32002,
  RequestFailed = -32803,
  ContentModified = -32801,
  RequestCancelled = -32800,
};

// The largest header block and body accepted: an editor's message is a
// script (at most 8 MiB) escaped into JSON, well under these.
inline constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
inline constexpr std::size_t kMaxBodyBytes = 64u << 20;

class FrameDecoder {
 public:
  struct Frame {
    enum class Kind { Body, BadHeader } kind = Kind::Body;
    std::string body;     // Body: the message's JSON text
    std::string problem;  // BadHeader: what was wrong with the header block
  };

  void feed(std::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }
  // The next complete frame, or nothing until more bytes are fed.
  std::optional<Frame> next();
  // Bytes fed but not yet part of a frame (a message cut off by the end of input).
  std::size_t pending() const { return buffer_.size() - start_; }

 private:
  void compact();

  std::string buffer_;
  std::size_t start_ = 0;               // where undecoded bytes begin
  std::optional<std::size_t> length_;   // the body length, once its header was read
};

// The header block and body of one message.
std::string encodeFrame(std::string_view body);

// JSON text for the wire: compact, and bytes that are not UTF-8 (a message
// quoting a script's bad bytes) replaced rather than refused.
std::string serialize(const Json& message);

// A decoded message.
struct Message {
  enum class Kind { Request, Notification, Response, Invalid } kind = Kind::Invalid;
  Json id;             // Request, Response; Invalid: the id to answer with (null if it had none usable)
  std::string method;  // Request, Notification
  Json params;         // null when absent
  std::string problem; // Invalid: why
};

Message classify(const Json& json);
// Parses and classifies a body; a body that is not JSON is Invalid with a
// ParseError to send (parseError() true).
struct Decoded {
  Message message;
  bool parseError = false;
};
Decoded decode(const std::string& body);

Json resultReply(const Json& id, Json result);
Json errorReply(const Json& id, ErrorCode code, const std::string& message);
Json notification(const std::string& method, Json params);

// Reading params without exceptions: the member `key` of `j` when `j` is an
// object that has it, else null; a path of keys walks nested objects.
const Json* member(const Json& j, const char* key);
const Json* member(const Json& j, std::initializer_list<const char*> path);
// True only for a JSON `true`.
bool isTrue(const Json* j);

// A request id as a key (ids are numbers or strings; 1 and "1" differ).
std::string idKey(const Json& id);

}  // namespace ipu::lsp
