// The language server's parts that need no server: framing, positions in
// the three encodings, URIs, incremental edits, the lexical scan and where
// completion thinks the cursor is.
#include <gtest/gtest.h>

#include "interpreter/check/schema.h"
#include "interpreter/lsp/completion.h"
#include "interpreter/lsp/document_store.h"
#include "interpreter/lsp/json_rpc.h"
#include "interpreter/lsp/positions.h"
#include "interpreter/lsp/text_scan.h"
#include "interpreter/lsp/uri.h"

using namespace ipu::lsp;

TEST(Framing, BodiesComeWholeWhateverThePiecesTheBytesArriveIn) {
  const std::string a = R"({"jsonrpc":"2.0","id":1,"method":"initialize"})";
  const std::string b = "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"t\":\"\xc3\xa9\"}}";
  const std::string bytes = encodeFrame(a) + "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + encodeFrame(b);
  for (std::size_t piece : {1u, 2u, 7u, 1000u}) {
    FrameDecoder d;
    std::vector<std::string> bodies;
    for (std::size_t i = 0; i < bytes.size(); i += piece) {
      d.feed(std::string_view(bytes).substr(i, piece));
      while (auto f = d.next()) {
        ASSERT_EQ(f->kind, FrameDecoder::Frame::Kind::Body) << f->problem;
        bodies.push_back(f->body);
      }
    }
    ASSERT_EQ(bodies.size(), 2u) << "pieces of " << piece;
    EXPECT_EQ(bodies[0], a);
    EXPECT_EQ(bodies[1], b);
    EXPECT_EQ(d.pending(), 0u);
  }
}

TEST(Framing, BadHeadersAreDroppedAndDecodingGoesOn) {
  FrameDecoder d;
  const std::string good = R"({"jsonrpc":"2.0","method":"initialized"})";
  d.feed("Content-Length: twelve\r\n\r\n" + std::string("garbage\r\n\r\n") + "Content-Length: 99999999999\r\n\r\n" +
         "Content-Length: -4\r\n\r\n" + encodeFrame(good));
  std::vector<std::string> problems;
  std::vector<std::string> bodies;
  while (auto f = d.next()) {
    if (f->kind == FrameDecoder::Frame::Kind::BadHeader) problems.push_back(f->problem);
    else bodies.push_back(f->body);
  }
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_EQ(problems[0], "Content-Length is not a number");
  EXPECT_EQ(problems[1], "a header line without `:`");
  EXPECT_NE(problems[2].find("is over the 64 MiB"), std::string::npos);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0], good);
}

TEST(Framing, AHeaderThatNeverEndsStaysBounded) {
  FrameDecoder d;
  d.feed(std::string(200 * 1024, 'x'));
  auto f = d.next();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, FrameDecoder::Frame::Kind::BadHeader);
  EXPECT_LT(d.pending(), 4u);
}

