#include "interpreter/syntax/parser.h"

#include <algorithm>
#include <set>

#include "IpuLexer.h"
#include "IpuParser.h"
#include "interpreter/syntax/codes.h"
#include "interpreter/syntax/transformer.h"

namespace ipu::syntax {

using L = ipu_antlr::IpuLexer;
using P = ipu_antlr::IpuParser;

const std::vector<base::CodeInfo>& syntaxCodes() {
  static const std::vector<base::CodeInfo> codes = {
      {code::kUnexpectedToken, "unexpected token: the parser expected something else here"},
      {code::kUnexpectedCharacter, "a character that cannot start any token"},
      {code::kUnterminatedString, "a string literal without its closing quote"},
      {code::kUnclosedBracket, "an opening bracket that is never closed"},
      {code::kMismatchedBracket, "a closing bracket that does not match the open one"},
      {code::kInvalidUtf8, "the file is not valid UTF-8"},
      {code::kTooDeep, "nesting deeper than the front end accepts"},
      {code::kUnterminatedComment, "a `/*` comment without `*/`"},
      {code::kBadNumber, "a number too large to represent"},
      {code::kFileTooLarge, "a script larger than the front end accepts"},
      {code::kUnreadable, "a script that cannot be read"},
      {code::kBadEscape, "a string escape that means nothing (`\\q`)"},
  };
  return codes;
}

namespace {
// The generated lexer exposes its vocabulary only through an instance.
const antlr4::dfa::Vocabulary& vocabulary() {
  static antlr4::ANTLRInputStream empty("");
  static L lexer(&empty);
  return lexer.getVocabulary();
}
}  // namespace

const std::vector<std::string>& keywords() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> out;
    const antlr4::dfa::Vocabulary& vocab = vocabulary();
    for (std::size_t t = 1; t <= vocab.getMaxTokenType(); ++t) {
      std::string lit = vocab.getLiteralName(t);  // "'model'" for keywords and punctuation
      if (lit.size() < 3) continue;
      std::string word = lit.substr(1, lit.size() - 2);
      if (std::all_of(word.begin(), word.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
        out.push_back(word);
    }
    return out;
  }();
  return words;
}

namespace {

// Byte offset of every code point, plus one past the end. Fails on bad UTF-8
// (ANTLR's converter would throw), returning the offending offset.
bool indexCodePoints(const std::string& text, std::vector<std::uint32_t>& out, std::uint32_t& badOffset) {
  out.clear();
  out.reserve(text.size() + 1);
  std::size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > text.size()) {
      badOffset = static_cast<std::uint32_t>(i);
      return false;
    }
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) {
        badOffset = static_cast<std::uint32_t>(i);
        return false;
      }
    // Reject overlong encodings and surrogates: the converter rejects them too.
    unsigned cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      badOffset = static_cast<std::uint32_t>(i);
      return false;
    }
    out.push_back(static_cast<std::uint32_t>(i));
    i += len;
  }
  out.push_back(static_cast<std::uint32_t>(text.size()));
  return true;
}

std::string describeToken(antlr4::Token* tok) {
  if (tok == nullptr || tok->getType() == antlr4::Token::EOF) return "end of file";
  std::string text = tok->getText();
  if (text.size() > 30) text = text.substr(0, 27) + "...";
  switch (tok->getType()) {
    case L::IDENT: return "name `" + text + "`";
    case L::INT:
    case L::FLOAT: return "number `" + text + "`";
    case L::STRING:
    case L::TRIPLE_STRING: return "string";
    default: break;
  }
  if (!text.empty() && std::isalpha(static_cast<unsigned char>(text[0]))) return "keyword `" + text + "`";
  return "`" + text + "`";
}

std::string tokenName(std::size_t type) {
  switch (type) {
    case L::IDENT: return "a name";
    case L::INT: return "an integer";
    case L::FLOAT: return "a number";
    case L::STRING: return "a string";
    case L::TRIPLE_STRING: return "a string";
    case antlr4::Token::EOF: return "end of file";
    default: break;
  }
  std::string lit = vocabulary().getLiteralName(type);
  if (lit.size() >= 2) return "`" + lit.substr(1, lit.size() - 2) + "`";
  return vocabulary().getSymbolicName(type);
}

