#include "runtime/emulator/data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "runtime/emulator/counter_rng.h"
#include "runtime/files/regular_file.h"

namespace ipu::emu {

namespace {

constexpr int kSentencesPerDocument = 32;
constexpr int kHeldOutEvery = 10;       // document i is held out when i % 10 == 9
constexpr std::size_t kMaxSentence = 48;
constexpr int kBlobsPerClass = 3;
constexpr int kMaxShift = 3;             // synthetic images move by up to 3 pixels each way
constexpr double kImageNoise = 1.0;      // standard deviation of the synthetic images' pixel noise
// Image file pixels v in 0..255 enter as (v / 255 - 0.5) / 0.25: about zero
// mean and unit spread for natural images.
constexpr float kPixelScale = 1.0f / (255.0f * 0.25f);
constexpr float kPixelShift = 0.5f / 0.25f;

bool wordChar(unsigned char c) { return std::isalnum(c) != 0 || c >= 0x80; }

std::vector<std::string> sentencesOf(const std::vector<std::string>& words, std::vector<std::vector<std::string>>& out) {
  std::vector<std::string> cur;
  for (const auto& w : words) {
    cur.push_back(w);
    if (w == "." || w == "!" || w == "?" || cur.size() >= kMaxSentence) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  return cur;  // an unterminated tail
}

}  // namespace

int Vocabulary::id(const std::string& w) const {
  auto it = ids.find(w);
  return it == ids.end() ? kUnk : it->second;
}

std::vector<std::string> tokenizeWords(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c) != 0) {
      ++i;
      continue;
    }
    if (wordChar(c)) {
      std::string w;
      while (i < n) {
        const unsigned char d = static_cast<unsigned char>(text[i]);
        if (wordChar(d)) {
          w.push_back(static_cast<char>(std::tolower(d)));
          ++i;
        } else if (d == '\'' && i + 1 < n && wordChar(static_cast<unsigned char>(text[i + 1])) && !w.empty()) {
          w.push_back('\'');
          ++i;
        } else {
          break;
        }
      }
      out.push_back(std::move(w));
      continue;
    }
    out.emplace_back(1, static_cast<char>(c));
    ++i;
  }
  return out;
}

Expected<std::shared_ptr<const TextCorpus>> loadCorpus(const std::string& path, int vocabSize) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  }
  if (files.empty())
    return Error{code::kDataset, "no text to read at `" + path + "`", "give a .txt file or a directory of .txt files", {}};

  // Documents of words, in file order; paragraphs (blank lines) end sentences too.
  std::vector<std::vector<std::vector<std::string>>> docs;
  for (const auto& f : files) {
    // Through the one safe reader: a FIFO or device named `x.txt` in the
    // dataset directory is refused, never waited on.
    files::ReadResult read = files::readRegularFile(f.string(), std::uint64_t{1} << 34);
    if (!read.ok()) return Error{code::kDataset, read.describe(f.string()), "give a .txt file or a directory of .txt files", {}};
    std::istringstream in(std::move(read.text));
    std::vector<std::vector<std::string>> sentences;
    std::string line, paragraph;
    auto flush = [&]() {
      auto tail = sentencesOf(tokenizeWords(paragraph), sentences);
      if (!tail.empty()) sentences.push_back(std::move(tail));
      paragraph.clear();
    };
    while (std::getline(in, line)) {
      bool blank = std::all_of(line.begin(), line.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
      if (blank) {
        flush();
      } else {
        paragraph += line;
        paragraph += ' ';
      }
    }
    flush();
    for (std::size_t i = 0; i < sentences.size(); i += kSentencesPerDocument) {
      std::vector<std::vector<std::string>> d(sentences.begin() + static_cast<std::ptrdiff_t>(i),
                                              sentences.begin() + static_cast<std::ptrdiff_t>(std::min(sentences.size(), i + kSentencesPerDocument)));
      docs.push_back(std::move(d));
    }
  }
  auto corpus = std::make_shared<TextCorpus>();
  corpus->source = path;
  std::map<std::string, long long> counts;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    if (static_cast<int>(i % kHeldOutEvery) == kHeldOutEvery - 1) continue;
    for (const auto& s : docs[i])
      for (const auto& w : s) ++counts[w];
  }
  std::vector<std::pair<std::string, long long>> ranked(counts.begin(), counts.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  Vocabulary& v = corpus->vocab;
  v.words = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (const auto& [w, c] : ranked) {
    if (static_cast<int>(v.words.size()) >= vocabSize) break;
    v.words.push_back(w);
  }
  for (std::size_t i = 0; i < v.words.size(); ++i) v.ids[v.words[i]] = static_cast<int>(i);

  std::vector<long long> tokenCounts(v.words.size(), 0);
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const bool held = static_cast<int>(i % kHeldOutEvery) == kHeldOutEvery - 1;
    Document d;
    for (const auto& s : docs[i]) {
      std::vector<int> ids;
      for (const auto& w : s) ids.push_back(v.id(w));
      if (!held)
        for (int id : ids) ++tokenCounts[static_cast<std::size_t>(id)];
      d.sentences.push_back(std::move(ids));
    }
    auto& stream = held ? corpus->heldOutStream : corpus->trainStream;
    for (const auto& s : d.sentences) stream.insert(stream.end(), s.begin(), s.end());
    stream.push_back(Vocabulary::kSep);
    (held ? corpus->heldOut : corpus->train).push_back(std::move(d));
  }
  corpus->majorityToken = static_cast<int>(std::max_element(tokenCounts.begin(), tokenCounts.end()) - tokenCounts.begin());
  for (long long c : tokenCounts) corpus->trainTokens += static_cast<double>(c);
  if (corpus->train.size() < 2 || corpus->heldOut.empty() || corpus->trainTokens < 1000)
    return Error{code::kDataset, "`" + path + "` holds too little text (" + std::to_string(static_cast<long long>(corpus->trainTokens)) + " training tokens)",
                 "the emulator needs at least 1,000 tokens and 10 documents of about 32 sentences", {}};
  return std::shared_ptr<const TextCorpus>(corpus);
}

