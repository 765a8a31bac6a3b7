#include "interpreter/lsp/json_rpc.h"

#include <algorithm>
#include <cctype>

namespace ipu::lsp {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The body length a header block gives, or why it gives none.
std::optional<std::size_t> contentLength(std::string_view block, std::string& problem) {
  std::optional<std::size_t> length;
  std::size_t at = 0;
  while (at < block.size()) {
    std::size_t end = block.find('\n', at);
    if (end == std::string_view::npos) end = block.size();
    std::string_view line = trim(block.substr(at, end - at));
    at = end + 1;
    if (line.empty()) continue;
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      problem = "a header line without `:`";
      return std::nullopt;
    }
    if (lower(trim(line.substr(0, colon))) != "content-length") continue;  // Content-Type and others: ignored
    std::string_view value = trim(line.substr(colon + 1));
    if (value.empty() || value.size() > 12 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      problem = "Content-Length is not a number";
      return std::nullopt;
    }
    length = std::stoull(std::string(value));
  }
  if (!length) {
    problem = "no Content-Length header";
    return std::nullopt;
  }
  if (*length > kMaxBodyBytes) {
    problem = "Content-Length " + std::to_string(*length) + " is over the " + std::to_string(kMaxBodyBytes >> 20) +
              " MiB a message may have";
    return std::nullopt;
  }
  return length;
}

}  // namespace

void FrameDecoder::compact() {
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
}

std::optional<FrameDecoder::Frame> FrameDecoder::next() {
  if (!length_) {
    std::size_t end = buffer_.find("\r\n\r\n", start_);
    if (end == std::string::npos) {
      // A header block that never ends is dropped (all but a possible
      // beginning of the terminator), so the buffer stays bounded.
      if (buffer_.size() - start_ > kMaxHeaderBytes) {
        start_ = buffer_.size() - 3;
        compact();
        return Frame{Frame::Kind::BadHeader, {}, "a header block longer than 64 KiB"};
      }
      return std::nullopt;
    }
    std::string problem;
    std::string_view block(buffer_.data() + start_, end - start_);
    std::optional<std::size_t> length = block.size() > kMaxHeaderBytes ? std::nullopt : contentLength(block, problem);
    if (block.size() > kMaxHeaderBytes) problem = "a header block longer than 64 KiB";
    start_ = end + 4;
    if (!length) {
      compact();
      return Frame{Frame::Kind::BadHeader, {}, problem};
    }
    length_ = length;
  }
  if (buffer_.size() - start_ < *length_) return std::nullopt;
  Frame f{Frame::Kind::Body, buffer_.substr(start_, *length_), {}};
  start_ += *length_;
  length_.reset();
  compact();
  return f;
}

std::string encodeFrame(std::string_view body) {
  std::string out = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  out.append(body.data(), body.size());
  return out;
}

std::string serialize(const Json& message) { return message.dump(-1, ' ', false, Json::error_handler_t::replace); }

Message classify(const Json& json) {
  Message m;
  if (!json.is_object()) {
    m.problem = json.is_array() ? "batches are not used by the protocol" : "a message is a JSON object";
    return m;
  }
  const auto id = json.find("id");
  const bool hasId = id != json.end();
  // Only numbers and strings identify a request; any other id cannot be answered by it.
  const bool usableId = hasId && (id->is_string() || id->is_number_integer() || id->is_number_unsigned());
  if (usableId) m.id = *id;
  if (auto v = json.find("jsonrpc"); v == json.end() || *v != "2.0") {
    m.problem = "`jsonrpc` is not \"2.0\"";
    return m;
  }
  const auto method = json.find("method");
  if (method == json.end()) {
    if (json.contains("result") || json.contains("error")) {
      m.kind = Message::Kind::Response;
      return m;
    }
    m.problem = "no `method`";
    return m;
  }
  if (!method->is_string()) {
    m.problem = "`method` is not a string";
    return m;
  }
  if (hasId && !usableId) {
    m.problem = "`id` is neither a number nor a string";
    return m;
  }
  m.method = method->get<std::string>();
  // `"params": null` is read as no params: clients send it for `shutdown` and `exit`.
  if (auto p = json.find("params"); p != json.end() && !p->is_null()) {
    if (!p->is_object() && !p->is_array()) {
      m.problem = "`params` is neither an object nor an array";
      return m;
    }
    m.params = *p;
  }
  m.kind = hasId ? Message::Kind::Request : Message::Kind::Notification;
  return m;
}

Decoded decode(const std::string& body) {
  Decoded d;
  // No exceptions: a body that is not JSON gives a discarded value.
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    d.parseError = true;
    d.message.problem = "the message is not JSON";
    return d;
  }
  d.message = classify(json);
  return d;
}

Json resultReply(const Json& id, Json result) {
  Json j = Json::object();
  j["jsonrpc"] = "2.0";
  j["id"] = id;
  j["result"] = std::move(result);
  return j;
}

Json errorReply(const Json& id, ErrorCode code, const std::string& message) {
  Json j = Json::object();
  j["jsonrpc"] = "2.0";
  j["id"] = id;
  j["error"] = Json::object();
  j["error"]["code"] = static_cast<int>(code);
  j["error"]["message"] = message;
  return j;
}

Json notification(const std::string& method, Json params) {
  Json j = Json::object();
  j["jsonrpc"] = "2.0";
  j["method"] = method;
  j["params"] = std::move(params);
  return j;
}

const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const Json* member(const Json& j, std::initializer_list<const char*> path) {
  const Json* at = &j;
  for (const char* key : path)
    if ((at = member(*at, key)) == nullptr) return nullptr;
  return at;
}

bool isTrue(const Json* j) { return j != nullptr && j->is_boolean() && j->get<bool>(); }

std::string idKey(const Json& id) { return id.is_string() ? "s:" + id.get<std::string>() : "n:" + serialize(id); }

}  // namespace ipu::lsp
