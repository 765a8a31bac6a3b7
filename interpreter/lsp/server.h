// The language server: `ipu lsp` (docs/editor.md).
//
// Two threads. The reader (the caller of run()) reads messages in order and
// does what must happen in order or at once: the lifecycle (initialize,
// shutdown, exit), $/cancelRequest, and the document store's edits (didOpen,
// didChange, didClose), after which it queues a check of the document. Every
// request about a document is queued too, with the text of the version it
// was asked about; one worker thread, which alone owns the Workspace (the
// session and its snapshots), takes the queue in order. So a request never
// sees a text older than the edits sent before it, and while the worker is
// busy with a long check the reader still reads: a request cancelled before
// the worker answers it is answered with RequestCancelled (-32800) instead.
//
// Checks of a document that was edited again before the worker reached them
// are skipped (the later check publishes), so typing faster than checking
// costs nothing. After a check, the document's diagnostics (those of `ipu
// check`) are published, then the open documents importing it are checked
// again and theirs too.
//
// After a check the server asks clients that support it to fetch the code
// lenses and inlay hints again (workspace/codeLens/refresh,
// workspace/inlayHint/refresh): their figures follow the plan.
//
// codeAction/resolve runs the mapping search (best_mapping.h) on the worker;
// cancelling it stops the search between its waves.
//
// A third thread, when ServerOptions::searchQuietPeriod is set, searches the
// phases whose lenses are shown once their document's edits stop, for the
// lens's "search: 1.30x possible" (background_search.h); when it has found
// figures the server sends workspace/codeLens/refresh.
//
// Exit codes (the protocol's): 0 when `exit` follows `shutdown`, 1 otherwise
// (an `exit` without `shutdown`, or the end of input without `exit`).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "interpreter/lsp/background_search.h"
#include "interpreter/lsp/completion.h"
#include "interpreter/lsp/document_store.h"
#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/methods.h"
#include "interpreter/lsp/standard_library_files.h"
#include "interpreter/lsp/transport.h"
#include "interpreter/lsp/workspace.h"

namespace ipu::lsp {

struct ServerOptions {
  // Where the standard library's files are written for go-to-definition
  // (standard_library_files.h); empty: the user's cache.
  std::string standardLibraryDirectory;
  // Where the server says what it dropped (a bad header, an internal
  // error); by default standard error, which clients show in their log.
  std::function<void(const std::string&)> log;
  // Called on the worker just before it runs each request: the tests hold a
  // request there to cancel it at a known moment.
  std::function<void(Method)> beforeRequest;
  // How long a document's edits must have stopped before its phases are
  // searched for the lens's figure; none: no background search (the lenses
  // then show no search figure). `ipu lsp` sets it; the tests of other
  // things and the benchmark leave it off so that no search competes with
  // what they measure or compare.
  std::optional<std::chrono::milliseconds> searchQuietPeriod;
  // Called on the search thread before each background search of a phase
  // (the tests count them).
  std::function<void(const std::string& run, const std::string& phase)> beforeSearch;
};

class Server {
 public:
  explicit Server(Transport& transport, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves until `exit` or the end of input; returns the exit code.
  int run();

 private:
  struct Job {
    enum class Kind { Request, Check, Close } kind = Kind::Request;
    Json id;
    Method method = Method::Unknown;
    Json params;
    OpenDocument document;  // Request: as it was when asked; Check: the version to check; Close: uri and path
  };

  // Reader thread.
  void onMessage(const Message& message);
  void onNotification(Method method, const Json& params);
  void onRequest(Method method, const Json& id, const Json& params);
  Json initialize(const Json& params);
  void enqueue(Job job);
  void send(const Json& message);

  // Worker thread.
  void work();
  void runRequest(Job& job);
  // A request's result, or the error it is answered with.
  struct Answer {
    Json result;
    std::optional<std::pair<ErrorCode, std::string>> error;
  };
  Answer answer(const Job& job, const Analysis* analysis);
  void runCheck(const Job& job);
  void publish(const std::vector<Json>& params);
  // A request of the server's own (a refresh), with no params.
  void sendRequest(const std::string& method);
  bool cancelled(const Json& id);
  void finish(const Json& id);

  Transport& transport_;
  ServerOptions options_;
  DocumentStore documents_;
  StandardLibraryFiles standardLibrary_;
  Workspace workspace_;  // the worker's alone
  CompletionOptions completion_;

  bool initialized_ = false;
  bool shutdownRequested_ = false;
  // The client takes workspace/codeLens/refresh and workspace/inlayHint/refresh
  // (set by initialize, before the worker reads them).
  bool refreshCodeLenses_ = false, refreshInlayHints_ = false;
  bool resolveActions_ = false;  // the client resolves code actions' edits (codeAction/resolve)
  std::atomic<long long> sentRequests_{0};  // the worker's and the search thread's

  std::mutex mutex_;  // guards the queue, the pending and cancelled ids, stopping_
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::set<std::string> pending_, cancelled_;
  std::string searching_;                   // the id of the codeAction/resolve whose search runs
  std::atomic<bool> stopSearch_{false};     // set when that request is cancelled
  bool stopping_ = false;
  std::thread worker_;
  // Declared last: destroyed first, so its thread ends before what its
  // callback sends through.
  std::unique_ptr<BackgroundSearch> searches_;
};

}  // namespace ipu::lsp