SampleSource::SampleSource(std::shared_ptr<const Model> model, std::shared_ptr<const TextCorpus> corpus, SampleSettings settings,
                           std::shared_ptr<const ImageSet> images)
    : model_(std::move(model)), corpus_(std::move(corpus)), s_(settings), images_(std::move(images)) {
  if (model_->family() == Family::Mlp) {
    teacher_.resize(model_->features(), model_->classes());
    Stream st(subKey(s_.taskKey, 0x7EAC4E5ULL));
    for (Eigen::Index i = 0; i < teacher_.size(); ++i) teacher_.data()[i] = static_cast<float>(st.normal());
  }
  if (model_->family() == Family::Image && images_ != nullptr) {
    for (std::size_t r = 0; r < images_->count(); ++r)
      (static_cast<int>(r % kHeldOutEvery) == kHeldOutEvery - 1 ? heldOutRecords_ : trainRecords_).push_back(r);
  } else if (model_->family() == Family::Image) {
    // Each class is a few coloured Gaussian blobs at fixed places: learnable
    // by a small network, yet hidden under shifts, contrast and noise.
    const int C = model_->imageChannels(), S = model_->imageSize();
    prototypes_ = Mat::Zero(model_->classes(), model_->features());
    Stream st(subKey(s_.taskKey, 0x1A6EULL));
    for (int k = 0; k < model_->classes(); ++k)
      for (int blob = 0; blob < kBlobsPerClass; ++blob) {
        const double cy = S * (0.2 + 0.6 * st.uniform()), cx = S * (0.2 + 0.6 * st.uniform());
        const double sigma = S * (0.08 + 0.12 * st.uniform());
        std::vector<double> colour(static_cast<std::size_t>(C));
        for (auto& c : colour) c = st.normal();
        for (int c = 0; c < C; ++c)
          for (int y = 0; y < S; ++y)
            for (int x = 0; x < S; ++x) {
              const double d2 = (y - cy) * (y - cy) + (x - cx) * (x - cx);
              prototypes_(k, (static_cast<Eigen::Index>(c) * S + y) * S + x) +=
                  static_cast<float>(colour[static_cast<std::size_t>(c)] * std::exp(-d2 / (2 * sigma * sigma)));
            }
      }
  }
}

