// What the language server shows of the plan and the cost model (code
// lenses, inlay hints, hovers on stages and layers), range formatting, and
// the workspace's estimate cache. Expected figures come from the engine
// itself (Session::plan, cost::estimatePhase: what `ipu plan` and `ipu
// estimate` print), so the tests hold the editor to the CLI's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "interpreter/check/units.h"
#include "interpreter/lsp/document_store.h"
#include "interpreter/lsp/standard_library_files.h"
#include "interpreter/lsp/workspace.h"
#include "interpreter/plan/levers.h"
#include "interpreter/search/search.h"
#include "interpreter/session/session.h"
#include "interpreter/syntax/format.h"
#include "runtime/cost/cost_model.h"
#include "tests/lsp/lsp_client.h"

namespace fs = std::filesystem;
using namespace ipu;
using namespace ipu::lsp;
using namespace ipu::lsp::test;

namespace {

std::string readExample(const std::string& name) {
  std::ifstream in(fs::path(IPU_SOURCE_DIR) / "examples" / name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The 0-based line of the first line of `text` containing `needle`, and its length.
std::uint32_t lineOf(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return static_cast<std::uint32_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}
std::string lineText(const std::string& text, std::uint32_t line) {
  std::istringstream in(text);
  std::string l;
  for (std::uint32_t i = 0; i <= line; ++i) std::getline(in, l);
  return l;
}

// "4,942" as the lens writes a throughput (three significant digits below 100).
std::string grouped(double v) {
  char buf[64];
  if (v < 100) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string d = buf, out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

// The plan `ipu plan` makes of a text at a path.
struct Planned {
  session::Session session;
  const ir::ExecutionPlan* plan = nullptr;
  Planned(const std::string& path, const std::string& text) { plan = session.plan(session.addSource(path, text)); }
};

const ir::Ipu& fullest(const ir::PhasePlan& p) {
  return *std::max_element(p.ipus.begin(), p.ipus.end(),
                           [](const ir::Ipu& a, const ir::Ipu& b) { return a.memory.total() < b.memory.total(); });
}

struct PlanViews : ::testing::Test {
  fs::path dir;
  std::string path, uri, stdlibDir;
  std::unique_ptr<InProcessClient> client;

  void SetUp() override {
    dir = fs::temp_directory_path() / ("ipu_lsp_plan_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    dir = fs::canonical(dir);
    path = (dir / "tiny.ipu").string();
    uri = uriOf(path);
    stdlibDir = (dir / "stdlib").string();
  }
  void TearDown() override {
    client.reset();
    std::error_code ec;
    for (auto& p : fs::recursive_directory_iterator(dir, ec)) fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  void start(Json capabilities = Json::object()) {
    ServerOptions options;
    options.standardLibraryDirectory = stdlibDir;
    client = std::make_unique<InProcessClient>(std::move(options));
    client->initialize(std::move(capabilities));
  }
  Json doc() const { return Json{{"uri", uri}}; }
  Json result(const std::string& method, Json params) {
    Json reply = client->request(method, std::move(params));
    EXPECT_TRUE(reply.contains("result")) << method << ": " << reply.dump();
    return reply.contains("result") ? reply["result"] : Json();
  }
  Json lenses() { return result("textDocument/codeLens", Json{{"textDocument", doc()}}); }
  Json hoverAt(std::uint32_t line, std::uint32_t character) {
    return result("textDocument/hover", Json{{"textDocument", doc()}, {"position", Json{{"line", line}, {"character", character}}}});
  }
};

Json range(std::uint32_t l0, std::uint32_t c0, std::uint32_t l1, std::uint32_t c1) {
  return Json{{"start", Json{{"line", l0}, {"character", c0}}}, {"end", Json{{"line", l1}, {"character", c1}}}};
}

// The lens `ipu estimate` would give a phase, as the server writes it.
std::string expectedLens(const ir::RunPlan& run, const ir::PhasePlan& p, bool named) {
  const ir::Ipu& peak = fullest(p);
  std::string s = named ? "`" + run.name + "." + p.name + "`: " : "";
  s += p.fits ? "fits" : "does not fit";
  s += " · peak " + check::formatBytes(peak.memory.total()) + " (" + check::formatPercent(peak.memory.total() / peak.capacityBytes) +
       ") on IPU " + std::to_string(peak.index);
  if (p.fits) s += " · " + grouped(cost::estimatePhase(p).samplesPerSecond) + " samples/s";
  return s;
}

}  // namespace

TEST_F(PlanViews, InitializeAnnouncesLensesHintsRangeFormattingAndResolvedActions) {
  client = std::make_unique<InProcessClient>(ServerOptions{stdlibDir, nullptr, nullptr, std::nullopt, nullptr});
  const Json caps = client->initialize()["result"]["capabilities"];
  EXPECT_EQ(caps["codeLensProvider"], (Json{{"resolveProvider", false}}));
  EXPECT_EQ(caps["inlayHintProvider"], (Json{{"resolveProvider", false}}));
  EXPECT_EQ(caps["documentRangeFormattingProvider"], true);
  EXPECT_EQ(caps["codeActionProvider"], (Json{{"codeActionKinds", Json::array({"quickfix", "refactor.rewrite"})}, {"resolveProvider", true}}));
}

TEST_F(PlanViews, ACodeLensAboveEachMappingWithEachPhasesVerdictPeakAndThroughput) {
  start(Json{{"workspace", Json{{"codeLens", Json{{"refreshSupport", true}}}, {"inlayHint", Json{{"refreshSupport", true}}}}}});
  std::string text = readExample("tiny_bert.ipu");
  // A mapping no training uses.
  text += "\nmapping spare for tiny on tiny_pod {\n  replicas: 4\n}\n";
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  // The refreshes follow the diagnostics: a request the worker answers after
  // the check has every message the check sent arrive before its reply.
  client->request("workspace/symbol", Json{{"query", ""}});
  // Clients that take refreshes are asked to fetch lenses and hints again after a check.
  std::set<std::string> asked;
  for (const auto& m : client->takeNotifications())
    if (m.contains("id")) asked.insert(m["method"].get<std::string>());
  EXPECT_EQ(asked, (std::set<std::string>{"workspace/codeLens/refresh", "workspace/inlayHint/refresh"}));

  Json got = lenses();
  ASSERT_EQ(got.size(), 3u) << got.dump(2);
  const std::uint32_t mappingLine = lineOf(text, "mapping two_by_two");
  Planned planned(path, text);
  ASSERT_NE(planned.plan, nullptr);
  const ir::RunPlan& run = planned.plan->runs.at(0);
  ASSERT_EQ(run.phases.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i]["range"], range(mappingLine, 0, mappingLine, 18));  // `mapping two_by_two`
    EXPECT_EQ(got[i]["command"]["title"], expectedLens(run, run.phases[i], true));
    EXPECT_EQ(got[i]["command"]["command"], "");
  }
  // What the title says, spelled out for the first phase: ipu plan's "fits: peak 7.9 MB on IPU 0 (12% of 64.0 MB)".
  EXPECT_EQ(got[0]["command"]["title"].get<std::string>().rfind("`tiny_pretrain.short`: fits · peak 7.9 MB (12%) on IPU 0 · ", 0), 0u)
      << got[0].dump();
  const std::uint32_t spareLine = lineOf(text, "mapping spare");
  EXPECT_EQ(got[2]["range"], range(spareLine, 0, spareLine, 13));
  EXPECT_EQ(got[2]["command"]["title"], "no training uses `spare`");

  // An edit of the mapping: the lens follows (one replica instead of two).
  const std::uint32_t replicasLine = lineOf(text, "  replicas: 2");
  client->change(uri, 2, range(replicasLine, 12, replicasLine, 13), "1");
  client->waitForDiagnostics(uri, 2);
  std::string edited = text;
  edited.replace(text.find("  replicas: 2") + 12, 1, "1");
  Planned again(path, edited);
  ASSERT_NE(again.plan, nullptr);
  got = lenses();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0]["command"]["title"], expectedLens(again.plan->runs[0], again.plan->runs[0].phases[0], true));
  EXPECT_NE(got[0]["command"]["title"], expectedLens(run, run.phases[0], true));

  // A mapping that does not fit: its verdict and peak, no throughput.
  const std::string small = std::string(edited).replace(edited.find("memory: 64 MB"), 13, "memory: 4 MB");
  client->replaceAll(uri, edited, small, 3);
  client->waitForDiagnostics(uri, 3);
  Planned tight(path, small);
  ASSERT_NE(tight.plan, nullptr);
  got = lenses();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_FALSE(tight.plan->runs[0].phases[0].fits);
  EXPECT_EQ(got[0]["command"]["title"], expectedLens(tight.plan->runs[0], tight.plan->runs[0].phases[0], true));
  EXPECT_EQ(got[0]["command"]["title"].get<std::string>().rfind("`tiny_pretrain.short`: does not fit · peak ", 0), 0u);

  // A text that does not check: no lenses.
  client->replaceAll(uri, small, "mapping broken for nothing on nowhere {\n", 4);
  client->waitForDiagnostics(uri, 4);
  EXPECT_EQ(lenses(), Json::array());
}

TEST_F(PlanViews, InlayHintsAfterEachStageWithItsMemoryAndFlopShare) {
  start();
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  const std::uint32_t first = lineOf(text, "ipu 0:"), second = lineOf(text, "ipu 1:");
  Json hints = result("textDocument/inlayHint", Json{{"textDocument", doc()}, {"range", range(0, 0, 200, 0)}});
  ASSERT_EQ(hints.size(), 2u) << hints.dump(2);
  Planned planned(path, text);
  ASSERT_NE(planned.plan, nullptr);
  const ir::PhasePlan& p = planned.plan->runs[0].phases[0];
  double total = 0, on[2] = {0, 0};
  for (const auto& l : p.layers) {
    total += l.forward.total() + l.backward.total();
    on[l.ipu] += l.forward.total() + l.backward.total();
  }
  const std::uint32_t lines[2] = {first, second};
  for (int i = 0; i < 2; ++i) {
    const ir::Ipu& ipu = p.ipus[i];
    ASSERT_EQ(ipu.ipu, i);
    EXPECT_EQ(hints[i]["position"], (Json{{"line", lines[i]}, {"character", lineText(text, lines[i]).size()}}));
    EXPECT_EQ(hints[i]["label"], check::formatBytes(ipu.memory.total()) + " (" + check::formatPercent(ipu.memory.total() / ipu.capacityBytes) +
                                     ") · " + check::formatPercent(on[i] / total) + " of FLOPs · `tiny_pretrain.short`");
    EXPECT_EQ(hints[i]["paddingLeft"], true);
  }
  EXPECT_EQ(hints[0]["label"].get<std::string>().rfind("7.9 MB (12%) · ", 0), 0u) << hints[0].dump();
  // Only those in the range asked for.
  hints = result("textDocument/inlayHint", Json{{"textDocument", doc()}, {"range", range(second, 0, second + 1, 0)}});
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_EQ(hints[0]["position"]["line"], second);
  EXPECT_EQ(client->request("textDocument/inlayHint", Json{{"textDocument", doc()}})["error"]["code"], -32602);
}

TEST_F(PlanViews, HoverOnAStageShowsItsMemoryByCategoryAndOnALayerItsFigures) {
  start();
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  Planned planned(path, text);
  ASSERT_NE(planned.plan, nullptr);
  const ir::PhasePlan& p = planned.plan->runs[0].phases[0];

  // `ipu 1:`: the IPU's memory by the plan's categories against its capacity.
  const std::uint32_t second = lineOf(text, "ipu 1:");
  Json h = hoverAt(second, 5);
  ASSERT_TRUE(h.is_object()) << h.dump();
  const std::string md = h["contents"]["value"];
  const ir::Ipu& ipu = p.ipus[1];
  EXPECT_NE(md.find("**IPU 1**: " + check::formatBytes(ipu.memory.total()) + " of 64.0 MB (7%), fits"), std::string::npos) << md;
  EXPECT_NE(md.find("| weights | " + check::formatBytes(ipu.memory.weights) + " | "), std::string::npos) << md;
  EXPECT_NE(md.find("| activations | " + check::formatBytes(ipu.memory.activations) + " | "), std::string::npos) << md;
  EXPECT_NE(md.find("| **total** | " + check::formatBytes(ipu.memory.total()) + " | 7% |"), std::string::npos) << md;
  EXPECT_NE(md.find("phase `tiny_pretrain.short` (the first of 2 that use `two_by_two`)"), std::string::npos) << md;

  // `encoder` in `ipu 1: encoder[1]`: the layers it puts there. The name's own hover comes first.
  const std::string stage = lineText(text, second);
  h = hoverAt(second, static_cast<std::uint32_t>(stage.find("encoder") + 2));
  const std::string layer = h["contents"]["value"];
  double params = 0, forward = 0;
  for (const auto& l : p.layers)
    if (l.name.rfind("encoder[1].", 0) == 0) params += l.params, forward += l.forward.total();
  EXPECT_NE(layer.find("**encoder**: 2 layers on IPU 1"), std::string::npos) << layer;
  char figure[64];
  std::snprintf(figure, sizeof figure, "| parameters | %.3g K |", params / 1000);
  EXPECT_NE(layer.find(figure), std::string::npos) << layer;
  EXPECT_NE(layer.find("| weights | " + check::formatBytes(params * 4) + " |"), std::string::npos) << layer;  // fp32
  EXPECT_NE(layer.find("| forward | "), std::string::npos);
  // On `embedding` of IPU 0: one layer.
  const std::uint32_t first = lineOf(text, "ipu 0:");
  h = hoverAt(first, static_cast<std::uint32_t>(lineText(text, first).find("embedding") + 1));
  EXPECT_NE(h["contents"]["value"].get<std::string>().find("**embedding**: 1 layer (`embedding`) on IPU 0"), std::string::npos)
      << h.dump();
}

TEST_F(PlanViews, HoverOnALayerDeclaredInAModel) {
  start();
  const std::string text =
      "import \"std/pods\"\n"
      "layer cell(width: int) {\n"
      "  op: \"cell\"\n"
      "  params: width * width\n"
      "  flops: { matmul: 2 * micro_batch * width * width }\n"
      "  activations: micro_batch * width\n"
      "  output: micro_batch * width\n"
      "}\n"
      "model net {\n"
      "  layer stem = cell(width: 4)\n"                // 9
      "  repeat 3 as blocks = cell(width: 8)\n"        // 10
      "}\n"
      "mapping one for net on POD4 {\n"
      "  pipeline: balanced(2)\n"
      "}\n"
      "training t {\n"
      "  mapping: one\n"
      "  optimizer: sgd()\n"
      "  phase p {\n"
      "    micro_batch: 2\n"
      "    gradient_accumulation: 1\n"
      "    steps: 1\n"
      "    lr: 0.1\n"
      "  }\n"
      "}\n";
  client->open(uri, text);
  Json d = client->waitForDiagnostics(uri, 1);
  Planned planned(path, text);
  ASSERT_NE(planned.plan, nullptr) << d.dump(2);
  const ir::PhasePlan& p = planned.plan->runs[0].phases[0];
  ASSERT_EQ(p.layers.size(), 4u);
  Json h = hoverAt(10, 15);  // `blocks`
  const std::string md = h["contents"]["value"];
  EXPECT_NE(md.find("**blocks** in phase `t.p`: 3 layers on IPUs 0, 1\n\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| parameters | 192 |"), std::string::npos) << md;  // 3 x 8 x 8
  EXPECT_NE(md.find("| forward | 768 FLOP per micro batch |"), std::string::npos) << md;  // 3 x 2 x 2 x 8 x 8
  h = hoverAt(9, 9);  // `stem`
  EXPECT_NE(h["contents"]["value"].get<std::string>().find("**stem** in phase `t.p`: 1 layer (`stem`) on IPU 0"), std::string::npos)
      << h.dump();
}

TEST_F(PlanViews, RangeFormattingChangesOnlyTheLinesOfTheRange) {
  start();
  const std::string messy = "let   a=1\nlet b   =  2\nlet c=3\n";
  client->open(uri, messy);
  client->waitForDiagnostics(uri, 1);
  auto formatRange = [&](Json r) {
    return result("textDocument/rangeFormatting", Json{{"textDocument", doc()}, {"range", std::move(r)}, {"options", Json{{"tabSize", 2}}}});
  };
  Json edits = formatRange(range(1, 3, 1, 5));
  ASSERT_EQ(edits.size(), 1u) << edits.dump();
  EXPECT_EQ(applyEdits(messy, edits), "let   a=1\nlet b = 2\nlet c=3\n");
  // Whole lines 0 and 1 selected (ending at the start of line 2): those two only.
  EXPECT_EQ(applyEdits(messy, formatRange(range(0, 0, 2, 0))), "let a = 1\nlet b = 2\nlet c=3\n");
  // Everything: ipu fmt's text.
  base::SourceMap sources;
  base::Diagnostics diags;
  syntax::Formatted f = syntax::formatSource(sources, sources.add(path, messy), diags);
  EXPECT_EQ(applyEdits(messy, formatRange(range(0, 0, 3, 0))), f.text);
  // Lines the formatter joins or adds are one edit where they touch the range.
  const std::string block = "let x = 1\nprecision p{compute:fp16\nloss_scale : 128}\nlet   y=2\n";
  client->replaceAll(uri, messy, block, 2);
  client->waitForDiagnostics(uri, 2);
  f = syntax::formatSource(sources, sources.add(path + "2", block), diags);
  ASSERT_EQ(f.outcome, syntax::Formatted::Outcome::Formatted);
  const std::string once = applyEdits(block, formatRange(range(1, 0, 1, 4)));
  EXPECT_EQ(once.substr(0, 10), "let x = 1\n");
  EXPECT_EQ(once.substr(once.size() - 10), "let   y=2\n");  // outside the range: kept
  client->replaceAll(uri, block, once, 3);
  client->waitForDiagnostics(uri, 3);
  EXPECT_EQ(applyEdits(once, formatRange(range(0, 0, 99, 0))), f.text);
  // Not parsing: null.
  client->replaceAll(uri, once, "let = \n", 4);
  EXPECT_TRUE(formatRange(range(0, 0, 0, 3)).is_null());
  EXPECT_EQ(client->request("textDocument/rangeFormatting", Json{{"textDocument", doc()}})["error"]["code"], -32602);
}

// The estimate of a phase is cached by its plan's content: moving the
// mapping down a line does not price it again; changing it does.
TEST(WorkspaceEstimates, CachedByThePhasePlanWithoutItsPlaces) {
  DocumentStore store;
  StandardLibraryFiles stdlib((fs::temp_directory_path() / "ipu_lsp_plan_test_stdlib").string());
  Workspace workspace(store, stdlib);
  const std::string text = readExample("tiny_bert.ipu");
  const std::string path = (fs::path(IPU_SOURCE_DIR) / "examples" / "tiny_bert_moved.ipu").string();
  auto planOf = [&](const std::string& t, long long version) {
    OpenDocument d{uriOf(path), path, version, std::make_shared<const std::string>(t)};
    auto a = workspace.analyse(d);
    return workspace.planOf(*a);
  };
  auto before = planOf(text, 1);
  auto moved = planOf("// a comment above everything\n\n" + text, 2);
  std::string edited = text;
  edited.replace(edited.find("replicas: 2"), 11, "replicas: 1");
  auto changed = planOf(edited, 3);
  ASSERT_TRUE(before && moved && changed);
  const ir::PhasePlan& a = before->runs[0].phases[0];
  const ir::PhasePlan& b = moved->runs[0].phases[0];
  EXPECT_NE(a.mapping.source.line, b.mapping.source.line);
  auto ea = workspace.estimateOf(a);
  EXPECT_EQ(workspace.estimateOf(b).get(), ea.get());  // the same entry: not priced again
  auto ec = workspace.estimateOf(changed->runs[0].phases[0]);
  EXPECT_NE(ec.get(), ea.get());
  EXPECT_TRUE(ea->estimate.ok);
  EXPECT_EQ(ea->estimate.samplesPerSecond, cost::estimatePhase(a).samplesPerSecond);
  EXPECT_NE(ec->estimate.samplesPerSecond, ea->estimate.samplesPerSecond);
}

TEST(Levers, TheirTextsAreReadBackFromTheHelpThatWritesThem) {
  const std::vector<plan::Lever> levers = {{"recompute: every_layer", 4.5e6}, {"replicated_tensor_sharding: [weights, optimizer_state]", 3e6}};
  EXPECT_EQ(plan::leverTextsIn(plan::leversHelp(levers)),
            (std::vector<std::string>{"recompute: every_layer", "replicated_tensor_sharding: [weights, optimizer_state]"}));
  EXPECT_TRUE(plan::leverTextsIn(plan::leversHelp({})).empty());
  EXPECT_TRUE(plan::leverTextsIn("did you mean `x`?").empty());
}

TEST_F(PlanViews, QuickFixesForAMappingThatDoesNotFitWriteTheLeversIntoTheMapping) {
  start();
  std::string text = readExample("tiny_bert.ipu");
  text.replace(text.find("memory: 64 MB"), 13, "memory: 6 MB");
  text.replace(text.find("  replicas: 2\n"), 14, "  replicas: 2\n  phases: 1\n");
  client->open(uri, text);
  Json published = client->waitForDiagnostics(uri, 1);
  Json memory;
  for (const auto& d : published["params"]["diagnostics"])
    if (d["code"] == "IPU2001" && memory.is_null()) memory = d;
  ASSERT_FALSE(memory.is_null()) << published.dump(2);
  EXPECT_NE(memory["message"].get<std::string>().find("\nhelp: it fits with `recompute: every_layer` (peak "), std::string::npos);
  Json actions = result("textDocument/codeAction",
                        Json{{"textDocument", doc()}, {"range", memory["range"]}, {"context", Json{{"diagnostics", Json::array({memory})}}}});
  ASSERT_EQ(actions.size(), 2u) << actions.dump(2);
  EXPECT_EQ(actions[0]["title"], "Write `recompute: every_layer` in mapping `two_by_two`");
  EXPECT_EQ(actions[0]["kind"], "quickfix");
  EXPECT_EQ(actions[0]["isPreferred"], true);
  EXPECT_EQ(actions[1]["title"], "Write `phases: 2` in mapping `two_by_two`");
  // A field not written yet is added above the closing brace; one written gets the new value.
  const std::string added = applyEdits(text, actions[0]["edit"]["changes"][uri]);
  EXPECT_NE(added.find("  replicas: 2\n  phases: 1\n  recompute: every_layer\n}\n"), std::string::npos) << added;
  const std::string replaced = applyEdits(text, actions[1]["edit"]["changes"][uri]);
  EXPECT_NE(replaced.find("  replicas: 2\n  phases: 2\n}\n"), std::string::npos) << replaced;
  // Applied, the mapping fits: no error is left.
  client->replaceAll(uri, text, added, 2);
  Json after = client->waitForDiagnostics(uri, 2);
  for (const auto& d : after["params"]["diagnostics"]) EXPECT_NE(d["severity"], 1) << d.dump();
}

TEST_F(PlanViews, CompletionOfLayerPathsInAPipelineStage) {
  start();
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  const std::uint32_t line = lineOf(text, "ipu 1: encoder[1]");
  const std::string stage = lineText(text, line);
  const std::uint32_t at = static_cast<std::uint32_t>(stage.find("encoder[1]"));
  // `ipu 1: enc` does not check (no such layer): the last plan's layers are offered.
  client->change(uri, 2, range(line, at, line, at + 10), "enc");
  client->waitForDiagnostics(uri, 2);
  Json items = result("textDocument/completion", Json{{"textDocument", doc()}, {"position", Json{{"line", line}, {"character", at + 3}}}})["items"];
  std::vector<std::string> labels;
  for (const auto& i : items) labels.push_back(i["label"]);
  EXPECT_EQ(labels, (std::vector<std::string>{"embedding", "encoder", "mlm_head", "nsp_head"}));
  EXPECT_EQ(items[1]["detail"], "4 layers: encoder[0].attention .. encoder[1].ffn");
  EXPECT_EQ(items[1]["textEdit"]["range"], range(line, at, line, at + 3));
  EXPECT_EQ(items[0]["detail"], "embedding");
  // Inside `encoder[`: its indices.
  client->change(uri, 3, range(line, at, line, at + 3), "encoder[");
  client->waitForDiagnostics(uri, 3);
  items = result("textDocument/completion", Json{{"textDocument", doc()}, {"position", Json{{"line", line}, {"character", at + 8}}}})["items"];
  ASSERT_EQ(items.size(), 2u) << items.dump(2);
  EXPECT_EQ(items[0]["label"], "0");
  EXPECT_EQ(items[1]["label"], "1");
  EXPECT_EQ(items[1]["detail"], "2 layers: encoder[1].attention .. encoder[1].ffn");
}

TEST_F(PlanViews, ApplyTheBestMappingFoundWritesWhatIpuSearchWrites) {
  const Json resolving{{"textDocument", Json{{"codeAction", Json{{"resolveSupport", Json{{"properties", Json::array({"edit"})}}}}}}}};
  start(resolving);
  std::string text = readExample("tiny_bert.ipu") + "\nmapping spare for tiny on tiny_pod {\n  replicas: 4\n}\n";
  { std::ofstream(path) << text; }
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  const std::uint32_t line = lineOf(text, "  replicas: 2");
  auto actionsAt = [&](std::uint32_t l, Json only) {
    Json params{{"textDocument", doc()}, {"range", range(l, 2, l, 2)}, {"context", Json{{"diagnostics", Json::array()}}}};
    if (!only.is_null()) params["context"]["only"] = std::move(only);
    return result("textDocument/codeAction", std::move(params));
  };
  Json actions = actionsAt(line, nullptr);
  ASSERT_EQ(actions.size(), 1u) << actions.dump(2);
  EXPECT_EQ(actions[0]["title"], "Apply the best mapping found by the search (`ipu search --apply`) to `two_by_two`");
  EXPECT_EQ(actions[0]["kind"], "refactor.rewrite");
  EXPECT_FALSE(actions[0].contains("edit"));  // the search runs when it is picked
  EXPECT_EQ(actions[0]["data"], (Json{{"uri", uri}, {"version", 1}, {"mapping", "two_by_two"}}));
  EXPECT_EQ(actionsAt(line, Json::array({"quickfix"})).size(), 0u);
  EXPECT_EQ(actionsAt(line, Json::array({"refactor"})).size(), 1u);
  EXPECT_EQ(actionsAt(lineOf(text, "mapping spare") + 1, nullptr).size(), 0u);  // no training uses it
  EXPECT_EQ(actionsAt(0, nullptr).size(), 0u);                                  // not in a mapping

  Json resolved = result("codeAction/resolve", actions[0]);
  ASSERT_TRUE(resolved.contains("edit")) << resolved.dump(2);
  EXPECT_EQ(resolved["title"], actions[0]["title"]);
  const std::string applied = applyEdits(text, resolved["edit"]["changes"][uri]);
  // The same text as `ipu search --write` of the same script.
  const std::string out = (dir / "written.ipu").string();
  ASSERT_EQ(std::system((std::string(IPU_BINARY) + " search '" + path + "' --write '" + out + "' > /dev/null 2>&1").c_str()), 0);
  std::ifstream in(out);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_EQ(applied, written.str());
  EXPECT_NE(applied.find("mapping two_by_two_searched for tiny on tiny_pod {"), std::string::npos);
  // Applied, it checks.
  client->replaceAll(uri, text, applied, 2);
  for (const auto& d : client->waitForDiagnostics(uri, 2)["params"]["diagnostics"]) EXPECT_NE(d["severity"], 1) << d.dump();
  // An action listed for an older version: ContentModified.
  EXPECT_EQ(client->request("codeAction/resolve", actions[0])["error"]["code"], -32801);
  EXPECT_EQ(client->request("codeAction/resolve", Json{{"title", "x"}})["error"]["code"], -32602);
}

TEST_F(PlanViews, NoBestMappingActionForAClientThatDoesNotResolveActions) {
  start();
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  client->waitForDiagnostics(uri, 1);
  const std::uint32_t line = lineOf(text, "  replicas: 2");
  Json actions = result("textDocument/codeAction", Json{{"textDocument", doc()}, {"range", range(line, 2, line, 2)},
                                                        {"context", Json{{"diagnostics", Json::array()}}}});
  EXPECT_EQ(actions, Json::array());
}

// ------------------------------------------------ the search's figure in the lens

namespace {

// What `ipu search` says of yours against the best, as the lens writes it
// (search_command.cpp: "yours is the best", or "the best is N.NNx faster at
// the likely ranges' lower ends"), from the engine's own search of the phase.
std::string searchFigure(const search::PhaseResult& r) {
  if (!r.error.empty() || r.top.empty() || !r.declared) return "";
  const search::Candidate &d = *r.declared, &best = r.top.front();
  if (best.split == search::Split::Declared || best.score >= d.score) return "search: yours is the best";
  char buf[64];
  std::snprintf(buf, sizeof buf, "search: %.2fx possible", d.rankedStep / best.rankedStep);
  return buf;
}

std::size_t withSearchFigure(const Json& lenses) {
  std::size_t n = 0;
  for (const auto& l : lenses) n += l["command"]["title"].get<std::string>().find(" · search: ") != std::string::npos;
  return n;
}

}  // namespace

struct PlanViewsSearchFigure : PlanViews {
  std::mutex mutex;
  std::vector<std::string> searched;  // run.phase of each background search, in order
  // A test may hold the first search in the hook until it sets `released`.
  std::condition_variable edited;
  bool released = true;
  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      released = true;
    }
    edited.notify_all();
    PlanViews::TearDown();
  }
  std::size_t searches() {
    std::lock_guard<std::mutex> lock(mutex);
    return searched.size();
  }
  void startSearching() {
    ServerOptions options;
    options.standardLibraryDirectory = stdlibDir;
    // Short, so the test does not wait long; the figure is awaited through
    // the refreshes, never by time.
    options.searchQuietPeriod = std::chrono::milliseconds(20);
    options.beforeSearch = [this](const std::string& run, const std::string& phase) {
      std::lock_guard<std::mutex> lock(mutex);
      searched.push_back(run + "." + phase);
    };
    client = std::make_unique<InProcessClient>(std::move(options));
    client->initialize(Json{{"workspace", Json{{"codeLens", Json{{"refreshSupport", true}}}}}});
  }
  // The lenses, asked again at each workspace/codeLens/refresh until `n` of
  // them show a search figure (or two minutes pass: a server that never
  // finds one fails the test instead of hanging it).
  Json lensesWithSearchFigures(std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    for (;;) {
      Json got = lenses();
      if (withSearchFigure(got) >= n || std::chrono::steady_clock::now() > deadline) return got;
      bool refreshed = false;
      for (const auto& m : client->takeNotifications()) refreshed = refreshed || m["method"] == "workspace/codeLens/refresh";
      while (!refreshed && std::chrono::steady_clock::now() < deadline)
        if (auto body = client->receiveBody(1.0)) {
          Json m = Json::parse(*body, nullptr, false);
          refreshed = m.is_object() && m.value("method", "") == "workspace/codeLens/refresh";
        }
    }
  }
};

