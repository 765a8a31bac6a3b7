// The protocol methods the server knows, as a closed set: the dispatch
// switches over them, so a method added here and not handled is a compiler
// warning, not a silently ignored string.
#pragma once

#include <string>

namespace ipu::lsp {

enum class Method {
  Initialize, Initialized, Shutdown, Exit, CancelRequest,
  DidOpen, DidChange, DidClose, DidSave,
  Hover, Definition, References, Completion, DocumentSymbol, Formatting, FoldingRange, SemanticTokensFull,
  CodeAction, PrepareRename, Rename, SignatureHelp, WorkspaceSymbol, CodeLens, InlayHint, RangeFormatting, CodeActionResolve,
  Unknown,
};

Method methodNamed(const std::string& name);
const char* nameOf(Method method);

}  // namespace ipu::lsp
