#include "interpreter/store/filter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <set>

#include "interpreter/base/diagnostic.h"

namespace ipu::store {

// ------------------------------------------------------------------ fields

namespace {

struct Builtin {
  const char* name;
  FieldKind kind;
};
constexpr Builtin kBuiltins[] = {
    {"id", FieldKind::Id},           {"name", FieldKind::Name},         {"kind", FieldKind::Kind},
    {"status", FieldKind::Status},   {"training", FieldKind::Training}, {"host", FieldKind::Host},
    {"note", FieldKind::Note},       {"plan_hash", FieldKind::PlanHash}, {"started", FieldKind::Started},
    {"ended", FieldKind::Ended},     {"duration", FieldKind::Duration}, {"tag", FieldKind::Tag},
    {"tags", FieldKind::Tag},
};

bool parseNumber(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end != nullptr && *end == '\0' && !std::isspace(static_cast<unsigned char>(s[0]));
}

FieldValue textValue(const std::string& s) {
  FieldValue v;
  v.present = true;
  v.text = s;
  v.numeric = parseNumber(s, v.number);
  return v;
}

FieldValue numberValue(double x) {
  FieldValue v;
  if (std::isnan(x)) return v;
  v.present = true;
  v.numeric = true;
  v.number = x;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  v.text = buf;
  return v;
}

}  // namespace

FieldResolver::FieldResolver(const std::vector<RunRecord>& runs) {
  std::set<std::string> params, metrics;
  for (const auto& r : runs) {
    for (const auto& [k, v] : r.parameters) params.insert(k);
    for (const auto& [k, v] : r.metrics) metrics.insert(k);
  }
  parameters_.assign(params.begin(), params.end());
  metrics_.assign(metrics.begin(), metrics.end());
}

std::optional<Field> FieldResolver::resolve(const std::string& name) const {
  Field f;
  f.label = name;
  auto isParam = [&](const std::string& k) { return std::binary_search(parameters_.begin(), parameters_.end(), k); };
  auto isMetric = [&](const std::string& k) { return std::binary_search(metrics_.begin(), metrics_.end(), k); };
  auto metric = [&](const std::string& k) -> std::optional<Field> {
    if (isMetric(k)) {
      f.kind = FieldKind::Metric;
      f.key = k;
      return f;
    }
    static const std::pair<const char*, MetricPart> parts[] = {
        {".last", MetricPart::Latest}, {".latest", MetricPart::Latest}, {".min", MetricPart::Min},
        {".max", MetricPart::Max},     {".count", MetricPart::Count}};
    for (const auto& [suffix, part] : parts) {
      std::string s = suffix;
      if (k.size() > s.size() && k.compare(k.size() - s.size(), s.size(), s) == 0 &&
          isMetric(k.substr(0, k.size() - s.size()))) {
        f.kind = FieldKind::Metric;
        f.key = k.substr(0, k.size() - s.size());
        f.part = part;
        return f;
      }
    }
    return std::nullopt;
  };
  for (const char* prefix : {"params.", "param.", "parameters."}) {
    std::string p = prefix;
    if (name.rfind(p, 0) == 0 && isParam(name.substr(p.size()))) {
      f.kind = FieldKind::Parameter;
      f.key = name.substr(p.size());
      return f;
    }
  }
  for (const char* prefix : {"metrics.", "metric."}) {
    std::string p = prefix;
    if (name.rfind(p, 0) == 0)
      if (auto m = metric(name.substr(p.size()))) return m;
  }
  for (const auto& b : kBuiltins)
    if (name == b.name) {
      f.kind = b.kind;
      return f;
    }
  if (isParam(name)) {
    f.kind = FieldKind::Parameter;
    f.key = name;
    return f;
  }
  return metric(name);
}

std::vector<std::string> FieldResolver::names() const {
  std::vector<std::string> out;
  for (const auto& b : kBuiltins) out.push_back(b.name);
  out.insert(out.end(), parameters_.begin(), parameters_.end());
  out.insert(out.end(), metrics_.begin(), metrics_.end());
  return out;
}

std::string FieldResolver::unknownNameHelp(const std::string& written) const {
  // Parameters of a phase are `phases.NAME.X` (the plan's word); `phase.` is a slip of it.
  std::string name = written;
  if (name.rfind("phase.", 0) == 0) name = "phases." + name.substr(6);
  auto near = [&](const std::vector<std::string>& found, const std::string& what) {
    std::string s;
    for (std::size_t i = 0; i < found.size() && i < 4; ++i) s += (i ? ", " : "") + std::string("`") + found[i] + "`";
    if (found.size() > 4) s += ", ...";
    return what + ": " + s + ".";
  };
  // A value shared by every phase is also under its plain name; one that
  // differs between phases is only under `phases.NAME.`.
  std::vector<std::string> perPhase, below;
  for (const auto& p : parameters_) {
    if (p.rfind("phases.", 0) == 0) {
      const auto dot = p.find('.', 7);
      if (dot != std::string::npos && p.compare(dot + 1, std::string::npos, name) == 0) perPhase.push_back(p);
    }
    if (p.size() > name.size() + 1 && p.compare(0, name.size(), name) == 0 && p[name.size()] == '.') below.push_back(p);
  }
  std::string help;
  if (name != written && std::find(parameters_.begin(), parameters_.end(), name) != parameters_.end())
    help = "did you mean `" + name + "`?";
  else if (!perPhase.empty())
    help = near(perPhase, "`" + name + "` differs between the phases of these runs, so it is named per phase");
  else if (!below.empty())
    help = near(below, "`" + name + "` is a group of parameters");
  else
    help = base::didYouMean(name, names());
  std::string some = "built-in: id, name, kind, status, training, host, note, plan_hash, started, ended, duration, tag";
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 8) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  if (!metrics_.empty()) some += "; metrics: " + list(metrics_);
  if (!parameters_.empty()) some += "; parameters: " + list(parameters_);
  if (parameters_.empty() && metrics_.empty()) some += "; the store has no runs with parameters or metrics yet";
  return (help.empty() ? std::string() : help + " ") + "Names: " + some + " (`ipu runs show ID` lists a run's)";
}

