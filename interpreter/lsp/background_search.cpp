#include "interpreter/lsp/background_search.h"

#include <algorithm>
#include <cstdio>

#include "interpreter/search/result_cache.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"

namespace ipu::lsp {

namespace {

// What `ipu search` prints after "yours": the same rule and the same
// figure, for its defaults (throughput, ranked conservatively). Empty when
// it has no comparison to print.
std::string figureOf(const search::PhaseResult& r) {
  if (!r.error.empty() || r.top.empty() || !r.declared) return "";
  const search::Candidate& d = *r.declared;
  const search::Candidate& best = r.top.front();
  if (!d.fits || d.ipusUsed > r.maxIpus) return "";
  if (best.split == search::Split::Declared || best.score >= d.score) return "search: yours is the best";
  char buf[64];
  std::snprintf(buf, sizeof buf, "search: %.2fx possible", d.rankedStep / best.rankedStep);
  return buf;
}

}  // namespace

BackgroundSearch::BackgroundSearch(Options options)
    : options_(std::move(options)), diskCache_(search::cacheDirectoryFromEnvironment()) {
  // One core is left to the worker, so diagnostics and hovers are not slowed
  // by a search (its answer is the same for any number of threads).
  threads_ = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
  thread_ = std::thread([this] { loop(); });
}

BackgroundSearch::~BackgroundSearch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> BackgroundSearch::figure(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = figures_.find(key);
  if (it == figures_.end()) return std::nullopt;
  return it->second;
}

void BackgroundSearch::want(Request request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Asked about a version the document has left already: its lens is stale.
    if (auto latest = latestVersion_.find(request.uri); latest != latestVersion_.end() && latest->second > request.version) return;
    const std::string uri = request.uri;
    wanted_[uri] = std::move(request);
  }
  wake_.notify_all();
}

void BackgroundSearch::edited(const std::string& uri, long long version) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lastEdit_[uri] = std::chrono::steady_clock::now();
    latestVersion_[uri] = version;
    wanted_.erase(uri);
    if (running_ == uri) stop_ = true;
  }
  wake_.notify_all();
}

void BackgroundSearch::closed(const std::string& uri) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lastEdit_.erase(uri);
    latestVersion_.erase(uri);
    wanted_.erase(uri);
    if (running_ == uri) stop_ = true;
  }
  wake_.notify_all();
}

void BackgroundSearch::loop() {
  for (;;) {
    Request request;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (stopping_) return;
        // The first document asked about whose quiet period has passed.
        const auto now = std::chrono::steady_clock::now();
        std::optional<std::chrono::steady_clock::time_point> next;
        auto pick = wanted_.end();
        for (auto it = wanted_.begin(); it != wanted_.end(); ++it) {
          auto edit = lastEdit_.find(it->first);
          const auto due = edit == lastEdit_.end() ? now : edit->second + options_.quietPeriod;
          if (due <= now) {
            pick = it;
            break;
          }
          if (!next || due < *next) next = due;
        }
        if (pick != wanted_.end()) {
          request = std::move(pick->second);
          wanted_.erase(pick);
          running_ = request.uri;
          stop_ = false;
          break;
        }
        if (next) wake_.wait_until(lock, *next);
        else wake_.wait(lock);
      }
    }
    bool foundAny = false;
    try {
      session::Session s;
      for (const auto& [path, text] : request.others) s.update(path, *text);
      const base::FileId root = s.addSource(request.path, *request.text);
      const check::CheckedProgram* program = s.check(root);
      for (const auto& wanted : request.phases) {
        if (program == nullptr || stop_) break;
        if (figure(wanted.key)) continue;  // found meanwhile for another document or version
        const check::PhaseSpec* spec = nullptr;
        for (const auto& run : program->runs)
          for (const auto& ph : run.phases)
            if (run.name == wanted.run && ph.name == wanted.phase) spec = &ph;
        if (spec == nullptr) continue;
        if (options_.beforeSearch) options_.beforeSearch(wanted.run, wanted.phase);
        search::Options o;  // `ipu search`'s defaults: throughput, ranked conservatively
        o.threads = threads_;
        o.interrupt = &stop_;
        search::PhaseResult r = search::searchPhaseCached(*spec, s.checker()->evaluator(), s.sources(), o, diskCache_);
        // The document changed meanwhile: the search was stopped (a figure
        // of part of the space would mislead) or is of a text that is gone;
        // the new version's lens asks again, and finds what is still the same.
        if (r.stopped != search::StopReason::None || stop_) break;
        std::lock_guard<std::mutex> lock(mutex_);
        // Bounded: each value of a mapping searched adds one.
        if (figures_.size() >= kFiguresKept) figures_.clear();
        figures_[wanted.key] = figureOf(r);
        foundAny = true;
      }
    } catch (const std::exception&) {
      // A script the search cannot take shows no figure; the lens is still there.
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.clear();
    }
    if (foundAny && options_.found) options_.found();
  }
}

}  // namespace ipu::lsp
