// Position queries over session snapshots (interpreter/session/queries.h):
// each query at places in a script that imports a module of its own and the
// standard library; snapshots that keep their text after update(); places
// that have no answer.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "interpreter/check/schema.h"
#include "interpreter/session/session.h"

using namespace ipu;

namespace {

namespace fs = std::filesystem;

const std::string kMain =
    "import \"std/models/bert\"\n"
    "import \"lib\"\n"
    "\n"
    "// the width of everything\n"
    "let hidden = 64\n"
    "let width = hidden * 4\n"
    "let size = 2 GB / 4\n"
    "let lanes = tile + unit\n"
    "let cfg = { a: 1, b: 2 MB }\n"
    "model small = bert(layers: 2, hidden: hidden, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
    "precision p {\n"
    "  compute: fp16\n"
    "  let scale = 2\n"
    "  loss_scale: 128 * scale\n"
    "}\n";

const std::string kLib =
    "let unit = 8\n"
    "let tile = unit * 2\n";

// The 1-based line and column of the `nth` occurrence of `what` in `text`
// (plus `offset` characters: all ASCII here).
std::pair<std::uint32_t, std::uint32_t> at(const std::string& text, const std::string& what, int nth = 1, int offset = 0) {
  std::size_t pos = std::string::npos, from = 0;
  for (int i = 0; i < nth; ++i) {
    pos = text.find(what, from);
    if (pos == std::string::npos) ADD_FAILURE() << "`" << what << "` is not in the text";
    from = pos + 1;
  }
  pos += static_cast<std::size_t>(offset);
  std::uint32_t line = 1, col = 1;
  for (std::size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return {line, col};
}

struct Fixture : ::testing::Test {
  // The files exist only as the session's texts (unsaved buffers): their
  // directory does, so paths are canonical.
  std::string dir = fs::temp_directory_path().string();
  std::string main = dir + "/queries_test_main.ipu";
  std::string lib = dir + "/lib.ipu";
  session::Session session;
  std::shared_ptr<const session::Snapshot> snap;

  void SetUp() override {
    session.update(main, kMain);
    session.update(lib, kLib);
    snap = session.snapshot(main);
    ASSERT_NE(snap, nullptr);
    std::string rendered;
    for (const auto& d : snap->diagnostics().all()) rendered += d.code + " " + d.message + "\n";
    ASSERT_TRUE(snap->checked()) << rendered;
  }
  std::pair<std::uint32_t, std::uint32_t> in(const std::string& what, int nth = 1, int offset = 0) {
    return at(kMain, what, nth, offset);
  }
  std::string textOf(const session::Location& l) const {
    const base::SourceFile& f = snap->sources().file(l.span.file);
    return f.text().substr(l.span.begin, l.span.end - l.span.begin);
  }
};

}  // namespace

TEST_F(Fixture, NodeAtGivesTheInnermostNode) {
  struct Case {
    std::string what;
    int nth, offset;
    session::NodeKind kind;
    std::string name;
  };
  const Case cases[] = {
      {"hidden * 4", 1, 0, session::NodeKind::Name, "hidden"},
      {"hidden * 4", 1, 7, session::NodeKind::Binary, ""},
      {"hidden * 4", 1, 9, session::NodeKind::Number, ""},
      {"let hidden", 1, 0, session::NodeKind::Let, "hidden"},
      {"compute", 1, 0, session::NodeKind::Field, "compute"},
      {"fp16", 1, 0, session::NodeKind::Name, "fp16"},
      {"let scale", 1, 0, session::NodeKind::LetMember, "scale"},
      {"bert(", 1, 0, session::NodeKind::Name, "bert"},
      {"{ a: 1", 1, 0, session::NodeKind::Record, ""},
  };
  for (const auto& c : cases) {
    auto [line, col] = in(c.what, c.nth, c.offset);
    auto n = snap->nodeAt(main, line, col);
    ASSERT_TRUE(n.has_value()) << c.what;
    EXPECT_EQ(n->kind, c.kind) << c.what << " +" << c.offset << ": " << session::name(n->kind);
    EXPECT_EQ(n->name, c.name) << c.what;
  }
}

TEST_F(Fixture, DeclarationAtGivesTheEnclosingItem) {
  auto [line, col] = in("128 * scale", 1, 6);
  auto d = snap->declarationAt(main, line, col);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, session::NodeKind::Declaration);
  EXPECT_EQ(d->name, "p");
  std::tie(line, col) = in("tile + unit");
  d = snap->declarationAt(main, line, col);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, session::NodeKind::Let);
  EXPECT_EQ(d->name, "lanes");
}

