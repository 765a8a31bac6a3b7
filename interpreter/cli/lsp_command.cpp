// `ipu lsp`: the language server over stdin and stdout (docs/editor.md).
#include <chrono>
#include <csignal>
#include <iostream>
#include <unistd.h>

#include "interpreter/cli/arguments.h"
#include "interpreter/cli/command.h"
#include "interpreter/lsp/server.h"
#include "interpreter/lsp/transport.h"

namespace ipu::cli {

namespace {

const char* kHelp = R"(usage: ipu lsp [--stdlib-dir DIR]

Run the language server: an editor starts it and speaks the Language Server
Protocol to it over stdin and stdout (docs/editor.md). It shows what `ipu
check` reports as you type, and answers hover, go to definition (into the
standard library too), references, rename, completion, signature help, quick
fixes, document and workspace symbols, folding, semantic tokens, and
formatting of the document or of a range (`ipu fmt`'s). From the plan and
the cost model (`ipu plan`, `ipu estimate`): a code lens above each mapping
with each phase's verdict, peak memory and throughput (and, once the edits
stop and a search has run in the background, what `ipu search` finds against
it: "search: 1.30x possible"); inlay hints after
each pipeline stage with its IPU's memory and FLOP share; hover on a stage
(its memory by category) and on a layer (parameters, FLOPs, memory);
completion of layer paths in pipeline stages; quick fixes that write the
changes a mapping that does not fit needs; and "apply the best mapping
found", which runs `ipu search` when picked and writes what `--apply` would.

options:
  --stdlib-dir DIR       where to write the standard library's files, read-only,
                         for go to definition (default: the user's cache,
                         ~/.cache/ipu/stdlib-HASH)

Exit codes (the protocol's): 0 after `shutdown` then `exit`, 1 otherwise.
)";

int run(const std::vector<std::string>& args) {
  lsp::ServerOptions options;
  // Long enough that typing does not start a search per keystroke.
  options.searchQuietPeriod = std::chrono::milliseconds(500);
  ArgumentReader in(args);
  std::string v;
  while (in.next()) {
    if (in.value("--stdlib-dir", v)) {
      if (v.empty()) return usage("lsp", "--stdlib-dir takes a directory");
      options.standardLibraryDirectory = v;
    }
    else if (in.isOption()) return usage("lsp", "unknown option `" + in.word() + "`");
    else return usage("lsp", "`lsp` takes no files: the editor sends them");
  }
  // The protocol owns stdout: anything else written there (a stray print)
  // would corrupt it, so the messages go to a copy of it and stdout itself
  // becomes stderr, which clients show as the server's log.
  std::cout.flush();
  const int protocolOut = ::dup(STDOUT_FILENO);
  if (protocolOut < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::cerr << "ipu lsp: cannot set up standard output\n";
    return kUserError;
  }
  // A client that goes away is the end of input, not a signal that kills us mid-write.
  std::signal(SIGPIPE, SIG_IGN);
  lsp::StreamTransport transport(STDIN_FILENO, protocolOut);
  lsp::Server server(transport, std::move(options));
  return server.run();
}

}  // namespace

const Command kLspCommand{"lsp", "lsp", "the language server, for editors (docs/editor.md)", kHelp, run};

}  // namespace ipu::cli
