// What only `ipu` can show in an editor: the plan and the cost model's
// figures of the mappings being written, from the same plan `ipu plan` and
// `ipu estimate` make (Workspace::planOf) and the same estimate of each phase
// (Workspace::estimateOf, cached by the phase plan's content). No script
// text is written to get them.
//
// - textDocument/codeLens: above each mapping declaration, one lens per phase
//   that uses it: its verdict, peak In-Processor Memory and where ("fits ·
//   peak 532.0 MB (59%) on IPU 3 · 4,942 samples/s · search: 1.30x
//   possible"); a mapping no training uses says so. The search's figure is
//   the background search's (background_search.h), once it has one: until
//   then the lens has none and the phase is asked for.
// - textDocument/inlayHint: after each `ipu N:` line of a mapping's
//   pipeline, that IPU's memory against its capacity and its share of the
//   model's forward and backward FLOPs.
// - hover (added to hover.h's answer): on `ipu N:`, that IPU's memory by the
//   plan's categories against its capacity; on a layer path in a stage, or a
//   layer declared in a model, its layers' parameters, FLOPs and memory.
//
// A mapping used by several phases shows the first phase (in run order) in
// hints and hovers, and names it when there is more than one. A version that
// does not check has no plan: these show nothing until it does.
#pragma once

#include <optional>
#include <string>

#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;
class BackgroundSearch;

// CodeLens[] (each with a display-only command: its title). `searches`:
// null when the server searches nothing in the background.
Json codeLenses(Workspace& workspace, const Analysis& analysis, BackgroundSearch* searches = nullptr);
// InlayHint[] within `range`.
Json inlayHints(Workspace& workspace, const Analysis& analysis, const Range& range);
// Markdown about the plan at the position (a stage's `ipu N`, a layer path
// in a stage, a layer declared in a model), or none.
std::optional<std::string> planHover(Workspace& workspace, const Analysis& analysis, Position position);

}  // namespace ipu::lsp
