// Expression half of the transformer (see transformer.h).
#include <cmath>
#include <cstdlib>

#include "interpreter/syntax/codes.h"
#include "interpreter/syntax/transformer.h"

namespace ipu::syntax {

using P = ipu_antlr::IpuParser;

ExprPtr Transformer::transformValue(P::ValueContext& ctx) {
  ExprPtr base = transformExpr(*ctx.expr(0));
  if (ctx.per == nullptr && ctx.warmup == nullptr && ctx.decay() == nullptr) return base;
  auto s = std::make_unique<ScheduleExpr>(span(ctx));
  s->base = std::move(base);
  if (ctx.per != nullptr) s->per = transformExpr(*ctx.per);
  if (ctx.warmup != nullptr) s->warmup = transformExpr(*ctx.warmup);
  if (auto* d = ctx.decay()) s->decay = transformDecay(*d);
  return s;
}

std::unique_ptr<Decay> Transformer::transformDecay(P::DecayContext& ctx) {
  auto d = std::make_unique<Decay>();
  d->kind = ctx.kind->getText();
  d->kindSpan = span(ctx.kind);
  d->args = transformArgs(ctx.args());
  if (ctx.end != nullptr) d->end = transformExpr(*ctx.end);
  return d;
}

std::vector<Arg> Transformer::transformArgs(P::ArgsContext* ctx) {
  std::vector<Arg> out;
  if (ctx == nullptr) return out;
  for (auto* a : ctx->arg()) {
    Arg arg;
    if (auto* fn = a->fieldName()) {
      arg.name = fn->getText();
      arg.nameSpan = span(*fn);
    }
    arg.value = transformExpr(*a->expr());
    out.push_back(std::move(arg));
  }
  return out;
}

ExprPtr Transformer::binary(BinaryOp op, antlr4::ParserRuleContext& ctx, antlr4::Token* opTok, P::ExprContext* lhs,
                            P::ExprContext* rhs) {
  auto e = std::make_unique<BinaryExpr>(span(ctx));
  e->op = op;
  e->opSpan = span(opTok);
  e->lhs = transformExpr(*lhs);
  e->rhs = transformExpr(*rhs);
  return e;
}

ExprPtr Transformer::transformExpr(P::ExprContext& ctx) {
  if (auto* c = dynamic_cast<P::PrimaryExprContext*>(&ctx)) return transformPrimary(*c->primary());
  if (auto* c = dynamic_cast<P::MemberExprContext*>(&ctx)) {
    auto e = std::make_unique<MemberExpr>(span(ctx));
    e->object = transformExpr(*c->expr());
    e->member = c->fieldName()->getText();
    e->memberSpan = span(*c->fieldName());
    return e;
  }
  if (auto* c = dynamic_cast<P::IndexExprContext*>(&ctx)) {
    auto e = std::make_unique<IndexExpr>(span(ctx));
    e->object = transformExpr(*c->expr(0));
    e->index = transformExpr(*c->expr(1));
    return e;
  }
  if (auto* c = dynamic_cast<P::CallExprContext*>(&ctx)) {
    auto e = std::make_unique<CallExpr>(span(ctx));
    e->callee = transformExpr(*c->expr());
    e->args = transformArgs(c->args());
    return e;
  }
  if (auto* c = dynamic_cast<P::WithExprContext*>(&ctx)) {
    auto e = std::make_unique<WithExpr>(span(ctx));
    e->base = transformExpr(*c->expr());
    e->block = transformBlock(*c->block());
    return e;
  }
  if (auto* c = dynamic_cast<P::PowExprContext*>(&ctx))
    return binary(BinaryOp::Pow, ctx, c->CARET()->getSymbol(), c->expr(0), c->expr(1));
  if (auto* c = dynamic_cast<P::NegExprContext*>(&ctx)) {
    auto e = std::make_unique<UnaryExpr>(span(ctx));
    e->op = UnaryOp::Neg;
    e->operand = transformExpr(*c->expr());
    return e;
  }
  if (auto* c = dynamic_cast<P::NotExprContext*>(&ctx)) {
    auto e = std::make_unique<UnaryExpr>(span(ctx));
    e->op = UnaryOp::Not;
    e->operand = transformExpr(*c->expr());
    return e;
  }
  if (auto* c = dynamic_cast<P::MulExprContext*>(&ctx))
    return binary(c->op->getType() == P::STAR ? BinaryOp::Mul : BinaryOp::Div, ctx, c->op, c->expr(0), c->expr(1));
  if (auto* c = dynamic_cast<P::AddExprContext*>(&ctx))
    return binary(c->op->getType() == P::PLUS ? BinaryOp::Add : BinaryOp::Sub, ctx, c->op, c->expr(0), c->expr(1));
  if (auto* c = dynamic_cast<P::RangeExprContext*>(&ctx)) {
    auto e = std::make_unique<RangeExpr>(span(ctx));
    e->lo = transformExpr(*c->expr(0));
    e->hi = transformExpr(*c->expr(1));
    return e;
  }
  if (auto* c = dynamic_cast<P::CmpExprContext*>(&ctx)) {
    BinaryOp op = BinaryOp::Eq;
    switch (c->op->getType()) {
      case P::EQEQ: op = BinaryOp::Eq; break;
      case P::NEQ: op = BinaryOp::Ne; break;
      case P::LT: op = BinaryOp::Lt; break;
      case P::LE: op = BinaryOp::Le; break;
      case P::GT: op = BinaryOp::Gt; break;
      default: op = BinaryOp::Ge; break;
    }
    return binary(op, ctx, c->op, c->expr(0), c->expr(1));
  }
  if (auto* c = dynamic_cast<P::AndExprContext*>(&ctx))
    return binary(BinaryOp::And, ctx, c->AND()->getSymbol(), c->expr(0), c->expr(1));
  if (auto* c = dynamic_cast<P::OrExprContext*>(&ctx))
    return binary(BinaryOp::Or, ctx, c->OR()->getSymbol(), c->expr(0), c->expr(1));
  if (auto* c = dynamic_cast<P::IfExprContext*>(&ctx)) {
    auto e = std::make_unique<IfExpr>(span(ctx));
    e->cond = transformExpr(*c->cond);
    e->then = transformExpr(*c->then);
    e->otherwise = transformExpr(*c->otherwise);
    return e;
  }
  // Unreachable for a tree without syntax errors; the facade never transforms one.
  auto e = std::make_unique<NameExpr>(span(ctx));
  e->name = ctx.getText();
  return e;
}

ExprPtr Transformer::transformNumber(P::NumberLitContext& ctx) {
  auto e = std::make_unique<NumberExpr>(span(ctx));
  std::string text = ctx.number->getText();
  e->text = text;
  e->integer = ctx.number->getType() == P::INT;
  std::string digits;
  for (char c : text)
    if (c != '_') digits += c;
  e->value = std::strtod(digits.c_str(), nullptr);
  if (!std::isfinite(e->value))
    diags_.error(code::kBadNumber, span(ctx.number), "number `" + text + "` is too large to represent",
                 "numbers must be below about 1.8e308");
  auto* u = ctx.unit();
  if (u == nullptr) return e;
  // (The grammar continues a unit with `/` only for rates: `GB/s`.)
  e->unit = u->getText();
  e->unitSpan = span(*u);
  return e;
}

ExprPtr Transformer::transformPrimary(P::PrimaryContext& ctx) {
  if (auto* c = dynamic_cast<P::NumberLitContext*>(&ctx)) return transformNumber(*c);
  if (auto* c = dynamic_cast<P::StringLitContext*>(&ctx)) {
    auto e = std::make_unique<StringExpr>(span(ctx));
    Span s = span(c->STRING());
    e->contentSpan = Span{file_, s.begin + 1, s.end > s.begin + 1 ? s.end - 1 : s.begin + 1};
    e->value = unescape(c->STRING()->getText(), s);
    return e;
  }
  if (auto* c = dynamic_cast<P::TripleStringLitContext*>(&ctx)) {
    auto e = std::make_unique<StringExpr>(span(ctx));
    Span s = span(c->TRIPLE_STRING());
    e->triple = true;
    e->contentSpan = Span{file_, s.begin + 3, s.end - 3};
    e->value = unescape(c->TRIPLE_STRING()->getText(), s);
    return e;
  }
  if (dynamic_cast<P::TrueLitContext*>(&ctx) != nullptr || dynamic_cast<P::FalseLitContext*>(&ctx) != nullptr) {
    auto e = std::make_unique<BoolExpr>(span(ctx));
    e->spelling = ctx.getText();
    e->value = dynamic_cast<P::TrueLitContext*>(&ctx) != nullptr;
    return e;
  }
  if (auto* c = dynamic_cast<P::NameRefContext*>(&ctx)) {
    auto e = std::make_unique<NameExpr>(span(ctx));
    e->name = c->IDENT()->getText();
    return e;
  }
  if (auto* c = dynamic_cast<P::ListLitContext*>(&ctx)) {
    auto e = std::make_unique<ListExpr>(span(ctx));
    for (auto* item : c->expr()) e->items.push_back(transformExpr(*item));
    return e;
  }
  if (auto* c = dynamic_cast<P::ParenExprContext*>(&ctx)) {
    ExprPtr inner = transformExpr(*c->expr());
    inner->span = span(ctx);  // the parentheses belong to the expression's extent
    inner->parenthesized = true;
    return inner;
  }
  if (auto* c = dynamic_cast<P::RecordLitContext*>(&ctx)) {
    auto e = std::make_unique<RecordExpr>(span(ctx));
    e->block = transformBlock(*c->block());
    return e;
  }
  if (auto* c = dynamic_cast<P::LuaLitContext*>(&ctx)) {
    auto e = std::make_unique<LuaExpr>(span(ctx));
    if (c->FILE() != nullptr) {
      e->form = LuaForm::File;
      e->textSpan = span(c->STRING());
      e->text = unescape(c->STRING()->getText(), e->textSpan);
    } else if (c->IDENT() != nullptr) {
      e->form = LuaForm::Function;
      e->text = c->IDENT()->getText();
      e->textSpan = span(c->IDENT());
    } else if (c->TRIPLE_STRING() != nullptr) {
      e->form = LuaForm::Inline;
      e->triple = true;
      Span s = span(c->TRIPLE_STRING());
      e->textSpan = Span{file_, s.begin + 3, s.end - 3};
      e->text = unescape(c->TRIPLE_STRING()->getText(), s);
    } else {
      e->form = LuaForm::Inline;
      Span s = span(c->STRING());
      e->textSpan = Span{file_, s.begin + 1, s.end - 1};
      e->text = unescape(c->STRING()->getText(), s);
    }
    return e;
  }
  auto e = std::make_unique<NameExpr>(span(ctx));
  e->name = ctx.getText();
  return e;
}

}  // namespace ipu::syntax
