#include "runtime/ir/json.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ipu::ir {

Json& Json::operator[](const std::string& key) {
  if (kind_ == Kind::Null) kind_ = Kind::Object;
  for (auto& [k, v] : members_)
    if (k == key) return v;
  members_.emplace_back(key, Json());
  return members_.back().second;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

void Json::push(Json value) {
  if (kind_ == Kind::Null) kind_ = Kind::Array;
  items_.push_back(std::move(value));
}

std::size_t Json::size() const {
  return kind_ == Kind::Array ? items_.size() : kind_ == Kind::Object ? members_.size() : 0;
}

namespace {
// Length of a valid UTF-8 sequence at s[i], or 0.
std::size_t utf8Length(const std::string& s, std::size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return len;
}
}  // namespace

std::string jsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // JSON is UTF-8; a byte that is not part of a valid sequence (from a
      // file in another encoding) becomes U+FFFD rather than invalid output.
      std::size_t len = utf8Length(s, i);
      if (len == 0) {
        out += "\\ufffd";
        continue;
      }
      out.append(s, i, len);
      i += len - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

static void writeNumber(std::ostream& os, double v) {
  if (!std::isfinite(v)) {  // JSON has no NaN/Inf; null keeps the document valid
    os << "null";
    return;
  }
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    os << static_cast<long long>(v);
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  os << buf;
}

void Json::writeImpl(std::ostream& os, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    os << '\n' << std::string(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (kind_) {
    case Kind::Null: os << "null"; break;
    case Kind::Bool: os << (bool_ ? "true" : "false"); break;
    case Kind::Integer: os << int_; break;
    case Kind::Number: writeNumber(os, num_); break;
    case Kind::String: os << '"' << jsonEscape(str_) << '"'; break;
    case Kind::Array:
      if (items_.empty()) { os << "[]"; break; }
      os << '[';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i) os << ',';
        newline(depth + 1);
        items_[i].writeImpl(os, indent, depth + 1);
      }
      newline(depth);
      os << ']';
      break;
    case Kind::Object:
      if (members_.empty()) { os << "{}"; break; }
      os << '{';
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (i) os << ',';
        newline(depth + 1);
        os << '"' << jsonEscape(members_[i].first) << "\":";
        if (indent >= 0) os << ' ';
        members_[i].second.writeImpl(os, indent, depth + 1);
      }
      newline(depth);
      os << '}';
      break;
  }
}

void Json::write(std::ostream& os, int indent) const { writeImpl(os, indent, 0); }

std::string Json::dump(int indent) const {
  std::ostringstream os;
  write(os, indent);
  return os.str();
}

}  // namespace ipu::ir
