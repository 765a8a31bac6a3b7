// The data an emulated training consumes: a text corpus split into a training
// and a held-out part, a word-level vocabulary built from the training part,
// and samples made from it the way BERT and GPT pre-training makes them
// (sentence pairs with masking and next-sentence labels; windows of text with
// next-token labels), or synthetic features for an MLP.
//
// Every sample is a pure function of (seed, phase, sample index): the global
// batch of step n is samples [n * global_batch, (n + 1) * global_batch), cut
// into micro batches in order, whatever the mapping. So any mapping sees the
// same data, and a resumed run continues with exactly the samples it would
// have seen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/emulator/error.h"
#include "runtime/emulator/image_file.h"
#include "runtime/emulator/kernels/kernel.h"
#include "runtime/emulator/model.h"

namespace ipu::emu {

struct Vocabulary {
  static constexpr int kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4, kFirstWord = 5;
  std::vector<std::string> words;               // id -> word, the 5 specials first
  std::unordered_map<std::string, int> ids;
  int id(const std::string& w) const;
  int size() const { return static_cast<int>(words.size()); }
};

// Lower-cased words (letters, digits, inner apostrophes) and single punctuation marks.
std::vector<std::string> tokenizeWords(const std::string& text);

struct Document {
  std::vector<std::vector<int>> sentences;
};

struct TextCorpus {
  std::string source;                 // what was read
  Vocabulary vocab;
  std::vector<Document> train, heldOut;
  std::vector<int> trainStream;       // training tokens in order, documents separated by [SEP] (GPT windows)
  std::vector<int> heldOutStream;
  int majorityToken = Vocabulary::kUnk;  // most frequent token of the training part (the baseline's guess)
  double trainTokens = 0;
};

// Read `path` (a .txt file, or a directory whose .txt files are read in name
// order), split it into documents of about 32 sentences, hold out every tenth
// document, and build a vocabulary of at most `vocabSize` entries from the
// training part. Errors are IPU5004.
Expected<std::shared_ptr<const TextCorpus>> loadCorpus(const std::string& path, int vocabSize);

struct SampleSettings {
  std::uint64_t key = 0;        // the phase's data stream (seed and phase)
  std::uint64_t taskKey = 0;    // the run's synthetic task (seed only: every phase learns the same task)
  int seqLen = 0;
  int maskedTokens = 0;         // per sample (a pack counts as one sample)
  double maskProbability = 0.15;
  bool packing = false;
  double sequencesPerPack = 1;
  double labelSmoothing = 0;    // copied into every micro batch (classifier losses)
};

// Makes micro batches of samples for a model family.
class SampleSource {
 public:
  // `images`: the image file of an image model (null: synthetic images).
  SampleSource(std::shared_ptr<const Model> model, std::shared_ptr<const TextCorpus> corpus, SampleSettings settings,
               std::shared_ptr<const ImageSet> images = nullptr);
  // Samples [first, first + count) of the training stream (heldOut: of the held-out stream).
  MicroBatch make(long long first, int count, bool heldOut = false) const;
  // Set the global-batch counts on every micro batch of a step.
  static void normalise(std::vector<MicroBatch*>& batches);
  const TextCorpus* corpus() const { return corpus_.get(); }
  // The majority baseline's guess: the token (or class) it always predicts.
  int majorityLabel() const;

 private:
  void bertSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const;
  void gptSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const;
  void mlpSample(std::uint64_t key, MicroBatch& mb, int b) const;
  void imageSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const;
  int imageLabel(std::uint64_t key, bool heldOut) const;

  std::shared_ptr<const Model> model_;
  std::shared_ptr<const TextCorpus> corpus_;
  SampleSettings s_;
  Mat teacher_;  // the MLP task: label = argmax(features * teacher)
  Mat prototypes_;  // synthetic images: one image per class (classes x C*H*W)
  std::shared_ptr<const ImageSet> images_;
  std::vector<std::size_t> trainRecords_, heldOutRecords_;  // of images_
};

}  // namespace ipu::emu
