// Image models' data (runtime/emulator/data.h, image_file.h): synthetic
// images are a pure function of the seed and the sample index, have the
// documented layout and a learnable class structure; image files round-trip,
// feed the documented pixel normalisation, and damaged files are refused with
// IPU5011 and the byte where they go wrong, never a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <unistd.h>

#include "runtime/emulator/image_file.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

namespace fs = std::filesystem;

std::string script(const std::string& model, const std::string& phaseExtra = "", const std::string& dataset = "") {
  return "import \"std/pods\"\nimport \"std/models/resnet\"\n"
         "model tiny = " + model + "\n"
         "mapping m for tiny on POD4 { replicas: 2 }\n" + dataset +
         "training t {\n mapping: m\n optimizer: momentum(momentum: 0.9)\n seed: 3\n" +
         (dataset.empty() ? "" : " dataset: pics\n") +
         " phase p { image_size: 32, micro_batch: 4, gradient_accumulation: 2, steps: 2, lr: 0.01" + phaseExtra + " }\n}\n";
}

const char* kTiny = "resnet(blocks: [1, 1, 1, 1], width: 4, classes: 6, block: \"basic\", norm: \"group\", norm_groups: 2)";

TEST(Images, SyntheticImagesAreAFunctionOfSeedAndIndex) {
  const ir::PhasePlan ph = phaseOf(script(kTiny, ", label_smoothing: 0.2"));
  auto a = trainerFor(ph, 1, 7), b = trainerFor(ph, 2, 7), c = trainerFor(ph, 1, 8);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->model().family(), emu::Family::Image);
  const auto ba = a->batches(3), bb = b->batches(3), bc = c->batches(3), other = a->batches(4);
  ASSERT_EQ(ba.size(), 4u);  // 2 replicas x 2 micro batches
  bool seedMatters = false, stepMatters = false;
  for (std::size_t i = 0; i < ba.size(); ++i) {
    EXPECT_EQ(ba[i].features.rows(), 4);
    EXPECT_EQ(ba[i].features.cols(), 3 * 32 * 32);
    EXPECT_TRUE(ba[i].features == bb[i].features);
    EXPECT_EQ(ba[i].classLabel, bb[i].classLabel);
    EXPECT_EQ(ba[i].classCount, 16.0);   // the global batch
    EXPECT_EQ(ba[i].labelSmoothing, 0.2);
    seedMatters |= !(ba[i].features == bc[i].features);
    stepMatters |= !(ba[i].features == other[i].features);
  }
  EXPECT_TRUE(seedMatters);
  EXPECT_TRUE(stepMatters);
}

// Images of one class look alike: each is nearer (on average) to its class's
// mean image than to any other class's, so there is something to learn. Every
// class occurs, in roughly equal numbers.
TEST(Images, SyntheticClassesAreLearnable) {
  const ir::PhasePlan ph = phaseOf(script(kTiny));
  auto t = trainerFor(ph);
  ASSERT_TRUE(t);
  std::map<int, std::vector<emu::Mat>> byClass;
  for (long long s = 0; s < 30; ++s)
    for (const auto& mb : t->batches(s))
      for (int i = 0; i < mb.samples; ++i) byClass[mb.classLabel[static_cast<std::size_t>(i)]].push_back(mb.features.row(i));
  ASSERT_EQ(byClass.size(), 6u);
  std::map<int, emu::Mat> mean;
  for (auto& [k, v] : byClass) {
    EXPECT_GT(v.size(), 50u) << k;
    emu::Mat m = emu::Mat::Zero(1, v[0].cols());
    for (const auto& x : v) m += x;
    mean[k] = m / static_cast<float>(v.size());
  }
  int nearest = 0, total = 0;
  for (auto& [k, v] : byClass)
    for (const auto& x : v) {
      int best = -1;
      float bestDistance = 0;
      for (auto& [j, m] : mean) {
        const float d = (x - m).squaredNorm();
        if (best < 0 || d < bestDistance) best = j, bestDistance = d;
      }
      nearest += best == k ? 1 : 0;
      ++total;
    }
  EXPECT_GT(static_cast<double>(nearest) / total, 0.5);
}

fs::path tempFile(const std::string& name) { return fs::temp_directory_path() / ("ipu_image_test_" + std::to_string(::getpid()) + "_" + name); }