TEST_F(Fixture, DefinitionsInTheFileAnImportAndTheStandardLibrary) {
  struct Case {
    std::string what;
    int nth, offset;
    std::string file;      // "main", "lib" or the standard module's file
    std::uint32_t line;
    session::NodeKind kind;
  };
  const Case cases[] = {
      {"hidden * 4", 1, 0, "main", 5, session::NodeKind::Let},
      {"let hidden", 1, 4, "main", 5, session::NodeKind::Let},  // on the declaring name: itself
      {"128 * scale", 1, 6, "main", 13, session::NodeKind::LetMember},
      {"tile + unit", 1, 0, "lib", 2, session::NodeKind::Let},
      {"tile + unit", 1, 7, "lib", 1, session::NodeKind::Let},
      {"bert(", 1, 0, "std/models/bert.ipu", 13, session::NodeKind::Declaration},
      // A named argument names the definition's parameter.
      {"heads: 2", 1, 0, "std/models/bert.ipu", 13, session::NodeKind::Param},
      // The argument's value is the script's own `hidden`.
      {"hidden: hidden", 1, 8, "main", 5, session::NodeKind::Let},
  };
  for (const auto& c : cases) {
    auto [line, col] = in(c.what, c.nth, c.offset);
    auto d = snap->definitionOf(main, line, col);
    ASSERT_TRUE(d.has_value()) << c.what << " +" << c.offset;
    const std::string file = c.file == "main" ? main : c.file == "lib" ? lib : c.file;
    EXPECT_EQ(d->path, file) << c.what;
    EXPECT_EQ(d->start.line, c.line) << c.what;
    EXPECT_EQ(d->kind, c.kind) << c.what << ": " << session::name(d->kind);
    EXPECT_EQ(d->standard, c.file != "main" && c.file != "lib") << c.what;
  }
  auto [line, col] = in("bert(");
  auto d = snap->definitionOf(main, line, col);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(textOf(*d), "bert");
  std::tie(line, col) = in("heads: 2");
  d = snap->definitionOf(main, line, col);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(textOf(*d), "heads");
  // Built-ins, enumeration members and literals are declared nowhere.
  std::tie(line, col) = in("fp16");
  EXPECT_FALSE(snap->definitionOf(main, line, col).has_value());
  std::tie(line, col) = in("256");
  EXPECT_FALSE(snap->definitionOf(main, line, col).has_value());
}

TEST_F(Fixture, UsesAcrossTwoFiles) {
  // `unit`, asked at its declaration in lib.ipu: used there and in the script.
  auto [line, col] = at(kLib, "unit");
  auto uses = snap->usesOf(lib, line, col);
  ASSERT_EQ(uses.size(), 2u);
  std::vector<std::pair<std::string, std::uint32_t>> got;
  for (const auto& u : uses) {
    EXPECT_EQ(textOf(u), "unit");
    got.emplace_back(u.path, u.start.line);
  }
  std::sort(got.begin(), got.end());
  std::vector<std::pair<std::string, std::uint32_t>> want = {{lib, 2}, {main, 8}};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // Asked at a use, the same answer.
  std::tie(line, col) = in("tile + unit", 1, 7);
  EXPECT_EQ(snap->usesOf(main, line, col).size(), 2u);
  // `hidden`: `hidden * 4` and the argument value, not the argument's name.
  std::tie(line, col) = in("let hidden", 1, 4);
  uses = snap->usesOf(main, line, col);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[0].start.line, 6u);
  EXPECT_EQ(uses[1].start.line, 10u);
  EXPECT_EQ(uses[1].start.column, static_cast<std::uint32_t>(in("hidden: hidden", 1, 8).second));
}

