// The code action "Apply the best mapping found by the search": what `ipu
// search --apply` writes, for the phases that use one mapping.
//
// A search takes from a fraction of a second (BERT-Large on a POD64) to
// seconds, too long for the list of code actions an editor asks for at every
// move of the cursor. So the action is listed without its edit
// (code_actions.h, for a client that resolves actions: LSP 3.16
// `codeAction/resolve`), and the search runs only when the user picks it:
// each phase using the mapping is searched (search::searchPhase, the
// default objective and the conservative ranking of `ipu search`), and the
// answers are written into the document's text by search::putFoundMappings,
// the writer of `--write` and `--apply` (the found mapping declared as
// `NAME_searched` through the mapping value and the table of mapping fields,
// the phases pointed at it). The document's text and the open modules it
// imports are checked in sessions of the action's own; nothing is read from
// or written to the disk but what a check reads.
#pragma once

#include <atomic>
#include <string>

#include "interpreter/lsp/json_rpc.h"

namespace ipu::lsp {

struct Analysis;
class Workspace;

struct BestMapping {
  Json edit;            // a WorkspaceEdit replacing the document's text
  std::string refusal;  // when no edit: why (nothing uses the mapping, nothing fits, stopped)
};

// `stop`: set by a cancellation; the search then stops between waves and no
// edit is made.
BestMapping bestMappingEdit(Workspace& workspace, const Analysis& analysis, const std::string& mapping,
                            const std::atomic<bool>* stop);

}  // namespace ipu::lsp