// Summarise an expected-token set the way a person would: "an expression",
// "a declaration", or a short list of tokens.
std::string describeExpected(const antlr4::misc::IntervalSet& set) {
  if (set.isEmpty()) return {};
  auto has = [&](std::size_t t) { return set.contains(t); };
  int exprStarts = 0;
  for (std::size_t t : {L::INT, L::FLOAT, L::STRING, L::IDENT, L::LBRACK, L::LPAREN, L::MINUS, L::NOT, L::IF, L::LUA})
    exprStarts += has(t) ? 1 : 0;
  int declStarts = 0;
  for (std::size_t t : {L::IMPORT, L::LET, L::MODEL, L::MAPPING, L::TRAINING, L::RUN, L::CHIP, L::POD})
    declStarts += has(t) ? 1 : 0;
  if (declStarts >= 6) return "a declaration (`import`, `let`, `model`, `mapping`, `training`, `run`, ...)";
  if (exprStarts >= 7) return "a value";
  if (has(L::IDENT) && has(L::PHASE) && has(L::MODEL) && has(L::RBRACE)) return "a field (`name: value`) or `}`";
  std::vector<std::string> names;
  for (const auto& interval : set.getIntervals())
    for (ssize_t t = interval.a; t <= interval.b && names.size() < 8; ++t)
      names.push_back(tokenName(static_cast<std::size_t>(t)));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() > 6) return {};
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

class LexerErrors : public antlr4::BaseErrorListener {
 public:
  LexerErrors(const base::SourceFile& file, base::FileId id, const std::vector<std::uint32_t>& cpToByte,
              base::Diagnostics& diags)
      : file_(file), id_(id), cpToByte_(cpToByte), diags_(diags) {}
  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token*, size_t, size_t, const std::string&,
                   std::exception_ptr) override {
    if (++count_ > 20) return;
    auto* lexer = static_cast<antlr4::Lexer*>(recognizer);
    std::size_t cp = std::min(lexer->tokenStartCharIndex, cpToByte_.size() - 1);
    std::uint32_t off = cpToByte_[cp];
    const std::string& text = file_.text();
    char c = off < text.size() ? text[off] : '\0';
    if (c == '"') {
      // An unterminated `"""` lexes as an empty string `""` and then a lone `"`.
      if (off >= 2 && text.compare(off - 2, 3, "\"\"\"") == 0) off -= 2;
      bool triple = text.compare(off, 3, "\"\"\"") == 0;
      diags_.error(code::kUnterminatedString, base::Span{id_, off, off + (triple ? 3u : 1u)},
                   triple ? "unterminated `\"\"\"` string" : "unterminated string",
                   triple ? "close it with `\"\"\"`"
                          : "close it with `\"` before the end of the line; use `\"\"\"` for text over several lines");
      return;
    }
    std::uint32_t len = cp + 1 < cpToByte_.size() ? cpToByte_[cp + 1] - off : 1;
    std::string shown = c == '\0' ? "\\0" : text.substr(off, len);
    diags_.error(code::kUnexpectedCharacter, base::Span{id_, off, off + len}, "unexpected character `" + shown + "`",
                 c == '#' ? "comments start with `//`" : c == '\'' ? "strings use double quotes: \"...\"" : "");
  }

 private:
  const base::SourceFile& file_;
  base::FileId id_;
  const std::vector<std::uint32_t>& cpToByte_;
  base::Diagnostics& diags_;
  int count_ = 0;
};