TEST_F(Fixture, ValuesAndTypesOfExpressions) {
  struct Case {
    std::string what;
    int offset;
    std::string shown, type;
  };
  const Case cases[] = {
      {"hidden * 4", 7, "256", "number"},          // the product, at its operator
      {"hidden * 4", 0, "64", "number"},           // the name alone
      {"2 GB / 4", 5, "500.0 MB", "bytes"},
      {"2 GB / 4", 0, "2.0 GB", "bytes"},
      {"tile + unit", 5, "24", "number"},          // across the import
      {"fp16", 0, "fp16", "symbol"},               // as the field reads it
      {"128 * scale", 4, "256", "number"},         // with the block's `let`
  };
  for (const auto& c : cases) {
    auto [line, col] = in(c.what, 1, c.offset);
    auto v = snap->valueAndTypeAt(main, line, col);
    ASSERT_TRUE(v.has_value()) << c.what << " +" << c.offset;
    EXPECT_EQ(v->shown, c.shown) << c.what << " +" << c.offset;
    EXPECT_EQ(v->type, c.type) << c.what << " +" << c.offset;
    EXPECT_GE(v->evaluations, 1);
    EXPECT_FALSE(v->varies);
  }
  auto [line, col] = in("{ a: 1");
  auto rec = snap->valueAndTypeAt(main, line, col);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->type, "record");
  ASSERT_EQ(rec->value.kind, check::ValueKind::Record);
  ASSERT_NE(rec->value.record->get("b"), nullptr);
  EXPECT_EQ(rec->value.record->get("b")->show(), "2.0 MB");
  std::tie(line, col) = in("bert(");
  auto model = snap->valueAndTypeAt(main, line, col);
  ASSERT_TRUE(model.has_value());
  EXPECT_EQ(model->type, "model definition (layers: int, hidden: int, heads: int, ffn: int = ..., vocab: int = ..., "
                         "positions: int = ...)");
}

TEST_F(Fixture, AFieldsSchemaEntry) {
  auto [line, col] = in("compute", 1, 2);
  auto f = snap->fieldAt(main, line, col);
  ASSERT_TRUE(f.has_value());
  const check::Field* spec = check::schemaFor("precision")->find("compute");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(f->recordKind, "precision");
  EXPECT_EQ(f->name, "compute");
  EXPECT_EQ(f->doc, spec->doc);
  EXPECT_EQ(f->type, spec->type.name());
  EXPECT_FALSE(f->doc.empty());
  std::tie(line, col) = in("loss_scale");
  f = snap->fieldAt(main, line, col);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->name, "loss_scale");
  // Not a field name: a `let`, a field's value, a let item.
  for (const auto& [what, offset] : std::vector<std::pair<std::string, int>>{{"let scale", 4}, {"fp16", 0}, {"let width", 4}}) {
    std::tie(line, col) = in(what, 1, offset);
    EXPECT_FALSE(snap->fieldAt(main, line, col).has_value()) << what;
  }
}

TEST_F(Fixture, ASnapshotKeepsItsTextAfterAnUpdate) {
  auto [line, col] = in("hidden * 4", 1, 7);
  session.update(main, "let hidden = 128\nlet width = hidden * 4\n");
  auto later = session.snapshot(main);
  ASSERT_NE(later, nullptr);
  ASSERT_TRUE(later->checked());
  // The old snapshot: the old text, the old value, at the old place.
  ASSERT_NE(snap->text(main), nullptr);
  EXPECT_EQ(*snap->text(main), kMain);
  auto old = snap->valueAndTypeAt(main, line, col);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->shown, "256");
  // The new one.
  auto now = later->valueAndTypeAt(main, 2, 20);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->shown, "512");
  EXPECT_FALSE(later->definitionOf(main, line, col).has_value());  // line 6 is past its end
  // An imported module's update is seen by the next snapshot only.
  session.update(main, kMain);
  session.update(lib, "let unit = 100\nlet tile = unit * 2\n");
  auto third = session.snapshot(main);
  std::tie(line, col) = in("tile + unit", 1, 5);
  EXPECT_EQ(third->valueAndTypeAt(main, line, col)->shown, "300");
  EXPECT_EQ(snap->valueAndTypeAt(main, line, col)->shown, "24");
}

