#include "interpreter/lsp/methods.h"

namespace ipu::lsp {

namespace {
constexpr Method kKnown[] = {
    Method::Initialize, Method::Initialized, Method::Shutdown,      Method::Exit,         Method::CancelRequest,
    Method::DidOpen,    Method::DidChange,   Method::DidClose,      Method::DidSave,      Method::Hover,
    Method::Definition, Method::References,  Method::Completion,    Method::DocumentSymbol, Method::Formatting,
    Method::FoldingRange, Method::SemanticTokensFull, Method::CodeAction, Method::PrepareRename, Method::Rename,
    Method::SignatureHelp, Method::WorkspaceSymbol, Method::CodeLens, Method::InlayHint, Method::RangeFormatting,
    Method::CodeActionResolve,
};
}  // namespace

const char* nameOf(Method method) {
  switch (method) {
    case Method::Initialize: return "initialize";
    case Method::Initialized: return "initialized";
    case Method::Shutdown: return "shutdown";
    case Method::Exit: return "exit";
    case Method::CancelRequest: return "$/cancelRequest";
    case Method::DidOpen: return "textDocument/didOpen";
    case Method::DidChange: return "textDocument/didChange";
    case Method::DidClose: return "textDocument/didClose";
    case Method::DidSave: return "textDocument/didSave";
    case Method::Hover: return "textDocument/hover";
    case Method::Definition: return "textDocument/definition";
    case Method::References: return "textDocument/references";
    case Method::Completion: return "textDocument/completion";
    case Method::DocumentSymbol: return "textDocument/documentSymbol";
    case Method::Formatting: return "textDocument/formatting";
    case Method::FoldingRange: return "textDocument/foldingRange";
    case Method::SemanticTokensFull: return "textDocument/semanticTokens/full";
    case Method::CodeAction: return "textDocument/codeAction";
    case Method::PrepareRename: return "textDocument/prepareRename";
    case Method::Rename: return "textDocument/rename";
    case Method::SignatureHelp: return "textDocument/signatureHelp";
    case Method::WorkspaceSymbol: return "workspace/symbol";
    case Method::CodeLens: return "textDocument/codeLens";
    case Method::InlayHint: return "textDocument/inlayHint";
    case Method::RangeFormatting: return "textDocument/rangeFormatting";
    case Method::CodeActionResolve: return "codeAction/resolve";
    case Method::Unknown: return "";
  }
  return "";
}

Method methodNamed(const std::string& name) {
  for (Method m : kKnown)
    if (name == nameOf(m)) return m;
  return Method::Unknown;
}

}  // namespace ipu::lsp