class ParserErrors : public antlr4::BaseErrorListener {
 public:
  ParserErrors(base::FileId id, const std::vector<std::uint32_t>& cpToByte, base::Diagnostics& diags)
      : id_(id), cpToByte_(cpToByte), diags_(diags) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t, size_t, const std::string& msg,
                   std::exception_ptr ep) override {
    if (++count_ > 20) return;
    auto* parser = static_cast<antlr4::Parser*>(recognizer);
    base::Span where = spanOf(offending);
    std::string found = describeToken(offending);
    std::string expected;
    try {
      if (ep) std::rethrow_exception(ep);
      expected = describeExpected(parser->getExpectedTokens());
    } catch (const antlr4::InputMismatchException& e) {
      expected = describeExpected(e.getExpectedTokens());
    } catch (const antlr4::NoViableAltException&) {
      expected.clear();
    } catch (...) {
      expected.clear();
    }
    std::string message;
    std::string help;
    if (msg.rfind("missing ", 0) == 0 && !expected.empty()) {
      message = "expected " + expected + " before " + found;
    } else if (!expected.empty()) {
      message = "expected " + expected + ", found " + found;
    } else {
      message = "unexpected " + found;
    }
    const std::string ctx = parser->getContext() != nullptr ? parser->getRuleNames()[parser->getContext()->getRuleIndex()] : "";
    if (offending != nullptr && offending->getType() == L::ASSIGN && (ctx == "member" || ctx == "block"))
      help = "fields are written `name: value`; `=` is for `let`, `layer` and declarations";
    else if (offending != nullptr && offending->getType() == L::COLON && ctx == "declaration")
      help = "declarations are written `kind name = value` or `kind name { ... }`";
    else if (offending != nullptr && offending->getType() == L::IDENT && expected.find("`:`") != std::string::npos)
      help = "a field needs `:` between its name and value";
    diags_.error(code::kUnexpectedToken, where, message, help);
  }

 private:
  base::Span spanOf(antlr4::Token* tok) const {
    if (tok == nullptr || tok->getType() == antlr4::Token::EOF) {
      std::uint32_t end = cpToByte_.back();
      return base::Span{id_, end, end};
    }
    std::size_t a = std::min(tok->getStartIndex(), cpToByte_.size() - 1);
    std::size_t b = std::min(tok->getStopIndex() + 1, cpToByte_.size() - 1);
    return base::Span{id_, cpToByte_[a], cpToByte_[std::max(a, b)]};
  }
  base::FileId id_;
  const std::vector<std::uint32_t>& cpToByte_;
  base::Diagnostics& diags_;
  int count_ = 0;
};

bool isOpen(std::size_t t) { return t == L::LPAREN || t == L::LBRACK || t == L::LBRACE; }
bool isClose(std::size_t t) { return t == L::RPAREN || t == L::RBRACK || t == L::RBRACE; }
std::size_t closerOf(std::size_t t) { return t == L::LPAREN ? L::RPAREN : t == L::LBRACK ? L::RBRACK : L::RBRACE; }
const char* closerText(std::size_t t) { return t == L::LPAREN ? ")" : t == L::LBRACK ? "]" : "}"; }

// Operators whose chains build deep trees (left- or right-recursive).
bool deepens(std::size_t t) {
  switch (t) {
    case L::PLUS: case L::MINUS: case L::STAR: case L::SLASH: case L::CARET: case L::DOT: case L::DOTDOT:
    case L::EQEQ: case L::NEQ: case L::LT: case L::LE: case L::GT: case L::GE: case L::AND: case L::OR:
    case L::NOT: case L::IF: case L::WITH: case L::THEN: case L::ELSE:
      return true;
    default:
      return false;
  }
}
bool resetsChain(std::size_t t) { return t == L::COMMA || t == L::SEMI || t == L::COLON || t == L::ASSIGN; }

}  // namespace

// Cap on input size: far beyond any real script, small enough that the parse
// stays fast and memory bounded.

namespace {
// Either a program or a value alone: the checks before ANTLR, the parse, the AST.
struct Parsed {
  std::unique_ptr<Program> program;
  ExprPtr value;
};
Parsed parseAs(const base::SourceMap& sources, base::FileId id, base::Diagnostics& diags, bool valueOnly);
}  // namespace

std::unique_ptr<Program> parse(const base::SourceMap& sources, base::FileId id, base::Diagnostics& diags) {
  return parseAs(sources, id, diags, false).program;
}

