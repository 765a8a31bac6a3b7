#include "interpreter/syntax/printer.h"

#include <algorithm>
#include <sstream>

namespace ipu::syntax {

namespace {

constexpr std::size_t kLineWidth = 100;

int precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Schedule: return -1;
    case ExprKind::If: return 0;
    case ExprKind::Binary:
      switch (e.as<BinaryExpr>().op) {
        case BinaryOp::Or: return 1;
        case BinaryOp::And: return 2;
        case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt:
        case BinaryOp::Ge: return 4;
        case BinaryOp::Add: case BinaryOp::Sub: return 6;
        case BinaryOp::Mul: case BinaryOp::Div: return 7;
        case BinaryOp::Pow: return 9;
      }
      return 0;
    case ExprKind::Unary: return e.as<UnaryExpr>().op == UnaryOp::Not ? 3 : 8;
    case ExprKind::Range: return 5;
    case ExprKind::Member: case ExprKind::Index: case ExprKind::Call: case ExprKind::With: return 10;
    default: return 11;
  }
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
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
  return out + "\"";
}

class Printer {
 public:
  explicit Printer(const Program* program, const base::SourceMap* sources) : sources_(sources) {
    if (program != nullptr) {
      comments_ = &program->comments;
      if (sources != nullptr) file_ = sources->find(program->file);
    }
  }

  std::string program(const Program& p) {
    const Item* prev = nullptr;
    for (std::size_t i = 0; i < p.items.size(); ++i) {
      const Item& item = *p.items[i];
      bool forced = prev != nullptr && wantBlankLine(*prev, item);
      leadingComments(item.span.begin, 0, forced);
      printItem(item);
      lastEnd_ = item.span.end;
      std::uint32_t next = i + 1 < p.items.size() ? p.items[i + 1]->span.begin : ~0u;
      trailingComment(item.span.end, next);
      out_ << '\n';
      prev = &item;
    }
    leadingComments(~0u, 0, false);
    std::string s = out_.str();
    while (s.size() >= 2 && s[s.size() - 1] == '\n' && s[s.size() - 2] == '\n') s.pop_back();
    return s;
  }

  std::string expr(const Expr& e) {
    printExpr(e, -2, 0);
    return out_.str();
  }

 private:
  // ------------------------------------------------------------- layout helpers
  void indent(int level) { out_ << std::string(static_cast<std::size_t>(level) * 2, ' '); }

  std::uint32_t lineOf(std::uint32_t offset) const { return file_ == nullptr ? 0 : file_->lineCol(offset).line; }

  // Did the author leave an empty line between two nodes? (Kept, at most one.)
  bool blankLineBetween(std::uint32_t endOffset, std::uint32_t beginOffset) const {
    if (file_ == nullptr || beginOffset <= endOffset) return false;
    const std::string& t = file_->text();
    bool sawNewline = false;
    for (std::uint32_t i = endOffset; i < beginOffset && i < t.size(); ++i) {
      char c = t[i];
      if (c == '\n') {
        if (sawNewline) return true;
        sawNewline = true;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        sawNewline = false;
      }
    }
    return false;
  }

  bool wantBlankLine(const Item& prev, const Item& next) const {
    auto multi = [](const Item& i) {
      const auto* d = i.dyn<Declaration>();
      return d != nullptr && d->body != nullptr;
    };
    if (multi(prev) || multi(next)) return true;
    return prev.kind != next.kind;
  }

  // Own-line comments before `offset`, then the gap before the node there. A
  // blank line the author left (or the canonical one, `forced`) goes before
  // the first comment, so a comment stays with what it describes.
  void leadingComments(std::uint32_t offset, int level, bool forced) {
    bool first = true;
    if (comments_ != nullptr)
      while (next_ < comments_->size() && (*comments_)[next_].span.begin < offset) {
        const Comment& c = (*comments_)[next_];
        if (printedAny_ && ((first && forced) || blankLineBetween(lastEnd_, c.span.begin))) out_ << '\n';
        indent(level);
        out_ << c.text << '\n';
        lastEnd_ = c.span.end;
        printedAny_ = true;
        first = false;
        ++next_;
      }
    if (offset == ~0u) return;
    if (printedAny_ && ((first && forced) || blankLineBetween(lastEnd_, offset))) out_ << '\n';
    printedAny_ = true;
  }

