// The documents the editor has open, as it last sent them: the text of each
// (didOpen), changed by incremental edits (didChange ranges in the
// negotiated position encoding) or replaced whole, until didClose.
//
// The reader thread changes the store in the order the notifications come;
// the worker reads it when it needs another document's current text. Texts
// are immutable shared strings: a job captures the text of the version it
// was asked about, and a later edit makes a new string instead of changing
// the one being checked.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct TextChange {
  std::optional<Range> range;  // none: `text` is the whole new text
  std::string text;
};

struct OpenDocument {
  std::string uri;
  std::string path;  // what the session calls it (uri.h)
  long long version = 0;
  std::shared_ptr<const std::string> text;
};

// Applies one change to `text`. A range is clamped to the text (a position
// past a line's end is its end); a range whose end is before its start is
// taken the other way round.
std::string applyChange(const std::string& text, const TextChange& change, PositionEncoding encoding);

class DocumentStore {
 public:
  explicit DocumentStore(PositionEncoding encoding = PositionEncoding::Utf16) : encoding_(encoding) {}
  void setEncoding(PositionEncoding encoding);

  // Opening a document that is open replaces it.
  void open(const std::string& uri, const std::string& path, long long version, std::string text);
  // False when the document is not open.
  bool change(const std::string& uri, long long version, const std::vector<TextChange>& changes);
  bool close(const std::string& uri);

  std::optional<OpenDocument> find(const std::string& uri) const;
  std::vector<OpenDocument> all() const;

 private:
  mutable std::mutex mutex_;
  PositionEncoding encoding_;
  std::map<std::string, OpenDocument> documents_;
};

}  // namespace ipu::lsp
