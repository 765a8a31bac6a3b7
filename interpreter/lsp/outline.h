// The shape of a document: textDocument/documentSymbol and
// textDocument/foldingRange; and of the workspace: workspace/symbol.
//
// Symbols come from the syntax tree the check parsed (a declaration and its
// fields, layers, stages and phases, nested as written), so they exist only
// while the text parses. Folding ranges come from the lexical scan
// (text_scan.h): brackets, comments and runs of imports fold even in a
// script that is half typed.
#pragma once

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;

// DocumentSymbol[] (hierarchical); empty when the text does not parse.
Json documentSymbols(const Analysis& analysis, PositionEncoding encoding);
// FoldingRange[].
Json foldingRanges(const Analysis& analysis);

class Workspace;
// workspace/symbol: SymbolInformation[] for the top-level declarations and
// `let`s of the open documents and of the user modules their checks read,
// whose names contain the query's characters in order (ignoring case; an
// empty query matches every one).
Json workspaceSymbols(Workspace& workspace, const std::string& query);

// The protocol's SymbolKind numbers that documentSymbols uses.
enum class SymbolKind : int {
  Module = 2, Namespace = 3, Class = 5, Method = 6, Property = 7, Field = 8, Function = 12, Constant = 14,
  Array = 18, Object = 19, Key = 20, Struct = 23, Event = 24,
};

}  // namespace ipu::lsp
