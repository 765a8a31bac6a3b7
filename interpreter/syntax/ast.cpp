#include "interpreter/syntax/ast.h"

namespace ipu::syntax {

const char* spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::Pow: return "^";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
  }
  return "?";
}

const char* spelling(DeclKind k) {
  switch (k) {
    case DeclKind::Chip: return "chip";
    case DeclKind::Machine: return "machine";
    case DeclKind::Pod: return "pod";
    case DeclKind::Layer: return "layer";
    case DeclKind::Model: return "model";
    case DeclKind::Mapping: return "mapping";
    case DeclKind::Precision: return "precision";
    case DeclKind::Optimizer: return "optimizer";
    case DeclKind::Dataset: return "dataset";
    case DeclKind::Training: return "training";
    case DeclKind::Hook: return "hook";
    case DeclKind::Sweep: return "sweep";
  }
  return "?";
}

const std::vector<DeclKind>& allDeclKinds() {
  static const std::vector<DeclKind> kinds = {
      DeclKind::Chip,      DeclKind::Machine,   DeclKind::Pod,     DeclKind::Layer,
      DeclKind::Model,     DeclKind::Mapping,   DeclKind::Precision, DeclKind::Optimizer,
      DeclKind::Dataset,   DeclKind::Training,  DeclKind::Hook,    DeclKind::Sweep};
  return kinds;
}

}  // namespace ipu::syntax
