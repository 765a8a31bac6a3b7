// The language server never crashes and always answers, whatever the text:
// every file of the fuzz corpora (scripts, calibration tables, the minimized
// reproducers of fixed bugs) and every diagnostics script is sent as an edit
// of one open document, each followed by every request the server answers;
// a few are also typed character by character and then deleted, with a
// hover and a completion at the cursor after each keystroke. Each request
// must get a reply (a result or an error), and the server must still shut
// down cleanly at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "interpreter/lsp/positions.h"
#include "tests/lsp/lsp_client.h"

namespace fs = std::filesystem;
using namespace ipu::lsp;
using namespace ipu::lsp::test;

namespace {

// The text as an editor holds it: a document is Unicode, so bytes that are
// not UTF-8 arrive as U+FFFD.
std::string asDocument(const std::string& bytes) {
  return Json::parse(serialize(Json(bytes))).get<std::string>();
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<fs::path> inputs() {
  const fs::path root = IPU_SOURCE_DIR;
  std::vector<fs::path> out;
  for (const char* d : {"tests/fuzz/corpus", "tests/fuzz/corpus_calibrate", "tests/fuzz/regressions/fixed", "tests/diagnostics"})
    for (const auto& e : fs::directory_iterator(root / d))
      if (e.is_regular_file() && e.path().filename() != "README") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// A document of a path that does not exist, so relative imports and Lua
// files fail with a diagnostic instead of reading this machine's files.
const std::string kUri = "file:///tmp/ipu-lsp-fuzz-nowhere/input.ipu";

Json textDocument() { return Json{{"textDocument", Json{{"uri", kUri}}}}; }
Json at(Position p) {
  Json j = textDocument();
  j["position"] = Json{{"line", p.line}, {"character", p.character}};
  return j;
}

// Every request, at `middle` and `end`, with the diagnostics published for
// the text; each must be answered, with a result (a rename may be refused).
void askEverything(Client& c, Position middle, Position end, const Json& diagnostics, const std::string& what) {
  Json rename = at(middle);
  rename["newName"] = "renamed";
  Json actions = textDocument();
  actions["range"] = Json{{"start", Json{{"line", 0}, {"character", 0}}}, {"end", Json{{"line", end.line}, {"character", end.character}}}};
  actions["context"] = Json{{"diagnostics", diagnostics}};
  Json ranged = textDocument();
  ranged["range"] = Json{{"start", Json{{"line", middle.line}, {"character", 0}}}, {"end", Json{{"line", end.line}, {"character", end.character}}}};
  const std::pair<const char*, Json> requests[] = {
      {"textDocument/documentSymbol", textDocument()},
      {"textDocument/foldingRange", textDocument()},
      {"textDocument/semanticTokens/full", textDocument()},
      {"textDocument/formatting", textDocument()},
      {"textDocument/hover", at(middle)},
      {"textDocument/definition", at(middle)},
      {"textDocument/references", at(middle)},
      {"textDocument/completion", at(end)},
      {"textDocument/completion", at(middle)},
      {"textDocument/signatureHelp", at(middle)},
      {"textDocument/prepareRename", at(middle)},
      {"textDocument/rename", rename},
      {"textDocument/codeAction", actions},
      {"workspace/symbol", Json{{"query", "a"}}},
      {"textDocument/codeLens", textDocument()},
      {"textDocument/inlayHint", ranged},
      {"textDocument/rangeFormatting", ranged},
  };
  for (const auto& [method, params] : requests) {
    Json reply = c.request(method, params, 120);
    ASSERT_FALSE(reply.is_null()) << method << " got no reply for " << what;
    ASSERT_TRUE(reply.contains("result") || reply.contains("error")) << method << ": " << reply.dump();
    const bool refusedRename = std::string(method) == "textDocument/rename" && reply.contains("error") &&
                               reply["error"]["code"] == -32803;
    ASSERT_TRUE(!reply.contains("error") || refusedRename) << method << " failed for " << what << ": " << reply.dump();
  }
}

struct Robustness : ::testing::Test {
  std::unique_ptr<InProcessClient> client;
  fs::path stdlib;
  void SetUp() override {
    stdlib = fs::temp_directory_path() / ("ipu_lsp_robustness_" + std::to_string(::getpid()));
    ServerOptions o;
    o.standardLibraryDirectory = stdlib.string();
    client = std::make_unique<InProcessClient>(o);
    ASSERT_TRUE(client->initialize().contains("result"));
    client->open(kUri, "");
  }
  void TearDown() override {
    if (client) {
      EXPECT_TRUE(client->request("shutdown", nullptr).contains("result"));
      client->notify("exit", nullptr);
      EXPECT_EQ(client->finish(), 0);
    }
    std::error_code ec;
    for (auto& p : fs::recursive_directory_iterator(stdlib, ec)) fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(stdlib, ec);
  }
};

}  // namespace

TEST_F(Robustness, EveryCorpusFileAsAWholeFileEdit) {
  const auto files = inputs();
  ASSERT_GT(files.size(), 900u);
  std::string current;
  long long version = 1;
  const auto started = std::chrono::steady_clock::now();
  for (const auto& f : files) {
    const std::string text = asDocument(read(f));
    client->replaceAll(kUri, current, text, ++version);
    current = text;
    LineIndex lines(current);
    const Position end = lines.positionOf(current.size(), PositionEncoding::Utf16);
    const Position middle = lines.positionOf(current.size() / 2, PositionEncoding::Utf16);
    // This version's diagnostics (each edit waits for the answers of the last, so none is skipped).
    Json published = client->waitForDiagnostics(kUri, version, 120);
    ASSERT_FALSE(published.is_null()) << "no diagnostics for " << f.filename();
    askEverything(*client, middle, end, published["params"]["diagnostics"], f.filename().string());
    if (HasFatalFailure()) return;
    client->takeNotifications();  // drained, so the client's memory stays flat
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << files.size() << " files, " << seconds << " s\n";
}

TEST_F(Robustness, AFewFilesTypedAndDeletedCharacterByCharacter) {
  const fs::path root = IPU_SOURCE_DIR;
  const fs::path files[] = {
      root / "tests/diagnostics/IPU1002_duplicate_declaration.ipu",
      root / "tests/diagnostics/IPU0003_unterminated_string.ipu",
      root / "tests/fuzz/regressions/fixed/fmt_lone_surrogate.ipu",
      root / "tests/diagnostics/IPU1204_no_length.ipu",
      root / "examples/bert_large_pod64.ipu",
  };
  std::string current;
  long long version = 1;
  for (const auto& f : files) {
    const std::string text = asDocument(read(f));
    // Typed: one character (code point) at a time at the end.
    for (std::size_t i = 0; i < text.size();) {
      std::size_t n = characterBytes(text, i);
      LineIndex lines(current);
      const Position end = lines.positionOf(current.size(), PositionEncoding::Utf16);
      Json r{{"start", Json{{"line", end.line}, {"character", end.character}}}, {"end", Json{{"line", end.line}, {"character", end.character}}}};
      client->change(kUri, ++version, r, text.substr(i, n));
      current += text.substr(i, n);
      i += n;
      LineIndex after(current);
      const Position cursor = after.positionOf(current.size(), PositionEncoding::Utf16);
      for (const char* method : {"textDocument/hover", "textDocument/completion"}) {
        Json reply = client->request(method, at(cursor), 120);
        ASSERT_TRUE(reply.contains("result")) << method << " after " << current.size() << " bytes of " << f << ": " << reply.dump();
      }
      client->takeNotifications();
    }
    // The server has the client's text: the diagnostics of the whole file
    // include the code its name says it triggers.
    client->replaceAll(kUri, current, current, ++version);
    Json published = client->waitForDiagnostics(kUri, version);
    ASSERT_FALSE(published.is_null());
    const std::string name = f.filename().string();
    if (name.rfind("IPU", 0) == 0) {
      bool found = false;
      for (const auto& d : published["params"]["diagnostics"]) found = found || d["code"] == name.substr(0, 7);
      EXPECT_TRUE(found) << name << ": " << published.dump();
    }
    if (name == "bert_large_pod64.ipu") {
      EXPECT_EQ(published["params"]["diagnostics"].size(), 0u) << published.dump();
    }
    // Deleted: one character at a time from the middle.
    while (!current.empty()) {
      LineIndex lines(current);
      std::size_t at = current.size() / 2;
      while (at > 0 && (static_cast<unsigned char>(current[at]) & 0xC0) == 0x80) --at;
      if (at > 0 && current[at] == '\n' && current[at - 1] == '\r') --at;  // never half a \r\n
      const Position a = lines.positionOf(at, PositionEncoding::Utf16);
      const Position b = lines.positionOf(at + characterBytes(current, at), PositionEncoding::Utf16);
      // Deleting half of a \r\n is two deletions the protocol counts as one line break: delete both.
      Json r{{"start", Json{{"line", a.line}, {"character", a.character}}}, {"end", Json{{"line", b.line}, {"character", b.character}}}};
      std::size_t gone = characterBytes(current, at);
      if (current[at] == '\r' && at + 1 < current.size() && current[at + 1] == '\n') {
        const Position c = lines.positionOf(at + 2, PositionEncoding::Utf16);
        r["end"] = Json{{"line", c.line}, {"character", c.character}};
        gone = 2;
      }
      client->change(kUri, ++version, r, "");
      current.erase(at, gone);
      Json reply = client->request("textDocument/semanticTokens/full", textDocument(), 120);
      ASSERT_TRUE(reply.contains("result")) << reply.dump();
      client->takeNotifications();
    }
  }
  // The server's text is the client's: formatting an empty document changes nothing.
  Json edits = client->request("textDocument/formatting", textDocument());
  ASSERT_TRUE(edits.contains("result"));
}