int SampleSource::majorityLabel() const {
  if (model_->family() != Family::Mlp && model_->family() != Family::Image) return corpus_->majorityToken;
  std::vector<int> counts(static_cast<std::size_t>(model_->classes()), 0);
  if (model_->family() == Family::Image) {
    // Labels only: 4096 images would be large.
    for (long long i = 0; i < 4096; ++i) ++counts[static_cast<std::size_t>(imageLabel(subKey(s_.key, static_cast<std::uint64_t>(i)), false))];
    return static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  }
  MicroBatch mb = make(0, 4096);
  for (int c : mb.classLabel) ++counts[static_cast<std::size_t>(c)];
  return static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
}

MicroBatch SampleSource::make(long long first, int count, bool heldOut) const {
  MicroBatch mb;
  mb.samples = count;
  const std::uint64_t stream = heldOut ? subKey(s_.key, 0xE7A1ULL) : s_.key;
  mb.labelSmoothing = s_.labelSmoothing;
  if (model_->family() == Family::Mlp || model_->family() == Family::Image) {
    mb.features.resize(count, model_->features());
    for (int b = 0; b < count; ++b) {
      const std::uint64_t key = subKey(stream, static_cast<std::uint64_t>(first + b));
      if (model_->family() == Family::Mlp) mlpSample(key, mb, b);
      else imageSample(key, heldOut, mb, b);
    }
    mb.classCount = count;
    if (const int tokens = model_->imageTokens(); tokens > 0) {
      // A ViT's rows are each image's tokens; every token sees its whole image.
      mb.seq = tokens;
      mb.sequenceIds.assign(static_cast<std::size_t>(count) * static_cast<std::size_t>(tokens), 0);
    }
    return mb;
  }
  const int S = s_.seqLen;
  mb.seq = S;
  const std::size_t n = static_cast<std::size_t>(count) * static_cast<std::size_t>(S);
  mb.tokens.assign(n, Vocabulary::kPad);
  mb.segments.assign(n, 0);
  mb.positions.assign(n, 0);
  mb.sequenceIds.assign(n, -1);
  for (int b = 0; b < count; ++b) {
    const std::uint64_t key = subKey(stream, static_cast<std::uint64_t>(first + b));
    if (model_->family() == Family::Bert)
      bertSample(key, heldOut, mb, b);
    else
      gptSample(key, heldOut, mb, b);
  }
  std::vector<MicroBatch*> one{&mb};
  normalise(one);
  return mb;
}

void SampleSource::normalise(std::vector<MicroBatch*>& batches) {
  double mlm = 0, cls = 0, lm = 0;
  for (const MicroBatch* mb : batches) {
    mlm += static_cast<double>(mb->maskedLabel.size());
    cls += static_cast<double>(mb->classLabel.size());
    for (int t : mb->nextToken) lm += t >= 0 ? 1 : 0;
  }
  for (MicroBatch* mb : batches) {
    mb->mlmCount = std::max(1.0, mlm);
    mb->classCount = std::max(1.0, cls);
    mb->lmCount = std::max(1.0, lm);
  }
}

