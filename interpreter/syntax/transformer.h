// Parse tree -> AST. One `transformX` per grammar rule, typed on the generated
// context classes (the grammar is generated without listeners or visitors, so
// nothing here passes `std::any` around). Internal to the syntax layer: only
// parser.cpp includes it.
#pragma once

#include <vector>

#include "IpuParser.h"
#include "interpreter/base/diagnostic.h"
#include "interpreter/base/source.h"
#include "interpreter/syntax/ast.h"

namespace ipu::syntax {

class Transformer {
 public:
  // `cpToByte` maps ANTLR's code-point indices to byte offsets in the file.
  Transformer(base::FileId file, const std::vector<std::uint32_t>& cpToByte, base::Diagnostics& diags)
      : file_(file), cpToByte_(cpToByte), diags_(diags) {}

  std::unique_ptr<Program> transformProgram(ipu_antlr::IpuParser::ProgramContext& ctx);
  ExprPtr transformValueOnly(ipu_antlr::IpuParser::ValueOnlyContext& ctx) { return transformValue(*ctx.value()); }

 private:
  ItemPtr transformItem(ipu_antlr::IpuParser::ItemContext& ctx);
  ItemPtr transformImport(ipu_antlr::IpuParser::ImportDeclContext& ctx);
  ItemPtr transformLet(ipu_antlr::IpuParser::LetDeclContext& ctx);
  ItemPtr transformRun(ipu_antlr::IpuParser::RunDeclContext& ctx);
  ItemPtr transformDeclaration(ipu_antlr::IpuParser::DeclarationContext& ctx);
  Param transformParam(ipu_antlr::IpuParser::ParamContext& ctx);
  BlockPtr transformBlock(ipu_antlr::IpuParser::BlockContext& ctx);
  MemberPtr transformMember(ipu_antlr::IpuParser::MemberContext& ctx);

  ExprPtr transformValue(ipu_antlr::IpuParser::ValueContext& ctx);
  std::unique_ptr<Decay> transformDecay(ipu_antlr::IpuParser::DecayContext& ctx);
  ExprPtr transformExpr(ipu_antlr::IpuParser::ExprContext& ctx);
  ExprPtr transformPrimary(ipu_antlr::IpuParser::PrimaryContext& ctx);
  ExprPtr transformNumber(ipu_antlr::IpuParser::NumberLitContext& ctx);
  std::vector<Arg> transformArgs(ipu_antlr::IpuParser::ArgsContext* ctx);
  ExprPtr binary(BinaryOp op, antlr4::ParserRuleContext& ctx, antlr4::Token* opTok,
                 ipu_antlr::IpuParser::ExprContext* lhs, ipu_antlr::IpuParser::ExprContext* rhs);

  Span span(antlr4::ParserRuleContext& ctx) const;
  Span span(antlr4::Token* tok) const;
  Span span(antlr4::tree::TerminalNode* node) const { return span(node->getSymbol()); }
  std::string unescape(const std::string& quoted, Span where);

  base::FileId file_;
  const std::vector<std::uint32_t>& cpToByte_;
  base::Diagnostics& diags_;
};

}  // namespace ipu::syntax
