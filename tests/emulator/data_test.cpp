// BERT sentence pairs, checked on a corpus where every word is unique and
// numbered in text order: a token then says exactly where in the text it came
// from, so "B is the sentence that follows A" is a property the test can read
// off the tokens. (This caught a sampler that, at short sequence lengths,
// turned A's own last token into B and labelled it either way.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/emulator/data.h"
#include "runtime/emulator/model.h"
#include "tests/emulator/emulator_test_support.h"

namespace ipu::emutest {
namespace {

namespace fs = std::filesystem;

constexpr int kSentencesPerDocument = 32;  // how the loader cuts documents (data.cpp)

struct NumberedCorpus {
  fs::path dir;
  std::vector<int> documentOf;  // word number -> document
  int words = 0;
};

// Sentences of 3 to 9 words "w<n>", one paragraph each (a blank line ends a
// sentence), so that no token but the words exists.
NumberedCorpus writeCorpus(int documents) {
  NumberedCorpus c;
  c.dir = fs::temp_directory_path() / ("ipu_data_test_" + std::to_string(::getpid()));
  fs::create_directories(c.dir);
  std::ofstream out(c.dir / "text.txt");
  for (int d = 0; d < documents; ++d)
    for (int s = 0; s < kSentencesPerDocument; ++s) {
      const int len = 3 + (d * 7 + s * 5) % 7;
      for (int k = 0; k < len; ++k) {
        out << (k ? " w" : "w") << c.words++;
        c.documentOf.push_back(d);
      }
      out << "\n\n";
    }
  return c;
}

struct Pair {
  std::vector<int> a, b;  // word numbers
  bool next = false;
};

// The word's number; -1 for a held-out word, which the training vocabulary
// does not know ([UNK]).
int wordNumber(const emu::TextCorpus& corpus, int id) {
  if (id == emu::Vocabulary::kUnk) return -1;
  const std::string& w = corpus.vocab.words.at(static_cast<std::size_t>(id));
  EXPECT_EQ(w[0], 'w') << "a token that is not a corpus word: " << w;
  return w[0] == 'w' ? std::stoi(w.substr(1)) : -1;
}

std::vector<Pair> pairsOf(const emu::MicroBatch& mb, const emu::TextCorpus& corpus) {
  std::vector<int> tokens = mb.tokens;
  for (std::size_t i = 0; i < mb.maskedRow.size(); ++i)
    tokens[static_cast<std::size_t>(mb.maskedRow[i])] = mb.maskedLabel[i];  // undo the masking
  std::vector<Pair> pairs;
  for (std::size_t k = 0; k < mb.classifiedRow.size(); ++k) {
    std::size_t i = static_cast<std::size_t>(mb.classifiedRow[k]);
    EXPECT_EQ(tokens[i], emu::Vocabulary::kCls);
    Pair p;
    p.next = mb.classLabel[k] == 1;
    for (++i; tokens[i] != emu::Vocabulary::kSep; ++i) p.a.push_back(wordNumber(corpus, tokens[i]));
    for (++i; tokens[i] != emu::Vocabulary::kSep; ++i) {
      EXPECT_EQ(mb.segments[i], 1);
      p.b.push_back(wordNumber(corpus, tokens[i]));
    }
    pairs.push_back(std::move(p));
  }
  return pairs;
}

bool contiguous(const std::vector<int>& w) {
  for (std::size_t i = 1; i < w.size(); ++i)
    if (w[i] != w[i - 1] + 1) return false;
  return true;
}

class BertPairs : public ::testing::TestWithParam<int> {};

TEST_P(BertPairs, NextContinuesAAndNotNextComesFromElsewhere) {
  const int seq = GetParam();
  NumberedCorpus text = writeCorpus(40);
  auto corpus = emu::loadCorpus(text.dir.string(), 1 << 20);
  fs::remove_all(text.dir);
  ASSERT_TRUE(corpus.ok()) << corpus.error().message;
  auto model = emu::Model::build(phaseOf(TinyBert{}.script()));
  ASSERT_TRUE(model.ok());
  emu::SampleSettings settings;
  settings.key = 11;
  settings.seqLen = seq;
  settings.maskedTokens = std::max(1, seq / 8);
  emu::SampleSource source(model.value(), corpus.value(), settings);

  for (bool heldOut : {false, true}) {
    emu::MicroBatch mb = source.make(0, 1500, heldOut);
    std::vector<Pair> pairs = pairsOf(mb, *corpus.value());
    ASSERT_EQ(pairs.size(), 1500u);
    int next = 0;
    for (const Pair& p : pairs) {
      ASSERT_FALSE(p.a.empty());
      // Sentences have at least 3 words and B is at least one whole sentence
      // before truncation, which leaves B the longer part of the room.
      ASSERT_GE(p.b.size(), 2u) << "seq " << seq;
      // Held-out words are [UNK] to the training vocabulary: only the
      // training stream shows where its tokens came from.
      if (heldOut) {
        next += p.next ? 1 : 0;
        continue;
      }
      EXPECT_TRUE(contiguous(p.a)) << "seq " << seq;
      EXPECT_TRUE(contiguous(p.b)) << "seq " << seq;
      const int docA = text.documentOf[static_cast<std::size_t>(p.a.back())];
      const int docB = text.documentOf[static_cast<std::size_t>(p.b.front())];
      if (p.next) {
        ++next;
        EXPECT_EQ(p.b.front(), p.a.back() + 1) << "a `next` B must start where A ends (seq " << seq << ")";
        EXPECT_EQ(docA, docB);
      } else {
        EXPECT_NE(p.b.front(), p.a.back() + 1) << "a `not next` B continues A (seq " << seq << ")";
        EXPECT_NE(docA, docB) << "`not next` B from A's own document";
      }
    }
    EXPECT_GT(next, 0.40 * 1500) << "seq " << seq;
    EXPECT_LT(next, 0.60 * 1500) << "seq " << seq;
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceLengths, BertPairs, ::testing::Values(16, 32, 128));

}  // namespace
}  // namespace ipu::emutest