TEST(Messages, AreClassifiedAndBadOnesSayWhy) {
  EXPECT_EQ(decode(R"({"jsonrpc":"2.0","id":3,"method":"textDocument/hover","params":{}})").message.kind, Message::Kind::Request);
  EXPECT_EQ(decode(R"({"jsonrpc":"2.0","method":"exit"})").message.kind, Message::Kind::Notification);
  EXPECT_EQ(decode(R"({"jsonrpc":"2.0","id":"a","result":null})").message.kind, Message::Kind::Response);
  EXPECT_TRUE(decode("{\"jsonrpc\":").parseError);
  EXPECT_TRUE(decode("").parseError);
  // Deep nesting parses without recursion (nlohmann's parser keeps its own stack).
  EXPECT_EQ(decode(std::string(500'000, '[') + std::string(500'000, ']')).message.kind, Message::Kind::Invalid);
  EXPECT_TRUE(decode(std::string(500'000, '[')).parseError);
  for (const char* bad : {R"([1,2])", R"({"id":1,"method":"x"})", R"({"jsonrpc":"2.0","id":1,"method":3})",
                          R"({"jsonrpc":"2.0","id":{"a":1},"method":"x"})", R"({"jsonrpc":"2.0","id":1,"method":"x","params":7})"}) {
    Decoded d = decode(bad);
    EXPECT_FALSE(d.parseError) << bad;
    EXPECT_EQ(d.message.kind, Message::Kind::Invalid) << bad;
    EXPECT_FALSE(d.message.problem.empty()) << bad;
  }
  EXPECT_EQ(decode(R"({"id":7,"method":"x"})").message.id, 7);  // answered with its id
  // Replies carry bytes that are not UTF-8 as U+FFFD instead of failing.
  EXPECT_EQ(serialize(Json("a\xff")), "\"a\xEF\xBF\xBD\"");
}

TEST(Positions, Utf16CountsSurrogatePairsAndLineBreaksAreTheProtocols) {
  // "é" is 2 bytes, 1 UTF-16 unit; "𝄞" is 4 bytes, 2 UTF-16 units; \r\n and a lone \r end lines.
  const std::string text = "ab\r\n\xC3\xA9x\xF0\x9D\x84\x9Ey\rz\n";
  LineIndex lines(text);
  EXPECT_EQ(lines.lineCount(), 4u);
  // Line 1 is "éx𝄞y": bytes 4..12.
  EXPECT_EQ(lines.offsetOf({1, 0}, PositionEncoding::Utf16), 4u);
  EXPECT_EQ(lines.offsetOf({1, 1}, PositionEncoding::Utf16), 6u);
  EXPECT_EQ(lines.offsetOf({1, 2}, PositionEncoding::Utf16), 7u);
  EXPECT_EQ(lines.offsetOf({1, 3}, PositionEncoding::Utf16), 7u);  // inside the pair: the character's start
  EXPECT_EQ(lines.offsetOf({1, 4}, PositionEncoding::Utf16), 11u);
  EXPECT_EQ(lines.offsetOf({1, 99}, PositionEncoding::Utf16), 12u);  // past the end: the line's end
  EXPECT_EQ(lines.offsetOf({1, 3}, PositionEncoding::Utf8), 7u);
  EXPECT_EQ(lines.offsetOf({1, 3}, PositionEncoding::Utf32), 11u);
  EXPECT_EQ(lines.offsetOf({2, 0}, PositionEncoding::Utf16), 13u);
  EXPECT_EQ(lines.offsetOf({9, 0}, PositionEncoding::Utf16), text.size());
  EXPECT_EQ(lines.positionOf(11, PositionEncoding::Utf16), (Position{1, 4}));
  EXPECT_EQ(lines.positionOf(11, PositionEncoding::Utf8), (Position{1, 7}));
  EXPECT_EQ(lines.positionOf(11, PositionEncoding::Utf32), (Position{1, 3}));
  EXPECT_EQ(lines.positionOf(3, PositionEncoding::Utf16), (Position{0, 2}));  // between \r and \n: the line's end
  // The session counts code points on \n-ended lines, 1-based.
  EXPECT_EQ(sessionLineCol(text, 11).line, 2u);
  EXPECT_EQ(sessionLineCol(text, 11).column, 4u);
  // A byte that is not UTF-8 is one character in every encoding.
  const std::string bad = "a\xff" "b";
  LineIndex b(bad);
  EXPECT_EQ(b.offsetOf({0, 2}, PositionEncoding::Utf16), 2u);
  EXPECT_EQ(b.positionOf(3, PositionEncoding::Utf16), (Position{0, 3}));
}

TEST(Uris, FilePathsRoundTripWithPercentEncoding) {
  EXPECT_EQ(fileUriOf("/home/me/bert big/a#1.ipu"), "file:///home/me/bert%20big/a%231.ipu");
  EXPECT_EQ(pathOfFileUri("file:///home/me/bert%20big/a%231.ipu"), "/home/me/bert big/a#1.ipu");
  EXPECT_EQ(pathOfFileUri("file://localhost/tmp/x.ipu"), "/tmp/x.ipu");
  EXPECT_FALSE(pathOfFileUri("file://server/tmp/x.ipu").has_value());
  EXPECT_FALSE(pathOfFileUri("untitled:Untitled-1").has_value());
  EXPECT_FALSE(pathOfFileUri("file:///a%2").has_value());
  EXPECT_FALSE(pathOfFileUri("file:///a%00b").has_value());
  const std::string standIn = sessionPathOf("untitled:Untitled-1");
  EXPECT_EQ(standIn.substr(standIn.size() - 4), ".ipu");
  EXPECT_NE(standIn, sessionPathOf("untitled:Untitled-2"));
}

TEST(Documents, IncrementalChangesApplyInOrderInUtf16) {
  DocumentStore store;
  store.open("file:///t.ipu", "/t.ipu", 1, "let a = \"\xF0\x9D\x84\x9E\"\nlet b = 2\n");
  // Replace `2` (line 1, chars 8..9), then insert after the 𝄞 (line 0, UTF-16 char 11).
  ASSERT_TRUE(store.change("file:///t.ipu", 2,
                           {TextChange{Range{{1, 8}, {1, 9}}, "20"}, TextChange{Range{{0, 11}, {0, 11}}, "!"}}));
  auto d = store.find("file:///t.ipu");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->version, 2);
  EXPECT_EQ(*d->text, "let a = \"\xF0\x9D\x84\x9E!\"\nlet b = 20\n");
  // A whole-text change, and a range past the end (clamped), reversed (swapped).
  ASSERT_TRUE(store.change("file:///t.ipu", 3, {TextChange{std::nullopt, "x"}, TextChange{Range{{5, 0}, {0, 0}}, "y"}}));
  EXPECT_EQ(*store.find("file:///t.ipu")->text, "y");
  EXPECT_FALSE(store.change("file:///other.ipu", 1, {}));
  EXPECT_TRUE(store.close("file:///t.ipu"));
  EXPECT_FALSE(store.find("file:///t.ipu").has_value());
}

TEST(TextScan, FollowsTheLexersShapesAndAcceptsAnything) {
  const std::string text = "let r = 0..3 // c\nx: 2.5e-3 MB \"s\\\"q\" /* b\n*/ \"\"\"t\n\"\"\" \x01";
  auto tokens = scanTokens(text);
  std::vector<std::string> seen;
  for (const auto& t : tokens) seen.push_back(text.substr(t.begin, t.end - t.begin));
  const std::vector<std::string> want = {"let", "r", "=", "0", "..", "3", "// c", "x", ":", "2.5e-3", "MB",
                                         "\"s\\\"q\"", "/* b\n*/", "\"\"\"t\n\"\"\"", "\x01"};
  EXPECT_EQ(seen, want);
  EXPECT_EQ(tokens.back().kind, TokenKind::Other);
  auto open = scanTokens("\"abc\n/* never closed");
  ASSERT_EQ(open.size(), 2u);
  EXPECT_FALSE(open[0].closed);
  EXPECT_FALSE(open[1].closed);
  EXPECT_TRUE(isKeyword("mapping"));
  EXPECT_FALSE(isKeyword("replicas"));
}

namespace {
// The context at the `|` in `text` (which it removes).
CompletionContext at(std::string text) {
  const std::size_t cursor = text.find('|');
  text.erase(cursor, 1);
  return completionContext(text, cursor);
}
}  // namespace

TEST(CompletionContext, KnowsTheRecordBeingWrittenFromTheTextBeforeTheCursor) {
  using P = CompletionContext::Place;
  using B = CompletionContext::Block;
  auto c = at("mapping m for x on y {\n  replicas: 4\n  rec|\n}\n");
  EXPECT_EQ(c.place, P::Member);
  EXPECT_EQ(c.block, B::Declaration);
  ASSERT_NE(c.schema, nullptr);
  EXPECT_EQ(c.prefix, "rec");
  EXPECT_EQ(c.written.count("replicas"), 1u);
  EXPECT_EQ(c.written.count("rec"), 0u);

  c = at("mapping m for x on y {\n  recompute: every|\n}");
  EXPECT_EQ(c.place, P::Value);
  EXPECT_EQ(c.field, "recompute");
  EXPECT_EQ(c.prefix, "every");

  c = at("training t {\n  phase one {\n    |\n  }\n}");
  EXPECT_EQ(c.place, P::Member);
  EXPECT_EQ(c.block, B::Phase);

  c = at("layer l {\n  flops: {\n    mat|\n  }\n}");
  EXPECT_EQ(c.block, B::Struct);
  ASSERT_NE(c.schema, nullptr);
  EXPECT_NE(c.schema->find("matmul"), nullptr);

  c = at("mapping m for x on y {\n  pipeline {\n    ipu 0: emb|\n  }\n}");
  EXPECT_EQ(c.block, B::Pipeline);
  EXPECT_EQ(c.place, P::StageLayer);

  c = at("import \"std/mo|\"");
  EXPECT_EQ(c.place, P::ImportPath);
  EXPECT_EQ(c.prefix, "std/mo");
  EXPECT_EQ(c.replaceBegin, 8u);

  EXPECT_EQ(at("let a = 1\nmod|").place, P::Statement);
  EXPECT_EQ(at("let a = 1\nrun |").afterRun, true);
  EXPECT_EQ(at("let x = 1 // a comm|ent").place, P::Nothing);
  EXPECT_EQ(at("let x = \"str|\"").place, P::Nothing);
  EXPECT_EQ(at("model |").place, P::Nothing);  // a name being declared
  c = at("training t {\n  optimizer: lamb(beta1: 0.8,\n    beta2: |)\n}");
  EXPECT_EQ(c.place, P::Value);
  c = at("mapping m for x on y {\n  available_memory_proportion: [0.2, |]\n}");
  EXPECT_EQ(c.place, P::Value);
  EXPECT_EQ(c.field, "available_memory_proportion");
}
