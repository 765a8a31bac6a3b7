// The language server's latency and memory (docs/benchmarks.md, "The
// language server"), on the BERT-Large POD64 and GPT-3 175B POD256 examples:
// a server in this process behind an in-memory transport (no pipe, so the
// figures are the server's own), driven as an editor drives it.
//
// - diagnostics after a one-character edit of the mapping: from sending the
//   didChange to receiving its publishDiagnostics (check, hooks, plan);
// - hover on a value in the mapping (the evaluator runs again over the text);
// - completion at the start of a new member line of the mapping;
// - code lenses after an edit of the mapping's value: a new
//   `available_memory_proportion` each time (so the phase plans differ and
//   every estimate is priced, never taken from the cache), from sending the
//   didChange to receiving the lenses (the check and plan, then the lens
//   request); and the lens request alone once the diagnostics are out;
// - memory (resident set) over 10,000 edits of the mapping, every 1,000:
//   the session is renewed every Workspace::kChecksPerSession checks, so it
//   must stay flat.
//
// Wall-clock medians and 90th percentiles of 200 of each (an editor waits
// for wall-clock time), on a shared machine. Figures, not tests.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "interpreter/check/prelude.h"
#include "interpreter/lsp/server.h"
#include "interpreter/lsp/transport.h"

namespace {

using ipu::lsp::Json;
using Clock = std::chrono::steady_clock;

std::string read(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Percentiles {
  double median, p90;
};
Percentiles percentiles(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[v.size() * 9 / 10]};
}

// Resident set size in MiB (Linux).
double residentMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

class Editor {
 public:
  Editor() : server_(transport_, options()), thread_([this] { server_.run(); }) {}
  ~Editor() {
    transport_.close();
    thread_.join();
  }
  void notify(const std::string& method, Json params) {
    transport_.send(ipu::lsp::serialize(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}}));
  }
  Json request(const std::string& method, Json params) {
    const long long id = nextId_++;
    transport_.send(ipu::lsp::serialize(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}}));
    return waitFor([&](const Json& m) { return m.contains("id") && m["id"] == id && !m.contains("method"); });
  }
  Json diagnostics(long long version) {
    return waitFor([&](const Json& m) {
      return m.value("method", "") == "textDocument/publishDiagnostics" && m["params"].value("version", -1LL) == version;
    });
  }

 private:
  static ipu::lsp::ServerOptions options() {
    ipu::lsp::ServerOptions o;
    o.standardLibraryDirectory = "/tmp/ipu_lsp_bench_stdlib";
    o.log = [](const std::string&) {};
    return o;
  }
  template <class Want>
  Json waitFor(Want want) {
    for (;;) {
      auto body = transport_.receive(60);
      if (!body) {
        std::fprintf(stderr, "lsp_bench: the server did not answer\n");
        std::exit(1);
      }
      Json m = Json::parse(*body);
      if (want(m)) return m;
    }
  }
  ipu::lsp::MemoryTransport transport_;
  ipu::lsp::Server server_;
  std::thread thread_;
  long long nextId_ = 1;
};

Json position(std::uint32_t line, std::uint32_t character) { return Json{{"line", line}, {"character", character}}; }

struct Figures {
  Percentiles diagnostics, hover, completion, lensAfterEdit, lensAlone;
  std::vector<double> memory;  // MiB after every 1,000 edits
};

