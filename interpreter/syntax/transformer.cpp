#include "interpreter/syntax/transformer.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "interpreter/syntax/codes.h"

namespace ipu::syntax {

using P = ipu_antlr::IpuParser;

Span Transformer::span(antlr4::Token* tok) const {
  if (tok == nullptr || tok->getType() == antlr4::Token::EOF) {
    std::uint32_t end = cpToByte_.empty() ? 0 : cpToByte_.back();
    return Span{file_, end, end};
  }
  std::size_t a = std::min(tok->getStartIndex(), cpToByte_.size() - 1);
  std::size_t b = std::min(tok->getStopIndex() + 1, cpToByte_.size() - 1);
  return Span{file_, cpToByte_[a], cpToByte_[std::max(a, b)]};
}

Span Transformer::span(antlr4::ParserRuleContext& ctx) const {
  Span s = span(ctx.getStart());
  Span e = ctx.getStop() != nullptr ? span(ctx.getStop()) : s;
  if (e.end < s.begin) return s;  // empty rule: stop precedes start
  return Span{file_, s.begin, e.end};
}

std::unique_ptr<Program> Transformer::transformProgram(P::ProgramContext& ctx) {
  auto program = std::make_unique<Program>();
  program->file = file_;
  for (auto* item : ctx.item())
    if (auto it = transformItem(*item)) program->items.push_back(std::move(it));
  return program;
}

ItemPtr Transformer::transformItem(P::ItemContext& ctx) {
  if (auto* c = ctx.importDecl()) return transformImport(*c);
  if (auto* c = ctx.letDecl()) return transformLet(*c);
  if (auto* c = ctx.declaration()) return transformDeclaration(*c);
  if (auto* c = ctx.runDecl()) return transformRun(*c);
  return nullptr;
}

ItemPtr Transformer::transformImport(P::ImportDeclContext& ctx) {
  auto item = std::make_unique<ImportItem>(span(ctx));
  item->pathSpan = span(ctx.path);
  item->path = unescape(ctx.path->getText(), item->pathSpan);
  if (ctx.alias != nullptr) {
    item->alias = ctx.alias->getText();
    item->aliasSpan = span(ctx.alias);
  }
  return item;
}

ItemPtr Transformer::transformLet(P::LetDeclContext& ctx) {
  auto item = std::make_unique<LetItem>(span(ctx));
  item->name = ctx.name->getText();
  item->nameSpan = span(ctx.name);
  item->value = transformValue(*ctx.value());
  return item;
}

ItemPtr Transformer::transformRun(P::RunDeclContext& ctx) {
  auto item = std::make_unique<RunItem>(span(ctx));
  item->name = ctx.name->getText();
  item->nameSpan = span(ctx.name);
  return item;
}

static DeclKind declKindOf(antlr4::Token* tok) {
  switch (tok->getType()) {
    case P::CHIP: return DeclKind::Chip;
    case P::MACHINE: return DeclKind::Machine;
    case P::POD: return DeclKind::Pod;
    case P::LAYER: return DeclKind::Layer;
    case P::MODEL: return DeclKind::Model;
    case P::MAPPING: return DeclKind::Mapping;
    case P::PRECISION: return DeclKind::Precision;
    case P::OPTIMIZER: return DeclKind::Optimizer;
    case P::DATASET: return DeclKind::Dataset;
    case P::TRAINING: return DeclKind::Training;
    case P::SWEEP: return DeclKind::Sweep;
    default: return DeclKind::Hook;
  }
}

ItemPtr Transformer::transformDeclaration(P::DeclarationContext& ctx) {
  auto decl = std::make_unique<Declaration>(span(ctx));
  decl->declKind = declKindOf(ctx.declKind()->getStart());
  decl->kindSpan = span(*ctx.declKind());
  decl->name = ctx.name->getText();
  decl->nameSpan = span(ctx.name);
  if (auto* pl = ctx.paramList()) {
    decl->hasParams = true;
    for (auto* p : pl->param()) decl->params.push_back(transformParam(*p));
  }
  if (ctx.forExpr != nullptr) decl->forExpr = transformExpr(*ctx.forExpr);
  if (ctx.onExpr != nullptr) decl->onExpr = transformExpr(*ctx.onExpr);
  if (auto* v = ctx.value()) decl->value = transformValue(*v);
  if (auto* b = ctx.block()) decl->body = transformBlock(*b);
  return decl;
}

Param Transformer::transformParam(P::ParamContext& ctx) {
  Param p;
  p.name = ctx.name->getText();
  p.span = span(ctx.name);
  if (ctx.type != nullptr) {
    p.type = ctx.type->getText();
    p.typeSpan = span(*ctx.type);
  }
  if (ctx.dflt != nullptr) p.dflt = transformExpr(*ctx.dflt);
  return p;
}

BlockPtr Transformer::transformBlock(P::BlockContext& ctx) {
  auto block = std::make_unique<Block>();
  block->span = span(ctx);
  for (auto* m : ctx.member())
    if (auto mem = transformMember(*m)) block->members.push_back(std::move(mem));
  return block;
}

MemberPtr Transformer::transformMember(P::MemberContext& ctx) {
  if (auto* c = dynamic_cast<P::FieldMemberContext*>(&ctx)) {
    auto m = std::make_unique<FieldMember>(span(ctx));
    for (auto* part : c->fieldPath()->fieldName()) m->name += (m->name.empty() ? "" : ".") + part->getText();
    m->nameSpan = span(*c->fieldPath());
    m->value = transformValue(*c->value());
    return m;
  }
  if (auto* c = dynamic_cast<P::BlockMemberContext*>(&ctx)) {
    auto m = std::make_unique<BlockMember>(span(ctx));
    m->name = c->fieldName()->getText();
    m->nameSpan = span(*c->fieldName());
    m->block = transformBlock(*c->block());
    return m;
  }
  if (auto* c = dynamic_cast<P::LetMemberContext*>(&ctx)) {
    auto m = std::make_unique<LetMember>(span(ctx));
    m->name = c->name->getText();
    m->nameSpan = span(c->name);
    m->value = transformValue(*c->value());
    return m;
  }
  if (auto* c = dynamic_cast<P::LayerMemberContext*>(&ctx)) {
    auto m = std::make_unique<LayerMember>(span(ctx));
    m->name = c->name->getText();
    m->nameSpan = span(c->name);
    m->value = transformExpr(*c->expr());
    return m;
  }
  if (auto* c = dynamic_cast<P::RepeatMemberContext*>(&ctx)) {
    auto m = std::make_unique<RepeatMember>(span(ctx));
    m->count = transformExpr(*c->count);
    m->name = c->name->getText();
    m->nameSpan = span(c->name);
    if (c->index != nullptr) {
      m->indexVar = c->index->getText();
      m->indexSpan = span(c->index);
    }
    m->value = transformExpr(*c->body);
    return m;
  }
  if (auto* c = dynamic_cast<P::StageMemberContext*>(&ctx)) {
    auto m = std::make_unique<StageMember>(span(ctx));
    m->keyword = c->stageKw->getText();
    m->indexSpan = span(c->INT());
    std::string digits;
    for (char ch : c->INT()->getText())
      if (ch != '_') digits += ch;
    m->index = digits.size() > 9 ? -1 : std::atoll(digits.c_str());
    if (m->index < 0)
      diags_.error(code::kBadNumber, m->indexSpan, "IPU index `" + c->INT()->getText() + "` is too large",
                   "pipeline IPUs are numbered 0 to p-1, with p at most a few hundred");
    for (auto* e : c->expr()) m->layers.push_back(transformExpr(*e));
    return m;
  }
  if (auto* c = dynamic_cast<P::PhaseMemberContext*>(&ctx)) {
    auto m = std::make_unique<PhaseMember>(span(ctx));
    m->name = c->name->getText();
    m->nameSpan = span(c->name);
    if (c->from != nullptr) {
      m->from = c->from->getText();
      m->fromSpan = span(c->from);
    }
    m->block = transformBlock(*c->block());
    return m;
  }
  return nullptr;
}

std::string Transformer::unescape(const std::string& quoted, Span where) {
  if (quoted.size() >= 6 && quoted.compare(0, 3, "\"\"\"") == 0) return quoted.substr(3, quoted.size() - 6);
  std::string out;
  if (quoted.size() < 2) return out;
  auto hex = [](char h) -> int {
    if (h >= '0' && h <= '9') return h - '0';
    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
    if (h >= 'A' && h <= 'F') return h - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 1; i + 1 < quoted.size(); ++i) {
    char c = quoted[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    const std::size_t at = i;
    char e = quoted[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'u': {
        unsigned cp = 0;
        bool ok = i + 4 < quoted.size();
        for (int k = 0; ok && k < 4; ++k) {
          int h = hex(quoted[i + 1 + static_cast<std::size_t>(k)]);
          ok = h >= 0;
          cp = cp * 16 + static_cast<unsigned>(h < 0 ? 0 : h);
        }
        if (!ok || (cp >= 0xD800 && cp <= 0xDFFF)) {
          diags_.error(code::kBadEscape, Span{file_, where.begin + static_cast<std::uint32_t>(at), where.begin + static_cast<std::uint32_t>(at) + 2},
                       "`\\u` needs four hex digits of a character outside the surrogates", "write e.g. `\\u00e9`");
          break;
        }
        i += 4;
        if (cp < 0x80) {
          out += static_cast<char>(cp);
        } else if (cp < 0x800) {
          out += static_cast<char>(0xC0 | (cp >> 6));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | (cp >> 12));
          out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: {
        std::size_t len = 1;
        while (i + len < quoted.size() && (static_cast<unsigned char>(quoted[i + len]) & 0xC0) == 0x80) ++len;
        diags_.error(code::kBadEscape,
                     Span{file_, where.begin + static_cast<std::uint32_t>(at), where.begin + static_cast<std::uint32_t>(at + 1 + len)},
                     "invalid escape `\\" + quoted.substr(i, len) + "` in a string",
                     "escapes are \\n \\t \\r \\b \\f \\\" \\\\ and \\uXXXX; for a backslash write `\\\\`");
        out += quoted.substr(i, len);
        i += len - 1;
      }
    }
  }
  return out;
}

}  // namespace ipu::syntax