void SampleSource::bertSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const {
  const auto& docs = heldOut ? corpus_->heldOut : corpus_->train;
  const int vocab = corpus_->vocab.size();
  Stream rng(key);
  const int S = s_.seqLen;
  const int packs = s_.packing ? std::max(1, static_cast<int>(std::lround(s_.sequencesPerPack))) : 1;
  const std::size_t base = static_cast<std::size_t>(b) * static_cast<std::size_t>(S);
  int cursor = 0;
  int budget = s_.maskedTokens;
  for (int k = 0; k < packs; ++k) {
    const int room = k == packs - 1 ? S - cursor : S / packs;
    if (room < 5) break;
    const int target = room - 3;
    // Sentence A is whole sentences from a random point of a document, up to
    // about half the room, but always leaving the document's next sentence
    // for B when there is one. B is whole sentences: the ones that follow A
    // ("next", half of the time when A has a successor) or ones from another
    // document ("not next"), so that the label is a property of the text.
    const std::size_t di = static_cast<std::size_t>(rng.below(docs.size()));
    const Document& doc = docs[di];
    const std::size_t n = doc.sentences.size();
    const std::size_t aFirst = static_cast<std::size_t>(rng.below(n));
    std::size_t si = aFirst;
    std::vector<int> a, bseg;
    a.insert(a.end(), doc.sentences[si].begin(), doc.sentences[si].end());
    ++si;
    while (static_cast<int>(a.size()) < target / 2 && si + 1 < n) {
      a.insert(a.end(), doc.sentences[si].begin(), doc.sentences[si].end());
      ++si;
    }
    const bool isNext = rng.uniform() < 0.5 && si < n;
    auto appendFrom = [&](const Document& d, std::size_t from, std::size_t stop) {
      // At least one sentence, then more while they fit.
      for (std::size_t j = from; j < stop; ++j) {
        if (j > from && static_cast<int>(a.size() + bseg.size()) >= target) break;
        bseg.insert(bseg.end(), d.sentences[j].begin(), d.sentences[j].end());
      }
    };
    if (isNext) {
      appendFrom(doc, si, n);
    } else if (docs.size() > 1) {
      std::size_t dj = static_cast<std::size_t>(rng.below(docs.size() - 1));
      if (dj >= di) ++dj;  // uniform over the other documents
      const Document& other = docs[dj];
      appendFrom(other, static_cast<std::size_t>(rng.below(other.sentences.size())), other.sentences.size());
    } else {
      // One document only: B from anywhere but A and the sentence after it.
      std::vector<std::size_t> allowed;
      for (std::size_t j = 0; j < n; ++j)
        if (j < aFirst || j > si) allowed.push_back(j);
      if (!allowed.empty()) {
        const std::size_t j = allowed[static_cast<std::size_t>(rng.below(allowed.size()))];
        appendFrom(doc, j, j + 1);
      }
    }
    if (bseg.empty()) bseg.push_back(Vocabulary::kUnk);
    if (a.empty()) a.push_back(Vocabulary::kUnk);
    // Truncate the longer segment until the pair fits: A from its start and
    // B from its end, so that a "next" B still starts where A ends. Both keep
    // at least one token (target >= 2).
    std::size_t aDrop = 0;
    while (static_cast<int>(a.size() - aDrop + bseg.size()) > target) {
      if ((a.size() - aDrop > bseg.size() && a.size() - aDrop > 1) || bseg.size() <= 1) ++aDrop;
      else bseg.pop_back();
    }
    a.erase(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(aDrop));
    // [CLS] A [SEP] B [SEP]
    std::vector<int> toks{Vocabulary::kCls};
    toks.insert(toks.end(), a.begin(), a.end());
    toks.push_back(Vocabulary::kSep);
    const std::size_t bStart = toks.size();
    toks.insert(toks.end(), bseg.begin(), bseg.end());
    toks.push_back(Vocabulary::kSep);
    const std::size_t start = base + static_cast<std::size_t>(cursor);
    for (std::size_t i = 0; i < toks.size(); ++i) {
      mb.tokens[start + i] = toks[i];
      mb.segments[start + i] = i >= bStart ? 1 : 0;
      mb.positions[start + i] = static_cast<int>(i);
      mb.sequenceIds[start + i] = k;
    }
    mb.classifiedRow.push_back(static_cast<int>(start));
    mb.classLabel.push_back(isNext ? 1 : 0);
    // Masking: choose positions of real words, then 80% [MASK], 10% random word, 10% unchanged.
    std::vector<int> candidates;
    for (std::size_t i = 0; i < toks.size(); ++i)
      if (toks[i] != Vocabulary::kCls && toks[i] != Vocabulary::kSep) candidates.push_back(static_cast<int>(i));
    const int share = k == packs - 1 ? budget : std::min(budget, static_cast<int>(std::lround(s_.maskedTokens * static_cast<double>(room) / S)));
    const int want = std::max(1, static_cast<int>(std::lround(static_cast<double>(candidates.size()) * s_.maskProbability)));
    const int count = std::min({share, want, static_cast<int>(candidates.size())});
    for (int i = 0; i < count; ++i) {
      const std::size_t j = static_cast<std::size_t>(i) + static_cast<std::size_t>(rng.below(candidates.size() - static_cast<std::size_t>(i)));
      std::swap(candidates[static_cast<std::size_t>(i)], candidates[j]);
    }
    std::sort(candidates.begin(), candidates.begin() + count);
    for (int i = 0; i < count; ++i) {
      const std::size_t row = start + static_cast<std::size_t>(candidates[static_cast<std::size_t>(i)]);
      mb.maskedRow.push_back(static_cast<int>(row));
      mb.maskedLabel.push_back(mb.tokens[row]);
      const double u = rng.uniform();
      if (u < 0.8) mb.tokens[row] = Vocabulary::kMask;
      else if (u < 0.9) mb.tokens[row] = Vocabulary::kFirstWord + static_cast<int>(rng.below(static_cast<std::uint64_t>(std::max(1, vocab - Vocabulary::kFirstWord))));
    }
    budget -= count;
    cursor += static_cast<int>(toks.size());
  }
}