TEST_F(PlanViewsSearchFigure, TheLensShowsWhatTheSearchFindsOnceEditsStopAndKeepsItAcrossAComment) {
  startSearching();
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  ASSERT_FALSE(client->waitForDiagnostics(uri, 1).is_null());
  Json got = lensesWithSearchFigures(2);
  ASSERT_EQ(got.size(), 2u) << got.dump(2);

  // The figure is what the engine's search gives for the same text...
  session::Session s;
  const check::CheckedProgram* program = s.check(s.addSource(path, text));
  ASSERT_NE(program, nullptr);
  ASSERT_EQ(program->runs.at(0).phases.size(), 2u);
  Planned planned(path, text);
  ASSERT_NE(planned.plan, nullptr);
  std::vector<std::string> figures;
  for (int i = 0; i < 2; ++i) {
    const search::PhaseResult r = search::searchPhase(program->runs[0].phases[i], s.checker()->evaluator(), s.sources(), search::Options{});
    figures.push_back(searchFigure(r));
    ASSERT_FALSE(figures.back().empty());
    EXPECT_EQ(got[i]["command"]["title"], expectedLens(planned.plan->runs[0], planned.plan->runs[0].phases[i], true) + " · " + figures.back());
  }
  // ... and what `ipu search` prints of the script's mapping against the best.
  std::ofstream(path) << text;  // the CLI reads the file the editor has open unsaved
  const std::string report = (dir / "search.txt").string();
  ASSERT_EQ(std::system((std::string(IPU_BINARY) + " search '" + path + "' --color never > '" + report + "' 2>&1").c_str()), 0);
  std::ifstream in(report);
  std::stringstream printed;
  printed << in.rdbuf();
  const std::string out = printed.str();
  const std::regex faster("the best is ([0-9.]+)x faster at the likely ranges' lower ends");
  std::vector<std::string> cli;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), faster); it != std::sregex_iterator(); ++it)
    cli.push_back("search: " + (*it)[1].str() + "x possible");
  EXPECT_EQ(cli, figures) << out;
  // One search per phase, each once, though the lenses were asked for more than once.
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(searched, (std::vector<std::string>{"tiny_pretrain.short", "tiny_pretrain.long"}));
  }

  // A comment above everything: every line moves, no plan changes; the
  // figures are there at once and nothing is searched again.
  client->change(uri, 2, range(0, 0, 0, 0), "// the plans do not see this\n");
  ASSERT_FALSE(client->waitForDiagnostics(uri, 2).is_null());
  got = lenses();
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i)
    EXPECT_NE(got[i]["command"]["title"].get<std::string>().find(" · " + figures[i]), std::string::npos) << got[i].dump();
  // Any search asked for would have been after this check; a later request
  // is answered after it (the worker's order), and still none was asked.
  client->change(uri, 3, range(0, 0, 0, 0), "// another\n");
  ASSERT_FALSE(client->waitForDiagnostics(uri, 3).is_null());
  EXPECT_EQ(withSearchFigure(lenses()), 2u);
  EXPECT_EQ(searches(), 2u);

  // An edit of the mapping: new plans, so no figure until they are searched, once each.
  const std::string now = "// another\n// the plans do not see this\n" + text;
  const std::uint32_t replicasLine = lineOf(now, "  replicas: 2");
  client->change(uri, 4, range(replicasLine, 12, replicasLine, 13), "1");
  ASSERT_FALSE(client->waitForDiagnostics(uri, 4).is_null());
  EXPECT_EQ(withSearchFigure(lenses()), 0u);
  got = lensesWithSearchFigures(2);
  EXPECT_EQ(withSearchFigure(got), 2u) << got.dump(2);
  EXPECT_EQ(searches(), 4u);
}