TEST_F(Fixture, PlacesWithoutAnAnswer) {
  const std::uint32_t comment = in("// the width").first;
  const std::pair<std::uint32_t, std::uint32_t> places[] = {
      {comment, 4},    // in a comment
      {3, 1},          // an empty line
      {5, 40},         // past the end of a line
      {200, 1},        // past the end of the file
      {0, 0},          // not a position
      {5, 0},
  };
  for (const auto& [line, col] : places) {
    EXPECT_FALSE(snap->nodeAt(main, line, col).has_value()) << line << ":" << col;
    EXPECT_FALSE(snap->declarationAt(main, line, col).has_value()) << line << ":" << col;
    EXPECT_FALSE(snap->definitionOf(main, line, col).has_value()) << line << ":" << col;
    EXPECT_TRUE(snap->usesOf(main, line, col).empty()) << line << ":" << col;
    EXPECT_FALSE(snap->valueAndTypeAt(main, line, col).has_value()) << line << ":" << col;
    EXPECT_FALSE(snap->fieldAt(main, line, col).has_value()) << line << ":" << col;
  }
  // A file that is not part of the snapshot.
  EXPECT_FALSE(snap->nodeAt(dir + "/elsewhere.ipu", 1, 1).has_value());
}

TEST_F(Fixture, AFileWithSyntaxErrorsAnswersNothing) {
  session.update(main, "let a = (1 +\nlet b = 2\n");
  auto broken = session.snapshot(main);
  ASSERT_NE(broken, nullptr);
  EXPECT_FALSE(broken->checked());
  EXPECT_TRUE(broken->diagnostics().hasErrors());
  for (std::uint32_t line = 1; line <= 3; ++line)
    for (std::uint32_t col = 1; col <= 12; ++col) {
      EXPECT_FALSE(broken->nodeAt(main, line, col).has_value());
      EXPECT_FALSE(broken->definitionOf(main, line, col).has_value());
      EXPECT_TRUE(broken->usesOf(main, line, col).empty());
      EXPECT_FALSE(broken->valueAndTypeAt(main, line, col).has_value());
      EXPECT_FALSE(broken->fieldAt(main, line, col).has_value());
    }
  // The file that did parse still answers, in the same snapshot.
  auto [line, col] = at(kLib, "unit * 2");
  EXPECT_FALSE(broken->definitionOf(lib, line, col).has_value());  // not imported by the broken script
}

TEST_F(Fixture, AnUnreadableFileHasNoSnapshot) {
  session::Session s;
  EXPECT_EQ(s.snapshot(dir + "/no_such_script_here.ipu"), nullptr);
  EXPECT_TRUE(s.diagnostics().hasErrors());
}

TEST_F(Fixture, EvaluateAnExpressionWithoutChangingTheScript) {
  auto e = snap->evaluate("width + unit");
  ASSERT_TRUE(e.value.has_value());
  EXPECT_EQ(e.value->show(), "264");
  EXPECT_EQ(e.type, "number");
  EXPECT_EQ(*snap->text(main), kMain);
  auto model = snap->evaluate("small");
  ASSERT_TRUE(model.value.has_value());
  ASSERT_TRUE(model.layers.has_value() && model.params.has_value());
  // embedding, 2 x (attention, ffn), the two heads; as the properties count them
  EXPECT_EQ(*model.layers, 7);
  auto params = snap->evaluate("small.params");
  ASSERT_TRUE(params.value.has_value());
  EXPECT_EQ(*model.params, params.value->number);
  EXPECT_GT(*model.params, 0);
  auto bad = snap->evaluate("width + nope");
  EXPECT_FALSE(bad.value.has_value());
  ASSERT_TRUE(bad.diagnostics.hasErrors());
  const auto& d = bad.diagnostics.all().back();
  EXPECT_EQ(bad.sources.file(d.span.file).path(), "<input>");
  EXPECT_EQ(d.span.begin, 8u);
  auto unparsable = snap->evaluate("1 +");
  EXPECT_FALSE(unparsable.value.has_value());
  EXPECT_TRUE(unparsable.diagnostics.hasErrors());
}

