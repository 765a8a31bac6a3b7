// What a record keeps of a plan: parameters flattened from the resolved plan
// (not the script's text), and a plan hash that is equal exactly when the
// plans are (and equal to the hash of the plan.json a run directory keeps,
// which `ipu runs import` relies on).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "interpreter/runner/run_parameters.h"
#include "interpreter/session/session.h"

namespace ipu::runner {
namespace {

std::string exampleText() {
  std::ifstream in(std::string(IPU_SOURCE_DIR) + "/examples/tiny_bert.ipu");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ir::RunPlan planOf(const std::string& text) {
  session::Session s;
  auto file = s.addSource(std::string(IPU_SOURCE_DIR) + "/examples/tiny_variant.ipu", text);
  const ir::ExecutionPlan* plan = s.plan(file, true);
  EXPECT_NE(plan, nullptr);
  EXPECT_FALSE(s.diagnostics().hasErrors());
  return plan != nullptr && !plan->runs.empty() ? plan->runs[0] : ir::RunPlan{};
}

std::string replaceOnce(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(RunParameters, ResolvedValuesFlattenedPerPhaseAndShared) {
  auto p = runParameters(planOf(exampleText()));
  EXPECT_EQ(p.at("training"), "tiny_pretrain");
  EXPECT_EQ(p.at("seed"), "1234");
  EXPECT_EQ(p.at("phases"), "2");
  // Shared by both phases: also under the plain name.
  EXPECT_EQ(p.at("mapping.replicas"), "2");
  EXPECT_EQ(p.at("mapping.pipeline_ipus"), "2");
  EXPECT_EQ(p.at("optimizer.kind"), "lamb");
  EXPECT_EQ(p.at("optimizer.weight_decay"), "0.01");
  EXPECT_EQ(p.at("optimizer.beta1"), "0.9");  // not in the script: the optimizer's default, resolved
  EXPECT_EQ(p.at("precision.compute"), "fp32");
  // Different per phase: only under phases.<phase>.
  EXPECT_EQ(p.at("phases.short.lr.peak"), "0.02");
  EXPECT_EQ(p.at("phases.long.lr.peak"), "0.001");
  EXPECT_EQ(p.at("phases.short.seq_len"), "32");
  EXPECT_EQ(p.at("phases.long.batch.micro_batch"), "2");
  EXPECT_EQ(p.count("lr.peak"), 0u);
  EXPECT_EQ(p.count("seq_len"), 0u);
  // 8 x 2 x 2 (micro batch x accumulation x replicas) in the short phase.
  EXPECT_EQ(p.at("phases.short.batch.global_batch"), "16");
}

TEST(RunParameters, ThePlanHashFollowsThePlan) {
  const std::string text = exampleText();
  const ir::RunPlan a = planOf(text), again = planOf(text);
  EXPECT_EQ(planHash(a), planHash(again));
  EXPECT_EQ(planHash(a).size(), 16u);
  // A comment at the end changes the script, not the plan. (The plan holds
  // the source position of every layer, so moving lines is another plan.)
  EXPECT_EQ(planHash(planOf(text + "\n// another comment\n")), planHash(a));
  EXPECT_NE(planHash(planOf("// a new first line\n" + text)), planHash(a));
  // Another learning rate is another plan.
  const ir::RunPlan b = planOf(replaceOnce(text, "lr: 0.02 warmup", "lr: 0.01 warmup"));
  EXPECT_NE(planHash(b), planHash(a));
  EXPECT_EQ(runParameters(b).at("phases.short.lr.peak"), "0.01");
}

}  // namespace
}  // namespace ipu::runner
