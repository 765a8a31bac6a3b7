// `ipu lsp` as an editor runs it: a child process speaking over pipes. The
// framing over real file descriptors, stdout kept for the protocol, the exit
// codes, and bytes that are no message at all.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/lsp/lsp_client.h"

namespace fs = std::filesystem;
using namespace ipu::lsp;
using namespace ipu::lsp::test;

namespace {

struct Process : ::testing::Test {
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("ipu_lsp_process_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override {
    std::error_code ec;
    for (auto& p : fs::recursive_directory_iterator(dir, ec)) fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  std::unique_ptr<ProcessClient> launch() {
    return std::make_unique<ProcessClient>(std::vector<std::string>{IPU_BINARY, "lsp", "--stdlib-dir", (dir / "stdlib").string()});
  }
};

}  // namespace

TEST_F(Process, ASessionFromInitializeToExit) {
  auto lsp = launch();
  Json init = lsp->initialize();
  ASSERT_TRUE(init.contains("result")) << init.dump();
  const std::string uri = uriOf((dir / "a.ipu").string());
  lsp->open(uri, "import \"std/models/bert\"\nmodel m = bert(layers: 2, hidden: 64, heads: 2, vocab: 100)\nlet x = m_typo\n");
  Json d = lsp->waitForDiagnostics(uri, 1);
  ASSERT_FALSE(d.is_null());
  ASSERT_EQ(d["params"]["diagnostics"].size(), 1u);
  EXPECT_EQ(d["params"]["diagnostics"][0]["code"], "IPU1001");
  Json hover = lsp->request("textDocument/hover",
                            Json{{"textDocument", Json{{"uri", uri}}}, {"position", Json{{"line", 1}, {"character", 11}}}});
  ASSERT_TRUE(hover["result"].is_object()) << hover.dump();
  EXPECT_NE(hover["result"]["contents"]["value"].get<std::string>().find("std/models/bert.ipu"), std::string::npos);
  Json def = lsp->request("textDocument/definition",
                          Json{{"textDocument", Json{{"uri", uri}}}, {"position", Json{{"line", 1}, {"character", 11}}}});
  EXPECT_EQ(def["result"]["uri"], uriOf((dir / "stdlib" / "std" / "models" / "bert.ipu").string()));
  EXPECT_TRUE(fs::exists(dir / "stdlib" / "std" / "models" / "bert.ipu"));
  EXPECT_TRUE(lsp->request("shutdown", nullptr).contains("result"));
  lsp->notify("exit", nullptr);
  EXPECT_EQ(lsp->wait(), 0);
}

TEST_F(Process, ExitWithoutShutdownOrTheEndOfInputIsOne) {
  auto lsp = launch();
  lsp->initialize();
  lsp->notify("exit", nullptr);
  EXPECT_EQ(lsp->wait(), 1);
  lsp = launch();
  lsp->initialize();
  lsp->closeInput();
  EXPECT_EQ(lsp->wait(), 1);
}

TEST_F(Process, BytesThatAreNoMessagesDoNotStopIt) {
  auto lsp = launch();
  // Headers without a length, a length that is not a number, a body that is
  // not JSON, random bytes with NULs, then a real message.
  lsp->sendBytes("Hello: world\r\n\r\n");
  lsp->sendBytes("Content-Length: x\r\n\r\n");
  lsp->sendBytes(encodeFrame("{\"oops\""));
  lsp->sendBytes(std::string("\0\xff\xfe\r\n\r\n", 7));
  lsp->sendBytes(encodeFrame(std::string(100000, '[')));
  Json init = lsp->initialize();
  ASSERT_TRUE(init.contains("result")) << init.dump();
  // The parse errors were answered with a null id.
  std::vector<Json> seen = lsp->takeNotifications();
  EXPECT_TRUE(lsp->request("shutdown", nullptr).contains("result"));
  lsp->notify("exit", nullptr);
  EXPECT_EQ(lsp->wait(), 0);
  EXPECT_NE(lsp->errorOutput().find("dropped a message"), std::string::npos);
}
