#include "interpreter/lsp/text_scan.h"

#include <cctype>
#include <algorithm>
#include <set>
#include <string>

#include "interpreter/syntax/parser.h"

namespace ipu::lsp {

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isWordStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isWordChar(char c) { return isWordStart(c) || isDigit(c); }

// DIGITS: [0-9] ('_'? [0-9])*, from `i` (a digit); returns the end.
std::size_t digits(std::string_view t, std::size_t i) {
  ++i;
  while (i < t.size()) {
    if (isDigit(t[i])) ++i;
    else if (t[i] == '_' && i + 1 < t.size() && isDigit(t[i + 1])) i += 2;
    else break;
  }
  return i;
}

// EXPONENT: [eE] [+-]? [0-9]+, from `i`; returns the end, or `i` when there is none.
std::size_t exponent(std::string_view t, std::size_t i) {
  if (i >= t.size() || (t[i] != 'e' && t[i] != 'E')) return i;
  std::size_t j = i + 1;
  if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
  if (j >= t.size() || !isDigit(t[j])) return i;
  while (j < t.size() && isDigit(t[j])) ++j;
  return j;
}

}  // namespace

std::vector<Token> scanTokens(std::string_view t) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f') {
      ++i;
      continue;
    }
    Token tok;
    tok.begin = i;
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
      tok.kind = TokenKind::LineComment;
      i += 2;
      while (i < t.size() && t[i] != '\n' && t[i] != '\r') ++i;
    } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
      tok.kind = TokenKind::BlockComment;
      std::size_t close = t.find("*/", i + 2);
      tok.closed = close != std::string_view::npos;
      i = tok.closed ? close + 2 : t.size();
    } else if (t.substr(i, 3) == "\"\"\"") {
      tok.kind = TokenKind::String;
      std::size_t close = t.find("\"\"\"", i + 3);
      tok.closed = close != std::string_view::npos;
      i = tok.closed ? close + 3 : t.size();
    } else if (c == '"') {
      tok.kind = TokenKind::String;
      tok.closed = false;
      ++i;
      while (i < t.size() && t[i] != '\n' && t[i] != '\r') {
        if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] != '\n' && t[i + 1] != '\r') {
          i += 2;
          continue;
        }
        if (t[i] == '"') {
          ++i;
          tok.closed = true;
          break;
        }
        ++i;
      }
    } else if (isDigit(c)) {
      tok.kind = TokenKind::Number;
      i = digits(t, i);
      // A fraction needs digits after the dot, so `0..3` stays a range.
      if (i + 1 < t.size() && t[i] == '.' && isDigit(t[i + 1])) i = digits(t, i + 1);
      i = exponent(t, i);
    } else if (isWordStart(c)) {
      tok.kind = TokenKind::Word;
      while (i < t.size() && isWordChar(t[i])) ++i;
    } else if (std::string_view("{}()[],;:=+-*/^%<>!.").find(c) != std::string_view::npos) {
      tok.kind = TokenKind::Punctuation;
      const std::string_view two = t.substr(i, 2);
      i += two == ".." || two == "==" || two == "!=" || two == "<=" || two == ">=" ? 2 : 1;
    } else {
      tok.kind = TokenKind::Other;
      ++i;
    }
    tok.end = i;
    out.push_back(tok);
  }
  return out;
}

bool isName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool isKeyword(std::string_view word) {
  static const std::set<std::string, std::less<>> keywords = [] {
    const auto& k = syntax::keywords();
    return std::set<std::string, std::less<>>(k.begin(), k.end());
  }();
  return keywords.count(word) > 0;
}

std::optional<syntax::DeclKind> declKindNamed(std::string_view word) {
  for (syntax::DeclKind k : syntax::allDeclKinds())
    if (word == syntax::spelling(k)) return k;
  return std::nullopt;
}

LexicalTopLevel readTopLevel(std::string_view text) {
  LexicalTopLevel out;
  const auto tokens = scanTokens(text);
  int depth = 0;
  auto word = [&](std::size_t i) {
    return i < tokens.size() && tokens[i].kind == TokenKind::Word ? text.substr(tokens[i].begin, tokens[i].end - tokens[i].begin)
                                                                   : std::string_view();
  };
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    if (t.kind == TokenKind::Punctuation) {
      const char c = text[t.begin];
      if (c == '{' || c == '(' || c == '[') ++depth;
      if ((c == '}' || c == ')' || c == ']') && depth > 0) --depth;
      continue;
    }
    if (depth != 0 || t.kind != TokenKind::Word) continue;
    const std::string_view w = word(i);
    if (w == "import") {
      if (i + 1 < tokens.size() && tokens[i + 1].kind == TokenKind::String && tokens[i + 1].closed) {
        std::string line = "import " + std::string(text.substr(tokens[i + 1].begin, tokens[i + 1].end - tokens[i + 1].begin));
        if (word(i + 2) == "as" && !word(i + 3).empty()) line += " as " + std::string(word(i + 3));
        out.imports += line + "\n";
      }
      continue;
    }
    const std::string_view name = word(i + 1);
    if (name.empty() || isKeyword(name)) continue;
    if (w == "let") out.declarations.emplace_back(std::string(name), std::nullopt);
    else if (auto k = declKindNamed(w)) out.declarations.emplace_back(std::string(name), k);
  }
  return out;
}

}  // namespace ipu::lsp
