// The `.ipu` abstract syntax tree: what the rest of the toolchain sees of a
// script (never ANTLR parse-tree contexts). Every node has a span. Node kinds
// are enums with checked casts (`as<T>()`), in the style of LLVM's toy AST, so
// a switch over the kind is exhaustive and a wrong cast is caught (IPU_INVARIANT).
//
// The tree records what was written, not what it means: `8 steps` is a number
// with unit text "steps"; whether `steps` is a unit, and what `fp16` names, is
// decided by the checker.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreter/base/source.h"
#include "runtime/base/invariant.h"

namespace ipu::syntax {

using base::Span;

// ---------------------------------------------------------------- expressions

enum class ExprKind {
  Number, String, Bool, Name, List, Record, Call, Member, Index,
  Unary, Binary, Range, If, With, Lua, Schedule,
};

struct Expr {
  explicit Expr(ExprKind k, Span s) : kind(k), span(s) {}
  virtual ~Expr() = default;
  const ExprKind kind;
  Span span;
  bool parenthesized = false;  // written in parentheses (kept by the printer; no meaning)
  template <typename T> const T& as() const {
    IPU_INVARIANT(kind == T::kKind, "as<T>() is called only on a node of kind T (dyn<T>() tests)");
    return static_cast<const T&>(*this);
  }
  template <typename T> const T* dyn() const { return kind == T::kKind ? static_cast<const T*>(this) : nullptr; }
};
using ExprPtr = std::unique_ptr<Expr>;

struct Block;
using BlockPtr = std::unique_ptr<Block>;

struct NumberExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Number;
  explicit NumberExpr(Span s) : Expr(kKind, s) {}
  double value = 0;
  std::string text;   // as written, without the unit (`65_536`, `1e-3`)
  bool integer = false;
  std::string unit;   // empty, "%", "MB", "GB/s", ...
  Span unitSpan;
};

struct StringExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::String;
  explicit StringExpr(Span s) : Expr(kKind, s) {}
  std::string value;  // unescaped
  bool triple = false;
  Span contentSpan;   // the characters between the quotes
};

struct BoolExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Bool;
  explicit BoolExpr(Span s) : Expr(kKind, s) {}
  bool value = false;
  std::string spelling;  // "true", "on", ...
};

struct NameExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Name;
  explicit NameExpr(Span s) : Expr(kKind, s) {}
  std::string name;
};

struct ListExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::List;
  explicit ListExpr(Span s) : Expr(kKind, s) {}
  std::vector<ExprPtr> items;
};

struct RecordExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Record;
  explicit RecordExpr(Span s) : Expr(kKind, s) {}
  BlockPtr block;
};

struct Arg {
  std::string name;  // empty for a positional argument
  Span nameSpan;
  ExprPtr value;
};

struct CallExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Call;
  explicit CallExpr(Span s) : Expr(kKind, s) {}
  ExprPtr callee;
  std::vector<Arg> args;
};

struct MemberExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Member;
  explicit MemberExpr(Span s) : Expr(kKind, s) {}
  ExprPtr object;
  std::string member;
  Span memberSpan;
};

struct IndexExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Index;
  explicit IndexExpr(Span s) : Expr(kKind, s) {}
  ExprPtr object;
  ExprPtr index;
};

enum class UnaryOp { Neg, Not };
struct UnaryExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Unary;
  explicit UnaryExpr(Span s) : Expr(kKind, s) {}
  UnaryOp op = UnaryOp::Neg;
  ExprPtr operand;
};

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Eq, Ne, Lt, Le, Gt, Ge, And, Or };
const char* spelling(BinaryOp op);

struct BinaryExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Binary;
  explicit BinaryExpr(Span s) : Expr(kKind, s) {}
  BinaryOp op = BinaryOp::Add;
  Span opSpan;
  ExprPtr lhs, rhs;
};

struct RangeExpr : Expr {  // half-open: 0..3 is 0, 1, 2
  static constexpr ExprKind kKind = ExprKind::Range;
  explicit RangeExpr(Span s) : Expr(kKind, s) {}
  ExprPtr lo, hi;
};

struct IfExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::If;
  explicit IfExpr(Span s) : Expr(kKind, s) {}
  ExprPtr cond, then, otherwise;
};

struct WithExpr : Expr {  // derived variant: base with { overrides }
  static constexpr ExprKind kKind = ExprKind::With;
  explicit WithExpr(Span s) : Expr(kKind, s) {}
  ExprPtr base;
  BlockPtr block;
};

enum class LuaForm { Inline, File, Function };
struct LuaExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Lua;
  explicit LuaExpr(Span s) : Expr(kKind, s) {}
  LuaForm form = LuaForm::Inline;
  std::string text;   // Lua source, a file path, or a function name
  bool triple = false;
  Span textSpan;      // for Inline: the source characters, so Lua line N maps back
};

struct Decay {
  std::string kind;   // linear, cosine, poly, constant, exponential
  Span kindSpan;
  std::vector<Arg> args;
  ExprPtr end;        // `to` value; may be null
};

// lr: 0.006 per 256 warmup 2000 steps then linear to 0
struct ScheduleExpr : Expr {
  static constexpr ExprKind kKind = ExprKind::Schedule;
  explicit ScheduleExpr(Span s) : Expr(kKind, s) {}
  ExprPtr base;
  ExprPtr per;     // linear scaling rule reference batch; may be null
  ExprPtr warmup;  // may be null
  std::unique_ptr<Decay> decay;  // may be null
};

// -------------------------------------------------------------------- members