FieldValue FieldResolver::value(const RunRecord& r, const Field& f) {
  switch (f.kind) {
    case FieldKind::Id: return numberValue(static_cast<double>(r.id));
    case FieldKind::Name: return textValue(r.name);
    case FieldKind::Kind: return textValue(name(r.kind));
    case FieldKind::Status: return textValue(name(r.status));
    case FieldKind::Training: return textValue(r.training);
    case FieldKind::Host: return textValue(r.host);
    case FieldKind::Note: return textValue(r.note);
    case FieldKind::PlanHash: return textValue(r.planHash);
    case FieldKind::Started: return numberValue(r.startedAt);
    case FieldKind::Ended: return numberValue(r.endedAt);
    case FieldKind::Duration:
      return numberValue((std::isnan(r.endedAt) ? (r.status == RunStatus::Running ? nowSeconds() : r.heartbeatAt)
                                                : r.endedAt) -
                         r.startedAt);
    case FieldKind::Tag: {
      FieldValue v;
      v.present = true;
      for (std::size_t i = 0; i < r.tags.size(); ++i) v.text += (i ? "," : "") + r.tags[i];
      return v;
    }
    case FieldKind::Parameter: {
      auto it = r.parameters.find(f.key);
      return it == r.parameters.end() ? FieldValue{} : textValue(it->second);
    }
    case FieldKind::Metric: {
      auto it = r.metrics.find(f.key);
      if (it == r.metrics.end()) return {};
      const MetricSummary& s = it->second;
      switch (f.part) {
        case MetricPart::Latest: return numberValue(s.last);
        case MetricPart::Min: return numberValue(s.min);
        case MetricPart::Max: return numberValue(s.max);
        case MetricPart::Count: return numberValue(static_cast<double>(s.count));
      }
    }
  }
  return {};
}