  // A `//` comment on the line where a node ends stays at the end of that
  // line, unless the next node starts on the same line (then it belongs there).
  void trailingComment(std::uint32_t endOffset, std::uint32_t nextBegin) {
    if (comments_ == nullptr || file_ == nullptr) return;
    std::uint32_t line = lineOf(endOffset > 0 ? endOffset - 1 : 0);
    if (nextBegin != ~0u && lineOf(nextBegin) == line) return;
    while (next_ < comments_->size() && (*comments_)[next_].span.begin >= endOffset &&
           lineOf((*comments_)[next_].span.begin) == line && (*comments_)[next_].text.rfind("//", 0) == 0) {
      out_ << "  " << (*comments_)[next_].text;
      lastEnd_ = (*comments_)[next_].span.end;
      ++next_;
    }
  }

  // -------------------------------------------------------------------- items
  void printItem(const Item& item) {
    switch (item.kind) {
      case ItemKind::Import: {
        const auto& i = item.as<ImportItem>();
        out_ << "import " << quote(i.path);
        if (!i.alias.empty()) out_ << " as " << i.alias;
        break;
      }
      case ItemKind::Let: {
        const auto& l = item.as<LetItem>();
        out_ << "let " << l.name << " = ";
        printExpr(*l.value, -2, 0);
        break;
      }
      case ItemKind::Run:
        out_ << "run " << item.as<RunItem>().name;
        break;
      case ItemKind::Declaration:
        printDeclaration(item.as<Declaration>());
        break;
    }
  }

  void printDeclaration(const Declaration& d) {
    out_ << spelling(d.declKind) << ' ' << d.name;
    if (d.hasParams) {
      out_ << '(';
      for (std::size_t i = 0; i < d.params.size(); ++i) {
        if (i) out_ << ", ";
        const Param& p = d.params[i];
        out_ << p.name;
        if (!p.type.empty()) out_ << ": " << p.type;
        if (p.dflt) {
          out_ << " = ";
          printExpr(*p.dflt, 1, 0);
        }
      }
      out_ << ')';
    }
    if (d.forExpr) {
      out_ << " for ";
      printExpr(*d.forExpr, 10, 0);
    }
    if (d.onExpr) {
      out_ << " on ";
      printExpr(*d.onExpr, 10, 0);
    }
    if (d.value) {
      out_ << " = ";
      printExpr(*d.value, -2, 0);
    } else if (d.body) {
      out_ << ' ';
      printBlockMultiline(*d.body, 0);
    }
  }

  // ------------------------------------------------------------------- blocks
  void printBlockMultiline(const Block& b, int level) {
    out_ << '{';
    lastEnd_ = b.span.begin + 1;
    std::uint32_t first = b.members.empty() ? b.span.end : b.members.front()->span.begin;
    trailingComment(b.span.begin + 1, first);
    out_ << '\n';
    printedAny_ = false;  // no blank line right after `{`
    for (std::size_t i = 0; i < b.members.size(); ++i) {
      const Member& m = *b.members[i];
      leadingComments(m.span.begin, level + 1, false);
      indent(level + 1);
      printMember(m, level + 1);
      lastEnd_ = m.span.end;
      std::uint32_t next = i + 1 < b.members.size() ? b.members[i + 1]->span.begin : b.span.end - 1;
      trailingComment(m.span.end, next);
      out_ << '\n';
    }
    // Comments before the closing brace, without a blank line before `}`.
    if (comments_ != nullptr)
      while (next_ < comments_->size() && (*comments_)[next_].span.begin < b.span.end) {
        const Comment& c = (*comments_)[next_];
        if (printedAny_ && blankLineBetween(lastEnd_, c.span.begin)) out_ << '\n';
        indent(level + 1);
        out_ << c.text << '\n';
        lastEnd_ = c.span.end;
        printedAny_ = true;
        ++next_;
      }
    indent(level);
    out_ << '}';
    lastEnd_ = b.span.end;
    printedAny_ = true;
  }