enum class MemberKind { Field, Block, Let, Layer, Repeat, Stage, Phase };

struct Member {
  explicit Member(MemberKind k, Span s) : kind(k), span(s) {}
  virtual ~Member() = default;
  const MemberKind kind;
  Span span;
  template <typename T> const T& as() const {
    IPU_INVARIANT(kind == T::kKind, "as<T>() is called only on a node of kind T (dyn<T>() tests)");
    return static_cast<const T&>(*this);
  }
  template <typename T> const T* dyn() const { return kind == T::kKind ? static_cast<const T*>(this) : nullptr; }
};
using MemberPtr = std::unique_ptr<Member>;

struct FieldMember : Member {  // name: value
  static constexpr MemberKind kKind = MemberKind::Field;
  explicit FieldMember(Span s) : Member(kKind, s) {}
  std::string name;   // may be a dotted path (`phase.short.micro_batch`): only sweep parameters take one
  Span nameSpan;
  ExprPtr value;
};

struct BlockMember : Member {  // name { ... }   (e.g. pipeline { ipu 0: ... })
  static constexpr MemberKind kKind = MemberKind::Block;
  explicit BlockMember(Span s) : Member(kKind, s) {}
  std::string name;
  Span nameSpan;
  BlockPtr block;
};

struct LetMember : Member {  // let name = value   (local to the block)
  static constexpr MemberKind kKind = MemberKind::Let;
  explicit LetMember(Span s) : Member(kKind, s) {}
  std::string name;
  Span nameSpan;
  ExprPtr value;
};

struct LayerMember : Member {  // layer name = expr   (in a model)
  static constexpr MemberKind kKind = MemberKind::Layer;
  explicit LayerMember(Span s) : Member(kKind, s) {}
  std::string name;
  Span nameSpan;
  ExprPtr value;
};

struct RepeatMember : Member {  // repeat count as name[i] = expr   (in a model)
  static constexpr MemberKind kKind = MemberKind::Repeat;
  explicit RepeatMember(Span s) : Member(kKind, s) {}
  ExprPtr count;
  std::string name;
  Span nameSpan;
  std::string indexVar;  // may be empty
  Span indexSpan;
  ExprPtr value;
};

struct StageMember : Member {  // ipu 0: embedding, encoder[0..3]   (in a pipeline)
  static constexpr MemberKind kKind = MemberKind::Stage;
  explicit StageMember(Span s) : Member(kKind, s) {}
  std::string keyword;  // "ipu" or "stage"
  long long index = 0;
  Span indexSpan;
  std::vector<ExprPtr> layers;
};

struct PhaseMember : Member {  // phase two from one { ... }   (in a training)
  static constexpr MemberKind kKind = MemberKind::Phase;
  explicit PhaseMember(Span s) : Member(kKind, s) {}
  std::string name;
  Span nameSpan;
  std::string from;  // may be empty
  Span fromSpan;
  BlockPtr block;
};

struct Block {
  Span span;
  std::vector<MemberPtr> members;
};

// ---------------------------------------------------------------------- items

enum class DeclKind { Chip, Machine, Pod, Layer, Model, Mapping, Precision, Optimizer, Dataset, Training, Hook, Sweep };
const char* spelling(DeclKind k);
const std::vector<DeclKind>& allDeclKinds();

enum class ItemKind { Import, Let, Declaration, Run };

struct Item {
  explicit Item(ItemKind k, Span s) : kind(k), span(s) {}
  virtual ~Item() = default;
  const ItemKind kind;
  Span span;
  template <typename T> const T& as() const {
    IPU_INVARIANT(kind == T::kKind, "as<T>() is called only on a node of kind T (dyn<T>() tests)");
    return static_cast<const T&>(*this);
  }
  template <typename T> const T* dyn() const { return kind == T::kKind ? static_cast<const T*>(this) : nullptr; }
};
using ItemPtr = std::unique_ptr<Item>;

struct ImportItem : Item {
  static constexpr ItemKind kKind = ItemKind::Import;
  explicit ImportItem(Span s) : Item(kKind, s) {}
  std::string path;
  Span pathSpan;
  std::string alias;  // may be empty
  Span aliasSpan;
};

struct LetItem : Item {
  static constexpr ItemKind kKind = ItemKind::Let;
  explicit LetItem(Span s) : Item(kKind, s) {}
  std::string name;
  Span nameSpan;
  ExprPtr value;
};

struct Param {
  std::string name;
  Span span;
  std::string type;  // may be empty
  Span typeSpan;
  ExprPtr dflt;      // may be null
};

struct Declaration : Item {
  static constexpr ItemKind kKind = ItemKind::Declaration;
  explicit Declaration(Span s) : Item(kKind, s) {}
  DeclKind declKind = DeclKind::Model;
  Span kindSpan;
  std::string name;
  Span nameSpan;
  bool hasParams = false;  // `model bert()` is a template with no parameters
  std::vector<Param> params;
  ExprPtr forExpr;  // mapping m for MODEL ...
  ExprPtr onExpr;   // ... on POD
  ExprPtr value;    // `= value` form
  BlockPtr body;    // `{ ... }` form
};

struct RunItem : Item {
  static constexpr ItemKind kKind = ItemKind::Run;
  explicit RunItem(Span s) : Item(kKind, s) {}
  std::string name;
  Span nameSpan;
};

struct Comment {
  Span span;
  std::string text;  // including the `//` or `/* */`
};

struct Program {
  base::FileId file = base::kNoFile;
  std::vector<ItemPtr> items;
  std::vector<Comment> comments;  // in source order; the formatter re-attaches them
};

}  // namespace ipu::syntax