TEST_F(PlanViewsSearchFigure, AnEditStopsTheSearchOfItsDocumentAndItsFigureIsDropped) {
  // The first search is held in the hook until the document has changed.
  std::mutex& held = mutex;
  released = false;
  ServerOptions options;
  options.standardLibraryDirectory = stdlibDir;
  options.searchQuietPeriod = std::chrono::milliseconds(20);
  options.beforeSearch = [this](const std::string& run, const std::string& phase) {
    std::unique_lock<std::mutex> lock(mutex);
    searched.push_back(run + "." + phase);
    if (searched.size() == 1) edited.wait_for(lock, std::chrono::minutes(2), [this] { return released; });
  };
  client = std::make_unique<InProcessClient>(std::move(options));
  client->initialize(Json{{"workspace", Json{{"codeLens", Json{{"refreshSupport", true}}}}}});
  auto count = [&] {
    std::lock_guard<std::mutex> lock(held);
    return searched.size();
  };
  const std::string text = readExample("tiny_bert.ipu");
  client->open(uri, text);
  ASSERT_FALSE(client->waitForDiagnostics(uri, 1).is_null());
  EXPECT_EQ(withSearchFigure(lenses()), 0u);
  // Wait until the search thread holds the first phase's search.
  for (int i = 0; i < 1200 && count() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(count(), 1u);
  // The same plans under another text: the held search stops, its figure is not kept.
  client->change(uri, 2, range(0, 0, 0, 0), "// edited while searching\n");
  ASSERT_FALSE(client->waitForDiagnostics(uri, 2).is_null());
  {
    std::lock_guard<std::mutex> lock(held);
    released = true;
  }
  edited.notify_all();
  // The lenses of the new version ask again: both phases are searched then, the first a second time.
  Json got = lensesWithSearchFigures(2);
  EXPECT_EQ(withSearchFigure(got), 2u) << got.dump(2);
  std::lock_guard<std::mutex> lock(held);
  EXPECT_EQ(searched, (std::vector<std::string>{"tiny_pretrain.short", "tiny_pretrain.short", "tiny_pretrain.long"}));
}
