#include "interpreter/base/render.h"

#include <algorithm>
#include <sstream>

namespace ipu::base {

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

std::string location(const Span& span, const SourceMap& sources) {
  const SourceFile* f = sources.find(span.file);
  if (f == nullptr) return "<unknown>";
  LineCol lc = f->lineCol(span.begin);
  return printable(f->path()) + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.column);
}

std::string printable(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  auto escape = [&](unsigned char c) {
    static const char* hex = "0123456789abcdef";
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '\t') {
      out += ' ';
    } else if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      const std::size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
      bool valid = len > 0 && i + len <= raw.size();
      for (std::size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(raw[i + k]) & 0xC0) == 0x80;
      // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) act on terminals too.
      if (valid && len == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0) valid = false;
      if (!valid) {
        escape(c);
        continue;
      }
      out.append(raw.substr(i, len));
      i += len - 1;
    }
  }
  return out;
}

namespace {

// Display text of a source line: tabs expanded to 4 columns, and the display
// column of every byte offset so carets line up under the characters.
struct DisplayLine {
  std::string text;
  std::vector<std::size_t> columnOfByte;  // size = bytes + 1
};

DisplayLine displayLine(std::string_view raw) {
  DisplayLine out;
  std::size_t col = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    out.columnOfByte.push_back(col);
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '\t') {
      out.text += "    ";
      col += 4;
    } else if (c < 0x20 || c == 0x7f) {  // control characters would garble the terminal
      out.text += '?';
      col += 1;
    } else if (c >= 0x80) {
      // Copy a valid UTF-8 sequence; show any other byte as U+FFFD.
      std::size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
      bool valid = len > 0 && i + len <= raw.size();
      for (std::size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(raw[i + k]) & 0xC0) == 0x80;
      if (!valid) {
        out.text += "\xEF\xBF\xBD";
        col += 1;
        continue;
      }
      out.text.append(raw.substr(i, len));
      col += 1;
      for (std::size_t k = 1; k < len; ++k) out.columnOfByte.push_back(col - 1);
      i += len - 1;
    } else {
      out.text += static_cast<char>(c);
      if ((c & 0xC0) != 0x80) col += 1;  // continuation bytes take no column
    }
  }
  out.columnOfByte.push_back(col);
  return out;
}

void snippet(std::ostream& os, const Span& span, const SourceMap& sources, const Painter& p, Style underline) {
  const SourceFile* f = sources.find(span.file);
  if (f == nullptr) return;
  LineCol start = f->lineCol(span.begin);
  LineCol end = f->lineCol(std::max(span.begin, span.end));
  std::string lineNo = std::to_string(start.line);
  std::string gutter(lineNo.size(), ' ');
  std::string_view raw = f->lineText(start.line);
  DisplayLine dl = displayLine(raw);
  std::uint32_t lineStart = f->lineStart(start.line);
  std::size_t b0 = std::min<std::size_t>(span.begin - lineStart, raw.size());
  std::size_t b1 = end.line == start.line ? std::min<std::size_t>(span.end - lineStart, raw.size()) : raw.size();
  std::size_t c0 = dl.columnOfByte[b0];
  std::size_t c1 = std::max(dl.columnOfByte[std::max(b0, b1)], c0 + 1);
  os << gutter << ' ' << p.paint(Style::Accent, "|") << '\n';
  os << p.paint(Style::Accent, lineNo) << ' ' << p.paint(Style::Accent, "|") << ' ' << dl.text << '\n';
  os << gutter << ' ' << p.paint(Style::Accent, "|") << ' ' << std::string(c0, ' ')
     << p.paint(underline, std::string(c1 - c0, '^')) << '\n';
}

}  // namespace

void renderHuman(std::ostream& os, const Diagnostic& d, const SourceMap& sources, const Painter& p) {
  Style sev = d.severity == Severity::Error ? Style::Error
              : d.severity == Severity::Warning ? Style::Warning
                                                : Style::Note;
  const bool located = sources.find(d.span.file) != nullptr;
  if (located) os << p.paint(Style::Bold, location(d.span, sources) + ":") << ' ';
  os << p.paint(sev, std::string(severityName(d.severity)) + "[" + d.code + "]") << p.paint(Style::Bold, ": " + printable(d.message))
     << '\n';
  std::size_t width = 1;
  if (located) {
    width = std::to_string(sources.file(d.span.file).lineCol(d.span.begin).line).size();
    snippet(os, d.span, sources, p, sev);
  }
  std::string pad(width, ' ');
  if (!d.help.empty()) os << pad << ' ' << p.paint(Style::Accent, "=") << ' ' << p.paint(Style::Help, "help") << ": " << printable(d.help) << '\n';
  for (const auto& n : d.notes) {
    if (sources.find(n.span.file) != nullptr) {
      os << p.paint(Style::Note, "note") << ": " << printable(n.message) << '\n';
      std::string loc = location(n.span, sources);
      std::size_t w = std::to_string(sources.file(n.span.file).lineCol(n.span.begin).line).size();
      os << std::string(w, ' ') << p.paint(Style::Accent, "-->") << ' ' << loc << '\n';
      snippet(os, n.span, sources, p, Style::Note);
    } else {
      os << pad << ' ' << p.paint(Style::Accent, "=") << ' ' << p.paint(Style::Note, "note") << ": " << printable(n.message) << '\n';
    }
  }
}

std::string renderHuman(const Diagnostic& d, const SourceMap& sources, bool color) {
  std::ostringstream os;
  renderHuman(os, d, sources, Painter(color));
  return os.str();
}

std::string summaryLine(const Diagnostics& diags, const Painter& p) {
  std::size_t e = diags.errorCount(), w = diags.warningCount();
  if (e == 0 && w == 0) return {};
  std::ostringstream os;
  auto plural = [](std::size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (e > 0) {
    os << p.paint(Style::Error, "error") << ": " << plural(e, "error");
    if (w > 0) os << ", " << plural(w, "warning");
    if (e >= Diagnostics::kMaxErrors) os << " (stopped after " << Diagnostics::kMaxErrors << ")";
  } else {
    os << p.paint(Style::Warning, "warning") << ": " << plural(w, "warning");
  }
  return os.str();
}

ir::Json toJson(const Diagnostic& d, const SourceMap& sources) {
  ir::Json j = ir::Json::object();
  j["code"] = d.code;
  j["severity"] = severityName(d.severity);
  j["message"] = d.message;
  j["help"] = d.help.empty() ? ir::Json() : ir::Json(d.help);
  auto place = [&](ir::Json& obj, const Span& span) {
    const SourceFile* f = sources.find(span.file);
    if (f == nullptr) {
      for (const char* k : {"file", "line", "column", "end_line", "end_column"}) obj[k] = ir::Json();
      return;
    }
    LineCol s = f->lineCol(span.begin), e = f->lineCol(std::max(span.begin, span.end));
    obj["file"] = f->path();
    obj["line"] = s.line;
    obj["column"] = s.column;
    obj["end_line"] = e.line;
    obj["end_column"] = e.column;
  };
  place(j, d.span);
  ir::Json notes = ir::Json::array();
  for (const auto& n : d.notes) {
    ir::Json nj = ir::Json::object();
    nj["message"] = n.message;
    place(nj, n.span);
    notes.push(std::move(nj));
  }
  j["notes"] = std::move(notes);
  j["rendered"] = renderHuman(d, sources, false);
  return j;
}

ir::Json toJson(const Diagnostics& diags, const SourceMap& sources) {
  ir::Json arr = ir::Json::array();
  for (const auto& d : diags.all()) arr.push(toJson(d, sources));
  return arr;
}

}  // namespace ipu::base