// Names that are not ordinary scope lookups: a pipeline stage names layers of
// the mapping's model (written in the standard library, through
// `model tiny = bert(...)`, and a mapping derived `with` another); `phase ...
// from` names a phase of the same training or of the one it derives from; a
// module imported by an imported module.
TEST(Queries, StageLayersPhasesAndImportsOfImports) {
  namespace fs = std::filesystem;
  const std::string dir = fs::temp_directory_path().string();
  const std::string main = dir + "/queries_stage_main.ipu", chain = dir + "/queries_chain.ipu",
                    deeper = dir + "/queries_deeper.ipu";
  const std::string kScript =
      "import \"std/pods\"\n"
      "import \"std/models/bert\"\n"
      "import \"queries_chain\"\n"
      "\n"
      "model tiny = bert(layers: 2, hidden: 64, heads: 2, ffn: 256, vocab: 1000, positions: 128)\n"
      "mapping two for tiny on POD4 {\n"
      "  pipeline {\n"
      "    ipu 0: embedding, encoder[0].attention\n"
      "    ipu 1: encoder[0].ffn, encoder[1], mlm_head, nsp_head\n"
      "  }\n"
      "}\n"
      "mapping wide = two with {\n"
      "  replicas: 2\n"
      "  pipeline {\n"
      "    ipu 0: embedding, encoder[0]\n"
      "    ipu 1: encoder[1], mlm_head, nsp_head\n"
      "  }\n"
      "}\n"
      "training t {\n"
      "  mapping: two\n"
      "  optimizer: lamb()\n"
      "  phase short { seq_len: 128, masked_tokens: 20, micro_batch: 2, global_batch: 8, steps: chain_steps, lr: 0.001 }\n"
      "  phase long from short { seq_len: 128, masked_tokens: 20, micro_batch: 2, global_batch: 8, steps: 10, lr: 0.001 }\n"
      "}\n"
      "training t2 = t with {\n"
      "  mapping: wide\n"
      "  phase third from long { seq_len: 128, masked_tokens: 20, micro_batch: 2, global_batch: 16, steps: 10, lr: 0.001 }\n"
      "}\n"
      "run t\n";
  const std::string kChain = "import \"queries_deeper\"\nlet chain_steps = deep_steps * 2\n";
  const std::string kDeeper = "let deep_steps = 5\n";
  session::Session session;
  session.update(main, kScript);
  session.update(chain, kChain);
  session.update(deeper, kDeeper);
  auto snap = session.snapshot(main);
  ASSERT_NE(snap, nullptr);
  ASSERT_TRUE(snap->checked());
  auto textOf = [&](const session::Location& l) {
    const base::SourceFile& f = snap->sources().file(l.span.file);
    return f.text().substr(l.span.begin, l.span.end - l.span.begin);
  };
  struct Case {
    std::string what;
    int nth, offset;
    std::string file;  // "main", "chain", "deeper" or the standard module's file
    std::uint32_t line;
    session::NodeKind kind;
    std::string text;
  };
  const Case cases[] = {
      {"embedding, encoder[0].attention", 1, 0, "std/models/bert.ipu", 15, session::NodeKind::Layer, "embedding"},
      {"encoder[0].attention", 1, 0, "std/models/bert.ipu", 16, session::NodeKind::Repeat, "encoder"},
      {"encoder[0].attention", 1, 11, "std/models/bert.ipu", 8, session::NodeKind::Layer, "attention"},
      {"encoder[0].ffn", 1, 11, "std/models/bert.ipu", 9, session::NodeKind::Layer, "ffn"},
      {"nsp_head\n  }\n}\nmapping", 1, 0, "std/models/bert.ipu", 18, session::NodeKind::Layer, "nsp_head"},
      // The stages of a mapping derived from another name the same model's layers.
      {"encoder[1], mlm_head, nsp_head\n  }\n}\ntraining", 1, 0, "std/models/bert.ipu", 16, session::NodeKind::Repeat,
       "encoder"},
      {"from short", 1, 5, "main", 22, session::NodeKind::Phase, "short"},
      {"phase short", 1, 6, "main", 22, session::NodeKind::Phase, "short"},  // on the declaring name: itself
      {"from long", 1, 5, "main", 23, session::NodeKind::Phase, "long"},     // a phase of the base training
      {"chain_steps", 1, 0, "chain", 2, session::NodeKind::Let, "chain_steps"},
  };
  for (const auto& c : cases) {
    auto [line, col] = at(kScript, c.what, c.nth, c.offset);
    auto d = snap->definitionOf(main, line, col);
    ASSERT_TRUE(d.has_value()) << c.what << " +" << c.offset;
    const std::string file = c.file == "main" ? main : c.file == "chain" ? chain : c.file == "deeper" ? deeper : c.file;
    EXPECT_EQ(d->path, file) << c.what;
    EXPECT_EQ(d->start.line, c.line) << c.what;
    EXPECT_EQ(d->kind, c.kind) << c.what << ": " << session::name(d->kind);
    EXPECT_EQ(textOf(*d), c.text) << c.what;
  }
  // In the imported module, a name its own import declares.
  auto [line, col] = at(kChain, "deep_steps");
  auto d = snap->definitionOf(chain, line, col);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->path, deeper);
  EXPECT_EQ(d->start.line, 1u);
  // Uses of that declaration, asked where it is declared: the one in chain.
  std::tie(line, col) = at(kDeeper, "deep_steps");
  auto uses = snap->usesOf(deeper, line, col);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].path, chain);
  // Uses of a definition of the standard library: the script's and the
  // standard library's own (`bert_base = bert(...)`).
  std::tie(line, col) = at(kScript, "bert(");
  uses = snap->usesOf(main, line, col);
  std::set<std::pair<std::string, std::uint32_t>> places;
  for (const auto& u : uses) places.emplace(u.path, u.start.line);
  EXPECT_TRUE(places.count({main, 5})) << uses.size();
  EXPECT_TRUE(places.count({"std/models/bert.ipu", 21})) << uses.size();
  EXPECT_TRUE(places.count({"std/models/bert.ipu", 22})) << uses.size();
  // Uses of a layer of the standard library's model: the stages that name it.
  std::tie(line, col) = at(kScript, "encoder[0].attention");
  uses = snap->usesOf(main, line, col);
  ASSERT_EQ(uses.size(), 5u);  // in `two`: encoder[0].attention, encoder[0].ffn, encoder[1]; in `wide`: encoder[0], encoder[1]
  // A name in a stage that is no layer of the model has no definition.
  session.update(main, std::string(kScript).replace(kScript.find("mlm_head, nsp_head"), 8, "mlm_hexd"));
  auto bad = session.snapshot(main);
  ASSERT_NE(bad, nullptr);
  std::tie(line, col) = at(kScript, "mlm_head, nsp_head");
  EXPECT_FALSE(bad->definitionOf(main, line, col).has_value());
}

