#include "tests/unit/test_support.h"

#include <cstdlib>
#include <sstream>
#include <unistd.h>

#include <filesystem>

#include "interpreter/base/render.h"
#include "interpreter/runner/train.h"

namespace ipu::test {

namespace {
// Run outside ctest too (which sets it), a test never reads or writes the
// user's cache of search results; the cache's own tests give each session a
// temporary directory (Session::setSearchCache).
[[maybe_unused]] const bool kNoUserCache = ::setenv("IPU_NO_CACHE", "1", /*overwrite=*/0) == 0;
}  // namespace

std::string sourceDir() { return IPU_SOURCE_DIR; }

std::vector<std::string> Outcome::codes() const {
  std::vector<std::string> out;
  for (const auto& d : session->diagnostics().all()) out.push_back(d.code);
  return out;
}

std::vector<std::string> Outcome::errorCodes() const {
  std::vector<std::string> out;
  for (const auto& d : session->diagnostics().all())
    if (d.severity == base::Severity::Error) out.push_back(d.code);
  return out;
}

std::string Outcome::rendered() const {
  std::string s;
  for (const auto& d : session->diagnostics().all()) s += base::renderHuman(d, session->sources(), false);
  return s;
}

Outcome runText(const std::string& text, const std::string& name) {
  Outcome o;
  o.session = std::make_unique<session::Session>();
  base::FileId f = o.session->addSource(sourceDir() + "/tests/" + name, text);
  o.plan = o.session->plan(f);
  return o;
}

Outcome runFile(const std::string& path, bool estimate) {
  Outcome o;
  o.session = std::make_unique<session::Session>();
  if (auto f = o.session->readFile(path)) {
    if (estimate) {
      o.estimate = o.session->estimate(*f);
      o.plan = o.session->lastPlan();
    } else {
      o.plan = o.session->plan(*f);
    }
  }
  return o;
}

Outcome trainFile(const std::string& path, long long steps) {
  namespace fs = std::filesystem;
  Outcome o;
  o.session = std::make_unique<session::Session>();
  o.session->setPurpose(session::Purpose::Run);
  auto f = o.session->readFile(path);
  if (!f) return o;
  o.plan = o.session->plan(*f, true);
  if (o.plan == nullptr || o.session->diagnostics().hasErrors()) return o;
  runner::TrainSettings t;
  t.runsRoot = (fs::temp_directory_path() / ("ipu-test-runs-" + std::to_string(::getpid()))).string();
  t.stepLimit = steps;
  t.scriptText = o.session->rootText();
  t.scriptDirectory = fs::absolute(path).parent_path().string();
  t.threads = 1;
  std::ostringstream progress;
  for (const auto& run : o.plan->runs) runner::train(*o.session, run, t, progress, false);
  std::error_code ec;
  fs::remove_all(t.runsRoot, ec);
  return o;
}

const nlohmann::ordered_json* jsonAt(const nlohmann::ordered_json& root, const std::string& path) {
  const nlohmann::ordered_json* cur = &root;
  std::size_t start = 0;
  while (cur != nullptr && start <= path.size()) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) break;
    if (cur->is_array()) {
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || idx < 0 || static_cast<std::size_t>(idx) >= cur->size()) return nullptr;
      cur = &(*cur)[static_cast<std::size_t>(idx)];
    } else if (cur->is_object()) {
      auto it = cur->find(part);
      cur = it == cur->end() ? nullptr : &*it;
    } else {
      return nullptr;
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

}  // namespace ipu::test
