// The language server through the protocol (an in-process server, the
// client of lsp_client.h): the lifecycle, cancellation, errors for bad
// messages, and every request it answers, with the exact replies expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sys/stat.h>

#include "interpreter/check/schema.h"
#include "interpreter/lsp/positions.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/format.h"
#include "tests/lsp/lsp_client.h"

namespace fs = std::filesystem;
using namespace ipu;
using namespace ipu::lsp;
using namespace ipu::lsp::test;

namespace {

// The documents exist only as the editor's buffers, in a directory that exists.
const std::string kMain =
    "import \"std/models/bert\"\n"   // 0
    "import \"std/pods\"\n"          // 1
    "import \"lib\"\n"               // 2
    "\n"                             // 3
    "// the width of everything\n"   // 4
    "let hidden = 64\n"              // 5
    "let width = hidden * 4\n"       // 6
    "let lanes = tile + unit\n"      // 7
    "model small = bert(layers: 2, hidden: hidden, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"  // 8
    "precision p {\n"                // 9
    "  compute: fp16\n"              // 10
    "  let scale = 2\n"              // 11
    "  loss_scale: 128 * scale\n"    // 12
    "}\n";                           // 13

const std::string kLib =
    "let unit = 8\n"
    "let tile = unit * 2\n";

struct LanguageServer : ::testing::Test {
  fs::path dir;
  std::string mainPath, libPath, mainUri, libUri;
  std::unique_ptr<InProcessClient> client;
  std::string stdlibDir;