  bool inlineable(const Block& b) const {
    for (const auto& m : b.members)
      if (m->kind != MemberKind::Field) return false;
    if (comments_ != nullptr)
      for (const auto& c : *comments_)
        if (c.span.begin > b.span.begin && c.span.begin < b.span.end) return false;
    return true;
  }

  // Records and `with` blocks go on one line when they are short and flat.
  void printBlockValue(const Block& b, int level) {
    if (b.members.empty()) {
      out_ << "{}";
      return;
    }
    if (inlineable(b)) {
      Printer probe(nullptr, nullptr);
      probe.out_ << "{ ";
      for (std::size_t i = 0; i < b.members.size(); ++i) {
        if (i) probe.out_ << ", ";
        probe.printMember(*b.members[i], 0);
      }
      probe.out_ << " }";
      std::string one = probe.out_.str();
      if (one.find('\n') == std::string::npos && one.size() + static_cast<std::size_t>(level) * 2 < kLineWidth - 20) {
        out_ << one;
        return;
      }
    }
    printBlockMultiline(b, level);
  }

  void printMember(const Member& m, int level) {
    switch (m.kind) {
      case MemberKind::Field: {
        const auto& f = m.as<FieldMember>();
        out_ << f.name << ": ";
        if (!printWrapped(*f.value, level, f.name.size() + 2)) printExpr(*f.value, -2, level);
        break;
      }
      case MemberKind::Block: {
        const auto& b = m.as<BlockMember>();
        out_ << b.name << ' ';
        printBlockMultiline(*b.block, level);
        break;
      }
      case MemberKind::Let: {
        const auto& l = m.as<LetMember>();
        out_ << "let " << l.name << " = ";
        printExpr(*l.value, -2, level);
        break;
      }
      case MemberKind::Layer: {
        const auto& l = m.as<LayerMember>();
        out_ << "layer " << l.name << " = ";
        printExpr(*l.value, 0, level);
        break;
      }
      case MemberKind::Repeat: {
        const auto& r = m.as<RepeatMember>();
        out_ << "repeat ";
        printExpr(*r.count, 0, level);
        out_ << " as " << r.name;
        if (!r.indexVar.empty()) out_ << '[' << r.indexVar << ']';
        out_ << " = ";
        printExpr(*r.value, 0, level);
        break;
      }
      case MemberKind::Stage: {
        const auto& s = m.as<StageMember>();
        out_ << s.keyword << ' ' << s.index << ": ";
        for (std::size_t i = 0; i < s.layers.size(); ++i) {
          if (i) out_ << ", ";
          printExpr(*s.layers[i], 0, level);
        }
        break;
      }
      case MemberKind::Phase: {
        const auto& p = m.as<PhaseMember>();
        out_ << "phase " << p.name;
        if (!p.from.empty()) out_ << " from " << p.from;
        out_ << ' ';
        printBlockMultiline(*p.block, level);
        break;
      }
    }
  }

  // -------------------------------------------------------------- expressions