void SampleSource::gptSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const {
  const auto& stream = heldOut ? corpus_->heldOutStream : corpus_->trainStream;
  Stream rng(key);
  const int S = s_.seqLen;
  const std::size_t span = stream.size() > static_cast<std::size_t>(S) + 1 ? stream.size() - static_cast<std::size_t>(S) - 1 : 1;
  const std::size_t start = static_cast<std::size_t>(rng.below(span));
  const std::size_t base = static_cast<std::size_t>(b) * static_cast<std::size_t>(S);
  if (mb.nextToken.size() < mb.tokens.size()) mb.nextToken.assign(mb.tokens.size(), -1);
  for (int i = 0; i < S; ++i) {
    const std::size_t at = start + static_cast<std::size_t>(i);
    const std::size_t row = base + static_cast<std::size_t>(i);
    mb.tokens[row] = at < stream.size() ? stream[at] : Vocabulary::kPad;
    mb.positions[row] = i;
    mb.sequenceIds[row] = 0;
    mb.nextToken[row] = at + 1 < stream.size() ? stream[at + 1] : -1;
  }
}

void SampleSource::mlpSample(std::uint64_t key, MicroBatch& mb, int b) const {
  Stream rng(key);
  for (Eigen::Index j = 0; j < mb.features.cols(); ++j) mb.features(b, j) = static_cast<float>(rng.normal());
  Eigen::Index label = 0;
  (mb.features.row(b) * teacher_).maxCoeff(&label);
  mb.classifiedRow.push_back(b);
  mb.classLabel.push_back(static_cast<int>(label));
}

int SampleSource::imageLabel(std::uint64_t key, bool heldOut) const {
  Stream rng(key);
  if (images_ == nullptr) return static_cast<int>(rng.below(static_cast<std::uint64_t>(model_->classes())));
  const auto& records = heldOut ? heldOutRecords_ : trainRecords_;
  return images_->labels[records[static_cast<std::size_t>(rng.below(records.size()))]];
}

void SampleSource::imageSample(std::uint64_t key, bool heldOut, MicroBatch& mb, int b) const {
  // The first draw of the sample's stream chooses its class or record (imageLabel replays it).
  Stream rng(key);
  const auto row = static_cast<Eigen::Index>(b);
  int label = 0;
  if (images_ != nullptr) {
    // A record drawn from the file's training (or held-out) part.
    const auto& records = heldOut ? heldOutRecords_ : trainRecords_;
    const std::size_t r = records[static_cast<std::size_t>(rng.below(records.size()))];
    const std::size_t n = images_->pixelsPerImage();
    const std::uint8_t* px = images_->pixels.data() + r * n;
    for (std::size_t j = 0; j < n; ++j) mb.features(row, static_cast<Eigen::Index>(j)) = static_cast<float>(px[j]) * kPixelScale - kPixelShift;
    label = images_->labels[r];
  } else {
    // The class's prototype, shifted, scaled in contrast, plus noise.
    const int C = model_->imageChannels(), S = model_->imageSize();
    label = static_cast<int>(rng.below(static_cast<std::uint64_t>(model_->classes())));
    const int dy = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
    const int dx = static_cast<int>(rng.below(2 * kMaxShift + 1)) - kMaxShift;
    const double contrast = 0.7 + 0.6 * rng.uniform();
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
          const int sy = y - dy, sx = x - dx;
          const double v = sy >= 0 && sy < S && sx >= 0 && sx < S
                               ? prototypes_(label, (static_cast<Eigen::Index>(c) * S + sy) * S + sx)
                               : 0.0f;
          mb.features(row, (static_cast<Eigen::Index>(c) * S + y) * S + x) = static_cast<float>(contrast * v + kImageNoise * rng.normal());
        }
  }
  mb.classifiedRow.push_back(b);
  mb.classLabel.push_back(label);
}

}  // namespace ipu::emu