  void SetUp() override {
    dir = fs::temp_directory_path() / ("ipu_lsp_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    dir = fs::canonical(dir);
    mainPath = (dir / "main.ipu").string();
    libPath = (dir / "lib.ipu").string();
    mainUri = uriOf(mainPath);
    libUri = uriOf(libPath);
    stdlibDir = (dir / "stdlib").string();
  }
  void TearDown() override {
    client.reset();
    std::error_code ec;
    for (auto& p : fs::recursive_directory_iterator(dir, ec)) fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }

  // A new server, initialized; its reply to `initialize`.
  Json start(ServerOptions options = {}, Json capabilities = Json::object()) {
    options.standardLibraryDirectory = stdlibDir;
    client = std::make_unique<InProcessClient>(std::move(options));
    Json reply = client->initialize(std::move(capabilities));
    EXPECT_TRUE(reply.contains("result")) << reply.dump();
    return reply;
  }
  // Opens lib and main and waits for main's diagnostics.
  Json openBoth() {
    client->open(libUri, kLib);
    client->open(mainUri, kMain);
    return client->waitForDiagnostics(mainUri, 1);
  }
  Json at(const std::string& uri, std::uint32_t line, std::uint32_t character) {
    return Json{{"textDocument", Json{{"uri", uri}}}, {"position", Json{{"line", line}, {"character", character}}}};
  }
  Json result(const std::string& method, Json params) {
    Json reply = client->request(method, std::move(params));
    EXPECT_TRUE(reply.contains("result")) << method << ": " << reply.dump();
    return reply.contains("result") ? reply["result"] : Json();
  }
};

Json range(int l0, int c0, int l1, int c1) {
  return Json{{"start", Json{{"line", l0}, {"character", c0}}}, {"end", Json{{"line", l1}, {"character", c1}}}};
}

}  // namespace

// ------------------------------------------------------------- lifecycle

TEST_F(LanguageServer, InitializeAnnouncesWhatItAnswers) {
  client = std::make_unique<InProcessClient>(ServerOptions{stdlibDir, nullptr, nullptr, std::nullopt, nullptr});
  // Before initialize: requests are refused with ServerNotInitialized.
  Json early = client->request("textDocument/hover", at(mainUri, 0, 0));
  EXPECT_EQ(early["error"]["code"], -32002);
  Json reply = client->initialize(Json{{"general", Json{{"positionEncodings", Json::array({"utf-32", "utf-16"})}}}});
  const Json& caps = reply["result"]["capabilities"];
  EXPECT_EQ(caps["positionEncoding"], "utf-32");  // the client's first choice it speaks
  EXPECT_EQ(caps["textDocumentSync"]["change"], 2);
  for (const char* p : {"hoverProvider", "definitionProvider", "referencesProvider", "documentSymbolProvider",
                        "documentFormattingProvider", "foldingRangeProvider"})
    EXPECT_EQ(caps[p], true) << p;
  EXPECT_TRUE(caps["completionProvider"].is_object());
  EXPECT_EQ(caps["semanticTokensProvider"]["full"], true);
  EXPECT_EQ(reply["result"]["serverInfo"]["name"], "ipu");
  EXPECT_EQ(client->request("initialize", Json::object())["error"]["code"], -32600);
}

TEST_F(LanguageServer, ExitAfterShutdownIsZeroOtherwiseOne) {
  start();
  EXPECT_TRUE(client->request("shutdown", nullptr)["result"].is_null());
  // After shutdown, requests are invalid.
  EXPECT_EQ(client->request("textDocument/hover", at(mainUri, 0, 0))["error"]["code"], -32600);
  client->notify("exit", nullptr);
  EXPECT_EQ(client->finish(), 0);

  start();
  client->notify("exit", nullptr);
  EXPECT_EQ(client->finish(), 1);

  start();
  EXPECT_EQ(client->finish(), 1);  // the end of input without exit
}

TEST_F(LanguageServer, RequestsWithBadParamsAreRefusedAndTheServerGoesOn) {
  start();
  client->transport().sendBadFrame("Content-Length is not a number");  // dropped, nothing to answer
  EXPECT_EQ(client->request("textDocument/hover", Json{{"textDocument", Json{{"uri", 7}}}})["error"]["code"], -32602);
  EXPECT_EQ(client->request("textDocument/hover", Json{{"textDocument", Json{{"uri", mainUri}}}})["error"]["code"], -32602);
  EXPECT_EQ(client->request("textDocument/hover", at("file:///nowhere.ipu", 0, 0))["error"]["code"], -32602);
  EXPECT_EQ(client->request("textDocument/didOpen", Json::object())["error"]["code"], -32600);  // a notification
  // Malformed notifications are dropped: a didChange of nothing open, a didOpen without text.
  client->notify("textDocument/didChange", Json{{"textDocument", Json{{"uri", mainUri}, {"version", 2}}}});
  client->notify("textDocument/didOpen", Json{{"textDocument", Json{{"uri", mainUri}}}});
  client->notify("$/setTrace", Json{{"value", "off"}});
  EXPECT_TRUE(client->request("shutdown", nullptr).contains("result"));
  EXPECT_TRUE(client->takeNotifications().empty());
}

TEST_F(LanguageServer, ParseErrorsAndInvalidRequestsAreAnswered) {
  start();
  client->sendBody("not json at all");
  client->sendBody(R"({"jsonrpc": "2.0", "id": 77, "method": 12})");
  client->sendBody(R"({"jsonrpc": "2.0", "id": 78, "method": "workspace/executeCommand", "params": {}})");
  std::vector<Json> got;
  for (int i = 0; i < 3; ++i) {
    auto body = client->receiveBody(10);
    ASSERT_TRUE(body.has_value());
    got.push_back(Json::parse(*body));
  }
  EXPECT_TRUE(got[0]["id"].is_null());
  EXPECT_EQ(got[0]["error"]["code"], -32700);
  EXPECT_EQ(got[1]["id"], 77);
  EXPECT_EQ(got[1]["error"]["code"], -32600);
  EXPECT_EQ(got[2]["id"], 78);
  EXPECT_EQ(got[2]["error"]["code"], -32601);
}

TEST_F(LanguageServer, ACancelledRequestIsAnsweredWithRequestCancelled) {
  // The worker is held before the first hover until the cancel has been read.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> hovers{0};
  ServerOptions o;
  o.beforeRequest = [&](Method m) {
    if (m == Method::Hover && hovers++ == 0) released.wait();
  };
  start(o);
  openBoth();
  const long long held = client->sendRequest("textDocument/hover", at(mainUri, 6, 12));
  client->notify("$/cancelRequest", Json{{"id", held}});
  // The reader answers an unknown method at once: once it has, it has read the cancel too.
  EXPECT_EQ(client->request("x/ping", Json::object())["error"]["code"], -32601);
  release.set_value();
  Json reply = client->waitForReply(held);
  EXPECT_EQ(reply["error"]["code"], -32800);
  // The next hover is answered.
  Json next = client->request("textDocument/hover", at(mainUri, 6, 12));
  EXPECT_TRUE(next["result"].is_object()) << next.dump();
  // Cancelling what was answered already changes nothing.
  client->notify("$/cancelRequest", Json{{"id", held}});
  EXPECT_TRUE(client->request("textDocument/hover", at(mainUri, 6, 12))["result"].is_object());
}

// ------------------------------------------------------------ diagnostics

TEST_F(LanguageServer, DiagnosticsAreThoseOfIpuCheckWithHelpAndRelatedLocations) {
  start();
  const std::string text =
      "import \"std/pods\"\n"
      "import \"std/models/bert\"\n"
      "\n"
      "mapping pod16 for bert_large on POD16 {\n"
      "  pipeline: balanced(4)\n"
      "  replicas: 4\n"
      "}\n"
      "\n"
      "mapping pod16 for bert_large on POD16 {\n"
      "  pipeline: balanced(8)\n"
      "  replicas: 2\n"
      "}\n";
  client->open(mainUri, text, 3);
  Json p = client->waitForDiagnostics(mainUri, 3);
  ASSERT_FALSE(p.is_null());
  const Json& list = p["params"]["diagnostics"];
  ASSERT_EQ(list.size(), 1u) << list.dump(2);
  const Json& d = list[0];
  EXPECT_EQ(d["code"], "IPU1002");
  EXPECT_EQ(d["severity"], 1);
  EXPECT_EQ(d["source"], "ipu");
  EXPECT_EQ(d["range"], range(8, 8, 8, 13));
  EXPECT_EQ(d["message"],
            "`pod16` is already declared in this module\nhelp: rename one of them; to make a variant, write `kind "
            "new_name = pod16 with { ... }`");
  ASSERT_EQ(d["relatedInformation"].size(), 1u);
  EXPECT_EQ(d["relatedInformation"][0]["message"], "first declared here");
  EXPECT_EQ(d["relatedInformation"][0]["location"]["uri"], mainUri);
  EXPECT_EQ(d["relatedInformation"][0]["location"]["range"], range(4 - 1, 8, 4 - 1, 13));

  // Fixed by an incremental edit (rename the second to pod8): no diagnostics, version 4.
  client->change(mainUri, 4, range(8, 8, 8, 13), "pod8");
  p = client->waitForDiagnostics(mainUri, 4);
  ASSERT_FALSE(p.is_null());
  EXPECT_EQ(p["params"]["diagnostics"].size(), 0u) << p.dump(2);
}

TEST_F(LanguageServer, AModulesErrorsAreShownInItAndItsEditsRecheckTheScriptsImportingIt) {
  start();
  openBoth();
  // Break lib: `unit` is gone, so lib's `tile` and main's `lanes` fail.
  client->change(libUri, 2, range(0, 4, 0, 8), "unyt");
  Json lib = client->waitForDiagnostics(libUri, 2);
  ASSERT_FALSE(lib.is_null());
  ASSERT_GE(lib["params"]["diagnostics"].size(), 1u);
  EXPECT_EQ(lib["params"]["diagnostics"][0]["code"], "IPU1001");
  // main is checked again (it imports lib) and its diagnostics published.
  Json main = client->waitForDiagnostics(mainUri);
  ASSERT_FALSE(main.is_null());
  bool sawUnit = false;
  for (const auto& d : main["params"]["diagnostics"]) sawUnit = sawUnit || d["message"].get<std::string>().find("`unit`") != std::string::npos;
  EXPECT_TRUE(sawUnit) << main.dump(2);
  // Closing lib: the session reads the disk again (no lib.ipu there: IPU1010 for main).
  client->notify("textDocument/didClose", Json{{"textDocument", Json{{"uri", libUri}}}});
  Json cleared = client->waitForDiagnostics(libUri);
  ASSERT_FALSE(cleared.is_null());
}

// ------------------------------------------------------------------ hover

TEST_F(LanguageServer, HoverShowsDeclarationDocValueAndFieldDocs) {
  start();
  openBoth();
  // `hidden` in `hidden * 4` (line 6, character 12).
  Json h = result("textDocument/hover", at(mainUri, 6, 12));
  ASSERT_TRUE(h.is_object());
  const std::string text = h["contents"]["value"];
  EXPECT_EQ(h["contents"]["kind"], "markdown");
  EXPECT_NE(text.find("```ipu\nlet hidden = 64\n```"), std::string::npos) << text;
  EXPECT_NE(text.find("**type** number · **value** `64`"), std::string::npos) << text;
  EXPECT_NE(text.find("the width of everything"), std::string::npos) << text;
  EXPECT_NE(text.find("let · line 6"), std::string::npos) << text;
  EXPECT_EQ(h["range"], range(6, 12, 6, 18));

  // A field name: the schema's doc.
  h = result("textDocument/hover", at(mainUri, 10, 3));
  const check::Field* compute = check::schemaFor("precision")->find("compute");
  const std::string field = h["contents"]["value"];
  EXPECT_NE(field.find("**compute** · field of `precision`"), std::string::npos) << field;
  EXPECT_NE(field.find(compute->doc), std::string::npos) << field;
  EXPECT_NE(field.find(compute->type.name()), std::string::npos) << field;
  EXPECT_EQ(h["range"], range(10, 2, 10, 9));

  // A standard-library definition: where it is declared, and its comment.
  h = result("textDocument/hover", at(mainUri, 8, 15));
  const std::string bert = h["contents"]["value"];
  EXPECT_NE(bert.find("model bert(layers: int"), std::string::npos) << bert;
  EXPECT_NE(bert.find("declared in `std/models/bert.ipu:13`"), std::string::npos) << bert;
  EXPECT_NE(bert.find("BERT with MLM and NSP heads"), std::string::npos) << bert;

  // A value across the import, the product with a block's let, and nothing in a comment.
  EXPECT_NE(result("textDocument/hover", at(mainUri, 7, 17))["contents"]["value"].get<std::string>().find("`24`"),
            std::string::npos);
  EXPECT_NE(result("textDocument/hover", at(mainUri, 12, 18))["contents"]["value"].get<std::string>().find("`256`"),
            std::string::npos);
  EXPECT_TRUE(result("textDocument/hover", at(mainUri, 4, 5)).is_null());
  // On a declaring name: the declaration and its value.
  const std::string declaring = result("textDocument/hover", at(mainUri, 6, 5))["contents"]["value"];
  EXPECT_NE(declaring.find("`256`"), std::string::npos) << declaring;
}

// ------------------------------------------------------------- navigation

TEST_F(LanguageServer, DefinitionAcrossImportsAndIntoTheStandardLibrary) {
  start();
  openBoth();
  // `tile` in `tile + unit` -> lib.ipu line 1.
  Json d = result("textDocument/definition", at(mainUri, 7, 12));
  EXPECT_EQ(d["uri"], libUri);
  EXPECT_EQ(d["range"], range(1, 4, 1, 8));
  // `bert` -> the standard library's file, written read-only.
  d = result("textDocument/definition", at(mainUri, 8, 15));
  const std::string uri = d["uri"];
  EXPECT_EQ(uri, uriOf(stdlibDir + "/std/models/bert.ipu"));
  EXPECT_EQ(d["range"], range(12, 6, 12, 10));
  struct stat st {};
  ASSERT_EQ(::stat((stdlibDir + "/std/models/bert.ipu").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "the standard library's file is writable";
  // The import's path -> the module's file.
  d = result("textDocument/definition", at(mainUri, 2, 9));
  EXPECT_EQ(d["uri"], libUri);
  EXPECT_EQ(d["range"], range(0, 0, 0, 0));
  // A named argument -> the parameter.
  d = result("textDocument/definition", at(mainUri, 8, 48));
  EXPECT_EQ(d["range"], range(12, 37, 12, 42));  // `heads` in bert's parameters
  // Nothing for a number.
  EXPECT_TRUE(result("textDocument/definition", at(mainUri, 6, 21)).is_null());

  // Opened from there, the standard module answers too (its own `embedding`).
  std::ifstream in(stdlibDir + "/std/models/bert.ipu");
  std::string bertText((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  client->open(uri, bertText);
  Json p = client->waitForDiagnostics(uri, 1);
  ASSERT_FALSE(p.is_null());
  EXPECT_EQ(p["params"]["diagnostics"].size(), 0u);
  d = result("textDocument/definition", at(uri, 16, 64));  // `tie: embedding` -> the layer on line 14
  EXPECT_EQ(d["uri"], uri);
  EXPECT_EQ(d["range"]["start"]["line"], 14);
}

TEST_F(LanguageServer, ReferencesInEveryOpenDocument) {
  start();
  openBoth();
  // Asked at `unit` in main (line 7): lib's `tile = unit * 2` and main's use.
  Json refs = result("textDocument/references", Json{{"textDocument", Json{{"uri", mainUri}}},
                                                      {"position", Json{{"line", 7}, {"character", 19}}},
                                                      {"context", Json{{"includeDeclaration", false}}}});
  std::vector<std::pair<std::string, Json>> got;
  for (const auto& r : refs) got.emplace_back(r["uri"], r["range"]);
  std::vector<std::pair<std::string, Json>> want = {{libUri, range(1, 11, 1, 15)}, {mainUri, range(7, 19, 7, 23)}};
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  EXPECT_EQ(got, want);
  // With the declaration, from lib itself; a second script importing lib adds its use.
  const std::string otherUri = uriOf((dir / "other.ipu").string());
  client->open(otherUri, "import \"lib\"\nlet u2 = unit + 1\n");
  client->waitForDiagnostics(otherUri, 1);
  refs = result("textDocument/references", Json{{"textDocument", Json{{"uri", libUri}}},
                                                {"position", Json{{"line", 0}, {"character", 5}}},
                                                {"context", Json{{"includeDeclaration", true}}}});
  std::set<std::string> places;
  for (const auto& r : refs) places.insert(r["uri"].get<std::string>() + ":" + std::to_string(r["range"]["start"]["line"].get<int>()));
  EXPECT_EQ(places, (std::set<std::string>{libUri + ":0", libUri + ":1", mainUri + ":7", otherUri + ":1"}));
}

// -------------------------------------------------------------- completion

namespace {
std::set<std::string> labels(const Json& list) {
  std::set<std::string> out;
  for (const auto& i : list["items"]) out.insert(i["label"]);
  return out;
}
const Json* item(const Json& list, const std::string& label) {
  for (const auto& i : list["items"])
    if (i["label"] == label) return &i;
  return nullptr;
}
}  // namespace

TEST_F(LanguageServer, CompletionOffersTheRecordsFieldsEnumMembersAndNamesInScope) {
  start(ServerOptions{}, Json{{"textDocument", Json{{"completion", Json{{"completionItem", Json{{"snippetSupport", true}}}}}}}});
  const std::string text =
      "import \"std/pods\"\n"
      "import \"std/models/bert\"\n"
      "mapping m for bert_large on POD16 {\n"
      "  replicas: 4\n"
      "  re\n"
      "}\n"
      "mapping n for bert_large on POD16 {\n"
      "  recompute: \n"
      "}\n"
      "training t {\n"
      "  mapping: \n"
      "}\n";
  client->open(mainUri, text);
  client->waitForDiagnostics(mainUri, 1);
  // Line 4 `  re|`: the mapping's fields, without `replicas` (written), with docs.
  Json list = result("textDocument/completion", at(mainUri, 4, 4));
  const check::Schema* mapping = check::schemaFor("mapping");
  const check::Field* recompute = mapping->find("recompute");
  ASSERT_NE(recompute, nullptr);
  const Json* r = item(list, "recompute");
  ASSERT_NE(r, nullptr) << list.dump(2);
  EXPECT_EQ((*r)["kind"], 5);
  EXPECT_EQ((*r)["detail"], recompute->type.name());
  EXPECT_NE((*r)["documentation"]["value"].get<std::string>().find(recompute->doc), std::string::npos);
  EXPECT_EQ((*r)["textEdit"]["range"], range(4, 2, 4, 4));
  EXPECT_EQ((*r)["textEdit"]["newText"], "recompute: ");
  EXPECT_EQ(item(list, "replicas"), nullptr);
  EXPECT_NE(item(list, "pipeline"), nullptr);
  // Line 7 `  recompute: |`: its enumeration members first.
  list = result("textDocument/completion", at(mainUri, 7, 13));
  ASSERT_FALSE(recompute->type.symbols.empty());
  for (const auto& s : recompute->type.symbols) {
    const Json* e = item(list, s);
    ASSERT_NE(e, nullptr) << s;
    EXPECT_EQ((*e)["kind"], 20);
    EXPECT_EQ((*e)["sortText"].get<std::string>().substr(0, 1), "0");
  }
  // Line 10 `  mapping: |` in a training: the mappings first, then other names and built-ins.
  list = result("textDocument/completion", at(mainUri, 10, 11));
  const Json* m = item(list, "m");
  ASSERT_NE(m, nullptr) << list.dump(2);
  EXPECT_EQ((*m)["sortText"], "1m");
  EXPECT_NE(item(list, "bert_large"), nullptr);
  EXPECT_NE(item(list, "POD16"), nullptr);
  EXPECT_NE(item(list, "min"), nullptr);
  // The start of a top-level line: declaration keywords and snippets.
  client->change(mainUri, 2, range(12, 0, 12, 0), "ma");
  list = result("textDocument/completion", at(mainUri, 12, 2));
  EXPECT_TRUE(labels(list).count("mapping"));
  EXPECT_TRUE(labels(list).count("training"));
  EXPECT_TRUE(labels(list).count("mapping … for … on …"));
}

TEST_F(LanguageServer, CompletionOfNamesInScopeAndImportPaths) {
  start();
  openBoth();
  // `let x = hid|` after line 13: the names of the top level and of the import.
  client->change(mainUri, 2, range(14, 0, 14, 0), "let x = hid");
  Json list = result("textDocument/completion", at(mainUri, 14, 11));
  for (const char* n : {"hidden", "width", "tile", "unit", "small", "bert", "max"}) EXPECT_NE(item(list, n), nullptr) << n;
  EXPECT_EQ((*item(list, "unit"))["detail"], "let");
  EXPECT_EQ((*item(list, "bert"))["detail"], "model · std/models/bert.ipu");
  // Inside a block: its `let` too.
  list = result("textDocument/completion", at(mainUri, 12, 20));
  EXPECT_NE(item(list, "scale"), nullptr);
  // `import "std/m|`
  client->change(mainUri, 3, range(14, 0, 14, 11), "import \"std/m");
  list = result("textDocument/completion", at(mainUri, 14, 13));
  const Json* bert = item(list, "std/models/bert");
  ASSERT_NE(bert, nullptr) << list.dump(2);
  EXPECT_EQ((*bert)["textEdit"]["range"], range(14, 8, 14, 13));
}

// ------------------------------------------------- symbols, folding, tokens

TEST_F(LanguageServer, DocumentSymbolsNestMembersUnderDeclarations) {
  start();
  openBoth();
  Json symbols = result("textDocument/documentSymbol", Json{{"textDocument", Json{{"uri", mainUri}}}});
  std::vector<std::string> names;
  for (const auto& s : symbols) names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"std/models/bert", "std/pods", "lib", "hidden", "width", "lanes", "small", "p"}));
  const Json& p = symbols[7];
  EXPECT_EQ(p["kind"], 19);
  EXPECT_EQ(p["detail"], "precision");
  EXPECT_EQ(p["range"], range(9, 0, 13, 1));
  EXPECT_EQ(p["selectionRange"], range(9, 10, 9, 11));
  std::vector<std::string> children;
  for (const auto& c : p["children"]) children.push_back(c["name"]);
  EXPECT_EQ(children, (std::vector<std::string>{"compute", "scale", "loss_scale"}));
  EXPECT_EQ(p["children"][0]["detail"], "fp16");
  EXPECT_EQ(symbols[3]["detail"], "64");
}

TEST_F(LanguageServer, FoldingRangesForBlocksCommentsAndImports) {
  start();
  client->open(mainUri,
               "import \"std/pods\"\nimport \"std/models/bert\"\n// one\n// two\nmapping m for bert_large on POD16 {\n"
               "  pipeline {\n    ipu 0: embedding\n  }\n  replicas: 1\n}\n/* a\n  b */\n");
  client->waitForDiagnostics(mainUri, 1);
  Json folds = result("textDocument/foldingRange", Json{{"textDocument", Json{{"uri", mainUri}}}});
  std::set<std::string> got;
  for (const auto& f : folds)
    got.insert(std::to_string(f["startLine"].get<int>()) + "-" + std::to_string(f["endLine"].get<int>()) +
               (f.contains("kind") ? " " + f["kind"].get<std::string>() : ""));
  EXPECT_EQ(got, (std::set<std::string>{"0-1 imports", "2-3 comment", "4-8", "5-6", "10-11 comment"}));
}

TEST_F(LanguageServer, SemanticTokensColourNamesByWhatDeclaresThem) {
  Json legend = start()["result"]["capabilities"]["semanticTokensProvider"]["legend"];
  openBoth();
  Json tokens = result("textDocument/semanticTokens/full", Json{{"textDocument", Json{{"uri", mainUri}}}});
  auto decoded = decodeSemanticTokens(tokens, legend);
  auto find = [&](std::uint32_t line, std::uint32_t character) -> const DecodedToken* {
    for (const auto& t : decoded)
      if (t.line == line && t.character == character) return &t;
    return nullptr;
  };
  struct Want {
    std::uint32_t line, character, length;
    std::string type;
    unsigned modifiers;
  };
  const Want wants[] = {
      {0, 0, 6, "keyword", 0},            // import
      {0, 7, 17, "string", 0},            // "std/models/bert"
      {4, 0, 26, "comment", 0},
      {5, 4, 6, "variable", 1 | 2},       // hidden: declaration, readonly
      {5, 13, 2, "number", 0},
      {6, 12, 6, "variable", 2},          // hidden, a use
      {7, 12, 4, "variable", 2},          // tile, from lib
      {8, 6, 5, "class", 1},              // small: a model, declared
      {8, 14, 4, "function", 4},          // bert: a template of the standard library
      {8, 19, 6, "parameter", 4},         // layers: a named argument, of bert's parameter
      {10, 2, 7, "property", 0},          // compute
      {10, 11, 4, "enumMember", 0},       // fp16
      {12, 20, 5, "variable", 2},         // scale, the block's let
  };
  for (const auto& w : wants) {
    const DecodedToken* t = find(w.line, w.character);
    ASSERT_NE(t, nullptr) << w.line << ":" << w.character;
    EXPECT_EQ(t->length, w.length) << w.line << ":" << w.character;
    EXPECT_EQ(t->type, w.type) << w.line << ":" << w.character;
    EXPECT_EQ(t->modifiers, w.modifiers) << w.line << ":" << w.character;
  }
}

// -------------------------------------------------------------- formatting

TEST_F(LanguageServer, FormattingGivesIpuFmtsTextAsOneMinimalEdit) {
  start();
  const std::string messy = "let   a=1\n// keep me\nprecision p{compute:fp16\nloss_scale : 128}\n";
  client->open(mainUri, messy);
  client->waitForDiagnostics(mainUri, 1);
  Json edits = result("textDocument/formatting",
                      Json{{"textDocument", Json{{"uri", mainUri}}}, {"options", Json{{"tabSize", 2}, {"insertSpaces", true}}}});
  ASSERT_EQ(edits.size(), 1u);
  base::SourceMap sources;
  base::Diagnostics diags;
  syntax::Formatted f = syntax::formatSource(sources, sources.add(mainPath, messy), diags);
  ASSERT_EQ(f.outcome, syntax::Formatted::Outcome::Formatted);
  EXPECT_EQ(applyEdits(messy, edits), f.text);
  EXPECT_EQ(edits[0]["range"]["start"], (Json{{"line", 0}, {"character", 4}}));  // `let ` is kept
  // Formatted text: no edits. Text that does not parse: null.
  client->replaceAll(mainUri, messy, f.text, 2);
  EXPECT_EQ(result("textDocument/formatting", Json{{"textDocument", Json{{"uri", mainUri}}}}).size(), 0u);
  client->replaceAll(mainUri, f.text, "let = \n", 3);
  EXPECT_TRUE(result("textDocument/formatting", Json{{"textDocument", Json{{"uri", mainUri}}}}).is_null());
}

// ------------------------------------------------- the same answers as ipu check

TEST_F(LanguageServer, EveryDiagnosticsScriptGetsIpuChecksCodesAndPlaces) {
  start();
  const fs::path scripts = fs::path(IPU_SOURCE_DIR) / "tests" / "diagnostics";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(scripts))
    if (e.path().extension() == ".ipu") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_GT(files.size(), 50u);
  int compared = 0;
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A document is Unicode: a script that is not UTF-8 cannot be sent as it is.
    bool utf8 = true;
    for (std::size_t i = 0; i < text.size(); i += characterBytes(text, i))
      utf8 = utf8 && !(static_cast<unsigned char>(text[i]) >= 0x80 && characterBytes(text, i) == 1);
    if (!utf8) continue;
    // What `ipu check FILE` reports.
    session::Session s;
    if (auto id = s.readFile(file.string())) s.plan(*id);
    std::vector<std::string> want;
    // A place as the protocol names it: a diagnostic about no place is put at
    // the document's start; one in the standard library in its read-only file.
    auto placeOf = [&](base::Span span) {
      const base::SourceFile* f = s.sources().find(span.file);
      if (f == nullptr) return uriOf(file.string()) + "@0:0-0:0";
      LineIndex lines(f->text());
      Range r = lines.rangeOf(span.begin, std::max(span.begin, span.end), PositionEncoding::Utf16);
      const bool standard = f->path().rfind("std/", 0) == 0;
      return uriOf(standard ? stdlibDir + "/" + f->path() : f->path()) + "@" + std::to_string(r.start.line) + ":" +
             std::to_string(r.start.character) + "-" + std::to_string(r.end.line) + ":" + std::to_string(r.end.character);
    };
    for (const auto& d : s.diagnostics().all()) {
      std::string line = d.code + " " + placeOf(d.span) + " " + d.message + (d.help.empty() ? "" : "\nhelp: " + d.help);
      // Notes: with a place, related information; without, lines after the message.
      std::string unlocated;
      for (const auto& n : d.notes) {
        if (s.sources().find(n.span.file) != nullptr) line += "\n[related " + placeOf(n.span) + " " + n.message + "]";
        else unlocated += "\nnote: " + n.message;
      }
      want.push_back(line + unlocated);
    }
    const std::string uri = uriOf(file.string());
    client->open(uri, text);
    // The document's own diagnostics, and those it reports in other files.
    std::vector<std::string> got;
    Json mine = client->waitForDiagnostics(uri, 1);
    ASSERT_FALSE(mine.is_null()) << file;
    // The check publishes on the other files (an imported module's errors)
    // in the order of their URIs, so some come after the document's own; a
    // request the worker answers after that check is a barrier: by its reply
    // every one of them has been sent. (Taking only what had arrived made
    // the test fail when the worker was preempted between two of them.)
    ASSERT_TRUE(client->request("workspace/symbol", Json{{"query", ""}}).contains("result")) << file;
    auto collect = [&](const Json& p) {
      auto rangeIn = [](const std::string& where, const Json& r) {
        return where + "@" + std::to_string(r["start"]["line"].get<int>()) + ":" + std::to_string(r["start"]["character"].get<int>()) +
               "-" + std::to_string(r["end"]["line"].get<int>()) + ":" + std::to_string(r["end"]["character"].get<int>());
      };
      for (const auto& d : p["params"]["diagnostics"]) {
        std::string message = d["message"];
        std::string notes;
        // Notes without a place follow the message (and `help:`).
        if (auto note = message.find("\nnote: "); note != std::string::npos) {
          notes = message.substr(note);
          message = message.substr(0, note);
        }
        std::string line = d["code"].get<std::string>() + " " + rangeIn(p["params"]["uri"], d["range"]) + " " + message;
        if (d.contains("relatedInformation"))
          for (const auto& r : d["relatedInformation"])
            line += "\n[related " + rangeIn(r["location"]["uri"], r["location"]["range"]) + " " + r["message"].get<std::string>() + "]";
        got.push_back(line + notes);
      }
    };
    collect(mine);
    for (const auto& n : client->takeNotifications())
      if (n["method"] == "textDocument/publishDiagnostics" && n["params"]["uri"] != uri) collect(n);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    got.erase(std::unique(got.begin(), got.end()), got.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    EXPECT_EQ(got, want) << file;
    client->notify("textDocument/didClose", Json{{"textDocument", Json{{"uri", uri}}}});
    client->waitForDiagnostics(uri);
    // The same barrier: what closing clears on other files is not left to be
    // read with the next script's.
    ASSERT_TRUE(client->request("workspace/symbol", Json{{"query", ""}}).contains("result")) << file;
    client->takeNotifications();
    ++compared;
  }
  EXPECT_GT(compared, 50);
}

// ------------------------------------------- code actions, rename, signatures

namespace {
std::size_t errors(const Json& published) {
  std::size_t n = 0;
  for (const auto& d : published["params"]["diagnostics"]) n += d["severity"] == 1;
  return n;
}
Json firstError(const Json& published) {
  for (const auto& d : published["params"]["diagnostics"])
    if (d["severity"] == 1) return d;
  return nullptr;
}
// The text after applying a WorkspaceEdit's changes to `uri`.
std::string applied(const Json& workspaceEdit, const std::string& uri, const std::string& text) {
  if (!workspaceEdit.contains("changes") || !workspaceEdit["changes"].contains(uri)) return text;
  return applyEdits(text, workspaceEdit["changes"][uri]);
}
}  // namespace

TEST_F(LanguageServer, QuickFixesFromDidYouMeanAndMissingImports) {
  start();
  const std::string text =
      "import \"std/pods\"\n"
      "import \"std/model/bert\"\n"
      "mapping m for bert_large on POD16 {\n"
      "  recompute: every_layr\n"
      "}\n";
  client->open(mainUri, text);
  Json p = client->waitForDiagnostics(mainUri, 1);
  ASSERT_FALSE(p.is_null());
  const Json diagnostics = p["params"]["diagnostics"];
  std::map<std::string, Json> byCode;
  for (const auto& d : diagnostics) byCode[d["code"]] = d;
  ASSERT_TRUE(byCode.count("IPU1010")) << diagnostics.dump(2);  // the misspelt module
  auto actionsFor = [&](const Json& d) {
    return result("textDocument/codeAction", Json{{"textDocument", Json{{"uri", mainUri}}}, {"range", d["range"]},
                                                  {"context", Json{{"diagnostics", Json::array({d})}}}});
  };
  // The module path: replaced, quotes kept; the first candidate preferred.
  Json actions = actionsFor(byCode["IPU1010"]);
  ASSERT_GE(actions.size(), 1u) << actions.dump(2);
  EXPECT_EQ(actions[0]["title"], "Replace \"std/model/bert\" with \"std/models/bert\"");
  EXPECT_EQ(actions[0]["kind"], "quickfix");
  EXPECT_EQ(actions[0]["isPreferred"], true);
  std::string fixed = applied(actions[0]["edit"], mainUri, text);
  EXPECT_EQ(fixed.substr(0, 42), "import \"std/pods\"\nimport \"std/models/bert\"");
  client->replaceAll(mainUri, text, fixed, 2);
  p = client->waitForDiagnostics(mainUri, 2);
  ASSERT_EQ(errors(p), 1u) << p.dump(2);
  // The enumeration member: `every_layr` -> `every_layer`, and then no error
  // (the pod's 16 IPUs are not all used: a warning).
  const Json d = firstError(p);
  EXPECT_EQ(d["code"], "IPU1003");
  actions = actionsFor(d);
  ASSERT_GE(actions.size(), 1u);
  EXPECT_EQ(actions[0]["title"], "Replace `every_layr` with `every_layer`");
  const std::string clean = applied(actions[0]["edit"], mainUri, fixed);
  client->replaceAll(mainUri, fixed, clean, 3);
  p = client->waitForDiagnostics(mainUri, 3);
  EXPECT_EQ(errors(p), 0u) << p.dump(2);
  // Another kind asked for: no quick fixes.
  EXPECT_EQ(result("textDocument/codeAction", Json{{"textDocument", Json{{"uri", mainUri}}}, {"range", d["range"]},
                                                   {"context", Json{{"diagnostics", Json::array({d})}, {"only", Json::array({"refactor"})}}}})
                .size(),
            0u);

  // A standard name without its import: the import is added after the last one.
  const std::string missing = "import \"std/pods\"\n\nmapping m for bert_large on POD16 {\n  replicas: 1\n}\n";
  client->replaceAll(mainUri, clean, missing, 4);
  p = client->waitForDiagnostics(mainUri, 4);
  ASSERT_EQ(errors(p), 1u) << p.dump(2);
  actions = actionsFor(firstError(p));
  ASSERT_EQ(actions.size(), 1u) << actions.dump(2);
  EXPECT_EQ(actions[0]["title"], "Add `import \"std/models/bert\"`");
  const std::string imported = applied(actions[0]["edit"], mainUri, missing);
  EXPECT_EQ(imported, "import \"std/pods\"\nimport \"std/models/bert\"\n\nmapping m for bert_large on POD16 {\n  replicas: 1\n}\n");
  client->replaceAll(mainUri, missing, imported, 5);
  EXPECT_EQ(errors(client->waitForDiagnostics(mainUri, 5)), 0u);
}

TEST_F(LanguageServer, RenameADeclarationAndEveryUseAcrossFiles) {
  start();
  openBoth();
  // prepareRename: a name of the workspace gives its range; a field, an
  // enumeration member or a standard library name gives null.
  Json prep = result("textDocument/prepareRename", at(mainUri, 7, 19));
  EXPECT_EQ(prep["range"], range(7, 19, 7, 23));
  EXPECT_EQ(prep["placeholder"], "unit");
  EXPECT_TRUE(result("textDocument/prepareRename", at(mainUri, 10, 3)).is_null());   // `compute`
  EXPECT_TRUE(result("textDocument/prepareRename", at(mainUri, 10, 12)).is_null());  // `fp16`
  EXPECT_TRUE(result("textDocument/prepareRename", at(mainUri, 8, 15)).is_null());   // `bert`
  // `unit` (declared in lib, used in lib and main) -> `width_unit`.
  Json params = at(mainUri, 7, 19);
  params["newName"] = "width_unit";
  Json edit = result("textDocument/rename", params);
  EXPECT_EQ(applied(edit, libUri, kLib), "let width_unit = 8\nlet tile = width_unit * 2\n");
  std::string main = applied(edit, mainUri, kMain);
  EXPECT_NE(main.find("let lanes = tile + width_unit\n"), std::string::npos) << main;
  // Refused: a keyword, not a name, a name the module declares already.
  for (const char* bad : {"let", "2x", "tile"}) {
    params["newName"] = bad;
    Json reply = client->request("textDocument/rename", params);
    EXPECT_EQ(reply["error"]["code"], -32803) << bad << ": " << reply.dump();
  }
  // A block's `let`: renamed in its block.
  params = at(mainUri, 11, 7);
  params["newName"] = "factor";
  main = applied(result("textDocument/rename", params), mainUri, kMain);
  EXPECT_NE(main.find("  let factor = 2\n  loss_scale: 128 * factor\n"), std::string::npos) << main;
}

TEST_F(LanguageServer, SignatureHelpForDefinitionsAndOptimizers) {
  start();
  const std::string text =
      "import \"std/models/bert\"\n"
      "model a = bert(layers: 2, \n"
      "model b = bert(layers: 2, hidden: 64, heads: \n"
      "optimizer o = lamb(beta1: 0.8, \n";
  client->open(mainUri, text);
  client->waitForDiagnostics(mainUri, 1);
  Json s = result("textDocument/signatureHelp", at(mainUri, 1, 26));
  ASSERT_TRUE(s.is_object()) << s.dump();
  const Json& sig = s["signatures"][0];
  EXPECT_EQ(sig["label"], "bert(layers: int, hidden: int, heads: int, ffn: int = 4 * hidden, vocab: int = 30522, positions: int = 512)");
  EXPECT_EQ(sig["parameters"].size(), 6u);
  EXPECT_EQ(sig["parameters"][1]["label"], "hidden: int");
  EXPECT_NE(sig["documentation"]["value"].get<std::string>().find("BERT with MLM and NSP heads"), std::string::npos);
  EXPECT_EQ(s["activeParameter"], 1);  // the second argument
  s = result("textDocument/signatureHelp", at(mainUri, 2, 45));
  EXPECT_EQ(s["activeParameter"], 2);  // named: `heads`
  s = result("textDocument/signatureHelp", at(mainUri, 3, 31));
  ASSERT_TRUE(s.is_object());
  const check::Schema* optimizer = check::schemaFor("optimizer");
  EXPECT_EQ(s["signatures"][0]["parameters"].size(), optimizer->fields.size() - 1);  // all but `kind`
  EXPECT_EQ(s["signatures"][0]["parameters"][0]["label"], "beta1: " + optimizer->find("beta1")->type.name());
  EXPECT_EQ(s["activeParameter"], 1);
  // Outside a call: nothing.
  EXPECT_TRUE(result("textDocument/signatureHelp", at(mainUri, 0, 3)).is_null());
}

TEST_F(LanguageServer, WorkspaceSymbolsOfEveryOpenScriptAndItsModules) {
  start();
  openBoth();
  Json symbols = result("workspace/symbol", Json{{"query", "hid"}});
  ASSERT_EQ(symbols.size(), 1u) << symbols.dump(2);
  EXPECT_EQ(symbols[0]["name"], "hidden");
  EXPECT_EQ(symbols[0]["kind"], 14);
  EXPECT_EQ(symbols[0]["location"]["uri"], mainUri);
  EXPECT_EQ(symbols[0]["location"]["range"], range(5, 0, 5, 15));
  EXPECT_EQ(symbols[0]["containerName"], "main.ipu");
  std::set<std::string> all;
  for (const auto& s : result("workspace/symbol", Json{{"query", ""}})) all.insert(s["name"]);
  EXPECT_EQ(all, (std::set<std::string>{"hidden", "width", "lanes", "small", "p", "unit", "tile"}));
  EXPECT_EQ(client->request("workspace/symbol", Json::object())["error"]["code"], -32602);
}