  // A value too long for one line is broken before the `+` and `-` of its
  // outermost sum (or of a parenthesised sum it multiplies), with the
  // continuation lines indented under the value. Returns false when the value
  // fits, or has no sum to break.
  bool printWrapped(const Expr& e, int level, std::size_t prefix) {
    Printer probe(nullptr, nullptr);
    probe.printExpr(e, -2, 0);
    std::string one = probe.out_.str();
    std::size_t start = static_cast<std::size_t>(level) * 2 + prefix;
    if (one.find('\n') != std::string::npos || start + one.size() <= kLineWidth) return false;
    // Find the sum to break: the value itself, or the last parenthesised sum of a product.
    const Expr* sum = &e;
    std::vector<const Expr*> factors;
    while (sum->kind == ExprKind::Binary && sum->as<BinaryExpr>().op == BinaryOp::Mul) {
      factors.push_back(sum->as<BinaryExpr>().lhs.get());
      sum = sum->as<BinaryExpr>().rhs.get();
    }
    auto isSum = [](const Expr& x) {
      return x.kind == ExprKind::Binary && (x.as<BinaryExpr>().op == BinaryOp::Add || x.as<BinaryExpr>().op == BinaryOp::Sub);
    };
    if (!isSum(*sum)) return false;
    // Flatten the left-leaning chain a + b - c into terms.
    std::vector<std::pair<const char*, const Expr*>> terms;
    const Expr* cur = sum;
    while (isSum(*cur) && !(cur != sum && cur->parenthesized)) {
      const auto& b = cur->as<BinaryExpr>();
      terms.emplace_back(spelling(b.op), b.rhs.get());
      cur = b.lhs.get();
    }
    terms.emplace_back("", cur);
    std::reverse(terms.begin(), terms.end());
    const bool wrapInParens = !factors.empty();
    std::string indentText(start + (wrapInParens ? 0 : 0), ' ');
    std::size_t column = start;
    auto emit = [&](const std::string& text) {
      out_ << text;
      column += text.size();
    };
    if (wrapInParens) {
      // The factors may not be sums (precedence keeps them tight).
      for (const Expr* f : factors) {
        Printer fp(nullptr, nullptr);
        fp.printExpr(*f, precedence(e), 0);
        emit(fp.out_.str() + " * ");
      }
      emit("(");
    }
    std::size_t hang = column;  // continuation lines line up under the first term
    for (std::size_t i = 0; i < terms.size(); ++i) {
      Printer tp(nullptr, nullptr);
      tp.printExpr(*terms[i].second, i == 0 ? 6 : 7, 0);
      std::string text = tp.out_.str();
      if (i == 0) {
        emit(text);
        continue;
      }
      std::string piece = std::string(terms[i].first) + " " + text;
      if (column + 1 + piece.size() > kLineWidth) {
        out_ << "\n" << std::string(hang, ' ');
        column = hang;
        emit(piece);
      } else {
        emit(" " + piece);
      }
    }
    if (wrapInParens) emit(")");
    return true;
  }

