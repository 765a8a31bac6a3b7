// The plan's content hash (runtime/ir/plan_hash.h): equal plans hash equal,
// however their documents are written; any change of any value changes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "runtime/ir/json.h"
#include "runtime/ir/plan_hash.h"
#include "runtime/ir/sha256.h"
#include "tests/unit/test_support.h"

namespace ipu {
namespace {

using Doc = nlohmann::ordered_json;

ir::RunPlan examplePlan(const std::string& name) {
  auto o = test::runFile(std::string(IPU_SOURCE_DIR) + "/examples/" + name);
  EXPECT_NE(o.plan, nullptr) << name;
  EXPECT_FALSE(o.plan == nullptr || o.plan->runs.empty());
  return o.plan != nullptr && !o.plan->runs.empty() ? o.plan->runs[0] : ir::RunPlan{};
}

Doc documentOf(const ir::RunPlan& run) { return ir::toJson(ir::ExecutionPlan{{run}}); }

// Every leaf of the document, as a path of object keys and array indices.
void leaves(const Doc& j, std::vector<std::string>& path, std::vector<std::vector<std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      path.push_back(it.key());
      leaves(it.value(), path, out);
      path.pop_back();
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      path.push_back(std::to_string(i));
      leaves(j[i], path, out);
      path.pop_back();
    }
  }
  if (!j.is_structured() || j.empty()) out.push_back(path);
}

Doc& at(Doc& j, const std::vector<std::string>& path) {
  Doc* cur = &j;
  for (const auto& part : path) cur = cur->is_array() ? &(*cur)[std::stoul(part)] : &(*cur)[part];
  return *cur;
}

// Another value for a leaf, whatever its type.
void change(Doc& leaf) {
  if (leaf.is_boolean()) leaf = !leaf.get<bool>();
  else if (leaf.is_number_float()) leaf = leaf.get<double>() + 1 + std::fabs(leaf.get<double>());
  else if (leaf.is_number()) leaf = leaf.get<long long>() + 1;
  else if (leaf.is_string()) leaf = leaf.get<std::string>() + "x";
  else if (leaf.is_null()) leaf = 0;
  else if (leaf.is_array()) leaf.push_back(0);
  else leaf["extra"] = 0;  // an empty object
}

// Objects with their keys in reverse order, all the way down.
Doc reversed(const Doc& j) {
  if (j.is_array()) {
    Doc out = Doc::array();
    for (const auto& item : j) out.push_back(reversed(item));
    return out;
  }
  if (!j.is_object()) return j;
  std::vector<std::pair<std::string, Doc>> members;
  for (auto it = j.begin(); it != j.end(); ++it) members.emplace_back(it.key(), reversed(it.value()));
  std::reverse(members.begin(), members.end());
  Doc out = Doc::object();
  for (auto& [k, v] : members) out[k] = std::move(v);
  return out;
}

TEST(PlanHash, EqualPlansHashEqual) {
  for (const char* name : {"tiny_bert.ipu", "bert_large_pod64.ipu", "gpt3_175b_pod256.ipu"}) {
    const ir::RunPlan a = examplePlan(name), again = examplePlan(name);
    EXPECT_EQ(ir::planHash(a), ir::planHash(again)) << name;
    EXPECT_EQ(ir::planHash(a).size(), 16u);
    const Doc doc = documentOf(a);
    EXPECT_EQ(ir::contentHash(doc), ir::planHash(a));
    // The plan.json a run directory keeps, read back: the same plan, although
    // its numbers were written with ten digits and in another type.
    EXPECT_EQ(ir::contentHash(Doc::parse(ir::dumpJson(doc))), ir::planHash(a)) << name;
    EXPECT_EQ(ir::contentHash(Doc::parse(ir::dumpJson(doc, -1))), ir::planHash(a)) << name;
    // Key order and spelling of numbers are not content.
    EXPECT_EQ(ir::contentHash(reversed(doc)), ir::planHash(a)) << name;
  }
  Doc three = Doc::object(), threePointZero = Doc::object();
  three["x"] = 3;
  threePointZero["x"] = 3.0;
  EXPECT_EQ(ir::contentHash(three), ir::contentHash(threePointZero));
}

