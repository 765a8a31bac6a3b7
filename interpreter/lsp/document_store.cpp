#include "interpreter/lsp/document_store.h"

#include <algorithm>

namespace ipu::lsp {

std::string applyChange(const std::string& text, const TextChange& change, PositionEncoding encoding) {
  if (!change.range) return change.text;
  LineIndex lines(text);
  std::size_t begin = lines.offsetOf(change.range->start, encoding);
  std::size_t end = lines.offsetOf(change.range->end, encoding);
  if (end < begin) std::swap(begin, end);
  std::string out;
  out.reserve(text.size() - (end - begin) + change.text.size());
  out.append(text, 0, begin);
  out += change.text;
  out.append(text, end, std::string::npos);
  return out;
}

void DocumentStore::setEncoding(PositionEncoding encoding) {
  std::lock_guard<std::mutex> lock(mutex_);
  encoding_ = encoding;
}

void DocumentStore::open(const std::string& uri, const std::string& path, long long version, std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  documents_[uri] = OpenDocument{uri, path, version, std::make_shared<const std::string>(std::move(text))};
}

bool DocumentStore::change(const std::string& uri, long long version, const std::vector<TextChange>& changes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = documents_.find(uri);
  if (it == documents_.end()) return false;
  std::string text = *it->second.text;
  // Each change applies to the text the previous one left (the protocol's order).
  for (const auto& c : changes) text = applyChange(text, c, encoding_);
  it->second.version = version;
  it->second.text = std::make_shared<const std::string>(std::move(text));
  return true;
}

bool DocumentStore::close(const std::string& uri) {
  std::lock_guard<std::mutex> lock(mutex_);
  return documents_.erase(uri) > 0;
}

std::optional<OpenDocument> DocumentStore::find(const std::string& uri) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = documents_.find(uri);
  if (it == documents_.end()) return std::nullopt;
  return it->second;
}

std::vector<OpenDocument> DocumentStore::all() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpenDocument> out;
  for (const auto& [uri, d] : documents_) out.push_back(d);
  return out;
}

}  // namespace ipu::lsp