emu::ImageSet sampleSet(int records) {
  emu::ImageSet s;
  s.channels = 3;
  s.height = s.width = 32;
  s.classes = 6;
  for (int r = 0; r < records; ++r) {
    s.labels.push_back(r % 6);
    for (std::size_t j = 0; j < s.pixelsPerImage(); ++j) s.pixels.push_back(static_cast<std::uint8_t>((r * 31 + static_cast<int>(j) * 7) % 256));
  }
  return s;
}

TEST(ImageFiles, RoundTripAndTrainingReadsTheTrainingRecords) {
  const emu::ImageSet set = sampleSet(20);
  const fs::path p = tempFile("ok.ipuimg");
  ASSERT_TRUE(emu::writeImageFile(p.string(), set).ok());
  auto loaded = emu::loadImageFile(p.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ((*loaded)->labels, set.labels);
  EXPECT_EQ((*loaded)->pixels, set.pixels);
  EXPECT_EQ(fs::file_size(p), 28u + 20u * (4u + 3u * 1024u));

  const ir::PhasePlan ph = phaseOf(script(kTiny));
  emu::TrainerSettings ts;
  ts.seed = 3;
  ts.images = *loaded;
  auto t = emu::PhaseTrainer::create(ph, ts, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message;
  // Every sample is one of the file's training records (every tenth is held
  // out), its pixels v read as (v / 255 - 0.5) / 0.25, with the record's label.
  for (const auto& mb : (*t)->batches(0))
    for (int i = 0; i < mb.samples; ++i) {
      int found = -1;
      for (int r = 0; r < 20 && found < 0; ++r) {
        bool same = true;
        for (Eigen::Index j = 0; j < mb.features.cols() && same; ++j)
          same = std::abs(mb.features(i, j) - (set.pixels[static_cast<std::size_t>(r) * 3072 + static_cast<std::size_t>(j)] / 255.0f - 0.5f) / 0.25f) < 1e-5f;
        if (same) found = r;
      }
      ASSERT_GE(found, 0);
      EXPECT_NE(found % 10, 9) << "a held-out record in training";
      EXPECT_EQ(mb.classLabel[static_cast<std::size_t>(i)], set.labels[static_cast<std::size_t>(found)]);
    }
  ASSERT_TRUE((*t)->step().ok());
  // A file whose images do not fit the model is refused, saying why.
  emu::ImageSet wrong = set;
  wrong.classes = 7;
  ts.images = std::make_shared<const emu::ImageSet>(wrong);
  auto refused = emu::PhaseTrainer::create(ph, ts, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "IPU5011");
  EXPECT_NE(refused.error().message.find("7 classes"), std::string::npos) << refused.error().message;
  fs::remove(p);
}

TEST(ImageFiles, DamagedFilesAreRefusedWithTheirByteOffset) {
  const std::string good = emu::encodeImageFile(sampleSet(12));
  struct Case {
    std::string name, bytes, needle;
  };
  std::string badLabel = good;
  badLabel[28 + 3 * (4 + 3072)] = 9;  // record 3's label
  std::string zeroChannels = good;
  zeroChannels[8] = 0;
  std::string badMagic = good;
  badMagic[3] = 'X';
  const std::vector<Case> cases = {
      {"empty", "", "magic"},
      {"magic only", good.substr(0, 8), "header is truncated"},
      {"bad magic", badMagic, "magic"},
      {"truncated mid-record", good.substr(0, good.size() - 100), "record 11 of 12 is cut off"},
      {"truncated in the header", good.substr(0, 20), "byte 20"},
      {"trailing bytes", good + "xyz", "3 bytes follow"},
      {"label out of range", badLabel, "record 3 has label 9"},
      {"no channels", zeroChannels, "channels is 0"},
  };
  for (const auto& c : cases) {
    auto r = emu::parseImageFile(c.bytes, "pics.ipuimg");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.error().code, "IPU5011") << c.name;
    EXPECT_NE(r.error().message.find("pics.ipuimg"), std::string::npos) << c.name;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << c.name << ": " << r.error().message;
  }
  // Every prefix of a good file is refused (none crashes or is accepted).
  for (std::size_t n = 0; n < good.size(); n += 97) EXPECT_FALSE(emu::parseImageFile(good.substr(0, n), "p").ok()) << n;
  EXPECT_TRUE(emu::parseImageFile(good, "p").ok());
  // A path that is not a file is a dataset error, not a damaged file.
  auto dir = emu::loadImageFile(fs::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code, "IPU5004");
}

}  // namespace
}  // namespace ipu::emutest