TEST(PlanHash, AnyChangeOfAnyValueChangesIt) {
  const Doc doc = documentOf(examplePlan("tiny_bert.ipu"));
  const std::string base = ir::contentHash(doc);
  std::vector<std::string> path;
  std::vector<std::vector<std::string>> all;
  leaves(doc, path, all);
  ASSERT_GT(all.size(), 200u);  // the plan of a two-phase run has many values
  std::set<std::string> seen{base};
  for (const auto& p : all) {
    Doc changed = doc;
    change(at(changed, p));
    const std::string h = ir::contentHash(changed);
    std::string where;
    for (const auto& part : p) where += "." + part;
    EXPECT_NE(h, base) << where;
    seen.insert(h);
  }
  EXPECT_EQ(seen.size(), all.size() + 1);  // and no two changes collide
  // Structure counts too: a value moved to another key, a member removed.
  Doc renamed = doc;
  renamed["runs"][0]["name_"] = renamed["runs"][0]["name"];
  renamed["runs"][0].erase("name");
  EXPECT_NE(ir::contentHash(renamed), base);
  Doc removed = doc;
  removed["runs"][0]["phases"].erase(1);
  EXPECT_NE(ir::contentHash(removed), base);
  // A string is not the number it spells, nor null the number 0.
  Doc a = Doc::object(), b = Doc::object(), c = Doc::object();
  a["x"] = "1";
  b["x"] = 1;
  c["x"] = nullptr;
  EXPECT_NE(ir::contentHash(a), ir::contentHash(b));
  b["x"] = 0;
  EXPECT_NE(ir::contentHash(b), ir::contentHash(c));
}

// Values of the plan itself (not only of its document): each is another plan.
TEST(PlanHash, ChangesOfThePlanChangeIt) {
  const ir::RunPlan base = examplePlan("tiny_bert.ipu");
  const std::string h = ir::planHash(base);
  std::vector<std::function<void(ir::RunPlan&)>> edits{
      [](ir::RunPlan& r) { r.seed += 1; },
      [](ir::RunPlan& r) { r.name += "x"; },
      [](ir::RunPlan& r) { r.phases[0].mapping.replicas *= 2; },
      [](ir::RunPlan& r) { r.phases[0].lr.peak *= 1.01; },
      [](ir::RunPlan& r) { r.phases[1].seqLen += 1; },
      [](ir::RunPlan& r) { r.phases[0].layers[0].name += "x"; },
      [](ir::RunPlan& r) { r.phases.pop_back(); },
      [](ir::RunPlan& r) { r.phases[0].software = "poptorch 3.3"; },
      // The hardware it was planned for, figures the estimate reads.
      [](ir::RunPlan& r) { r.phases[0].pod.machine.chip.exchangeBandwidth *= 1.1; },
      [](ir::RunPlan& r) { r.phases[0].pod.machine.chip.ipuLinks += 1; },
      [](ir::RunPlan& r) { r.phases[0].pod.machine.hostBandwidth *= 2; },
      [](ir::RunPlan& r) { r.phases[0].pod.machine.streamingBandwidth *= 2; },
      [](ir::RunPlan& r) { r.phases[0].pod.machinesPerRack += 1; },
      [](ir::RunPlan& r) { r.phases[0].pod.machine.hostCores += 1; },
      [](ir::RunPlan& r) { r.phases[0].pod.machine.hostStorageBandwidth += 1e9; },
      // The dataset: what a sample counts for and what the host does for it.
      [](ir::RunPlan& r) { r.phases[0].dataset.sequencesPerPack += 0.5; },
      [](ir::RunPlan& r) { r.phases[0].dataset.maskProbability += 0.05; },
      [](ir::RunPlan& r) { r.phases[0].dataset.hostWorkSeconds += 0.001; },
      [](ir::RunPlan& r) { r.phases[0].dataset.sampleBytes += 1000; },
      [](ir::RunPlan& r) {
        auto& c = r.phases[0].pod.machine.chip.calibration;
        c.present = true;
        c.matmulEfficiency += 0.01;
      },
  };
  for (std::size_t i = 0; i < edits.size(); ++i) {
    ir::RunPlan changed = base;
    edits[i](changed);
    EXPECT_NE(ir::planHash(changed), h) << "edit " << i;
  }
}

// SHA-256 (runtime/ir/sha256.h), the key of cached search results, against
// the test vectors of FIPS 180-4 and NIST's example of a million `a`s, fed
// in pieces that straddle its 64-byte blocks.
TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(ir::sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ir::sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ir::sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 55, 56 and 64 bytes: the padding's edge cases (the length fits, does not fit, a whole block).
  EXPECT_EQ(ir::sha256Hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(ir::sha256Hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(ir::sha256Hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  ir::Sha256 h;
  const std::string a(1000000, 'a');
  for (std::size_t i = 0; i < a.size(); i += 7) h.add(std::string_view(a).substr(i, 7));
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace ipu