Figures bench(const std::string& example) {
  const std::string path = std::string(IPU_SOURCE_DIR) + "/examples/" + example;
  const std::string uri = "file://" + path;
  std::string text = read(path);
  // The mapping's `replicas:` line (a member, not a comment): where the edits go.
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::uint32_t line = 0;
  while (line < lines.size() && lines[line].rfind("  replicas:", 0) != 0) ++line;
  if (line == lines.size()) {
    std::fprintf(stderr, "lsp_bench: %s has no `  replicas:` line\n", example.c_str());
    std::exit(1);
  }
  const std::uint32_t end = static_cast<std::uint32_t>(lines[line].size());
  const std::uint32_t value = static_cast<std::uint32_t>(lines[line].find(':') + 2);

  Editor editor;
  editor.request("initialize", Json{{"capabilities", Json::object()}});
  editor.notify("initialized", Json::object());
  editor.notify("textDocument/didOpen",
                Json{{"textDocument", Json{{"uri", uri}, {"languageId", "ipu"}, {"version", 1}, {"text", text}}}});
  editor.diagnostics(1);
  long long version = 1;
  // One character in, then out: the text alternates between two versions.
  auto edit = [&] {
    ++version;
    const bool insert = version % 2 == 0;
    Json range{{"start", position(line, end)}, {"end", position(line, insert ? end : end + 1)}};
    editor.notify("textDocument/didChange", Json{{"textDocument", Json{{"uri", uri}, {"version", version}}},
                                                 {"contentChanges", Json::array({Json{{"range", range}, {"text", insert ? " " : ""}}})}});
  };
  const Json doc{{"uri", uri}};
  std::vector<double> diagnostics, hover, completion;
  for (int i = 0; i < 200; ++i) {
    auto t0 = Clock::now();
    edit();
    editor.diagnostics(version);
    diagnostics.push_back(ms(t0));
    t0 = Clock::now();
    Json h = editor.request("textDocument/hover", Json{{"textDocument", doc}, {"position", position(line, value)}});
    hover.push_back(ms(t0));
    if (i == 0 && !h["result"].is_object()) std::fprintf(stderr, "lsp_bench: no hover at %u:%u\n", line, value);
    t0 = Clock::now();
    editor.request("textDocument/completion", Json{{"textDocument", doc}, {"position", position(line, 2)}});
    completion.push_back(ms(t0));
  }
  // The mapping's value changed: a new first available_memory_proportion each time.
  std::uint32_t amp = 0;
  while (amp < lines.size() && lines[amp].rfind("  available_memory_proportion:", 0) != 0) ++amp;
  if (amp == lines.size()) {
    std::fprintf(stderr, "lsp_bench: %s has no `  available_memory_proportion:` line\n", example.c_str());
    std::exit(1);
  }
  const std::uint32_t ampAt = static_cast<std::uint32_t>(lines[amp].find("0."));
  std::uint32_t ampLength = 4;  // `0.20`, `0.15` as written
  std::vector<double> lensAfterEdit, lensAlone;
  for (int i = 0; i < 200; ++i) {
    char amount[16];
    std::snprintf(amount, sizeof amount, "%.4f", 0.15 + 0.0001 * i);
    ++version;
    Json range{{"start", position(amp, ampAt)}, {"end", position(amp, ampAt + ampLength)}};
    ampLength = static_cast<std::uint32_t>(std::string(amount).size());
    auto t0 = Clock::now();
    editor.notify("textDocument/didChange", Json{{"textDocument", Json{{"uri", uri}, {"version", version}}},
                                                 {"contentChanges", Json::array({Json{{"range", range}, {"text", amount}}})}});
    editor.diagnostics(version);
    auto t1 = Clock::now();
    Json lenses = editor.request("textDocument/codeLens", Json{{"textDocument", doc}});
    lensAfterEdit.push_back(ms(t0));
    lensAlone.push_back(ms(t1));
    if (i == 0 && (!lenses["result"].is_array() || lenses["result"].empty())) std::fprintf(stderr, "lsp_bench: no code lens\n");
  }
  Figures f{percentiles(diagnostics), percentiles(hover), percentiles(completion), percentiles(lensAfterEdit),
            percentiles(lensAlone), {}};
  for (int i = 1; i <= 10000; ++i) {
    edit();
    editor.diagnostics(version);
    if (i % 1000 == 0) f.memory.push_back(residentMiB());
  }
  return f;
}

}  // namespace

int main() {
  ipu::check::Prelude::get();  // loaded once per process, as in `ipu lsp`; not part of any figure
  const char* examples[] = {"bert_large_pod64.ipu", "gpt3_175b_pod256.ipu"};
  std::vector<Figures> figures;
  for (const char* e : examples) figures.push_back(bench(e));
  std::printf("| Example | diagnostics after an edit, ms (median / p90) | hover, ms | completion, ms | code lens after an edit of the mapping's value, ms | code lens request alone, ms |\n|---|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const Figures& f = figures[i];
    std::printf("| %s | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |\n", examples[i], f.diagnostics.median,
                f.diagnostics.p90, f.hover.median, f.hover.p90, f.completion.median, f.completion.p90, f.lensAfterEdit.median,
                f.lensAfterEdit.p90, f.lensAlone.median, f.lensAlone.p90);
  }
  std::printf("\nResident memory (MiB) after every 1,000 of 10,000 edits (both examples in one process, one after the other):\n");
  for (std::size_t i = 0; i < figures.size(); ++i) {
    std::printf("%s:", examples[i]);
    for (double m : figures[i].memory) std::printf(" %.0f", m);
    std::printf("\n");
  }
  return 0;
}