  void printArgs(const std::vector<Arg>& args, int level) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (i) out_ << ", ";
      if (!args[i].name.empty()) out_ << args[i].name << ": ";
      printExpr(*args[i].value, 0, level);
    }
  }

  // Whether `e`, printed where `minPrec` is needed, ends with a number and a
  // unit (that a following `/ s` would extend into a rate).
  static bool endsWithUnit(const Expr& e, int minPrec) {
    if (precedence(e) < minPrec || keepsParens(e)) return false;
    switch (e.kind) {
      case ExprKind::Number: {
        const auto& n = e.as<NumberExpr>();
        return !n.unit.empty() && n.unit != "%" && n.unit.find('/') == std::string::npos;
      }
      case ExprKind::Binary: {
        const auto& b = e.as<BinaryExpr>();
        return endsWithUnit(*b.rhs, b.op == BinaryOp::Pow ? precedence(e) : precedence(e) + 1);
      }
      case ExprKind::Unary: return endsWithUnit(*e.as<UnaryExpr>().operand, precedence(e));
      case ExprKind::Range: return endsWithUnit(*e.as<RangeExpr>().hi, precedence(e) + 1);
      default: return false;
    }
  }

  // Whether `e` (printed without parentheses of its own) starts with the name `s`.
  static bool startsWithSeconds(const Expr& e) {
    if (keepsParens(e)) return false;
    switch (e.kind) {
      case ExprKind::Name: return e.as<NameExpr>().name == "s";
      case ExprKind::Member: return startsWithSeconds(*e.as<MemberExpr>().object);
      case ExprKind::Index: return startsWithSeconds(*e.as<IndexExpr>().object);
      case ExprKind::Call: return startsWithSeconds(*e.as<CallExpr>().callee);
      case ExprKind::Binary: return startsWithSeconds(*e.as<BinaryExpr>().lhs);
      case ExprKind::Range: return startsWithSeconds(*e.as<RangeExpr>().lo);
      case ExprKind::With: return startsWithSeconds(*e.as<WithExpr>().base);
      default: return false;
    }
  }

  static bool keepsParens(const Expr& e) {
    return e.parenthesized && (e.kind == ExprKind::Binary || e.kind == ExprKind::Unary || e.kind == ExprKind::Range ||
                               e.kind == ExprKind::If);
  }

  // `minPrec` is the weakest precedence that may appear here without parentheses.
  void printExpr(const Expr& e, int minPrec, int level) {
    int prec = precedence(e);
    // Parentheses the author wrote around an operation stay: they often say
    // how a formula reads, `(size / stride) * (size / stride)`.
    bool kept = e.parenthesized && (e.kind == ExprKind::Binary || e.kind == ExprKind::Unary || e.kind == ExprKind::Range ||
                                    e.kind == ExprKind::If);
    bool paren = prec < minPrec || kept;
    if (paren) out_ << '(';
    switch (e.kind) {
      case ExprKind::Number: {
        const auto& n = e.as<NumberExpr>();
        out_ << n.text;
        if (!n.unit.empty()) {
          if (n.unit != "%") out_ << ' ';
          out_ << n.unit;
        }
        break;
      }
      case ExprKind::String: {
        const auto& s = e.as<StringExpr>();
        if (s.triple) out_ << "\"\"\"" << s.value << "\"\"\"";
        else out_ << quote(s.value);
        break;
      }
      case ExprKind::Bool: out_ << e.as<BoolExpr>().spelling; break;
      case ExprKind::Name: out_ << e.as<NameExpr>().name; break;
      case ExprKind::List: {
        const auto& l = e.as<ListExpr>();
        out_ << '[';
        for (std::size_t i = 0; i < l.items.size(); ++i) {
          if (i) out_ << ", ";
          printExpr(*l.items[i], 0, level);
        }
        out_ << ']';
        break;
      }
      case ExprKind::Record: printBlockValue(*e.as<RecordExpr>().block, level); break;
      case ExprKind::Call: {
        const auto& c = e.as<CallExpr>();
        printExpr(*c.callee, 10, level);
        out_ << '(';
        printArgs(c.args, level);
        out_ << ')';
        break;
      }
      case ExprKind::Member: {
        const auto& m = e.as<MemberExpr>();
        printExpr(*m.object, 10, level);
        out_ << '.' << m.member;
        break;
      }
      case ExprKind::Index: {
        const auto& x = e.as<IndexExpr>();
        printExpr(*x.object, 10, level);
        out_ << '[';
        printExpr(*x.index, 0, level);
        out_ << ']';
        break;
      }
      case ExprKind::Unary: {
        const auto& u = e.as<UnaryExpr>();
        out_ << (u.op == UnaryOp::Neg ? "-" : "not ");
        printExpr(*u.operand, prec, level);
        break;
      }
      case ExprKind::Binary: {
        const auto& b = e.as<BinaryExpr>();
        bool rightAssoc = b.op == BinaryOp::Pow;
        bool comparison = prec == 4;
        printExpr(*b.lhs, rightAssoc || comparison ? prec + 1 : prec, level);
        out_ << ' ' << spelling(b.op) << ' ';
        // `3 MB / s` would read back as the unit MB/s: when the left side
        // ends in a number with a unit and the right side starts with the
        // name `s`, the right side keeps parentheses.
        if (b.op == BinaryOp::Div && endsWithUnit(*b.lhs, rightAssoc || comparison ? prec + 1 : prec) &&
            precedence(*b.rhs) >= prec + 1 && startsWithSeconds(*b.rhs)) {
          out_ << '(';
          printExpr(*b.rhs, 0, level);
          out_ << ')';
        } else {
          printExpr(*b.rhs, rightAssoc ? prec : prec + 1, level);
        }
        break;
      }
      case ExprKind::Range: {
        const auto& r = e.as<RangeExpr>();
        printExpr(*r.lo, prec + 1, level);
        out_ << "..";
        printExpr(*r.hi, prec + 1, level);
        break;
      }
      case ExprKind::If: {
        const auto& i = e.as<IfExpr>();
        out_ << "if ";
        printExpr(*i.cond, 0, level);
        out_ << " then ";
        printExpr(*i.then, 0, level);
        out_ << " else ";
        printExpr(*i.otherwise, 0, level);
        break;
      }
      case ExprKind::With: {
        const auto& w = e.as<WithExpr>();
        printExpr(*w.base, 10, level);
        out_ << " with ";
        printBlockValue(*w.block, level);
        break;
      }
      case ExprKind::Lua: {
        const auto& l = e.as<LuaExpr>();
        out_ << "lua ";
        if (l.form == LuaForm::File) out_ << "file " << quote(l.text);
        else if (l.form == LuaForm::Function) out_ << l.text;
        else if (l.triple) out_ << "\"\"\"" << l.text << "\"\"\"";
        else out_ << quote(l.text);
        break;
      }
      case ExprKind::Schedule: {
        const auto& s = e.as<ScheduleExpr>();
        printExpr(*s.base, 0, level);
        if (s.per) {
          out_ << " per ";
          printExpr(*s.per, 0, level);
        }
        if (s.warmup) {
          out_ << " warmup ";
          printExpr(*s.warmup, 0, level);
        }
        if (s.decay) {
          out_ << " then " << s.decay->kind;
          if (!s.decay->args.empty()) {
            out_ << '(';
            printArgs(s.decay->args, level);
            out_ << ')';
          }
          if (s.decay->end) {
            out_ << " to ";
            printExpr(*s.decay->end, 0, level);
          }
        }
        break;
      }
    }
    if (paren) out_ << ')';
  }

  std::ostringstream out_;
  const base::SourceMap* sources_;
  const std::vector<Comment>* comments_ = nullptr;
  const base::SourceFile* file_ = nullptr;
  std::size_t next_ = 0;
  std::uint32_t lastEnd_ = 0;  // source offset where the last printed node or comment ended
  bool printedAny_ = false;    // something precedes in the current block (or file)
};