std::string FieldResolver::format(const RunRecord& r, const Field& f) {
  if (f.kind == FieldKind::Started) return formatTime(r.startedAt);
  if (f.kind == FieldKind::Ended) return formatTime(r.endedAt);
  FieldValue v = value(r, f);
  if (!v.present) return "";
  if (f.kind == FieldKind::Duration) return formatDuration(v.number);
  if (v.numeric && f.kind == FieldKind::Metric) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.5g", v.number);
    return buf;
  }
  return v.text;
}

std::string formatTime(double seconds) {
  if (std::isnan(seconds)) return "";
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string formatDuration(double s) {
  if (std::isnan(s) || s < 0) return "";
  char buf[40];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else {
    long long n = static_cast<long long>(s);
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", n / 3600, n / 60 % 60, n % 60);
  }
  return buf;
}

// ------------------------------------------------------------------ parsing

enum class Op { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn, And, Or, Not };

struct Filter::Node {
  Op op = Op::And;
  Field field;                            // comparisons
  std::vector<FieldValue> values;         // comparisons: one, or the IN list
  std::unique_ptr<Node> left, right;      // And, Or; Not uses left
};

namespace {

enum class Tok { Name, String, Number, LParen, RParen, Comma, Cmp, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;
  std::size_t at = 0, length = 0;
};

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '[' || c == ']' ||
         c == '-' || c == ':' || c == '/';
}

bool keyword(const Token& t, const char* word) {
  if (t.kind != Tok::Name || t.text.size() != std::char_traits<char>::length(word)) return false;
  for (std::size_t i = 0; i < t.text.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(t.text[i])) != word[i]) return false;
  return true;
}

class Parser {
 public:
  Parser(const std::string& text, const FieldResolver& names) : text_(text), names_(names) {}

  std::unique_ptr<Filter::Node> parse() {
    tokenize();
    if (failed()) return nullptr;
    if (tokens_.front().kind == Tok::End) {
      fail(0, 1, "the filter is empty", "write a condition, e.g. `status = finished`");
      return nullptr;
    }
    auto root = orExpr();
    if (!failed() && peek().kind != Tok::End) {
      const Token& t = peek();
      if (t.kind == Tok::RParen) fail(t.at, t.length, "this `)` has no `(` to close", "remove it, or add the `(`");
      else fail(t.at, t.length, "expected AND, OR or the end of the filter, found `" + t.text + "`",
                "join conditions with AND or OR");
    }
    return failed() ? nullptr : std::move(root);
  }

  bool failed() const { return error_.has_value(); }
  const FilterError& error() const { return *error_; }

 private:
  void fail(std::size_t at, std::size_t length, std::string message, std::string help = "") {
    if (!error_) error_ = FilterError{std::move(message), at, std::max<std::size_t>(length, 1), std::move(help)};
  }

