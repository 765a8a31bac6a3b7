// The kernel table (runtime/runnable) against the kernels it stands for: every
// row builds a kernel from attributes the table accepts, with the head flag
// the table gives, and every requirement of every row, when a layer breaks it,
// is the reason both the table and makeKernel give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "runtime/emulator/kernels/kernel.h"
#include "runtime/runnable/runnable.h"

namespace ipu::emu {
namespace {

using runnable::Check;

struct Case {
  ir::Layer layer;
  long long seqLen = 16;
};

void setNumber(ir::Layer& l, const std::string& key, double v) {
  for (auto& a : l.attributes)
    if (a.name == key) {
      a = {key, v, ""};
      return;
    }
  l.attributes.push_back({key, v, ""});
}
void setText(ir::Layer& l, const std::string& key, const std::string& v) {
  for (auto& a : l.attributes)
    if (a.name == key) {
      a = {key, 0, v};
      return;
    }
  l.attributes.push_back({key, 0, v});
}

// A layer of every op with a kernel, with attributes its kernel can run.
Case valid(ir::LayerOp op) {
  Case c;
  c.layer.name = "x";
  c.layer.op = op;
  c.layer.source = {"t.ipu", 3, 5};
  const std::map<ir::LayerOp, std::vector<std::pair<const char*, double>>> numbers = {
      {ir::LayerOp::Embedding, {{"vocab", 32}, {"hidden", 8}, {"positions", 16}, {"seq", 16}}},
      {ir::LayerOp::Attention, {{"hidden", 8}, {"heads", 2}, {"seq", 16}}},
      {ir::LayerOp::Ffn, {{"hidden", 8}, {"intermediate", 16}}},
      {ir::LayerOp::MlmHead, {{"hidden", 8}, {"vocab", 32}}},
      {ir::LayerOp::PooledClassifier, {{"hidden", 8}, {"classes", 2}}},
      {ir::LayerOp::LmHead, {{"hidden", 8}, {"vocab", 32}}},
      {ir::LayerOp::Dense, {{"inputs", 8}, {"outputs", 4}}},
      {ir::LayerOp::SoftmaxLoss, {{"classes", 4}}},
      {ir::LayerOp::ConvModule, {{"hidden", 8}, {"kernel", 3}, {"groups", 2}, {"seq", 16}}},
      {ir::LayerOp::GroupedFfn, {{"hidden", 8}, {"intermediate", 16}, {"groups", 2}, {"seq", 16}}},
      {ir::LayerOp::LayerNorm, {{"hidden", 8}}},
      {ir::LayerOp::ConvStem, {{"channels", 3}, {"out", 8}, {"size", 16}, {"norm_groups", 4}}},
      {ir::LayerOp::Bottleneck, {{"inputs", 8}, {"mid", 4}, {"out", 8}, {"stride", 1}, {"size", 8}, {"norm_groups", 2}}},
      {ir::LayerOp::BasicBlock, {{"inputs", 8}, {"out", 8}, {"stride", 2}, {"size", 8}, {"norm_groups", 2}}},
      {ir::LayerOp::PooledFc, {{"inputs", 8}, {"classes", 4}, {"size", 4}}},
      {ir::LayerOp::PatchEmbedding, {{"patch", 4}, {"channels", 3}, {"hidden", 8}, {"image", 12}}},
      {ir::LayerOp::TokenClassifier, {{"hidden", 8}, {"classes", 4}, {"seq", 16}}},
  };
  for (const auto& [k, v] : numbers.at(op)) setNumber(c.layer, k, v);
  if (op == ir::LayerOp::MlmHead || op == ir::LayerOp::LmHead) c.layer.tiedTo = "embedding";
  if (op == ir::LayerOp::ConvStem || op == ir::LayerOp::Bottleneck || op == ir::LayerOp::BasicBlock)
    setText(c.layer, "norm", "group");
  if (op == ir::LayerOp::Attention || op == ir::LayerOp::Ffn) setText(c.layer, "norm", "pre");
  if (op == ir::LayerOp::PatchEmbedding) c.seqLen = 10;  // (12 / 4)^2 patches and the class token
  return c;
}

// The longest text of a message template between its placeholders: what the
// problem of that requirement says whatever the values.
std::string literal(const char* pattern) {
  std::string best, cur;
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (*p == '{') {
      best = cur.size() > best.size() ? cur : best;
      cur.clear();
      p = std::strchr(p, '}');
      continue;
    }
    cur += *p;
  }
  return cur.size() > best.size() ? cur : best;
}

TEST(KernelTable, EveryRowBuildsItsKernelFromAttributesItAccepts) {
  for (const auto& row : runnable::kernels()) {
    const Case c = valid(row.op);
    const int shards = 2;
    EXPECT_FALSE(runnable::layerProblem(c.layer, shards, c.seqLen).has_value())
        << ir::nameOf(row.op) << ": " << runnable::layerProblem(c.layer, shards, c.seqLen)->message;
    auto k = makeKernel(c.layer, shards, c.seqLen);
    ASSERT_TRUE(k.ok()) << ir::nameOf(row.op) << ": " << k.error().message;
    EXPECT_EQ(k.value()->isHead(), row.head) << ir::nameOf(row.op);
    EXPECT_TRUE(hasKernel(row.op));
  }
}

TEST(KernelTable, OpsWithoutARowHaveNoKernel) {
  for (ir::LayerOp op : ir::kLayerOps) {
    if (runnable::kernelFor(op) != nullptr) continue;
    EXPECT_FALSE(hasKernel(op)) << ir::nameOf(op);
    ir::Layer l;
    l.name = "x";
    l.op = op;
    l.otherOp = "fft";
    auto k = makeKernel(l, 1, 16);
    ASSERT_FALSE(k.ok());
    EXPECT_EQ(k.error().code, "IPU5002");
    EXPECT_EQ(k.error().message, runnable::layerProblem(l, 1, 16)->message);
  }
}

// Breaks requirement `r` of a valid layer and returns the shards and sequence
// length to ask with.
void breakIt(const runnable::Requirement& r, Case& c, int& shards) {
  ir::Layer& l = c.layer;
  const auto value = [&](const char* k) { return runnable::number(l, k); };
  switch (r.check) {
    case Check::Positive:
    case Check::ImageSize: setNumber(l, r.keys.back(), 0); break;
    case Check::OneOf: setText(l, r.keys[0], "sideways"); break;
    case Check::Divides: setNumber(l, r.keys[0], value(r.keys[1]) + 1); break;
    case Check::AtLeast: setNumber(l, r.keys[0], r.limit - 1); break;
    case Check::SequenceLength: setNumber(l, r.keys[0], static_cast<double>(c.seqLen + 1)); break;
    case Check::CoversSequence: setNumber(l, r.keys[0], static_cast<double>(c.seqLen - 1)); break;
    case Check::SplitsOverShard: shards = static_cast<int>(value(r.keys[0])) + 1; break;
    case Check::Tied: l.tiedTo.clear(); break;
    case Check::ImageActivations: setNumber(l, "size", 10000); break;
    case Check::NormGroups: setNumber(l, "norm_groups", 2.5); break;
    case Check::NormGroupsDivide: setNumber(l, "norm_groups", value(r.keys[0]) + 1); break;
    case Check::PatchTokens: c.seqLen += 1; break;
  }
}

TEST(KernelTable, EveryRequirementIsTheReasonTableAndKernelGive) {
  int checked = 0;
  for (const auto& row : runnable::kernels())
    for (const auto& r : row.requirements) {
      Case c = valid(row.op);
      int shards = 2;
      breakIt(r, c, shards);
      const auto problem = runnable::layerProblem(c.layer, shards, c.seqLen);
      ASSERT_TRUE(problem.has_value()) << ir::nameOf(row.op) << ": requirement `" << r.message << "` not enforced";
      EXPECT_EQ(problem->code, "IPU5002");
      EXPECT_NE(problem->message.find(literal(r.message)), std::string::npos)
          << ir::nameOf(row.op) << ": broke `" << r.message << "`, got: " << problem->message;
      auto k = makeKernel(c.layer, shards, c.seqLen);
      ASSERT_FALSE(k.ok()) << ir::nameOf(row.op) << ": the kernel was built against `" << r.message << "`";
      EXPECT_EQ(k.error().code, problem->code);
      EXPECT_EQ(k.error().message, problem->message);
      EXPECT_EQ(k.error().help, problem->help);
      EXPECT_EQ(k.error().where.line, problem->where.line);
      ++checked;
    }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace ipu::emu