// ----------------------------------------------------------------- S-expressions

void sx(std::ostream& os, const Expr& e);
void sx(std::ostream& os, const Block& b);

void sxArgs(std::ostream& os, const std::vector<Arg>& args) {
  for (const auto& a : args) {
    os << " (arg " << (a.name.empty() ? "_" : a.name) << ' ';
    sx(os, *a.value);
    os << ')';
  }
}

void sx(std::ostream& os, const Expr& e) {
  switch (e.kind) {
    case ExprKind::Number: {
      const auto& n = e.as<NumberExpr>();
      os << "(num " << n.value << (n.integer ? " int" : "") << (n.unit.empty() ? "" : " " + n.unit) << ')';
      break;
    }
    case ExprKind::String: os << "(str " << quote(e.as<StringExpr>().value) << ')'; break;
    case ExprKind::Bool: os << "(bool " << e.as<BoolExpr>().value << ')'; break;
    case ExprKind::Name: os << "(name " << e.as<NameExpr>().name << ')'; break;
    case ExprKind::List:
      os << "(list";
      for (const auto& i : e.as<ListExpr>().items) { os << ' '; sx(os, *i); }
      os << ')';
      break;
    case ExprKind::Record: os << "(record "; sx(os, *e.as<RecordExpr>().block); os << ')'; break;
    case ExprKind::Call: {
      const auto& c = e.as<CallExpr>();
      os << "(call ";
      sx(os, *c.callee);
      sxArgs(os, c.args);
      os << ')';
      break;
    }
    case ExprKind::Member: os << "(member "; sx(os, *e.as<MemberExpr>().object); os << ' ' << e.as<MemberExpr>().member << ')'; break;
    case ExprKind::Index: os << "(index "; sx(os, *e.as<IndexExpr>().object); os << ' '; sx(os, *e.as<IndexExpr>().index); os << ')'; break;
    case ExprKind::Unary: os << (e.as<UnaryExpr>().op == UnaryOp::Neg ? "(neg " : "(not "); sx(os, *e.as<UnaryExpr>().operand); os << ')'; break;
    case ExprKind::Binary: {
      const auto& b = e.as<BinaryExpr>();
      os << '(' << spelling(b.op) << ' ';
      sx(os, *b.lhs);
      os << ' ';
      sx(os, *b.rhs);
      os << ')';
      break;
    }
    case ExprKind::Range: os << "(range "; sx(os, *e.as<RangeExpr>().lo); os << ' '; sx(os, *e.as<RangeExpr>().hi); os << ')'; break;
    case ExprKind::If: {
      const auto& i = e.as<IfExpr>();
      os << "(if ";
      sx(os, *i.cond); os << ' '; sx(os, *i.then); os << ' '; sx(os, *i.otherwise);
      os << ')';
      break;
    }
    case ExprKind::With: os << "(with "; sx(os, *e.as<WithExpr>().base); os << ' '; sx(os, *e.as<WithExpr>().block); os << ')'; break;
    case ExprKind::Lua: {
      const auto& l = e.as<LuaExpr>();
      os << "(lua " << static_cast<int>(l.form) << ' ' << quote(l.text) << ')';
      break;
    }
    case ExprKind::Schedule: {
      const auto& s = e.as<ScheduleExpr>();
      os << "(schedule ";
      sx(os, *s.base);
      if (s.per) { os << " (per "; sx(os, *s.per); os << ')'; }
      if (s.warmup) { os << " (warmup "; sx(os, *s.warmup); os << ')'; }
      if (s.decay) {
        os << " (decay " << s.decay->kind;
        sxArgs(os, s.decay->args);
        if (s.decay->end) { os << ' '; sx(os, *s.decay->end); }
        os << ')';
      }
      os << ')';
      break;
    }
  }
}

