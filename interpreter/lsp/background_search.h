// The search's figure in the code lens: "search: 1.30x possible" (the best
// mapping the search finds against the script's own, by the conservative
// ranking `ipu search` uses and prints) or "search: yours is the best".
//
// A search takes from 0.2 s to seconds, far more than a lens may take after
// an edit, so it runs on a thread of its own, never the reader's nor the
// worker's: the worker, answering textDocument/codeLens, shows the figures
// already found and asks (want()) for the phases that have none. A document
// is searched once its edits have stopped for a quiet period (while the user
// types, every keystroke would start a search only to stop it), one phase at
// a time, at most one search at a time, in a session of its own that checks
// the text the lens was computed from. When figures are found, `found` is
// called (the server sends workspace/codeLens/refresh).
//
// Figures are kept by the key the estimate cache uses (the phase plan's
// content without source positions, Workspace::estimateOf), so an edit of a
// comment, another mapping or the lines above finds the figure it had and
// searches nothing. The search's own cache on disk (search/result_cache.h,
// the one `ipu check` uses for `search { }`) is read and written too, so a
// restarted server does not search again what it searched before. An edit
// of a document stops its running search between waves (what it found is
// dropped) and forgets the phases asked for at older versions.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace ipu::lsp {

class BackgroundSearch {
 public:
  struct Options {
    std::chrono::milliseconds quietPeriod{500};
    // Called on the search thread before each phase's search (the tests count them).
    std::function<void(const std::string& run, const std::string& phase)> beforeSearch;
    // Called on the search thread once new figures are kept.
    std::function<void()> found;
  };
  // A phase to search: its run and name, and the key of its plan.
  struct Phase {
    std::string run, phase, key;
  };
  // The texts a version of a document was checked with: its own, and the
  // other open documents' (the modules it imports, unsaved), by session path.
  struct Request {
    std::string uri;
    long long version = 0;
    std::string path;
    std::shared_ptr<const std::string> text;
    std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> others;
    std::vector<Phase> phases;
  };

  explicit BackgroundSearch(Options options);
  ~BackgroundSearch();
  BackgroundSearch(const BackgroundSearch&) = delete;
  BackgroundSearch& operator=(const BackgroundSearch&) = delete;

  // The lens's figure for a phase plan's key: none when not searched yet; an
  // empty text when the search has nothing to compare (it could not run,
  // nothing fits, the script's mapping is placed by Lua or uses more IPUs
  // than the search may).
  std::optional<std::string> figure(const std::string& key) const;
  // Search these phases of this version once the document is quiet (replaces
  // what was asked for the document before). The worker's.
  void want(Request request);
  // The document changed (the reader's): a search of it stops, its quiet
  // period starts again, and what was asked at older versions is dropped.
  void edited(const std::string& uri, long long version);
  void closed(const std::string& uri);

  static constexpr std::size_t kFiguresKept = 64;

 private:
  void loop();

  Options options_;
  std::optional<std::string> diskCache_;
  int threads_ = 1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::string, Request> wanted_;                                   // by uri
  std::map<std::string, std::chrono::steady_clock::time_point> lastEdit_;   // by uri
  std::map<std::string, long long> latestVersion_;                          // by uri
  std::map<std::string, std::string> figures_;                              // by phase plan key
  std::string running_;                                                      // the uri being searched
  std::atomic<bool> stop_{false};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ipu::lsp
