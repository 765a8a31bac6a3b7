// The name tables of the plan's closed kinds (runtime/ir/kinds.h): every
// enumerator has a distinct name that reads back as itself, names the tables
// do not know are refused, and the standard library uses only ops it knows.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "runtime/ir/execution_plan.h"
#include "runtime/ir/kinds.h"

using namespace ipu;

namespace {

// Every enumerator of `all` reads back from its name, and the names are distinct.
template <class E, std::size_t N, class FromName>
void roundTrips(const E (&all)[N], FromName fromName) {
  std::set<std::string> names;
  for (E e : all) {
    const std::string n = ir::nameOf(e);
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(names.insert(n).second) << "two enumerators are named " << n;
    const auto back = fromName(n);
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, e) << n;
  }
}

template <class FromName>
void refuses(FromName fromName) {
  for (const char* bad : {"", "unknown", " sgd", "SGD", "Adam", "constant ", "dense\n", "other"})
    EXPECT_FALSE(fromName(bad).has_value()) << '"' << bad << '"';
}

}  // namespace

TEST(Kinds, EveryEnumeratorRoundTrips) {
  roundTrips(ir::kPipelineKinds, ir::pipelineKindFromName);
  roundTrips(ir::kLossScaleKinds, ir::lossScaleKindFromName);
  roundTrips(ir::kOptimizerKinds, ir::optimizerKindFromName);
  roundTrips(ir::kParamClasses, ir::paramClassFromName);
  roundTrips(ir::kLrDecays, ir::lrDecayFromName);
  roundTrips(ir::kDatasetKinds, ir::datasetKindFromName);
  roundTrips(ir::kDerivedBatches, ir::derivedBatchFromName);
  roundTrips(ir::kActivations, ir::activationFromName);
  roundTrips(ir::kNormPositions, ir::normPositionFromName);
  std::set<std::string> recomputes;
  for (ir::Recompute r : ir::kRecomputes) {
    EXPECT_TRUE(recomputes.insert(ir::name(r)).second);
    EXPECT_EQ(ir::recomputeFromName(ir::name(r)), r);
  }
}

TEST(Kinds, LayerOpsRoundTripExceptOther) {
  std::set<std::string> names;
  for (ir::LayerOp op : ir::kLayerOps) {
    const std::string n = ir::nameOf(op);
    EXPECT_TRUE(names.insert(n).second) << n;
    if (op == ir::LayerOp::Other) {
      EXPECT_FALSE(ir::layerOpFromName(n).has_value()) << "Other has no name of its own";
      continue;
    }
    ASSERT_TRUE(ir::layerOpFromName(n).has_value()) << n;
    EXPECT_EQ(*ir::layerOpFromName(n), op) << n;
  }
}

TEST(Kinds, UnknownNamesAreRefused) {
  refuses(ir::pipelineKindFromName);
  refuses(ir::lossScaleKindFromName);
  refuses(ir::optimizerKindFromName);
  refuses(ir::paramClassFromName);
  refuses(ir::lrDecayFromName);
  refuses(ir::datasetKindFromName);
  refuses(ir::derivedBatchFromName);
  refuses(ir::activationFromName);
  refuses(ir::normPositionFromName);
  refuses(ir::layerOpFromName);
  refuses(ir::recomputeFromName);
}

TEST(Kinds, ActivationAliasesReadAsNone) {
  EXPECT_EQ(ir::activationFromName("linear"), ir::Activation::None);
  EXPECT_EQ(ir::activationFromName("identity"), ir::Activation::None);
  EXPECT_STREQ(ir::nameOf(ir::Activation::None), "none");
}

// A user's op keeps its name, whatever it is, and writes it back.
TEST(Kinds, UserOpKeepsItsName) {
  ir::Layer l;
  for (const char* name : {"fft", "my_dense", "other", ""}) {
    ir::setOpName(l, name);
    EXPECT_EQ(l.op, ir::LayerOp::Other) << name;
    EXPECT_EQ(ir::opName(l), name);
  }
  ir::setOpName(l, "attention");
  EXPECT_EQ(l.op, ir::LayerOp::Attention);
  EXPECT_EQ(l.otherOp, "");
  EXPECT_EQ(ir::opName(l), "attention");
}

// The table knows every op the standard library declares, so none of them is
// a user's op by accident of spelling.
TEST(Kinds, StandardLibraryOpsAreKnown) {
  std::ifstream in(std::string(IPU_SOURCE_DIR) + "/stdlib/layers.ipu");
  ASSERT_TRUE(in) << "stdlib/layers.ipu";
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::regex op("\\bop:\\s*\"([a-z_0-9]+)\"");
  int count = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), op); it != std::sregex_iterator(); ++it, ++count)
    EXPECT_TRUE(ir::layerOpFromName((*it)[1].str()).has_value()) << (*it)[1].str();
  EXPECT_EQ(count, static_cast<int>(std::size(ir::kLayerOps)) - 1) << "one `op:` per known op";
}