void sx(std::ostream& os, const Member& m) {
  switch (m.kind) {
    case MemberKind::Field: os << "(field " << m.as<FieldMember>().name << ' '; sx(os, *m.as<FieldMember>().value); break;
    case MemberKind::Block: os << "(block " << m.as<BlockMember>().name << ' '; sx(os, *m.as<BlockMember>().block); break;
    case MemberKind::Let: os << "(let " << m.as<LetMember>().name << ' '; sx(os, *m.as<LetMember>().value); break;
    case MemberKind::Layer: os << "(layer " << m.as<LayerMember>().name << ' '; sx(os, *m.as<LayerMember>().value); break;
    case MemberKind::Repeat: {
      const auto& r = m.as<RepeatMember>();
      os << "(repeat ";
      sx(os, *r.count);
      os << ' ' << r.name << ' ' << (r.indexVar.empty() ? "_" : r.indexVar) << ' ';
      sx(os, *r.value);
      break;
    }
    case MemberKind::Stage: {
      const auto& s = m.as<StageMember>();
      os << "(stage " << s.keyword << ' ' << s.index;
      for (const auto& l : s.layers) { os << ' '; sx(os, *l); }
      break;
    }
    case MemberKind::Phase: {
      const auto& p = m.as<PhaseMember>();
      os << "(phase " << p.name << ' ' << (p.from.empty() ? "_" : p.from) << ' ';
      sx(os, *p.block);
      break;
    }
  }
  os << ')';
}

void sx(std::ostream& os, const Block& b) {
  os << "{";
  for (const auto& m : b.members) { os << ' '; sx(os, *m); }
  os << " }";
}

}  // namespace

std::string print(const Program& program, const base::SourceMap* sources) {
  Printer p(&program, sources);
  return p.program(program);
}

std::string print(const Expr& expr) {
  Printer p(nullptr, nullptr);
  return p.expr(expr);
}

std::string toSExpr(const Expr& expr) {
  std::ostringstream os;
  sx(os, expr);
  return os.str();
}

std::string toSExpr(const Program& program) {
  std::ostringstream os;
  for (const auto& item : program.items) {
    switch (item->kind) {
      case ItemKind::Import: os << "(import " << quote(item->as<ImportItem>().path) << ' ' << item->as<ImportItem>().alias << ")\n"; break;
      case ItemKind::Let: os << "(let " << item->as<LetItem>().name << ' '; sx(os, *item->as<LetItem>().value); os << ")\n"; break;
      case ItemKind::Run: os << "(run " << item->as<RunItem>().name << ")\n"; break;
      case ItemKind::Declaration: {
        const auto& d = item->as<Declaration>();
        os << "(decl " << spelling(d.declKind) << ' ' << d.name;
        if (d.hasParams) {
          os << " (params";
          for (const auto& p : d.params) {
            os << " (" << p.name << ' ' << (p.type.empty() ? "_" : p.type);
            if (p.dflt) { os << ' '; sx(os, *p.dflt); }
            os << ')';
          }
          os << ')';
        }
        if (d.forExpr) { os << " (for "; sx(os, *d.forExpr); os << ')'; }
        if (d.onExpr) { os << " (on "; sx(os, *d.onExpr); os << ')'; }
        if (d.value) { os << " = "; sx(os, *d.value); }
        if (d.body) { os << ' '; sx(os, *d.body); }
        os << ")\n";
        break;
      }
    }
  }
  return os.str();
}

}  // namespace ipu::syntax