  void tokenize() {
    std::size_t i = 0;
    while (i < text_.size()) {
      char c = text_[i];
      if (std::isspace(static_cast<unsigned char>(c)) != 0) {
        ++i;
        continue;
      }
      Token t;
      t.at = i;
      if (c == '(' || c == ')' || c == ',') {
        t.kind = c == '(' ? Tok::LParen : c == ')' ? Tok::RParen : Tok::Comma;
        t.text = std::string(1, c);
        ++i;
      } else if (c == '\'' || c == '"' || c == '`') {
        std::size_t j = i + 1;
        std::string s;
        while (j < text_.size() && text_[j] != c) s += text_[j++];
        if (j >= text_.size()) {
          fail(i, text_.size() - i, "this quoted text is not closed", std::string("end it with ") + c);
          return;
        }
        t.kind = c == '`' ? Tok::Name : Tok::String;
        t.text = s;
        i = j + 1;
      } else if (c == '=' || c == '!' || c == '<' || c == '>') {
        std::string op(1, c);
        if (i + 1 < text_.size() && (text_[i + 1] == '=' || (c == '<' && text_[i + 1] == '>'))) op += text_[i + 1];
        if (op == "!") {
          fail(i, 1, "`!` alone is not an operator", "write `!=` for not equal, or NOT before a condition");
          return;
        }
        t.kind = Tok::Cmp;
        t.text = op;
        i += op.size();
      } else if (isNameChar(c) || c == '+') {
        std::size_t j = i;
        while (j < text_.size() && (isNameChar(text_[j]) || ((text_[j] == '+' || text_[j] == '-') && j > i &&
                                                              (text_[j - 1] == 'e' || text_[j - 1] == 'E'))))
          ++j;
        if (c == '+') ++j;
        t.text = text_.substr(i, j - i);
        double x = 0;
        t.kind = parseNumber(t.text, x) ? Tok::Number : Tok::Name;
        i = j;
      } else {
        fail(i, 1, std::string("unexpected `") + c + "` in the filter",
             "compare names with = != < <= > >=, combine with AND OR NOT, quote text with '...'");
        return;
      }
      t.length = i - t.at;
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.at = text_.size();
    tokens_.push_back(end);
  }

  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

  std::unique_ptr<Filter::Node> binary(Op op, std::unique_ptr<Filter::Node> l, std::unique_ptr<Filter::Node> r) {
    auto n = std::make_unique<Filter::Node>();
    n->op = op;
    n->left = std::move(l);
    n->right = std::move(r);
    return n;
  }

  std::unique_ptr<Filter::Node> orExpr() {
    auto l = andExpr();
    while (!failed() && keyword(peek(), "OR")) {
      next();
      l = binary(Op::Or, std::move(l), andExpr());
    }
    return l;
  }
  std::unique_ptr<Filter::Node> andExpr() {
    auto l = notExpr();
    while (!failed() && keyword(peek(), "AND")) {
      next();
      l = binary(Op::And, std::move(l), notExpr());
    }
    return l;
  }
  std::unique_ptr<Filter::Node> notExpr() {
    if (failed()) return nullptr;
    // Nesting is recursion: bound it, so no filter can overflow the stack.
    if (++depth_ > kMaxDepth) {
      fail(peek().at, peek().length, "the filter nests deeper than " + std::to_string(kMaxDepth) + " levels",
           "write it with fewer parentheses and NOTs");
      return nullptr;
    }
    std::unique_ptr<Filter::Node> n;
    if (keyword(peek(), "NOT")) {
      next();
      n = binary(Op::Not, notExpr(), nullptr);
    } else {
      n = primary();
    }
    --depth_;
    return n;
  }
  std::unique_ptr<Filter::Node> primary() {
    if (failed()) return nullptr;
    const Token& t = peek();
    if (t.kind == Tok::LParen) {
      const Token open = next();
      auto inner = orExpr();
      if (failed()) return nullptr;
      if (peek().kind != Tok::RParen) {
        fail(peek().at, peek().length, "expected `)` to close the `(` at column " + std::to_string(open.at + 1),
             "add the missing `)`");
        return nullptr;
      }
      next();
      return inner;
    }
    if (t.kind != Tok::Name) {
      fail(t.at, t.length,
           t.kind == Tok::End ? "the filter ends where a condition should start"
                              : "expected a name to compare, found `" + t.text + "`",
           "a condition is NAME OP VALUE, e.g. `mapping.replicas >= 4`");
      return nullptr;
    }
    const Token nameTok = next();
    if (keyword(nameTok, "AND") || keyword(nameTok, "OR")) {
      fail(nameTok.at, nameTok.length, "expected a condition before " + nameTok.text,
           "a condition is NAME OP VALUE, e.g. `status = finished`");
      return nullptr;
    }
    auto field = names_.resolve(nameTok.text);
    if (!field) {
      fail(nameTok.at, nameTok.length, "no run has `" + nameTok.text + "`", names_.unknownNameHelp(nameTok.text));
      return nullptr;
    }
    auto n = std::make_unique<Filter::Node>();
    n->field = *field;
    const Token& opTok = peek();
    if (keyword(opTok, "IN") || keyword(opTok, "NOT")) {
      bool negated = keyword(opTok, "NOT");
      next();
      if (negated && !keyword(peek(), "IN")) {
        fail(peek().at, peek().length, "expected IN after NOT here", "write `NAME NOT IN (a, b)`, or NOT before the condition");
        return nullptr;
      }
      if (negated) next();
      n->op = negated ? Op::NotIn : Op::In;
      if (peek().kind != Tok::LParen) {
        fail(peek().at, peek().length, "expected `(` and a list of values after IN", "e.g. `mapping.replicas IN (2, 4)`");
        return nullptr;
      }
      next();
      for (;;) {
        auto v = value(*field);
        if (failed()) return nullptr;
        n->values.push_back(*v);
        if (peek().kind == Tok::Comma) {
          next();
          continue;
        }
        if (peek().kind == Tok::RParen) {
          next();
          break;
        }
        fail(peek().at, peek().length, "expected `,` or `)` in the IN list", "separate values with commas and close with `)`");
        return nullptr;
      }
      return n;
    }
    if (opTok.kind != Tok::Cmp) {
      fail(opTok.at, opTok.length,
           opTok.kind == Tok::End ? "the condition on `" + nameTok.text + "` has no comparison"
                                  : "expected a comparison after `" + nameTok.text + "`, found `" + opTok.text + "`",
           "compare with = != < <= > >= or IN (...)");
      return nullptr;
    }
    next();
    const std::string& o = opTok.text;
    n->op = (o == "=" || o == "==") ? Op::Eq : (o == "!=" || o == "<>") ? Op::Ne : o == "<" ? Op::Lt
            : o == "<=" ? Op::Le : o == ">" ? Op::Gt : Op::Ge;
    auto v = value(*field);
    if (failed()) return nullptr;
    n->values.push_back(*v);
    if (field->kind == FieldKind::Tag && n->op != Op::Eq && n->op != Op::Ne) {
      fail(opTok.at, opTok.length, "a tag is either there or not: compare `tag` with = or != (or IN)");
      return nullptr;
    }
    return n;
  }

  std::optional<FieldValue> value(const Field& field) {
    const Token& t = peek();
    if (t.kind != Tok::String && t.kind != Tok::Number && t.kind != Tok::Name) {
      fail(t.at, t.length, t.kind == Tok::End ? "the filter ends where a value should be" : "expected a value, found `" + t.text + "`",
           "a value is a number, a name, or text in quotes");
      return std::nullopt;
    }
    if (t.kind == Tok::Name && (keyword(t, "AND") || keyword(t, "OR") || keyword(t, "NOT") || keyword(t, "IN"))) {
      fail(t.at, t.length, "expected a value, found " + t.text, "quote it ('" + t.text + "') if it is a value");
      return std::nullopt;
    }
    const Token tok = next();
    FieldValue v = textValue(tok.text);
    if (field.kind == FieldKind::Status && !parseRunStatus(tok.text)) {
      fail(tok.at, tok.length, "`" + tok.text + "` is not a status",
           "statuses: running, finished, failed, stopped, cancelled, killed");
      return std::nullopt;
    }
    if (field.kind == FieldKind::Kind && !parseRunKind(tok.text)) {
      fail(tok.at, tok.length, "`" + tok.text + "` is not a kind of run", "kinds: run, estimate");
      return std::nullopt;
    }
    if ((field.kind == FieldKind::Started || field.kind == FieldKind::Ended) && !v.numeric) {
      auto t2 = parseTime(tok.text);
      if (!t2) {
        fail(tok.at, tok.length, "`" + tok.text + "` is not a time",
             "write a date and time ('2026-11-21', '2026-11-21 08:30'), or an age ('2h' ago: -2h; units s m h d)");
        return std::nullopt;
      }
      v = numberValue(*t2);
    }
    if (field.kind == FieldKind::Duration && !v.numeric) {
      auto d = parseAge(tok.text);
      if (!d) {
        fail(tok.at, tok.length, "`" + tok.text + "` is not a duration", "write seconds (600) or 10m, 2h, 1d");
        return std::nullopt;
      }
      v = numberValue(*d);
    }
    if (field.kind == FieldKind::Metric && !v.numeric) {
      fail(tok.at, tok.length, "metric `" + field.label + "` is a number; `" + tok.text + "` is not",
           "compare it with a number");
      return std::nullopt;
    }
    return v;
  }

  // 90, 10m, 2h, 1d -> seconds
  static std::optional<double> parseAge(const std::string& s) {
    if (s.empty()) return std::nullopt;
    char unit = s.back();
    double mult = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 0;
    double x = 0;
    if (mult == 0 || !parseNumber(s.substr(0, s.size() - 1), x)) return std::nullopt;
    return x * mult;
  }

  // '2026-11-21', '2026-11-21 08:30[:15]', '2026-11-21T08:30', or -2h (now minus an age)
  static std::optional<double> parseTime(const std::string& s) {
    if (!s.empty() && s[0] == '-') {
      auto age = parseAge(s.substr(1));
      if (!age) return std::nullopt;
      return nowSeconds() - *age;
    }
    std::tm tm{};
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    char sep = 0;
    int n = std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &y, &mo, &d, &sep, &h, &mi, &sec);
    if (n != 3 && n != 6 && n != 7) return std::nullopt;
    if (n > 3 && sep != ' ' && sep != 'T') return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    std::time_t t = std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1)) return std::nullopt;
    return static_cast<double>(t);
  }

  const std::string& text_;
  const FieldResolver& names_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  static constexpr int kMaxDepth = 200;
  std::optional<FilterError> error_;
};