// The queries an editor's completion and colouring ask: the names in scope at
// a cursor (between characters, past the end of a line too), the top level's
// names, every resolved use, an import's module, the parsed tree and the
// user's modules.
TEST_F(Fixture, NamesInScopeAtACursor) {
  auto names = [&](std::uint32_t line, std::uint32_t col) {
    std::map<std::string, session::ScopeName> out;
    for (const auto& n : snap->namesInScope(main, line, col)) out.emplace(n.name, n);
    return out;
  };
  // At the end of `  loss_scale: 128 * scale` (one past its last character): the block's `scale` first.
  const std::uint32_t lossLine = in("loss_scale").first;
  auto inBlock = names(lossLine, 26);
  ASSERT_TRUE(inBlock.count("scale"));
  EXPECT_EQ(inBlock["scale"].kind, session::NodeKind::LetMember);
  EXPECT_EQ(snap->namesInScope(main, lossLine, 26).front().name, "scale");
  // The top level, the unaliased imports' names (with their kinds and places), the built-ins.
  for (const char* n : {"hidden", "width", "small", "p", "tile", "unit", "bert", "min", "balanced"}) EXPECT_TRUE(inBlock.count(n)) << n;
  EXPECT_EQ(inBlock["small"].declKind, syntax::DeclKind::Model);
  EXPECT_EQ(inBlock["p"].declKind, syntax::DeclKind::Precision);
  ASSERT_TRUE(inBlock["unit"].at.has_value());
  EXPECT_EQ(inBlock["unit"].at->path, lib);
  ASSERT_TRUE(inBlock["bert"].at.has_value());
  EXPECT_TRUE(inBlock["bert"].at->standard);
  EXPECT_EQ(inBlock["min"].kind, session::NodeKind::Name);
  EXPECT_FALSE(inBlock["min"].at.has_value());
  // Before the block's `let`: not yet in scope. Outside the block: never.
  EXPECT_FALSE(names(in("compute").first, 3).count("scale"));
  EXPECT_FALSE(names(in("let width").first, 5).count("scale"));
  // A definition's parameters, in its body.
  session::Session s;
  const std::string path = dir + "/queries_params.ipu";
  s.update(path, "model m(width: int, depth: int = 2) {\n  layer a = m2(w: width)\n}\n");
  auto withParams = s.snapshot(path);
  bool sawWidth = false;
  for (const auto& n : withParams->namesInScope(path, 2, 20)) sawWidth = sawWidth || (n.name == "width" && n.kind == session::NodeKind::Param);
  EXPECT_TRUE(sawWidth);
  // Top-level names alone, and nothing but the built-ins for a file that did not parse.
  std::set<std::string> top;
  for (const auto& n : snap->topLevelNames(main)) top.insert(n.name);
  EXPECT_TRUE(top.count("hidden") && top.count("tile") && top.count("bert"));
  EXPECT_FALSE(top.count("min"));
  session.update(main, "let a = (1 +\n");
  auto broken = session.snapshot(main);
  EXPECT_TRUE(broken->topLevelNames(main).empty());
  for (const auto& n : broken->namesInScope(main, 1, 3)) EXPECT_EQ(n.kind, session::NodeKind::Name) << n.name;
}