ExprPtr parseValue(const base::SourceMap& sources, base::FileId id, base::Diagnostics& diags) {
  return std::move(parseAs(sources, id, diags, true).value);
}

namespace {
Parsed parseAs(const base::SourceMap& sources, base::FileId id, base::Diagnostics& diags, bool valueOnly) {
  const base::SourceFile& file = sources.file(id);
  const std::string& text = file.text();
  const std::size_t errorsBefore = diags.errorCount();
  if (text.size() > base::kMaxSourceBytes) {
    char size[32];
    std::snprintf(size, sizeof size, "%.1f", static_cast<double>(text.size()) / (1 << 20));
    diags.error(code::kFileTooLarge, base::Span{id, 0, 0},
                "script is " + std::string(size) + " MiB (" + std::to_string(text.size()) + " bytes); the limit is 8 MiB",
                "split it into modules and `import` them");
    return {};
  }
  std::vector<std::uint32_t> cpToByte;
  std::uint32_t bad = 0;
  if (!indexCodePoints(text, cpToByte, bad)) {
    diags.error(code::kInvalidUtf8, base::Span{id, bad, bad + 1}, "invalid UTF-8 byte sequence",
                "save the file as UTF-8");
    return {};
  }

  antlr4::ANTLRInputStream input(text);
  L lexer(&input);
  lexer.removeErrorListeners();
  base::Diagnostics lexDiags;  // held back: those inside an unterminated comment are noise
  LexerErrors lexErrors(file, id, cpToByte, lexDiags);
  lexer.addErrorListener(&lexErrors);
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();

  auto spanOf = [&](antlr4::Token* tok) {
    std::size_t a = std::min(tok->getStartIndex(), cpToByte.size() - 1);
    std::size_t b = std::min(tok->getStopIndex() + 1, cpToByte.size() - 1);
    return base::Span{id, cpToByte[a], cpToByte[std::max(a, b)]};
  };

  // Pre-scan: brackets, unterminated comments, nesting depth.
  struct Open { antlr4::Token* tok; int chain; };
  std::vector<Open> stack;
  int chain = 0, depth = 0;
  bool structural = false;
  antlr4::Token* prev = nullptr;
  for (antlr4::Token* tok : tokens.getTokens()) {
    if (tok->getChannel() != antlr4::Token::DEFAULT_CHANNEL) continue;
    std::size_t t = tok->getType();
    if (t == antlr4::Token::EOF) break;
    if (prev != nullptr && prev->getType() == L::SLASH && t == L::STAR && prev->getStopIndex() + 1 == tok->getStartIndex()) {
      diags.error(code::kUnterminatedComment, spanOf(prev), "unterminated `/*` comment", "close it with `*/`");
      structural = true;
      break;
    }
    prev = tok;
    if (isOpen(t)) {
      stack.push_back({tok, chain});
      chain = 0;
      ++depth;
    } else if (isClose(t)) {
      if (stack.empty()) {
        diags.error(code::kMismatchedBracket, spanOf(tok), "unexpected `" + tok->getText() + "` with nothing open",
                    "remove it, or add the opening bracket it closes");
        structural = true;
        break;
      }
      std::size_t open = stack.back().tok->getType();
      if (closerOf(open) != t) {
        auto& d = diags.error(code::kMismatchedBracket, spanOf(tok),
                              "`" + tok->getText() + "` does not match `" + stack.back().tok->getText() + "`",
                              std::string("expected `") + closerText(open) + "`");
        d.addNote({spanOf(stack.back().tok), "the bracket opened here"});
        structural = true;
        break;
      }
      chain = stack.back().chain;
      stack.pop_back();
      --depth;
    } else if (resetsChain(t)) {
      chain = 0;
    } else if (deepens(t)) {
      ++chain;
    }
    int nesting = depth + chain;
    for (const auto& o : stack) nesting += o.chain;
    if (nesting > kMaxNesting) {
      diags.error(code::kTooDeep, spanOf(tok),
                  "expression nested too deeply (the limit is " + std::to_string(kMaxNesting) + " levels)",
                  "split it into `let` definitions");
      structural = true;
      break;
    }
  }
  std::uint32_t noiseFrom = ~0u;
  for (const auto& d : diags.all())
    if (d.code == std::string(code::kUnterminatedComment) && d.span.file == id) noiseFrom = std::min(noiseFrom, d.span.begin);
  for (const auto& d : lexDiags.all())
    if (d.span.begin < noiseFrom) diags.add(d);
  if (!structural && !stack.empty() && lexDiags.empty()) {
    const Open& o = stack.back();
    // Point at the last character of the file, not past its final newline.
    std::uint32_t end = cpToByte.back();
    while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
    std::uint32_t last = end > 0 ? end - 1 : 0;
    auto& d = diags.error(code::kUnclosedBracket, spanOf(o.tok),
                          "`" + o.tok->getText() + "` is never closed",
                          std::string("add `") + closerText(o.tok->getType()) + "` where it should end");
    d.addNote({base::Span{id, last, end}, "the file ends here"});
    structural = true;
  }
  if (diags.errorCount() > errorsBefore) return {};

  tokens.seek(0);
  P parser(&tokens);
  parser.removeErrorListeners();
  ParserErrors parseErrors(id, cpToByte, diags);
  // Two stages, as ANTLR recommends: the faster SLL prediction, which is
  // exact on every input it accepts, and only when it gives up (a syntax
  // error, or a construct SLL cannot decide) full LL with error recovery and
  // the diagnostics, from the start.
  auto parseWith = [&](auto rule) {
    auto* simulator = parser.template getInterpreter<antlr4::atn::ParserATNSimulator>();
    simulator->setPredictionMode(antlr4::atn::PredictionMode::SLL);
    parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
    try {
      return (parser.*rule)();
    } catch (const antlr4::ParseCancellationException&) {
    }
    tokens.seek(0);
    parser.reset();
    simulator->setPredictionMode(antlr4::atn::PredictionMode::LL);
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.addErrorListener(&parseErrors);
    return (parser.*rule)();
  };
  Transformer transformer(id, cpToByte, diags);
  if (valueOnly) {
    P::ValueOnlyContext* tree = parseWith(&P::valueOnly);
    if (diags.errorCount() > errorsBefore) return {};
    Parsed out;
    out.value = transformer.transformValueOnly(*tree);
    if (diags.errorCount() > errorsBefore) return {};
    return out;
  }
  P::ProgramContext* tree = parseWith(&P::program);
  if (diags.errorCount() > errorsBefore) return {};
  auto program = transformer.transformProgram(*tree);
  for (antlr4::Token* tok : tokens.getTokens()) {
    if (tok->getChannel() == antlr4::Token::HIDDEN_CHANNEL &&
        (tok->getType() == L::LINE_COMMENT || tok->getType() == L::BLOCK_COMMENT))
      program->comments.push_back(Comment{spanOf(tok), tok->getText()});
  }
  if (diags.errorCount() > errorsBefore) return {};
  Parsed out;
  out.program = std::move(program);
  return out;
}
}  // namespace


bool isIncomplete(std::string_view text) {
  std::vector<char> stack;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      std::size_t end = text.find("*/", i + 2);
      if (end == std::string_view::npos) return true;
      i = end + 1;
    } else if (text.compare(i, 3, "\"\"\"") == 0) {
      std::size_t end = text.find("\"\"\"", i + 3);
      if (end == std::string_view::npos) return true;
      i = end + 2;
    } else if (c == '"') {
      ++i;
      while (i < text.size() && text[i] != '"' && text[i] != '\n') i += text[i] == '\\' ? 2 : 1;
    } else if (c == '(' || c == '[' || c == '{') {
      stack.push_back(c);
    } else if (c == ')' || c == ']' || c == '}') {
      if (stack.empty()) return false;  // an error, not an incomplete input
      stack.pop_back();
    }
  }
  return !stack.empty();
}

}  // namespace ipu::syntax