bool equal(const FieldValue& a, const FieldValue& b) {
  if (a.numeric && b.numeric) return a.number == b.number;
  return a.text == b.text;
}

// A comparison with a missing value is false (so NOT of it is true).
bool compare(Op op, const FieldValue& a, const FieldValue& b) {
  if (!a.present) return false;
  if (op == Op::Eq) return equal(a, b);
  if (op == Op::Ne) return !equal(a, b);
  int c = 0;
  if (a.numeric && b.numeric) c = a.number < b.number ? -1 : a.number > b.number ? 1 : 0;
  else c = a.text.compare(b.text) < 0 ? -1 : a.text.compare(b.text) > 0 ? 1 : 0;
  switch (op) {
    case Op::Lt: return c < 0;
    case Op::Le: return c <= 0;
    case Op::Gt: return c > 0;
    case Op::Ge: return c >= 0;
    default: return false;
  }
}

bool evaluate(const Filter::Node& n, const RunRecord& r) {
  switch (n.op) {
    case Op::And: return evaluate(*n.left, r) && evaluate(*n.right, r);
    case Op::Or: return evaluate(*n.left, r) || evaluate(*n.right, r);
    case Op::Not: return !evaluate(*n.left, r);
    default: break;
  }
  if (n.field.kind == FieldKind::Tag) {
    auto has = [&](const FieldValue& v) { return std::find(r.tags.begin(), r.tags.end(), v.text) != r.tags.end(); };
    bool any = std::any_of(n.values.begin(), n.values.end(), has);
    return (n.op == Op::Eq || n.op == Op::In) ? any : !any;
  }
  FieldValue v = FieldResolver::value(r, n.field);
  if (n.op == Op::In || n.op == Op::NotIn) {
    if (!v.present) return false;
    bool any = std::any_of(n.values.begin(), n.values.end(), [&](const FieldValue& x) { return equal(v, x); });
    return n.op == Op::In ? any : !any;
  }
  return compare(n.op, v, n.values[0]);
}

}  // namespace

Filter::Filter(std::unique_ptr<Node> root) : root_(std::move(root)) {}
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;
Filter::~Filter() = default;

std::variant<Filter, FilterError> Filter::parse(const std::string& text, const FieldResolver& names) {
  Parser p(text, names);
  auto root = p.parse();
  if (p.failed()) return p.error();
  return Filter(std::move(root));
}

bool Filter::matches(const RunRecord& run) const { return evaluate(*root_, run); }

std::string renderFilterError(const std::string& text, const FilterError& e, const std::string& indent) {
  std::string out = indent + text + "\n" + indent;
  for (std::size_t i = 0; i < e.offset && i < text.size(); ++i) out += text[i] == '\t' ? '\t' : ' ';
  std::size_t len = std::min(e.length, text.size() > e.offset ? text.size() - e.offset : std::size_t{1});
  out += std::string(std::max<std::size_t>(len, 1), '^') + "\n";
  return out;
}

}  // namespace ipu::store