TEST_F(Fixture, ResolvedNamesImportsProgramsAndModules) {
  // Every use that resolves, in text order: `hidden` (twice), `tile`, `unit`, `bert`, `heads`...
  auto resolved = snap->resolvedNames(main);
  ASSERT_FALSE(resolved.empty());
  for (std::size_t i = 1; i < resolved.size(); ++i) EXPECT_LT(resolved[i - 1].use.begin, resolved[i].use.begin);
  std::map<std::string, session::NodeKind> byText;
  for (const auto& r : resolved) byText[kMain.substr(r.use.begin, r.use.end - r.use.begin)] = r.definition.kind;
  EXPECT_EQ(byText["hidden"], session::NodeKind::Let);
  EXPECT_EQ(byText["tile"], session::NodeKind::Let);
  EXPECT_EQ(byText["bert"], session::NodeKind::Declaration);
  EXPECT_EQ(byText["heads"], session::NodeKind::Param);  // a named argument
  EXPECT_EQ(byText["scale"], session::NodeKind::LetMember);
  EXPECT_FALSE(byText.count("fp16"));                    // an enumeration member: declared nowhere
  // An import's path names its module's file.
  auto [line, col] = in("\"lib\"", 1, 2);
  auto module = snap->importedModuleAt(main, line, col);
  ASSERT_TRUE(module.has_value());
  EXPECT_EQ(module->path, lib);
  EXPECT_EQ(module->start.line, 1u);
  std::tie(line, col) = in("std/models/bert", 1, 3);
  module = snap->importedModuleAt(main, line, col);
  ASSERT_TRUE(module.has_value());
  EXPECT_EQ(module->path, "std/models/bert.ipu");
  EXPECT_TRUE(module->standard);
  EXPECT_FALSE(snap->importedModuleAt(main, in("let hidden").first, 5).has_value());
  // The parsed tree of each file, and the user's modules.
  ASSERT_NE(snap->programOf(main), nullptr);
  EXPECT_EQ(snap->programOf(main)->items.size(), 9u);  // 2 imports, 5 lets, a model, a precision
  EXPECT_NE(snap->programOf("std/models/bert.ipu"), nullptr);
  EXPECT_EQ(snap->programOf(dir + "/elsewhere.ipu"), nullptr);
  EXPECT_EQ(snap->modulePaths(), (std::vector<std::string>{main, lib}));
}

TEST_F(Fixture, ForgetReadsTheDiskAgain) {
  if (std::filesystem::exists(lib)) GTEST_SKIP() << lib << " exists on this machine";
  session.forget(lib);  // there is no lib.ipu on disk: the import fails
  auto later = session.snapshot(main);
  ASSERT_NE(later, nullptr);
  bool missing = false;
  for (const auto& d : later->diagnostics().all()) missing = missing || d.code == "IPU1010";
  EXPECT_TRUE(missing);
}
